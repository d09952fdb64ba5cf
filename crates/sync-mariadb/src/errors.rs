//! Driver error → coded error classification (`storage-contract.md` §3.3,
//! `docs/design/mariadb.md` §14).
//!
//! The writer-fence rejection and a barrier guard's refusal (error 1644,
//! SQLSTATE `45000`, whose message is the code) are recognised before any
//! constraint classification.
//! Integrity errors (SQLSTATE class `23`: duplicate key 1062, `NULL` into a
//! `NOT NULL` column 1048, a failed `CHECK` 4025) become
//! `constraint_violation` only in `upsert_row` and `duplicate_reaction`
//! only for the primary key of `sync_reactions` in `enqueue_reactions`;
//! everywhere else they are `backend`. Lock-wait timeouts (1205, row and
//! metadata locks), deadlocks (1213) and `max_statement_time` (1969) are
//! `busy`; a server short of memory, connections or disk is the retryable
//! `unavailable`. A lost connection is `connection_lost`.

use sync_core::{BackendCause, Error, ErrorCode};

use crate::barrier_guards::GUARD_MESSAGE;

/// Where a driver error happened, for the context-dependent codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // the row and reaction sites are the transaction backend's (next increment)
pub(crate) enum Site {
    /// Any statement without special classification.
    General,
    /// `upsert_row`: class 23 → `constraint_violation` with this op index.
    UpsertRow(Option<u32>),
    /// `enqueue_reactions`: 1062 on the primary key → `duplicate_reaction`.
    EnqueueReactions,
}

/// The message the fence trigger signals.
pub(crate) const FENCE_MESSAGE: &str = "sync.storage.writer_fence_rejected";

/// Server error numbers this module names.
mod number {
    pub const SIGNAL: u16 = 1644;
    pub const DUPLICATE_KEY: u16 = 1062;
    pub const LOCK_WAIT_TIMEOUT: u16 = 1205;
    pub const DEADLOCK: u16 = 1213;
    pub const STATEMENT_TIMEOUT: u16 = 1969;
    pub const CONNECTION_KILLED: u16 = 1927;
    pub const SERVER_SHUTDOWN: u16 = 1053;
    pub const INACTIVE_CLIENT: u16 = 4031;
    pub const CLIENT_SERVER_GONE: u16 = 2006;
    pub const CLIENT_SERVER_LOST: u16 = 2013;
}

/// Classifies a driver error at `site`. `backend`, `unavailable` and
/// `connection_lost` carry `details.cause`; the driver error is the source.
pub(crate) fn classify(err: mysql::Error, site: Site) -> Error {
    let code = code_of(&err, site);
    let error = Error::new(code);
    let error = match (code, site) {
        (ErrorCode::ConstraintViolation, Site::UpsertRow(op_index)) => error.op_index(op_index),
        (ErrorCode::Backend | ErrorCode::ConnectionLost | ErrorCode::Unavailable, _) => {
            error.with_cause(cause_of(&err))
        }
        _ => error,
    };
    error.source_error(err)
}

/// Classifies a driver error outside any special site.
pub(crate) fn db(err: mysql::Error) -> Error {
    classify(err, Site::General)
}

/// A failure to open or set up a connection: always
/// `sync.storage.backend` with the cause (unreachable server, failed
/// authentication, missing database, …).
pub(crate) fn connect_error(err: mysql::Error) -> Error {
    let cause = cause_of(&err);
    Error::backend_with_cause(cause, err)
}

/// A pool checkout timeout: retryable `busy`.
pub(crate) fn pool_timeout(err: r2d2::Error) -> Error {
    Error::busy(err)
}

/// Whether the connection itself failed: the session is gone, and with it
/// any open transaction and session lock.
pub(crate) fn is_connection_error(err: &mysql::Error) -> bool {
    match err {
        mysql::Error::IoError(_) | mysql::Error::CodecError(_) => true,
        mysql::Error::DriverError(driver) => !matches!(
            driver,
            mysql::DriverError::MismatchedStmtParams(..)
                | mysql::DriverError::Params(_)
                | mysql::DriverError::MixedParams
                | mysql::DriverError::PacketTooLarge
                | mysql::DriverError::ReadOnlyTransNotSupported
        ),
        mysql::Error::MySqlError(server) => [
            number::CONNECTION_KILLED,
            number::SERVER_SHUTDOWN,
            number::INACTIVE_CLIENT,
            number::CLIENT_SERVER_GONE,
            number::CLIENT_SERVER_LOST,
        ]
        .contains(&server.code),
        _ => false,
    }
}

/// The cause vocabulary (`details.cause`) of a driver error.
pub(crate) fn cause_of(err: &mysql::Error) -> BackendCause {
    match err {
        mysql::Error::MySqlError(server) => match number_cause(server.code) {
            Some(cause) => cause,
            None if is_connection_error(err) => BackendCause::Unreachable,
            None => BackendCause::Other,
        },
        mysql::Error::DriverError(mysql::DriverError::PacketTooLarge) => BackendCause::TooLarge,
        _ if is_connection_error(err) => BackendCause::Unreachable,
        _ => BackendCause::Other,
    }
}

/// The cause a server error number names by itself, if any.
fn number_cause(code: u16) -> Option<BackendCause> {
    Some(match code {
        // access denied (user, database, no password allowed), plugin refused
        1044 | 1045 | 1698 | 1251 => BackendCause::AuthFailed,
        // unknown database
        1049 => BackendCause::DatabaseMissing,
        // read-only transaction, --read-only server
        1792 | 1290 | 1836 => BackendCause::ReadOnly,
        // disk full, table full
        1021 | 1114 => BackendCause::DiskFull,
        // crashed or corrupt table / index
        126 | 145 | 1034 | 1035 | 1194 | 1195 => BackendCause::Corrupt,
        // key too long, row too large, packet too large, data too long,
        // too many placeholders
        1071 | 1118 | 1153 | 1406 | 1390 => BackendCause::TooLarge,
        // too many connections, out of memory, cannot create a thread
        1040 | 1037 | 1038 | 1041 | 1135 => BackendCause::InsufficientResources,
        _ => return None,
    })
}

fn code_of(err: &mysql::Error, site: Site) -> ErrorCode {
    if is_connection_error(err) {
        return ErrorCode::ConnectionLost;
    }
    let mysql::Error::MySqlError(server) = err else {
        return ErrorCode::Backend;
    };
    server_code(server.code, &server.state, &server.message, site)
}

/// The code of a server error (number, SQLSTATE, message) at `site`.
fn server_code(code: u16, state: &str, message: &str, site: Site) -> ErrorCode {
    if code == number::SIGNAL && state == "45000" && message.contains(FENCE_MESSAGE) {
        return ErrorCode::WriterFenceRejected;
    }
    if code == number::SIGNAL && state == "45000" && message.contains(GUARD_MESSAGE) {
        return ErrorCode::BarrierWriteRefused;
    }
    if state.starts_with("23") {
        return match site {
            Site::UpsertRow(_) => ErrorCode::ConstraintViolation,
            Site::EnqueueReactions
                if code == number::DUPLICATE_KEY && message.ends_with("for key 'PRIMARY'") =>
            {
                ErrorCode::DuplicateReaction
            }
            _ => ErrorCode::Backend,
        };
    }
    if [
        number::LOCK_WAIT_TIMEOUT,
        number::DEADLOCK,
        number::STATEMENT_TIMEOUT,
    ]
    .contains(&code)
    {
        return ErrorCode::Busy;
    }
    match number_cause(code) {
        Some(BackendCause::DiskFull | BackendCause::InsufficientResources) => {
            ErrorCode::Unavailable
        }
        _ => ErrorCode::Backend,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: u16, state: &str, message: &str) -> mysql::Error {
        mysql::Error::MySqlError(mysql::MySqlError {
            state: state.to_owned(),
            message: message.to_owned(),
            code,
        })
    }

    #[test]
    fn the_fence_is_recognised_before_constraints() {
        let err = server(1644, "45000", FENCE_MESSAGE);
        assert_eq!(
            classify(err, Site::UpsertRow(Some(2))).code(),
            ErrorCode::WriterFenceRejected
        );
        let other_signal = server(1644, "45000", "something else");
        assert_eq!(db(other_signal).code(), ErrorCode::Backend);
    }

    #[test]
    fn a_guard_signal_is_a_refused_barrier_write_wherever_it_happens() {
        for site in [
            Site::General,
            Site::UpsertRow(Some(1)),
            Site::EnqueueReactions,
        ] {
            let err = classify(server(1644, "45000", GUARD_MESSAGE), site);
            assert_eq!(err.code(), ErrorCode::BarrierWriteRefused);
            assert!(!err.retryable());
        }
        // The same message under another SQLSTATE is not the guard's.
        let err = db(server(1644, "HY000", GUARD_MESSAGE));
        assert_eq!(err.code(), ErrorCode::Backend);
    }

    #[test]
    fn integrity_errors_depend_on_the_site() {
        let duplicate = || {
            server(
                1062,
                "23000",
                "Duplicate entry 'p1-a' for key 'sync_ux_t_by_a'",
            )
        };
        let err = classify(duplicate(), Site::UpsertRow(Some(3)));
        assert_eq!(err.code(), ErrorCode::ConstraintViolation);
        assert_eq!(err.op_index_value(), Some(3));
        assert_eq!(db(duplicate()).code(), ErrorCode::Backend);
        assert_eq!(
            classify(duplicate(), Site::EnqueueReactions).code(),
            ErrorCode::Backend
        );
        let reaction = server(1062, "23000", "Duplicate entry 'p1-k1' for key 'PRIMARY'");
        assert_eq!(
            classify(reaction, Site::EnqueueReactions).code(),
            ErrorCode::DuplicateReaction
        );
        let check = server(4025, "23000", "CONSTRAINT `x` failed for `db`.`t`");
        assert_eq!(
            classify(check, Site::UpsertRow(None)).code(),
            ErrorCode::ConstraintViolation
        );
    }

    #[test]
    fn waits_are_busy_and_shortages_unavailable() {
        for code in [1205, 1213, 1969] {
            assert_eq!(db(server(code, "HY000", "x")).code(), ErrorCode::Busy);
        }
        let err = db(server(1040, "HY000", "Too many connections"));
        assert_eq!(err.code(), ErrorCode::Unavailable);
        assert_eq!(err.cause(), Some(BackendCause::InsufficientResources));
        let err = db(server(1021, "HY000", "Disk full"));
        assert_eq!(err.cause(), Some(BackendCause::DiskFull));
    }

    #[test]
    fn causes_and_lost_connections() {
        let err = connect_error(server(1045, "28000", "Access denied"));
        assert_eq!(err.code(), ErrorCode::Backend);
        assert_eq!(err.cause(), Some(BackendCause::AuthFailed));
        let err = connect_error(server(1049, "42000", "Unknown database 'x'"));
        assert_eq!(err.cause(), Some(BackendCause::DatabaseMissing));
        let err = db(server(
            1792,
            "25006",
            "Cannot execute statement in a READ ONLY transaction",
        ));
        assert_eq!(err.cause(), Some(BackendCause::ReadOnly));
        let err = db(server(1927, "70100", "Connection was killed"));
        assert_eq!(err.code(), ErrorCode::ConnectionLost);
        let io = mysql::Error::IoError(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        let err = db(io);
        assert_eq!(err.code(), ErrorCode::ConnectionLost);
        assert_eq!(err.cause(), Some(BackendCause::Unreachable));
    }
}
