//! The engine: construction checks and the public entry points.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sync_core::{CommitPruneResult, CompiledSchema, ScopeFilter, ServerStorage};

use crate::config::EngineConfig;
use crate::context::RequestContext;
use crate::error::EngineError;
use crate::outcome::RoundOutcome;
use crate::round::{self, abort::Abort};
use crate::sink::Sink;
use crate::wire::request::SyncRequest;
use crate::wire::wire_error::WireError;

/// Largest integer exchanged with clients (2^53 − 1).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Push and pull over a [`ServerStorage`]: one sync round per
/// [`handle`](Engine::handle) call. `Send + Sync`; share it behind `Arc`.
pub struct Engine {
    pub(crate) storage: Arc<dyn ServerStorage>,
    pub(crate) schema: Arc<CompiledSchema>,
    pub(crate) config: EngineConfig,
    /// Stored column versions read as malformed (decision D5).
    pub(crate) unreadable_column_versions: AtomicU64,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("schema_version", &self.schema.version)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Builds an engine over an ensured storage (`engine.md` §1.5).
    ///
    /// Fails with [`EngineError::Config`] when the storage is not ensured at
    /// `schema.version` (`schema_not_ensured`) or a reaction planner is
    /// configured on a storage without the `Reactions` capability
    /// (`reactions_unsupported`).
    pub fn new(
        storage: Arc<dyn ServerStorage>,
        schema: Arc<CompiledSchema>,
        config: EngineConfig,
    ) -> Result<Self, EngineError> {
        if storage.ensured_version() != Some(schema.version) {
            return Err(EngineError::Config {
                reason: "schema_not_ensured",
            });
        }
        if config.reaction_planner.is_some() && !storage.capabilities().reactions {
            return Err(EngineError::Config {
                reason: "reactions_unsupported",
            });
        }
        Ok(Self {
            storage,
            schema,
            config,
            unreadable_column_versions: AtomicU64::new(0),
        })
    }

    /// How many times a wire-version-3 update found a row's stored column
    /// versions malformed (bytes another writer left that are not
    /// well-formed pairs for the row) since this engine was built. Such a
    /// row is read as if every column changed at its version: a stale
    /// versioned write conflicts, nothing is lost (`docs/decisions.md`,
    /// D5). A rising count points at a foreign writer worth a look.
    pub fn column_versions_unreadable(&self) -> u64 {
        self.unreadable_column_versions.load(Ordering::Relaxed)
    }

    /// The running schema.
    pub fn schema(&self) -> &Arc<CompiledSchema> {
        &self.schema
    }

    /// The storage.
    pub fn storage(&self) -> &Arc<dyn ServerStorage> {
        &self.storage
    }

    /// Runs one sync round (`engine.md` §3): items go to `sink` as they are
    /// produced.
    ///
    /// - `Err(Request)`: a request-level error before the first item.
    /// - `Ok(outcome)` with `outcome.error` set: the round emitted an
    ///   `Error` item and `End` after the header.
    /// - `Err(Internal)`: an internal failure (no `End` was emitted).
    /// - `Err(Sink)`: the sink failed; committed work stays committed.
    pub fn handle(
        &self,
        ctx: &RequestContext,
        request: &SyncRequest,
        sink: &mut dyn Sink,
    ) -> Result<RoundOutcome, EngineError> {
        round::run(self, ctx, request, sink)
    }

    /// The scopes `ctx.actor_id` may read out of `requested` right now, per
    /// table: the resolver runs once for `client_id` and its answer is
    /// intersected with `requested` exactly as a pull section's effective
    /// scopes are (`engine.md` §3.2 items 4 and 4a). Item 4a makes the
    /// effective map depend on the table (a scope variable of the table
    /// that `requested` leaves out is filtered by what the actor may
    /// write), so the answer is `(table, effective map)` for every table of
    /// the schema, in declaration order, leaving out the tables whose
    /// section would be revoked. Empty when the resolver failed;
    /// `Err(Request)` when the resolver refuses the request or names an
    /// undeclared variable.
    ///
    /// Transports re-authorize segment downloads with it (SSP2 §5.5): the
    /// segment's table must be one of these tables and the digest of that
    /// table's map must be the one the segment was stored for. A map of
    /// another table never authorizes a segment, even when it is equal.
    pub fn read_scopes(
        &self,
        ctx: &RequestContext,
        client_id: &str,
        requested: &ScopeFilter,
    ) -> Result<Vec<(String, ScopeFilter)>, EngineError> {
        let resolved =
            round::entry::resolve(self, ctx, client_id).map_err(Abort::into_engine_error)?;
        Ok(self
            .schema
            .tables
            .iter()
            .filter_map(|table| {
                crate::scopes::effective_scopes(table, requested, &resolved)
                    .map(|effective| (table.name.clone(), effective))
            })
            .collect())
    }

    /// The storage half of a realtime acknowledgement (`engine.md` §5.9):
    /// advances the client's cursor monotonically if the record belongs to
    /// `ctx.actor_id` and `log_epoch` still matches. Never creates a record.
    pub fn acknowledge(
        &self,
        ctx: &RequestContext,
        client_id: &str,
        log_epoch: &str,
        cursor: i64,
    ) -> Result<bool, EngineError> {
        if !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&cursor) {
            return Err(EngineError::Request(WireError::invalid_request(
                "cursor_out_of_range",
            )));
        }
        let now = self.config.clock.now_ms();
        self.storage
            .advance_client_cursor(
                &ctx.partition,
                client_id,
                &ctx.actor_id,
                log_epoch,
                cursor,
                now,
            )
            .map_err(|e| Abort::storage(e).into_engine_error())
    }

    /// One retention pass over `partition` (`engine.md` §6) with the
    /// configured [`RetentionPolicy`](sync_core::RetentionPolicy).
    pub fn prune(&self, partition: &str, now_ms: i64) -> sync_core::Result<CommitPruneResult> {
        sync_core::prune_commit_log(
            self.storage.as_ref(),
            partition,
            now_ms,
            &self.config.retention,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_safe_integer_is_two_to_the_53_minus_one() {
        assert_eq!(MAX_SAFE_INTEGER, 9_007_199_254_740_991);
    }
}
