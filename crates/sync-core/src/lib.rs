//! `sync-core`: the domain types, storage traits, error codes, row payload
//! codec and serve-gate rules of the syncstore storage layer.
//!
//! This crate is for everything every dialect and every caller shares: the
//! [`ServerStorage`] / [`StorageTransaction`] contract, the [`Error`] type with
//! its stable codes, the row payload [`codec`], the push-result JSON format,
//! the serve-gate rules and the retention routine. It is not a database
//! driver: it has no database dependency. Dialect crates (`sync-sqlite`,
//! `sync-postgres`) implement the traits; `sync-schema` compiles schema input
//! into [`CompiledSchema`]; the conformance suite and the backfill runner
//! work over the traits only.
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

mod authoritative;
mod backend_cause;
mod capabilities;
mod checkpoints;
mod clients;
mod clock;
pub mod codec;
mod error;
#[cfg(feature = "fault-injection")]
pub mod fault;
mod fence;
mod gate;
pub mod limits;
mod push_result;
mod queries;
mod reactions;
mod retention;
mod rows;
mod schema;
mod scope;
mod storage;
mod transaction;
mod unfinished;
pub mod validate;
mod value;

pub use authoritative::{AuthoritativeQueryRequest, AuthoritativeQueryResult};
pub use backend_cause::BackendCause;
pub use capabilities::{Capabilities, Capability};
pub use checkpoints::{
    ActivationOutcome, CheckpointDeclaration, CheckpointKey, CheckpointState, Coverage,
    StoredCheckpoint,
};
pub use clients::{ClientCursorInfo, ClientRecord, ClientSubscription, PartitionRegistryEntry};
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{Error, ErrorCode, Result, UnknownErrorCode, CAUSE_DETAIL};
pub use fence::{effective_fence, writer_fence_allows, FenceTriggerState};
pub use gate::{
    check_serve_gate, serve_gate_refusal, serve_gate_token_changed, serve_not_ready_error,
    ServeContext, ServeGate, ServeGateRefusal,
};
pub use push_result::{PushOperationResult, PushStatus, RejectionDetails, StoredPushResult};
pub use queries::{
    BlobReferencingRow, CommitMetadataQuery, CommitPruneQuery, CommitPruneResult,
    CommitWindowQuery, IndexRowScanQuery, RowScanQuery, ScopeActivityQuery, ScopeCommitActivity,
};
pub use reactions::{
    NewReaction, PrunedReactionCounts, ReactionClaimQuery, ReactionFailure, ReactionFailureUpdate,
    ReactionListQuery, ReactionPruneQuery, ReactionStatus, StoredReaction,
};
pub use retention::{prune_commit_log, RetentionPolicy};
pub use rows::{
    ChangeOp, CommitMetadata, CommitRecord, NewChange, NewCommit, SourceChange, StoredChange,
    StoredCommit, StoredRow,
};
pub use schema::{
    ColumnType, CompiledColumn, CompiledSchema, CompiledTable, IndexDef, LayoutColumn, ScopePattern,
};
pub use scope::{candidate_variable, matches_filter, ScopeFilter, StoredScopes};
pub use storage::{EnsureOptions, EnsureOutcome, SchemaMarker, ServerStorage};
pub use transaction::StorageTransaction;
pub use unfinished::{resolve_unfinished, Resolution, ResolvedCheckpoint, UnfinishedResolution};
pub use value::{RowValue, SqlValue};
