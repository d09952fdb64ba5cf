//! Limits of the HTTP adapter.

use std::time::Duration;

/// Default largest request body, after gzip decoding: 32 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Default longest wait for a client to take the next response chunk: 30 s.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// The limits of [`crate::router`].
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Largest `POST /sync` body, counted after gzip decoding (a larger one
    /// is refused with 413 `sync.invalid_request`).
    pub max_body_bytes: usize,
    /// Rounds (and segment downloads) running at once; later requests wait
    /// for a slot. Set it to the storage pool's connection count so a
    /// round never waits for a connection inside the engine.
    pub max_concurrent_rounds: usize,
    /// How long a round waits for the client to take the next chunk of its
    /// response; past it the round's sink fails, the engine stops before
    /// its next unit of work and the connection goes back to the pool. The
    /// client sees a truncated response.
    pub send_timeout: Duration,
    /// Response chunks buffered between the round and the client.
    pub channel_chunks: usize,
    /// Bytes gathered into one response chunk before it is handed over.
    pub chunk_bytes: usize,
}

impl Default for HttpConfig {
    /// 32 MiB bodies, 8 rounds at once, 30 s send timeout, 16 chunks of
    /// 64 KiB in flight (at most 1 MiB of response per round in memory).
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_concurrent_rounds: 8,
            send_timeout: DEFAULT_SEND_TIMEOUT,
            channel_chunks: 16,
            chunk_bytes: 64 * 1024,
        }
    }
}
