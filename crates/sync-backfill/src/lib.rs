//! `sync-backfill`: the RFC 0007 checkpoint runner.
//!
//! It backfills a derived projection (a column or a table computed from
//! source tables) for one partition in bounded batches under live traffic,
//! survives crashes and takeovers (owner epochs), keeps up with continuous
//! writes (catch-up over the source change log), and activates the
//! checkpoint in one locked transaction so the serve gate opens
//! (`rfc0007-migration-barrier.md` §8).
//!
//! It works over `&dyn ServerStorage` only; it contains no dialect code and
//! never loads a whole table: memory stays flat in the size of the table.
//!
//! The whole barrier from a library, on a SQLite file: v2 appends a nullable
//! `search_text` column; the v2 process declares the checkpoint when it
//! migrates, the serve gate refuses to serve the partition until the runner
//! has filled the column, and opens when the checkpoint activates.
//!
//! ```
//! use std::sync::Arc;
//! use sync_backfill::{CheckpointRunner, DerivedColumn, RunOutcome};
//! use sync_core::{
//!     serve_gate_refusal, CheckpointDeclaration, EnsureOptions, RowValue, ServeContext,
//!     ServerStorage,
//! };
//! use sync_sqlite::{SqliteConfig, SqliteStorage};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let todos = |version: i32, extra: &str| {
//!     let text = format!(
//!         r#"{{"version": {version}, "tables": [{{"name": "todos", "primaryKey": "id",
//!             "columns": [{{"name": "id", "type": "string"}}, {{"name": "list_id", "type": "string"}},
//!                         {{"name": "title", "type": "string"}}{extra}],
//!             "scopes": ["list:{{list_id}}"]}}]}}"#
//!     );
//!     sync_schema::compile(&sync_schema::parse_schema_json(&text)?)
//! };
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("app.db");
//! let v1 = SqliteStorage::open(&path, SqliteConfig::default())?;
//! v1.ensure_schema(&todos(1, "")?, &EnsureOptions::default())?;
//! v1.touch_partition("acme", 0, "epoch-1")?;
//!
//! // The v2 process: migrate, declaring the backfill of partition `acme`.
//! let v2 = SqliteStorage::open(&path, SqliteConfig::default())?;
//! let declared = vec![CheckpointDeclaration::new("acme", "search_v2", 2)];
//! let v2_schema = todos(2, r#", {"name": "search_text", "type": "string", "nullable": true}"#)?;
//! v2.ensure_schema(&v2_schema, &EnsureOptions::with_declarations(declared.clone()))?;
//!
//! // A v2 process that did not declare it must not serve `acme` yet.
//! let gate = v2.read_serve_gate("acme", 2)?;
//! let undeclared = serve_gate_refusal(&gate, 2, &ServeContext::default());
//! assert_eq!(undeclared.map(|r| r.reason()), Some("checkpoint_pending"));
//!
//! // search_text = lower(title), in batches, resumable, under live traffic.
//! let schema = v2.ensured_schema().ok_or("ensured")?;
//! let projector = DerivedColumn::new(schema, "todos", "search_text", Arc::new(|table, values| {
//!     let title = table.column_index.get("title").and_then(|&i| values.get(i));
//!     Ok(match title {
//!         Some(RowValue::String(t)) => RowValue::String(t.to_lowercase()),
//!         _ => RowValue::Null,
//!     })
//! }))?;
//! let outcome = CheckpointRunner::new(&v2, "acme", "search_v2", 2, &projector).run()?;
//! assert!(matches!(outcome, RunOutcome::Activated { .. }));
//! let gate = v2.read_serve_gate("acme", 2)?;
//! assert!(serve_gate_refusal(&gate, 2, &ServeContext::default()).is_none());
//! # Ok(())
//! # }
//! ```
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

mod config;
mod derived_column;
mod derived_table;
mod progress;
mod projector;
mod runner;

pub use config::{RunnerConfig, MAX_BACKOFF_MS};
pub use derived_column::{DeriveValue, DerivedColumn};
pub use derived_table::{DeriveRow, DerivedTable};
pub use progress::{NoProgress, Phase, Progress, ProgressObserver};
pub use projector::{project_delete, project_upsert, Projector, SourceRowRef};
pub use runner::{CheckpointRunner, Pause, RunOutcome, ThreadPause};
