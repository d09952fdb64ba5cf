//! The raw SQLite baseline: one `rusqlite::Connection` with the writer's
//! pragmas, cached prepared statements, `BEGIN IMMEDIATE … COMMIT` per
//! commit (`dialects.md` §5–§7).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rusqlite::{params, Connection, OptionalExtension, ToSql};
use sync_core::{codec, CompiledTable, RowValue};

use super::fixture::{self, BenchCommit, BenchRow, CHECKPOINT, EPOCH_MS, TABLE, VERSION};
use super::raw::{reference_scan_pages, RawClient, RawCommit, ReferenceShape, RAW_BACKFILL_CLIENT};

const PUSH_RESULT_GET: &str = "SELECT result FROM sync_push_results \
WHERE partition = ?1 AND client_id = ?2 AND client_commit_id = ?3";
const GATE: &str = "SELECT (SELECT schema_version FROM sync_schema_meta WHERE id = 1), \
(SELECT log_epoch FROM sync_partition_registry WHERE partition = ?1), \
(SELECT json_group_array(name) FROM (SELECT name FROM sync_backfill_checkpoints \
WHERE partition = ?1 AND schema_version = ?2 AND state <> 'activated' ORDER BY name))";
const SCOPES_DELETE: &str = "DELETE FROM sync_row_scopes \
WHERE partition = ?1 AND tbl = ?2 AND row_id = ?3 AND (var, value) IN \
(SELECT key, value FROM json_each((SELECT _sync_scopes FROM todos \
WHERE _sync_partition = ?1 AND _sync_row_id = ?3)))";
const ROW_UPSERT: &str = "INSERT INTO todos (_sync_partition, _sync_row_id, id, list_id, title, \
done, position, updated_at_ms, _sync_server_version, _sync_scopes, _sync_payload) \
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
ON CONFLICT (_sync_partition, _sync_row_id) DO UPDATE SET id = excluded.id, \
list_id = excluded.list_id, title = excluded.title, done = excluded.done, \
position = excluded.position, updated_at_ms = excluded.updated_at_ms, \
_sync_server_version = excluded._sync_server_version, _sync_scopes = excluded._sync_scopes, \
_sync_payload = excluded._sync_payload";
const SCOPE_INSERT: &str = "INSERT OR IGNORE INTO sync_row_scopes \
(partition, tbl, var, value, row_id) VALUES (?1, ?2, ?3, ?4, ?5)";
const ALLOCATE: &str = "INSERT INTO sync_partitions (partition, max_commit_seq) VALUES (?1, 1) \
ON CONFLICT (partition) DO UPDATE SET max_commit_seq = max_commit_seq + 1 RETURNING max_commit_seq";
const COMMIT_INSERT: &str = "INSERT INTO sync_commits \
(partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) \
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
const CHANGE_INSERT: &str = "INSERT INTO sync_changes \
(partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload) \
VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8)";
const CHANGE_SCOPE_INSERT: &str = "INSERT OR IGNORE INTO sync_change_scopes \
(partition, tbl, var, value, commit_seq) VALUES (?1, ?2, ?3, ?4, ?5)";
const RESULT_INSERT: &str = "INSERT INTO sync_push_results \
(partition, client_id, client_commit_id, result) VALUES (?1, ?2, ?3, ?4) \
ON CONFLICT (partition, client_id, client_commit_id) DO NOTHING";
const KEYSET_BATCH: &str =
    "SELECT _sync_row_id, _sync_server_version, _sync_scopes, _sync_payload \
FROM todos WHERE _sync_partition = ?1 AND _sync_row_id > ?2 ORDER BY _sync_row_id LIMIT CAST(?3 AS INTEGER)";
const DERIVED_UPDATE: &str = "UPDATE todos SET title_lower = ?3, _sync_server_version = ?4, \
_sync_payload = ?5 WHERE _sync_partition = ?1 AND _sync_row_id = ?2";
const SEED_ROW: &str = "INSERT INTO todos (_sync_partition, _sync_row_id, id, list_id, title, \
done, position, updated_at_ms, _sync_server_version, _sync_scopes, _sync_payload) \
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

/// `IN (?n, ?n+1, …)` placeholders.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A scan page around the storage's candidate subquery (one primary-key
/// range per value merged for 2…128 values, `dialects.md` §7): the
/// fastest hand-written form measured (`docs/benchmarks.md`).
fn scan_sql(values: usize) -> String {
    format!(
        "SELECT c.row_id, t._sync_server_version, t._sync_scopes, t._sync_payload \
         FROM ({}) AS c \
         LEFT JOIN todos AS t ON t._sync_partition = ?1 AND t._sync_row_id = c.row_id \
         ORDER BY c.row_id",
        sync_sqlite::hot_path_sql::scan_candidates_sql("todos", values)
    )
}

/// The reference server's scan page over the same tables: the distinct row
/// ids of the scope index whose value is in an `IN` list, after the
/// cursor, in order, limited, each joined to its row.
fn reference_scan_sql(values: usize) -> String {
    format!(
        "SELECT c.row_id, t._sync_server_version, t._sync_scopes, t._sync_payload \
         FROM (SELECT DISTINCT row_id FROM sync_row_scopes WHERE partition = ?1 AND tbl = ?2 \
         AND var = ?3 AND value IN ({}) AND row_id > ?4 ORDER BY row_id LIMIT ?5) AS c \
         LEFT JOIN todos AS t ON t._sync_partition = ?1 AND t._sync_row_id = c.row_id \
         ORDER BY c.row_id",
        placeholders(6, values)
    )
}

/// The candidate subquery: one primary-key range per value merged by a
/// compound `UNION … ORDER BY … LIMIT` for 2…128 values (as the storage
/// does), else `DISTINCT … IN (…)`.
fn window_candidates(values: usize) -> String {
    if (2..=sync_sqlite::hot_path_sql::MERGED_WINDOW_VALUES).contains(&values) {
        let arms: Vec<String> = (0..values)
            .map(|i| {
                format!(
                    "SELECT commit_seq FROM sync_change_scopes WHERE partition = ?1 AND tbl = ?2 \
                     AND var = ?3 AND value = ?{} AND commit_seq > ?4 AND commit_seq <= ?5",
                    7 + i
                )
            })
            .collect();
        return format!(
            "{} ORDER BY 1 LIMIT CAST(?6 AS INTEGER)",
            arms.join(" UNION ")
        );
    }
    format!(
        "SELECT DISTINCT commit_seq FROM sync_change_scopes WHERE partition = ?1 \
         AND tbl = ?2 AND var = ?3 AND value IN ({}) AND commit_seq > ?4 AND commit_seq <= ?5 \
         ORDER BY commit_seq LIMIT CAST(?6 AS INTEGER)",
        placeholders(7, values)
    )
}

fn window_sql(values: usize) -> String {
    format!(
        "SELECT c.commit_seq, m.created_at_ms, m.actor_id, ch.idx, ch.row_id, ch.op, \
         ch.row_version, ch.scopes, ch.payload \
         FROM ({}) AS c \
         LEFT JOIN sync_commits AS m ON m.partition = ?1 AND m.commit_seq = c.commit_seq \
         LEFT JOIN sync_changes AS ch ON ch.partition = ?1 AND ch.commit_seq = c.commit_seq \
         AND ch.tbl = ?2 ORDER BY c.commit_seq, ch.idx",
        window_candidates(values)
    )
}

/// One scan row, owned: row id, version, scopes, payload.
type ScanRow = (String, Option<i64>, Option<String>, Option<Vec<u8>>);

/// The rows of one scan page or batch: row id, version, scopes, payload
/// (the last three absent for an index entry whose row is gone).
fn scan_rows(
    stmt: &mut rusqlite::CachedStatement<'_>,
    bind: &[&dyn ToSql],
) -> Result<Vec<ScanRow>> {
    Ok(stmt
        .query_map(bind, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?)
}

/// One window row, owned (what a client needs to serve it).
type WindowRow = (
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<Vec<u8>>,
);

/// A hand-written SQLite client on one connection.
#[derive(Debug)]
pub struct RawSqlite {
    conn: Connection,
}

impl RawSqlite {
    /// Opens the database file with the writer's pragmas
    /// (`journal_mode=WAL`, `synchronous`, `busy_timeout=5000`,
    /// `foreign_keys=OFF`), the readers' `mmap_size` and the query planner
    /// stability guarantee.
    pub fn open(path: &Path, synchronous: &str) -> Result<Self> {
        Self::open_waiting(path, synchronous, Duration::from_millis(5_000))
    }

    /// [`RawSqlite::open`] with another `busy_timeout` (W10's many writers
    /// queue on the file lock far longer than one writer ever waits).
    pub fn open_waiting(path: &Path, synchronous: &str, busy_timeout: Duration) -> Result<Self> {
        let conn = Connection::open(path).with_context(|| format!("opening {path:?}"))?;
        conn.set_prepared_statement_cache_capacity(256);
        // As the storage's connections: plans that never depend on bound
        // values, so no statement is re-prepared once `ANALYZE` has run.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        conn.busy_timeout(busy_timeout)?;
        let _mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        conn.pragma_update(None, "synchronous", synchronous)?;
        conn.pragma_update(None, "foreign_keys", "OFF")?;
        // The storage's readers map the file (`reader_mmap_size`), so the
        // baseline's one connection does too; its pushes then read pages
        // through the map as well, which the storage's writer does not.
        let mapped = i64::try_from(sync_sqlite::DEFAULT_READER_MMAP_SIZE)?;
        conn.pragma_update(None, "mmap_size", mapped)?;
        // The baseline implements the storage's protocol by hand over the
        // same file, activations included: it is one of the storage's own.
        sync_sqlite::barrier_guards::register_storage_function(&conn)?;
        Ok(Self { conn })
    }

    fn in_transaction<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        match f(&self.conn) {
            Ok(value) => {
                self.conn.execute_batch("COMMIT")?;
                Ok(value)
            }
            Err(error) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(error)
            }
        }
    }

    fn write_row(conn: &Connection, partition: &str, row: &BenchRow) -> Result<()> {
        conn.prepare_cached(SCOPES_DELETE)?
            .execute(params![partition, TABLE, row.id])?;
        conn.prepare_cached(ROW_UPSERT)?.execute(params![
            partition,
            row.id,
            row.id,
            row.list_id,
            row.title,
            row.done,
            row.position,
            row.updated_at_ms,
            row.server_version,
            row.scopes_json,
            row.payload,
        ])?;
        let mut insert = conn.prepare_cached(SCOPE_INSERT)?;
        for (var, value) in &row.scopes {
            insert.execute(params![partition, TABLE, var, value, row.id])?;
        }
        Ok(())
    }

    /// Everything of a push between `BEGIN IMMEDIATE` and `COMMIT`.
    fn push_body(
        conn: &Connection,
        partition: &str,
        commit: &BenchCommit,
        gate: bool,
    ) -> Result<i64> {
        {
            if gate {
                let _: (Option<i64>, Option<String>, String) = conn
                    .prepare_cached(GATE)?
                    .query_row(params![partition, VERSION], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })?;
            }
            let existing: Option<String> = conn
                .prepare_cached(PUSH_RESULT_GET)?
                .query_row(
                    params![partition, commit.client_id, commit.commit_id],
                    |r| r.get(0),
                )
                .optional()?;
            if existing.is_some() {
                bail!("commit {} was already pushed", commit.commit_id);
            }
            for row in &commit.rows {
                Self::write_row(conn, partition, row)?;
            }
            let seq = Self::append(conn, partition, commit)?;
            conn.prepare_cached(RESULT_INSERT)?.execute(params![
                partition,
                commit.client_id,
                commit.commit_id,
                commit.result_json(seq),
            ])?;
            Ok(seq)
        }
    }

    fn append(conn: &Connection, partition: &str, commit: &BenchCommit) -> Result<i64> {
        let seq: i64 = conn
            .prepare_cached(ALLOCATE)?
            .query_row([partition], |r| r.get(0))?;
        conn.prepare_cached(COMMIT_INSERT)?.execute(params![
            partition,
            seq,
            commit.client_id,
            commit.commit_id,
            commit.actor_id,
            commit.created_at_ms,
            VERSION,
        ])?;
        let mut change = conn.prepare_cached(CHANGE_INSERT)?;
        let mut scopes = BTreeSet::new();
        for (idx, row) in commit.rows.iter().enumerate() {
            change.execute(params![
                partition,
                seq,
                idx as i64,
                TABLE,
                row.id,
                row.server_version,
                row.scopes_json,
                row.payload,
            ])?;
            scopes.extend(row.scopes.iter());
        }
        let mut scope = conn.prepare_cached(CHANGE_SCOPE_INSERT)?;
        for (var, value) in scopes {
            scope.execute(params![partition, TABLE, var, value, seq])?;
        }
        Ok(seq)
    }
}

impl RawClient for RawSqlite {
    fn push(&mut self, partition: &str, commit: &BenchCommit, gate: bool) -> Result<i64> {
        self.in_transaction(|conn| Self::push_body(conn, partition, commit, gate))
    }

    fn push_batch(&mut self, partition: &str, commits: &[BenchCommit]) -> Result<()> {
        for chunk in commits.chunks(1_000) {
            self.in_transaction(|conn| {
                for commit in chunk {
                    Self::push_body(conn, partition, commit, false)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    fn scan(
        &mut self,
        partition: &str,
        lists: &[String],
        page: i64,
        max_pages: u64,
    ) -> Result<u64> {
        let mut stmt = self.conn.prepare_cached(&scan_sql(lists.len()))?;
        let mut after = String::new();
        let mut total = 0u64;
        for _ in 0..max_pages {
            let mut bind: Vec<&dyn ToSql> =
                vec![&partition, &TABLE, &fixture::SCOPE_VAR, &after, &page];
            bind.extend(lists.iter().map(|v| v as &dyn ToSql));
            let rows = scan_rows(&mut stmt, &bind)?;
            let count = rows.len();
            total += count as u64;
            match rows.into_iter().next_back() {
                Some(last) if count as i64 == page => after = last.0,
                _ => return Ok(total),
            }
        }
        Ok(total)
    }

    fn scan_reference_shape(
        &mut self,
        shape: ReferenceShape,
        partition: &str,
        lists: &[String],
        page: i64,
        max_pages: u64,
    ) -> Result<Option<u64>> {
        // The reference's SQLite dialect writes an `IN` list only.
        if shape != ReferenceShape::InList {
            return Ok(None);
        }
        let mut stmt = self.conn.prepare_cached(&reference_scan_sql(lists.len()))?;
        let total = reference_scan_pages(page, max_pages, |after, size| {
            let mut bind: Vec<&dyn ToSql> =
                vec![&partition, &TABLE, &fixture::SCOPE_VAR, &after, &size];
            bind.extend(lists.iter().map(|v| v as &dyn ToSql));
            let rows = scan_rows(&mut stmt, &bind)?;
            Ok(rows
                .into_iter()
                .map(|(id, _version, _scopes, payload)| (id, payload.is_some()))
                .collect())
        })?;
        Ok(Some(total))
    }

    fn window(
        &mut self,
        partition: &str,
        lists: &[String],
        after: i64,
        through: i64,
        limit_changes: i64,
    ) -> Result<Vec<RawCommit>> {
        let page = limit_changes.max(64);
        let mut stmt = self.conn.prepare_cached(&window_sql(lists.len()))?;
        let mut cursor = after;
        let mut out: Vec<RawCommit> = Vec::new();
        let mut matched = 0i64;
        loop {
            let mut bind: Vec<&dyn ToSql> = vec![
                &partition,
                &TABLE,
                &fixture::SCOPE_VAR,
                &cursor,
                &through,
                &page,
            ];
            bind.extend(lists.iter().map(|v| v as &dyn ToSql));
            let rows: Vec<WindowRow> = stmt
                .query_map(bind.as_slice(), |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                        r.get(8)?,
                    ))
                })?
                .collect::<rusqlite::Result<_>>()?;
            let mut candidates = 0i64;
            let mut rows = rows.into_iter().peekable();
            while let Some(first) = rows.next() {
                let seq = first.0;
                candidates += 1;
                cursor = seq;
                let mut changes = usize::from(first.4.is_some());
                while rows.peek().is_some_and(|r| r.0 == seq) {
                    changes += usize::from(rows.next().is_some_and(|r| r.4.is_some()));
                }
                if changes > 0 {
                    out.push((seq, changes));
                    matched += changes as i64;
                    if matched >= limit_changes {
                        return Ok(out);
                    }
                }
            }
            if candidates < page {
                return Ok(out);
            }
        }
    }

    fn backfill(&mut self, partition: &str, table: &CompiledTable, batch: i64) -> Result<u64> {
        let title = *table.column_index.get("title").context("title column")?;
        let derived = *table
            .column_index
            .get(fixture::DERIVED)
            .context("derived column")?;
        self.in_transaction(|conn| {
            // Declare, then claim: the database admits a checkpoint only as
            // a fresh `declared` row.
            conn.execute(
                "INSERT INTO sync_backfill_checkpoints (partition, name, schema_version, state, \
                 watermark, owner_epoch, observed_rows, updated_at_ms) \
                 VALUES (?1, ?2, ?3, 'declared', 0, 0, 0, ?4)",
                params![partition, CHECKPOINT, VERSION, EPOCH_MS],
            )?;
            conn.execute(
                "UPDATE sync_backfill_checkpoints SET state = 'backfilling', owner_epoch = 1 \
                 WHERE partition = ?1 AND name = ?2",
                params![partition, CHECKPOINT],
            )?;
            Ok(())
        })?;
        let mut after = String::new();
        let mut total = 0u64;
        let mut batch_no = 0u64;
        loop {
            let done = self.in_transaction(|conn| {
                let rows: Vec<(String, i64, String, Vec<u8>)> = conn
                    .prepare_cached(KEYSET_BATCH)?
                    .query_map(params![partition, after, batch], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                    })?
                    .collect::<rusqlite::Result<_>>()?;
                let Some(last) = rows.last() else {
                    return Ok(true);
                };
                let next_after = last.0.clone();
                let seq: i64 = conn
                    .prepare_cached(ALLOCATE)?
                    .query_row([partition], |r| r.get(0))?;
                conn.prepare_cached(COMMIT_INSERT)?.execute(params![
                    partition,
                    seq,
                    RAW_BACKFILL_CLIENT,
                    format!("batch-{batch_no}"),
                    RAW_BACKFILL_CLIENT,
                    EPOCH_MS,
                    VERSION,
                ])?;
                let mut update = conn.prepare_cached(DERIVED_UPDATE)?;
                let mut change = conn.prepare_cached(CHANGE_INSERT)?;
                let mut lists = BTreeSet::new();
                for (idx, (row_id, version, scopes, payload)) in rows.iter().enumerate() {
                    let mut values = codec::decode_row(table, payload)?;
                    let lower = match values.get(title) {
                        Some(RowValue::String(t)) => RowValue::String(t.to_lowercase()),
                        _ => RowValue::Null,
                    };
                    let text = match &lower {
                        RowValue::String(t) => Some(t.clone()),
                        _ => None,
                    };
                    if let Some(slot) = values.get_mut(derived) {
                        *slot = lower;
                    }
                    let payload = codec::encode_row(table, &values)?;
                    let version = version + 1;
                    update.execute(params![partition, row_id, text, version, payload])?;
                    change.execute(params![
                        partition, seq, idx as i64, TABLE, row_id, version, scopes, payload,
                    ])?;
                    lists.insert(scopes.clone());
                }
                let mut scope = conn.prepare_cached(CHANGE_SCOPE_INSERT)?;
                for scopes in &lists {
                    let parsed: sync_core::StoredScopes = serde_json::from_str(scopes)?;
                    for (var, value) in &parsed {
                        scope.execute(params![partition, TABLE, var, value, seq])?;
                    }
                }
                conn.prepare_cached(
                    "UPDATE sync_backfill_checkpoints SET observed_rows = observed_rows + ?3, \
                     updated_at_ms = ?4 WHERE partition = ?1 AND name = ?2",
                )?
                .execute(params![
                    partition,
                    CHECKPOINT,
                    rows.len() as i64,
                    EPOCH_MS
                ])?;
                total += rows.len() as u64;
                after = next_after;
                Ok(rows.len() < usize::try_from(batch).unwrap_or(usize::MAX))
            })?;
            batch_no += 1;
            if done {
                self.in_transaction(|conn| {
                    conn.execute(
                        "UPDATE sync_backfill_checkpoints SET state = 'activated', \
                         watermark = (SELECT max_commit_seq FROM sync_partitions WHERE partition = ?1) \
                         WHERE partition = ?1 AND name = ?2",
                        params![partition, CHECKPOINT],
                    )?;
                    Ok(())
                })?;
                return Ok(total);
            }
        }
    }

    fn seed_rows(&mut self, partition: &str, rows: &[BenchRow]) -> Result<()> {
        for chunk in rows.chunks(50_000) {
            self.in_transaction(|conn| {
                let mut insert = conn.prepare_cached(SEED_ROW)?;
                let mut scope = conn.prepare_cached(SCOPE_INSERT)?;
                for row in chunk {
                    insert.execute(params![
                        partition,
                        row.id,
                        row.id,
                        row.list_id,
                        row.title,
                        row.done,
                        row.position,
                        row.updated_at_ms,
                        row.server_version,
                        row.scopes_json,
                        row.payload,
                    ])?;
                    for (var, value) in &row.scopes {
                        scope.execute(params![partition, TABLE, var, value, row.id])?;
                    }
                }
                Ok(())
            })?;
        }
        self.conn.execute(
            "INSERT INTO sync_partitions (partition) VALUES (?1) ON CONFLICT DO NOTHING",
            [partition],
        )?;
        Ok(())
    }

    fn seed_log(&mut self, partition: &str, commits: u64, rows: &[BenchRow]) -> Result<()> {
        let distinct = rows.len() as u64;
        if distinct == 0 {
            bail!("seed_log needs rows");
        }
        let mut n = 0u64;
        while n < commits {
            let end = (n + 100_000).min(commits);
            self.in_transaction(|conn| {
                let mut commit = conn.prepare_cached(COMMIT_INSERT)?;
                let mut change = conn.prepare_cached(CHANGE_INSERT)?;
                let mut scope = conn.prepare_cached(CHANGE_SCOPE_INSERT)?;
                let mut result = conn.prepare_cached(RESULT_INSERT)?;
                for k in n..end {
                    let seq = i64::try_from(k + 1)?;
                    let row = &rows[usize::try_from(k % distinct)?];
                    let version = i64::try_from(k / distinct + 1)?;
                    let client = format!("seed-client-{}", k % 16);
                    let commit_id = format!("seed-{k:08}");
                    commit.execute(params![
                        partition,
                        seq,
                        client,
                        commit_id,
                        "seed-user",
                        EPOCH_MS + seq,
                        VERSION
                    ])?;
                    change.execute(params![
                        partition,
                        seq,
                        0i64,
                        TABLE,
                        row.id,
                        version,
                        row.scopes_json,
                        row.payload
                    ])?;
                    scope.execute(params![partition, TABLE, fixture::SCOPE_VAR, row.list_id, seq])?;
                    let json = format!(
                        "{{\"status\":\"applied\",\"commitSeq\":{seq},\"recordedAtMs\":{},\"results\":[]}}",
                        EPOCH_MS + seq
                    );
                    result.execute(params![partition, client, commit_id, json])?;
                }
                Ok(())
            })?;
            n = end;
        }
        let mut seeded: Vec<BenchRow> = rows.to_vec();
        for (i, row) in seeded.iter_mut().enumerate() {
            let i = i as u64;
            row.server_version =
                i64::try_from(commits / distinct + u64::from(i < commits % distinct))?;
        }
        seeded.retain(|r| r.server_version > 0);
        self.seed_rows(partition, &seeded)?;
        self.conn.execute(
            "UPDATE sync_partitions SET max_commit_seq = ?2 WHERE partition = ?1",
            params![partition, i64::try_from(commits)?],
        )?;
        Ok(())
    }

    /// Sets or removes both fences — a fixture, so with the barrier's guards
    /// lifted (no writer may lower a fence).
    fn set_fence(&mut self, partition: &str, present: bool) -> Result<()> {
        self.in_transaction(|conn| {
            Ok(sync_sqlite::barrier_guards::without_guards(conn, || {
                write_fences(conn, partition, present).map_err(sync_core::Error::backend)
            })?)
        })
    }

    fn analyze(&mut self) -> Result<()> {
        self.conn.execute_batch("ANALYZE")?;
        Ok(())
    }
}

/// Both fences at [`VERSION`] (`present`) or none.
fn write_fences(conn: &Connection, partition: &str, present: bool) -> rusqlite::Result<()> {
    if present {
        conn.execute(
            "UPDATE sync_schema_meta SET required_writer_version = ?1 WHERE id = 1",
            [VERSION],
        )?;
        conn.execute(
            "INSERT INTO sync_writer_fence (partition, required_writer_version) VALUES (?1, ?2) \
             ON CONFLICT (partition) DO UPDATE SET required_writer_version = excluded.required_writer_version",
            params![partition, VERSION],
        )?;
    } else {
        conn.execute(
            "UPDATE sync_schema_meta SET required_writer_version = NULL WHERE id = 1",
            [],
        )?;
        conn.execute("DELETE FROM sync_writer_fence", [])?;
    }
    Ok(())
}
