//! Engine configuration (`engine.md` §1.5).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use sync_core::{CheckpointDeclaration, Clock, RetentionPolicy, SystemClock};

use crate::hooks::blobs::BlobExistence;
use crate::hooks::crdt::MergerRegistry;
use crate::hooks::ids::{IdSource, RandomIds};
use crate::hooks::reactions::ReactionPlanner;
use crate::hooks::scope_resolver::ScopeResolver;
use crate::hooks::validators::{CommitValidator, RowValidator};

/// What an unversioned upsert does after a delete (`engine.md` §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeletePolicy {
    /// Reference behaviour: tombstones are not read; an upsert re-creates
    /// the row at version 1.
    #[default]
    LastWriteWins,
    /// A delete beats a later upsert without `baseVersion` until the
    /// horizon passes it (`sync.row_missing`); `baseVersion 0` re-creates
    /// explicitly and clears the tombstone.
    DeleteWins,
}

/// Request limits (`engine.md` §1.5, §8 item 8): a small request can never
/// make the server do or send unbounded work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum operations over all pushes of one request (default 500;
    /// over it: `sync.too_many_operations`).
    pub max_operations_per_request: usize,
    /// Maximum subscriptions of one request (default
    /// [`DEFAULT_MAX_SUBSCRIPTIONS`]; over it: request-level
    /// `sync.invalid_request` with `details.limit = "subscriptions"`).
    pub max_subscriptions_per_request: usize,
    /// Maximum payload bytes of one operation (default
    /// [`DEFAULT_MAX_PAYLOAD_BYTES`]; over it: request-level
    /// `sync.invalid_request` with `details.limit = "payload_bytes"`).
    pub max_payload_bytes: usize,
    /// Response bytes one round's pull may emit (default
    /// [`DEFAULT_RESPONSE_BUDGET_BYTES`]), counted as the row ids and
    /// payloads of bootstrap rows and the row ids, scopes, payloads and
    /// actor of commits. Once reached, the round's sections end early
    /// with cursors where they stopped; a round emits at most the budget
    /// plus one row or one commit.
    pub response_budget_bytes: usize,
}

/// Default [`Limits::max_subscriptions_per_request`].
pub const DEFAULT_MAX_SUBSCRIPTIONS: usize = 100;
/// Default [`Limits::max_payload_bytes`]: 1 MiB.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 1 << 20;
/// Default [`Limits::response_budget_bytes`]: 16 MiB.
pub const DEFAULT_RESPONSE_BUDGET_BYTES: usize = 16 << 20;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_operations_per_request: 500,
            max_subscriptions_per_request: DEFAULT_MAX_SUBSCRIPTIONS,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            response_budget_bytes: DEFAULT_RESPONSE_BUDGET_BYTES,
        }
    }
}

/// Default [`EngineConfig::activity_refresh_ms`]: a busy partition's
/// registry row and an unchanged client record are written at most about
/// once a second, not once per round (each write is a commit of its own, a
/// WAL flush on Postgres).
pub const ACTIVITY_REFRESH_MS: i64 = 1_000;

/// Configuration and hooks of an [`Engine`](crate::Engine).
///
/// Build it with [`EngineConfig::new`] and set the optional fields.
#[non_exhaustive]
pub struct EngineConfig {
    /// The required scope resolver.
    pub resolver: Arc<dyn ScopeResolver>,
    /// Per-table row validators, keyed by table name.
    pub row_validators: BTreeMap<String, Arc<dyn RowValidator>>,
    /// The whole-commit validator.
    pub commit_validator: Option<Arc<dyn CommitValidator>>,
    /// The reaction planner (requires the storage's `Reactions` capability).
    pub reaction_planner: Option<Arc<dyn ReactionPlanner>>,
    /// CRDT mergers by `crdt_type`.
    pub mergers: MergerRegistry,
    /// Blob existence; without it every non-NULL blob reference is `blob.not_found`.
    pub blobs: Option<Arc<dyn BlobExistence>>,
    /// Time source (default: the system clock).
    pub clock: Arc<dyn Clock>,
    /// Id source (default: random UUID v4).
    pub ids: Arc<dyn IdSource>,
    /// Checkpoint declarations, the same list given to `ensure_schema` and
    /// the backfill runner.
    pub declarations: Vec<CheckpointDeclaration>,
    /// Request limits.
    pub limits: Limits,
    /// Delete policy.
    pub delete_policy: DeletePolicy,
    /// Retention policy of [`Engine::prune`](crate::Engine::prune).
    pub retention: RetentionPolicy,
    /// How often rounds refresh activity times (milliseconds): the
    /// partition registry's `last_authenticated_at_ms` is written only when
    /// older than this, and a client record that would change in nothing
    /// but `updated_at_ms` only when its stored time is older than this.
    /// `0` writes both on every round, as `engine.md` E2 and §5.8 read.
    /// Default [`ACTIVITY_REFRESH_MS`].
    pub activity_refresh_ms: i64,
    /// Race-injection callbacks (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    pub test_hooks: crate::test_hooks::TestHooks,
}

impl EngineConfig {
    /// A configuration with `resolver` and every default.
    pub fn new(resolver: Arc<dyn ScopeResolver>) -> Self {
        Self {
            resolver,
            row_validators: BTreeMap::new(),
            commit_validator: None,
            reaction_planner: None,
            mergers: MergerRegistry::new(),
            blobs: None,
            clock: Arc::new(SystemClock),
            ids: Arc::new(RandomIds::new()),
            declarations: Vec::new(),
            limits: Limits::default(),
            delete_policy: DeletePolicy::default(),
            retention: RetentionPolicy::default(),
            activity_refresh_ms: ACTIVITY_REFRESH_MS,
            #[cfg(feature = "test-hooks")]
            test_hooks: crate::test_hooks::TestHooks::default(),
        }
    }
}

impl fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineConfig")
            .field("row_validators", &self.row_validators.keys())
            .field("commit_validator", &self.commit_validator.is_some())
            .field("reaction_planner", &self.reaction_planner.is_some())
            .field("mergers", &self.mergers)
            .field("blobs", &self.blobs.is_some())
            .field("clock", &self.clock)
            .field("ids", &self.ids)
            .field("declarations", &self.declarations)
            .field("limits", &self.limits)
            .field("delete_policy", &self.delete_policy)
            .field("retention", &self.retention)
            .field("activity_refresh_ms", &self.activity_refresh_ms)
            .finish_non_exhaustive()
    }
}
