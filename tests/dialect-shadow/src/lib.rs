//! `shadow`: a dialect defined outside the built-in dialect crates, as a
//! dialect author would write one, to prove the extension point. It stores
//! through the SQLite storage but is registered under its own name with its
//! own [`SqlDialect`] value, [`Properties`] and registry [`ENTRY`]; no
//! shared crate knows it exists.
//!
//! What an author of a real dialect replaces: [`ShadowSql`] (type names,
//! placeholders, DDL overrides), the storage behind [`ShadowHarness`], the
//! [`RawAccess`] implementation and the declared [`PROPERTIES`].
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

use std::path::Path;
use std::sync::Arc;

use sync_conformance::{
    DbHandle, GroupedStorage, Harness, HarnessEntry, HarnessEnv, PoolLimits, Properties, RawAccess,
};
use sync_core::{Clock, ColumnType, IndexDef, Result, ServerStorage};
use sync_schema::{Dialect, InternalRole, SqlDialect};
use sync_sqlite::harness::SqliteHarness;
use sync_sqlite::SqliteSql;

/// The shadow dialect's SQL rules: SQLite's type map, placeholders and
/// declared-index key (the storage it wraps creates its indexes) under the
/// name `shadow`. Every other DDL method keeps the trait's default body.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShadowSql;

impl SqlDialect for ShadowSql {
    fn name(&self) -> &'static str {
        "shadow"
    }

    fn sql_type(&self, column_type: ColumnType) -> &'static str {
        SqliteSql.sql_type(column_type)
    }

    fn internal_type(&self, role: InternalRole) -> &'static str {
        SqliteSql.internal_type(role)
    }

    fn placeholder(&self, n: usize) -> String {
        SqliteSql.placeholder(n)
    }

    fn declared_index_columns(&self, index: &IndexDef) -> Vec<String> {
        SqliteSql.declared_index_columns(index)
    }
}

/// The shadow dialect value.
pub const DIALECT: Dialect = Dialect::new(&ShadowSql);

/// URL schemes of shadow databases (`shadow:PATH`).
pub const URL_SCHEMES: &[&str] = &["shadow"];

/// What the shadow harness declares: the properties of the storage it
/// wraps (one writer per file, plans by shape, transactional DDL, an
/// installable outdated fence trigger, reference files, integer booleans).
pub const PROPERTIES: Properties = sync_sqlite::harness::PROPERTIES;

/// The shadow [`Harness`]: the SQLite harness under the shadow dialect.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShadowHarness;

impl Harness for ShadowHarness {
    fn sql_dialect(&self) -> Dialect {
        DIALECT
    }

    fn properties(&self) -> Properties {
        PROPERTIES
    }

    fn create_database(&self) -> Result<DbHandle> {
        SqliteHarness::DEFAULT.create_database()
    }

    fn open(&self, db: &DbHandle, clock: Arc<dyn Clock>) -> Result<Arc<dyn ServerStorage>> {
        SqliteHarness::DEFAULT.open(db, clock)
    }

    fn open_with(
        &self,
        db: &DbHandle,
        clock: Arc<dyn Clock>,
        limits: PoolLimits,
    ) -> Result<Arc<dyn ServerStorage>> {
        SqliteHarness::DEFAULT.open_with(db, clock, limits)
    }

    fn open_grouped(&self, db: &DbHandle, clock: Arc<dyn Clock>) -> Result<GroupedStorage> {
        SqliteHarness::DEFAULT.open_grouped(db, clock)
    }

    fn raw(&self, db: &DbHandle) -> Result<Box<dyn RawAccess>> {
        SqliteHarness::DEFAULT.raw(db)
    }

    fn load_reference(&self, db: &DbHandle, fixture_dir: &Path, set: &str) -> Result<()> {
        SqliteHarness::DEFAULT.load_reference(db, fixture_dir, set)
    }
}

/// The registry constructor: no server needed.
pub fn construct(_env: &HarnessEnv) -> std::result::Result<Box<dyn Harness>, String> {
    Ok(Box::new(ShadowHarness))
}

/// The registry entry (`cargo xtask conformance --dialect shadow`).
pub const ENTRY: HarnessEntry = HarnessEntry {
    sql: DIALECT,
    url_schemes: URL_SCHEMES,
    hooks: construct,
};
