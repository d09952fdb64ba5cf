//! Transaction control on one pooled connection: explicit `BEGIN` with the
//! isolation level, `COMMIT` that leaves nothing open when it fails, and a
//! `ROLLBACK` that never fails (a connection whose rollback fails is
//! discarded instead of being returned to the pool).

use sync_core::{Error, ErrorCode, Result};

use crate::errors::Site;
use crate::pool::Conn;

/// Isolation of a transaction this crate opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// Push and every write transaction (`dialects.md` §2.2).
    ReadCommitted,
    /// Multi-statement pool reads and registered queries.
    RepeatableReadOnly,
}

/// The `BEGIN` text (plus the optional per-transaction statement timeout and
/// the storage's per-transaction `settings`), sent as one simple-query round
/// trip.
pub(crate) fn begin_sql(
    isolation: Isolation,
    statement_timeout_ms: Option<u64>,
    settings: Option<&str>,
) -> String {
    let mut sql = String::from(match isolation {
        Isolation::ReadCommitted => "BEGIN ISOLATION LEVEL READ COMMITTED",
        Isolation::RepeatableReadOnly => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    });
    if let Some(ms) = statement_timeout_ms {
        sql.push_str(&format!("; SET LOCAL statement_timeout = {ms}"));
    }
    if let Some(settings) = settings {
        sql.push_str("; ");
        sql.push_str(settings);
    }
    sql
}

/// Opens a transaction with `sql` (see [`begin_sql`]). On failure the transaction is rolled back so the
/// connection goes back to the pool clean.
pub(crate) fn begin(conn: &mut Conn, sql: &str) -> Result<()> {
    if let Err(err) = conn.simple(sql) {
        rollback(conn);
        return Err(err);
    }
    Ok(())
}

/// Commits. A failed `COMMIT` is followed by a `ROLLBACK` so nothing stays
/// open, and its error is returned; a connection lost at the `COMMIT` is
/// `outcome_unknown` (the commit may have happened).
pub(crate) fn commit(conn: &mut Conn) -> Result<()> {
    if let Err(err) = conn.simple("COMMIT") {
        rollback(conn);
        return Err(lost_at_commit(err));
    }
    Ok(())
}

/// Sends `statements` and `COMMIT` in one simple-query message (on any
/// failure the server skips the rest of the message, so nothing is
/// committed); like [`commit`], a failure is followed by a `ROLLBACK`, and
/// a lost connection is `outcome_unknown`. Errors are classified for
/// `site` (a message carrying a deferred row write reports a class-23
/// error as that write's `constraint_violation`).
pub(crate) fn commit_after_at(conn: &mut Conn, statements: &str, site: Site) -> Result<()> {
    if let Err(err) = conn.simple_at(&format!("{statements}; COMMIT"), site) {
        rollback(conn);
        return Err(lost_at_commit(err));
    }
    Ok(())
}

/// A lost connection at `COMMIT` leaves the outcome unknown.
pub(crate) fn lost_at_commit(err: Error) -> Error {
    if err.is(ErrorCode::ConnectionLost) {
        outcome_unknown(err)
    } else {
        err
    }
}

/// `sync.storage.outcome_unknown` for a `connection_lost` error, keeping its
/// details (the cause) and driver error.
pub(crate) fn outcome_unknown(err: Error) -> Error {
    err.with_code(ErrorCode::OutcomeUnknown)
}

/// Rolls back; if the rollback itself fails the connection is discarded.
pub(crate) fn rollback(conn: &mut Conn) {
    if conn.is_closed() || conn.simple_raw("ROLLBACK").is_err() {
        conn.discard();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Conn {
        let url = std::env::var("SYNCSTORE_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let client = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| {
            panic!("cannot reach PostgreSQL at {url} ({e}); start one with `pg_ctlcluster <version> main start`")
        });
        Conn::from_client(client)
    }

    #[test]
    fn a_discarded_connection_reports_closed_so_the_pool_drops_it() {
        let mut conn = conn();
        begin(
            &mut conn,
            &begin_sql(Isolation::ReadCommitted, Some(1000), None),
        )
        .unwrap();
        conn.discard();
        assert!(conn.is_closed());
        // Rolling back a closed connection neither fails nor panics.
        rollback(&mut conn);
    }

    #[test]
    fn a_failed_commit_leaves_no_transaction_open() {
        let mut conn = conn();
        begin(&mut conn, &begin_sql(Isolation::ReadCommitted, None, None)).unwrap();
        conn.simple_raw("SET CONSTRAINTS ALL DEFERRED").unwrap();
        conn.simple_raw("CREATE TEMP TABLE t (a int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED)")
            .unwrap();
        conn.simple_raw("INSERT INTO t VALUES (1), (1)").unwrap();
        assert!(commit(&mut conn).is_err());
        // The session is usable and outside any transaction.
        let messages = conn.simple("SELECT 1").unwrap();
        assert!(!messages.is_empty());
        conn.simple("BEGIN; ROLLBACK").unwrap();
    }

    #[test]
    fn the_begin_text_carries_the_timeout_and_the_settings_in_order() {
        assert_eq!(
            begin_sql(Isolation::ReadCommitted, None, None),
            "BEGIN ISOLATION LEVEL READ COMMITTED"
        );
        assert_eq!(
            begin_sql(
                Isolation::RepeatableReadOnly,
                Some(250),
                Some("SET LOCAL a = 1")
            ),
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
             SET LOCAL statement_timeout = 250; SET LOCAL a = 1"
        );
    }
}
