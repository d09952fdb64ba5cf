//! The raw Postgres baseline: one `postgres::Client` in the benchmark schema,
//! prepared statements (one per SQL step of `dialects.md` §3, §5–§7), one
//! `READ COMMITTED` transaction per commit. The backfill baseline uses
//! set-based statements (`UPDATE … FROM unnest(…)`).

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use postgres::types::ToSql;
use postgres::{Client, NoTls, Statement};
use sync_core::{codec, CompiledTable, RowValue};

use super::fixture::{self, BenchCommit, BenchRow, CHECKPOINT, EPOCH_MS, TABLE, VERSION};
use super::raw::{
    reference_scan_pages, scan_pages, RawClient, RawCommit, ReferenceShape, RAW_BACKFILL_CLIENT,
};

const LOCK_INSERT: &str =
    "INSERT INTO sync_partitions (partition) VALUES ($1) ON CONFLICT (partition) DO NOTHING";
const LOCK_SELECT: &str =
    "SELECT max_commit_seq FROM sync_partitions WHERE partition = $1 FOR UPDATE";
const GATE: &str = "SELECT (SELECT schema_version FROM sync_schema_meta WHERE id = 1), \
(SELECT log_epoch FROM sync_partition_registry WHERE partition = $1), \
(SELECT coalesce(json_agg(c.name ORDER BY c.name), '[]'::json) FROM sync_backfill_checkpoints c \
WHERE c.partition = $1 AND c.schema_version = $2 AND c.state <> 'activated')::text";
const PUSH_RESULT_GET: &str = "SELECT result::text FROM sync_push_results \
WHERE partition = $1 AND client_id = $2 AND client_commit_id = $3";
const SCOPES_DELETE: &str =
    "DELETE FROM sync_row_scopes WHERE partition = $1 AND tbl = $2 AND row_id = $3";
const ROW_UPSERT: &str = "INSERT INTO todos (_sync_partition, _sync_row_id, id, list_id, title, \
done, position, updated_at_ms, _sync_server_version, _sync_scopes, _sync_payload) \
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, ($10::text)::jsonb, $11) \
ON CONFLICT (_sync_partition, _sync_row_id) DO UPDATE SET id = excluded.id, \
list_id = excluded.list_id, title = excluded.title, done = excluded.done, \
position = excluded.position, updated_at_ms = excluded.updated_at_ms, \
_sync_server_version = excluded._sync_server_version, _sync_scopes = excluded._sync_scopes, \
_sync_payload = excluded._sync_payload";
const SCOPE_INSERT: &str = "INSERT INTO sync_row_scopes (partition, tbl, var, value, row_id) \
SELECT $1, $2, s.var, s.value, $3 FROM unnest($4::text[], $5::text[]) AS s(var, value) \
ON CONFLICT DO NOTHING";
const ALLOCATE_COMMIT: &str = "WITH allocated AS (\
INSERT INTO sync_partitions (partition, max_commit_seq) VALUES ($1, 1) \
ON CONFLICT (partition) DO UPDATE SET max_commit_seq = sync_partitions.max_commit_seq + 1 \
RETURNING max_commit_seq) \
INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, \
created_at_ms, writer_version) \
SELECT $1, max_commit_seq, $2, $3, $4, $5, $6 FROM allocated RETURNING commit_seq";
const CHANGES_INSERT: &str = "INSERT INTO sync_changes \
(partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload) \
SELECT $1, $2, c.idx, $3, c.row_id, 1, c.version, c.scopes::jsonb, c.payload \
FROM unnest($4::int4[], $5::text[], $6::int8[], $7::text[], $8::bytea[]) \
AS c(idx, row_id, version, scopes, payload)";
const CHANGE_SCOPES_INSERT: &str = "INSERT INTO sync_change_scopes \
(partition, tbl, var, value, commit_seq) \
SELECT $1, $2, s.var, s.value, $5 FROM unnest($3::text[], $4::text[]) AS s(var, value) \
ON CONFLICT DO NOTHING";
const RESULT_INSERT: &str = "INSERT INTO sync_push_results \
(partition, client_id, client_commit_id, result) VALUES ($1, $2, $3, ($4::text)::jsonb) \
ON CONFLICT DO NOTHING";
const WINDOW_PAGE: &str = "SELECT c.commit_seq, m.created_at_ms, m.actor_id, ch.idx, ch.row_id, \
ch.op, ch.row_version, ch.scopes::text, ch.payload \
FROM (SELECT DISTINCT s.commit_seq FROM sync_change_scopes s \
WHERE s.partition = $1 AND s.tbl = $2 AND s.var = $3 AND s.value = ANY($4::text[]) \
AND s.commit_seq > $5 AND s.commit_seq <= $6 ORDER BY s.commit_seq LIMIT $7) AS c \
LEFT JOIN sync_commits m ON m.partition = $1 AND m.commit_seq = c.commit_seq \
LEFT JOIN sync_changes ch ON ch.partition = $1 AND ch.commit_seq = c.commit_seq AND ch.tbl = $2 \
ORDER BY c.commit_seq, ch.idx";
/// Scan pages by value count: the storage's own shape (one ordered
/// primary-key range per value, merged, `dialects.md` §7), used where the
/// walk of [`scan_walk`] does not fill the page.
static SCAN_PAGES: [OnceLock<String>; sync_postgres::hot_path_sql::MERGED_SCAN_VALUES + 2] =
    [const { OnceLock::new() }; sync_postgres::hot_path_sql::MERGED_SCAN_VALUES + 2];

fn scan_page(values: usize) -> &'static str {
    let slot = values.min(sync_postgres::hot_path_sql::MERGED_SCAN_VALUES + 1);
    SCAN_PAGES[slot].get_or_init(|| sync_postgres::hot_path_sql::scan_page_sql(TABLE, values))
}

/// The walk of a many-value scan, behind its probe (`gated`) or not.
fn scan_walk(gated: bool) -> &'static str {
    static WALKS: [OnceLock<String>; 2] = [const { OnceLock::new() }; 2];
    WALKS[usize::from(gated)]
        .get_or_init(|| sync_postgres::hot_path_sql::scan_walk_sql(TABLE, gated))
}

/// Window pages for 2…128 values: the storage's own text (one ordered
/// primary-key range per value, merged and made distinct so that every
/// plan streams; `dialects.md` §7 asks the baseline for the best shape);
/// other counts the pinned shape.
fn window_page(values: usize) -> &'static str {
    if values >= 2 {
        sync_postgres::hot_path_sql::window_page_sql(values)
    } else {
        WINDOW_PAGE
    }
}

/// The reference's later Postgres form of a scan page over the same
/// tables: the distinct row ids of the scope index whose value is one of an
/// array parameter, after the cursor, in order, limited, each joined to
/// its row.
const REFERENCE_SCAN: &str = "SELECT c.row_id, t._sync_server_version, t._sync_scopes::text, \
t._sync_payload FROM (SELECT DISTINCT row_id FROM sync_row_scopes WHERE partition = $1 \
AND tbl = $2 AND var = $3 AND value = ANY($4::text[]) AND row_id > $5 ORDER BY row_id \
LIMIT $6) AS c LEFT JOIN todos AS t ON t._sync_partition = $1 AND t._sync_row_id = c.row_id \
ORDER BY c.row_id";

/// The reference's 0.15.48 form of the same page: an `IN` list of one
/// placeholder per value (`$6…`), cursor `$4`, batch `$5`. One text per
/// value count, made once (W3 asks for two counts).
fn reference_in_sql(values: usize) -> &'static str {
    static TEXTS: OnceLock<std::sync::Mutex<HashMap<usize, &'static str>>> = OnceLock::new();
    let texts = TEXTS.get_or_init(Default::default);
    let mut texts = match texts.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    texts.entry(values).or_insert_with(|| {
        let list: Vec<String> = (0..values).map(|i| format!("${}", 6 + i)).collect();
        let text = format!(
            "SELECT c.row_id, t._sync_server_version, t._sync_scopes::text, t._sync_payload \
             FROM (SELECT DISTINCT row_id FROM sync_row_scopes WHERE partition = $1 AND tbl = $2 \
             AND var = $3 AND value IN ({}) AND row_id > $4 ORDER BY row_id LIMIT $5) AS c \
             LEFT JOIN todos AS t ON t._sync_partition = $1 AND t._sync_row_id = c.row_id \
             ORDER BY c.row_id",
            list.join(", ")
        );
        Box::leak(text.into_boxed_str())
    })
}

const KEYSET_BATCH: &str = "SELECT _sync_row_id, _sync_server_version, _sync_scopes::text, \
_sync_payload FROM todos WHERE _sync_partition = $1 AND _sync_row_id > $2 \
ORDER BY _sync_row_id LIMIT $3";
const DERIVED_UPDATE: &str = "UPDATE todos AS t SET title_lower = u.lower, \
_sync_server_version = u.version, _sync_payload = u.payload \
FROM unnest($2::text[], $3::text[], $4::int8[], $5::bytea[]) AS u(row_id, lower, version, payload) \
WHERE t._sync_partition = $1 AND t._sync_row_id = u.row_id";
const SEED_ROWS: &str = "INSERT INTO todos (_sync_partition, _sync_row_id, id, list_id, title, \
done, position, updated_at_ms, _sync_server_version, _sync_scopes, _sync_payload) \
SELECT $1, u.id, u.id, u.list_id, u.title, u.done, u.position, u.updated, u.version, \
u.scopes::jsonb, u.payload FROM unnest($2::text[], $3::text[], $4::text[], $5::bool[], \
$6::int8[], $7::int8[], $8::int8[], $9::text[], $10::bytea[]) \
AS u(id, list_id, title, done, position, updated, version, scopes, payload)";
const SEED_ROW_SCOPES: &str = "INSERT INTO sync_row_scopes (partition, tbl, var, value, row_id) \
SELECT $1, 'todos', 'list_id', u.list_id, u.id FROM unnest($2::text[], $3::text[]) AS u(id, list_id)";
const SEED_COMMITS: &str = "INSERT INTO sync_commits (partition, commit_seq, client_id, \
client_commit_id, actor_id, created_at_ms, writer_version) \
SELECT $1, u.seq, u.client, u.commit_id, 'seed-user', u.seq + $2, $3 \
FROM unnest($4::int8[], $5::text[], $6::text[]) AS u(seq, client, commit_id)";
const SEED_CHANGES: &str =
    "INSERT INTO sync_changes (partition, commit_seq, idx, tbl, row_id, op, \
row_version, scopes, payload) SELECT $1, u.seq, 0, 'todos', u.row_id, 1, u.version, \
u.scopes::jsonb, u.payload FROM unnest($2::int8[], $3::text[], $4::int8[], $5::text[], \
$6::bytea[]) AS u(seq, row_id, version, scopes, payload)";
const SEED_CHANGE_SCOPES: &str = "INSERT INTO sync_change_scopes (partition, tbl, var, value, \
commit_seq) SELECT $1, 'todos', 'list_id', u.value, u.seq FROM unnest($2::int8[], $3::text[]) \
AS u(seq, value)";
const SEED_RESULTS: &str = "INSERT INTO sync_push_results (partition, client_id, \
client_commit_id, result) SELECT $1, u.client, u.commit_id, \
jsonb_build_object('status', 'applied', 'commitSeq', u.seq, 'recordedAtMs', u.seq + $2, \
'results', '[]'::jsonb) FROM unnest($3::int8[], $4::text[], $5::text[]) AS u(seq, client, commit_id)";

/// A hand-written Postgres client on one connection.
pub struct RawPostgres {
    client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl std::fmt::Debug for RawPostgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawPostgres").finish_non_exhaustive()
    }
}

impl RawPostgres {
    /// Connects and sets `search_path` to the benchmark schema.
    pub fn connect(url: &str, schema: &str) -> Result<Self> {
        let mut client =
            Client::connect(url, NoTls).with_context(|| format!("connecting to {url}"))?;
        // The same session planning as the storage's default
        // (`PostgresConfig::short_statement_planning`): no JIT, no parallel plans.
        client.batch_execute(&format!(
            "SET search_path TO \"{schema}\"; SET jit = off; SET max_parallel_workers_per_gather = 0"
        ))?;
        Ok(Self {
            client,
            statements: HashMap::new(),
        })
    }

    fn statement(&mut self, sql: &'static str) -> Result<Statement> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }

    fn exec(&mut self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let statement = self.statement(sql)?;
        Ok(self.client.execute(&statement, params)?)
    }

    /// One scan page: for 2…128 values the table's primary key walked
    /// while the filter is dense (behind a 64-row probe), then the values'
    /// merged ranges above the last walked row — the storage's shape, the
    /// fastest hand-written form measured (`docs/benchmarks.md`).
    fn scan_page(
        &mut self,
        partition: &str,
        lists: &[String],
        after: &str,
        page: i64,
    ) -> Result<(u64, Option<String>)> {
        let mut after = after.to_owned();
        let mut got = 0u64;
        let mut last = None;
        if (2..=sync_postgres::hot_path_sql::MERGED_SCAN_VALUES).contains(&lists.len()) {
            let mut sql = scan_walk(true);
            let mut size = page;
            loop {
                let rows = self.query(
                    sql,
                    &[&partition, &after, &fixture::SCOPE_VAR, &lists, &size],
                )?;
                if rows.is_empty() {
                    break;
                }
                // The rows the statement walked at most (the gated walk
                // sizes itself by its probe).
                size = rows[0].try_get(4)?;
                let mut hits = 0i64;
                for row in &rows {
                    let id: String = row.try_get(0)?;
                    after.clone_from(&id);
                    let payload: Option<Vec<u8>> = row.try_get(3)?;
                    if payload.is_none() {
                        continue;
                    }
                    let _version: i64 = row.try_get(1)?;
                    let _scopes: Option<String> = row.try_get(2)?;
                    hits += 1;
                    got += 1;
                    last = Some(id);
                    if got as i64 == page {
                        return Ok((got, last));
                    }
                }
                let walked = rows.len() as i64;
                if walked < size {
                    return Ok((got, last));
                }
                if hits * sync_postgres::hot_path_sql::SCAN_PROBE_ROWS
                    < walked * sync_postgres::hot_path_sql::SCAN_DENSE_MATCHES
                {
                    break;
                }
                size = ((page - got as i64) * walked / hits.max(1) + 64).clamp(64, page * 4);
                sql = scan_walk(false);
            }
        }
        let rows = self.query(
            scan_page(lists.len()),
            &[
                &partition,
                &TABLE,
                &fixture::SCOPE_VAR,
                &lists,
                &after,
                &(page - got as i64),
            ],
        )?;
        for row in &rows {
            let id: String = row.try_get(0)?;
            let _version: Option<i64> = row.try_get(1)?;
            let _scopes: Option<String> = row.try_get(2)?;
            let _payload: Option<Vec<u8>> = row.try_get(3)?;
            last = Some(id);
        }
        got += rows.len() as u64;
        Ok((got, last))
    }

    fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>> {
        let statement = self.statement(sql)?;
        Ok(self.client.query(&statement, params)?)
    }

    fn in_transaction<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.client
            .batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED")?;
        match f(self) {
            Ok(value) => {
                self.client.batch_execute("COMMIT")?;
                Ok(value)
            }
            Err(error) => {
                let _ = self.client.batch_execute("ROLLBACK");
                Err(error)
            }
        }
    }

    fn lock(&mut self, partition: &str) -> Result<()> {
        self.exec(LOCK_INSERT, &[&partition])?;
        self.query(LOCK_SELECT, &[&partition])?;
        Ok(())
    }

    fn write_row(&mut self, partition: &str, row: &BenchRow) -> Result<()> {
        self.exec(SCOPES_DELETE, &[&partition, &TABLE, &row.id])?;
        self.exec(
            ROW_UPSERT,
            &[
                &partition,
                &row.id,
                &row.id,
                &row.list_id,
                &row.title,
                &row.done,
                &row.position,
                &row.updated_at_ms,
                &row.server_version,
                &row.scopes_json,
                &row.payload,
            ],
        )?;
        let vars: Vec<&str> = row.scopes.keys().map(String::as_str).collect();
        let values: Vec<&str> = row.scopes.values().map(String::as_str).collect();
        self.exec(SCOPE_INSERT, &[&partition, &TABLE, &row.id, &vars, &values])?;
        Ok(())
    }

    /// Allocation + commit insert (one CTE), then the changes and change scopes.
    fn append(
        &mut self,
        partition: &str,
        header: (&str, &str, &str, i64),
        rows: &[(&str, i64, &str, &[u8])],
        scopes: &BTreeSet<(String, String)>,
    ) -> Result<i64> {
        let (client, commit_id, actor, created) = header;
        let row = self.query(
            ALLOCATE_COMMIT,
            &[&partition, &client, &commit_id, &actor, &created, &VERSION],
        )?;
        let seq: i64 = row
            .first()
            .context("allocation returned no row")?
            .try_get(0)?;
        let idx: Vec<i32> = (0..i32::try_from(rows.len())?).collect();
        let ids: Vec<&str> = rows.iter().map(|r| r.0).collect();
        let versions: Vec<i64> = rows.iter().map(|r| r.1).collect();
        let scope_texts: Vec<&str> = rows.iter().map(|r| r.2).collect();
        let payloads: Vec<&[u8]> = rows.iter().map(|r| r.3).collect();
        self.exec(
            CHANGES_INSERT,
            &[
                &partition,
                &seq,
                &TABLE,
                &idx,
                &ids,
                &versions,
                &scope_texts,
                &payloads,
            ],
        )?;
        let vars: Vec<&str> = scopes.iter().map(|s| s.0.as_str()).collect();
        let values: Vec<&str> = scopes.iter().map(|s| s.1.as_str()).collect();
        self.exec(
            CHANGE_SCOPES_INSERT,
            &[&partition, &TABLE, &vars, &values, &seq],
        )?;
        Ok(seq)
    }

    /// Everything of a push between `BEGIN` and `COMMIT`.
    fn push_body(&mut self, partition: &str, commit: &BenchCommit, gate: bool) -> Result<i64> {
        let raw = self;
        {
            raw.lock(partition)?;
            if gate {
                raw.query(GATE, &[&partition, &VERSION])?;
            }
            let existing = raw.query(
                PUSH_RESULT_GET,
                &[&partition, &commit.client_id, &commit.commit_id],
            )?;
            if !existing.is_empty() {
                bail!("commit {} was already pushed", commit.commit_id);
            }
            let mut scopes = BTreeSet::new();
            for row in &commit.rows {
                raw.write_row(partition, row)?;
                scopes.extend(row.scopes.clone());
            }
            let changes: Vec<(&str, i64, &str, &[u8])> = commit
                .rows
                .iter()
                .map(|r| {
                    (
                        r.id.as_str(),
                        r.server_version,
                        r.scopes_json.as_str(),
                        r.payload.as_slice(),
                    )
                })
                .collect();
            let seq = raw.append(
                partition,
                (
                    &commit.client_id,
                    &commit.commit_id,
                    &commit.actor_id,
                    commit.created_at_ms,
                ),
                &changes,
                &scopes,
            )?;
            raw.exec(
                RESULT_INSERT,
                &[
                    &partition,
                    &commit.client_id,
                    &commit.commit_id,
                    &commit.result_json(seq),
                ],
            )?;
            Ok(seq)
        }
    }

    /// One keyset batch of the backfill; `None` when no row is left.
    fn backfill_batch(
        &mut self,
        partition: &str,
        table: &CompiledTable,
        after: &str,
        batch: i64,
        batch_no: u64,
    ) -> Result<Option<(usize, String)>> {
        let title = *table.column_index.get("title").context("title column")?;
        let derived = *table
            .column_index
            .get(fixture::DERIVED)
            .context("derived column")?;
        self.lock(partition)?;
        let rows = self.query(KEYSET_BATCH, &[&partition, &after, &batch])?;
        let Some(last) = rows.last() else {
            return Ok(None);
        };
        let last_id: String = last.try_get(0)?;
        let mut ids = Vec::with_capacity(rows.len());
        let mut lowers: Vec<Option<String>> = Vec::with_capacity(rows.len());
        let mut versions = Vec::with_capacity(rows.len());
        let mut payloads = Vec::with_capacity(rows.len());
        let mut scope_texts = Vec::with_capacity(rows.len());
        let mut scopes = BTreeSet::new();
        for row in &rows {
            let id: String = row.try_get(0)?;
            let version: i64 = row.try_get(1)?;
            let scope_text: String = row.try_get(2)?;
            let payload: Vec<u8> = row.try_get(3)?;
            let mut values = codec::decode_row(table, &payload)?;
            let lower = match values.get(title) {
                Some(RowValue::String(t)) => RowValue::String(t.to_lowercase()),
                _ => RowValue::Null,
            };
            lowers.push(match &lower {
                RowValue::String(t) => Some(t.clone()),
                _ => None,
            });
            if let Some(slot) = values.get_mut(derived) {
                *slot = lower;
            }
            let parsed: sync_core::StoredScopes = serde_json::from_str(&scope_text)?;
            scopes.extend(parsed);
            payloads.push(codec::encode_row(table, &values)?);
            versions.push(version + 1);
            ids.push(id);
            scope_texts.push(scope_text);
        }
        let payload_refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        self.exec(
            DERIVED_UPDATE,
            &[&partition, &ids, &lowers, &versions, &payload_refs],
        )?;
        let commit_id = format!("batch-{batch_no}");
        let changes: Vec<(&str, i64, &str, &[u8])> = ids
            .iter()
            .zip(&versions)
            .zip(&scope_texts)
            .zip(&payload_refs)
            .map(|(((id, v), s), p)| (id.as_str(), *v, s.as_str(), *p))
            .collect();
        self.append(
            partition,
            (
                RAW_BACKFILL_CLIENT,
                &commit_id,
                RAW_BACKFILL_CLIENT,
                EPOCH_MS,
            ),
            &changes,
            &scopes,
        )?;
        let count = i64::try_from(rows.len())?;
        self.exec(
            "UPDATE sync_backfill_checkpoints SET observed_rows = observed_rows + $3, \
             updated_at_ms = $4 WHERE partition = $1 AND name = $2",
            &[&partition, &CHECKPOINT, &count, &EPOCH_MS],
        )?;
        Ok(Some((rows.len(), last_id)))
    }
}

impl RawClient for RawPostgres {
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

    fn scan_reference_shape(
        &mut self,
        shape: ReferenceShape,
        partition: &str,
        lists: &[String],
        page: i64,
        max_pages: u64,
    ) -> Result<Option<u64>> {
        let total = reference_scan_pages(page, max_pages, |after, size| {
            let rows = match shape {
                ReferenceShape::AnyArray => self.query(
                    REFERENCE_SCAN,
                    &[
                        &partition,
                        &TABLE,
                        &fixture::SCOPE_VAR,
                        &lists,
                        &after,
                        &size,
                    ],
                )?,
                ReferenceShape::InList => {
                    let mut params: Vec<&(dyn ToSql + Sync)> =
                        vec![&partition, &TABLE, &fixture::SCOPE_VAR, &after, &size];
                    params.extend(lists.iter().map(|v| v as &(dyn ToSql + Sync)));
                    self.query(reference_in_sql(lists.len()), &params)?
                }
            };
            rows.iter()
                .map(|row| {
                    let id: String = row.try_get(0)?;
                    let _version: Option<i64> = row.try_get(1)?;
                    let _scopes: Option<String> = row.try_get(2)?;
                    let payload: Option<Vec<u8>> = row.try_get(3)?;
                    Ok((id, payload.is_some()))
                })
                .collect()
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
        let mut cursor = after;
        let mut out: Vec<RawCommit> = Vec::new();
        let mut matched = 0i64;
        loop {
            let rows = self.query(
                window_page(lists.len()),
                &[
                    &partition,
                    &TABLE,
                    &fixture::SCOPE_VAR,
                    &lists,
                    &cursor,
                    &through,
                    &page,
                ],
            )?;
            let mut candidates = 0i64;
            let mut current: Option<(i64, usize)> = None;
            for row in &rows {
                let seq: i64 = row.try_get(0)?;
                let _created: Option<i64> = row.try_get(1)?;
                let _actor: Option<String> = row.try_get(2)?;
                let _idx: Option<i32> = row.try_get(3)?;
                let row_id: Option<String> = row.try_get(4)?;
                let _op: Option<i16> = row.try_get(5)?;
                let _version: Option<i64> = row.try_get(6)?;
                let _scopes: Option<String> = row.try_get(7)?;
                let _payload: Option<Vec<u8>> = row.try_get(8)?;
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
            if candidates < page {
                return Ok(out);
            }
        }
    }

    fn backfill(&mut self, partition: &str, table: &CompiledTable, batch: i64) -> Result<u64> {
        // Declare, then claim: the database admits a checkpoint only as a
        // fresh `declared` row.
        self.exec(
            "INSERT INTO sync_backfill_checkpoints (partition, name, schema_version, state, \
             watermark, owner_epoch, observed_rows, updated_at_ms) \
             VALUES ($1, $2, $3, 'declared', 0, 0, 0, $4)",
            &[&partition, &CHECKPOINT, &VERSION, &EPOCH_MS],
        )?;
        self.exec(
            "UPDATE sync_backfill_checkpoints SET state = 'backfilling', owner_epoch = 1 \
             WHERE partition = $1 AND name = $2",
            &[&partition, &CHECKPOINT],
        )?;
        let mut after = String::new();
        let mut total = 0u64;
        let mut batch_no = 0u64;
        loop {
            let step = self.in_transaction(|raw| {
                raw.backfill_batch(partition, table, &after, batch, batch_no)
            })?;
            batch_no += 1;
            match step {
                Some((count, last)) => {
                    total += count as u64;
                    after = last;
                    if (count as i64) < batch {
                        break;
                    }
                }
                None => break,
            }
        }
        self.in_transaction(|raw| {
            raw.lock(partition)?;
            raw.exec(
                "UPDATE sync_backfill_checkpoints SET state = 'activated', watermark = \
                 (SELECT max_commit_seq FROM sync_partitions WHERE partition = $1) \
                 WHERE partition = $1 AND name = $2",
                &[&partition, &CHECKPOINT],
            )?;
            Ok(())
        })?;
        Ok(total)
    }

    fn seed_rows(&mut self, partition: &str, rows: &[BenchRow]) -> Result<()> {
        for chunk in rows.chunks(5_000) {
            let ids: Vec<&str> = chunk.iter().map(|r| r.id.as_str()).collect();
            let lists: Vec<&str> = chunk.iter().map(|r| r.list_id.as_str()).collect();
            let titles: Vec<&str> = chunk.iter().map(|r| r.title.as_str()).collect();
            let done: Vec<bool> = chunk.iter().map(|r| r.done).collect();
            let positions: Vec<i64> = chunk.iter().map(|r| r.position).collect();
            let updated: Vec<i64> = chunk.iter().map(|r| r.updated_at_ms).collect();
            let versions: Vec<i64> = chunk.iter().map(|r| r.server_version).collect();
            let scopes: Vec<&str> = chunk.iter().map(|r| r.scopes_json.as_str()).collect();
            let payloads: Vec<&[u8]> = chunk.iter().map(|r| r.payload.as_slice()).collect();
            self.in_transaction(|raw| {
                raw.exec(
                    SEED_ROWS,
                    &[
                        &partition, &ids, &lists, &titles, &done, &positions, &updated, &versions,
                        &scopes, &payloads,
                    ],
                )?;
                raw.exec(SEED_ROW_SCOPES, &[&partition, &ids, &lists])?;
                Ok(())
            })?;
        }
        self.exec(LOCK_INSERT, &[&partition])?;
        self.client.batch_execute("ANALYZE")?;
        Ok(())
    }

    fn seed_log(&mut self, partition: &str, commits: u64, rows: &[BenchRow]) -> Result<()> {
        let distinct = rows.len() as u64;
        if distinct == 0 {
            bail!("seed_log needs rows");
        }
        let mut n = 0u64;
        while n < commits {
            let end = (n + 10_000).min(commits);
            let mut seqs = Vec::new();
            let mut clients = Vec::new();
            let mut commit_ids = Vec::new();
            let mut row_ids: Vec<&str> = Vec::new();
            let mut versions = Vec::new();
            let mut scopes: Vec<&str> = Vec::new();
            let mut payloads: Vec<&[u8]> = Vec::new();
            let mut values: Vec<&str> = Vec::new();
            for k in n..end {
                let row = &rows[usize::try_from(k % distinct)?];
                seqs.push(i64::try_from(k + 1)?);
                clients.push(format!("seed-client-{}", k % 16));
                commit_ids.push(format!("seed-{k:08}"));
                row_ids.push(&row.id);
                versions.push(i64::try_from(k / distinct + 1)?);
                scopes.push(&row.scopes_json);
                payloads.push(&row.payload);
                values.push(&row.list_id);
            }
            self.in_transaction(|raw| {
                raw.exec(
                    SEED_COMMITS,
                    &[
                        &partition,
                        &EPOCH_MS,
                        &VERSION,
                        &seqs,
                        &clients,
                        &commit_ids,
                    ],
                )?;
                raw.exec(
                    SEED_CHANGES,
                    &[&partition, &seqs, &row_ids, &versions, &scopes, &payloads],
                )?;
                raw.exec(SEED_CHANGE_SCOPES, &[&partition, &seqs, &values])?;
                raw.exec(
                    SEED_RESULTS,
                    &[&partition, &EPOCH_MS, &seqs, &clients, &commit_ids],
                )?;
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
        let total = i64::try_from(commits)?;
        self.exec(
            "UPDATE sync_partitions SET max_commit_seq = $2 WHERE partition = $1",
            &[&partition, &total],
        )?;
        self.client.batch_execute("VACUUM ANALYZE")?;
        Ok(())
    }

    /// Sets or removes both fences — a fixture, so with the barrier's guards
    /// lifted for the transaction (`session_replication_role = replica`,
    /// superuser): no writer may lower a fence.
    fn set_fence(&mut self, partition: &str, present: bool) -> Result<()> {
        self.in_transaction(|raw| {
            raw.client
                .batch_execute("SET LOCAL session_replication_role = replica")?;
            if present {
                raw.exec(
                    "UPDATE sync_schema_meta SET required_writer_version = $1 WHERE id = 1",
                    &[&VERSION],
                )?;
                raw.exec(
                    "INSERT INTO sync_writer_fence (partition, required_writer_version) \
                     VALUES ($1, $2) ON CONFLICT (partition) DO UPDATE \
                     SET required_writer_version = excluded.required_writer_version",
                    &[&partition, &VERSION],
                )?;
            } else {
                raw.exec(
                    "UPDATE sync_schema_meta SET required_writer_version = NULL WHERE id = 1",
                    &[],
                )?;
                raw.exec("DELETE FROM sync_writer_fence", &[])?;
            }
            Ok(())
        })
    }

    fn analyze(&mut self) -> Result<()> {
        self.client.batch_execute("ANALYZE")?;
        Ok(())
    }
}
