//! Driver error → coded error classification (`storage-contract.md` §3.3).
//!
//! The writer-fence rejection (SQLSTATE `P0001` whose message carries the
//! code) is recognised before any constraint classification. Constraint
//! errors become `constraint_violation` only in `upsert_row` and
//! `duplicate_reaction` only in `enqueue_reactions`; everywhere else a
//! constraint error is `backend`. Lock, statement and serialization timeouts
//! and pool checkout timeouts are `busy`; insufficient resources (SQLSTATE
//! class 53, a full disk among them) are the retryable `unavailable`.
//!
//! Constraint errors are recognised by what they say, not by one exact
//! spelling: a distributed Postgres (Citus) names the shard's constraint
//! (`sync_reactions_pkey_102046`: the base name plus `_<digits>`), and when a
//! statement runs as a pull to the coordinator plus `COPY` it re-raises the
//! worker's `duplicate key …` as `XX000` with no constraint field. Both
//! classify like the plain error ([`Facts`]).

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
    /// `enqueue_reactions`: `23505` on `sync_reactions_pkey` (or one of its
    /// shards) → `duplicate_reaction`.
    EnqueueReactions,
}

/// The message the fence trigger raises.
pub(crate) const FENCE_MESSAGE: &str = "sync.storage.writer_fence_rejected";

const REACTIONS_PKEY: &str = "sync_reactions_pkey";

/// SQLSTATE class 53, insufficient resources (`53100` disk_full, `53200`
/// out_of_memory, `53300` too_many_connections, `53400`
/// configuration_limit_exceeded): conditions that clear without a restart,
/// so the retryable `sync.storage.unavailable`.
const INSUFFICIENT_RESOURCES_CLASS: &str = "53";

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
        (ErrorCode::Backend | ErrorCode::ConnectionLost | ErrorCode::Unavailable, _) => {
            error.with_cause(cause_of(&err))
        }
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
    match state_cause(db_error.code().code()) {
        Some(cause) => cause,
        None if is_connection_error(err) => BackendCause::Unreachable,
        None => BackendCause::Other,
    }
}

/// The cause a server SQLSTATE names by itself, if any.
fn state_cause(state: &str) -> Option<BackendCause> {
    Some(match state {
        "28000" | "28P01" => BackendCause::AuthFailed,
        "3D000" => BackendCause::DatabaseMissing,
        "3F000" => BackendCause::SchemaMissing,
        "25006" => BackendCause::ReadOnly,
        "53100" => BackendCause::DiskFull,
        _ if state.starts_with(INSUFFICIENT_RESOURCES_CLASS) => BackendCause::InsufficientResources,
        "XX001" | "XX002" => BackendCause::Corrupt,
        "54000" | "54001" | "54011" | "54023" => BackendCause::TooLarge,
        _ => return None,
    })
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
    Facts {
        state: db_error.code().code(),
        message: db_error.message(),
        constraint: db_error.constraint(),
    }
    .code(site)
}

/// What a server error says, as far as classification needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Facts<'a> {
    /// The SQLSTATE.
    state: &'a str,
    /// The primary message.
    message: &'a str,
    /// The constraint field, when the server sent one.
    constraint: Option<&'a str>,
}

impl<'a> Facts<'a> {
    fn code(self, site: Site) -> ErrorCode {
        if self.state == SqlState::RAISE_EXCEPTION.code() && self.message.contains(FENCE_MESSAGE) {
            return ErrorCode::WriterFenceRejected;
        }
        if self.state == SqlState::RAISE_EXCEPTION.code()
            && self.message.contains(crate::barrier_guards::GUARD_MESSAGE)
        {
            return ErrorCode::BarrierWriteRefused;
        }
        let state = self.integrity_state();
        if state.starts_with("23") {
            return match site {
                Site::UpsertRow(_) => ErrorCode::ConstraintViolation,
                Site::EnqueueReactions
                    if state == SqlState::UNIQUE_VIOLATION.code()
                        && self
                            .unique_constraint()
                            .is_some_and(|name| base_name(name) == REACTIONS_PKEY) =>
                {
                    ErrorCode::DuplicateReaction
                }
                _ => ErrorCode::Backend,
            };
        }
        if is_busy(&SqlState::from_code(state)) {
            return ErrorCode::Busy;
        }
        if state.starts_with(INSUFFICIENT_RESOURCES_CLASS) {
            return ErrorCode::Unavailable;
        }
        ErrorCode::Backend
    }

    /// The SQLSTATE, with an `XX000` that re-raises a worker's integrity
    /// violation (the message is Postgres's own sentence for one) read as
    /// the class-23 state that message belongs to.
    fn integrity_state(self) -> &'a str {
        if self.state != SqlState::INTERNAL_ERROR.code() {
            return self.state;
        }
        wrapped_integrity_state(self.message).unwrap_or(self.state)
    }

    /// The violated unique constraint: the constraint field, else the name
    /// quoted in Postgres's `duplicate key` sentence.
    fn unique_constraint(self) -> Option<&'a str> {
        self.constraint
            .or_else(|| quoted_after(self.message, DUPLICATE_KEY_PREFIX))
    }
}

const DUPLICATE_KEY_PREFIX: &str = "duplicate key value violates unique constraint \"";

/// The class-23 state whose Postgres message `message` is, if any: only the
/// server's own sentences (their fixed openings and endings), so an
/// internal error that merely mentions a constraint stays `backend`.
fn wrapped_integrity_state(message: &str) -> Option<&'static str> {
    if quoted_after(message, DUPLICATE_KEY_PREFIX).is_some() {
        return Some(SqlState::UNIQUE_VIOLATION.code());
    }
    if quoted_after(
        message,
        "conflicting key value violates exclusion constraint \"",
    )
    .is_some()
    {
        return Some(SqlState::EXCLUSION_VIOLATION.code());
    }
    if message.starts_with("new row for relation \"")
        && message.contains("\" violates check constraint \"")
    {
        return Some(SqlState::CHECK_VIOLATION.code());
    }
    if message.starts_with("null value in column \"")
        && message.ends_with("violates not-null constraint")
    {
        return Some(SqlState::NOT_NULL_VIOLATION.code());
    }
    None
}

/// The name between `prefix` (which ends with a quote) and the closing
/// quote that ends `message`.
fn quoted_after<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let name = message.strip_prefix(prefix)?.strip_suffix('"')?;
    (!name.is_empty() && !name.contains('"')).then_some(name)
}

/// A constraint or relation name without a shard suffix: a distributed
/// Postgres names a shard's object by its base name plus `_<digits>`.
/// Only that exact shape is stripped (`x_pkey_102046` → `x_pkey`;
/// `x_pkey_a1`, `x_pkey102046` and `_102046` stay as they are).
pub(crate) fn base_name(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((base, digits))
            if !base.is_empty()
                && !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(state: &'a str, message: &'a str, constraint: Option<&'a str>) -> Facts<'a> {
        Facts {
            state,
            message,
            constraint,
        }
    }

    const PLAIN: &str = "duplicate key value violates unique constraint \"sync_reactions_pkey\"";
    /// What a distributed Postgres sends when the insert runs as a pull to
    /// the coordinator plus `COPY` (no constraint field, `XX000`).
    const CITUS_COPY: &str =
        "duplicate key value violates unique constraint \"sync_reactions_pkey_145977\"";
    /// The router path of the same insert names the shard too.
    const CITUS_ROUTER: &str =
        "duplicate key value violates unique constraint \"sync_reactions_pkey_102046\"";

    #[test]
    fn the_plain_duplicate_reaction_is_classified() {
        let plain = facts("23505", PLAIN, Some("sync_reactions_pkey"));
        assert_eq!(
            plain.code(Site::EnqueueReactions),
            ErrorCode::DuplicateReaction
        );
        assert_eq!(plain.code(Site::General), ErrorCode::Backend);
        assert_eq!(
            plain.code(Site::UpsertRow(Some(0))),
            ErrorCode::ConstraintViolation
        );
    }

    #[test]
    fn a_shard_named_duplicate_reaction_is_classified_like_the_plain_one() {
        let router = facts("23505", CITUS_ROUTER, Some("sync_reactions_pkey_102046"));
        assert_eq!(
            router.code(Site::EnqueueReactions),
            ErrorCode::DuplicateReaction
        );
        let copy = facts("XX000", CITUS_COPY, None);
        assert_eq!(
            copy.code(Site::EnqueueReactions),
            ErrorCode::DuplicateReaction
        );
        assert_eq!(copy.code(Site::General), ErrorCode::Backend);
        assert_eq!(
            copy.code(Site::UpsertRow(None)),
            ErrorCode::ConstraintViolation
        );
    }

    #[test]
    fn a_unique_violation_on_another_constraint_is_not_a_duplicate_reaction() {
        for name in [
            "sync_reactions_pkey_x1",
            "sync_reactions_pkey102046",
            "sync_reactions_due_102046",
            "other_pkey",
        ] {
            let message = format!("duplicate key value violates unique constraint \"{name}\"");
            assert_eq!(
                facts("23505", &message, Some(name)).code(Site::EnqueueReactions),
                ErrorCode::Backend,
                "{name}"
            );
            assert_eq!(
                facts("XX000", &message, None).code(Site::EnqueueReactions),
                ErrorCode::Backend,
                "{name}"
            );
        }
    }

    #[test]
    fn an_internal_error_is_an_integrity_error_only_in_postgres_own_words() {
        for message in [
            "could not connect to node: duplicate key value violates unique constraint \"sync_reactions_pkey\"",
            "duplicate key value violates unique constraint \"sync_reactions_pkey\" on shard",
            "cannot run function command because there was a parallel operation on a distributed table in the transaction",
        ] {
            assert_eq!(
                facts("XX000", message, None).code(Site::EnqueueReactions),
                ErrorCode::Backend,
                "{message}"
            );
            assert_eq!(
                facts("XX000", message, None).code(Site::UpsertRow(None)),
                ErrorCode::Backend,
                "{message}"
            );
        }
        let wrapped = [
            "new row for relation \"todos_102040\" violates check constraint \"todos_n_check_102040\"",
            "null value in column \"id\" of relation \"todos_102040\" violates not-null constraint",
            "conflicting key value violates exclusion constraint \"todos_excl_102040\"",
        ];
        for message in wrapped {
            assert_eq!(
                facts("XX000", message, None).code(Site::UpsertRow(Some(2))),
                ErrorCode::ConstraintViolation,
                "{message}"
            );
        }
    }

    #[test]
    fn the_fence_and_busy_states_are_unchanged() {
        let fence = facts("P0001", "sync.storage.writer_fence_rejected: v1 < v2", None);
        assert_eq!(
            fence.code(Site::UpsertRow(None)),
            ErrorCode::WriterFenceRejected
        );
        let guard = facts("P0001", crate::barrier_guards::GUARD_MESSAGE, None);
        assert_eq!(
            guard.code(Site::UpsertRow(None)),
            ErrorCode::BarrierWriteRefused
        );
        for state in ["40001", "40P01", "55P03", "57014"] {
            assert_eq!(facts(state, "x", None).code(Site::General), ErrorCode::Busy);
        }
        assert_eq!(
            facts("42P01", "x", None).code(Site::General),
            ErrorCode::Backend
        );
    }

    #[test]
    fn insufficient_resources_are_retryable_unavailable_with_their_cause() {
        for (state, cause) in [
            ("53100", BackendCause::DiskFull),
            ("53000", BackendCause::InsufficientResources),
            ("53200", BackendCause::InsufficientResources),
            ("53300", BackendCause::InsufficientResources),
            ("53400", BackendCause::InsufficientResources),
        ] {
            for site in [
                Site::General,
                Site::UpsertRow(Some(1)),
                Site::EnqueueReactions,
            ] {
                let code = facts(state, "x", None).code(site);
                assert_eq!(code, ErrorCode::Unavailable, "{state} at {site:?}");
                assert!(code.retryable(), "{state}");
            }
            assert_eq!(state_cause(state), Some(cause), "{state}");
        }
        for state in ["54000", "XX001", "42P01", "25006"] {
            let code = facts(state, "x", None).code(Site::General);
            assert_eq!(code, ErrorCode::Backend, "{state}");
            assert!(!code.retryable(), "{state}");
        }
    }

    #[test]
    fn only_a_digit_suffix_is_a_shard_suffix() {
        assert_eq!(
            base_name("sync_reactions_pkey_145977"),
            "sync_reactions_pkey"
        );
        assert_eq!(
            base_name("sync_row_scopes_by_row_106870"),
            "sync_row_scopes_by_row"
        );
        assert_eq!(base_name("sync_reactions_pkey"), "sync_reactions_pkey");
        assert_eq!(base_name("sync_reactions_pkey_"), "sync_reactions_pkey_");
        assert_eq!(
            base_name("sync_reactions_pkey_1a"),
            "sync_reactions_pkey_1a"
        );
        assert_eq!(base_name("_102046"), "_102046");
        assert_eq!(base_name("t_1"), "t");
    }
}
