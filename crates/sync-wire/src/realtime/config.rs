//! The limits of the realtime channel.

use std::time::Duration;

/// Limits and intervals of realtime connections (SSP2 §8); every one is a
/// bound on what a client or a burst of commits can make a server hold.
#[derive(Debug, Clone)]
pub struct RealtimeConfig {
    /// Open connections per process; an upgrade past it is refused 503.
    pub max_connections: usize,
    /// Open connections per actor in one partition; refused 429 past it.
    pub max_connections_per_actor: usize,
    /// Deltas sent without an ack before the connection falls back to a
    /// `catchup-required` wake-up.
    pub max_unacked_deltas: u32,
    /// Changes in one delta; a larger one becomes `delta-too-large`.
    pub max_delta_changes: i64,
    /// Bytes of one delta message; a larger one becomes `delta-too-large`.
    pub max_message_bytes: usize,
    /// Messages queued for one socket; past it the connection falls back
    /// to a wake-up, so a slow socket never slows a push or another socket.
    pub send_queue_messages: usize,
    /// How often a `heartbeat` is sent (§8.5).
    pub heartbeat_interval: Duration,
    /// Bytes of one presence document (§8.6).
    pub max_presence_doc_bytes: usize,
    /// Bytes of a socket round's request (as `POST /sync`'s body limit).
    pub max_request_bytes: usize,
}

/// 10 000 connections, 32 per actor, 64 unacked deltas, 1 000 changes and
/// 1 MiB per delta, 256 queued messages, a heartbeat every 30 s, 8 KiB
/// presence documents, 32 MiB requests.
impl Default for RealtimeConfig {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_connections_per_actor: 32,
            max_unacked_deltas: 64,
            max_delta_changes: 1_000,
            max_message_bytes: 1 << 20,
            send_queue_messages: 256,
            heartbeat_interval: Duration::from_secs(30),
            max_presence_doc_bytes: 8 * 1024,
            max_request_bytes: 32 << 20,
        }
    }
}
