//! The connections of a process and the fanout of commits to them (SSP2
//! §8.1–§8.3): registration at connect and at a socket round's end,
//! cursor-contiguous deltas, suppression with `catchup-required` until an
//! ack covers what the connection observed, acks persisted through
//! [`Engine::acknowledge`](sync_engine::Engine::acknowledge).
//!
//! Synchronous: the transport calls it from blocking threads and hands it
//! an [`Outbox`] per connection that never blocks.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sync_engine::{Delta, EngineError, Registration, RequestContext, ResponseItem};
use sync_ssp2::realtime::{to_json_text, ControlMessage, Hello, Wake, WakeReason};
use sync_ssp2::{ResponseWriter, WireVersion};

use super::config::RealtimeConfig;
use crate::frames;
use crate::round_error::round_failure;
use crate::service::WireService;
use crate::WireFailure;

/// A message for one socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// A JSON control message (text frame).
    Text(String),
    /// A delta: one complete SSP2 response (sent with channel tag `0x00`).
    Delta(Arc<Vec<u8>>),
}

/// Where a connection's messages go; implemented by the transport.
/// Neither method may block: a slow socket must never slow a fanout.
pub trait Outbox: Send + Sync {
    /// Queues `message`; `false` when the queue is full or the socket is
    /// gone (the message is dropped).
    fn try_send(&self, message: Outgoing) -> bool;
    /// The queue was full: once it has room again, the transport sends a
    /// `catchup-required` wake-up (built with [`wake_text`]).
    fn owe_wake(&self);
    /// The server lets go of the connection (shutdown): the transport
    /// closes the socket; the client reconnects and catches up.
    fn close(&self);
}

/// The text of a wake-up (§8.3).
pub fn wake_text(latest: i64, reason: WakeReason, now_ms: i64) -> String {
    to_json_text(&ControlMessage::Wake(Wake {
        cursor: latest,
        reason,
        timestamp: now_ms,
    }))
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a connection has been sent and may be sent.
#[derive(Debug)]
struct Session {
    registrations: Vec<Registration>,
    wire_version: i32,
    log_epoch: String,
    /// Every change of the registrations through this seq has reached the
    /// client (or it said so with an ack).
    delivered: i64,
    /// The highest matching commit seq the connection has seen.
    observed: i64,
    /// Deltas withheld until an ack reaches `observed`.
    suppressed: bool,
    unacked: u32,
    in_round: bool,
}

/// One realtime connection.
pub struct Connection {
    pub(super) ctx: RequestContext,
    pub(super) client_id: String,
    session_id: String,
    pub(super) outbox: Arc<dyn Outbox>,
    session: Mutex<Session>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("partition", &self.ctx.partition)
            .field("actor", &self.ctx.actor_id)
            .field("client_id", &self.client_id)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// The authenticated caller.
    pub fn ctx(&self) -> &RequestContext {
        &self.ctx
    }

    /// The client id of the upgrade.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The session id sent in `hello`.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The partition's log epoch as the connection knows it, and the wire
    /// version its messages are encoded in: what a socket round's error
    /// stream needs (§8.7).
    pub fn epoch_and_version(&self) -> (String, i32) {
        let session = lock(&self.session);
        (session.log_epoch.clone(), session.wire_version)
    }

    /// Whether deltas are withheld (until an ack covers what was observed).
    pub fn suppressed(&self) -> bool {
        lock(&self.session).suppressed
    }

    /// The ids of the registered subscriptions.
    pub fn registered(&self) -> Vec<String> {
        lock(&self.session)
            .registrations
            .iter()
            .map(|r| r.id.clone())
            .collect()
    }
}

#[derive(Debug)]
pub(super) struct Fanout {
    /// Commits through this seq have been fanned out.
    last_seq: i64,
    pub(super) connections: Vec<Arc<Connection>>,
    /// Presence documents by scope key (§8.6.4): never persisted.
    pub(super) presence: super::presence::Registry,
}

/// What one notification did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FanoutReport {
    /// Deltas queued.
    pub deltas: usize,
    /// Wake-ups queued (or owed).
    pub wakes: usize,
}

/// The realtime connections of a process, by partition.
pub struct RealtimeHub {
    service: Arc<WireService>,
    acks: super::acks::AckWriter,
    config: RealtimeConfig,
    partitions: Mutex<HashMap<String, Arc<Mutex<Fanout>>>>,
    open: AtomicUsize,
    sessions: AtomicU64,
}

impl fmt::Debug for RealtimeHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealtimeHub")
            .field("config", &self.config)
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

fn refusal(error: &EngineError) -> WireFailure {
    round_failure(error)
}

fn limit_refusal(code: &str, status: u16, reason: &str) -> WireFailure {
    let mut error = sync_engine::WireError::new(code, "realtime connection refused")
        .with_detail("reason", reason);
    error.http_status = status;
    WireFailure::from_wire_error(&error)
}

/// A delta prepared once per (registrations, range, version) of a fanout.
#[derive(Debug, Clone)]
enum Prepared {
    Empty,
    TooLarge,
    Bytes(Arc<Vec<u8>>),
}

impl RealtimeHub {
    /// A hub over `service` within `config`'s limits.
    pub fn new(service: Arc<WireService>, config: RealtimeConfig) -> Self {
        Self {
            acks: super::acks::AckWriter::start(service.clone()),
            service,
            config,
            partitions: Mutex::new(HashMap::new()),
            open: AtomicUsize::new(0),
            sessions: AtomicU64::new(0),
        }
    }

    /// The limits.
    pub fn config(&self) -> &RealtimeConfig {
        &self.config
    }

    /// The wire service behind the hub.
    pub fn service(&self) -> &Arc<WireService> {
        &self.service
    }

    /// Open connections.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    pub(super) fn now_ms(&self) -> i64 {
        self.service.config().clock.now_ms()
    }

    pub(super) fn fanout(&self, partition: &str) -> Result<Arc<Mutex<Fanout>>, WireFailure> {
        if let Some(found) = lock(&self.partitions).get(partition) {
            return Ok(found.clone());
        }
        let last_seq = self
            .service
            .engine()
            .storage()
            .get_max_commit_seq(partition)
            .map_err(|e| {
                refusal(&EngineError::Internal {
                    source: Box::new(e),
                })
            })?;
        Ok(lock(&self.partitions)
            .entry(partition.to_owned())
            .or_insert_with(|| {
                Arc::new(Mutex::new(Fanout {
                    last_seq,
                    connections: Vec::new(),
                    presence: super::presence::Registry::default(),
                }))
            })
            .clone())
    }

    /// Registers a connection of `ctx` for `client_id` (§8.1) and queues its
    /// `hello` first. Refused when a limit is reached or the client id
    /// belongs to another actor (`sync.invalid_client_id`).
    pub fn connect(
        &self,
        ctx: &RequestContext,
        client_id: &str,
        outbox: Arc<dyn Outbox>,
    ) -> Result<(Arc<Connection>, Hello), WireFailure> {
        if client_id.is_empty() || client_id.len() > sync_core::limits::MAX_CLIENT_ID_BYTES {
            return Err(limit_refusal("sync.invalid_request", 400, "client_id"));
        }
        let start = self
            .service
            .engine()
            .realtime_start(ctx, client_id)
            .map_err(|e| refusal(&e))?;
        let fanout = self.fanout(&ctx.partition)?;
        let mut state = lock(&fanout);
        if self.open.load(Ordering::Relaxed) >= self.config.max_connections {
            return Err(limit_refusal("sync.storage.busy", 503, "max_connections"));
        }
        let same_actor = state
            .connections
            .iter()
            .filter(|c| c.ctx.actor_id == ctx.actor_id)
            .count();
        if same_actor >= self.config.max_connections_per_actor {
            return Err(limit_refusal(
                "sync.rate_limited",
                429,
                "max_connections_per_actor",
            ));
        }
        let latest = start.latest_seq.max(state.last_seq);
        let cursor = start.cursor.unwrap_or(-1);
        let requires_sync = start.registrations.is_empty() || cursor < latest;
        let session_id = format!(
            "{:x}-{:x}",
            self.now_ms(),
            self.sessions.fetch_add(1, Ordering::Relaxed)
        );
        let hello = Hello {
            protocol_version: 1,
            session_id: session_id.clone(),
            actor_id: ctx.actor_id.clone(),
            client_id: client_id.to_owned(),
            cursor,
            latest_cursor: latest,
            requires_sync,
            timestamp: self.now_ms(),
        };
        let connection = Arc::new(Connection {
            ctx: ctx.clone(),
            client_id: client_id.to_owned(),
            session_id,
            outbox,
            session: Mutex::new(Session {
                registrations: start.registrations,
                wire_version: start.wire_version,
                log_epoch: start.log_epoch,
                delivered: cursor,
                observed: latest,
                suppressed: requires_sync,
                unacked: 0,
                in_round: false,
            }),
        });
        if !connection
            .outbox
            .try_send(Outgoing::Text(to_json_text(&ControlMessage::Hello(
                hello.clone(),
            ))))
        {
            return Err(limit_refusal("sync.storage.busy", 503, "send_queue"));
        }
        state.connections.push(connection.clone());
        self.open.fetch_add(1, Ordering::Relaxed);
        let held = self.scope_keys(&connection);
        self.presence_regrant(&mut state, &connection, &[], &held);
        Ok((connection, hello))
    }

    /// The commit seq of `partition` fanned out so far (0 before any
    /// connection of it); the `cursor` of a wake-up owed on a full queue.
    pub fn fanned_through(&self, partition: &str) -> i64 {
        lock(&self.partitions)
            .get(partition)
            .map_or(0, |fanout| lock(fanout).last_seq)
    }

    /// Forgets a connection (the socket closed).
    pub fn disconnect(&self, connection: &Arc<Connection>) {
        let Some(fanout) = lock(&self.partitions)
            .get(&connection.ctx.partition)
            .cloned()
        else {
            return;
        };
        let mut state = lock(&fanout);
        let held = self.scope_keys(connection);
        self.presence_regrant(&mut state, connection, &held, &[]);
        let before = state.connections.len();
        state.connections.retain(|c| !Arc::ptr_eq(c, connection));
        if state.connections.len() < before {
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Closes every connection (a server shutting down): each socket is
    /// closed by its transport and forgotten here; presence is dropped.
    pub fn close_all(&self) {
        let fanouts: Vec<_> = lock(&self.partitions).values().cloned().collect();
        for fanout in fanouts {
            let mut state = lock(&fanout);
            for connection in state.connections.drain(..) {
                connection.outbox.close();
                self.open.fetch_sub(1, Ordering::Relaxed);
            }
            state.presence = super::presence::Registry::default();
        }
    }

    /// Fans out every commit of `partition` through `through_seq` not fanned
    /// out yet (§8.2), in commit order. Call it after a round applied
    /// commits, or when another process announces one; a seq already
    /// covered is a no-op.
    pub fn notify(&self, partition: &str, through_seq: i64) -> Result<FanoutReport, WireFailure> {
        let mut report = FanoutReport::default();
        // No socket of this partition ever connected here: nothing to read
        // (a first connect starts from the partition's newest commit).
        let Some(fanout) = lock(&self.partitions).get(partition).cloned() else {
            return Ok(report);
        };
        let mut state = lock(&fanout);
        if through_seq <= state.last_seq {
            return Ok(report);
        }
        if state.connections.is_empty() {
            state.last_seq = through_seq;
            return Ok(report);
        }
        let after_all = state.last_seq;
        let storage = self.service.engine().storage();
        let horizon = storage.get_horizon_seq(partition).map_err(|e| {
            refusal(&EngineError::Internal {
                source: Box::new(e),
            })
        })?;
        // A restore rotates the epoch: the log the sockets follow is gone.
        let epoch = storage.get_partition_log_epoch(partition).map_err(|e| {
            refusal(&EngineError::Internal {
                source: Box::new(e),
            })
        })?;
        let mut cache: Vec<(Vec<Registration>, i64, i32, Prepared)> = Vec::new();
        for connection in &state.connections {
            let mut session = lock(&connection.session);
            if session.registrations.is_empty() {
                continue;
            }
            if epoch.as_deref() != Some(session.log_epoch.as_str()) {
                self.wake(
                    connection,
                    &mut session,
                    through_seq,
                    WakeReason::ResetRequired,
                );
                report.wakes += 1;
                continue;
            }
            let withholding = session.suppressed || session.in_round;
            let after = if withholding {
                after_all
            } else {
                session.delivered.max(-1)
            };
            if after >= through_seq {
                continue;
            }
            if !withholding && session.delivered < horizon {
                self.wake(
                    connection,
                    &mut session,
                    through_seq,
                    WakeReason::ResetRequired,
                );
                report.wakes += 1;
                continue;
            }
            let prepared = match cache.iter().find(|(regs, a, v, _)| {
                *a == after && *v == session.wire_version && *regs == session.registrations
            }) {
                Some((_, _, _, prepared)) => prepared.clone(),
                None => {
                    let prepared = self.prepare(
                        partition,
                        &session.registrations,
                        after,
                        through_seq,
                        session.wire_version,
                        &session.log_epoch,
                    )?;
                    cache.push((
                        session.registrations.clone(),
                        after,
                        session.wire_version,
                        prepared.clone(),
                    ));
                    prepared
                }
            };
            match prepared {
                Prepared::Empty => {
                    if !withholding {
                        session.delivered = through_seq;
                    }
                }
                Prepared::TooLarge => {
                    self.wake(
                        connection,
                        &mut session,
                        through_seq,
                        WakeReason::DeltaTooLarge,
                    );
                    report.wakes += 1;
                }
                Prepared::Bytes(bytes) if bytes.len() > self.config.max_message_bytes => {
                    self.wake(
                        connection,
                        &mut session,
                        through_seq,
                        WakeReason::DeltaTooLarge,
                    );
                    report.wakes += 1;
                }
                Prepared::Bytes(_)
                    if withholding || session.unacked >= self.config.max_unacked_deltas =>
                {
                    self.wake(
                        connection,
                        &mut session,
                        through_seq,
                        WakeReason::CatchupRequired,
                    );
                    report.wakes += 1;
                }
                Prepared::Bytes(bytes) => {
                    if connection.outbox.try_send(Outgoing::Delta(bytes)) {
                        session.delivered = through_seq;
                        session.observed = session.observed.max(through_seq);
                        session.unacked += 1;
                        report.deltas += 1;
                    } else {
                        session.suppressed = true;
                        session.observed = session.observed.max(through_seq);
                        connection.outbox.owe_wake();
                        report.wakes += 1;
                    }
                }
            }
        }
        state.last_seq = through_seq;
        Ok(report)
    }

    /// Commits may have been missed (the commit feed's listener was lost):
    /// every connection is woken with `catchup-required` and gets no delta
    /// until its ack covers what it has seen.
    pub fn lost_commits(&self) {
        let fanouts: Vec<_> = lock(&self.partitions).values().cloned().collect();
        for fanout in fanouts {
            let state = lock(&fanout);
            for connection in &state.connections {
                let mut session = lock(&connection.session);
                if !session.registrations.is_empty() {
                    self.wake(
                        connection,
                        &mut session,
                        state.last_seq,
                        WakeReason::CatchupRequired,
                    );
                }
            }
        }
    }

    /// Fans out whatever every known partition committed since its last
    /// fanout (after a lost commit feed listens again).
    pub fn catch_up_all(&self) {
        let partitions: Vec<String> = lock(&self.partitions).keys().cloned().collect();
        let storage = self.service.engine().storage();
        for partition in partitions {
            if let Ok(latest) = storage.get_max_commit_seq(&partition) {
                let _ = self.notify(&partition, latest);
            }
        }
    }

    /// Suppresses deltas until an ack covers `through_seq` and queues a
    /// wake-up (or owes one when the queue is full).
    fn wake(
        &self,
        connection: &Connection,
        session: &mut Session,
        through_seq: i64,
        reason: WakeReason,
    ) {
        session.suppressed = true;
        session.observed = session.observed.max(through_seq);
        let text = wake_text(through_seq, reason, self.now_ms());
        if !connection.outbox.try_send(Outgoing::Text(text)) {
            connection.outbox.owe_wake();
        }
    }

    fn prepare(
        &self,
        partition: &str,
        registrations: &[Registration],
        after: i64,
        through: i64,
        wire_version: i32,
        log_epoch: &str,
    ) -> Result<Prepared, WireFailure> {
        let delta = self
            .service
            .engine()
            .realtime_delta(
                partition,
                registrations,
                after,
                through,
                (wire_version >= 2).then_some(log_epoch),
                self.config.max_delta_changes,
            )
            .map_err(|e| refusal(&e))?;
        Ok(match delta {
            Delta::Empty => Prepared::Empty,
            Delta::TooLarge => Prepared::TooLarge,
            Delta::Items(items) => Prepared::Bytes(Arc::new(encode_delta(&items, wire_version)?)),
        })
    }

    /// A client's ack (§8.2): deltas resume once it covers every matching
    /// commit the connection observed; the cursor is persisted through the
    /// engine (actor- and epoch-guarded, monotonic) by the hub's ack
    /// writer, newest per client, off this call's path.
    pub fn ack(&self, connection: &Connection, cursor: i64) -> Result<(), WireFailure> {
        if !(-1..=sync_engine::MAX_SAFE_INTEGER).contains(&cursor) {
            return Err(WireFailure::from_wire_error(
                &sync_engine::WireError::invalid_request("cursor_out_of_range"),
            ));
        }
        let epoch = lock(&connection.session).log_epoch.clone();
        self.acks
            .push(&connection.ctx, &connection.client_id, &epoch, cursor);
        let mut session = lock(&connection.session);
        session.unacked = 0;
        if cursor >= session.observed {
            session.suppressed = false;
        }
        session.delivered = session.delivered.max(cursor);
        Ok(())
    }

    /// A socket round began (§8.7): deltas give way to wake-ups until it
    /// ends.
    pub fn round_started(&self, connection: &Connection) {
        lock(&connection.session).in_round = true;
    }

    /// A socket round ended. After a successful round that pulled, the
    /// connection's registrations are replaced by the subscription list the
    /// round persisted (re-resolved now) and deltas continue from the
    /// cursor the round persisted. A commit already fanned out past that
    /// cursor under the old registrations becomes a `catchup-required`
    /// wake-up; a connection suppressed before or during the round stays
    /// so until an ack covers what it observed.
    pub fn round_finished(
        &self,
        connection: &Arc<Connection>,
        pulled: Option<i32>,
    ) -> Result<(), WireFailure> {
        if pulled.is_none() {
            lock(&connection.session).in_round = false;
            return Ok(());
        }
        let fresh = self
            .service
            .engine()
            .realtime_start(&connection.ctx, &connection.client_id)
            .map_err(|e| refusal(&e));
        let start = match fresh {
            Ok(start) => start,
            Err(error) => {
                lock(&connection.session).in_round = false;
                return Err(error);
            }
        };
        let fanout = self.fanout(&connection.ctx.partition)?;
        let mut state = lock(&fanout);
        let before = self.scope_keys(connection);
        {
            let mut session = lock(&connection.session);
            session.in_round = false;
            session.registrations = start.registrations;
            if let Some(version) = pulled {
                session.wire_version = version;
            }
            session.log_epoch = start.log_epoch;
            let pulled_through = start.cursor.unwrap_or(-1);
            if session.suppressed {
                session.observed = session.observed.max(start.latest_seq);
            } else if pulled_through < state.last_seq {
                let fanned = state.last_seq;
                self.wake(
                    connection,
                    &mut session,
                    fanned,
                    WakeReason::CatchupRequired,
                );
            } else {
                session.delivered = session.delivered.max(pulled_through);
            }
        }
        let after = self.scope_keys(connection);
        self.presence_regrant(&mut state, connection, &before, &after);
        Ok(())
    }

    /// The scope keys (`prefix:value`, §3.1) the connection's registrations
    /// hold: its presence grant (§8.6.3).
    pub(super) fn scope_keys(&self, connection: &Connection) -> Vec<String> {
        let schema = self.service.engine().schema();
        let session = lock(&connection.session);
        let mut keys = Vec::new();
        for registration in &session.registrations {
            let Some(table) = schema.table(&registration.table) else {
                continue;
            };
            for pattern in &table.scope_patterns {
                for value in registration
                    .effective
                    .get(&pattern.variable)
                    .into_iter()
                    .flatten()
                {
                    if value != "*" {
                        keys.push(format!("{}:{value}", pattern.prefix));
                    }
                }
            }
        }
        keys.sort();
        keys.dedup();
        keys
    }
}

/// The SSP2 bytes of a delta's items.
fn encode_delta(items: &[ResponseItem], wire_version: i32) -> Result<Vec<u8>, WireFailure> {
    // The connection's recorded version; one the codec does not know
    // (never recorded by a served round) falls back to version 2.
    let version = u16::try_from(wire_version)
        .ok()
        .and_then(WireVersion::from_number)
        .unwrap_or(WireVersion::V2);
    let internal = |reason: String| {
        WireFailure::from_wire_error(
            &sync_engine::WireError::new("sync.internal", "internal server error")
                .with_detail("reason", reason),
        )
    };
    let mut writer =
        ResponseWriter::new(Vec::new(), version).map_err(|e| internal(e.to_string()))?;
    for item in items {
        let written = match item {
            ResponseItem::Header(h) => writer.write_frame(&frames::header(h, version)),
            ResponseItem::SubStart(s) => writer.write_frame(&frames::sub_start(s)),
            ResponseItem::Commit(c) => writer.write_frame(&frames::commit(c)),
            ResponseItem::SubEnd(s) => writer.write_frame(&frames::sub_end(s)),
            ResponseItem::End => break,
            _ => Ok(()),
        };
        written.map_err(|e| internal(e.to_string()))?;
    }
    writer.finish().map_err(|e| internal(e.to_string()))
}
