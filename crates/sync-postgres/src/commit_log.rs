//! The commit log: counters, dense `commit_seq` allocation and appends
//! (`dialects.md` §5), horizon reads and writes.
//!
//! An append is one statement for up to [`CHANGE_BATCH`] changes: the counter
//! upsert (`+1 RETURNING`, which takes or keeps the partition row lock) feeds
//! the commit insert (where the writer-fence trigger fires), which feeds the
//! set-based inserts of the changes, their change-scope entries and the
//! tombstones of its deletes. Larger commits add one statement per further
//! batch with the allocated sequence.
//!
//! The same template, with the predicted sequence as a guard, is the named
//! statement a transaction that holds the push lock executes with literal
//! arguments ([`deferred_append_args`]) in its `COMMIT` message.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use sync_core::{Error, NewChange, NewCommit, Result};

use crate::json::scopes_json;
use crate::pool::{col, Conn};
use crate::sql::{bytea_literal, quote_literal};

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

/// How many arrays one batch of changes binds.
const BATCH_ARRAYS: usize = 12;

/// Element types of the batch arrays, in the order [`batch_ctes`] reads
/// them: changes (`idx`, `tbl`, `row_id`, `op`, `row_version`, `scopes`,
/// `payload`), change scopes (`tbl`, `var`, `value`), tombstones (`tbl`,
/// `row_id`).
const BATCH_TYPES: [&str; BATCH_ARRAYS] = [
    "int4", "text", "text", "int2", "int8", "text", "bytea", "text", "text", "text", "text", "text",
];

/// The SQL expressions one append statement reads its inputs from, each
/// with its cast: `$n` placeholders (the prepared form) or literals (the
/// deferred form). One template renders both, so they cannot drift apart.
struct AppendExprs {
    partition: String,
    client_id: String,
    client_commit_id: String,
    actor_id: String,
    created_at_ms: String,
    writer_version: String,
    batch: [String; BATCH_ARRAYS],
}

/// Batch array placeholders `$first…`.
fn batch_placeholders(first: usize) -> [String; BATCH_ARRAYS] {
    std::array::from_fn(|i| format!("${}::{}[]", first + i, BATCH_TYPES[i]))
}

/// CTEs inserting one batch of changes, change scopes and tombstones for the
/// commit whose sequence is `seq.commit_seq`.
fn batch_ctes(partition: &str, a: &[String; BATCH_ARRAYS]) -> String {
    format!(
        "changes AS (INSERT INTO sync_changes \
           (partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload) \
           SELECT {partition}, seq.commit_seq, c.idx, c.tbl, c.row_id, c.op, c.row_version, \
             c.scopes::jsonb, c.payload \
           FROM seq, unnest({}, {}, {}, {}, {}, \
             {}, {}) AS c(idx, tbl, row_id, op, row_version, scopes, payload)), \
         scopes AS (INSERT INTO sync_change_scopes (partition, tbl, var, value, commit_seq) \
           SELECT {partition}, s.tbl, s.var, s.value, seq.commit_seq \
           FROM seq, unnest({}, {}, {}) AS s(tbl, var, value) \
           ON CONFLICT DO NOTHING), \
         tombstones AS (INSERT INTO sync_tombstones (partition, tbl, row_id, commit_seq) \
           SELECT {partition}, t.tbl, t.row_id, seq.commit_seq \
           FROM seq, unnest({}, {}) AS t(tbl, row_id) \
           ON CONFLICT (partition, tbl, row_id) DO UPDATE SET commit_seq = excluded.commit_seq)",
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]
    )
}

/// Allocation (the counter upsert), commit insert (where the writer-fence
/// trigger fires) and the first batch, ending with `result` (a `SELECT …
/// FROM seq`).
fn append_sql(e: &AppendExprs, result: &str) -> String {
    let p = &e.partition;
    format!(
        "WITH allocated AS (INSERT INTO sync_partitions (partition, max_commit_seq) VALUES ({p}, 1) \
           ON CONFLICT (partition) DO UPDATE SET max_commit_seq = sync_partitions.max_commit_seq + 1 \
           RETURNING max_commit_seq), \
         seq AS (INSERT INTO sync_commits \
           (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) \
           SELECT {p}, max_commit_seq, {}, {}, {}, {}, {} \
           FROM allocated RETURNING commit_seq), \
         {} \
         {result}",
        e.client_id,
        e.client_commit_id,
        e.actor_id,
        e.created_at_ms,
        e.writer_version,
        batch_ctes(p, &e.batch)
    )
}

/// The prepared append: `$1` partition, `$2` client id, `$3` client commit
/// id, `$4` actor, `$5` created at, `$6` writer version, `$7…$18` batch
/// arrays; returns the allocated sequence.
static APPEND_SQL: LazyLock<String> =
    LazyLock::new(|| append_sql(&prepared_exprs(), "SELECT commit_seq FROM seq"));

/// The placeholders `$1…$18` of the prepared append.
fn prepared_exprs() -> AppendExprs {
    AppendExprs {
        partition: "$1::text".into(),
        client_id: "$2::text".into(),
        client_commit_id: "$3::text".into(),
        actor_id: "$4::text".into(),
        created_at_ms: "$5::int8".into(),
        writer_version: "$6::int4".into(),
        batch: batch_placeholders(7),
    }
}

/// A further batch: `$1` partition, `$2` commit seq, `$3…$14` batch arrays.
static APPEND_BATCH_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH seq AS (SELECT $2::int8 AS commit_seq), {} SELECT 1",
        batch_ctes("$1::text", &batch_placeholders(3))
    )
});

/// Largest deferred append statement; a larger commit is appended eagerly
/// with bound parameters.
///
/// Small on purpose: the server parses a literal array far more slowly than
/// it reads a bound binary one (a 500-change batch took about twice the time
/// of the prepared form), while the round trip it saves is worth the same
/// for any size — so only commits the size of a typical push travel deferred.
pub(crate) const MAX_LITERAL_SQL: usize = 32 * 1024;

/// The message a deferred append raises (as a failed `int4` cast, the one
/// way plain SQL can raise) when the sequence it allocated is not the one
/// predicted from the locked counter.
pub(crate) const DIVERGED: &str = "sync: commit_seq diverged from the locked counter";

/// Column arrays of one batch of changes.
pub(crate) struct Batch<'c> {
    pub(crate) idx: Vec<i32>,
    pub(crate) tbl: Vec<&'c str>,
    pub(crate) row_id: Vec<&'c str>,
    pub(crate) op: Vec<i16>,
    pub(crate) row_version: Vec<Option<i64>>,
    pub(crate) scopes: Vec<String>,
    pub(crate) payload: Vec<Option<&'c [u8]>>,
    pub(crate) scope_tbl: Vec<&'c str>,
    pub(crate) scope_var: Vec<&'c str>,
    pub(crate) scope_value: Vec<&'c str>,
    pub(crate) tomb_tbl: Vec<&'c str>,
    pub(crate) tomb_row: Vec<&'c str>,
}

impl<'c> Batch<'c> {
    /// The batch of `changes` (the commit's from `first_idx` on);
    /// `tombstones[i]` says whether `changes[i]` leaves a tombstone
    /// ([`NewCommit::tombstones`]).
    pub(crate) fn new(
        first_idx: usize,
        changes: &'c [NewChange],
        tombstones: &[bool],
    ) -> Result<Self> {
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
            if tombstones.get(offset).copied().unwrap_or(false) {
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

impl Batch<'_> {
    /// The arrays as literal SQL (same element types and order as
    /// [`batch_placeholders`]); `None` when a text holds NUL.
    fn literal_arrays(&self) -> Option<[String; BATCH_ARRAYS]> {
        let text = |v: &&str| quote_literal(v);
        Some([
            literal_array(&self.idx, "int4", |v| Some(v.to_string()))?,
            literal_array(&self.tbl, "text", text)?,
            literal_array(&self.row_id, "text", text)?,
            literal_array(&self.op, "int2", |v| Some(v.to_string()))?,
            literal_array(&self.row_version, "int8", |v| {
                Some(v.map_or_else(|| "NULL::int8".to_owned(), |v| v.to_string()))
            })?,
            literal_array(&self.scopes, "text", |v| quote_literal(v))?,
            literal_array(&self.payload, "bytea", |v| {
                Some(v.map_or_else(|| "NULL::bytea".to_owned(), bytea_literal))
            })?,
            literal_array(&self.scope_tbl, "text", text)?,
            literal_array(&self.scope_var, "text", text)?,
            literal_array(&self.scope_value, "text", text)?,
            literal_array(&self.tomb_tbl, "text", text)?,
            literal_array(&self.tomb_row, "text", text)?,
        ])
    }
}

/// `ARRAY[…]::ty[]` of the rendered items (`'{}'::ty[]` when empty); `None`
/// when an item cannot be rendered.
pub(crate) fn literal_array<T>(
    items: &[T],
    ty: &str,
    render: impl Fn(&T) -> Option<String>,
) -> Option<String> {
    if items.is_empty() {
        return Some(format!("'{{}}'::{ty}[]"));
    }
    let mut sql = String::from("ARRAY[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(&render(item)?);
    }
    sql.push_str("]::");
    sql.push_str(ty);
    sql.push_str("[]");
    Some(sql)
}

/// Allocates the next `commit_seq` and appends the commit (validated by the caller).
pub(crate) fn append_commit(
    conn: &mut Conn,
    partition: &str,
    writer_version: i32,
    commit: &NewCommit,
) -> Result<i64> {
    let tombstones = commit.tombstones();
    let mut chunks = commit
        .changes
        .chunks(CHANGE_BATCH)
        .zip(tombstones.chunks(CHANGE_BATCH));
    let (changes, leaves) = chunks.next().unwrap_or((&[], &[]));
    let first = Batch::new(0, changes, leaves)?;
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
    for (n, (chunk, leaves)) in chunks.enumerate() {
        let batch = Batch::new((n + 1) * CHANGE_BATCH, chunk, leaves)?;
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

/// Parameter types of [`deferred_append_sql`]: the prepared append's
/// eighteen, then the predicted sequence.
pub(crate) const DEFERRED_APPEND_TYPES: &str = "text, text, text, text, int8, int4, \
    int4[], text[], text[], int2[], int8[], text[], bytea[], text[], text[], text[], text[], text[], \
    int8";

/// The append a transaction defers (`named::APPEND`): the prepared append's
/// parameters `$1…$18`, and `$19` the sequence the caller predicts from the
/// locked counter. It raises if it allocates any other sequence (as a
/// failed `int4` cast, the one way plain SQL can raise), so a wrong
/// prediction can never go unnoticed.
pub(crate) fn deferred_append_sql() -> String {
    append_sql(
        &prepared_exprs(),
        &format!(
            "SELECT (CASE WHEN commit_seq = $19 THEN '0' ELSE '{DIVERGED}' END)::int4 FROM seq"
        ),
    )
}

/// The commit's changes as one [`Batch`] for a literal append, or `None`
/// when it cannot be one: more than one batch of changes, or more
/// payload and row-id bytes than [`MAX_LITERAL_SQL`] (checked before any
/// literal is rendered).
pub(crate) fn literal_batch(commit: &NewCommit) -> Option<Batch<'_>> {
    if commit.changes.len() > CHANGE_BATCH {
        return None;
    }
    let lower_bound: usize = commit
        .changes
        .iter()
        .map(|c| 2 * c.payload.as_ref().map_or(0, Vec::len) + c.row_id.len())
        .sum();
    if lower_bound > MAX_LITERAL_SQL {
        return None;
    }
    Batch::new(0, &commit.changes, &commit.tombstones()).ok()
}

/// The arguments of [`deferred_append_sql`] as literals, so the append can
/// travel as an `EXECUTE` with a later statement or the `COMMIT` in one
/// simple-query message; the caller holds the partition lock and predicts
/// that the counter allocates `seq`.
///
/// `None` when the commit does not fit that form — more than one batch of
/// changes, a text holding NUL (no literal can; the eager path reports it)
/// or arguments above [`MAX_LITERAL_SQL`] — and the caller appends with
/// [`append_commit`] instead.
pub(crate) fn deferred_append_args(
    partition: &str,
    writer_version: i32,
    commit: &NewCommit,
    seq: i64,
) -> Option<Vec<String>> {
    let batch = literal_batch(commit)?;
    let mut args = vec![
        quote_literal(partition)?,
        quote_literal(&commit.client_id)?,
        quote_literal(&commit.client_commit_id)?,
        quote_literal(&commit.actor_id)?,
        format!("({})::int8", commit.created_at_ms),
        format!("({writer_version})::int4"),
    ];
    args.extend(batch.literal_arrays()?);
    args.push(format!("({seq})::int8"));
    let size: usize = args.iter().map(String::len).sum();
    (size <= MAX_LITERAL_SQL).then_some(args)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert(row_id: &str, payload: Vec<u8>) -> NewChange {
        NewChange::upsert("tasks", row_id, 1, Default::default(), payload)
    }

    fn commit(changes: Vec<NewChange>) -> NewCommit {
        NewCommit {
            client_id: "c".into(),
            client_commit_id: "cc".into(),
            actor_id: "a".into(),
            created_at_ms: 0,
            changes,
        }
    }

    #[test]
    fn both_forms_come_from_one_template() {
        let deferred = deferred_append_sql();
        let cut = |sql: &str| sql.split("changes AS").count();
        assert_eq!(cut(&deferred), cut(&APPEND_SQL));
        assert!(APPEND_SQL.ends_with("SELECT commit_seq FROM seq"));
        assert!(deferred.contains("WHEN commit_seq = $19 THEN '0'"));
        assert!(deferred.contains(DIVERGED));
        assert_eq!(DEFERRED_APPEND_TYPES.split(',').count(), 19);
        let args = deferred_append_args("p", 1, &commit(vec![upsert("r", vec![1])]), 7)
            .expect("a small commit has a literal form");
        assert_eq!(args.len(), 19);
        assert_eq!(args[18], "(7)::int8");
        assert!(args.contains(&"ARRAY[E'\\\\x01'::bytea]::bytea[]".to_owned()));
        assert!(
            args.contains(&"'{}'::text[]".to_owned()),
            "no tombstones: empty arrays"
        );
        assert!(args.iter().all(|a| !a.contains('$')));
    }

    #[test]
    fn commits_without_a_literal_form_are_left_to_the_eager_path() {
        let many = (0..=CHANGE_BATCH)
            .map(|i| upsert(&i.to_string(), vec![]))
            .collect();
        assert_eq!(deferred_append_args("p", 1, &commit(many), 1), None);
        let big = vec![upsert("r", vec![0; MAX_LITERAL_SQL / 2])];
        assert_eq!(deferred_append_args("p", 1, &commit(big), 1), None);
        let nul = vec![upsert("r\0", vec![])];
        assert_eq!(deferred_append_args("p", 1, &commit(nul), 1), None);
        let mut nul_actor = commit(vec![]);
        nul_actor.actor_id = "a\0".into();
        assert_eq!(deferred_append_args("p", 1, &nul_actor, 1), None);
        let mut nul_scope = upsert("r", vec![]);
        nul_scope.scopes.insert("project_id".into(), "p\0".into());
        assert_eq!(
            deferred_append_args("p", 1, &commit(vec![nul_scope]), 1),
            None
        );
    }
}
