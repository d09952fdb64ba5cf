//! `GET /realtime?clientId=…` (SSP2 §8): a client's WebSocket. Control
//! messages as JSON text, deltas tagged `0x00`, socket rounds tagged
//! `0x01` in both directions, heartbeats on an interval.
//!
//! One task per socket owns it; the hub never waits on it: deltas and
//! wake-ups go through a bounded queue ([`SocketOutbox`]), and a full queue
//! turns into one owed `catchup-required` wake-up. A socket round runs on
//! the blocking pool like `POST /sync` and streams its response through a
//! bounded channel at the socket's pace.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use sync_ssp2::realtime::{parse_control_message, to_json_text, ControlMessage, WakeReason};
use sync_wire::realtime::{
    refusal_stream, wake_text, Connection, Outbox, Outgoing, RealtimeConfig, RealtimeHub,
};
use sync_wire::{RoundError, WireFailure};
use tokio::sync::{mpsc, Notify};

use crate::body::{ChannelWriter, Piece};
use crate::responses::failure;
use crate::state::SyncState;

/// Bytes read from a socket at a time.
const SOCKET_READ_BUFFER: usize = 4 * 1024;

/// The frame size a socket's write buffer is sized for at least, whatever
/// the delta cap: the default delta cap.
const MIN_FRAME_BOUND: usize = 1 << 20;

/// Channel tag of a delta (server → client).
const TAG_DELTA: u8 = 0x00;
/// Channel tag of a socket round's chunk (both directions).
const TAG_ROUND: u8 = 0x01;

/// The hub's side of one socket's queue.
struct SocketOutbox {
    tx: mpsc::Sender<Outgoing>,
    owed: AtomicBool,
    closed: AtomicBool,
    wake: Notify,
}

impl Outbox for SocketOutbox {
    fn try_send(&self, message: Outgoing) -> bool {
        self.tx.try_send(message).is_ok()
    }

    fn owe_wake(&self) {
        self.owed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

fn query_client_id(query: Option<&str>) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == "clientId").then(|| percent_decode(value))?
    })
}

/// `%XX` and `+` of a query value; `None` for a malformed escape or
/// bytes that are not UTF-8.
fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The most a socket's write buffer may hold: four of the largest frame it
/// writes. Control messages and round chunks are written whatever the
/// delta cap, so a cap below [`MIN_FRAME_BOUND`] only turns more deltas
/// into wake-ups, never makes a `hello` unwritable.
fn write_bound(config: &RealtimeConfig) -> usize {
    config
        .max_message_bytes
        .max(MIN_FRAME_BOUND)
        .saturating_mul(4)
}

fn invalid(reason: &str) -> WireFailure {
    WireFailure::from_wire_error(
        &sync_engine::WireError::new("sync.invalid_request", "invalid realtime request")
            .with_detail("reason", reason),
    )
}

pub(crate) async fn get_realtime(State(state): State<SyncState>, request: Request) -> Response {
    let Some(hub) = state.realtime.clone() else {
        return failure(&WireFailure::from_wire_error(
            &sync_engine::WireError::new("sync.not_found", "realtime is not served here")
                .with_detail("reason", "realtime_disabled"),
        ));
    };
    let (mut parts, _) = request.into_parts();
    let ctx = match state.auth.authenticate(&parts) {
        Ok(ctx) => ctx,
        Err(refusal) => return failure(&refusal),
    };
    let Some(client_id) = query_client_id(parts.uri.query()) else {
        return failure(&invalid("client_id"));
    };
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &state).await {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let (tx, rx) = mpsc::channel(hub.config().send_queue_messages.max(1));
    let outbox = Arc::new(SocketOutbox {
        tx,
        owed: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        wake: Notify::new(),
    });
    let connecting = {
        let (hub, outbox) = (hub.clone(), outbox.clone());
        tokio::task::spawn_blocking(move || {
            hub.connect(&ctx, &client_id, outbox as Arc<dyn Outbox>)
        })
        .await
    };
    let connection = match connecting {
        Ok(Ok((connection, _hello))) => connection,
        Ok(Err(refusal)) => return failure(&refusal),
        Err(_) => return failure(&invalid("internal")),
    };
    let on_failure = (hub.clone(), connection.clone());
    // Small buffers: an idle socket holds little (§8: memory per idle
    // socket is a first-class bound); every message is written at once.
    upgrade
        .read_buffer_size(SOCKET_READ_BUFFER)
        .write_buffer_size(0)
        .max_write_buffer_size(write_bound(hub.config()))
        .max_message_size(hub.config().max_request_bytes.saturating_add(1))
        .on_failed_upgrade(move |_| on_failure.0.disconnect(&on_failure.1))
        .on_upgrade(move |socket| async move {
            let session = Session {
                state,
                hub: hub.clone(),
                connection: connection.clone(),
                outbox,
                rx,
            };
            session.run(socket).await;
            hub.disconnect(&connection);
        })
}

/// The socket round in flight. Its response is sent one chunk behind:
/// the chunk ending the stream leaves only once the round is over (§8.7:
/// the round is complete at the response's `END`, and the client's next
/// request may follow at once).
struct InFlight {
    rx: mpsc::Receiver<Piece>,
    /// The wire version of the request (for a refusal stream).
    version: i32,
    /// The latest chunk, not sent until the next piece says whether it is
    /// the last.
    held: Option<Bytes>,
}

struct Session {
    state: SyncState,
    hub: Arc<RealtimeHub>,
    connection: Arc<Connection>,
    outbox: Arc<SocketOutbox>,
    rx: mpsc::Receiver<Outgoing>,
}

/// What woke the socket task.
enum Event {
    Incoming(Option<Result<Message, axum::Error>>),
    Out(Option<Outgoing>),
    Round(Option<Piece>),
    Owed,
    Heartbeat,
}

/// Why a socket is closed by the server.
enum Close {
    /// The client went away or the socket failed.
    Gone,
    /// A protocol violation (§8.7): unknown tag, bytes during a round,
    /// bytes past `END`, an unframed stream, an oversized request.
    Violation(&'static str),
}

impl Session {
    async fn run(mut self, mut socket: WebSocket) {
        let config = self.hub.config().clone();
        let mut heartbeat = tokio::time::interval(config.heartbeat_interval);
        heartbeat.tick().await;
        let mut request = Vec::new();
        let mut round: Option<InFlight> = None;
        let closed = loop {
            // The client's messages first: bytes of a second request that
            // have arrived while a round streams are seen before the
            // round's next chunk is forwarded (§8.7 pipelining), whatever
            // the round's pace.
            let event = tokio::select! {
                biased;
                incoming = socket.recv() => Event::Incoming(incoming),
                out = self.rx.recv(), if round.is_none() => Event::Out(out),
                piece = recv_round(&mut round) => Event::Round(piece),
                () = self.outbox.wake.notified() => Event::Owed,
                _ = heartbeat.tick() => Event::Heartbeat,
            };
            let result = match event {
                Event::Incoming(Some(Ok(message))) => {
                    self.incoming(message, &mut request, &mut round, config.max_request_bytes)
                        .await
                }
                Event::Incoming(_) | Event::Out(None) => Err(Close::Gone),
                Event::Out(Some(Outgoing::Text(text))) => {
                    send(&mut socket, Message::Text(text.into())).await
                }
                Event::Out(Some(Outgoing::Delta(bytes))) => {
                    send(&mut socket, tagged(TAG_DELTA, &bytes)).await
                }
                Event::Round(piece) => self.round_piece(&mut socket, piece, &mut round).await,
                Event::Owed if self.outbox.closed.load(Ordering::Acquire) => {
                    Err(Close::Violation("server_shutdown"))
                }
                Event::Owed => {
                    if self.outbox.owed.swap(false, Ordering::AcqRel) {
                        let latest = self.hub.fanned_through(&self.connection.ctx().partition);
                        let text = wake_text(latest, WakeReason::CatchupRequired, self.now_ms());
                        send(&mut socket, Message::Text(text.into())).await
                    } else {
                        Ok(())
                    }
                }
                Event::Heartbeat => {
                    let text = to_json_text(&ControlMessage::Heartbeat {
                        timestamp: self.now_ms(),
                    });
                    send(&mut socket, Message::Text(text.into())).await
                }
            };
            if let Err(close) = result {
                break close;
            }
        };
        if let Close::Violation(reason) = closed {
            tracing::debug!(
                reason,
                client = self.connection.client_id(),
                "realtime socket closed"
            );
            let _ = socket.send(Message::Close(None)).await;
        }
    }

    fn now_ms(&self) -> i64 {
        self.hub.service().config().clock.now_ms()
    }

    async fn incoming(
        &mut self,
        message: Message,
        request: &mut Vec<u8>,
        round: &mut Option<InFlight>,
        max_request_bytes: usize,
    ) -> Result<(), Close> {
        match message {
            Message::Text(text) => {
                match parse_control_message(text.as_str()) {
                    Ok(ControlMessage::Ack { cursor }) => {
                        // In place: the hub only queues the cursor for its
                        // ack writer.
                        if let Err(refusal) = self.hub.ack(&self.connection, cursor) {
                            tracing::debug!(code = refusal.code(), "realtime ack refused");
                        }
                    }
                    Ok(ControlMessage::PresencePublish(publish)) => {
                        // In order and in place: presence only takes the
                        // hub's locks (the connection's partition is known).
                        if let Err(refusal) = self.hub.publish_presence(&self.connection, publish) {
                            tracing::debug!(code = refusal.code(), "presence refused");
                        }
                    }
                    Ok(_) => {}
                    Err(malformed) => {
                        tracing::debug!(
                            code = malformed.code(),
                            "malformed control message ignored"
                        );
                    }
                }
                Ok(())
            }
            Message::Binary(bytes) => {
                let Some((&TAG_ROUND, chunk)) = bytes.split_first() else {
                    return Err(Close::Violation("unknown_channel_tag"));
                };
                if round.is_some() {
                    return Err(Close::Violation("round_in_flight"));
                }
                if request.len() + chunk.len() > max_request_bytes {
                    return Err(Close::Violation("request_too_large"));
                }
                request.extend_from_slice(chunk);
                match sync_ssp2::message_length(request) {
                    Err(_) => Err(Close::Violation("unframed_stream")),
                    Ok(None) => Ok(()),
                    Ok(Some(n)) if n != request.len() => Err(Close::Violation("bytes_past_end")),
                    Ok(Some(_)) => {
                        let body = std::mem::take(request);
                        *round = Some(self.start_round(body).await);
                        Ok(())
                    }
                }
            }
            Message::Close(_) => Err(Close::Gone),
            Message::Ping(_) | Message::Pong(_) => Ok(()),
        }
    }

    /// Runs the round on the blocking pool; its response comes back as
    /// pieces on the returned channel.
    async fn start_round(&self, body: Vec<u8>) -> InFlight {
        let version = sync_ssp2::peek_envelope(&body)
            .map(|h| i32::from(h.wire_version.number()))
            .unwrap_or(2);
        let config = &self.state.config;
        let (tx, rx) = mpsc::channel(config.channel_chunks.max(1));
        let mut writer = ChannelWriter::new(
            tx,
            config.chunk_bytes,
            config.send_timeout,
            tokio::runtime::Handle::current(),
        );
        let permit = self.state.slots.clone().acquire_owned().await.ok();
        let (hub, connection) = (self.hub.clone(), self.connection.clone());
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _slot = permit;
            let _entered = span.enter();
            hub.round_started(&connection);
            let service = hub.service().clone();
            let result =
                service.socket_round(connection.ctx(), connection.client_id(), &body, &mut writer);
            match result {
                Ok(round) => {
                    if let Some(through) = round.outcome.applied.iter().map(|c| c.commit_seq).max()
                    {
                        if let Err(refusal) = hub.notify(&connection.ctx().partition, through) {
                            tracing::warn!(code = refusal.code(), "realtime fanout failed");
                        }
                    }
                    if let Err(refusal) = hub.round_finished(&connection, round.pulled) {
                        tracing::debug!(code = refusal.code(), "re-registration failed");
                    }
                    let _ = writer.end();
                }
                Err(RoundError::Refused(refusal)) => {
                    let _ = hub.round_finished(&connection, None);
                    writer.refuse(refusal);
                }
                Err(RoundError::Aborted { reason }) => {
                    let _ = hub.round_finished(&connection, None);
                    tracing::warn!(%reason, "socket round aborted");
                    writer.abort();
                }
            }
        });
        InFlight {
            rx,
            version,
            held: None,
        }
    }

    async fn round_piece(
        &self,
        socket: &mut WebSocket,
        piece: Option<Piece>,
        round: &mut Option<InFlight>,
    ) -> Result<(), Close> {
        match piece {
            Some(Piece::Data(chunk)) => {
                let earlier = round.as_mut().and_then(|r| r.held.replace(chunk));
                match earlier {
                    Some(earlier) => send(socket, tagged(TAG_ROUND, &earlier)).await,
                    None => Ok(()),
                }
            }
            Some(Piece::End) => {
                // The round is over before its last chunk leaves: the
                // client may begin the next one as soon as it has it.
                let last = round.take().and_then(|r| r.held);
                match last {
                    Some(last) => send(socket, tagged(TAG_ROUND, &last)).await,
                    None => Ok(()),
                }
            }
            Some(Piece::Last(last)) => {
                // As `Data` then `End`: the round is over before its last
                // chunk leaves.
                if let Some(earlier) = round.take().and_then(|r| r.held) {
                    send(socket, tagged(TAG_ROUND, &earlier)).await?;
                }
                send(socket, tagged(TAG_ROUND, &last)).await
            }
            Some(Piece::Failure(refusal)) => {
                let (epoch, known) = self.connection.epoch_and_version();
                let version = round.as_ref().map_or(known, |r| r.version);
                *round = None;
                let stream = refusal_stream(&refusal, version, &epoch);
                if stream.is_empty() {
                    return Err(Close::Violation("refusal_not_encodable"));
                }
                send(socket, tagged(TAG_ROUND, &stream)).await
            }
            // A response broken off cannot be completed on this socket.
            Some(Piece::Abort) | None => Err(Close::Violation("round_aborted")),
        }
    }
}

async fn recv_round(round: &mut Option<InFlight>) -> Option<Piece> {
    match round {
        Some(r) => r.rx.recv().await,
        None => std::future::pending().await,
    }
}

fn tagged(tag: u8, payload: &[u8]) -> Message {
    let mut bytes = Vec::with_capacity(payload.len() + 1);
    bytes.push(tag);
    bytes.extend_from_slice(payload);
    Message::Binary(Bytes::from(bytes))
}

async fn send(socket: &mut WebSocket, message: Message) -> Result<(), Close> {
    socket.send(message).await.map_err(|_| Close::Gone)
}
