//! The conformance harness of the Postgres dialect (feature `conformance`).
//!
//! Every database is a fresh schema `conf_<random hex>` on the server named
//! by `SYNCSTORE_PG_URL` (default `postgres://postgres@127.0.0.1:5432/test`),
//! dropped with `CASCADE` when its handle drops, so checks run in parallel.
//! Storage instances connect with `search_path` set to that schema; raw
//! access is a plain `postgres::Client` with the same `search_path`.

mod dml_role;
mod explain;
pub mod mixed_fleet;
mod old_writer;
mod raw;

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use postgres::{Client, NoTls};
use sync_conformance::{DbHandle, GroupedStorage, Harness, PoolLimits, RawAccess, WriterProbe};
use sync_core::{Clock, Error, ErrorCode, Result, ServerStorage};

use crate::pool::search_path_statement;
use crate::sql::quote_ident;
use crate::{PostgresConfig, PostgresStorage};

/// Default server of the harness and the tests.
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The server URL: `SYNCSTORE_PG_URL`, else [`DEFAULT_PG_URL`].
pub fn pg_url_from_env() -> String {
    std::env::var("SYNCSTORE_PG_URL").unwrap_or_else(|_| DEFAULT_PG_URL.to_owned())
}

/// Why a server could not be reached, with how to start one.
#[derive(Debug)]
pub struct Unreachable {
    url: String,
    cause: postgres::Error,
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot reach PostgreSQL at {} ({}); start a server, e.g. `pg_ctlcluster <version> main start`, \
             or set SYNCSTORE_PG_URL to a reachable one",
            self.url, self.cause
        )
    }
}

impl std::error::Error for Unreachable {}

/// Connects a raw client, failing with a message that says how to start a server.
pub fn connect_client(url: &str) -> std::result::Result<Client, Unreachable> {
    Client::connect(url, NoTls).map_err(|cause| Unreachable {
        url: url.to_owned(),
        cause,
    })
}

/// A raw client with `search_path` set to `schema`.
pub(crate) fn schema_client(url: &str, schema: &str) -> Result<Client> {
    let mut client = connect_client(url).map_err(Error::backend)?;
    client
        .batch_execute(&search_path_statement(schema))
        .map_err(Error::backend)?;
    Ok(client)
}

/// Where a Citus coordinator for the suite is named (never defaulted: a
/// run without it says so and runs nothing on Citus).
pub const CITUS_URL_ENV: &str = "SYNCSTORE_CITUS_URL";

/// The Citus coordinator of `SYNCSTORE_CITUS_URL`, if set.
pub fn citus_url_from_env() -> Option<String> {
    std::env::var(CITUS_URL_ENV)
        .ok()
        .filter(|url| !url.is_empty())
}

/// How each check's schema is laid out on a Citus coordinator
/// (`docs/scale-out.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CitusLayout {
    /// Schema-based sharding: the schema is created with
    /// `citus.enable_schema_based_sharding = on`, so Citus places it (and
    /// every table created in it) on one node.
    Schemas,
    /// Row-based: the bootstrap that creates the storage tables distributes
    /// them by partition (`PostgresStorage::distribute`'s layout) with this
    /// many shards.
    Rows {
        /// Shards of each schema's colocation group.
        shard_count: u32,
    },
}

impl CitusLayout {
    /// `schemas` or `rows`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Schemas => "schemas",
            Self::Rows { .. } => "rows",
        }
    }
}

/// The Postgres [`Harness`].
#[derive(Debug, Clone)]
pub struct PostgresHarness {
    url: String,
    citus: Option<CitusLayout>,
}

impl Default for PostgresHarness {
    fn default() -> Self {
        Self::new()
    }
}

impl PostgresHarness {
    /// A harness on the server of `SYNCSTORE_PG_URL` (or the default URL).
    pub fn new() -> Self {
        Self::with_url(pg_url_from_env())
    }

    /// A harness on an explicit server.
    pub fn with_url(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            citus: None,
        }
    }

    /// A harness on a Citus coordinator with each check's schema laid out
    /// as `layout`.
    pub fn citus(url: impl Into<String>, layout: CitusLayout) -> Self {
        Self {
            url: url.into(),
            citus: Some(layout),
        }
    }

    /// The server URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Fails with a loud, actionable error when the server is unreachable.
    pub fn check_reachable(&self) -> std::result::Result<(), Unreachable> {
        connect_client(&self.url).map(drop)
    }

    fn schema_of(db: &DbHandle) -> Result<&SchemaHandle> {
        db.state::<SchemaHandle>()
            .ok_or_else(|| Error::new(ErrorCode::Backend).detail("reason", "foreign_db_handle"))
    }

    fn open_config(
        &self,
        db: &DbHandle,
        clock: Arc<dyn Clock>,
        limits: Option<PoolLimits>,
    ) -> Result<PostgresStorage> {
        let handle = Self::schema_of(db)?;
        let mut config = check_config(&handle.schema, clock);
        if let Some(CitusLayout::Rows { shard_count }) = self.citus {
            config.citus_distribution = Some(crate::DistributeOptions {
                shard_count: Some(shard_count),
            });
        }
        if let Some(limits) = limits {
            config.pool_size = limits.size;
            config.pool_wait_ms = limits.wait_ms;
        }
        PostgresStorage::connect(&self.url, config)
    }
}

/// A schema created for one check; dropped with `CASCADE` on drop.
#[derive(Debug)]
pub struct SchemaHandle {
    url: String,
    schema: String,
}

impl SchemaHandle {
    /// The schema name.
    pub fn schema(&self) -> &str {
        &self.schema
    }
}

impl Drop for SchemaHandle {
    fn drop(&mut self) {
        if let Ok(mut client) = connect_client(&self.url) {
            let _ = client.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                quote_ident(&self.schema)
            ));
        }
    }
}

static SCHEMA_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh schema name: `conf_` + hex of time, process id and a counter.
pub fn fresh_schema_name(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = SCHEMA_COUNTER.fetch_add(1, Ordering::SeqCst);
    format!(
        "{prefix}_{:x}{:x}{:x}",
        nanos & 0xffff_ffff_ffff,
        std::process::id(),
        n
    )
}

/// Creates a fresh schema on `url` and returns its handle.
pub fn create_schema(url: &str, prefix: &str) -> Result<SchemaHandle> {
    create_schema_with(url, prefix, "")
}

/// Creates a fresh schema on `url` after the session statements `setup`.
fn create_schema_with(url: &str, prefix: &str, setup: &str) -> Result<SchemaHandle> {
    let mut client = connect_client(url).map_err(Error::backend)?;
    let schema = fresh_schema_name(prefix);
    client
        .batch_execute(&format!("{setup}CREATE SCHEMA {}", quote_ident(&schema)))
        .map_err(Error::backend)?;
    Ok(SchemaHandle {
        url: url.to_owned(),
        schema,
    })
}

/// Postgres has no single writer and no commit group: nothing queues at
/// `begin`, so there is nothing to wait for; faults go to the instance.
struct PostgresProbe(Arc<PostgresStorage>);

impl WriterProbe for PostgresProbe {
    fn await_queued(&self, _transactions: usize, _writes: usize) -> Result<()> {
        Ok(())
    }

    fn set_fault_plan(&self, plan: Option<Arc<sync_core::fault::FaultPlan>>) -> Result<()> {
        self.0.set_fault_plan(plan);
        Ok(())
    }
}

/// What the Postgres harness declares: per-partition push locks,
/// statistics-driven plans, transactional DDL, `"C"` key collations under
/// control, fence-trigger tampering, reference dumps and start replay,
/// roles, real booleans, JSONB (no `\u0000`).
pub const PROPERTIES: sync_conformance::Properties = sync_conformance::Properties {
    write_locking: sync_conformance::WriteLocking::PerPartition,
    planner: Some(sync_conformance::Planner::ByStatistics),
    transactional_ddl: true,
    key_collation_control: true,
    outdated_trigger_install: false,
    trigger_tamper: true,
    reference_loading: true,
    reference_start_replay: true,
    database_roles: true,
    booleans: sync_conformance::BooleanValues::Booleans,
    json_nul_projects_null: true,
    prefix_lookup_indexes: false,
};

/// The constructor of the dialect registry ([`sync_conformance::HarnessFn`]):
/// the server of `env.server_url`, else `SYNCSTORE_PG_URL`, else the
/// default; an unreachable server is an error saying how to start one.
pub fn construct(
    env: &sync_conformance::HarnessEnv,
) -> std::result::Result<Box<dyn Harness>, String> {
    let harness = match &env.server_url {
        Some(url) => PostgresHarness::with_url(url.clone()),
        None => PostgresHarness::new(),
    };
    harness.check_reachable().map_err(|e| e.to_string())?;
    Ok(Box::new(harness))
}

/// The registry entry of `cargo xtask conformance`.
pub const ENTRY: sync_conformance::HarnessEntry = sync_conformance::HarnessEntry {
    sql: crate::DIALECT,
    url_schemes: crate::URL_SCHEMES,
    hooks: construct,
};

impl Harness for PostgresHarness {
    fn sql_dialect(&self) -> sync_schema::Dialect {
        crate::DIALECT
    }

    fn properties(&self) -> sync_conformance::Properties {
        PROPERTIES
    }

    fn create_database(&self) -> Result<DbHandle> {
        let setup = match self.citus {
            Some(CitusLayout::Schemas) => "SET citus.enable_schema_based_sharding = on; ",
            _ => "",
        };
        let handle = create_schema_with(&self.url, "conf", setup)?;
        Ok(DbHandle::new(handle.schema.clone(), handle))
    }

    fn open(&self, db: &DbHandle, clock: Arc<dyn Clock>) -> Result<Arc<dyn ServerStorage>> {
        Ok(Arc::new(self.open_config(db, clock, None)?))
    }

    fn open_with(
        &self,
        db: &DbHandle,
        clock: Arc<dyn Clock>,
        limits: PoolLimits,
    ) -> Result<Arc<dyn ServerStorage>> {
        Ok(Arc::new(self.open_config(db, clock, Some(limits))?))
    }

    fn open_grouped(&self, db: &DbHandle, clock: Arc<dyn Clock>) -> Result<GroupedStorage> {
        let storage = Arc::new(self.open_config(db, clock, None)?);
        Ok(GroupedStorage {
            storage: storage.clone(),
            probe: Box::new(PostgresProbe(storage)),
        })
    }

    fn raw(&self, db: &DbHandle) -> Result<Box<dyn RawAccess>> {
        let handle = Self::schema_of(db)?;
        Ok(Box::new(raw::PgRaw::new(
            &self.url,
            &handle.schema,
            self.citus.is_some(),
        )?))
    }

    fn load_reference(&self, db: &DbHandle, fixture_dir: &Path, set: &str) -> Result<()> {
        let handle = Self::schema_of(db)?;
        crate::reference_dump::load_into_schema(
            &self.url,
            &handle.schema,
            &fixture_dir.join(format!("{set}.postgres.sql")),
        )
    }
}

/// The configuration every storage of a check starts from: the check's
/// schema and the check's clock (installation times, activity times).
fn check_config(schema: &str, clock: Arc<dyn Clock>) -> PostgresConfig {
    PostgresConfig {
        schema: Some(schema.to_owned()),
        clock,
        ..PostgresConfig::default()
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn a_check_storage_runs_in_its_schema_on_its_clock() {
        let config = check_config("c_1", Arc::new(sync_core::ManualClock::new(42)));
        assert_eq!(config.schema.as_deref(), Some("c_1"));
        assert_eq!(config.clock.now_ms(), 42);
    }
}
