//! `sync-core`: the domain types, storage traits, error codes, row payload
//! codec and serve-gate rules of the syncstore storage layer.
//!
//! This crate is for everything every dialect and every caller shares: the
//! [`ServerStorage`] / [`StorageTransaction`] contract, the [`Error`] type with
//! its stable codes, the row payload [`codec`], the push-result JSON format,
//! the serve-gate rules, the retention routine and the store of bootstrap
//! [`segments`] with its in-memory implementation. It is not a database
//! driver: it has no database dependency. Dialect crates (`sync-sqlite`,
//! `sync-postgres`) implement the traits; `sync-schema` compiles schema input
//! into [`CompiledSchema`]; the conformance suite and the backfill runner
//! work over the traits only.
//!
//! The row codec and the serve-gate rules are plain functions, usable
//! without a database:
//!
//! ```
//! use sync_core::codec::{self, ColumnShape};
//! use sync_core::{serve_gate_refusal, ColumnType, RowValue, ServeContext, ServeGate};
//!
//! # fn main() -> sync_core::Result<()> {
//! // A row (id, title, done) as the bytes a client pushes and pulls.
//! let columns = [
//!     ColumnShape::required(ColumnType::String),
//!     ColumnShape::required(ColumnType::String),
//!     ColumnShape::optional(ColumnType::Boolean),
//! ];
//! let values = vec![
//!     RowValue::String("t1".into()),
//!     RowValue::String("Buy milk".into()),
//!     RowValue::Null,
//! ];
//! let payload = codec::encode(&columns, &values)?;
//! assert_eq!(codec::decode(&columns, &payload)?, values);
//!
//! // A v2 process must not serve a partition whose v2 backfill checkpoint
//! // is still pending unless it declared that checkpoint.
//! let gate = ServeGate {
//!     partition: "acme".into(),
//!     stored_schema_version: 2,
//!     log_epoch: Some("epoch-1".into()),
//!     pending: vec!["search_v2".into()],
//! };
//! let refusal = serve_gate_refusal(&gate, 2, &ServeContext::default());
//! assert_eq!(refusal.map(|r| r.reason()), Some("checkpoint_pending"));
//! # Ok(())
//! # }
//! ```
//!
//! Errors carry stable codes ([`ErrorCode`]); [`Error::retryable`] tells
//! which ones a caller may retry (`sync.storage.busy`,
//! `sync.schema_not_ready`, …).
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

mod authoritative;
mod backend_cause;
mod capabilities;
mod checkpoints;
mod clients;
mod clock;
pub mod codec;
pub mod column_versions;
mod commit_feed;
mod error;
#[cfg(feature = "fault-injection")]
pub mod fault;
mod fence;
pub mod front;
mod gate;
pub mod limits;
mod push_prelude;
mod push_result;
mod queries;
mod reactions;
mod retention;
mod rewrite_progress;
mod round_entry;
mod rows;
mod scan_output;
mod schema;
mod scope;
pub mod segments;
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
pub use commit_feed::{CommitFeed, CommitListener, CommitNotice, FeedEvent};
pub use error::{Error, ErrorCode, Result, UnknownErrorCode, CAUSE_DETAIL};
pub use fence::{effective_fence, writer_fence_allows, FenceTriggerState, TriggerDifference};
pub use gate::{
    check_serve_gate, serve_gate_refusal, serve_gate_token_changed, serve_not_ready_error,
    ServeContext, ServeGate, ServeGateRefusal,
};
pub use push_prelude::{PushCommitOutcome, PushPrelude, PushPreludeRequest};
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
pub use rewrite_progress::{RewriteObserver, RewriteProgress, RewriteTally};
pub use round_entry::{LogBounds, RoundEntry, RoundEntryRequest};
pub use rows::{
    ChangeOp, CommitMetadata, CommitRecord, NewChange, NewCommit, ScannedRow, SourceChange,
    StoredChange, StoredCommit, StoredRow,
};
pub use scan_output::ScanOutput;
pub use schema::{
    ColumnType, CompiledColumn, CompiledSchema, CompiledTable, IndexDef, LayoutColumn, ScopePattern,
};
pub use scope::{
    candidate_variable, matches_filter, parse_canonical_scopes, FilterMatcher, ScopeFilter,
    StoredScopes,
};
pub use segments::{
    MemorySegmentStore, NewSegment, SegmentBuildKey, SegmentFetch, SegmentMediaType, SegmentMeta,
    SegmentStore, StoredSegment,
};
pub use storage::{EnsureOptions, EnsureOutcome, SchemaMarker, ServerStorage};
pub use transaction::StorageTransaction;
pub use unfinished::{
    bump_resolutions, resolve_unfinished, Resolution, ResolvedCheckpoint, UnfinishedResolution,
};
pub use value::{RowValue, SqlValue};
