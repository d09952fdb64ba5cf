//! `sync-engine`: push and pull of the syncstore sync protocol over the
//! storage traits of `sync-core`.
//!
//! One [`Engine::handle`] call performs one **sync round** for an
//! authenticated `(partition, actor)`: request validation and the entry
//! sequence (epoch handshake, schema floor, client binding, caps,
//! subscription checks), scope resolution, push (idempotency, partition
//! lock, serve gate inside the transaction, authorization, conflicts,
//! versions, CRDT merge, blob references, validators, reactions, atomic
//! finalization) and pull (revoked / reset / bootstrap / incremental
//! sections with the horizon and log-epoch rules), then the client record.
//! [`Engine::acknowledge`] and [`Engine::prune`] cover realtime
//! acknowledgements and retention.
//!
//! The engine is not a transport or a codec: it consumes a typed
//! [`SyncRequest`] and hands typed [`ResponseItem`]s to a [`Sink`]. The
//! SSP2 debug JSON rendering of those frames (one frame per line, a
//! `"type"` tag per frame, binary as base64, enums by name) is part of the
//! public API: [`SyncRequest::from_json_lines`], [`SyncRequest::to_json_lines`],
//! [`ResponseItem::to_json_lines`] and [`ResponseItem::parse_json_lines`].
//!
//! The engine is synchronous, holds no per-request state and never calls a
//! pool write method while it holds a transaction. It contains no dialect
//! code: any [`sync_core::ServerStorage`] works.
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

mod base64;
mod command;
mod config;
mod context;
mod engine;
mod error;
mod hooks;
mod outcome;
mod pull;
mod push;
mod round;
mod scopes;
mod sink;
#[cfg(feature = "test-hooks")]
pub mod test_hooks;
mod wire;

pub use command::{CommandOutcome, CommandReader, CommandWrite};
pub use config::{DeletePolicy, EngineConfig, Limits};
pub use context::RequestContext;
pub use engine::{Engine, MAX_SAFE_INTEGER};
pub use error::EngineError;
pub use hooks::blobs::{BlobExistence, BlobStoreError};
pub use hooks::crdt::{CrdtMerger, MergeError, MergerRegistry};
pub use hooks::ids::{IdSource, RandomIds};
pub use hooks::reactions::{PlanError, ReactionPlan, ReactionPlanner};
pub use hooks::reader::{CandidateReader, CandidateRow, CandidateScan};
pub use hooks::rejection::{normalize_details, Rejection, RejectionError, RESERVED_CODE_PREFIXES};
pub use hooks::scope_resolver::{ResolveError, ScopeMap, ScopeResolver};
pub use hooks::validators::{
    CommitInput, CommitValidator, OperationEvidence, RowValidator, RowValues, ValidateContext,
    ValidateOperation, ValidationFailure,
};
pub use outcome::{AppliedCommit, RoundOutcome};
pub use scopes::{effective_scopes, write_authorized, Resolved};
pub use sink::{Sink, SinkError};
pub use sync_core::{Clock, ManualClock, RejectionDetails, RetentionPolicy, SystemClock};
pub use wire::json_fields::JsonFrameError;
pub use wire::json_request::PayloadDecoder;
pub use wire::request::{
    OpKind, Operation, PullHeader, PushCommit, ReqHeader, Subscription, SyncRequest,
};
pub use wire::response::{
    BootstrapPage, BootstrapRow, CommitItem, PushResult, PushResultStatus, RespHeader,
    ResponseItem, SectionStatus, SubEnd, SubStart, WireChange,
};
pub use wire::wire_error::{category, WireError};
