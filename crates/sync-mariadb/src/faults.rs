//! Fault injection at the database seam (feature `fault-injection`, tests
//! only). [`Conn`](crate::pool::Conn) consults the installed
//! [`FaultPlan`] before every statement it sends; every injected error is
//! a real server or driver error, classified like any other:
//!
//! - `Fail`: in place of the statement the server signals error 1026
//!   (`ER_ERROR_ON_WRITE`, SQLSTATE `HY000`) → `sync.storage.backend`. As
//!   with any failed statement on MariaDB, an open transaction stays open
//!   and the crate's own state machine refuses everything but its
//!   rollback;
//! - `Busy`: the server signals error 1205 (lock wait timeout) →
//!   `sync.storage.busy`;
//! - `ConnectionLost`: the connection is killed with `KILL CONNECTION` from
//!   a side connection (waiting until the server lists it no more), then
//!   the statement is sent on the dead connection;
//! - `ReplyLost`: the statement runs, then the connection is killed the
//!   same way and the caller gets the dead connection's error.

use std::sync::Arc;

use mysql::prelude::Queryable;
use mysql::Opts;
use sync_core::fault::{FaultKind, FaultPlan};

/// `ER_ERROR_ON_WRITE`: an I/O failure, never a lock or a constraint.
const FAIL_ERRNO: u16 = 1026;
/// `ER_LOCK_WAIT_TIMEOUT`.
const BUSY_ERRNO: u16 = 1205;
/// How many times the side connection looks for the killed connection
/// before giving up waiting (each look is one round trip).
const GONE_POLLS: u32 = 10_000;

/// The plan a connection consults, and how to reach the server from the side.
#[derive(Clone)]
pub(crate) struct FaultHook {
    pub(crate) plan: Arc<FaultPlan>,
    pub(crate) side: Opts,
}

impl std::fmt::Debug for FaultHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultHook")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

/// Runs `run` (one statement on `conn`) under the hook.
pub(crate) fn around<T>(
    hook: &FaultHook,
    sql: &str,
    conn: &mut mysql::Conn,
    run: impl FnOnce(&mut mysql::Conn) -> Result<T, mysql::Error>,
) -> Result<T, mysql::Error> {
    match hook.plan.on_statement(sql) {
        None => run(conn),
        Some(FaultKind::Fail) => signal(conn, FAIL_ERRNO).map_or_else(|| run(conn), Err),
        Some(FaultKind::Busy) => signal(conn, BUSY_ERRNO).map_or_else(|| run(conn), Err),
        Some(FaultKind::ConnectionLost) => {
            kill(hook, conn);
            run(conn)
        }
        Some(FaultKind::ReplyLost) => {
            let outcome = run(conn);
            kill(hook, conn);
            match (outcome, conn.query_drop("DO 1")) {
                (Err(error), _) | (Ok(_), Err(error)) => Err(error),
                // The kill did not take: nothing was injected.
                (Ok(value), Ok(())) => Ok(value),
            }
        }
    }
}

/// A genuine server error numbered `errno`, signalled by the server itself
/// (`None` only if the server did not signal, in which case nothing is
/// injected).
fn signal(conn: &mut mysql::Conn, errno: u16) -> Option<mysql::Error> {
    conn.query_drop(format!(
        "SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = {errno}, \
         MESSAGE_TEXT = 'sync.fault_injection: injected fault'"
    ))
    .err()
}

/// Kills `conn`'s session from a side connection and waits until the
/// server no longer lists it; without a side connection the session kills
/// itself.
fn kill(hook: &FaultHook, conn: &mut mysql::Conn) {
    let id = conn.connection_id();
    let Ok(mut side) = mysql::Conn::new(hook.side.clone()) else {
        let _ = conn.query_drop(format!("KILL CONNECTION {id}"));
        return;
    };
    if side.query_drop(format!("KILL CONNECTION {id}")).is_err() {
        return;
    }
    for _ in 0..GONE_POLLS {
        let listed: Result<Option<i64>, _> = side.exec_first(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?",
            (id,),
        );
        if !matches!(listed, Ok(Some(n)) if n > 0) {
            return;
        }
    }
}
