//! The database seam: every statement this crate executes on a pooled
//! connection is prepared, batched or re-executed through these functions,
//! so the fault hook (feature `fault-injection`, tests only) sees each one.
//! Without the feature they forward to rusqlite and compile to nothing more.
//!
//! A statement prepared once and executed in a loop is counted per
//! execution: the loop calls [`check`] before each run.

use rusqlite::{ffi, CachedStatement, Connection, Statement};

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
    around(conn, sql, || no_room(conn, conn.execute_batch(sql)))
}

/// One cached parameterless statement (`BEGIN IMMEDIATE`, `COMMIT`,
/// `SAVEPOINT` …).
#[inline]
pub(crate) fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    around(conn, sql, || {
        no_room(
            conn,
            conn.prepare_cached(sql)
                .and_then(|mut s| s.execute([]).map(drop)),
        )
    })
}

/// A write the file system had no room for is `SQLITE_FULL`, however it
/// filled. SQLite reports `SQLITE_FULL` for a write that came back short or
/// failed with `ENOSPC`, but `SQLITE_IOERR_*` when the write failed with
/// `EDQUOT` (a quota) or `EFBIG` (the file size limit): the connection's
/// last system error tells them apart. In WAL mode the pages of a
/// transaction are written at its `COMMIT` (or DDL batch), which run here.
fn no_room<T>(conn: &Connection, result: rusqlite::Result<T>) -> rusqlite::Result<T> {
    match result {
        Err(rusqlite::Error::SqliteFailure(e, message))
            if e.code == ffi::ErrorCode::SystemIoFailure =>
        {
            // SAFETY: `conn.handle()` is the open database handle owned by
            // `conn`, valid for the whole call (`conn` is borrowed);
            // `sqlite3_system_errno` only reads its last system error code.
            let errno = unsafe { ffi::sqlite3_system_errno(conn.handle()) };
            let kind = std::io::Error::from_raw_os_error(errno).kind();
            let full = matches!(
                kind,
                std::io::ErrorKind::StorageFull
                    | std::io::ErrorKind::QuotaExceeded
                    | std::io::ErrorKind::FileTooLarge
            );
            let e = if full {
                ffi::Error::new(ffi::SQLITE_FULL)
            } else {
                e
            };
            Err(rusqlite::Error::SqliteFailure(e, message))
        }
        other => other,
    }
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
