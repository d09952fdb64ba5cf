//! `sync-mariadb`: the MariaDB dialect of the syncstore storage layer
//! (MariaDB 10.6 or newer with InnoDB; tested on 10.11), built from
//! `docs/design/mariadb.md`.
//!
//! **Status: first increment, not yet a storage.** What exists and is
//! tested against a live server:
//!
//! - [`MariadbUrl`] (`mariadb://` or `mysql://` URLs) and [`MariadbConfig`];
//! - [`MariadbStorage::connect`]: an r2d2 pool of synchronous `mysql`
//!   connections with `CLIENT_FOUND_ROWS`, whose every connection sets
//!   `utf8mb4_nopad_bin`, the whole `sql_mode` ([`SQL_MODE`]), UTC and its
//!   lock waits, and is refused (`sync.storage.backend`) unless the server is
//!   MariaDB ≥ 10.6 and the session reads back `NO_BACKSLASH_ESCAPES`,
//!   `ANSI_QUOTES` and `utf8mb4`;
//! - [`MariadbSql`] / [`DIALECT`]: type mapping, backtick quoting, `?`
//!   placeholders, `COLUMN_TYPE` comparison, InnoDB table options;
//! - the base DDL and the writer-fence trigger
//!   ([`MariadbStorage::ensure_base_tables`]), catalog-driven and serialized
//!   by a per-database `GET_LOCK`;
//! - error classification (fence rejection, integrity errors by site,
//!   lock waits and deadlocks as `busy`, causes).
//!
//! Not yet: the `StorageBackend` / `TransactionBackend` implementations
//! (push, pull, migrations with the fence transaction and journal,
//! registered queries, introspection), the conformance harness and the
//! registry lines. Until then this crate is not a dialect a binary can
//! open.
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

mod bootstrap;
mod config;
mod dialect;
mod errors;
mod instance;
mod pool;
pub mod scratch;
mod session;

#[cfg(test)]
mod live_tests;

pub use bootstrap::{FENCE_TRIGGER_BODY, FENCE_TRIGGER_NAME};
pub use config::{
    MariadbConfig, MariadbUrl, DEFAULT_METADATA_LOCK_WAIT_SECONDS,
    DEFAULT_MIGRATION_LOCK_TIMEOUT_MS, DEFAULT_POOL_SIZE, DEFAULT_ROW_LOCK_WAIT_SECONDS,
};
pub use dialect::{MariadbSql, DIALECT, URL_SCHEMES};
pub use instance::MariadbStorage;
pub use session::{SessionFacts, SQL_MODE};
