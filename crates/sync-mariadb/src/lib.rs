//! `sync-mariadb`: the MariaDB dialect of the syncstore storage layer
//! (MariaDB 10.6 or newer with InnoDB; tested on 10.11), built from
//! `docs/design/mariadb.md`.
//!
//! **Status: the whole conformance suite passes (the few gaps below are
//! outside it).** What exists and is tested against a live server:
//!
//! - [`MariadbUrl`] (`mariadb://` or `mysql://` URLs) and [`MariadbConfig`];
//! - [`MariadbStorage::connect`]: an r2d2 pool of synchronous `mysql`
//!   connections with `CLIENT_FOUND_ROWS`, whose every connection sets
//!   `utf8mb4_nopad_bin`, the whole `sql_mode` ([`SQL_MODE`]), UTC, its
//!   lock waits and `READ COMMITTED` (once per session, not per
//!   transaction), and is refused (`sync.storage.backend`) unless the server
//!   is MariaDB ≥ 10.6 and the session reads back `NO_BACKSLASH_ESCAPES`,
//!   `ANSI_QUOTES`, `utf8mb4` and `READ-COMMITTED`;
//! - [`MariadbSql`] / [`DIALECT`]: type mapping, backtick quoting, `?`
//!   placeholders, `COLUMN_TYPE` comparison, InnoDB table options, declared
//!   indexes as prefix lookup indexes plus full-value uniqueness indexes;
//! - the base DDL and the writer-fence trigger, catalog-driven and
//!   serialized by a per-database `GET_LOCK`;
//! - error classification (fence rejection, integrity errors by site,
//!   lock waits and deadlocks as `busy`, causes);
//! - `ensure_schema`: the same-version path (layouts, physical checks
//!   through `information_schema`) and the bump under the migration lock
//!   with a preflight decode scan, the fence transaction, journaled DDL,
//!   journaled keyset row rewrites, the finishing transaction and
//!   roll-forward of an open journal;
//! - the push path ([`MariadbTransaction`]: the meta-share / partition-row
//!   lock, the two-statement row upsert with scope-index maintenance,
//!   deletes and tombstones, allocation by `INSERT … RETURNING`, push
//!   results, rejection finalization at the savepoint, client records) and
//!   the pull reads (rows, scope scans, the commit window, the newest
//!   scoped change, client records and cursors, the registry, the gate);
//! - epoch-fenced pruning, the horizon and rotation under the partition
//!   lock; checkpoint declaration, claim, advance and activation with
//!   source coverage (RFC 0007);
//! - all five capability groups: `Reactions` (claims with `FOR UPDATE SKIP
//!   LOCKED`), `BlobRefs`, `Admin`, `IndexScan` and `AuthoritativeQuery`
//!   (registered queries with MariaDB's extra refused constructs:
//!   executable comments, `#` comments, `--` without a space, session
//!   variables, backslashes in literals); the bootstrap segment store
//!   (`_syncstore_segments`) and the fence-trigger state read;
//! - the migration barrier's rules in the database ([`barrier_guards`]):
//!   guard triggers, installed and repaired by the bootstrap, that refuse
//!   any writer a lowered or removed fence, and a checkpoint activated or
//!   deleted by a session not logged in as the account that installed them;
//! - fault injection at the database seam (feature `fault-injection`,
//!   tests only: `MariadbStorage::set_fault_plan`), each fault a real
//!   server error (`SIGNAL`) or a killed connection.
//!
//! With the `conformance` feature, `harness::MariadbHarness` runs the
//! conformance suite (`cargo xtask conformance --dialect mariadb`, and
//! `tests/conformance.rs` under `cargo xtask test`); every check passes,
//! none is skipped.
//!
//! [`MariadbStorage::connect_read_only`] opens a database for inspection
//! (read-only sessions, nothing created), and the storage offers
//! `sync_schema::ObserveTables`: `syncstore --db mariadb://…` (or
//! `mysql://…`) runs every command on this dialect, `demo` included.
//!
//! The round entry (`enter_round`) is one statement (plus the registry
//! touch when the entry is missing or stale), and the push prelude
//! (`begin_push`) the lock, the savepoint and one read.
//!
//! Not yet: key-length validation (`key_too_long`) and plan explanations
//! (`explain`).
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

mod admin;
pub mod barrier_guards;
mod bootstrap;
mod checkpoints;
mod commit_log;
mod config;
pub mod databases;
mod dialect;
mod ensure;
mod ensured;
mod errors;
#[cfg(feature = "conformance")]
mod explain;
#[cfg(feature = "fault-injection")]
mod faults;
mod gate;
#[cfg(feature = "conformance")]
pub mod harness;
mod instance;
mod introspect;
mod lookups;
mod pool;
mod prelude;
mod push_lock;
mod query;
mod reactions;
mod reads;
mod records;
mod rewrite;
mod round_entry;
mod rows;
mod scans;
pub mod scratch;
mod segments;
mod session;
mod shape_probe;
mod storage;
mod transaction;
mod values;
mod windows;

#[cfg(test)]
mod live_tests;
#[cfg(test)]
mod walk_plans;

pub use bootstrap::{FENCE_TRIGGER_BODY, FENCE_TRIGGER_NAME};
pub use config::{
    MariadbConfig, MariadbUrl, DEFAULT_METADATA_LOCK_WAIT_SECONDS,
    DEFAULT_MIGRATION_LOCK_TIMEOUT_MS, DEFAULT_POOL_SIZE, DEFAULT_ROW_LOCK_WAIT_SECONDS,
};
pub use dialect::{MariadbSql, DIALECT, URL_SCHEMES};
pub use ensured::{Ensured, TableSql};
pub use instance::MariadbStorage;
pub use session::{SessionFacts, SQL_MODE};
pub use transaction::MariadbTransaction;
