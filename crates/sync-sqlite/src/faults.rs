//! Fault injection at the database seam (feature `fault-injection`, tests
//! only). [`SqliteStorage::set_fault_plan`](crate::SqliteStorage::set_fault_plan)
//! installs a [`FaultPlan`] for the instance's database file; the
//! [`seam`](crate::seam) consults it before every statement. A SQLite
//! connection carries no per-instance state a hook could read, so the plan
//! applies to every connection of this process on that file.
//!
//! How each kind is realised (errors are `rusqlite` errors, classified like
//! real ones):
//!
//! - `Fail`: `SQLITE_IOERR_WRITE` before the statement runs
//!   (`sync.storage.backend`);
//! - `Busy`: `SQLITE_BUSY` (`sync.storage.busy`);
//! - `ConnectionLost`: the open transaction is rolled back — as SQLite does
//!   itself after an I/O error or a full disk — and the statement fails with
//!   `SQLITE_IOERR`;
//! - `ReplyLost`: on a parameterless statement (`BEGIN`, `COMMIT`,
//!   `SAVEPOINT`, DDL batches) the statement runs, then the caller gets
//!   `SQLITE_IOERR`; on a prepared statement it acts as `ConnectionLost`.

use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{ffi, Connection};
use sync_core::fault::{FaultKind, FaultPlan};

/// Installed plans, by database file name as SQLite reports it.
static PLANS: Mutex<Vec<(String, Arc<FaultPlan>)>> = Mutex::new(Vec::new());

/// The message every injected error carries.
const MESSAGE: &str = "sync.fault_injection: injected fault";

/// Installs (`Some`) or removes (`None`) the plan of the database `file`.
pub(crate) fn install(file: &str, plan: Option<Arc<FaultPlan>>) {
    let mut plans = PLANS.lock().unwrap_or_else(PoisonError::into_inner);
    plans.retain(|(f, _)| f != file);
    if let Some(plan) = plan {
        plans.push((file.to_owned(), plan));
    }
}

fn plan_for(conn: &Connection) -> Option<Arc<FaultPlan>> {
    let plans = PLANS.lock().unwrap_or_else(PoisonError::into_inner);
    if plans.is_empty() {
        return None;
    }
    let file = conn.path()?;
    plans
        .iter()
        .find(|(f, _)| f == file)
        .map(|(_, plan)| Arc::clone(plan))
}

/// The hook before a statement: the injected error, if this one fails.
pub(crate) fn before(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    match plan_for(conn).and_then(|plan| plan.on_statement(sql)) {
        None => Ok(()),
        Some(kind) => Err(inject(conn, kind)),
    }
}

/// The hook around a parameterless statement, honouring `ReplyLost`.
pub(crate) fn around(
    conn: &Connection,
    sql: &str,
    run: impl FnOnce() -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    match plan_for(conn).and_then(|plan| plan.on_statement(sql)) {
        None => run(),
        Some(FaultKind::ReplyLost) => {
            run()?;
            Err(inject(conn, FaultKind::ConnectionLost))
        }
        Some(kind) => Err(inject(conn, kind)),
    }
}

fn inject(conn: &Connection, kind: FaultKind) -> rusqlite::Error {
    let code = match kind {
        FaultKind::Fail => ffi::SQLITE_IOERR_WRITE,
        FaultKind::Busy => ffi::SQLITE_BUSY,
        FaultKind::ConnectionLost | FaultKind::ReplyLost => {
            if !conn.is_autocommit() {
                // What SQLite does itself after an I/O error mid-transaction.
                let _ = conn.execute_batch("ROLLBACK");
            }
            ffi::SQLITE_IOERR
        }
    };
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some(MESSAGE.to_owned()))
}
