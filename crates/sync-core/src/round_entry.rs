//! The round entry: every read an engine round makes before its first
//! decision, asked for at once so that a dialect whose statements cross a
//! network can serve them in one round trip
//! ([`ServerStorage::enter_round`](crate::ServerStorage::enter_round)).

use crate::clients::{ClientRecord, PartitionRegistryEntry};
use crate::error::Result;
use crate::gate::ServeGate;
use crate::push_result::StoredPushResult;

/// What a round reads when it starts (`engine.md` §3.1 E2, E3 and E10, and
/// the idempotency fast path P1 of each commit it carries).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundEntryRequest {
    /// The partition the round is bound to.
    pub partition: String,
    /// The round's time: the registry entry's `last_authenticated_at_ms`.
    pub authenticated_at_ms: i64,
    /// The log epoch a first contact registers the partition with.
    pub initial_log_epoch: String,
    /// How fresh a stored `last_authenticated_at_ms` may stay unrefreshed:
    /// an entry already newer than `authenticated_at_ms - refresh_after_ms`
    /// may be returned as stored, without a write. `0` refreshes on every
    /// call (as does a negative value), as `touch_partition` does; a
    /// dialect may always refresh.
    pub refresh_after_ms: i64,
    /// The writer's schema version whose serve gate is read.
    pub running_schema_version: i32,
    /// The client of the round: its record and its stored push results.
    pub client_id: String,
    /// Commit ids whose stored push results are read (may be empty).
    pub client_commit_ids: Vec<String>,
    /// Also read the partition's log bounds ([`RoundEntry::log_bounds`]).
    pub log_bounds: bool,
}

/// The partition's commit counter and horizon, as
/// [`get_max_commit_seq`](crate::ServerStorage::get_max_commit_seq) and
/// [`get_horizon_seq`](crate::ServerStorage::get_horizon_seq) return them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogBounds {
    /// The allocated commit counter (0 for an unknown partition).
    pub max_commit_seq: i64,
    /// The horizon (0 by default).
    pub horizon_seq: i64,
}

/// What [`enter_round`](crate::ServerStorage::enter_round) read.
#[derive(Debug)]
pub struct RoundEntry {
    /// The registry entry after the touch, as
    /// [`touch_partition`](crate::ServerStorage::touch_partition) returns it
    /// (or, when the stored entry was fresh enough, as stored).
    pub registry: PartitionRegistryEntry,
    /// The serve gate of `running_schema_version`, read after the touch.
    pub gate: ServeGate,
    /// The client's record, if any.
    pub client_record: Option<ClientRecord>,
    /// One entry per requested commit id, in the request's order: what
    /// [`get_push_result`](crate::ServerStorage::get_push_result) returns
    /// for it (an unreadable stored result is its
    /// `sync.idempotency_cache_miss` error, left for the caller to weigh).
    pub push_results: Vec<Result<Option<StoredPushResult>>>,
    /// The log bounds, read after the gate, when the request asked for
    /// them (a dialect may return them unasked); else `None`.
    pub log_bounds: Option<LogBounds>,
}
