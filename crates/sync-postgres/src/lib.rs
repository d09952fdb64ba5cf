//! `sync-postgres`: the Postgres dialect of the syncstore storage layer.
//!
//! This crate is for running the server-side storage of the sync protocol
//! on PostgreSQL (13 or newer): [`PostgresStorage`] implements every method
//! of [`sync_core::ServerStorage`] and [`sync_core::StorageTransaction`],
//! including every optional capability group, over an r2d2 pool of
//! synchronous `postgres` clients. It is not a general database toolkit, it
//! is not async, and it shares no dialect code with `sync-sqlite`.
//!
//! ```no_run
//! use sync_core::{EnsureOptions, ServerStorage};
//! use sync_postgres::{PostgresConfig, PostgresStorage};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let schema = sync_schema::compile(&sync_schema::parse_schema_json(
//!     r#"{"version": 1, "tables": [{"name": "todos", "primaryKey": "id",
//!         "columns": [{"name": "id", "type": "string"}, {"name": "list_id", "type": "string"}],
//!         "scopes": ["list:{list_id}"]}]}"#,
//! )?)?;
//! let config = PostgresConfig {
//!     schema: Some("app".into()), // every pooled connection uses `SET search_path TO "app"`
//!     ..PostgresConfig::default()
//! };
//! let storage = PostgresStorage::connect("postgres://app@db.internal:5432/app", config)?;
//! storage.ensure_schema(&schema, &EnsureOptions::default())?;
//! assert_eq!(storage.ensured_version(), Some(1));
//! # Ok(())
//! # }
//! ```
//!
//! How it maps the contract onto Postgres (`dialects.md`):
//!
//! - one pooled connection per transaction, `BEGIN ISOLATION LEVEL READ
//!   COMMITTED` explicitly; multi-statement pool reads and registered queries
//!   in `REPEATABLE READ READ ONLY`;
//! - the partition write lock is the `sync_partitions` row (`FOR UPDATE`),
//!   so partitions never contend; a migration takes `LOCK TABLE
//!   sync_partitions IN EXCLUSIVE MODE`;
//! - `commit_seq` is allocated by one statement that also inserts the commit
//!   (where the database-side writer-fence trigger fires), its changes,
//!   change-scope entries and tombstones;
//! - text keys are `COLLATE "C"` so every ordering is byte-wise UTF-8;
//! - prepared statements are cached per pooled connection, and the
//!   statements a push sends in simple-query messages are named server-side
//!   statements (`PREPARE`d once per connection, then `EXECUTE`d).
//!
//! A single-row push (`begin`, `lock_partition_for_push`, `read_serve_gate`,
//! `get_push_result`, `upsert_row`, `append_commit`, `put_push_result`,
//! `commit`) costs four round trips once its statements are cached: the
//! deferred `BEGIN`, the lock, the savepoint, the fence read and the gate
//! read travel in one message, the gate call is answered from it, the row
//! upsert maintains the scope index in the same statement, and the append
//! (its sequence known from the locked counter) and the push-result insert
//! travel with the `COMMIT`.
//!
//! Through the prelude (`begin_push`, as `sync-engine` pushes) it costs
//! two: the lock message also reads the push result and the candidate
//! rows, and with `PushPreludeRequest::deferred_violations` the row upsert
//! (a named statement `EXECUTE`d with literal arguments) travels with the
//! append, the push result and the `COMMIT`. A constraint violation of
//! that upsert is then reported by `commit_push`, which finalizes the
//! rejection on the same transaction (or by the call that sends the
//! upsert first, with the upsert's `op_index`).
//!
//! With the `conformance` feature, `harness::PostgresHarness` runs the
//! dialect-agnostic conformance suite against a live server. With the
//! `fault-injection` feature (tests only, never in a shipped binary),
//! `PostgresStorage::set_fault_plan` makes a chosen statement fail or
//! its connection die (`sync_core::fault`).
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

/// The SQL text of hot paths, for plan inspection by this crate's tests
/// (the conformance harness explains the same statements).
pub mod hot_path_sql {
    pub use crate::round_entry::entry_read_sql;
    pub use crate::table_sql::{
        index_lookup_sql, rows_by_ids_sql, scan_page_sql, scan_walk_sql, MERGED_SCAN_VALUES,
        SCAN_DENSE_MATCHES, SCAN_PROBE_ROWS,
    };
    pub use crate::window::{window_page_sql, MERGED_WINDOW_VALUES};
}

mod admin;
mod barrier_guards;
mod blobs;
mod bootstrap;
mod checkpoints;
mod citus;
mod clients;
mod commit_feed;
mod commit_log;
mod config;
mod coverage;
mod dialect;
mod ensure;
mod errors;
#[cfg(feature = "fault-injection")]
mod faults;
mod fence_trigger;
mod gate;
mod inspect;
mod instance;
mod introspect;
mod json;
mod marker;
mod migrate;
mod named;
mod partition_lock;
mod pool;
mod prelude;
mod pruning;
mod push_results;
mod query;
mod query_values;
mod reactions;
mod registry;
mod rewrites;
mod round_entry;
mod routed_writes;
mod rows;
mod scans;
mod segments;
mod session;
mod sql;
mod state;
mod storage;
mod table_sql;
mod transaction;
mod values;
mod window;

#[cfg(feature = "conformance")]
pub mod harness;

pub mod reference_dump;

pub use citus::{CitusPlacement, DistributeOptions, DistributeReport};
pub use config::{PostgresConfig, DEFAULT_MIGRATION_LOCK_TIMEOUT_MS};
pub use dialect::{PostgresSql, DIALECT, URL_SCHEMES};
pub use instance::PostgresStorage;

/// A driver error of a connection a tool opened itself (beside a
/// [`PostgresStorage`]) as the storage reports it: `sync.storage.backend`
/// with `details.cause` classified exactly as the storage classifies its
/// own (`unreachable`, `auth_failed`, `database_missing`, `read_only`, …),
/// the driver error kept as the source.
pub fn backend_error(err: postgres::Error) -> sync_core::Error {
    errors::connect_error(err)
}
