//! The per-check context: one fresh database, a virtual clock, and helpers
//! to open storage instances and raw access on it.

use std::sync::Arc;

use sync_core::{Clock, CompiledSchema, EnsureOptions, ManualClock, ServerStorage};

use crate::check::{CheckResult, Failure};
use crate::harness::{DbHandle, Harness, PoolLimits, RawAccess};

/// Fixed clock value every check starts at (`conformance-checklist.md` §0.3).
pub const NOW: i64 = 1_700_000_000_000;

/// Everything one check works with. The database is created on first use
/// and removed when the context drops.
pub struct Ctx<'h> {
    harness: &'h dyn Harness,
    db: Option<DbHandle>,
    /// The virtual clock shared by every storage instance this context opens.
    pub clock: Arc<ManualClock>,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("dialect", &self.harness.dialect())
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl<'h> Ctx<'h> {
    /// A context for one check.
    pub fn new(harness: &'h dyn Harness) -> Self {
        Self {
            harness,
            db: None,
            clock: Arc::new(ManualClock::new(NOW)),
        }
    }

    /// The harness under test.
    pub fn harness(&self) -> &'h dyn Harness {
        self.harness
    }

    /// The dialect name (reports).
    pub fn dialect(&self) -> &'static str {
        self.harness.dialect()
    }

    /// The harness's SQL dialect.
    pub fn sql_dialect(&self) -> sync_schema::Dialect {
        self.harness.sql_dialect()
    }

    /// The harness's declared properties.
    pub fn properties(&self) -> crate::Properties {
        self.harness.properties()
    }

    /// The check's database (created on first use).
    pub fn db(&mut self) -> CheckResult<&DbHandle> {
        if self.db.is_none() {
            let db = self
                .harness
                .create_database()
                .map_err(|e| Failure::new(format!("create_database failed: {e:?}")))?;
            self.db = Some(db);
        }
        self.db
            .as_ref()
            .ok_or_else(|| Failure::new("database missing"))
    }

    /// Drops the check's database; the next use creates a fresh one.
    pub fn reset_db(&mut self) {
        self.db = None;
    }

    /// A second, independent database (for checks that need two).
    pub fn extra_db(&self) -> CheckResult<DbHandle> {
        self.harness
            .create_database()
            .map_err(|e| Failure::new(format!("create_database failed: {e:?}")))
    }

    /// A new storage instance (own pools and memo) on the check's database.
    pub fn open(&mut self) -> CheckResult<Arc<dyn ServerStorage>> {
        let clock: Arc<dyn Clock> = self.clock.clone();
        let harness = self.harness;
        let db = self.db()?;
        harness
            .open(db, clock)
            .map_err(|e| Failure::new(format!("open failed: {e:?}")))
    }

    /// A new storage instance with small pools.
    pub fn open_with(&mut self, limits: PoolLimits) -> CheckResult<Arc<dyn ServerStorage>> {
        let clock: Arc<dyn Clock> = self.clock.clone();
        let harness = self.harness;
        let db = self.db()?;
        harness
            .open_with(db, clock, limits)
            .map_err(|e| Failure::new(format!("open_with failed: {e:?}")))
    }

    /// A new storage instance on which `schema` has been ensured (no declarations).
    pub fn ensured(&mut self, schema: &CompiledSchema) -> CheckResult<Arc<dyn ServerStorage>> {
        let storage = self.open()?;
        storage
            .ensure_schema(schema, &EnsureOptions::default())
            .map_err(|e| {
                Failure::new(format!("ensure_schema(v{}) failed: {e:?}", schema.version))
            })?;
        Ok(storage)
    }

    /// Raw access to the check's database.
    pub fn raw(&mut self) -> CheckResult<Box<dyn RawAccess>> {
        let harness = self.harness;
        let db = self.db()?;
        harness
            .raw(db)
            .map_err(|e| Failure::new(format!("raw access failed: {e:?}")))
    }
}
