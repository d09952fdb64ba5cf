//! `sync-sqlite`: the SQLite dialect of the syncstore storage layer — a
//! complete implementation of [`sync_core::ServerStorage`] and
//! [`sync_core::StorageTransaction`] on one SQLite database file.
//!
//! ```
//! use sync_core::{EnsureOptions, ServerStorage};
//! use sync_sqlite::{SqliteConfig, SqliteStorage};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let schema = sync_schema::compile(&sync_schema::parse_schema_json(
//!     r#"{"version": 1, "tables": [{"name": "todos", "primaryKey": "id",
//!         "columns": [{"name": "id", "type": "string"}, {"name": "list_id", "type": "string"}],
//!         "scopes": ["list:{list_id}"]}]}"#,
//! )?)?;
//! let dir = tempfile::tempdir()?;
//! let storage = SqliteStorage::open(dir.path().join("app.db"), SqliteConfig::default())?;
//! // Creates the tables at a fresh file, verifies (or migrates) otherwise.
//! storage.ensure_schema(&schema, &EnsureOptions::default())?;
//! assert_eq!(storage.ensured_version(), Some(1));
//! assert!(storage.capabilities().reactions);
//! # Ok(())
//! # }
//! ```
//!
//! It is for embedding the server storage in a single process (or a few
//! processes sharing one file): every write of every partition is
//! serialized through one writer connection under `BEGIN IMMEDIATE`, reads
//! run on a reader pool in WAL mode and see committed state only. It is not
//! for in-memory databases (a writer and readers cannot share one without
//! shared-cache locking) and not a general SQLite toolkit: every statement
//! it issues is one of the shapes pinned by the specification
//! (`tables.md`, `dialects.md`).
//!
//! With the `fault-injection` feature (tests only, never in a shipped
//! binary), `SqliteStorage::set_fault_plan` makes a chosen statement fail
//! (`sync_core::fault`); every statement passes through one seam for it.
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

mod admin;
pub mod barrier_guards;
mod blobs;
mod bootstrap;
mod checkpoints;
mod clients;
mod commit_log;
mod companions;
mod config;
mod ddl;
mod dialect;
mod ensure;
mod errors;
#[cfg(feature = "fault-injection")]
mod faults;
mod file_state;
mod gate;
mod inspect;
mod instance;
mod introspect;
mod pools;
mod pruning;
mod push_results;
mod query;
mod reactions;
mod reads;
mod registry;
mod round_entry;
mod rows;
mod scopes;
mod seam;
mod segments;
mod sql;
mod state;
mod storage;
mod transaction;
mod values;
mod wal;
mod writer;

#[cfg(feature = "conformance")]
pub mod harness;

pub use config::{
    valid_page_size, GroupCommit, SqliteConfig, Synchronous, WalCheckpoints,
    DEFAULT_READER_MMAP_SIZE, MAX_PAGE_SIZE, MIN_PAGE_SIZE,
};
pub use dialect::{SqliteSql, DIALECT, URL_SCHEMES};
pub use instance::SqliteStorage;
pub use transaction::SqliteTransaction;
pub use wal::WalCheckpointReport;

/// The SQL text of the hot paths, shared with plan inspection (the
/// conformance harness runs `EXPLAIN QUERY PLAN` on exactly these).
pub mod hot_path_sql {
    pub use crate::blobs::BLOB_CANDIDATES;
    pub use crate::bootstrap::{FENCE_TRIGGER_NAME, FENCE_TRIGGER_SQL};
    pub use crate::checkpoints::{coverage_probe_sql, coverage_seq_sql};
    pub use crate::gate::SERVE_GATE;
    pub use crate::pools::stable_plans;
    pub use crate::reads::{
        index_lookup_sql, scan_candidates_sql, scan_page_sql, window_candidates_sql,
        window_page_sql, MERGED_SCAN_VALUES, MERGED_WINDOW_VALUES, SCAN_DENSE_MATCHES,
        SCAN_PROBE_ROWS,
    };
    pub use crate::scopes::DELETE_ROW_SCOPES_EXACT;
}
