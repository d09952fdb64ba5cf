//! Raw access for the conformance suite: a plain client in the check's
//! schema that plays other binaries and operators.

use std::sync::Mutex;

use postgres::types::ToSql;
use sync_conformance::{
    BarrierAttack, FenceTamper, HotPath, OldWriter, PlanSummary, RawAccess, RawColumn, RawFilter,
    RawIndex,
};
use sync_core::{Error, ErrorCode, Result};
use sync_schema::ObservedTable;

use super::{dml_role, explain, mixed_fleet, old_writer::PgOldWriter, schema_client};
use crate::introspect;
use crate::pool::{col, Conn};
use crate::sql::quote_ident;

/// Raw access to one schema.
#[derive(Debug)]
pub(crate) struct PgRaw {
    url: String,
    schema: String,
    conn: Mutex<Conn>,
    citus: bool,
}

const INSERT_COMMIT_SQL: &str = "INSERT INTO sync_commits \
    (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) \
    VALUES ($1, $2::int8, 'raw-client', 'raw-' || ($2::int8)::text, 'raw-actor', 0, $3::int4)";

impl PgRaw {
    /// Raw access to `schema`. On a Citus coordinator (`citus`) the session
    /// allows trigger DDL on distributed tables, as the operator or the other
    /// binary it plays would have to (`docs/scale-out.md`).
    pub(crate) fn new(url: &str, schema: &str, citus: bool) -> Result<Self> {
        let mut conn = Conn::from_client(schema_client(url, schema)?);
        if citus {
            conn.simple("SET citus.enable_unsafe_triggers = on")?;
        }
        Ok(Self {
            url: url.to_owned(),
            schema: schema.to_owned(),
            conn: Mutex::new(conn),
            citus,
        })
    }

    /// Whether the server is a Citus coordinator.
    pub(crate) fn citus(&self) -> bool {
        self.citus
    }

    /// Runs `f` on the raw connection.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let mut guard = self.conn.lock().map_err(|_| {
            Error::new(ErrorCode::Backend).detail("reason", "raw_connection_poisoned")
        })?;
        f(&mut guard)
    }

    fn batch(&self, sql: &str) -> Result<()> {
        self.with(|c| c.simple(sql).map(|_| ()))
    }

    fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<()> {
        self.with(|c| c.execute(sql, params).map(|_| ()))
    }

    /// Runs one statement with the barrier's guard triggers lifted: in a
    /// transaction with `session_replication_role = replica` (superuser
    /// only), in which ordinary triggers do not fire — fixtures that set
    /// fences and checkpoint rows directly. On Citus the setting must reach
    /// the workers, where the shard's triggers fire: the coordinator
    /// propagates `SET LOCAL` only when told to.
    fn execute_lifted(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<()> {
        let begin = if self.citus {
            "BEGIN; SET LOCAL citus.propagate_set_commands = 'local'; \
             SET LOCAL session_replication_role = replica"
        } else {
            "BEGIN; SET LOCAL session_replication_role = replica"
        };
        self.with(|c| {
            c.simple(begin)?;
            match c.execute(sql, params) {
                Ok(_) => c.simple("COMMIT").map(|_| ()),
                Err(error) => {
                    let _ = c.simple("ROLLBACK");
                    Err(error)
                }
            }
        })
    }

    fn filter_sql(filter: &RawFilter, first: usize) -> String {
        filter
            .eq
            .iter()
            .enumerate()
            .map(|(i, (column, _))| format!(" AND {}::text = ${}", quote_ident(column), first + i))
            .collect()
    }

    fn observe_one(&self, table: &str) -> Result<ObservedTable> {
        let observed = self.with(|c| introspect::observe(c, &[table.to_owned()]))?;
        let found = observed.iter().find(|t| t.name == table).cloned();
        Ok(found.unwrap_or_else(|| ObservedTable::absent(table)))
    }
}

const FENCE_DEFINITION_SQL: &str = "SELECT pg_get_triggerdef(t.oid) || E'\\n' || \
    pg_get_functiondef(t.tgfoid) FROM pg_trigger t \
    WHERE t.tgname = 'sync_commits_effective_writer_fence' AND t.tgrelid = to_regclass('sync_commits')";

impl RawAccess for PgRaw {
    fn insert_commit(
        &self,
        partition: &str,
        commit_seq: i64,
        writer_version: Option<i32>,
    ) -> Result<()> {
        let params: [&(dyn ToSql + Sync); 3] = [&partition, &commit_seq, &writer_version];
        if !self.citus {
            return self.execute(INSERT_COMMIT_SQL, &params);
        }
        // The writer this plays works on Citus as the storage does: its
        // transaction propagates its `search_path` to the workers, where the
        // triggers of the shard run (`docs/scale-out.md`).
        self.with(|c| {
            c.simple(&format!(
                "BEGIN; {}",
                crate::citus::PUSH_TRANSACTION_SETTINGS
            ))?;
            match c.execute(INSERT_COMMIT_SQL, &params) {
                Ok(_) => c.simple("COMMIT").map(|_| ()),
                Err(err) => {
                    let _ = c.simple("ROLLBACK");
                    Err(err)
                }
            }
        })
    }

    fn old_writer(&self, partition: &str) -> Result<Box<dyn OldWriter>> {
        Ok(Box::new(PgOldWriter::begin(
            &self.url,
            &self.schema,
            partition,
        )?))
    }

    fn set_layouts_text(&self, text: Option<&str>) -> Result<()> {
        if text.is_none() {
            self.batch("ALTER TABLE sync_schema_meta ALTER COLUMN layouts DROP NOT NULL")?;
        }
        self.execute(
            "UPDATE sync_schema_meta SET layouts = $1 WHERE id = 1",
            &[&text],
        )
    }

    fn set_schema_version(&self, version: i64) -> Result<()> {
        self.execute(
            "INSERT INTO sync_schema_meta (id, schema_version, layouts) VALUES (1, $1, '{}') \
             ON CONFLICT (id) DO UPDATE SET schema_version = excluded.schema_version",
            &[&version],
        )
    }

    fn set_push_result_text(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
        text: &str,
    ) -> Result<()> {
        let value = if serde_json::from_str::<serde_json::Value>(text).is_ok() {
            "($4::text)::jsonb"
        } else {
            "to_jsonb($4::text)"
        };
        let sql = format!(
            "INSERT INTO sync_push_results (partition, client_id, client_commit_id, result) \
             VALUES ($1, $2, $3, {value}) ON CONFLICT (partition, client_id, client_commit_id) \
             DO UPDATE SET result = excluded.result"
        );
        self.execute(&sql, &[&partition, &client_id, &client_commit_id, &text])
    }

    fn insert_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        state: &str,
        owner_epoch: i64,
    ) -> Result<()> {
        self.execute_lifted(
            "INSERT INTO sync_backfill_checkpoints (partition, name, schema_version, state, \
               watermark, owner_epoch, observed_rows, updated_at_ms) \
             VALUES ($1, $2, $3, $4, 0, $5, 0, 0) ON CONFLICT (partition, name) DO UPDATE \
             SET schema_version = excluded.schema_version, state = excluded.state, \
               owner_epoch = excluded.owner_epoch",
            &[&partition, &name, &schema_version, &state, &owner_epoch],
        )
    }

    fn set_partition_fence(&self, partition: &str, version: Option<i32>) -> Result<()> {
        match version {
            Some(v) => self.execute_lifted(
                "INSERT INTO sync_writer_fence (partition, required_writer_version) VALUES ($1, $2) \
                 ON CONFLICT (partition) DO UPDATE SET required_writer_version = excluded.required_writer_version",
                &[&partition, &v],
            ),
            None => self.execute_lifted("DELETE FROM sync_writer_fence WHERE partition = $1", &[&partition]),
        }
    }

    fn set_database_fence(&self, version: Option<i32>) -> Result<()> {
        self.execute_lifted(
            "UPDATE sync_schema_meta SET required_writer_version = $1 WHERE id = 1",
            &[&version],
        )
    }

    fn drop_table(&self, table: &str) -> Result<()> {
        self.batch(&format!("DROP TABLE IF EXISTS {}", quote_ident(table)))
    }

    fn drop_column(&self, table: &str, column: &str) -> Result<()> {
        self.batch(&format!(
            "ALTER TABLE {} DROP COLUMN {}",
            quote_ident(table),
            quote_ident(column)
        ))
    }

    fn add_column(&self, table: &str, column: &str, not_null: bool) -> Result<()> {
        let constraint = if not_null { " NOT NULL DEFAULT ''" } else { "" };
        self.batch(&format!(
            "ALTER TABLE {} ADD COLUMN {} TEXT{constraint}",
            quote_ident(table),
            quote_ident(column)
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
        let sql = format!(
            "UPDATE {} SET \"_sync_payload\" = $1 WHERE \"_sync_partition\" = $2 AND \"_sync_row_id\" = $3",
            quote_ident(table)
        );
        self.execute(&sql, &[&payload, &partition, &row_id])
    }

    fn drop_index(&self, name: &str) -> Result<()> {
        self.batch(&format!("DROP INDEX IF EXISTS {}", quote_ident(name)))
    }

    fn create_index(&self, name: &str, table: &str, columns: &[&str], unique: bool) -> Result<()> {
        let columns: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
        self.batch(&format!(
            "CREATE {}INDEX {} ON {} ({})",
            if unique { "UNIQUE " } else { "" },
            quote_ident(name),
            quote_ident(table),
            columns.join(", ")
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
        self.with(|c| {
            let row = c.query_one("SELECT to_regclass(quote_ident($1)) IS NOT NULL", &[&table])?;
            col(&row, 0)
        })
    }

    fn count(&self, table: &str, filter: RawFilter) -> Result<i64> {
        let sql = format!(
            "SELECT count(*) FROM {} WHERE TRUE{}",
            quote_ident(table),
            Self::filter_sql(&filter, 1)
        );
        let values: Vec<&(dyn ToSql + Sync)> = filter
            .eq
            .iter()
            .map(|(_, v)| v as &(dyn ToSql + Sync))
            .collect();
        self.with(|c| {
            let row = c.query_one(&sql, &values)?;
            col(&row, 0)
        })
    }

    fn legacy_drop_column(&self, table: &str, column: &str) -> Result<()> {
        if table == "sync_commits" && column == "writer_version" {
            self.batch(
                "DROP TRIGGER IF EXISTS sync_commits_effective_writer_fence ON sync_commits",
            )?;
        }
        self.drop_column(table, column)
    }

    fn read_text(&self, table: &str, column: &str, filter: RawFilter) -> Result<Option<String>> {
        let sql = format!(
            "SELECT {}::text FROM {} WHERE TRUE{} LIMIT 1",
            quote_ident(column),
            quote_ident(table),
            Self::filter_sql(&filter, 1)
        );
        let values: Vec<&(dyn ToSql + Sync)> = filter
            .eq
            .iter()
            .map(|(_, v)| v as &(dyn ToSql + Sync))
            .collect();
        self.with(|c| match c.query_opt(&sql, &values)? {
            Some(row) => col(&row, 0),
            None => Ok(None),
        })
    }

    fn explain(&self, path: HotPath) -> Result<PlanSummary> {
        explain::explain(self, path)
    }

    fn set_key_collation(&self, table: &str, column: &str, collation: Option<&str>) -> Result<()> {
        let collation = quote_ident(collation.unwrap_or("default"));
        self.batch(&format!(
            "ALTER TABLE {} ALTER COLUMN {} TYPE text COLLATE {collation}",
            quote_ident(table),
            quote_ident(column)
        ))
    }

    fn column_collation(&self, table: &str, column: &str) -> Result<Option<String>> {
        Ok(self
            .observe_one(table)?
            .columns
            .into_iter()
            .find(|c| c.name == column)
            .and_then(|c| c.collation))
    }

    fn install_outdated_fence_trigger(&self) -> Result<()> {
        Err(Error::new(ErrorCode::CapabilityUnsupported)
            .detail("capability", "outdated_fence_trigger"))
    }

    fn fence_trigger_definition(&self) -> Result<Option<String>> {
        self.with(|c| match c.query_opt(FENCE_DEFINITION_SQL, &[])? {
            Some(row) => col(&row, 0),
            None => Ok(None),
        })
    }

    fn exec(&self, dialect_sql: &str) -> Result<()> {
        self.batch(dialect_sql)
    }

    fn replay_reference_start(&self) -> Result<()> {
        if !self.citus {
            return self.batch(mixed_fleet::REFERENCE_0_23_START_SQL);
        }
        // Citus propagates a DDL statement of a multi-statement message with
        // the whole message's text, which its workers refuse: one by one.
        for statement in mixed_fleet::statements_of(mixed_fleet::REFERENCE_0_23_START_SQL) {
            self.batch(statement)?;
        }
        Ok(())
    }

    fn attack_barrier(&self, attack: BarrierAttack<'_>) -> Result<()> {
        dml_role::attack_as_dml_role(&self.url, &self.schema, attack)
    }

    fn tamper_fence_trigger(&self, tamper: FenceTamper) -> Result<()> {
        for statement in mixed_fleet::tamper_sql(tamper) {
            self.batch(&statement)?;
        }
        Ok(())
    }

    fn insert_commit_as_shadowing_role(
        &self,
        partition: &str,
        commit_seq: i64,
        writer_version: Option<i32>,
    ) -> Result<()> {
        mixed_fleet::insert_as_shadowing_role(
            &self.url,
            &self.schema,
            partition,
            commit_seq,
            writer_version,
        )
    }
}
