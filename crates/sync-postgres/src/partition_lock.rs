//! The partition write lock (`dialects.md` §3): insert the counter row if
//! absent, then `SELECT … FOR UPDATE` it. Pushes, activations, prunes and
//! rotations of one partition serialize on it; the migration's table lock
//! excludes all of them.
//!
//! The push lock is sent as one simple-query message: the transaction's
//! deferred `BEGIN` when it is the first statement, optional
//! `lock_timeout`, the insert, the `FOR UPDATE`, the savepoint and — as a
//! separate statement, so with a snapshot taken after the lock was granted —
//! the partition's two writer fences (combined as the fence trigger
//! combines them) with the serve gate of the transaction's writer version. The
//! statements are `EXECUTE`s of named statements (`named.rs`), so the server
//! plans none of them per push. The gate read comes back with the lock, so
//! the caller's `read_serve_gate` costs no round trip; the locked counter and
//! the fence let the caller defer its `append_commit` (`transaction.rs`).

use postgres::{SimpleQueryMessage, SimpleQueryRow};
use sync_core::{effective_fence, Error, Result, ServeGate};

use crate::named;
use crate::pool::Conn;
use crate::sql::quote_literal;
use crate::{checkpoints, gate};

pub(crate) const INSERT_SQL: &str =
    "INSERT INTO sync_partitions (partition) VALUES ($1) ON CONFLICT (partition) DO NOTHING";
const LOCK_SQL: &str = "SELECT max_commit_seq, horizon_seq FROM sync_partitions \
    WHERE partition = $1 FOR UPDATE";

/// The savepoint that marks the rollback point of a rejected push.
pub(crate) const SAVEPOINT: &str = "sync_push_candidate";

/// What the push lock read once it was granted.
#[derive(Debug)]
pub(crate) struct PushLock {
    /// The serve gate of the running writer version.
    pub(crate) gate: ServeGate,
    /// The partition counter (`max_commit_seq`) read by the `FOR UPDATE`.
    pub(crate) max_commit_seq: i64,
    /// The effective writer fence: the greater of the partition fence and
    /// the database-wide fence, `None` when neither is set.
    pub(crate) fence: Option<i32>,
}

/// The partition's two writer fences (`checkpoints::fence_columns`, the
/// inputs of the fence trigger) followed by the serve gate's three columns,
/// over two SQL expressions (partition, running version).
pub(crate) fn push_state_sql(partition: &str, running: &str) -> String {
    format!(
        "SELECT {}, g.* FROM ({}) AS g",
        checkpoints::fence_columns(partition),
        gate::gate_sql(partition, running)
    )
}

/// Takes the partition lock with two parameterized statements (inside a
/// transaction), waiting at most `timeout_ms` when set; returns
/// `(max_commit_seq, horizon_seq)`.
pub(crate) fn lock(
    conn: &mut Conn,
    partition: &str,
    timeout_ms: Option<u64>,
) -> Result<(i64, i64)> {
    if let Some(ms) = timeout_ms {
        conn.simple(&format!("SET LOCAL lock_timeout = {ms}"))?;
    }
    conn.execute(INSERT_SQL, &[&partition])?;
    let row = conn.query_one(LOCK_SQL, &[&partition])?;
    if timeout_ms.is_some() {
        conn.simple("SET LOCAL lock_timeout TO DEFAULT")?;
    }
    Ok((crate::pool::col(&row, 0)?, crate::pool::col(&row, 1)?))
}

/// The push lock, savepoint, fence read and serve-gate read in one round
/// trip, preceded by `begin` (the transaction's deferred `BEGIN …`) when
/// given and followed by `reads` (further parameterless reads, each an
/// `EXECUTE` of a named statement: the push prelude's idempotency and row
/// reads, each with its own snapshot taken after the lock was granted).
/// Returns what was read right after the lock was granted, and the rows of
/// each of `reads` in order. Every statement must already be prepared
/// except the push's own ([`named::all`]), which this prepares.
pub(crate) fn lock_for_push(
    conn: &mut Conn,
    begin: Option<&str>,
    partition: &str,
    running: i32,
    lock_timeout_ms: Option<u64>,
    reads: &[String],
) -> Result<(PushLock, Vec<Vec<SimpleQueryRow>>)> {
    let Some(literal) = quote_literal(partition) else {
        // No text value can hold NUL: let the parameterized path report it.
        if let Some(begin) = begin {
            conn.simple(begin)?;
        }
        lock(conn, partition, lock_timeout_ms)?;
        return Err(Error::backend("partition contains NUL"));
    };
    // First use on this connection: prepare the push's named statements
    // (before `BEGIN` when it is still pending, so outside the transaction).
    conn.ensure_named(&named::all())?;
    let running = running.to_string();
    let mut sql = String::new();
    if let Some(begin) = begin {
        sql.push_str(begin);
        sql.push_str("; ");
    }
    if let Some(ms) = lock_timeout_ms {
        sql.push_str(&format!("SET LOCAL lock_timeout = {ms}; "));
    }
    sql.push_str(&named::LOCK_INSERT.execute_sql(std::slice::from_ref(&literal)));
    sql.push_str("; ");
    sql.push_str(&named::LOCK_ROW.execute_sql(std::slice::from_ref(&literal)));
    sql.push_str("; ");
    if lock_timeout_ms.is_some() {
        sql.push_str("SET LOCAL lock_timeout TO DEFAULT; ");
    }
    sql.push_str(&format!("SAVEPOINT {SAVEPOINT}; "));
    sql.push_str(&named::PUSH_STATE.execute_sql(&[literal, running]));
    for read in reads {
        sql.push_str("; ");
        sql.push_str(read);
    }
    let mut statements = segments(conn.simple(&sql)?);
    if statements.len() < reads.len() {
        return Err(Error::backend(
            "push lock returned an unexpected number of statements",
        ));
    }
    let extra = statements.split_off(statements.len() - reads.len());
    let rows: Vec<&SimpleQueryRow> = statements.iter().flatten().collect();
    // One row from the `FOR UPDATE`, one with the fences and the gate.
    let [counter, state] = rows.as_slice() else {
        return Err(Error::backend(
            "push lock returned an unexpected number of rows",
        ));
    };
    let max_commit_seq = text(counter, 0)?
        .ok_or_else(|| Error::backend("locked counter is NULL"))?
        .parse()
        .map_err(Error::backend)?;
    let fence_at = |idx| -> Result<Option<i32>> {
        text(state, idx)?
            .map(str::parse)
            .transpose()
            .map_err(Error::backend)
    };
    // Combined as the fence trigger combines them.
    let fence = effective_fence(fence_at(0)?, fence_at(1)?);
    let gate = gate::gate_from_text(partition, text(state, 2)?, text(state, 3)?, text(state, 4)?)?;
    Ok((
        PushLock {
            gate,
            max_commit_seq,
            fence,
        },
        extra,
    ))
}

/// The rows of a simple-query answer, one list per statement.
fn segments(messages: Vec<SimpleQueryMessage>) -> Vec<Vec<SimpleQueryRow>> {
    let mut out = Vec::new();
    let mut current = Vec::new();
    for message in messages {
        match message {
            SimpleQueryMessage::Row(row) => current.push(row),
            SimpleQueryMessage::CommandComplete(_) => out.push(std::mem::take(&mut current)),
            _ => {}
        }
    }
    out
}

/// Column `idx` of a simple-query row (text, `None` for NULL).
pub(crate) fn text(row: &SimpleQueryRow, idx: usize) -> Result<Option<&str>> {
    row.try_get(idx).map_err(Error::backend)
}
