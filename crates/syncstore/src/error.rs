//! The error every command returns: a stable code, a fixed message and
//! structured details.
//!
//! Storage and schema errors keep the code of the library that raised them
//! (`sync.storage.*`, `schema.*`, …). Failures that belong to the command
//! line itself use the `sync.cli.*` codes of [`CliCode`], listed in
//! `docs/operations.md`.

use std::collections::BTreeMap;
use std::fmt;

/// The codes of failures that no library code describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliCode {
    /// The `--db` URL is neither `sqlite:PATH` nor `postgres://…`.
    InvalidUrl,
    /// The database could not be opened or reached.
    Unreachable,
    /// The schema file could not be read.
    SchemaFile,
    /// The partition has no registry entry, no commits and no checkpoints.
    UnknownPartition,
    /// The schema file's version is not the database's schema version.
    SchemaMismatch,
    /// The backfill projector options do not fit the schema.
    InvalidProjector,
    /// The backfill ended without activating its checkpoint.
    BackfillIncomplete,
    /// The demo needs a fresh database.
    DatabaseNotEmpty,
    /// A demo step did not behave as described.
    DemoFailed,
    /// A local file operation (temporary directory, output) failed.
    Io,
    /// After `migrate`, a requested declaration does not exist.
    DeclarationMissing,
    /// The database does not enforce the writer fence: its fence trigger
    /// is missing, disabled or runs something else (`details.cause`).
    FenceNotEnforced,
    /// `backfill --name` names a checkpoint the partition has not declared,
    /// and `--declare-new` was not given.
    CheckpointUndeclared,
    /// After `migrate`, a `--carry` or `--abandon` is not what the database
    /// holds: another process resolved the checkpoint the other way.
    ResolutionNotApplied,
    /// A bump would retire (drop) a table holding rows that `--retire` did
    /// not name.
    RetireRefused,
    /// A bump changes how existing rows are identified: their stored row id
    /// or scopes no longer follow the schema's primary key or scope patterns.
    RowIdentityChanged,
    /// The `sync` request or one of its lines is longer than its limit.
    RequestTooLarge,
    /// The `serve --tokens` file could not be read or is malformed.
    TokensFile,
    /// `serve --test-control` was asked to listen on a non-loopback address.
    ControlNotLoopback,
    /// A test control request is malformed (`details.reason`, `details.field`).
    ControlInvalidRequest,
    /// A test control request names no open instance.
    ControlUnknownInstance,
    /// The test control server already holds `--max-instances` instances.
    ControlInstanceLimit,
    /// A test control restore was asked before any backup was captured.
    ControlNoBackup,
    /// A test control request asks for a feature this server does not serve.
    ControlUnsupported,
}

impl CliCode {
    /// Every CLI code, in documentation order.
    pub const ALL: [Self; 24] = [
        Self::InvalidUrl,
        Self::Unreachable,
        Self::SchemaFile,
        Self::UnknownPartition,
        Self::SchemaMismatch,
        Self::InvalidProjector,
        Self::BackfillIncomplete,
        Self::DatabaseNotEmpty,
        Self::DemoFailed,
        Self::Io,
        Self::DeclarationMissing,
        Self::FenceNotEnforced,
        Self::CheckpointUndeclared,
        Self::ResolutionNotApplied,
        Self::RetireRefused,
        Self::RowIdentityChanged,
        Self::RequestTooLarge,
        Self::TokensFile,
        Self::ControlNotLoopback,
        Self::ControlInvalidRequest,
        Self::ControlUnknownInstance,
        Self::ControlInstanceLimit,
        Self::ControlNoBackup,
        Self::ControlUnsupported,
    ];

    /// The stable code string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidUrl => "sync.cli.invalid_url",
            Self::Unreachable => "sync.cli.unreachable",
            Self::SchemaFile => "sync.cli.schema_file",
            Self::UnknownPartition => "sync.cli.unknown_partition",
            Self::SchemaMismatch => "sync.cli.schema_mismatch",
            Self::InvalidProjector => "sync.cli.invalid_projector",
            Self::BackfillIncomplete => "sync.cli.backfill_incomplete",
            Self::DatabaseNotEmpty => "sync.cli.database_not_empty",
            Self::DemoFailed => "sync.cli.demo_failed",
            Self::Io => "sync.cli.io",
            Self::DeclarationMissing => "sync.cli.declaration_missing",
            Self::FenceNotEnforced => "sync.cli.fence_not_enforced",
            Self::CheckpointUndeclared => "sync.cli.checkpoint_undeclared",
            Self::ResolutionNotApplied => "sync.cli.resolution_not_applied",
            Self::RetireRefused => "sync.cli.retire_refused",
            Self::RowIdentityChanged => "sync.cli.row_identity_changed",
            Self::RequestTooLarge => "sync.cli.request_too_large",
            Self::TokensFile => "sync.cli.tokens_file",
            Self::ControlNotLoopback => "sync.cli.control_not_loopback",
            Self::ControlInvalidRequest => "sync.cli.control_invalid_request",
            Self::ControlUnknownInstance => "sync.cli.control_unknown_instance",
            Self::ControlInstanceLimit => "sync.cli.control_instance_limit",
            Self::ControlNoBackup => "sync.cli.control_no_backup",
            Self::ControlUnsupported => "sync.cli.control_unsupported",
        }
    }

    /// The fixed message of the code.
    pub fn message(self) -> &'static str {
        match self {
            Self::InvalidUrl => "the database URL must be sqlite:PATH, postgres://… or mariadb://…",
            Self::Unreachable => "the database could not be opened or reached",
            Self::SchemaFile => "the schema file could not be read",
            Self::UnknownPartition => {
                "the partition has no registry entry, no commits and no checkpoints"
            }
            Self::SchemaMismatch => {
                "the schema file's version is not the database's schema version"
            }
            Self::InvalidProjector => "the projector options do not fit the schema",
            Self::BackfillIncomplete => "the backfill ended without activating its checkpoint",
            Self::DatabaseNotEmpty => "the demo needs a fresh database",
            Self::DemoFailed => "a demo step did not behave as described",
            Self::Io => "a local file operation failed",
            Self::DeclarationMissing => {
                "a requested checkpoint declaration does not exist after the migration"
            }
            Self::FenceNotEnforced => "the database does not enforce the writer fence",
            Self::CheckpointUndeclared => {
                "the partition has not declared this checkpoint; pass --declare-new to declare it"
            }
            Self::ResolutionNotApplied => {
                "the checkpoint was not resolved as requested; the stored resolution differs"
            }
            Self::RetireRefused => {
                "the migration would drop a table holding rows that --retire does not name"
            }
            Self::RowIdentityChanged => {
                "the primary key or scope patterns of a table holding rows changed"
            }
            Self::RequestTooLarge => "the request or one of its lines exceeds its size limit",
            Self::TokensFile => "the tokens file could not be read",
            Self::ControlNotLoopback => "--test-control listens only on a loopback address",
            Self::ControlInvalidRequest => "the test control request is malformed",
            Self::ControlUnknownInstance => "no open test instance has this id",
            Self::ControlInstanceLimit => "the test control server holds its maximum of instances",
            Self::ControlNoBackup => "no backup was captured on this test instance",
            Self::ControlUnsupported => "the test control request asks for a feature not served",
        }
    }
}

/// A coded failure of a command: rendered as `error: <code>: <message>` on
/// stderr, or as `{"error": {...}}` on stdout with `--json`; exit status 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    code: String,
    message: String,
    details: BTreeMap<String, String>,
    chain: Vec<String>,
}

impl CliError {
    /// A CLI-level error with its fixed message and no details.
    pub fn new(code: CliCode) -> Self {
        Self {
            code: code.as_str().to_owned(),
            message: code.message().to_owned(),
            details: BTreeMap::new(),
            chain: Vec::new(),
        }
    }

    /// Records the driver error chain of `error` (every `source()`, outermost
    /// first) for `-v` logs.
    pub fn with_chain(mut self, error: &(dyn std::error::Error + 'static)) -> Self {
        self.chain = error_chain(error);
        self
    }

    /// The driver error chain, outermost first (empty for CLI errors).
    pub fn chain(&self) -> &[String] {
        &self.chain
    }

    /// Adds one detail (builder style).
    pub fn detail(mut self, key: &str, value: impl ToString) -> Self {
        self.details.insert(key.to_owned(), value.to_string());
        self
    }

    /// The stable code.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The fixed message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Structured details.
    pub fn details(&self) -> &BTreeMap<String, String> {
        &self.details
    }
}

impl From<sync_core::Error> for CliError {
    /// Keeps the code, message and details. When the details classify the
    /// cause as `other` (`sync.storage.backend`), the driver's first line is
    /// added as `details.driver`; the whole chain is kept for `-v` logs.
    fn from(error: sync_core::Error) -> Self {
        let chain = error_chain(&error);
        let mut details = error.details().clone();
        if details.get("cause").map(String::as_str) == Some("other") {
            if let Some(line) = chain
                .get(1)
                .and_then(|driver| driver.lines().next())
                .filter(|line| !line.is_empty())
            {
                details.insert("driver".to_owned(), line.to_owned());
            }
        }
        Self {
            code: error.code().as_str().to_owned(),
            message: error.message().to_owned(),
            details,
            chain,
        }
    }
}

/// `error` and its `source()` chain as text, outermost first.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut chain = vec![error.to_string()];
    let mut current = error;
    while let Some(next) = current.source() {
        chain.push(next.to_string());
        current = next;
    }
    chain
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for CliError {}

/// Result of every command.
pub type CliResult<T> = Result<T, CliError>;

/// The innermost cause of an error, as text (for `details.reason` of
/// connection failures, which an operator needs to see).
pub fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_codes_are_namespaced_and_distinct() {
        let mut seen = std::collections::BTreeSet::new();
        for code in CliCode::ALL {
            assert!(code.as_str().starts_with("sync.cli."));
            assert!(seen.insert(code.as_str()));
            assert!(!code.message().is_empty());
        }
    }

    #[derive(Debug)]
    struct Driver;

    impl fmt::Display for Driver {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("relation \"x\" does not exist\nLINE 1: select")
        }
    }

    impl std::error::Error for Driver {}

    #[test]
    fn a_cause_of_other_brings_the_driver_first_line() {
        let error = CliError::from(sync_core::Error::backend(Driver).detail("cause", "other"));
        assert_eq!(
            error.details().get("driver").map(String::as_str),
            Some("relation \"x\" does not exist")
        );
        assert_eq!(error.chain().len(), 2);
        let classified =
            CliError::from(sync_core::Error::backend(Driver).detail("cause", "unreachable"));
        assert_eq!(classified.details().get("driver"), None);
        assert_eq!(
            classified.details().get("cause").map(String::as_str),
            Some("unreachable")
        );
    }

    #[test]
    fn storage_errors_keep_their_code_and_details() {
        let error = CliError::from(sync_core::Error::unknown_table("nope"));
        assert_eq!(error.code(), "sync.storage.unknown_table");
        assert_eq!(
            error.details().get("table").map(String::as_str),
            Some("nope")
        );
        assert_eq!(
            error.to_string(),
            "sync.storage.unknown_table: table is not part of the ensured schema"
        );
    }
}
