//! The database seam: every statement this crate executes on a pooled
//! connection is prepared, batched or re-executed through these functions,
//! so the fault hook (feature `fault-injection`, tests only) sees each one.
//! Without the feature they forward to rusqlite and compile to nothing more.
//!
//! A statement prepared once and executed in a loop is counted per
//! execution: the loop calls [`check`] before each run.

use rusqlite::{CachedStatement, Connection, Statement};

/// Consulted before one execution of a statement (`sql` is for the log).
#[inline]
pub(crate) fn check(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    #[cfg(feature = "fault-injection")]
    return crate::faults::before(conn, sql);
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = (conn, sql);
        Ok(())
    }
}

/// A cached prepared statement, for one execution.
#[inline]
pub(crate) fn cached<'c>(conn: &'c Connection, sql: &str) -> rusqlite::Result<CachedStatement<'c>> {
    check(conn, sql)?;
    conn.prepare_cached(sql)
}

/// An uncached prepared statement, for one execution.
#[inline]
pub(crate) fn uncached<'c>(conn: &'c Connection, sql: &str) -> rusqlite::Result<Statement<'c>> {
    check(conn, sql)?;
    conn.prepare(sql)
}

/// One parameterless batch (DDL). Like [`exec`], it can be faulted after
/// it ran (`ReplyLost`).
#[inline]
pub(crate) fn batch(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    around(conn, sql, || conn.execute_batch(sql))
}

/// One cached parameterless statement (`BEGIN IMMEDIATE`, `COMMIT`,
/// `SAVEPOINT` …).
#[inline]
pub(crate) fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    around(conn, sql, || {
        conn.prepare_cached(sql)?.execute([]).map(drop)
    })
}

#[inline]
fn around(
    conn: &Connection,
    sql: &str,
    run: impl FnOnce() -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    #[cfg(feature = "fault-injection")]
    return crate::faults::around(conn, sql, run);
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = (conn, sql);
        run()
    }
}
