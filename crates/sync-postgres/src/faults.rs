//! Fault injection at the database seam (feature `fault-injection`, tests
//! only). [`Conn`](crate::pool::Conn) consults the installed
//! [`FaultPlan`] before every statement it sends; every injected error is
//! a real server or driver error, classified like any other:
//!
//! - `Fail`: the server raises SQLSTATE `58030` (io_error) in place of the
//!   statement, aborting an open transaction → `sync.storage.backend`;
//! - `Busy`: the server raises `55P03` (lock_not_available) →
//!   `sync.storage.busy`;
//! - `ConnectionLost`: the connection's backend is killed with
//!   `pg_terminate_backend` from a side connection (waiting until it is
//!   gone), then the statement is sent on the dead connection;
//! - `ReplyLost`: the statement runs, then the backend is killed the same
//!   way and the caller gets the dead connection's error.

use std::sync::Arc;

use postgres::{Client, NoTls};
use sync_core::fault::{FaultKind, FaultPlan};

use crate::pool::{Conn, PgError};

/// The plan a connection consults, and how to reach the server from the side.
#[derive(Clone)]
pub(crate) struct FaultHook {
    pub(crate) plan: Arc<FaultPlan>,
    pub(crate) side: Option<postgres::Config>,
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
    conn: &mut Conn,
    run: impl FnOnce(&mut Conn) -> Result<T, PgError>,
) -> Result<T, PgError> {
    match hook.plan.on_statement(sql) {
        None => run(conn),
        Some(FaultKind::Fail) => raise(conn.client_mut(), "58030").map_or_else(|| run(conn), Err),
        Some(FaultKind::Busy) => raise(conn.client_mut(), "55P03").map_or_else(|| run(conn), Err),
        Some(FaultKind::ConnectionLost) => {
            let pid = backend_pid(conn.client_mut());
            kill(hook, conn.client_mut(), pid);
            run(conn)
        }
        Some(FaultKind::ReplyLost) => {
            let pid = backend_pid(conn.client_mut());
            let outcome = run(conn);
            let client = conn.client_mut();
            kill(hook, client, pid);
            match (outcome, client.simple_query("SELECT 1")) {
                (Err(error), _) | (Ok(_), Err(error)) => Err(error),
                // The kill did not take: nothing was injected.
                (Ok(value), Ok(_)) => Ok(value),
            }
        }
    }
}

/// A genuine server error with `sqlstate`, raised by the server itself
/// (`None` only if the server did not raise, in which case nothing is
/// injected).
fn raise(client: &mut Client, sqlstate: &str) -> Option<PgError> {
    let sql = format!(
        "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '{sqlstate}', \
         MESSAGE = 'sync.fault_injection: injected fault'; END $$"
    );
    client.simple_query(&sql).err()
}

/// Terminates the connection's backend from a side connection and waits
/// until it is gone; without a side configuration the backend terminates
/// itself.
fn kill(hook: &FaultHook, client: &mut Client, pid: Option<i32>) {
    let side = hook
        .side
        .as_ref()
        .and_then(|config| config.connect(NoTls).ok());
    match (pid, side) {
        (Some(pid), Some(mut side)) => {
            // Waits until the backend is gone (Postgres 14+); older servers
            // only signal it.
            if side
                .query("SELECT pg_terminate_backend($1, 10000)", &[&pid])
                .is_err()
            {
                let _ = side.query("SELECT pg_terminate_backend($1)", &[&pid]);
            }
        }
        _ => {
            let _ = client.simple_query("SELECT pg_terminate_backend(pg_backend_pid())");
        }
    }
}

/// The process id of the connection's backend (read before the statement,
/// while its transaction is still healthy).
fn backend_pid(client: &mut Client) -> Option<i32> {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .ok()
        .and_then(|row| row.try_get::<_, i32>(0).ok())
}
