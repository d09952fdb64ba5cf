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
//! ```
//! use std::sync::Arc;
//! use sync_core::{EnsureOptions, ServerStorage};
//! use sync_engine::{
//!     Engine, EngineConfig, RequestContext, ResolveError, ResponseItem, ScopeMap, SyncRequest,
//! };
//! use sync_sqlite::{SqliteConfig, SqliteStorage};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Startup: compile the schema, open and ensure the storage, build the engine.
//! let schema = Arc::new(sync_schema::compile(&sync_schema::parse_schema_json(
//!     r#"{"version": 1, "tables": [{"name": "todos", "primaryKey": "id",
//!         "columns": [{"name": "id", "type": "string"}, {"name": "list_id", "type": "string"},
//!                     {"name": "title", "type": "string"}],
//!         "scopes": ["list:{list_id}"]}]}"#,
//! )?)?);
//! let dir = tempfile::tempdir()?;
//! let storage = Arc::new(SqliteStorage::open(dir.path().join("app.db"), SqliteConfig::default())?);
//! storage.ensure_schema(&schema, &EnsureOptions::default())?;
//! // Which scopes an authenticated actor may read and write.
//! let resolver = |_partition: &str, actor: &str, _client: &str| -> Result<ScopeMap, ResolveError> {
//!     let lists = if actor == "alice" { vec!["l1".to_owned()] } else { vec![] };
//!     Ok(ScopeMap::from([("list_id".to_owned(), lists)]))
//! };
//! let engine = Engine::new(storage, schema, EngineConfig::new(Arc::new(resolver)))?;
//!
//! // One request: the transport authenticated alice in partition acme.
//! let ctx = RequestContext::new("acme", "alice");
//! let request = SyncRequest::from_json_lines(concat!(
//!     r#"{"type":"REQ_HEADER","clientId":"phone-1","schemaVersion":1}"#, "\n",
//!     r#"{"type":"PULL_HEADER","limitCommits":100,"limitSnapshotRows":100,"maxSnapshotPages":4}"#, "\n",
//!     r#"{"type":"SUBSCRIPTION","id":"s1","table":"todos","scopes":{"list_id":["l1"]},"cursor":-1}"#,
//! ))?;
//! let mut items: Vec<ResponseItem> = Vec::new();
//! engine.handle(&ctx, &request, &mut items)?;
//! // A client without the partition's log epoch is told it (and to reset) first.
//! assert!(matches!(&items[0], ResponseItem::Header(h) if h.reset_required && h.log_epoch.is_some()));
//! assert_eq!(items.last(), Some(&ResponseItem::End));
//! print!("{}", items.iter().map(ResponseItem::to_json_lines).collect::<String>());
//! # Ok(())
//! # }
//! ```
//!
//! `examples/todos_sqlite.rs`, `examples/todos_postgres.rs` and
//! `examples/todos_mariadb.rs` tell a whole story (conflict, idempotent retry, bootstrap, incremental pull, pruning
//! and the reset of a client behind the horizon); `docs/library.md` is the
//! guide.
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
mod realtime;
mod round;
mod scopes;
mod sink;
#[cfg(feature = "test-hooks")]
pub mod test_hooks;
mod wire;

pub use command::{CommandOutcome, CommandReader, CommandWrite};
pub use config::{
    DeletePolicy, EngineConfig, Limits, ACTIVITY_REFRESH_MS, DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_MAX_SUBSCRIPTIONS, DEFAULT_RESPONSE_BUDGET_BYTES,
};
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
pub use realtime::{Delta, RealtimeStart, Registration};
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
