//! Driver error → coded error classification (`storage-contract.md` §3.3,
//! `dialects.md` §1).
//!
//! The fence check runs first: the trigger's `RAISE(ABORT)` surfaces as a
//! constraint-class error and must never become a constraint violation.
//! Constraint errors are `constraint_violation` only in `upsert_row` and
//! `duplicate_reaction` only in `enqueue_reactions`; busy and locked are
//! `busy`; a full disk and a moved database file are the retryable
//! `unavailable`; everything else is `backend`.

use rusqlite::ffi;
use sync_core::{BackendCause, Error, ErrorCode};

/// The message the writer-fence trigger raises.
pub(crate) const FENCE_MESSAGE: &str = "sync.storage.writer_fence_rejected";

/// Where a driver error happened; decides how constraint errors are coded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    /// Any statement: constraint errors are backend errors.
    Statement,
    /// The row write of `upsert_row`, with the caller's operation index.
    UpsertRow(Option<u32>),
    /// The inserts of `enqueue_reactions`.
    EnqueueReactions,
}

/// Classifies a driver error.
pub(crate) fn classify(error: rusqlite::Error, context: Context) -> Error {
    if is_fence_rejection(&error) {
        return Error::new(ErrorCode::WriterFenceRejected).source_error(error);
    }
    if is_trigger_abort(&error, crate::barrier_guards::GUARD_MESSAGE) {
        return Error::new(ErrorCode::BarrierWriteRefused).source_error(error);
    }
    let (code, extended) = match &error {
        rusqlite::Error::SqliteFailure(e, _) => (Some(e.code), e.extended_code),
        _ => (None, 0),
    };
    match (code, context) {
        (Some(ffi::ErrorCode::DatabaseBusy | ffi::ErrorCode::DatabaseLocked), _) => {
            Error::busy(error)
        }
        (Some(ffi::ErrorCode::ConstraintViolation), Context::UpsertRow(op_index)) => {
            Error::new(ErrorCode::ConstraintViolation)
                .op_index(op_index)
                .source_error(error)
        }
        (Some(ffi::ErrorCode::ConstraintViolation), Context::EnqueueReactions)
            if extended == ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            Error::new(ErrorCode::DuplicateReaction).source_error(error)
        }
        _ => {
            let cause = cause_of(code, extended);
            if is_transient(cause) {
                Error::unavailable(cause, error)
            } else {
                Error::backend_with_cause(cause, error)
            }
        }
    }
}

/// Causes that clear without a restart — space freed, the file put back,
/// the I/O path healed — and so are the retryable
/// `sync.storage.unavailable` rather than `sync.storage.backend`.
pub(crate) fn is_transient(cause: BackendCause) -> bool {
    matches!(cause, BackendCause::DiskFull | BackendCause::Moved)
}

/// The cause vocabulary (`details.cause`) of an SQLite result code. An
/// unopenable file is `other` here; opening refines it from the path
/// (missing or read-only directory).
pub(crate) fn cause_of(code: Option<ffi::ErrorCode>, extended: i32) -> BackendCause {
    if extended == ffi::SQLITE_READONLY_DBMOVED {
        return BackendCause::Moved;
    }
    match code {
        Some(ffi::ErrorCode::ReadOnly) => BackendCause::ReadOnly,
        Some(ffi::ErrorCode::DiskFull) => BackendCause::DiskFull,
        Some(ffi::ErrorCode::DatabaseCorrupt | ffi::ErrorCode::NotADatabase) => {
            BackendCause::Corrupt
        }
        Some(ffi::ErrorCode::TooBig) => BackendCause::TooLarge,
        _ => BackendCause::Other,
    }
}

/// Whether the error is the writer-fence trigger's abort: extended code
/// `SQLITE_CONSTRAINT_TRIGGER` and the fence message.
pub(crate) fn is_fence_rejection(error: &rusqlite::Error) -> bool {
    is_trigger_abort(error, FENCE_MESSAGE)
}

/// Whether the error is a trigger's `RAISE(ABORT, …)` carrying `message`.
fn is_trigger_abort(error: &rusqlite::Error, message: &str) -> bool {
    match error {
        rusqlite::Error::SqliteFailure(e, Some(text)) => {
            e.extended_code == ffi::SQLITE_CONSTRAINT_TRIGGER && text.contains(message)
        }
        _ => false,
    }
}

/// A pool checkout that timed out (or could not connect) is `busy`.
pub(crate) fn pool_error(error: r2d2::Error) -> Error {
    Error::busy(error)
}

/// A stored value that does not have the expected shape.
pub(crate) fn corrupt(what: &'static str) -> Error {
    Error::new(ErrorCode::Backend).detail("reason", what)
}

/// `.db()` / `.db_in(ctx)` on driver results.
pub(crate) trait DbResultExt<T> {
    /// Classifies an error of a plain statement.
    fn db(self) -> sync_core::Result<T>;
    /// Classifies an error in a specific context.
    fn db_in(self, context: Context) -> sync_core::Result<T>;
}

impl<T> DbResultExt<T> for rusqlite::Result<T> {
    fn db(self) -> sync_core::Result<T> {
        self.map_err(|e| classify(e, Context::Statement))
    }

    fn db_in(self, context: Context) -> sync_core::Result<T> {
        self.map_err(|e| classify(e, context))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: i32, message: &str) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some(message.to_owned()))
    }

    #[test]
    fn fence_wins_over_constraint() {
        let error = failure(ffi::SQLITE_CONSTRAINT_TRIGGER, FENCE_MESSAGE);
        let coded = classify(error, Context::UpsertRow(Some(3)));
        assert_eq!(coded.code(), ErrorCode::WriterFenceRejected);
    }

    #[test]
    fn a_guard_abort_is_a_refused_barrier_write() {
        let error = failure(
            ffi::SQLITE_CONSTRAINT_TRIGGER,
            crate::barrier_guards::GUARD_MESSAGE,
        );
        let coded = classify(error, Context::UpsertRow(Some(1)));
        assert_eq!(coded.code(), ErrorCode::BarrierWriteRefused);
        assert!(!coded.retryable());
    }

    #[test]
    fn constraint_is_context_dependent() {
        let unique = || failure(ffi::SQLITE_CONSTRAINT_UNIQUE, "UNIQUE constraint failed");
        let coded = classify(unique(), Context::UpsertRow(Some(2)));
        assert_eq!(coded.code(), ErrorCode::ConstraintViolation);
        assert_eq!(coded.op_index_value(), Some(2));
        assert_eq!(
            classify(unique(), Context::Statement).code(),
            ErrorCode::Backend
        );
        let pk = failure(
            ffi::SQLITE_CONSTRAINT_PRIMARYKEY,
            "UNIQUE constraint failed",
        );
        assert_eq!(
            classify(pk, Context::EnqueueReactions).code(),
            ErrorCode::DuplicateReaction
        );
        let other_trigger = failure(ffi::SQLITE_CONSTRAINT_TRIGGER, "something else");
        assert_eq!(
            classify(other_trigger, Context::Statement).code(),
            ErrorCode::Backend
        );
    }

    #[test]
    fn backend_errors_carry_their_cause() {
        for (code, cause) in [
            (ffi::SQLITE_READONLY, "read_only"),
            (ffi::SQLITE_CORRUPT, "corrupt"),
            (ffi::SQLITE_NOTADB, "corrupt"),
            (ffi::SQLITE_TOOBIG, "too_large"),
            (ffi::SQLITE_ERROR, "other"),
            (ffi::SQLITE_IOERR, "other"),
            (ffi::SQLITE_IOERR_WRITE, "other"),
            (ffi::SQLITE_IOERR_FSYNC, "other"),
        ] {
            let coded = classify(failure(code, "x"), Context::Statement);
            assert_eq!(coded.code(), ErrorCode::Backend);
            assert!(!coded.retryable(), "code {code}");
            assert_eq!(coded.get_detail("cause"), Some(cause), "code {code}");
        }
    }

    #[test]
    fn a_full_disk_and_a_moved_file_are_retryable_unavailable() {
        for (code, cause) in [
            (ffi::SQLITE_FULL, "disk_full"),
            (ffi::SQLITE_READONLY_DBMOVED, "moved"),
        ] {
            for context in [Context::Statement, Context::UpsertRow(Some(1))] {
                let coded = classify(failure(code, "x"), context);
                assert_eq!(coded.code(), ErrorCode::Unavailable, "code {code}");
                assert!(coded.retryable(), "code {code}");
                assert_eq!(coded.get_detail("cause"), Some(cause), "code {code}");
            }
        }
    }

    #[test]
    fn busy_and_locked_are_busy() {
        for code in [
            ffi::SQLITE_BUSY,
            ffi::SQLITE_LOCKED,
            ffi::SQLITE_BUSY_SNAPSHOT,
        ] {
            let coded = classify(failure(code, "busy"), Context::Statement);
            assert_eq!(coded.code(), ErrorCode::Busy);
            assert!(coded.retryable());
        }
    }
}
