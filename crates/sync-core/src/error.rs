//! The one error type of the storage layer and its stable codes
//! (`storage-contract.md` §3).
//!
//! Every error carries an [`ErrorCode`] whose string form (`sync.storage.busy`,
//! `schema.invalid_identifier`, …) is stable and machine-readable. The
//! message of every `sync.*` code is a fixed sentence that never contains
//! identifiers, values or SQL; those travel in the structured
//! [`Error::details`] map. `schema.*` errors are developer-facing and carry a
//! templated message naming the offending identifiers.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::backend_cause::BackendCause;

/// The details key of a [`BackendCause`].
pub const CAUSE_DETAIL: &str = "cause";

/// Result alias used by every library crate of the workspace.
pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $variant:ident => ($code:literal, $retryable:literal, $message:literal), )*) => {
        /// Stable error codes. `as_str()` returns the code string, `FromStr` parses it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant, )*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[ $( ErrorCode::$variant, )* ];

            /// The stable string form of the code.
            pub fn as_str(self) -> &'static str {
                match self { $( ErrorCode::$variant => $code, )* }
            }

            /// Whether an operation failing with this code may succeed when retried unchanged.
            pub fn retryable(self) -> bool {
                match self { $( ErrorCode::$variant => $retryable, )* }
            }

            /// The fixed sentence of this code. `schema.*` errors usually carry a
            /// more specific templated message instead (see [`Error::message`]).
            pub fn default_message(self) -> &'static str {
                match self { $( ErrorCode::$variant => $message, )* }
            }
        }

        impl FromStr for ErrorCode {
            type Err = UnknownErrorCode;
            fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
                match s {
                    $( $code => Ok(ErrorCode::$variant), )*
                    _ => Err(UnknownErrorCode),
                }
            }
        }
    };
}

error_codes! {
    /// `sync.storage.unknown_table`
    UnknownTable => ("sync.storage.unknown_table", false, "table is not part of the ensured schema"),
    /// `sync.storage.schema_not_ensured`
    SchemaNotEnsured => ("sync.storage.schema_not_ensured", false, "ensure_schema must complete before this operation"),
    /// `sync.storage.invalid_partition`
    InvalidPartition => ("sync.storage.invalid_partition", false, "partition must be a non-empty string"),
    /// `sync.storage.invalid_row_id`
    InvalidRowId => ("sync.storage.invalid_row_id", false, "row id must be a non-empty string"),
    /// `sync.storage.invalid_argument`
    InvalidArgument => ("sync.storage.invalid_argument", false, "argument is outside its allowed range"),
    /// `sync.storage.invalid_limit`
    InvalidLimit => ("sync.storage.invalid_limit", false, "lookup requires a limit between 1 and 1000"),
    /// `sync.storage.invalid_change`
    InvalidChange => ("sync.storage.invalid_change", false, "change fields do not match its operation"),
    /// `sync.storage.scan_requires_scope`
    ScanRequiresScope => ("sync.storage.scan_requires_scope", false, "a scope scan requires at least one scope variable"),
    /// `sync.storage.index_not_found`
    IndexNotFound => ("sync.storage.index_not_found", false, "lookup requires a declared index"),
    /// `sync.storage.index_not_materialized`
    IndexNotMaterialized => ("sync.storage.index_not_materialized", false, "lookup requires a materialized table"),
    /// `sync.storage.index_value_count_mismatch`
    IndexValueCountMismatch => ("sync.storage.index_value_count_mismatch", false, "lookup requires one exact value per index column"),
    /// `sync.storage.index_value_type_mismatch`
    IndexValueTypeMismatch => ("sync.storage.index_value_type_mismatch", false, "lookup value does not match its column type"),
    /// `sync.storage.invalid_log_epoch`
    InvalidLogEpoch => ("sync.storage.invalid_log_epoch", false, "log epoch must be a non-empty string"),
    /// `sync.storage.invalid_prune_cursor`
    InvalidPruneCursor => ("sync.storage.invalid_prune_cursor", false, "pruning requires a non-negative safe-integer cursor and a non-empty epoch"),
    /// `sync.storage.prune_epoch_mismatch`
    PruneEpochMismatch => ("sync.storage.prune_epoch_mismatch", false, "the partition's log epoch changed; recompute retention inputs"),
    /// `sync.storage.partition_unregistered`
    PartitionUnregistered => ("sync.storage.partition_unregistered", false, "pruning requires a registered partition"),
    /// `sync.storage.schema_newer_than_code`
    SchemaNewerThanCode => ("sync.storage.schema_newer_than_code", false, "the database schema is newer than the running code"),
    /// `sync.storage.stored_layout_mismatch`
    StoredLayoutMismatch => ("sync.storage.stored_layout_mismatch", false, "stored schema layouts disagree with the configured schema at the same version"),
    /// `sync.storage.physical_layout_mismatch`
    PhysicalLayoutMismatch => ("sync.storage.physical_layout_mismatch", false, "a synced table does not match the storage layout the running code reads and writes"),
    /// `sync.storage.layouts_corrupt`
    LayoutsCorrupt => ("sync.storage.layouts_corrupt", false, "stored schema layouts are unreadable"),
    /// `sync.storage.migration_refused`
    MigrationRefused => ("sync.storage.migration_refused", false, "only appending nullable columns is supported"),
    /// `sync.storage.checkpoint_incomplete`
    CheckpointIncomplete => ("sync.storage.checkpoint_incomplete", false, "a declared checkpoint is not activated and this caller did not declare it"),
    /// `sync.storage.checkpoint_declaration_invalid`
    CheckpointDeclarationInvalid => ("sync.storage.checkpoint_declaration_invalid", false, "checkpoint declaration does not match the schema version it is installed at"),
    /// `sync.storage.checkpoint_not_declared`
    CheckpointNotDeclared => ("sync.storage.checkpoint_not_declared", false, "the checkpoint is not declared or already activated"),
    /// `sync.storage.checkpoint_version_mismatch`
    CheckpointVersionMismatch => ("sync.storage.checkpoint_version_mismatch", false, "the checkpoint belongs to a different schema version"),
    /// `sync.storage.checkpoint_fence_missing`
    CheckpointFenceMissing => ("sync.storage.checkpoint_fence_missing", false, "activation requires the writer fence raised at declaration"),
    /// `sync.storage.checkpoint_watermark_invalid`
    CheckpointWatermarkInvalid => ("sync.storage.checkpoint_watermark_invalid", false, "the watermark is negative, behind the stored watermark, or ahead of the log"),
    /// `sync.storage.checkpoint_unfinished` — a bump would leave a checkpoint
    /// of an older version unfinished (finish or refuse).
    CheckpointUnfinished => ("sync.storage.checkpoint_unfinished", false, "a checkpoint of an older schema version is not activated: finish it first, or state how the bump resolves it"),
    /// `sync.storage.not_a_sync_database` — a read-only open found none of the storage tables.
    NotASyncDatabase => ("sync.storage.not_a_sync_database", false, "not a syncstore database (yet): the storage tables are absent"),
    /// `sync.storage.not_distributable` — `distribute` refused: not
    /// Postgres, no Citus extension, a distributed schema (schema-based
    /// sharding), or rows in a table to distribute (`details.reason`:
    /// `not_postgres`, `citus_missing`, `distributed_schema`, `not_empty`
    /// with `details.table`).
    NotDistributable => ("sync.storage.not_distributable", false, "the database cannot be distributed by partition: it is not a Citus coordinator, is sharded by schema, or already holds data"),
    /// `sync.storage.writer_fence_rejected`
    WriterFenceRejected => ("sync.storage.writer_fence_rejected", false, "the writer version is below the partition's writer fence"),
    /// `sync.storage.constraint_violation`
    ConstraintViolation => ("sync.storage.constraint_violation", false, "application row violates a relational constraint"),
    /// `sync.storage.duplicate_reaction`
    DuplicateReaction => ("sync.storage.duplicate_reaction", false, "a reaction with this idempotency key already exists"),
    /// `sync.storage.transaction_aborted`
    TransactionAborted => ("sync.storage.transaction_aborted", false, "the transaction failed earlier and can only be rolled back"),
    /// `sync.storage.push_lock_required`
    PushLockRequired => ("sync.storage.push_lock_required", false, "push rejection requires its apply savepoint"),
    /// `sync.storage.query_rejected`
    QueryRejected => ("sync.storage.query_rejected", false, "registered query does not match its metadata"),
    /// `sync.storage.capability_unsupported`
    CapabilityUnsupported => ("sync.storage.capability_unsupported", false, "this storage does not support the operation"),
    /// `sync.storage.segment_too_large`: a segment above the store's
    /// largest segment (`details.max_bytes`, `details.byte_length`).
    SegmentTooLarge => ("sync.storage.segment_too_large", false, "segment bytes exceed the largest segment the store accepts"),
    /// `sync.storage.busy` — retryable.
    Busy => ("sync.storage.busy", true, "the database is busy; retry later"),
    /// `sync.storage.connection_lost` — retryable: the connection to the
    /// database was lost before anything of the operation could persist
    /// (`details.cause`, a [`BackendCause`](crate::BackendCause), says why
    /// when known). Retrying the same operation is safe.
    ConnectionLost => ("sync.storage.connection_lost", true, "the connection to the database was lost; nothing was changed"),
    /// `sync.storage.outcome_unknown` — retryable, but only with the same
    /// idempotency key: the connection was lost while committing (or during
    /// a statement after which the outcome cannot be known), so the change
    /// may or may not have persisted. A push retried under the same client
    /// id and client commit id returns the first writer's stored push
    /// result, which tells what happened.
    OutcomeUnknown => ("sync.storage.outcome_unknown", true, "the connection was lost while committing; retry only with the same idempotency key"),
    /// `sync.storage.group_commit_failed` — retryable: the transaction
    /// ended well but the `COMMIT` it shared with other transactions (SQLite
    /// group commit) failed, or the shared transaction was lost while a later
    /// member ran, so nothing of the whole group persisted. The outcome is
    /// known — not committed — unlike `outcome_unknown`; `details.failed_code`
    /// names the error of the failed statement and `details.cause` its cause
    /// when known.
    GroupCommitFailed => ("sync.storage.group_commit_failed", true, "the commit this transaction shared with others failed; nothing of it persisted"),
    /// `sync.storage.backend`
    Backend => ("sync.storage.backend", false, "the database reported an unexpected error"),

    /// `sync.idempotency_cache_miss`
    IdempotencyCacheMiss => ("sync.idempotency_cache_miss", true, "persisted push result unreadable"),
    /// `sync.schema_not_ready`
    SchemaNotReady => ("sync.schema_not_ready", true, "server schema is not ready for this request"),
    /// `sync.codec.decode_failed`
    CodecDecodeFailed => ("sync.codec.decode_failed", false, "row payload does not decode under the table's columns"),
    /// `sync.codec.encode_failed`
    CodecEncodeFailed => ("sync.codec.encode_failed", false, "row values do not encode under the table's columns"),

    /// `schema.malformed_input`
    SchemaMalformedInput => ("schema.malformed_input", false, "schema input is malformed"),
    /// `schema.invalid_version`
    SchemaInvalidVersion => ("schema.invalid_version", false, "schema version must be an integer between 1 and 2147483647"),
    /// `schema.invalid_identifier`
    SchemaInvalidIdentifier => ("schema.invalid_identifier", false, "schema identifier is invalid"),
    /// `schema.duplicate_table`
    SchemaDuplicateTable => ("schema.duplicate_table", false, "duplicate table"),
    /// `schema.too_many_columns`
    SchemaTooManyColumns => ("schema.too_many_columns", false, "at most 1000 columns are supported"),
    /// `schema.duplicate_column`
    SchemaDuplicateColumn => ("schema.duplicate_column", false, "duplicate column"),
    /// `schema.unsupported_column_type`
    SchemaUnsupportedColumnType => ("schema.unsupported_column_type", false, "column has an unsupported type"),
    /// `schema.invalid_crdt_column`
    SchemaInvalidCrdtColumn => ("schema.invalid_crdt_column", false, "crdt column is invalid"),
    /// `schema.invalid_encrypted_column`
    SchemaInvalidEncryptedColumn => ("schema.invalid_encrypted_column", false, "encrypted column is invalid"),
    /// `schema.duplicate_index`
    SchemaDuplicateIndex => ("schema.duplicate_index", false, "duplicate index"),
    /// `schema.invalid_index`
    SchemaInvalidIndex => ("schema.invalid_index", false, "index is invalid"),
    /// `schema.invalid_primary_key`
    SchemaInvalidPrimaryKey => ("schema.invalid_primary_key", false, "primary key is invalid"),
    /// `schema.missing_scope`
    SchemaMissingScope => ("schema.missing_scope", false, "every synced table declares at least one scope pattern"),
    /// `schema.invalid_scope_pattern`
    SchemaInvalidScopePattern => ("schema.invalid_scope_pattern", false, "scope pattern is invalid"),
    /// `schema.invalid_scope_column`
    SchemaInvalidScopeColumn => ("schema.invalid_scope_column", false, "scope column is invalid"),
    /// `schema.scope_variable_conflict`
    SchemaScopeVariableConflict => ("schema.scope_variable_conflict", false, "scope variable maps to two different columns"),
}

impl ErrorCode {
    /// True for the developer-facing `schema.*` codes, whose messages name identifiers.
    pub fn is_schema_compile(self) -> bool {
        self.as_str().starts_with("schema.")
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Returned by `ErrorCode::from_str` for a string that is no known code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown error code")]
pub struct UnknownErrorCode;

type BoxedSource = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A coded error: the code, structured details, an optional operation index
/// (constraint violations) and the driver error that caused it, if any.
///
/// `Display` renders `code: message` and never the details or the source.
#[derive(thiserror::Error)]
#[error("{}: {}", code.as_str(), self.message())]
pub struct Error {
    code: ErrorCode,
    details: BTreeMap<String, String>,
    op_index: Option<u32>,
    message: Option<String>,
    #[source]
    source: Option<BoxedSource>,
}

impl Error {
    /// An error with the code's fixed message and no details.
    pub fn new(code: ErrorCode) -> Self {
        Self {
            code,
            details: BTreeMap::new(),
            op_index: None,
            message: None,
            source: None,
        }
    }

    /// A `schema.*` error with a templated, developer-facing message.
    pub fn with_message(code: ErrorCode, message: impl Into<String>) -> Self {
        let mut error = Self::new(code);
        error.message = Some(message.into());
        error
    }

    /// Adds one structured detail (builder style).
    pub fn detail(mut self, key: &str, value: impl ToString) -> Self {
        self.details.insert(key.to_owned(), value.to_string());
        self
    }

    /// Attaches the underlying cause (kept out of `Display` and client output).
    pub fn source_error(mut self, source: impl Into<BoxedSource>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Sets the operation index (constraint violations).
    pub fn op_index(mut self, op_index: Option<u32>) -> Self {
        self.op_index = op_index;
        self
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message: the code's fixed sentence, or the templated `schema.*` message.
    pub fn message(&self) -> &str {
        self.message
            .as_deref()
            .unwrap_or_else(|| self.code.default_message())
    }

    /// Structured details (identifiers, values, reasons).
    pub fn details(&self) -> &BTreeMap<String, String> {
        &self.details
    }

    /// One detail by key.
    pub fn get_detail(&self, key: &str) -> Option<&str> {
        self.details.get(key).map(String::as_str)
    }

    /// The operation index of a constraint violation.
    pub fn op_index_value(&self) -> Option<u32> {
        self.op_index
    }

    /// Whether retrying the same operation may succeed.
    pub fn retryable(&self) -> bool {
        self.code.retryable()
    }

    /// Whether this error has the given code.
    pub fn is(&self, code: ErrorCode) -> bool {
        self.code == code
    }

    /// Shorthand for `sync.storage.unknown_table` naming the table in details.
    pub fn unknown_table(table: &str) -> Self {
        Self::new(ErrorCode::UnknownTable).detail("table", table)
    }

    /// Shorthand for `sync.storage.invalid_argument`.
    pub fn invalid_argument(argument: &str, reason: &str) -> Self {
        Self::new(ErrorCode::InvalidArgument)
            .detail("argument", argument)
            .detail("reason", reason)
    }

    /// Shorthand for `sync.storage.backend` wrapping a cause.
    pub fn backend(source: impl Into<BoxedSource>) -> Self {
        Self::new(ErrorCode::Backend).source_error(source)
    }

    /// Shorthand for `sync.storage.backend` with `details.cause` set,
    /// wrapping the driver error.
    pub fn backend_with_cause(cause: BackendCause, source: impl Into<BoxedSource>) -> Self {
        Self::backend(source).with_cause(cause)
    }

    /// The same error under another code, keeping its details and driver
    /// error (a dialect re-coding `connection_lost` as `outcome_unknown`
    /// where the statement may have committed).
    pub fn with_code(mut self, code: ErrorCode) -> Self {
        self.code = code;
        self
    }

    /// Sets `details.cause` (builder style).
    pub fn with_cause(self, cause: BackendCause) -> Self {
        self.detail(CAUSE_DETAIL, cause.as_str())
    }

    /// `details.cause`, parsed; `None` when absent or not in the vocabulary.
    pub fn cause(&self) -> Option<BackendCause> {
        self.get_detail(CAUSE_DETAIL)?.parse().ok()
    }

    /// The first line of the driver error's text, when a driver error is
    /// attached: what operator tools print for `cause = other`. Never part
    /// of `Display` (it may name identifiers or values).
    pub fn source_first_line(&self) -> Option<String> {
        let text = self.source.as_ref()?.to_string();
        let line = text.lines().next().unwrap_or_default().trim();
        (!line.is_empty()).then(|| line.to_owned())
    }

    /// Shorthand for `sync.storage.busy` wrapping a cause.
    pub fn busy(source: impl Into<BoxedSource>) -> Self {
        Self::new(ErrorCode::Busy).source_error(source)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Error");
        s.field("code", &self.code.as_str())
            .field("message", &self.message())
            .field("details", &self.details);
        if let Some(op) = self.op_index {
            s.field("op_index", &op);
        }
        if let Some(source) = &self.source {
            s.field("source", &source.to_string());
        }
        s.finish()
    }
}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Self {
        Error::new(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_string() {
        for code in ErrorCode::ALL {
            assert_eq!(code.as_str().parse::<ErrorCode>(), Ok(*code));
        }
        assert!("sync.storage.nope".parse::<ErrorCode>().is_err());
    }

    #[test]
    fn only_busy_connection_loss_group_failure_cache_miss_and_not_ready_are_retryable() {
        let retryable: Vec<_> = ErrorCode::ALL.iter().filter(|c| c.retryable()).collect();
        assert_eq!(
            retryable,
            [
                &ErrorCode::Busy,
                &ErrorCode::ConnectionLost,
                &ErrorCode::OutcomeUnknown,
                &ErrorCode::GroupCommitFailed,
                &ErrorCode::IdempotencyCacheMiss,
                &ErrorCode::SchemaNotReady
            ]
        );
    }

    #[test]
    fn display_shows_code_and_fixed_message_without_details() {
        let error = Error::unknown_table("secret_table");
        let text = error.to_string();
        assert_eq!(
            text,
            "sync.storage.unknown_table: table is not part of the ensured schema"
        );
        assert!(!text.contains("secret_table"));
        assert_eq!(error.get_detail("table"), Some("secret_table"));
    }

    #[test]
    fn cause_round_trips_through_details_and_first_line_is_trimmed() {
        let error = Error::backend_with_cause(
            BackendCause::DatabaseMissing,
            "FATAL 3D000: database \"nope\" does not exist\nHINT: more",
        );
        assert_eq!(error.get_detail("cause"), Some("database_missing"));
        assert_eq!(error.cause(), Some(BackendCause::DatabaseMissing));
        assert_eq!(
            error.source_first_line().as_deref(),
            Some("FATAL 3D000: database \"nope\" does not exist")
        );
        assert!(!error.to_string().contains("nope"));
        assert_eq!(Error::new(ErrorCode::Backend).source_first_line(), None);
    }

    #[test]
    fn only_the_developer_facing_schema_codes_are_schema_compile_errors() {
        assert!(ErrorCode::SchemaInvalidIndex.is_schema_compile());
        assert!(ErrorCode::SchemaScopeVariableConflict.is_schema_compile());
        assert!(!ErrorCode::Busy.is_schema_compile());
        assert!(!ErrorCode::UnknownTable.is_schema_compile());
        for code in ErrorCode::ALL {
            assert_eq!(
                code.is_schema_compile(),
                !code.as_str().starts_with("sync."),
                "{code}"
            );
        }
    }

    #[test]
    fn is_compares_the_code() {
        let error = Error::busy("database is locked");
        assert!(error.is(ErrorCode::Busy));
        assert!(!error.is(ErrorCode::Backend));
        assert!(!Error::new(ErrorCode::Backend).is(ErrorCode::Busy));
    }

    #[test]
    fn debug_shows_code_message_details_operation_and_driver_error() {
        let error = Error::new(ErrorCode::ConstraintViolation)
            .detail("table", "tasks")
            .op_index(Some(3))
            .source_error("duplicate key value");
        let text = format!("{error:?}");
        for part in [
            "Error {",
            "code: \"sync.storage.constraint_violation\"",
            &format!("message: {:?}", error.message()),
            "details: {\"table\": \"tasks\"}",
            "op_index: 3",
            "source: \"duplicate key value\"",
        ] {
            assert!(text.contains(part), "{part:?} missing from {text}");
        }
        let plain = format!("{:?}", Error::new(ErrorCode::Busy));
        assert!(
            !plain.contains("op_index") && !plain.contains("source"),
            "{plain}"
        );
    }

    #[test]
    fn storage_messages_are_fixed_and_distinct() {
        let mut seen = std::collections::BTreeSet::new();
        for code in ErrorCode::ALL {
            assert!(!code.default_message().is_empty());
            assert!(
                seen.insert(code.default_message()),
                "{code} shares a message"
            );
        }
    }
}
