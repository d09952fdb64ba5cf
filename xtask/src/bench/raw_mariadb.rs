//! The raw MariaDB baseline: one `mysql` connection to the benchmark
//! database, set up as the storage's sessions are (`utf8mb4_nopad_bin`, the
//! storage's `sql_mode`, UTC), every statement prepared once and kept, one
//! `READ COMMITTED` transaction per commit.
//!
//! The push makes the statements of the storage's push
//! (`docs/design/mariadb.md` §8.3, §9), written out by hand; a hand-written
//! client sets the isolation level once for its session instead of before
//! every transaction, and takes no savepoint (it never finalizes a
//! rejection). The reads take the fastest hand-written shapes measured on
//! MariaDB (`dialects.md` §7 asks the baseline for the best shape, not the
//! storage's): one value reads its primary-key range of the scope index, as
//! the storage does; several values walk in key order — a scan the covering
//! `sync_row_scopes_by_row` index (row id order, `value IN (…)` checked on
//! each entry, no sort), a window the log's changes by primary key (the
//! changes of the table whose scope value is one of the values, each
//! joined to its commit's header). A walk reads one page of entries where
//! the filter is dense, as it is in W3 and W4 (every list); where it is
//! sparse it reads more (the storage bounds a walk by the rows it examines
//! and merges per-value ranges there; the raw client does not).
//!
//! Only what W1–W4 and W10 need is built: the backfill and the seeding
//! of W5–W7 are refused with an error.

use std::collections::{BTreeSet, HashMap};

use anyhow::{bail, Context, Result};
use mysql::prelude::{FromRow, Queryable};
use mysql::{Conn, Params, Statement, Value};
use sync_core::CompiledTable;

use super::fixture::{self, BenchCommit, BenchRow, TABLE, VERSION};
use super::mariadb_server;
use super::raw::{scan_pages, RawClient, RawCommit};

const SESSION: [&str; 3] = [
    "SET NAMES utf8mb4 COLLATE utf8mb4_nopad_bin",
    "SET SESSION time_zone = '+00:00'",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
];

const META_SHARE: &str =
    "SELECT `schema_version` FROM `sync_schema_meta` WHERE `id` = 1 LOCK IN SHARE MODE";
const LOCK_INSERT: &str = "INSERT INTO `sync_partitions` (`partition`) VALUES (?) \
ON DUPLICATE KEY UPDATE `partition` = `partition`";
const LOCK_SELECT: &str =
    "SELECT `max_commit_seq` FROM `sync_partitions` WHERE `partition` = ? FOR UPDATE";
const GATE: &str = "SELECT (SELECT `schema_version` FROM `sync_schema_meta` WHERE `id` = 1), \
(SELECT `migrating_to` FROM `sync_schema_meta` WHERE `id` = 1), \
(SELECT `log_epoch` FROM `sync_partition_registry` WHERE `partition` = ?), \
(SELECT JSON_ARRAYAGG(CAST(`name` AS CHAR)) FROM `sync_backfill_checkpoints` \
WHERE `partition` = ? AND `schema_version` = ? AND `state` <> 'activated')";
const PUSH_RESULT_GET: &str = "SELECT `result` FROM `sync_push_results` \
WHERE `partition` = ? AND `client_id` = ? AND `client_commit_id` = ?";
const ROW_SCOPES: &str =
    "SELECT `_sync_scopes` FROM `todos` WHERE `_sync_partition` = ? AND `_sync_row_id` = ?";
const SCOPES_DELETE: &str =
    "DELETE FROM `sync_row_scopes` WHERE `partition` = ? AND `tbl` = ? AND `row_id` = ?";
const ROW_UPDATE: &str = "UPDATE `todos` SET `id` = ?, `list_id` = ?, `title` = ?, `done` = ?, \
`position` = ?, `updated_at_ms` = ?, `_sync_server_version` = ?, `_sync_scopes` = ?, \
`_sync_payload` = ?, `_sync_column_versions` = NULL \
WHERE `_sync_partition` = ? AND `_sync_row_id` = ?";
const ROW_INSERT: &str = "INSERT INTO `todos` (`_sync_partition`, `_sync_row_id`, `id`, \
`list_id`, `title`, `done`, `position`, `updated_at_ms`, `_sync_server_version`, \
`_sync_scopes`, `_sync_payload`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const ALLOCATE: &str = "INSERT INTO `sync_partitions` (`partition`, `max_commit_seq`) \
VALUES (?, 1) ON DUPLICATE KEY UPDATE `max_commit_seq` = `max_commit_seq` + 1 \
RETURNING `max_commit_seq`";
const COMMIT_INSERT: &str = "INSERT INTO `sync_commits` (`partition`, `commit_seq`, \
`client_id`, `client_commit_id`, `actor_id`, `created_at_ms`, `writer_version`) \
VALUES (?, ?, ?, ?, ?, ?, ?)";
const RESULT_INSERT: &str = "INSERT INTO `sync_push_results` (`partition`, `client_id`, \
`client_commit_id`, `result`) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE `partition` = `partition`";

fn marks(count: usize, tuple: &str) -> String {
    vec![tuple; count].join(", ")
}

/// Scope-entry rows of one row (insert-if-absent).
fn row_scopes_insert(count: usize) -> String {
    format!(
        "INSERT INTO `sync_row_scopes` (`partition`, `tbl`, `var`, `value`, `row_id`) \
         VALUES {} ON DUPLICATE KEY UPDATE `row_id` = `row_id`",
        marks(count, "(?, ?, ?, ?, ?)")
    )
}

/// The changes of one commit.
fn changes_insert(count: usize) -> String {
    format!(
        "INSERT INTO `sync_changes` (`partition`, `commit_seq`, `idx`, `tbl`, `row_id`, `op`, \
         `row_version`, `scopes`, `payload`) VALUES {}",
        marks(count, "(?, ?, ?, ?, ?, ?, ?, ?, ?)")
    )
}

/// The change-scope entries of one commit (insert-if-absent).
fn change_scopes_insert(count: usize) -> String {
    format!(
        "INSERT INTO `sync_change_scopes` (`partition`, `tbl`, `var`, `value`, `commit_seq`) \
         VALUES {} ON DUPLICATE KEY UPDATE `commit_seq` = `commit_seq`",
        marks(count, "(?, ?, ?, ?, ?)")
    )
}

/// A scan page of one value: its primary-key range of the scope index,
/// joined row by row. Parameters: partition, table, variable, value,
/// cursor, page size.
const SCAN_ONE: &str = "SELECT s.`row_id`, t.`_sync_server_version`, t.`_sync_scopes`, \
t.`_sync_payload` FROM `sync_row_scopes` AS s LEFT JOIN `todos` AS t \
ON t.`_sync_partition` = s.`partition` AND t.`_sync_row_id` = s.`row_id` \
WHERE s.`partition` = ? AND s.`tbl` = ? AND s.`var` = ? AND s.`value` = ? \
AND s.`row_id` > ? ORDER BY s.`row_id` LIMIT ?";

/// A scan page of several values: the covering `sync_row_scopes_by_row`
/// index walked in row-id order from the cursor (each entry's value
/// checked, no sort), the first `page` distinct ids joined to their rows.
/// Parameters: partition, table, cursor, variable, the values, page size,
/// partition.
fn scan_walk(values: usize) -> String {
    format!(
        "SELECT s.`row_id`, t.`_sync_server_version`, t.`_sync_scopes`, t.`_sync_payload` \
         FROM (SELECT DISTINCT `row_id` FROM `sync_row_scopes` \
               FORCE INDEX (`sync_row_scopes_by_row`) \
               WHERE `partition` = ? AND `tbl` = ? AND `row_id` > ? AND `var` = ? \
               AND `value` IN ({}) ORDER BY `row_id` LIMIT ?) AS s \
         LEFT JOIN `todos` AS t ON t.`_sync_partition` = ? AND t.`_sync_row_id` = s.`row_id` \
         ORDER BY s.`row_id`",
        marks(values, "?")
    )
}

/// A window page of one value: its candidate commits in the window (one
/// primary-key range of the change-scope index), their headers and their
/// changes of the table in that value. Parameters: partition, table,
/// variable, value, after, through, page size, partition, partition,
/// table, value.
fn window_one() -> String {
    format!(
        "SELECT c.`commit_seq`, m.`created_at_ms`, m.`actor_id`, ch.`row_id`, \
ch.`op`, ch.`row_version`, ch.`scopes`, ch.`payload` \
FROM (SELECT `commit_seq` FROM `sync_change_scopes` \
      WHERE `partition` = ? AND `tbl` = ? AND `var` = ? AND `value` = ? \
      AND `commit_seq` > ? AND `commit_seq` <= ? ORDER BY `commit_seq` LIMIT ?) AS c \
LEFT JOIN `sync_commits` AS m ON m.`partition` = ? AND m.`commit_seq` = c.`commit_seq` \
LEFT JOIN `sync_changes` AS ch ON ch.`partition` = ? AND ch.`commit_seq` = c.`commit_seq` \
  AND ch.`tbl` = ? AND JSON_VALUE(ch.`scopes`, '$.{}') = ? \
ORDER BY c.`commit_seq`, ch.`idx`",
        fixture::SCOPE_VAR
    )
}

/// A window page of several values: the log's changes walked by primary
/// key from the cursor (no sort), each change of the table whose scope
/// value is one of the values joined to its commit's header; at most
/// `page` changes, so the last commit may be cut short (the caller reads
/// it again on the next page). Parameters: partition, after, through,
/// table, the values, page size.
fn window_walk(values: usize) -> String {
    format!(
        "SELECT ch.`commit_seq`, m.`created_at_ms`, m.`actor_id`, ch.`row_id`, ch.`op`, \
         ch.`row_version`, ch.`scopes`, ch.`payload` \
         FROM `sync_changes` AS ch FORCE INDEX (PRIMARY) \
         STRAIGHT_JOIN `sync_commits` AS m \
           ON m.`partition` = ch.`partition` AND m.`commit_seq` = ch.`commit_seq` \
         WHERE ch.`partition` = ? AND ch.`commit_seq` > ? AND ch.`commit_seq` <= ? \
           AND ch.`tbl` = ? AND JSON_VALUE(ch.`scopes`, '$.{}') IN ({}) \
         ORDER BY ch.`commit_seq`, ch.`idx` LIMIT ?",
        fixture::SCOPE_VAR,
        marks(values, "?")
    )
}

type ScanRow = (String, Option<i64>, Option<String>, Option<Vec<u8>>);
type WindowRow = (
    i64,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<Vec<u8>>,
);

/// A hand-written MariaDB client on one connection.
pub struct RawMariadb {
    conn: Conn,
    statements: HashMap<String, Statement>,
}

impl std::fmt::Debug for RawMariadb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawMariadb").finish_non_exhaustive()
    }
}

impl RawMariadb {
    /// Connects to `database` on the server of `url` and sets the session up.
    pub fn connect(url: &str, database: &str) -> Result<Self> {
        let mut conn = Conn::new(mariadb_server::opts(url, Some(database))?)
            .with_context(|| format!("connecting to {database} at {url}"))?;
        conn.query_drop(format!(
            "SET SESSION sql_mode = '{}'",
            sync_mariadb::SQL_MODE
        ))?;
        for sql in SESSION {
            conn.query_drop(sql)?;
        }
        Ok(Self {
            conn,
            statements: HashMap::new(),
        })
    }

    fn statement(&mut self, sql: &str) -> Result<Statement> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.conn.prep(sql)?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// Executes; the rows matched or inserted.
    fn exec(&mut self, sql: &str, params: impl Into<Params>) -> Result<u64> {
        let statement = self.statement(sql)?;
        self.conn.exec_drop(&statement, params)?;
        Ok(self.conn.affected_rows())
    }

    fn rows<T: FromRow>(&mut self, sql: &str, params: impl Into<Params>) -> Result<Vec<T>> {
        let statement = self.statement(sql)?;
        Ok(self.conn.exec(&statement, params)?)
    }

    fn first<T: FromRow>(&mut self, sql: &str, params: impl Into<Params>) -> Result<Option<T>> {
        let statement = self.statement(sql)?;
        Ok(self.conn.exec_first(&statement, params)?)
    }

    fn in_transaction<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.conn.query_drop("START TRANSACTION")?;
        match f(self) {
            Ok(value) => {
                self.conn.query_drop("COMMIT")?;
                Ok(value)
            }
            Err(error) => {
                let _ = self.conn.query_drop("ROLLBACK");
                Err(error)
            }
        }
    }

    /// The meta row shared, the partition row created if absent and locked.
    fn lock(&mut self, partition: &str) -> Result<()> {
        self.rows::<i64>(META_SHARE, ())?;
        self.exec(LOCK_INSERT, (partition,))?;
        self.rows::<i64>(LOCK_SELECT, (partition,))?;
        Ok(())
    }

    /// The row by key (`UPDATE`, else `INSERT`), its scope entries replaced
    /// when its scopes changed.
    fn write_row(&mut self, partition: &str, row: &BenchRow) -> Result<()> {
        let old: Option<String> = self.first(ROW_SCOPES, (partition, &row.id))?;
        let unchanged = old.as_deref() == Some(row.scopes_json.as_str());
        if old.is_some() && !unchanged {
            self.exec(SCOPES_DELETE, (partition, TABLE, &row.id))?;
        }
        let columns: [Value; 9] = [
            row.id.as_str().into(),
            row.list_id.as_str().into(),
            row.title.as_str().into(),
            row.done.into(),
            row.position.into(),
            row.updated_at_ms.into(),
            row.server_version.into(),
            row.scopes_json.as_str().into(),
            row.payload.as_slice().into(),
        ];
        let key: [Value; 2] = [partition.into(), row.id.as_str().into()];
        if old.is_some() {
            let params: Vec<Value> = columns.iter().chain(&key).cloned().collect();
            self.exec(ROW_UPDATE, params)?;
        } else {
            let params: Vec<Value> = key.iter().chain(&columns).cloned().collect();
            self.exec(ROW_INSERT, params)?;
        }
        if !unchanged && !row.scopes.is_empty() {
            let mut params: Vec<Value> = Vec::with_capacity(row.scopes.len() * 5);
            for (var, value) in &row.scopes {
                params.extend([
                    partition.into(),
                    TABLE.into(),
                    var.as_str().into(),
                    value.as_str().into(),
                    row.id.as_str().into(),
                ]);
            }
            self.exec(&row_scopes_insert(row.scopes.len()), params)?;
        }
        Ok(())
    }

    /// Allocation, the commit, its changes and its change-scope entries.
    fn append(&mut self, partition: &str, commit: &BenchCommit) -> Result<i64> {
        let seq: i64 = self
            .first(ALLOCATE, (partition,))?
            .context("allocation returned no row")?;
        self.exec(
            COMMIT_INSERT,
            (
                partition,
                seq,
                &commit.client_id,
                &commit.commit_id,
                &commit.actor_id,
                commit.created_at_ms,
                VERSION,
            ),
        )?;
        let mut params: Vec<Value> = Vec::with_capacity(commit.rows.len() * 9);
        let mut scopes = BTreeSet::new();
        for (idx, row) in commit.rows.iter().enumerate() {
            params.extend([
                partition.into(),
                seq.into(),
                i64::try_from(idx)?.into(),
                TABLE.into(),
                row.id.as_str().into(),
                1i64.into(),
                row.server_version.into(),
                row.scopes_json.as_str().into(),
                row.payload.as_slice().into(),
            ]);
            scopes.extend(row.scopes.iter());
        }
        self.exec(&changes_insert(commit.rows.len()), params)?;
        if !scopes.is_empty() {
            let mut params: Vec<Value> = Vec::with_capacity(scopes.len() * 5);
            for (var, value) in &scopes {
                params.extend([
                    partition.into(),
                    TABLE.into(),
                    var.as_str().into(),
                    value.as_str().into(),
                    seq.into(),
                ]);
            }
            self.exec(&change_scopes_insert(scopes.len()), params)?;
        }
        Ok(seq)
    }

    /// Everything of a push between `START TRANSACTION` and `COMMIT`.
    fn push_body(&mut self, partition: &str, commit: &BenchCommit, gate: bool) -> Result<i64> {
        self.lock(partition)?;
        if gate {
            type Gate = (Option<i64>, Option<i64>, Option<String>, Option<String>);
            self.rows::<Gate>(GATE, (partition, partition, VERSION))?;
        }
        let existing: Option<String> = self.first(
            PUSH_RESULT_GET,
            (partition, &commit.client_id, &commit.commit_id),
        )?;
        if existing.is_some() {
            bail!("commit {} was already pushed", commit.commit_id);
        }
        for row in &commit.rows {
            self.write_row(partition, row)?;
        }
        let seq = self.append(partition, commit)?;
        self.exec(
            RESULT_INSERT,
            (
                partition,
                &commit.client_id,
                &commit.commit_id,
                commit.result_json(seq),
            ),
        )?;
        Ok(seq)
    }

    /// One scan page; the rows read and the last row id.
    fn scan_page(
        &mut self,
        partition: &str,
        lists: &[String],
        after: &str,
        page: i64,
    ) -> Result<(u64, Option<String>)> {
        let rows: Vec<ScanRow> = if let [value] = lists {
            self.rows(
                SCAN_ONE,
                (partition, TABLE, fixture::SCOPE_VAR, value, after, page),
            )?
        } else {
            let mut params: Vec<Value> = vec![
                partition.into(),
                TABLE.into(),
                after.into(),
                fixture::SCOPE_VAR.into(),
            ];
            params.extend(lists.iter().map(|v| Value::from(v.as_str())));
            params.extend([Value::from(page), Value::from(partition)]);
            self.rows(&scan_walk(lists.len()), params)?
        };
        let count = rows.len() as u64;
        Ok((count, rows.into_iter().next_back().map(|r| r.0)))
    }

    /// The statement and parameters of one window page from `cursor`.
    fn window_page(
        partition: &str,
        lists: &[String],
        (cursor, through, page): (i64, i64, i64),
    ) -> (String, Vec<Value>) {
        if let [value] = lists {
            let params = vec![
                partition.into(),
                TABLE.into(),
                fixture::SCOPE_VAR.into(),
                value.as_str().into(),
                cursor.into(),
                through.into(),
                page.into(),
                partition.into(),
                partition.into(),
                TABLE.into(),
                value.as_str().into(),
            ];
            return (window_one(), params);
        }
        let mut params: Vec<Value> = vec![
            partition.into(),
            cursor.into(),
            through.into(),
            TABLE.into(),
        ];
        params.extend(lists.iter().map(|v| Value::from(v.as_str())));
        params.push(page.into());
        (window_walk(lists.len()), params)
    }
}

fn not_built(what: &str) -> anyhow::Error {
    anyhow::anyhow!("the raw MariaDB client has no {what} (W5–W7 are not measured on MariaDB)")
}

impl RawClient for RawMariadb {
    fn push(&mut self, partition: &str, commit: &BenchCommit, gate: bool) -> Result<i64> {
        self.in_transaction(|raw| raw.push_body(partition, commit, gate))
    }

    fn push_batch(&mut self, partition: &str, commits: &[BenchCommit]) -> Result<()> {
        for chunk in commits.chunks(1_000) {
            self.in_transaction(|raw| {
                for commit in chunk {
                    raw.push_body(partition, commit, false)?;
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
        scan_pages(page, max_pages, |after| {
            self.scan_page(partition, lists, after, page)
        })
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
        let mut cursor = after;
        let mut out: Vec<RawCommit> = Vec::new();
        let mut matched = 0i64;
        loop {
            let (sql, params) = Self::window_page(partition, lists, (cursor, through, page));
            let mut rows: Vec<WindowRow> = self.rows(&sql, params)?;
            let walked = lists.len() > 1;
            let full = rows.len() as i64 >= page;
            if walked && full {
                // A full walk page may have cut its last commit: it is read
                // again from the previous one.
                let last = rows.last().map(|r| r.0);
                let first = rows.first().map(|r| r.0);
                if last == first {
                    bail!("one commit fills a walk page of {page} changes");
                }
                rows.retain(|r| Some(r.0) != last);
            }
            let mut candidates = 0i64;
            let mut current: Option<(i64, usize)> = None;
            for (seq, _created, _actor, row_id, _op, _version, _scopes, _payload) in rows {
                let has = usize::from(row_id.is_some());
                match &mut current {
                    Some((s, n)) if *s == seq => *n += has,
                    _ => {
                        if let Some((s, n)) = current.take() {
                            if n > 0 {
                                out.push((s, n));
                                matched += n as i64;
                                if matched >= limit_changes {
                                    return Ok(out);
                                }
                            }
                        }
                        candidates += 1;
                        cursor = seq;
                        current = Some((seq, has));
                    }
                }
            }
            if let Some((s, n)) = current.take() {
                if n > 0 {
                    out.push((s, n));
                    matched += n as i64;
                    if matched >= limit_changes {
                        return Ok(out);
                    }
                }
            }
            let more = if walked { full } else { candidates >= page };
            if !more {
                return Ok(out);
            }
        }
    }

    fn backfill(&mut self, _partition: &str, _table: &CompiledTable, _batch: i64) -> Result<u64> {
        Err(not_built("backfill"))
    }

    fn seed_rows(&mut self, _partition: &str, _rows: &[BenchRow]) -> Result<()> {
        Err(not_built("row seeding"))
    }

    fn seed_log(&mut self, _partition: &str, _commits: u64, _rows: &[BenchRow]) -> Result<()> {
        Err(not_built("log seeding"))
    }

    fn set_fence(&mut self, _partition: &str, _present: bool) -> Result<()> {
        Err(not_built("fence fixture"))
    }

    /// `ANALYZE TABLE` of the tables the workloads read (InnoDB's
    /// persistent statistics; it also recomputes them by itself after a
    /// tenth of a table changed).
    fn analyze(&mut self) -> Result<()> {
        self.conn.query_drop(
            "ANALYZE TABLE `todos`, `sync_row_scopes`, `sync_change_scopes`, `sync_commits`, \
             `sync_changes`, `sync_partitions`, `sync_push_results`",
        )?;
        Ok(())
    }
}
