//! What a dialect implements to run the suite (`conformance-checklist.md` §0.2).
//!
//! A harness creates fresh databases, opens storage instances on them and
//! gives raw access that simulates other binaries and operators. Every check
//! owns its own database, so checks run in parallel.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use sync_core::{Clock, Result, ServerStorage};
use sync_schema::Dialect;

use crate::properties::Properties;

/// A fresh database created for one check; dropped (and cleaned up) after it.
pub struct DbHandle {
    /// Human-readable location (file path, schema name) for failure reports.
    pub location: String,
    /// Dialect-owned state; dropping it removes the database.
    pub state: Box<dyn Any + Send + Sync>,
}

impl DbHandle {
    /// A handle with dialect-owned cleanup state.
    pub fn new(location: impl Into<String>, state: impl Any + Send + Sync) -> Self {
        Self {
            location: location.into(),
            state: Box::new(state),
        }
    }

    /// The dialect's state, downcast.
    pub fn state<T: Any>(&self) -> Option<&T> {
        self.state.downcast_ref()
    }
}

impl fmt::Debug for DbHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbHandle")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// Small pools for exhaustion checks (C-313). SQLite: `readers = size`,
/// `writer_wait_ms = busy_timeout_ms = wait_ms`; Postgres: `pool_size = size`,
/// `pool_wait_ms = wait_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimits {
    /// Pool size.
    pub size: u32,
    /// Checkout / busy wait in ms.
    pub wait_ms: u64,
}

/// Hot paths whose query plans the `plans` group inspects (C-240, C-326…C-329).
///
/// The plans checks populate partition `p1` of `tasks` (rows `t0000`…, scope
/// `project_id` = `proj-0`…`proj-19`, titles `title-<n>`, blob refs
/// `blob-0`…`blob-19`, one commit per row) before calling
/// [`RawAccess::explain`]; implementations explain each path with parameters
/// drawn from that data (partition `p1`, table `tasks`, `project_id` =
/// `proj-1`, index values `("proj-1", "title-1")`, blob `blob-1`, sources
/// `["tasks"]`, after-seq 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HotPath {
    /// Candidate page of `read_commit_window` (`sync_change_scopes`).
    WindowCandidates,
    /// The whole window page query (candidates joined to commits and changes).
    WindowPage,
    /// The whole window page query for a filter naming three values (a
    /// dialect may merge per-value ranges there; `docs/decisions.md`).
    WindowPageMulti,
    /// Candidate page of `scan_rows` (`sync_row_scopes`).
    ScanCandidates,
    /// The whole scan page query (candidates joined to the application table `tasks`).
    ScanPage,
    /// Candidate page of `scan_rows` for a filter naming three values (a
    /// dialect merges per-value ranges there; `docs/decisions.md`).
    ScanCandidatesMulti,
    /// The whole scan page query for a filter naming three values.
    ScanPageMulti,
    /// The walk of a scan for a filter naming three values: the statement
    /// that reads the application table in primary-key order where the
    /// filter is dense (`docs/decisions.md`, "Many-value row scans"). A
    /// dialect whose scan page contains its walk explains that page.
    ScanWalk,
    /// `scan_rows_by_index` on `tasks` through `tasks_by_project_title`.
    IndexLookup,
    /// `scan_rows_by_index` on `tasks` through the non-unique
    /// `tasks_by_title` (value `title-1`): a value many rows may share, read
    /// in row-id order from one range of the index, never sorted
    /// (`docs/decisions.md`, "Index lookups in row-id order").
    IndexLookupShared,
    /// Candidates of `list_rows_referencing_blob`.
    BlobCandidates,
    /// The coverage probe of `has_source_changes_above`.
    CoverageProbe,
    /// The coverage sequence of `source_coverage_seq`.
    CoverageSeq,
    /// The per-row scope replacement delete (SQLite exact keys; Postgres by row).
    ScopeReplacement,
}

/// A dialect-neutral summary of one query plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanSummary {
    /// `(table, index)` pairs the plan reads through an index; the index is
    /// `"PRIMARY KEY"` for a primary-key search.
    pub index_reads: Vec<(String, String)>,
    /// Tables the plan reads by a full scan (SQLite `SCAN`, Postgres `Seq Scan`).
    pub full_scans: Vec<String>,
    /// Steps that collect their whole input before returning a first row
    /// (SQLite `USE TEMP B-TREE FOR …`; Postgres `Sort`, `Incremental Sort`,
    /// `HashAggregate`, `Hash`, `Materialize`), as the plan names them.
    pub collects: Vec<String>,
    /// The raw plan text, for failure reports.
    pub raw: String,
}

impl PlanSummary {
    /// Whether `table` is read through `index`.
    pub fn uses_index(&self, table: &str, index: &str) -> bool {
        self.index_reads
            .iter()
            .any(|(t, i)| names_object(t, table) && names_object(i, index))
    }

    /// Whether `table` is read through any index.
    pub fn reads_by_index(&self, table: &str) -> bool {
        self.index_reads.iter().any(|(t, _)| names_object(t, table))
    }

    /// Whether `table` is fully scanned.
    pub fn scans(&self, table: &str) -> bool {
        self.full_scans.iter().any(|t| names_object(t, table))
    }
}

/// Whether the name a plan shows, `shown`, is the relation or index
/// `name`: the name itself, or one shard of it as a distributed database
/// names shards (`name` + `_` + digits, e.g. `sync_row_scopes_by_row_106870`).
/// No other suffix matches.
fn names_object(shown: &str, name: &str) -> bool {
    match shown.strip_prefix(name) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('_')
            .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// Row filter of [`RawAccess::count`]: text equality on columns (all must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawFilter {
    /// `(column, value)` pairs compared as text.
    pub eq: Vec<(String, String)>,
}

impl RawFilter {
    /// No filter.
    pub fn all() -> Self {
        Self::default()
    }

    /// `column = value`.
    pub fn eq(column: &str, value: &str) -> Self {
        Self {
            eq: vec![(column.to_owned(), value.to_owned())],
        }
    }

    /// Adds `column = value`.
    pub fn and(mut self, column: &str, value: &str) -> Self {
        self.eq.push((column.to_owned(), value.to_owned()));
        self
    }
}

/// One column as introspected: `(name, declared type, not null)`.
pub type RawColumn = (String, String, bool);
/// One index as introspected: `(name, unique, columns)`.
pub type RawIndex = (String, bool, Vec<String>);

/// Direct database access that simulates other binaries and operators.
/// Every identifier a check passes is a fixture name; implementations quote them.
pub trait RawAccess: Send {
    /// Inserts a bare commit row (as a raw SQL writer would), firing the fence trigger.
    fn insert_commit(
        &self,
        partition: &str,
        commit_seq: i64,
        writer_version: Option<i32>,
    ) -> Result<()>;
    /// A fence-unaware writer that takes the partition lock the pre-RFC way.
    fn old_writer(&self, partition: &str) -> Result<Box<dyn OldWriter>>;
    /// Overwrites `sync_schema_meta.layouts` (`None` = SQL NULL).
    fn set_layouts_text(&self, text: Option<&str>) -> Result<()>;
    /// Overwrites the stored schema version of the marker.
    fn set_schema_version(&self, version: i64) -> Result<()>;
    /// Inserts or replaces a push result's stored text.
    fn set_push_result_text(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
        text: &str,
    ) -> Result<()>;
    /// Inserts a checkpoint row directly (watermark 0, observed 0).
    fn insert_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        state: &str,
        owner_epoch: i64,
    ) -> Result<()>;
    /// Sets (or deletes with `None`) the partition fence row.
    fn set_partition_fence(&self, partition: &str, version: Option<i32>) -> Result<()>;
    /// Sets `sync_schema_meta.required_writer_version`.
    fn set_database_fence(&self, version: Option<i32>) -> Result<()>;
    /// Drops a table.
    fn drop_table(&self, table: &str) -> Result<()>;
    /// Drops a column.
    fn drop_column(&self, table: &str, column: &str) -> Result<()>;
    /// Adds a text column; `NOT NULL` with a default when asked.
    fn add_column(&self, table: &str, column: &str, not_null: bool) -> Result<()>;
    /// Rebuilds an application table without one internal column (C-029).
    fn rebuild_table_without_column(&self, table: &str, column: &str) -> Result<()>;
    /// Overwrites a row's payload, bypassing codec validation.
    fn set_row_payload(
        &self,
        table: &str,
        partition: &str,
        row_id: &str,
        payload: &[u8],
    ) -> Result<()>;
    /// Drops an index.
    fn drop_index(&self, name: &str) -> Result<()>;
    /// Creates an index on exactly these columns.
    fn create_index(&self, name: &str, table: &str, columns: &[&str], unique: bool) -> Result<()>;
    /// Indexes of a table (excluding primary-key and constraint-owned ones).
    fn list_indexes(&self, table: &str) -> Result<Vec<RawIndex>>;
    /// Columns of a table in physical order; empty when the table does not exist.
    fn list_columns(&self, table: &str) -> Result<Vec<RawColumn>>;
    /// Whether a table exists.
    fn table_exists(&self, table: &str) -> Result<bool>;
    /// Counts rows of any table.
    fn count(&self, table: &str, filter: RawFilter) -> Result<i64>;
    /// Builds a pre-upgrade layout by dropping a column of an internal table
    /// (for `sync_commits.writer_version` the fence trigger is dropped first).
    fn legacy_drop_column(&self, table: &str, column: &str) -> Result<()>;
    /// Reads one text/integer cell as text (`None` for NULL or no row), with a
    /// text-equality filter; for checks that inspect stored values.
    fn read_text(&self, table: &str, column: &str, filter: RawFilter) -> Result<Option<String>>;
    /// Summarises the plan of a hot path (tables must be populated first).
    /// Postgres runs `ANALYZE` first and explains with
    /// `SET LOCAL enable_seqscan = off` (C-328).
    fn explain(&self, path: HotPath) -> Result<PlanSummary>;
    /// Rebuilds a key column with an explicit collation (`None` = the
    /// database default) — Postgres only; SQLite returns `capability_unsupported`.
    fn set_key_collation(&self, table: &str, column: &str, collation: Option<&str>) -> Result<()>;
    /// The explicit collation of a column — Postgres only (C-033): the
    /// collation name (`C`, `POSIX`, …) of `pg_attribute.attcollation`, or
    /// `None` when the column uses the database default collation. The
    /// default body returns `capability_unsupported` (SQLite keeps it).
    fn column_collation(&self, table: &str, column: &str) -> Result<Option<String>> {
        let _ = (table, column);
        Err(sync_core::Error::new(
            sync_core::ErrorCode::CapabilityUnsupported,
        ))
    }
    /// Installs an outdated writer-fence trigger definition — SQLite only;
    /// Postgres returns `capability_unsupported`.
    fn install_outdated_fence_trigger(&self) -> Result<()>;
    /// Reads the stored definition text of the writer-fence trigger.
    fn fence_trigger_definition(&self) -> Result<Option<String>>;
    /// Runs dialect SQL (dialect-only checks and diagnostics).
    fn exec(&self, dialect_sql: &str) -> Result<()>;
    /// Replays what a reference process at the RFC 0007 release runs on
    /// every start against a shared database (`tables.md` §4.2a): it stands
    /// in for a reference process starting or restarting in a mixed fleet.
    /// The statements live in the dialect crate; the default body returns
    /// `capability_unsupported`.
    fn replay_reference_start(&self) -> Result<()> {
        Err(unsupported("replay_reference_start"))
    }
    /// Breaks the storage's fence trigger behind its back (C-332, C-364); a way a
    /// dialect has no notion of returns `capability_unsupported`.
    fn tamper_fence_trigger(&self, tamper: FenceTamper) -> Result<()> {
        let _ = tamper;
        Err(unsupported("tamper_fence_trigger"))
    }
    /// Runs `attack` as a writer that is not the storage: on SQLite a raw
    /// connection, on Postgres a role granted only `SELECT, INSERT,
    /// UPDATE, DELETE` on the storage's tables (created for the call). The
    /// database must refuse it (C-365). The default body returns
    /// `capability_unsupported`.
    fn attack_barrier(&self, attack: BarrierAttack<'_>) -> Result<()> {
        let _ = attack;
        Err(unsupported("attack_barrier"))
    }
    /// Inserts a bare commit (like [`RawAccess::insert_commit`]) as a
    /// hostile database role that shadows the fence tables with its own
    /// (C-334: a schema named after the role holding its own
    /// `sync_writer_fence` and `sync_schema_meta`). The role exists only for
    /// the call. The default body returns `capability_unsupported`.
    fn insert_commit_as_shadowing_role(
        &self,
        partition: &str,
        commit_seq: i64,
        writer_version: Option<i32>,
    ) -> Result<()> {
        let _ = (partition, commit_seq, writer_version);
        Err(unsupported("insert_commit_as_shadowing_role"))
    }
}

/// A write to the migration barrier's tables that the protocol never makes
/// ([`RawAccess::attack_barrier`], C-365): each must be refused by the
/// database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarrierAttack<'a> {
    /// The control: `UPDATE sync_writer_fence SET required_writer_version
    /// = 3` for a partition, a raise the protocol allows — it must succeed,
    /// which shows the writer may write the table at all.
    RaisePartitionFence(&'a str),
    /// `UPDATE sync_schema_meta SET required_writer_version = 1`.
    LowerDatabaseFence,
    /// `UPDATE sync_schema_meta SET required_writer_version = NULL`.
    ClearDatabaseFence,
    /// `DELETE FROM sync_schema_meta`.
    DeleteMarker,
    /// `UPDATE sync_writer_fence SET required_writer_version = 1` for a partition.
    LowerPartitionFence(&'a str),
    /// `DELETE FROM sync_writer_fence` for a partition.
    DeletePartitionFence(&'a str),
    /// The partition fence written again at 1 by an insert that replaces
    /// the row (SQLite `INSERT OR REPLACE`, Postgres `ON CONFLICT DO UPDATE`).
    ReplacePartitionFence(&'a str),
    /// `UPDATE sync_backfill_checkpoints SET state = 'activated'` for
    /// `(partition, name)`.
    ActivateCheckpoint(&'a str, &'a str),
    /// `DELETE FROM sync_backfill_checkpoints` for `(partition, name)`.
    DeleteCheckpoint(&'a str, &'a str),
    /// A checkpoint row inserted (or replacing the stored one) as
    /// `activated`.
    InsertActivatedCheckpoint(&'a str, &'a str),
}

/// How [`RawAccess::tamper_fence_trigger`] breaks the fence trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceTamper {
    /// The trigger is dropped.
    Drop,
    /// The trigger stays but is disabled.
    Disable,
    /// The trigger is re-created under its own name, running the storage's
    /// own check, with a `WHEN (false)` condition: it never fires.
    WhenFalse,
    /// The trigger is re-created under its own name, running the storage's
    /// own check, as a `BEFORE UPDATE` trigger: commit inserts pass.
    BeforeUpdate,
}

fn unsupported(capability: &str) -> sync_core::Error {
    sync_core::Error::new(sync_core::ErrorCode::CapabilityUnsupported)
        .detail("capability", capability)
}

/// A pre-RFC-0007 push: each step is one statement.
pub trait OldWriter: Send {
    /// Takes the partition lock the pre-RFC way (SQLite `BEGIN IMMEDIATE`;
    /// Postgres counter-row `FOR UPDATE`).
    fn lock(&mut self) -> Result<()>;
    /// Writes a non-materialized-style row (internal columns only plus NULL projections).
    fn upsert_row(
        &mut self,
        table: &str,
        row_id: &str,
        payload: &[u8],
        scopes_json: &str,
    ) -> Result<()>;
    /// Allocates the next seq and inserts the commit (`None` = fence-unaware binary).
    fn insert_commit(&mut self, writer_version: Option<i32>) -> Result<()>;
    /// Commits.
    fn commit(self: Box<Self>) -> Result<()>;
}

/// A storage opened for the commit-group checks (C-340…C-345) and the
/// hooks those checks need besides the storage API.
pub struct GroupedStorage {
    /// The storage (SQLite: group commit on, without a time bound, so which
    /// transactions share a `COMMIT` depends only on who is queued).
    pub storage: Arc<dyn ServerStorage>,
    /// Waits for queued writers and injects faults.
    pub probe: Box<dyn WriterProbe>,
}

impl fmt::Debug for GroupedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupedStorage").finish_non_exhaustive()
    }
}

/// What the commit-group checks need to steer a [`GroupedStorage`].
pub trait WriterProbe: Send + Sync {
    /// Blocks until `transactions` calls of `begin` and `writes` pool-level
    /// writes (bumps included) wait for the writer, so that the queued
    /// transactions join the group of the transaction holding it. A dialect
    /// without a single writer (Postgres: partitions lock separately and
    /// nothing queues at `begin`) returns at once; the checks then assert
    /// the same per-push outcomes of plainly concurrent pushes.
    fn await_queued(&self, transactions: usize, writes: usize) -> Result<()>;
    /// Installs (`Some`) or removes (`None`) a fault plan on the storage's
    /// statements (`sync_core::fault`).
    fn set_fault_plan(&self, plan: Option<Arc<sync_core::fault::FaultPlan>>) -> Result<()>;
}

/// A dialect under test.
pub trait Harness: Send + Sync {
    /// The dialect's SQL text rules (DDL and query-preparation goldens of
    /// the `schema` and `queries` groups are rendered through it).
    fn sql_dialect(&self) -> Dialect;
    /// The properties that select the checks it runs and some expectations
    /// ([`Properties`]).
    fn properties(&self) -> Properties;
    /// The dialect name used in reports. Default: the name of
    /// [`Harness::sql_dialect`].
    fn dialect(&self) -> &'static str {
        self.sql_dialect().as_str()
    }
    /// A fresh, empty database, removed when the handle drops.
    fn create_database(&self) -> Result<DbHandle>;
    /// A new storage instance (own pools and memo) with the default configuration.
    fn open(&self, db: &DbHandle, clock: Arc<dyn Clock>) -> Result<Arc<dyn ServerStorage>>;
    /// The same with small pools (C-313).
    fn open_with(
        &self,
        db: &DbHandle,
        clock: Arc<dyn Clock>,
        limits: PoolLimits,
    ) -> Result<Arc<dyn ServerStorage>>;
    /// A storage instance for the commit-group checks (C-340…C-345).
    fn open_grouped(&self, db: &DbHandle, clock: Arc<dyn Clock>) -> Result<GroupedStorage>;
    /// Raw access to the database.
    fn raw(&self, db: &DbHandle) -> Result<Box<dyn RawAccess>>;
    /// Loads a database written by the reference implementation into `db`
    /// (a file copy, a dump restore, …) from fixture set `set` under
    /// `fixture_dir`. Declared by [`Properties::reference_loading`]; the
    /// default body returns `capability_unsupported`.
    fn load_reference(
        &self,
        db: &DbHandle,
        fixture_dir: &std::path::Path,
        set: &str,
    ) -> Result<()> {
        let _ = (db, fixture_dir, set);
        Err(unsupported("load_reference"))
    }
}

#[cfg(test)]
mod tests {
    use super::{names_object, PlanSummary};

    #[test]
    fn a_shard_name_is_its_relation_and_nothing_else_is() {
        assert!(names_object("sync_row_scopes", "sync_row_scopes"));
        assert!(names_object("sync_row_scopes_106870", "sync_row_scopes"));
        assert!(names_object(
            "sync_row_scopes_by_row_106870",
            "sync_row_scopes_by_row"
        ));
        assert!(!names_object("sync_row_scopes_by_row", "sync_row_scopes"));
        assert!(!names_object("sync_row_scopes_", "sync_row_scopes"));
        assert!(!names_object("sync_row_scopes_12a", "sync_row_scopes"));
        assert!(!names_object("sync_row_scopes106870", "sync_row_scopes"));
        assert!(!names_object("sync_row", "sync_row_scopes"));
    }

    #[test]
    fn plan_summaries_match_shards() {
        let plan = PlanSummary {
            index_reads: vec![(
                "sync_row_scopes_106870".to_owned(),
                "sync_row_scopes_by_row_106870".to_owned(),
            )],
            full_scans: vec!["tasks_102040".to_owned()],
            ..PlanSummary::default()
        };
        assert!(plan.uses_index("sync_row_scopes", "sync_row_scopes_by_row"));
        assert!(!plan.uses_index("sync_row_scopes", "sync_row_scopes_pkey"));
        assert!(plan.reads_by_index("sync_row_scopes"));
        assert!(!plan.reads_by_index("sync_change_scopes"));
        assert!(plan.scans("tasks"));
        assert!(!plan.scans("sync_changes"));
    }
}
/// What a binary passes to a harness constructor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarnessEnv {
    /// The database server to create databases on (`--server-url`); a
    /// dialect without a server ignores it, one with a server falls back to
    /// its own environment variable or default.
    pub server_url: Option<String>,
}

/// Builds a dialect's harness; an unreachable server is an error naming it.
pub type HarnessFn = fn(&HarnessEnv) -> std::result::Result<Box<dyn Harness>, String>;

/// A registry entry of `cargo xtask conformance` (one line per dialect).
pub type HarnessEntry = sync_schema::DialectEntry<HarnessFn>;
