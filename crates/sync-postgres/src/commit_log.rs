//! The commit log: counters, dense `commit_seq` allocation and appends
//! (`dialects.md` §5), horizon reads and writes.
//!
//! An append is one statement for up to [`CHANGE_BATCH`] changes: the counter
//! upsert (`+1 RETURNING`, which takes or keeps the partition row lock) feeds
//! the commit insert (where the writer-fence trigger fires), which feeds the
//! set-based inserts of the changes, their change-scope entries and the
//! tombstones of its deletes. Larger commits add one statement per further
//! batch with the allocated sequence.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use sync_core::{ChangeOp, Error, ErrorCode, NewChange, NewCommit, Result};

use crate::json::scopes_json;
use crate::pool::{col, Conn};

/// Most changes written by one statement (each statement binds a fixed number
/// of array parameters, far below the 65 535 bind limit).
pub(crate) const CHANGE_BATCH: usize = 4096;

const MAX_COMMIT_SEQ_SQL: &str = "SELECT max_commit_seq FROM sync_partitions WHERE partition = $1";
const HORIZON_SQL: &str = "SELECT horizon_seq FROM sync_partitions WHERE partition = $1";
const SET_HORIZON_SQL: &str =
    "INSERT INTO sync_partitions (partition, horizon_seq) VALUES ($1, $2) \
    ON CONFLICT (partition) DO UPDATE \
    SET horizon_seq = GREATEST(sync_partitions.horizon_seq, excluded.horizon_seq)";
const SEQ_BEFORE_SQL: &str = "SELECT coalesce(max(commit_seq), 0) FROM sync_commits \
    WHERE partition = $1 AND created_at_ms < $2";

/// CTEs inserting one batch of changes, change scopes and tombstones for the
/// commit whose sequence is `seq.commit_seq`; array parameters start at `$first`.
fn batch_ctes(first: usize) -> String {
    let p = |i: usize| first + i;
    format!(
        "changes AS (INSERT INTO sync_changes \
           (partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload) \
           SELECT $1::text, seq.commit_seq, c.idx, c.tbl, c.row_id, c.op, c.row_version, \
             c.scopes::jsonb, c.payload \
           FROM seq, unnest(${}::int4[], ${}::text[], ${}::text[], ${}::int2[], ${}::int8[], \
             ${}::text[], ${}::bytea[]) AS c(idx, tbl, row_id, op, row_version, scopes, payload)), \
         scopes AS (INSERT INTO sync_change_scopes (partition, tbl, var, value, commit_seq) \
           SELECT $1::text, s.tbl, s.var, s.value, seq.commit_seq \
           FROM seq, unnest(${}::text[], ${}::text[], ${}::text[]) AS s(tbl, var, value) \
           ON CONFLICT DO NOTHING), \
         tombstones AS (INSERT INTO sync_tombstones (partition, tbl, row_id, commit_seq) \
           SELECT $1::text, t.tbl, t.row_id, seq.commit_seq \
           FROM seq, unnest(${}::text[], ${}::text[]) AS t(tbl, row_id) \
           ON CONFLICT (partition, tbl, row_id) DO UPDATE SET commit_seq = excluded.commit_seq)",
        p(0),
        p(1),
        p(2),
        p(3),
        p(4),
        p(5),
        p(6),
        p(7),
        p(8),
        p(9),
        p(10),
        p(11)
    )
}

/// Allocation, commit insert and the first batch: `$1` partition, `$2`
/// client id, `$3` client commit id, `$4` actor, `$5` created at, `$6`
/// writer version, `$7…$18` batch arrays.
static APPEND_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH allocated AS (INSERT INTO sync_partitions (partition, max_commit_seq) VALUES ($1::text, 1) \
           ON CONFLICT (partition) DO UPDATE SET max_commit_seq = sync_partitions.max_commit_seq + 1 \
           RETURNING max_commit_seq), \
         seq AS (INSERT INTO sync_commits \
           (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) \
           SELECT $1::text, max_commit_seq, $2::text, $3::text, $4::text, $5::int8, $6::int4 \
           FROM allocated RETURNING commit_seq), \
         {} \
         SELECT commit_seq FROM seq",
        batch_ctes(7)
    )
});

/// A further batch: `$1` partition, `$2` commit seq, `$3…$14` batch arrays.
static APPEND_BATCH_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH seq AS (SELECT $2::int8 AS commit_seq), {} SELECT 1",
        batch_ctes(3)
    )
});

/// Column arrays of one batch of changes.
struct Batch<'c> {
    idx: Vec<i32>,
    tbl: Vec<&'c str>,
    row_id: Vec<&'c str>,
    op: Vec<i16>,
    row_version: Vec<Option<i64>>,
    scopes: Vec<String>,
    payload: Vec<Option<&'c [u8]>>,
    scope_tbl: Vec<&'c str>,
    scope_var: Vec<&'c str>,
    scope_value: Vec<&'c str>,
    tomb_tbl: Vec<&'c str>,
    tomb_row: Vec<&'c str>,
}

impl<'c> Batch<'c> {
    fn new(first_idx: usize, changes: &'c [NewChange]) -> Result<Self> {
        let mut scope_keys = BTreeSet::new();
        let mut tomb_keys = BTreeSet::new();
        let mut batch = Batch {
            idx: Vec::with_capacity(changes.len()),
            tbl: Vec::with_capacity(changes.len()),
            row_id: Vec::with_capacity(changes.len()),
            op: Vec::with_capacity(changes.len()),
            row_version: Vec::with_capacity(changes.len()),
            scopes: Vec::with_capacity(changes.len()),
            payload: Vec::with_capacity(changes.len()),
            scope_tbl: Vec::new(),
            scope_var: Vec::new(),
            scope_value: Vec::new(),
            tomb_tbl: Vec::new(),
            tomb_row: Vec::new(),
        };
        for (offset, change) in changes.iter().enumerate() {
            let idx = i32::try_from(first_idx + offset)
                .map_err(|_| Error::invalid_argument("changes", "too_many"))?;
            batch.idx.push(idx);
            batch.tbl.push(&change.table);
            batch.row_id.push(&change.row_id);
            batch.op.push(change.op.as_i16());
            batch.row_version.push(change.row_version);
            batch.scopes.push(scopes_json(&change.scopes));
            batch.payload.push(change.payload.as_deref());
            for (var, value) in &change.scopes {
                scope_keys.insert((change.table.as_str(), var.as_str(), value.as_str()));
            }
            if change.op == ChangeOp::Delete {
                tomb_keys.insert((change.table.as_str(), change.row_id.as_str()));
            }
        }
        for (tbl, var, value) in scope_keys {
            batch.scope_tbl.push(tbl);
            batch.scope_var.push(var);
            batch.scope_value.push(value);
        }
        for (tbl, row) in tomb_keys {
            batch.tomb_tbl.push(tbl);
            batch.tomb_row.push(row);
        }
        Ok(batch)
    }
}

/// Validates the changes of a commit (`unknown_table` via `known`, then
/// `invalid_change`), in index order.
pub(crate) fn validate_commit(
    commit: &NewCommit,
    known: impl Fn(&str) -> Result<()>,
) -> Result<()> {
    for change in &commit.changes {
        known(&change.table)?;
    }
    for (index, change) in commit.changes.iter().enumerate() {
        if let Some(reason) = change.consistency_error() {
            return Err(Error::new(ErrorCode::InvalidChange)
                .detail("index", index)
                .detail("reason", reason));
        }
    }
    Ok(())
}

/// Allocates the next `commit_seq` and appends the commit (validated by the caller).
pub(crate) fn append_commit(
    conn: &mut Conn,
    partition: &str,
    writer_version: i32,
    commit: &NewCommit,
) -> Result<i64> {
    let mut chunks = commit.changes.chunks(CHANGE_BATCH);
    let first = Batch::new(0, chunks.next().unwrap_or(&[]))?;
    let row = conn.query_one(
        &APPEND_SQL,
        &[
            &partition,
            &commit.client_id,
            &commit.client_commit_id,
            &commit.actor_id,
            &commit.created_at_ms,
            &writer_version,
            &first.idx,
            &first.tbl,
            &first.row_id,
            &first.op,
            &first.row_version,
            &first.scopes,
            &first.payload,
            &first.scope_tbl,
            &first.scope_var,
            &first.scope_value,
            &first.tomb_tbl,
            &first.tomb_row,
        ],
    )?;
    let commit_seq: i64 = col(&row, 0)?;
    for (n, chunk) in chunks.enumerate() {
        let batch = Batch::new((n + 1) * CHANGE_BATCH, chunk)?;
        conn.query(
            &APPEND_BATCH_SQL,
            &[
                &partition,
                &commit_seq,
                &batch.idx,
                &batch.tbl,
                &batch.row_id,
                &batch.op,
                &batch.row_version,
                &batch.scopes,
                &batch.payload,
                &batch.scope_tbl,
                &batch.scope_var,
                &batch.scope_value,
                &batch.tomb_tbl,
                &batch.tomb_row,
            ],
        )?;
    }
    Ok(commit_seq)
}

/// The allocated counter (0 for an unknown partition).
pub(crate) fn max_commit_seq(conn: &mut Conn, partition: &str) -> Result<i64> {
    Ok(match conn.query_opt(MAX_COMMIT_SEQ_SQL, &[&partition])? {
        Some(row) => col(&row, 0)?,
        None => 0,
    })
}

/// The horizon (0 for an unknown partition).
pub(crate) fn horizon_seq(conn: &mut Conn, partition: &str) -> Result<i64> {
    Ok(match conn.query_opt(HORIZON_SQL, &[&partition])? {
        Some(row) => col(&row, 0)?,
        None => 0,
    })
}

/// Raises the horizon monotonically; the upsert takes the partition row lock.
pub(crate) fn set_horizon_seq(conn: &mut Conn, partition: &str, seq: i64) -> Result<()> {
    conn.execute(SET_HORIZON_SQL, &[&partition, &seq])
        .map(|_| ())
}

/// Newest retained `commit_seq` created strictly before the bound; 0 if none.
pub(crate) fn commit_seq_before(conn: &mut Conn, partition: &str, before_ms: i64) -> Result<i64> {
    let row = conn.query_one(SEQ_BEFORE_SQL, &[&partition, &before_ms])?;
    col(&row, 0)
}
