//! Driver error → coded error classification (`storage-contract.md` §3.3).
//!
//! The writer-fence rejection (SQLSTATE `P0001` whose message carries the
//! code) is recognised before any constraint classification. Constraint
//! errors become `constraint_violation` only in `upsert_row` and
//! `duplicate_reaction` only in `enqueue_reactions`; everywhere else a
//! constraint error is `backend`. Lock, statement and serialization timeouts
//! and pool checkout timeouts are `busy`.

use std::fmt;

use postgres::error::SqlState;
use sync_core::{BackendCause, Error, ErrorCode};

/// Where a driver error happened, for the context-dependent codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Site {
    /// Any statement without special classification.
    General,
    /// `upsert_row`: class 23 → `constraint_violation` with this op index.
    UpsertRow(Option<u32>),
    /// `enqueue_reactions`: `23505` on `sync_reactions_pkey` → `duplicate_reaction`.
    EnqueueReactions,
}

/// The message the fence trigger raises.
pub(crate) const FENCE_MESSAGE: &str = "sync.storage.writer_fence_rejected";

const REACTIONS_PKEY: &str = "sync_reactions_pkey";

/// A driver error whose `Display` includes the server's SQLSTATE and
/// message (kept as the coded error's `source`, never in its message).
#[derive(Debug)]
pub(crate) struct DriverError(postgres::Error);

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_db_error() {
            Some(db) => write!(
                f,
                "{} {}: {}",
                db.severity(),
                db.code().code(),
                db.message()
            ),
            None => write!(f, "{}", self.0),
        }
    }
}

impl std::error::Error for DriverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Classifies a driver error at `site`. A connection-level failure is
/// `connection_lost` (the caller turns it into `outcome_unknown` where the
/// statement may have committed); `backend` and `connection_lost` carry
/// `details.cause`.
pub(crate) fn classify(err: postgres::Error, site: Site) -> Error {
    let code = code_of(&err, site);
    let error = Error::new(code);
    let error = match (code, site) {
        (ErrorCode::ConstraintViolation, Site::UpsertRow(op_index)) => error.op_index(op_index),
        (ErrorCode::Backend | ErrorCode::ConnectionLost, _) => error.with_cause(cause_of(&err)),
        _ => error,
    };
    error.source_error(DriverError(err))
}

/// A failure to open a connection (`connect`, the probe): always
/// `sync.storage.backend` with the cause (unreachable server, failed
/// authentication, missing database, …).
pub(crate) fn connect_error(err: postgres::Error) -> Error {
    let cause = cause_of(&err);
    Error::backend_with_cause(cause, DriverError(err))
}

/// Whether the connection itself failed (closed, reset, server shutdown or
/// terminated backend): the session is gone, and with it any open
/// transaction.
pub(crate) fn is_connection_error(err: &postgres::Error) -> bool {
    if err.is_closed() {
        return true;
    }
    if let Some(db_error) = err.as_db_error() {
        let state = db_error.code();
        return state.code().starts_with("08")
            || [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
            ]
            .contains(state);
    }
    io_error(err).is_some()
}

fn io_error(err: &postgres::Error) -> Option<&std::io::Error> {
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = inner.source();
    }
    None
}

/// The cause vocabulary (`details.cause`) of a driver error.
pub(crate) fn cause_of(err: &postgres::Error) -> BackendCause {
    let Some(db_error) = err.as_db_error() else {
        return if is_connection_error(err) {
            BackendCause::Unreachable
        } else {
            BackendCause::Other
        };
    };
    let state = db_error.code();
    match state.code() {
        "28000" | "28P01" => BackendCause::AuthFailed,
        "3D000" => BackendCause::DatabaseMissing,
        "3F000" => BackendCause::SchemaMissing,
        "25006" => BackendCause::ReadOnly,
        "53100" => BackendCause::DiskFull,
        "XX001" | "XX002" => BackendCause::Corrupt,
        "54000" | "54001" | "54011" | "54023" => BackendCause::TooLarge,
        _ if is_connection_error(err) => BackendCause::Unreachable,
        _ => BackendCause::Other,
    }
}

/// Classifies a driver error outside any special site.
pub(crate) fn db(err: postgres::Error) -> Error {
    classify(err, Site::General)
}

/// A pool checkout timeout: retryable `busy`.
pub(crate) fn pool_timeout(err: r2d2::Error) -> Error {
    Error::busy(err)
}

fn code_of(err: &postgres::Error, site: Site) -> ErrorCode {
    if is_connection_error(err) {
        return ErrorCode::ConnectionLost;
    }
    let Some(db_error) = err.as_db_error() else {
        return ErrorCode::Backend;
    };
    let state = db_error.code();
    if *state == SqlState::RAISE_EXCEPTION && db_error.message().contains(FENCE_MESSAGE) {
        return ErrorCode::WriterFenceRejected;
    }
    if state.code().starts_with("23") {
        return match site {
            Site::UpsertRow(_) => ErrorCode::ConstraintViolation,
            Site::EnqueueReactions
                if *state == SqlState::UNIQUE_VIOLATION
                    && db_error.constraint() == Some(REACTIONS_PKEY) =>
            {
                ErrorCode::DuplicateReaction
            }
            _ => ErrorCode::Backend,
        };
    }
    if is_busy(state) {
        return ErrorCode::Busy;
    }
    ErrorCode::Backend
}

fn is_busy(state: &SqlState) -> bool {
    [
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::LOCK_NOT_AVAILABLE,
        SqlState::QUERY_CANCELED,
    ]
    .contains(state)
}

/// Whether a driver error says a cached prepared statement went stale (its
/// result shape changed under DDL), so the cache entry must be dropped.
pub(crate) fn is_stale_statement(err: &postgres::Error) -> bool {
    err.as_db_error().is_some_and(|e| {
        *e.code() == SqlState::FEATURE_NOT_SUPPORTED
            || *e.code() == SqlState::INVALID_SQL_STATEMENT_NAME
    })
}
