//! Session set-up and checks of every connection (`docs/design/mariadb.md`
//! §2), and transaction control on one connection.

use std::fmt;

use mysql::prelude::Queryable;
use sync_core::{BackendCause, Error, ErrorCode, Result};

use crate::errors::connect_error;

/// The `sql_mode` of every connection, set as a whole (never appended to
/// the server's): strict, `\` is an ordinary character in literals, `"`
/// quotes identifiers and `||` concatenates, as the registered-query mask
/// and the other dialects read them.
pub const SQL_MODE: &str = "STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,NO_BACKSLASH_ESCAPES,ANSI_QUOTES,PIPES_AS_CONCAT";

/// The isolation level of every transaction a session begins, set once by
/// the session set-up (`SET SESSION TRANSACTION ISOLATION LEVEL READ
/// COMMITTED`) and read back: pushes and pool writes begin with a bare
/// `START TRANSACTION`. A multi-statement pool read asks for `REPEATABLE
/// READ` for its one transaction only.
pub(crate) const ISOLATION: &str = "READ-COMMITTED";

/// The oldest server the dialect runs on (`INSERT … RETURNING`, `SKIP
/// LOCKED`, atomic DDL, long unique keys).
pub(crate) const MINIMUM_VERSION: (u16, u16) = (10, 6);

/// Lock waits of one session, in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockWaits {
    /// `innodb_lock_wait_timeout`: row locks.
    pub row_seconds: u64,
    /// `lock_wait_timeout`: metadata locks (DDL against open transactions).
    pub metadata_seconds: u64,
}

/// What a session reported after its set-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFacts {
    /// `@@SESSION.sql_mode`.
    pub sql_mode: String,
    /// `@@SESSION.character_set_connection`.
    pub charset: String,
    /// `@@SESSION.collation_connection`.
    pub collation: String,
    /// `@@version`.
    pub version: String,
    /// `@@lower_case_table_names`.
    pub lower_case_table_names: i64,
    /// The session's isolation level (`tx_isolation`, named
    /// `transaction_isolation` from 11.1 on): `READ-COMMITTED` once the
    /// set-up ran.
    pub isolation: String,
}

/// Why a session was refused (kept as the source of the coded error).
#[derive(Debug)]
pub(crate) struct SessionRefused(pub String);

impl fmt::Display for SessionRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SessionRefused {}

/// Sets up a fresh connection and checks what it reports. A server that
/// is not MariaDB ≥ 10.6, a session without `NO_BACKSLASH_ESCAPES` and
/// `ANSI_QUOTES`, a connection character set other than `utf8mb4`, a
/// server folding identifier case or a session whose isolation level did
/// not become `READ COMMITTED` is refused with `sync.storage.backend`.
pub(crate) fn setup(conn: &mut mysql::Conn, waits: LockWaits) -> Result<SessionFacts> {
    conn.query_drop("SET NAMES utf8mb4 COLLATE utf8mb4_nopad_bin")
        .map_err(connect_error)?;
    conn.query_drop(format!(
        "SET SESSION sql_mode = '{SQL_MODE}', time_zone = '+00:00', \
         innodb_lock_wait_timeout = {}, lock_wait_timeout = {}",
        waits.row_seconds, waits.metadata_seconds
    ))
    .map_err(connect_error)?;
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .map_err(connect_error)?;
    let facts = read_facts(conn)?;
    check(&facts)?;
    Ok(facts)
}

/// Reads the session facts [`check`] judges.
pub(crate) fn read_facts(conn: &mut mysql::Conn) -> Result<SessionFacts> {
    type Facts = (String, String, String, String, i64, Option<String>);
    // The isolation variable is `tx_isolation` up to 11.0 and
    // `transaction_isolation` from 11.1 on: read whichever the server has.
    let row: Option<Facts> = conn
        .query_first(
            "SELECT @@SESSION.sql_mode, @@SESSION.character_set_connection, \
             @@SESSION.collation_connection, @@version, @@lower_case_table_names, \
             (SELECT `VARIABLE_VALUE` FROM information_schema.SESSION_VARIABLES \
              WHERE `VARIABLE_NAME` IN ('TX_ISOLATION', 'TRANSACTION_ISOLATION') LIMIT 1)",
        )
        .map_err(connect_error)?;
    let (sql_mode, charset, collation, version, lower_case_table_names, isolation) =
        row.ok_or_else(|| refused("the session read returned no row"))?;
    Ok(SessionFacts {
        sql_mode,
        charset,
        collation,
        version,
        lower_case_table_names,
        isolation: isolation.unwrap_or_default(),
    })
}

/// Judges a session (see [`setup`]).
pub(crate) fn check(facts: &SessionFacts) -> Result<()> {
    if !facts.version.contains("MariaDB") {
        return Err(refused(&format!("server {} is not MariaDB", facts.version)));
    }
    match parse_version(&facts.version) {
        Some(version) if version >= MINIMUM_VERSION => {}
        _ => {
            return Err(refused(&format!(
                "server {} is older than MariaDB {}.{}",
                facts.version, MINIMUM_VERSION.0, MINIMUM_VERSION.1
            )))
        }
    }
    let modes: Vec<&str> = facts.sql_mode.split(',').collect();
    for required in ["NO_BACKSLASH_ESCAPES", "ANSI_QUOTES"] {
        if !modes.contains(&required) {
            return Err(refused(&format!("sql_mode lacks {required}")));
        }
    }
    if facts.charset != "utf8mb4" {
        return Err(refused(&format!(
            "connection character set is {}, not utf8mb4",
            facts.charset
        )));
    }
    if facts.lower_case_table_names != 0 {
        return Err(refused("lower_case_table_names is not 0"));
    }
    if facts.isolation != ISOLATION {
        return Err(refused(&format!(
            "the session's isolation level is {}, not {ISOLATION}",
            facts.isolation
        )));
    }
    Ok(())
}

/// `(major, minor)` of a `@@version` such as `10.11.19-MariaDB-0+deb12u1`.
pub(crate) fn parse_version(version: &str) -> Option<(u16, u16)> {
    let mut parts = version.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn refused(reason: &str) -> Error {
    Error::backend_with_cause(BackendCause::Other, SessionRefused(reason.to_owned()))
}

/// `sync.storage.outcome_unknown` for a `connection_lost` error at
/// `COMMIT` or at a DDL statement (either may have happened), or anywhere
/// after a migration's fence transaction committed (the migration is
/// stored as open: something changed, whatever the statement that lost
/// it).
pub(crate) fn lost_at_commit(err: Error) -> Error {
    if err.is(ErrorCode::ConnectionLost) {
        err.with_code(ErrorCode::OutcomeUnknown)
    } else {
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> SessionFacts {
        SessionFacts {
            sql_mode: SQL_MODE.to_owned(),
            charset: "utf8mb4".to_owned(),
            collation: "utf8mb4_nopad_bin".to_owned(),
            version: "10.11.19-MariaDB-0+deb12u1".to_owned(),
            lower_case_table_names: 0,
            isolation: ISOLATION.to_owned(),
        }
    }

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("10.11.19-MariaDB-0+deb12u1"), Some((10, 11)));
        assert_eq!(parse_version("11.4.2-MariaDB"), Some((11, 4)));
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn a_good_session_passes_and_each_defect_is_refused() {
        check(&facts()).expect("a good session");
        let defects: [fn(&mut SessionFacts); 8] = [
            (|f| f.version = "8.0.36".to_owned()),
            (|f| f.version = "10.5.2-MariaDB".to_owned()),
            (|f| f.sql_mode = "STRICT_ALL_TABLES,ANSI_QUOTES".to_owned()),
            (|f| f.sql_mode = "NO_BACKSLASH_ESCAPES".to_owned()),
            (|f| f.charset = "latin1".to_owned()),
            (|f| f.lower_case_table_names = 1),
            (|f| f.isolation = "REPEATABLE-READ".to_owned()),
            (|f| f.isolation = "SERIALIZABLE".to_owned()),
        ];
        for defect in defects {
            let mut bad = facts();
            defect(&mut bad);
            let err = check(&bad).expect_err("refused");
            assert_eq!(err.code(), ErrorCode::Backend, "{bad:?}");
            assert_eq!(err.cause(), Some(BackendCause::Other));
        }
    }
}
