//! The conformance harness of the SQLite dialect (feature `conformance`):
//! a fresh database file per check, storage instances on it, and raw access
//! through a plain `rusqlite` connection that plays other binaries and
//! operators (`conformance-checklist.md` §0.2).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{params_from_iter, Connection, OptionalExtension};
use sync_conformance::{
    BarrierAttack, DbHandle, FenceTamper, GroupedStorage, Harness, HotPath, OldWriter, PlanSummary,
    PoolLimits, RawAccess, RawColumn, RawFilter, RawIndex, WriterProbe,
};
use sync_core::{Clock, Error, ErrorCode, Result, ServerStorage};
use tempfile::TempDir;

use crate::barrier_guards::without_guards;
use crate::bootstrap::{stored_fence_trigger, FENCE_TRIGGER_NAME, FENCE_TRIGGER_SQL};
use crate::errors::DbResultExt;
use crate::hot_path_sql as hot;
use crate::sql::quote;
use crate::{SqliteConfig, SqliteStorage};

/// Busy timeout of raw connections.
const RAW_BUSY_TIMEOUT: Duration = Duration::from_millis(5_000);

/// A pre-RFC-0007 trigger definition: no NULL test, partition fence only.
const OUTDATED_FENCE_TRIGGER: &str = "CREATE TRIGGER sync_commits_writer_fence BEFORE INSERT ON sync_commits FOR EACH ROW
WHEN NEW.writer_version < (SELECT required_writer_version FROM sync_writer_fence WHERE partition = NEW.partition)
BEGIN SELECT RAISE(ABORT, 'sync.storage.writer_fence_rejected'); END";

/// What the reference server's SQLite storage at the RFC 0007 release
/// (0.23) runs on every start against an existing database
/// (`tables.md` §4.2a): `writer_version` added when absent, and its own
/// partition-only fence trigger installed with `IF NOT EXISTS` under the
/// name our trigger has on SQLite — so it never replaces ours.
pub const REFERENCE_0_23_SQLITE_TRIGGER: &str =
    "CREATE TRIGGER IF NOT EXISTS sync_commits_writer_fence
BEFORE INSERT ON sync_commits FOR EACH ROW
WHEN EXISTS (SELECT 1 FROM sync_writer_fence WHERE partition = NEW.partition
  AND (NEW.writer_version IS NULL OR NEW.writer_version < required_writer_version))
BEGIN SELECT RAISE(ABORT, 'sync.storage.writer_fence_rejected'); END";

/// Our fence trigger re-created under its own name with its own check, but
/// never firing on a commit insert: `WHEN (false)` instead of the fence
/// condition, or `BEFORE UPDATE` instead of `BEFORE INSERT`.
fn tampered_fence_trigger(tamper: FenceTamper) -> String {
    match tamper {
        FenceTamper::BeforeUpdate => {
            FENCE_TRIGGER_SQL.replacen("BEFORE INSERT", "BEFORE UPDATE", 1)
        }
        _ => {
            let lines: Vec<&str> = FENCE_TRIGGER_SQL.lines().collect();
            format!(
                "{}\nWHEN (false)\n{}",
                lines.first().copied().unwrap_or_default(),
                lines.last().copied().unwrap_or_default()
            )
        }
    }
}

/// The SQLite harness: every check on a new file, created at SQLite's
/// default page size ([`SqliteHarness::DEFAULT`]) or at another
/// ([`SqliteHarness::with_page_size`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SqliteHarness {
    page_size: Option<u32>,
}

impl SqliteHarness {
    /// Files at SQLite's default page size: the harness of the registry.
    pub const DEFAULT: SqliteHarness = SqliteHarness { page_size: None };

    /// Files created with pages of `size` bytes
    /// ([`SqliteConfig::page_size`]); the reference fixtures it loads keep
    /// their own.
    pub const fn with_page_size(size: u32) -> Self {
        SqliteHarness {
            page_size: Some(size),
        }
    }

    /// The configuration every storage of this harness starts from.
    fn config(&self, clock: Arc<dyn Clock>) -> SqliteConfig {
        SqliteConfig {
            page_size: self.page_size,
            ..SqliteConfig::with_clock(clock)
        }
    }
}

/// What a [`DbHandle`] of this harness owns: the temporary directory (removed
/// on drop) and the database file inside it.
#[derive(Debug)]
struct SqliteDb {
    _dir: TempDir,
    path: PathBuf,
}

fn db_path(db: &DbHandle) -> Result<&Path> {
    db.state::<SqliteDb>()
        .map(|s| s.path.as_path())
        .ok_or_else(|| Error::new(ErrorCode::Backend).detail("reason", "foreign_db_handle"))
}

/// The writer queue and fault plan of a grouped SQLite storage.
struct SqliteProbe(Arc<SqliteStorage>);

impl WriterProbe for SqliteProbe {
    fn await_queued(&self, transactions: usize, writes: usize) -> Result<()> {
        self.0.await_queued_writers(transactions, writes)
    }

    fn set_fault_plan(&self, plan: Option<Arc<sync_core::fault::FaultPlan>>) -> Result<()> {
        self.0.set_fault_plan(plan)
    }
}

/// What the SQLite harness declares: one writer for the whole file, plans
/// fixed by shape, transactional DDL, no collation control or roles, an
/// installable outdated fence trigger, reference files copied in, booleans
/// as integers.
pub const PROPERTIES: sync_conformance::Properties = sync_conformance::Properties {
    write_locking: sync_conformance::WriteLocking::WholeDatabase,
    planner: Some(sync_conformance::Planner::ByShape),
    transactional_ddl: true,
    key_collation_control: false,
    outdated_trigger_install: true,
    trigger_tamper: false,
    reference_loading: true,
    reference_start_replay: false,
    database_roles: false,
    booleans: sync_conformance::BooleanValues::Integers,
    json_nul_projects_null: false,
    prefix_lookup_indexes: false,
};

/// The constructor of the dialect registry ([`sync_conformance::HarnessFn`]):
/// SQLite needs no server.
pub fn construct(
    _env: &sync_conformance::HarnessEnv,
) -> std::result::Result<Box<dyn Harness>, String> {
    Ok(Box::new(SqliteHarness::DEFAULT))
}

/// The registry entry of `cargo xtask conformance`.
pub const ENTRY: sync_conformance::HarnessEntry = sync_conformance::HarnessEntry {
    sql: crate::DIALECT,
    url_schemes: crate::URL_SCHEMES,
    hooks: construct,
};

impl Harness for SqliteHarness {
    fn sql_dialect(&self) -> sync_schema::Dialect {
        crate::DIALECT
    }

    fn properties(&self) -> sync_conformance::Properties {
        PROPERTIES
    }

    fn create_database(&self) -> Result<DbHandle> {
        let dir = tempfile::Builder::new()
            .prefix("syncstore-conformance-")
            .tempdir()
            .map_err(Error::backend)?;
        let path = dir.path().join("sync.sqlite");
        Ok(DbHandle::new(
            path.display().to_string(),
            SqliteDb { _dir: dir, path },
        ))
    }

    fn open(&self, db: &DbHandle, clock: Arc<dyn Clock>) -> Result<Arc<dyn ServerStorage>> {
        Ok(Arc::new(SqliteStorage::open(
            db_path(db)?,
            self.config(clock),
        )?))
    }

    fn open_with(
        &self,
        db: &DbHandle,
        clock: Arc<dyn Clock>,
        limits: PoolLimits,
    ) -> Result<Arc<dyn ServerStorage>> {
        let config = limited_config(self.config(clock), limits);
        Ok(Arc::new(SqliteStorage::open(db_path(db)?, config)?))
    }

    fn open_grouped(&self, db: &DbHandle, clock: Arc<dyn Clock>) -> Result<GroupedStorage> {
        let config = grouped_config(self.config(clock));
        let storage = Arc::new(SqliteStorage::open(db_path(db)?, config)?);
        Ok(GroupedStorage {
            storage: storage.clone(),
            probe: Box::new(SqliteProbe(storage)),
        })
    }

    fn raw(&self, db: &DbHandle) -> Result<Box<dyn RawAccess>> {
        Ok(Box::new(SqliteRaw {
            conn: connect(db_path(db)?)?,
            path: db_path(db)?.to_path_buf(),
        }))
    }

    fn load_reference(&self, db: &DbHandle, fixture_dir: &Path, set: &str) -> Result<()> {
        let target = db_path(db)?;
        std::fs::copy(fixture_dir.join(format!("{set}.sqlite")), target).map_err(Error::backend)?;
        let mut permissions = std::fs::metadata(target)
            .map_err(Error::backend)?
            .permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        permissions.set_readonly(false);
        std::fs::set_permissions(target, permissions).map_err(Error::backend)
    }
}

/// The configuration of a storage with small pools (C-313): the limits
/// as `dialects.md` maps them onto SQLite's readers and writer.
fn limited_config(base: SqliteConfig, limits: PoolLimits) -> SqliteConfig {
    SqliteConfig {
        readers: limits.size,
        busy_timeout_ms: limits.wait_ms,
        writer_wait_ms: limits.wait_ms,
        ..base
    }
}

/// The configuration of a grouped storage (C-340…C-345): group commit on,
/// without a time bound, so who shares a `COMMIT` depends only on who
/// queued. The checks hold with grouping off too, so nothing else would
/// notice it missing.
fn grouped_config(base: SqliteConfig) -> SqliteConfig {
    SqliteConfig {
        group_commit: crate::GroupCommit {
            max_members: 64,
            max_wait_ms: 3_600_000,
        },
        ..base
    }
}

fn connect(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path).db()?;
    conn.busy_timeout(RAW_BUSY_TIMEOUT).db()?;
    Ok(conn)
}

/// Raw access through one plain connection.
#[derive(Debug)]
struct SqliteRaw {
    conn: Connection,
    path: PathBuf,
}

/// `WHERE CAST("c" AS TEXT) = ?n AND …` (empty for no filter) and its values.
fn where_clause(filter: &RawFilter) -> (String, Vec<String>) {
    if filter.eq.is_empty() {
        return (String::new(), Vec::new());
    }
    let conditions: Vec<String> = filter
        .eq
        .iter()
        .enumerate()
        .map(|(i, (column, _))| format!("CAST({} AS TEXT) = ?{}", quote(column), i + 1))
        .collect();
    let values = filter.eq.iter().map(|(_, v)| v.clone()).collect();
    (format!(" WHERE {}", conditions.join(" AND ")), values)
}

impl SqliteRaw {
    fn batch(&self, sql: &str) -> Result<()> {
        self.conn.execute_batch(sql).db()
    }

    /// Runs `f` in one transaction with the barrier's guard triggers lifted
    /// (fixtures that set fences and checkpoint rows directly).
    fn lifted(&self, f: impl FnOnce(&Connection) -> Result<usize>) -> Result<()> {
        self.batch("BEGIN IMMEDIATE")?;
        match without_guards(&self.conn, || f(&self.conn)) {
            Ok(_) => self.batch("COMMIT"),
            Err(error) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(error)
            }
        }
    }

    fn columns(&self, table: &str) -> Result<Vec<(String, String, bool, i64)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1) ORDER BY cid")
            .db()?;
        let rows = stmt
            .query_map([table], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? != 0, r.get(3)?))
            })
            .db()?;
        rows.collect::<rusqlite::Result<_>>().db()
    }

    fn explain_sql(&self, sql: &str) -> Result<PlanSummary> {
        let mut stmt = self
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .db()?;
        // Unbound parameters plan exactly like bound ones; rusqlite wants a value for each.
        let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
        let details: Vec<String> = stmt
            .query_map(params_from_iter(nulls.iter()), |r| r.get::<_, String>(3))
            .db()?
            .collect::<rusqlite::Result<_>>()
            .db()?;
        Ok(summarize_plan(sql, &details))
    }
}

/// Parses the `EXPLAIN QUERY PLAN` detail lines of `sql`: `SEARCH t USING
/// PRIMARY KEY`, `USING INTEGER PRIMARY KEY` and the implicit primary-key
/// index (`sqlite_autoindex_…`) are primary-key reads; `USING [COVERING]
/// INDEX x` reads index `x`; a `SCAN t` is a full scan (also through an
/// index); a `USE TEMP B-TREE FOR …` collects its input. SQLite names
/// aliased tables by their alias; the `<table> AS <alias>` pairs of `sql`
/// map them back to table names.
pub fn summarize_plan(sql: &str, details: &[String]) -> PlanSummary {
    let aliases = table_aliases(sql);
    let mut summary = PlanSummary {
        raw: details.join("\n"),
        ..PlanSummary::default()
    };
    for line in details {
        if line.starts_with("USE TEMP B-TREE") {
            summary.collects.push(line.clone());
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let (kind, Some(table)) = (words.first().copied(), words.get(1).copied()) else {
            continue;
        };
        let table = aliases
            .iter()
            .find(|(alias, _)| alias == table)
            .map_or_else(|| table.to_owned(), |(_, name)| name.clone());
        let using = words.iter().position(|w| *w == "USING");
        let index = using.and_then(|u| {
            let rest = &words[u + 1..];
            match rest {
                ["PRIMARY", "KEY", ..] | ["INTEGER", "PRIMARY", "KEY", ..] => {
                    Some("PRIMARY KEY".to_owned())
                }
                ["INDEX", name, ..] | ["COVERING", "INDEX", name, ..] => {
                    Some(if name.starts_with("sqlite_autoindex_") {
                        "PRIMARY KEY".to_owned()
                    } else {
                        (*name).to_owned()
                    })
                }
                _ => None,
            }
        });
        match (kind, index) {
            (Some("SEARCH"), Some(index)) => summary.index_reads.push((table, index)),
            (Some("SCAN"), _) => summary.full_scans.push(table),
            _ => {}
        }
    }
    summary
}

/// `(alias, table)` for every `<table> AS <alias>` of a statement (a
/// subquery alias, preceded by `)`, maps to nothing).
fn table_aliases(sql: &str) -> Vec<(String, String)> {
    let tokens: Vec<&str> = sql
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(')
        .filter(|t| !t.is_empty())
        .collect();
    let unquote = |t: &str| t.trim_matches('"').replace("\"\"", "\"");
    tokens
        .windows(3)
        .filter(|w| w[1].eq_ignore_ascii_case("AS") && !w[0].ends_with(')'))
        .map(|w| (unquote(w[2]), unquote(w[0])))
        .collect()
}

/// The SQL text the storage runs for a hot path.
fn hot_path_sql(path: HotPath) -> String {
    match path {
        HotPath::WindowCandidates => hot::window_candidates_sql(1),
        HotPath::WindowPage => hot::window_page_sql(1),
        HotPath::WindowPageMulti => hot::window_page_sql(3),
        HotPath::ScanCandidates => hot::scan_candidates_sql(&quote("tasks"), 1),
        HotPath::ScanPage => hot::scan_page_sql(&quote("tasks"), 1),
        HotPath::ScanCandidatesMulti => hot::scan_candidates_sql(&quote("tasks"), 3),
        HotPath::ScanPageMulti | HotPath::ScanWalk => hot::scan_page_sql(&quote("tasks"), 3),
        HotPath::IndexLookup => hot::index_lookup_sql(
            &quote("tasks"),
            &["project_id".to_owned(), "title".to_owned()],
            &[false, false],
        ),
        HotPath::IndexLookupShared => {
            hot::index_lookup_sql(&quote("tasks"), &["title".to_owned()], &[false])
        }
        HotPath::BlobCandidates => hot::BLOB_CANDIDATES.to_owned(),
        HotPath::CoverageProbe => hot::coverage_probe_sql(1),
        HotPath::CoverageSeq => hot::coverage_seq_sql(1),
        HotPath::ScopeReplacement => hot::DELETE_ROW_SCOPES_EXACT.to_owned(),
    }
}

impl RawAccess for SqliteRaw {
    fn insert_commit(
        &self,
        partition: &str,
        commit_seq: i64,
        writer_version: Option<i32>,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) \
                 VALUES (?1, ?2, 'raw-writer', 'raw-' || ?2, 'raw', 0, ?3)",
                (partition, commit_seq, writer_version),
            )
            .db()?;
        Ok(())
    }

    fn old_writer(&self, partition: &str) -> Result<Box<dyn OldWriter>> {
        Ok(Box::new(SqliteOldWriter {
            conn: connect(&self.path)?,
            partition: partition.to_owned(),
        }))
    }

    /// `None` stores the empty text: the column is `NOT NULL` on SQLite and
    /// layouts parsing reads empty text exactly like NULL.
    fn set_layouts_text(&self, text: Option<&str>) -> Result<()> {
        self.conn
            .execute(
                "UPDATE sync_schema_meta SET layouts = ?1 WHERE id = 1",
                [text.unwrap_or("")],
            )
            .db()?;
        Ok(())
    }

    fn set_schema_version(&self, version: i64) -> Result<()> {
        self.lifted(|conn| {
            conn.execute(
                "INSERT INTO sync_schema_meta (id, schema_version) VALUES (1, ?1) \
                 ON CONFLICT (id) DO UPDATE SET schema_version = excluded.schema_version",
                [version],
            )
            .db()
        })
    }

    fn set_push_result_text(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
        text: &str,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO sync_push_results (partition, client_id, client_commit_id, result) VALUES (?1, ?2, ?3, ?4)",
                (partition, client_id, client_commit_id, text),
            )
            .db()?;
        Ok(())
    }

    fn insert_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        state: &str,
        owner_epoch: i64,
    ) -> Result<()> {
        self.lifted(|conn| {
            conn.execute(
                "INSERT OR REPLACE INTO sync_backfill_checkpoints \
                 (partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, 0, ?5, 0, 0)",
                (partition, name, schema_version, state, owner_epoch),
            )
            .db()
        })
    }

    fn set_partition_fence(&self, partition: &str, version: Option<i32>) -> Result<()> {
        self.lifted(|conn| {
            match version {
                Some(v) => conn.execute(
                    "INSERT OR REPLACE INTO sync_writer_fence (partition, required_writer_version) VALUES (?1, ?2)",
                    (partition, v),
                ),
                None => conn.execute("DELETE FROM sync_writer_fence WHERE partition = ?1", [partition]),
            }
            .db()
        })
    }

    fn set_database_fence(&self, version: Option<i32>) -> Result<()> {
        self.lifted(|conn| {
            conn.execute(
                "UPDATE sync_schema_meta SET required_writer_version = ?1 WHERE id = 1",
                [version],
            )
            .db()
        })
    }

    fn drop_table(&self, table: &str) -> Result<()> {
        self.batch(&format!("DROP TABLE {}", quote(table)))
    }

    fn drop_column(&self, table: &str, column: &str) -> Result<()> {
        self.batch(&format!(
            "ALTER TABLE {} DROP COLUMN {}",
            quote(table),
            quote(column)
        ))
    }

    fn add_column(&self, table: &str, column: &str, not_null: bool) -> Result<()> {
        let constraint = if not_null { " NOT NULL DEFAULT ''" } else { "" };
        self.batch(&format!(
            "ALTER TABLE {} ADD COLUMN {} TEXT{constraint}",
            quote(table),
            quote(column)
        ))
    }

    fn rebuild_table_without_column(&self, table: &str, column: &str) -> Result<()> {
        let keep: Vec<(String, String, bool, i64)> = self
            .columns(table)?
            .into_iter()
            .filter(|(name, ..)| name != column)
            .collect();
        let mut defs: Vec<String> = keep
            .iter()
            .map(|(name, ty, not_null, _)| {
                format!(
                    "{} {ty}{}",
                    quote(name),
                    if *not_null { " NOT NULL" } else { "" }
                )
            })
            .collect();
        let mut pk: Vec<&(String, String, bool, i64)> = keep.iter().filter(|c| c.3 > 0).collect();
        pk.sort_by_key(|c| c.3);
        if !pk.is_empty() {
            let names: Vec<String> = pk.iter().map(|c| quote(&c.0)).collect();
            defs.push(format!("PRIMARY KEY ({})", names.join(", ")));
        }
        let indexes: Vec<String> = {
            let mut stmt = self
                .conn
                .prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?1 AND sql IS NOT NULL")
                .db()?;
            let rows = stmt.query_map([table], |r| r.get(0)).db()?;
            rows.collect::<rusqlite::Result<_>>().db()?
        };
        let names: Vec<String> = keep.iter().map(|c| quote(&c.0)).collect();
        let staging = quote(&format!("{table}__rebuild"));
        self.batch(&format!(
            "BEGIN IMMEDIATE; CREATE TABLE {staging} ({defs}); INSERT INTO {staging} ({cols}) SELECT {cols} FROM {t}; \
             DROP TABLE {t}; ALTER TABLE {staging} RENAME TO {t}; COMMIT",
            defs = defs.join(", "),
            cols = names.join(", "),
            t = quote(table),
        ))?;
        for sql in indexes {
            // indexes over the dropped column cannot come back
            let _ = self.conn.execute_batch(&sql);
        }
        Ok(())
    }

    fn set_row_payload(
        &self,
        table: &str,
        partition: &str,
        row_id: &str,
        payload: &[u8],
    ) -> Result<()> {
        self.conn
            .execute(
                &format!(
                    "UPDATE {} SET \"_sync_payload\" = ?1 WHERE \"_sync_partition\" = ?2 AND \"_sync_row_id\" = ?3",
                    quote(table)
                ),
                (payload, partition, row_id),
            )
            .db()?;
        Ok(())
    }

    fn drop_index(&self, name: &str) -> Result<()> {
        self.batch(&format!("DROP INDEX {}", quote(name)))
    }

    fn create_index(&self, name: &str, table: &str, columns: &[&str], unique: bool) -> Result<()> {
        let columns: Vec<String> = columns.iter().map(|c| quote(c)).collect();
        self.batch(&format!(
            "CREATE {}INDEX {} ON {} ({})",
            if unique { "UNIQUE " } else { "" },
            quote(name),
            quote(table),
            columns.join(", ")
        ))
    }

    fn list_indexes(&self, table: &str) -> Result<Vec<RawIndex>> {
        let observed = crate::introspect::observe(&self.conn, table)?;
        Ok(observed
            .indexes
            .into_iter()
            .map(|i| (i.name, i.unique, i.columns))
            .collect())
    }

    fn list_columns(&self, table: &str) -> Result<Vec<RawColumn>> {
        Ok(self
            .columns(table)?
            .into_iter()
            .map(|(name, ty, not_null, _)| (name, ty, not_null))
            .collect())
    }

    fn table_exists(&self, table: &str) -> Result<bool> {
        self.conn
            .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")
            .db()?
            .exists([table])
            .db()
    }

    fn count(&self, table: &str, filter: RawFilter) -> Result<i64> {
        let (clause, values) = where_clause(&filter);
        self.conn
            .query_row(
                &format!("SELECT count(*) FROM {}{clause}", quote(table)),
                params_from_iter(values.iter()),
                |r| r.get(0),
            )
            .db()
    }

    fn legacy_drop_column(&self, table: &str, column: &str) -> Result<()> {
        if table == "sync_commits" && column == "writer_version" {
            self.batch(&format!("DROP TRIGGER IF EXISTS {FENCE_TRIGGER_NAME}"))?;
        }
        self.drop_column(table, column)
    }

    fn read_text(&self, table: &str, column: &str, filter: RawFilter) -> Result<Option<String>> {
        let (clause, values) = where_clause(&filter);
        let value: Option<Option<String>> = self
            .conn
            .query_row(
                &format!(
                    "SELECT CAST({} AS TEXT) FROM {}{clause} LIMIT 1",
                    quote(column),
                    quote(table)
                ),
                params_from_iter(values.iter()),
                |r| r.get(0),
            )
            .optional()
            .db()?;
        Ok(value.flatten())
    }

    fn explain(&self, path: HotPath) -> Result<PlanSummary> {
        self.explain_sql(&hot_path_sql(path))
    }

    fn set_key_collation(
        &self,
        _table: &str,
        _column: &str,
        _collation: Option<&str>,
    ) -> Result<()> {
        Err(Error::new(ErrorCode::CapabilityUnsupported).detail("capability", "KeyCollation"))
    }

    fn install_outdated_fence_trigger(&self) -> Result<()> {
        self.batch(&format!("DROP TRIGGER IF EXISTS {FENCE_TRIGGER_NAME}"))?;
        self.batch(OUTDATED_FENCE_TRIGGER)
    }

    fn fence_trigger_definition(&self) -> Result<Option<String>> {
        stored_fence_trigger(&self.conn)
    }

    fn exec(&self, dialect_sql: &str) -> Result<()> {
        self.batch(dialect_sql)
    }

    fn replay_reference_start(&self) -> Result<()> {
        let has_column = self
            .conn
            .prepare(
                "SELECT 1 FROM pragma_table_info('sync_commits') WHERE name = 'writer_version'",
            )
            .db()?
            .exists([])
            .db()?;
        if !has_column {
            self.batch("ALTER TABLE sync_commits ADD COLUMN writer_version INTEGER")?;
        }
        self.batch(REFERENCE_0_23_SQLITE_TRIGGER)
    }

    fn attack_barrier(&self, attack: BarrierAttack<'_>) -> Result<()> {
        let (sql, values): (&str, Vec<&str>) = match attack {
            BarrierAttack::RaisePartitionFence(p) => (
                "UPDATE sync_writer_fence SET required_writer_version = 3 WHERE partition = ?1",
                vec![p],
            ),
            BarrierAttack::LowerDatabaseFence => (
                "UPDATE sync_schema_meta SET required_writer_version = 1 WHERE id = 1",
                vec![],
            ),
            BarrierAttack::ClearDatabaseFence => (
                "UPDATE sync_schema_meta SET required_writer_version = NULL WHERE id = 1",
                vec![],
            ),
            BarrierAttack::DeleteMarker => ("DELETE FROM sync_schema_meta", vec![]),
            BarrierAttack::LowerPartitionFence(p) => (
                "UPDATE sync_writer_fence SET required_writer_version = 1 WHERE partition = ?1",
                vec![p],
            ),
            BarrierAttack::DeletePartitionFence(p) => {
                ("DELETE FROM sync_writer_fence WHERE partition = ?1", vec![p])
            }
            BarrierAttack::ReplacePartitionFence(p) => (
                "INSERT OR REPLACE INTO sync_writer_fence (partition, required_writer_version) VALUES (?1, 1)",
                vec![p],
            ),
            BarrierAttack::ActivateCheckpoint(p, n) => (
                "UPDATE sync_backfill_checkpoints SET state = 'activated' WHERE partition = ?1 AND name = ?2",
                vec![p, n],
            ),
            BarrierAttack::DeleteCheckpoint(p, n) => (
                "DELETE FROM sync_backfill_checkpoints WHERE partition = ?1 AND name = ?2",
                vec![p, n],
            ),
            BarrierAttack::InsertActivatedCheckpoint(p, n) => (
                "INSERT OR REPLACE INTO sync_backfill_checkpoints (partition, name, schema_version, state, \
                 watermark, owner_epoch, observed_rows, updated_at_ms) \
                 SELECT ?1, ?2, schema_version, 'activated', 0, 0, 0, 0 FROM sync_schema_meta WHERE id = 1",
                vec![p, n],
            ),
        };
        connect(&self.path)?
            .execute(sql, params_from_iter(values))
            .db()
            .map(|_| ())
    }

    fn tamper_fence_trigger(&self, tamper: FenceTamper) -> Result<()> {
        match tamper {
            FenceTamper::Drop => self.batch(&format!("DROP TRIGGER {FENCE_TRIGGER_NAME}")),
            FenceTamper::Disable => Err(Error::new(ErrorCode::CapabilityUnsupported)
                .detail("capability", "disabled_trigger")),
            FenceTamper::WhenFalse | FenceTamper::BeforeUpdate => self.batch(&format!(
                "DROP TRIGGER {FENCE_TRIGGER_NAME};\n{}",
                tampered_fence_trigger(tamper)
            )),
        }
    }
}

/// A fence-unaware writer on its own connection: `BEGIN IMMEDIATE` as the
/// lock, raw row and commit inserts. Dropping it rolls back.
#[derive(Debug)]
struct SqliteOldWriter {
    conn: Connection,
    partition: String,
}

impl OldWriter for SqliteOldWriter {
    fn lock(&mut self) -> Result<()> {
        self.conn.execute_batch("BEGIN IMMEDIATE").db()
    }

    fn upsert_row(
        &mut self,
        table: &str,
        row_id: &str,
        payload: &[u8],
        scopes_json: &str,
    ) -> Result<()> {
        self.conn
            .execute(
                &format!(
                    "INSERT INTO {} (\"_sync_partition\", \"_sync_row_id\", \"_sync_server_version\", \"_sync_scopes\", \"_sync_payload\") \
                     VALUES (?1, ?2, 1, ?3, ?4) ON CONFLICT (\"_sync_partition\", \"_sync_row_id\") DO UPDATE SET \
                     \"_sync_server_version\" = \"_sync_server_version\" + 1, \"_sync_scopes\" = excluded.\"_sync_scopes\", \
                     \"_sync_payload\" = excluded.\"_sync_payload\"",
                    quote(table)
                ),
                (&self.partition, row_id, scopes_json, payload),
            )
            .db()?;
        self.conn
            .execute(
                "INSERT OR IGNORE INTO sync_row_scopes (partition, tbl, var, value, row_id) \
                 SELECT ?1, ?2, key, value, ?3 FROM json_each(?4)",
                (&self.partition, table, row_id, scopes_json),
            )
            .db()?;
        Ok(())
    }

    fn insert_commit(&mut self, writer_version: Option<i32>) -> Result<()> {
        let seq: i64 = self
            .conn
            .query_row(
                "INSERT INTO sync_partitions (partition, max_commit_seq) VALUES (?1, 1) \
                 ON CONFLICT (partition) DO UPDATE SET max_commit_seq = max_commit_seq + 1 RETURNING max_commit_seq",
                [&self.partition],
                |r| r.get(0),
            )
            .db()?;
        self.conn
            .execute(
                "INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) \
                 VALUES (?1, ?2, 'old-writer', 'old-' || ?2, 'old', 0, ?3)",
                (&self.partition, seq, writer_version),
            )
            .db()?;
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<()> {
        self.conn.execute_batch("COMMIT").db()
    }
}

impl Drop for SqliteOldWriter {
    fn drop(&mut self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_map_aliases_and_primary_keys() {
        let sql = hot_path_sql(HotPath::ScanPage);
        let plan = summarize_plan(
            &sql,
            &[
                "CO-ROUTINE c".into(),
                "SEARCH sync_row_scopes USING PRIMARY KEY (partition=?)".into(),
                "SCAN c".into(),
                "SEARCH t USING INDEX sqlite_autoindex_tasks_1 (_sync_partition=?)".into(),
            ],
        );
        assert!(plan.uses_index("sync_row_scopes", "PRIMARY KEY"));
        assert!(plan.uses_index("tasks", "PRIMARY KEY"));
        assert!(!plan.scans("tasks"));
        let scan = summarize_plan(
            &sql,
            &[
                "SCAN t".into(),
                "SEARCH x USING COVERING INDEX ix (a=?)".into(),
            ],
        );
        assert!(scan.scans("tasks"));
        assert!(scan.uses_index("x", "ix"));
        // The plan's own lines stay with it, for the checks' messages.
        assert_eq!(scan.raw, "SCAN t\nSEARCH x USING COVERING INDEX ix (a=?)");
    }

    #[test]
    fn small_pools_and_grouping_reach_the_configuration() {
        let clock: Arc<dyn Clock> = Arc::new(sync_core::ManualClock::new(7));
        let harness = SqliteHarness::with_page_size(1_024);
        let limited = limited_config(
            harness.config(clock.clone()),
            PoolLimits {
                size: 1,
                wait_ms: 100,
            },
        );
        assert_eq!(
            (
                limited.readers,
                limited.busy_timeout_ms,
                limited.writer_wait_ms
            ),
            (1, 100, 100)
        );
        assert_eq!(limited.clock.now_ms(), 7);
        assert_eq!(limited.page_size, Some(1_024));
        let grouped = grouped_config(harness.config(clock));
        assert_eq!(
            grouped.group_commit,
            crate::GroupCommit {
                max_members: 64,
                max_wait_ms: 3_600_000,
            }
        );
        assert_eq!(grouped.clock.now_ms(), 7);
        assert_eq!(grouped.page_size, Some(1_024));
        assert_eq!(SqliteHarness::DEFAULT.config(clock_at(7)).page_size, None);
    }

    fn clock_at(ms: i64) -> Arc<dyn Clock> {
        Arc::new(sync_core::ManualClock::new(ms))
    }
}
