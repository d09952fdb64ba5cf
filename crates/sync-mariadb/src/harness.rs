//! The conformance harness of the MariaDB dialect (feature `conformance`).
//!
//! Every database is a fresh [`ScratchDatabase`] on the server named by
//! `SYNCSTORE_MARIADB_URL` (default `mysql://root@127.0.0.1:3306/test`),
//! dropped when its handle drops, so checks run in parallel (the lock
//! names carry the database). Raw access is a plain connection of the
//! check's database with the dialect's session.
//!
//! Fixtures that set fences and checkpoint rows directly lift the
//! barrier's guard triggers of the table they write: the guards are
//! dropped, the statement runs and the guards are created again (DDL
//! commits on MariaDB, so this is three steps, not one transaction; the
//! check's database is its own). `attack_barrier` runs as a fresh account
//! granted only DML (`scratch::DmlAccount`). Grouped storages take fault plans
//! (`MariadbStorage::set_fault_plan`).

mod dml_user;

use std::sync::{Arc, Mutex};

use mysql::Value;
use sync_conformance::{
    BarrierAttack, BooleanValues, DbHandle, FenceTamper, GroupedStorage, Harness, HarnessEntry,
    HarnessEnv, HotPath, OldWriter, PlanSummary, Planner, PoolLimits, Properties, RawAccess,
    RawColumn, RawFilter, RawIndex, WriteLocking, WriterProbe,
};
use sync_core::{Clock, Error, ErrorCode, Result, ServerStorage};
use sync_schema::{Dialect, ObservedTable};

use crate::barrier_guards::guards_of;
use crate::bootstrap::{
    fence_trigger_sql, FENCE_TRIGGER_BODY, FENCE_TRIGGER_NAME, OUTDATED_FENCE_TRIGGER_BODY,
};
use crate::config::{
    MariadbConfig, MariadbUrl, DEFAULT_METADATA_LOCK_WAIT_SECONDS, DEFAULT_ROW_LOCK_WAIT_SECONDS,
};
use crate::dialect::quote_ident as q;
use crate::introspect;
use crate::pool::Conn;
use crate::scratch::{url_from_env, ScratchDatabase};
use crate::session::LockWaits;
use crate::{MariadbStorage, DIALECT, URL_SCHEMES};

/// What the MariaDB harness declares (`docs/design/mariadb.md` §18): a
/// per-partition write lock, a cost-based planner, no transactional DDL
/// (the journaled migration replaces it), keys that are `VARBINARY` (no
/// collation to control), a fence trigger whose outdated body can be
/// installed, no reference dumps or database roles, booleans read as 0/1,
/// JSON projections kept as raw text.
pub const PROPERTIES: Properties = Properties {
    write_locking: WriteLocking::PerPartition,
    planner: Some(Planner::ByStatistics),
    transactional_ddl: false,
    key_collation_control: false,
    outdated_trigger_install: true,
    trigger_tamper: false,
    reference_loading: false,
    reference_start_replay: false,
    database_roles: false,
    booleans: BooleanValues::Integers,
    json_nul_projects_null: false,
    prefix_lookup_indexes: true,
};

fn waits() -> LockWaits {
    LockWaits {
        row_seconds: DEFAULT_ROW_LOCK_WAIT_SECONDS,
        metadata_seconds: DEFAULT_METADATA_LOCK_WAIT_SECONDS,
    }
}

/// The MariaDB [`Harness`].
#[derive(Debug, Clone)]
pub struct MariadbHarness {
    url: MariadbUrl,
}

impl MariadbHarness {
    /// A harness on the server of `url`; fails when it cannot be reached.
    pub fn connect(url: &str) -> std::result::Result<Self, String> {
        let url = MariadbUrl::parse(url).map_err(|e| format!("{url}: {e}"))?;
        Conn::open(&url.connection_opts(), waits()).map_err(|e| {
            format!(
                "cannot reach MariaDB at {} ({e:?}); start one (`start-stop-daemon --start \
                 --background --exec /usr/sbin/mariadbd`) or set SYNCSTORE_MARIADB_URL",
                url.database()
            )
        })?;
        Ok(Self { url })
    }

    /// A harness on the server of `SYNCSTORE_MARIADB_URL` (or the default).
    pub fn from_env() -> std::result::Result<Self, String> {
        Self::connect(&url_from_env())
    }

    fn scratch(db: &DbHandle) -> Result<&ScratchDatabase> {
        db.state::<ScratchDatabase>()
            .ok_or_else(|| Error::new(ErrorCode::Backend).detail("reason", "foreign_db_handle"))
    }

    fn open_config(
        db: &DbHandle,
        clock: Arc<dyn Clock>,
        limits: Option<PoolLimits>,
    ) -> Result<MariadbStorage> {
        let mut config = MariadbConfig {
            clock,
            ..MariadbConfig::default()
        };
        if let Some(limits) = limits {
            config.pool_size = limits.size;
            config.pool_wait_ms = limits.wait_ms;
            config.push_lock_timeout_ms = Some(limits.wait_ms);
        }
        MariadbStorage::connect_to(Self::scratch(db)?.url().clone(), config)
    }
}

/// The registry constructor: `env.server_url`, else the environment.
pub fn construct(env: &HarnessEnv) -> std::result::Result<Box<dyn Harness>, String> {
    let harness = match &env.server_url {
        Some(url) => MariadbHarness::connect(url)?,
        None => MariadbHarness::from_env()?,
    };
    Ok(Box::new(harness))
}

/// The registry entry (`cargo xtask conformance --dialect mariadb`).
pub const ENTRY: HarnessEntry = HarnessEntry {
    sql: DIALECT,
    url_schemes: URL_SCHEMES,
    hooks: construct,
};

/// MariaDB has no single writer and no commit group: partitions lock
/// separately and nothing queues at `begin`, so there is nothing to wait
/// for; fault plans go to the instance.
struct MariadbProbe(Arc<MariadbStorage>);

impl WriterProbe for MariadbProbe {
    fn await_queued(&self, _transactions: usize, _writes: usize) -> Result<()> {
        Ok(())
    }

    fn set_fault_plan(&self, plan: Option<Arc<sync_core::fault::FaultPlan>>) -> Result<()> {
        self.0.set_fault_plan(plan);
        Ok(())
    }
}

impl Harness for MariadbHarness {
    fn sql_dialect(&self) -> Dialect {
        DIALECT
    }

    fn properties(&self) -> Properties {
        PROPERTIES
    }

    fn create_database(&self) -> Result<DbHandle> {
        let db = ScratchDatabase::create(&self.url)?;
        Ok(DbHandle::new(db.url().database().to_owned(), db))
    }

    fn open(&self, db: &DbHandle, clock: Arc<dyn Clock>) -> Result<Arc<dyn ServerStorage>> {
        Ok(Arc::new(Self::open_config(db, clock, None)?))
    }

    fn open_with(
        &self,
        db: &DbHandle,
        clock: Arc<dyn Clock>,
        limits: PoolLimits,
    ) -> Result<Arc<dyn ServerStorage>> {
        Ok(Arc::new(Self::open_config(db, clock, Some(limits))?))
    }

    fn open_grouped(&self, db: &DbHandle, clock: Arc<dyn Clock>) -> Result<GroupedStorage> {
        let storage = Arc::new(Self::open_config(db, clock, None)?);
        Ok(GroupedStorage {
            storage: Arc::clone(&storage) as Arc<dyn ServerStorage>,
            probe: Box::new(MariadbProbe(storage)),
        })
    }

    fn raw(&self, db: &DbHandle) -> Result<Box<dyn RawAccess>> {
        let url = Self::scratch(db)?.url().clone();
        let (conn, _) = Conn::open(&url.connection_opts(), waits())?;
        Ok(Box::new(MariadbRaw {
            url,
            conn: Mutex::new(conn),
        }))
    }
}

/// Raw access: one plain connection of the check's database.
#[derive(Debug)]
struct MariadbRaw {
    url: MariadbUrl,
    conn: Mutex<Conn>,
}

impl MariadbRaw {
    fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let mut guard = self.conn.lock().map_err(|_| {
            Error::new(ErrorCode::Backend).detail("reason", "raw_connection_poisoned")
        })?;
        f(&mut guard)
    }

    fn run(&self, sql: &str) -> Result<()> {
        self.with(|c| c.run(sql))
    }

    fn exec(&self, sql: &str, params: Vec<Value>) -> Result<()> {
        self.with(|c| c.exec(sql, params).map(drop))
    }

    /// Runs one statement on `table` with its guard triggers lifted: they
    /// are dropped before it and created again after it, whatever its
    /// outcome (fixtures that set fences and checkpoint rows directly).
    fn exec_lifted(&self, table: &str, sql: &str, params: Vec<Value>) -> Result<()> {
        self.with(|c| {
            for guard in guards_of(table) {
                c.run(&guard.drop_sql())?;
            }
            let outcome = c.exec(sql, params).map(drop);
            let restored = guards_of(table).try_for_each(|guard| c.run(&guard.create_sql()));
            outcome.and(restored)
        })
    }

    fn where_sql(filter: &RawFilter) -> (String, Vec<Value>) {
        let sql: String = filter
            .eq
            .iter()
            .map(|(column, _)| format!(" AND CAST({} AS CHAR) = ?", q(column)))
            .collect();
        let values = filter
            .eq
            .iter()
            .map(|(_, v)| Value::from(v.as_str()))
            .collect();
        (sql, values)
    }

    fn observe_one(&self, table: &str) -> Result<ObservedTable> {
        self.with(|c| introspect::observe(c, table))
    }
}

impl RawAccess for MariadbRaw {
    fn insert_commit(
        &self,
        partition: &str,
        commit_seq: i64,
        writer_version: Option<i32>,
    ) -> Result<()> {
        self.exec(
            "INSERT INTO `sync_commits` (`partition`, `commit_seq`, `client_id`, `client_commit_id`, \
             `actor_id`, `created_at_ms`, `writer_version`) \
             VALUES (?, ?, 'raw-client', CONCAT('raw-', ?), 'raw-actor', 0, ?)",
            vec![
                partition.into(),
                commit_seq.into(),
                commit_seq.into(),
                writer_version.into(),
            ],
        )
    }

    fn old_writer(&self, partition: &str) -> Result<Box<dyn OldWriter>> {
        Ok(Box::new(MariadbOldWriter::begin(&self.url, partition)?))
    }

    fn set_layouts_text(&self, text: Option<&str>) -> Result<()> {
        if text.is_none() {
            self.run("ALTER TABLE `sync_schema_meta` MODIFY `layouts` LONGTEXT NULL")?;
        }
        self.exec(
            "UPDATE `sync_schema_meta` SET `layouts` = ? WHERE `id` = 1",
            vec![text.into()],
        )
    }

    fn set_schema_version(&self, version: i64) -> Result<()> {
        self.exec(
            "INSERT INTO `sync_schema_meta` (`id`, `schema_version`, `layouts`) VALUES (1, ?, '{}') \
             ON DUPLICATE KEY UPDATE `schema_version` = VALUE(`schema_version`)",
            vec![version.into()],
        )
    }

    fn set_push_result_text(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
        text: &str,
    ) -> Result<()> {
        self.exec(
            "INSERT INTO `sync_push_results` (`partition`, `client_id`, `client_commit_id`, `result`) \
             VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE `result` = VALUE(`result`)",
            vec![partition.into(), client_id.into(), client_commit_id.into(), text.into()],
        )
    }

    fn insert_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        state: &str,
        owner_epoch: i64,
    ) -> Result<()> {
        self.exec_lifted(
            "sync_backfill_checkpoints",
            "INSERT INTO `sync_backfill_checkpoints` (`partition`, `name`, `schema_version`, `state`, \
             `watermark`, `owner_epoch`, `observed_rows`, `updated_at_ms`) VALUES (?, ?, ?, ?, 0, ?, 0, 0) \
             ON DUPLICATE KEY UPDATE `schema_version` = VALUE(`schema_version`), \
             `state` = VALUE(`state`), `owner_epoch` = VALUE(`owner_epoch`)",
            vec![
                partition.into(),
                name.into(),
                schema_version.into(),
                state.into(),
                owner_epoch.into(),
            ],
        )
    }

    fn set_partition_fence(&self, partition: &str, version: Option<i32>) -> Result<()> {
        match version {
            Some(v) => self.exec_lifted(
                "sync_writer_fence",
                "INSERT INTO `sync_writer_fence` (`partition`, `required_writer_version`) VALUES (?, ?) \
                 ON DUPLICATE KEY UPDATE `required_writer_version` = VALUE(`required_writer_version`)",
                vec![partition.into(), v.into()],
            ),
            None => self.exec_lifted(
                "sync_writer_fence",
                "DELETE FROM `sync_writer_fence` WHERE `partition` = ?",
                vec![partition.into()],
            ),
        }
    }

    fn set_database_fence(&self, version: Option<i32>) -> Result<()> {
        self.exec_lifted(
            "sync_schema_meta",
            "UPDATE `sync_schema_meta` SET `required_writer_version` = ? WHERE `id` = 1",
            vec![version.into()],
        )
    }

    fn drop_table(&self, table: &str) -> Result<()> {
        self.run(&format!("DROP TABLE IF EXISTS {}", q(table)))
    }

    fn drop_column(&self, table: &str, column: &str) -> Result<()> {
        self.run(&format!(
            "ALTER TABLE {} DROP COLUMN {}",
            q(table),
            q(column)
        ))
    }

    fn add_column(&self, table: &str, column: &str, not_null: bool) -> Result<()> {
        let constraint = if not_null { " NOT NULL DEFAULT ''" } else { "" };
        self.run(&format!(
            "ALTER TABLE {} ADD COLUMN {} VARCHAR(255){constraint}",
            q(table),
            q(column)
        ))
    }

    fn rebuild_table_without_column(&self, table: &str, column: &str) -> Result<()> {
        self.drop_column(table, column)
    }

    fn set_row_payload(
        &self,
        table: &str,
        partition: &str,
        row_id: &str,
        payload: &[u8],
    ) -> Result<()> {
        self.exec(
            &format!(
                "UPDATE {} SET `_sync_payload` = ? WHERE `_sync_partition` = ? AND `_sync_row_id` = ?",
                q(table)
            ),
            vec![payload.into(), partition.into(), row_id.into()],
        )
    }

    fn drop_index(&self, name: &str) -> Result<()> {
        let tables: Vec<String> = self.with(|c| {
            c.rows(
                "SELECT DISTINCT CAST(TABLE_NAME AS CHAR) FROM information_schema.STATISTICS \
                 WHERE TABLE_SCHEMA = DATABASE() AND INDEX_NAME = ?",
                (name,),
            )
        })?;
        for table in tables {
            self.run(&DIALECT.drop_index_sql(&table, name))?;
        }
        Ok(())
    }

    fn create_index(&self, name: &str, table: &str, columns: &[&str], unique: bool) -> Result<()> {
        let observed = self.observe_one(table)?;
        let variable = |column: &str| {
            observed.column(column).is_some_and(|c| {
                let t = c.declared_type.as_str();
                t.contains("text")
                    || t.contains("blob")
                    || t.contains("char")
                    || t.contains("binary")
            })
        };
        let parts: Vec<String> = columns
            .iter()
            .map(|c| {
                if variable(c) && *c != "_sync_partition" && *c != "_sync_row_id" {
                    format!("{}(255)", q(c))
                } else {
                    q(c)
                }
            })
            .collect();
        let needs_pair = unique
            && columns
                .iter()
                .any(|c| variable(c) && *c != "_sync_partition");
        if needs_pair {
            self.run(&format!(
                "CREATE INDEX {} ON {} ({})",
                q(name),
                q(table),
                parts.join(", ")
            ))?;
            let full: Vec<String> = columns.iter().map(|c| q(c)).collect();
            return self.run(&format!(
                "CREATE UNIQUE INDEX {} ON {} ({})",
                q(&crate::dialect::uniqueness_index_name(name)),
                q(table),
                full.join(", ")
            ));
        }
        self.run(&format!(
            "CREATE {}INDEX {} ON {} ({})",
            if unique { "UNIQUE " } else { "" },
            q(name),
            q(table),
            parts.join(", ")
        ))
    }

    fn list_indexes(&self, table: &str) -> Result<Vec<RawIndex>> {
        Ok(self
            .observe_one(table)?
            .indexes
            .into_iter()
            .map(|i| (i.name, i.unique, i.columns))
            .collect())
    }

    fn list_columns(&self, table: &str) -> Result<Vec<RawColumn>> {
        Ok(self
            .observe_one(table)?
            .columns
            .into_iter()
            .map(|c| (c.name, c.declared_type, c.not_null))
            .collect())
    }

    fn table_exists(&self, table: &str) -> Result<bool> {
        Ok(self.observe_one(table)?.exists)
    }

    fn count(&self, table: &str, filter: RawFilter) -> Result<i64> {
        let (sql, values) = Self::where_sql(&filter);
        let count: Option<i64> = self.with(|c| {
            c.first(
                &format!("SELECT COUNT(*) FROM {} WHERE TRUE{sql}", q(table)),
                values,
            )
        })?;
        Ok(count.unwrap_or(0))
    }

    fn legacy_drop_column(&self, table: &str, column: &str) -> Result<()> {
        if table == "sync_commits" && column == "writer_version" {
            self.run(&format!("DROP TRIGGER IF EXISTS {}", q(FENCE_TRIGGER_NAME)))?;
        }
        self.drop_column(table, column)
    }

    fn read_text(&self, table: &str, column: &str, filter: RawFilter) -> Result<Option<String>> {
        let (sql, values) = Self::where_sql(&filter);
        let text: Option<Option<String>> = self.with(|c| {
            c.first(
                &format!(
                    "SELECT CAST({} AS CHAR) FROM {} WHERE TRUE{sql} LIMIT 1",
                    q(column),
                    q(table)
                ),
                values,
            )
        })?;
        Ok(text.flatten())
    }

    fn explain(&self, path: HotPath) -> Result<PlanSummary> {
        self.with(|c| crate::explain::explain(c, path))
    }

    fn set_key_collation(
        &self,
        _table: &str,
        _column: &str,
        _collation: Option<&str>,
    ) -> Result<()> {
        Err(Error::new(ErrorCode::CapabilityUnsupported).detail("capability", "key_collation"))
    }

    fn install_outdated_fence_trigger(&self) -> Result<()> {
        self.run(&fence_trigger_sql(OUTDATED_FENCE_TRIGGER_BODY))
    }

    fn fence_trigger_definition(&self) -> Result<Option<String>> {
        self.with(|c| {
            c.first(
                "SELECT CAST(ACTION_STATEMENT AS CHAR) FROM information_schema.TRIGGERS \
                 WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = ?",
                (FENCE_TRIGGER_NAME,),
            )
        })
    }

    fn exec(&self, dialect_sql: &str) -> Result<()> {
        self.run(dialect_sql)
    }

    fn attack_barrier(&self, attack: BarrierAttack<'_>) -> Result<()> {
        dml_user::attack_as_dml_user(&self.url, attack)
    }

    /// MariaDB triggers cannot be disabled (`ALTER TABLE … DISABLE
    /// TRIGGER` is a syntax error), so `Disable` is unsupported; the other
    /// tampers redefine the trigger under its name.
    fn tamper_fence_trigger(&self, tamper: FenceTamper) -> Result<()> {
        let name = q(FENCE_TRIGGER_NAME);
        match tamper {
            FenceTamper::Drop => self.run(&format!("DROP TRIGGER IF EXISTS {name}")),
            FenceTamper::Disable => Err(Error::new(ErrorCode::CapabilityUnsupported)
                .detail("capability", "disable_trigger")),
            FenceTamper::WhenFalse => self.run(&fence_trigger_sql(
                "BEGIN\n  IF FALSE THEN\n    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = \
                 'sync.storage.writer_fence_rejected';\n  END IF;\nEND",
            )),
            FenceTamper::BeforeUpdate => {
                self.run(&format!("DROP TRIGGER IF EXISTS {name}"))?;
                self.run(&format!(
                    "CREATE TRIGGER {name} BEFORE UPDATE ON `sync_commits` FOR EACH ROW\n{FENCE_TRIGGER_BODY}"
                ))
            }
        }
    }
}

/// A fence-unaware writer: its own connection, the partition lock as the
/// storage takes it, raw row and commit inserts; dropping it rolls back.
#[derive(Debug)]
struct MariadbOldWriter {
    conn: Conn,
    partition: String,
}

impl MariadbOldWriter {
    fn begin(url: &MariadbUrl, partition: &str) -> Result<Self> {
        let (mut conn, _) = Conn::open(&url.connection_opts(), waits())?;
        conn.run("START TRANSACTION")?;
        Ok(Self {
            conn,
            partition: partition.to_owned(),
        })
    }
}

impl Drop for MariadbOldWriter {
    fn drop(&mut self) {
        self.conn.rollback();
    }
}

impl OldWriter for MariadbOldWriter {
    fn lock(&mut self) -> Result<()> {
        crate::push_lock::lock_partition(&mut self.conn, &self.partition)
    }

    fn upsert_row(
        &mut self,
        table: &str,
        row_id: &str,
        payload: &[u8],
        scopes_json: &str,
    ) -> Result<()> {
        self.conn
            .exec(
                &format!(
                    "INSERT INTO {} (`_sync_partition`, `_sync_row_id`, `_sync_server_version`, \
                     `_sync_scopes`, `_sync_payload`) VALUES (?, ?, 1, ?, ?) \
                     ON DUPLICATE KEY UPDATE `_sync_server_version` = 1, \
                     `_sync_scopes` = VALUE(`_sync_scopes`), `_sync_payload` = VALUE(`_sync_payload`)",
                    q(table)
                ),
                (&self.partition, row_id, scopes_json, payload),
            )
            .map(drop)
    }

    fn insert_commit(&mut self, writer_version: Option<i32>) -> Result<()> {
        let seq: Option<i64> = self.conn.first(
            "INSERT INTO `sync_partitions` (`partition`, `max_commit_seq`) VALUES (?, 1) \
             ON DUPLICATE KEY UPDATE `max_commit_seq` = `max_commit_seq` + 1 RETURNING `max_commit_seq`",
            (&self.partition,),
        )?;
        let seq = seq.unwrap_or(1);
        self.conn
            .exec(
                "INSERT INTO `sync_commits` (`partition`, `commit_seq`, `client_id`, \
                 `client_commit_id`, `actor_id`, `created_at_ms`, `writer_version`) \
                 VALUES (?, ?, 'old-writer', CONCAT('old-', ?), 'old-actor', 0, ?)",
                (&self.partition, seq, seq, writer_version),
            )
            .map(drop)
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        self.conn.run("COMMIT")
    }
}
