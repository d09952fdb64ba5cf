//! What a harness declares about its database, and what a check needs of
//! it (`conformance-checklist.md` §0.2). A check is selected by the
//! properties the harness declares, never by the dialect's name: a new
//! dialect runs every check its properties allow.

/// How concurrent pushes exclude each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteLocking {
    /// One push lock per partition: pushes to different partitions run
    /// concurrently; a prune, a declare or a warm ensure does not wait for a
    /// push to another partition (C-037, C-186, C-302, C-310).
    PerPartition,
    /// One writer for the whole database: a push to another partition
    /// waits for the open write transaction (C-303).
    WholeDatabase,
}

/// How the `plans` group inspects the hot paths through [`crate::RawAccess::explain`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Planner {
    /// Plans are fixed by the query shape and the indexes: they are read on
    /// the small populated fixture as is (C-240, C-326, C-327).
    ByShape,
    /// Plans depend on statistics: they are read after analysing 2 000+
    /// rows with full scans discouraged (C-328, C-329).
    ByStatistics,
}

/// How a boolean projection column reads back through
/// `query_authoritative` (C-117).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BooleanValues {
    /// `SqlValue::Integer(0 | 1)`.
    Integers,
    /// `SqlValue::Bool`.
    Booleans,
}

/// The properties of a harness's database that decide which checks it runs
/// and what some checks expect. Every built-in and third-party harness
/// declares all of them ([`crate::Harness::properties`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Properties {
    /// How pushes lock.
    pub write_locking: WriteLocking,
    /// How plans are inspected; `None` when the harness cannot explain.
    pub planner: Option<Planner>,
    /// DDL and data changes commit or roll back together, so a schema bump
    /// is one transaction (C-038, C-269, C-270, C-308, C-320, C-322).
    pub transactional_ddl: bool,
    /// Key columns carry an explicit collation the storage checks and
    /// upgrades ([`sync_schema::SqlDialect::key_collation`]); the raw access
    /// implements `set_key_collation` and `column_collation` (C-033).
    pub key_collation_control: bool,
    /// The raw access can install an outdated fence-trigger definition that
    /// the next open replaces (`install_outdated_fence_trigger`, C-036).
    pub outdated_trigger_install: bool,
    /// The raw access can drop or disable the fence trigger behind the
    /// storage's back (`tamper_fence_trigger`, C-332).
    pub trigger_tamper: bool,
    /// [`crate::Harness::load_reference`] restores a reference-written database.
    pub reference_loading: bool,
    /// The raw access replays the reference release's start statements
    /// (`replay_reference_start`; with `reference_loading`: C-330, C-331, C-333).
    pub reference_start_replay: bool,
    /// The database has roles with their own schemas
    /// (`insert_commit_as_shadowing_role`, C-334).
    pub database_roles: bool,
    /// How booleans read back (C-117).
    pub booleans: BooleanValues,
    /// A `json` value holding `\u0000` cannot be stored as JSON, so its
    /// projection is NULL while the payload keeps it (C-118).
    pub json_nul_projects_null: bool,
    /// The lookup index of a declared index over variable-width columns
    /// indexes prefixes of their values (MariaDB: a B-tree key has at most
    /// 3 072 bytes), so it orders the matches by prefix, not by row id: a
    /// lookup page sorts the rows whose values equal the lookup's — a cost
    /// bounded by one value's matches, not by the table. C-328 then asks
    /// index lookups to search the declared index, not to stream.
    pub prefix_lookup_indexes: bool,
}

/// What a check needs of the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Requires {
    /// Nothing: every harness runs it.
    Nothing,
    /// [`WriteLocking::PerPartition`].
    PerPartitionLocking,
    /// [`WriteLocking::WholeDatabase`].
    WholeDatabaseLocking,
    /// [`Planner::ByShape`].
    PlansByShape,
    /// [`Planner::ByStatistics`].
    PlansByStatistics,
    /// [`Properties::transactional_ddl`].
    TransactionalDdl,
    /// [`Properties::key_collation_control`].
    KeyCollationControl,
    /// [`Properties::outdated_trigger_install`].
    OutdatedTriggerInstall,
    /// [`Properties::trigger_tamper`].
    TriggerTamper,
    /// [`Properties::reference_loading`] and [`Properties::reference_start_replay`].
    ReferenceStartReplay,
    /// [`Properties::database_roles`].
    DatabaseRoles,
    /// [`Properties::json_nul_projects_null`].
    JsonNulProjectsNull,
}

impl Requires {
    /// Whether a harness with `properties` runs a check needing this.
    pub fn met_by(self, p: &Properties) -> bool {
        match self {
            Self::Nothing => true,
            Self::PerPartitionLocking => p.write_locking == WriteLocking::PerPartition,
            Self::WholeDatabaseLocking => p.write_locking == WriteLocking::WholeDatabase,
            Self::PlansByShape => p.planner == Some(Planner::ByShape),
            Self::PlansByStatistics => p.planner == Some(Planner::ByStatistics),
            Self::TransactionalDdl => p.transactional_ddl,
            Self::KeyCollationControl => p.key_collation_control,
            Self::OutdatedTriggerInstall => p.outdated_trigger_install,
            Self::TriggerTamper => p.trigger_tamper,
            Self::ReferenceStartReplay => p.reference_loading && p.reference_start_replay,
            Self::DatabaseRoles => p.database_roles,
            Self::JsonNulProjectsNull => p.json_nul_projects_null,
        }
    }
}
