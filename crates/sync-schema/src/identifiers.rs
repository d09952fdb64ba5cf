//! Identifier rules for table, column and index names
//! (`schema-and-migrations.md` §3.1).

use std::fmt;

use sync_core::{Error, ErrorCode, Result};

/// Maximum UTF-8 length of an identifier (the Postgres identifier limit).
pub const MAX_IDENTIFIER_BYTES: usize = 63;

/// Why an identifier is rejected, in rule order (the first failure wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdentifierFailure {
    /// Length 0.
    Empty,
    /// Contains U+0000–U+001F or U+007F.
    InvalidCharacter,
    /// Starts with `sync_` or `_sync` (ASCII case-insensitive).
    ReservedPrefix,
    /// Longer than 63 UTF-8 bytes.
    TooLong,
}

impl IdentifierFailure {
    /// The `details.failure` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::InvalidCharacter => "invalid-character",
            Self::ReservedPrefix => "reserved-prefix",
            Self::TooLong => "too-long",
        }
    }
}

impl fmt::Display for IdentifierFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// True when the ASCII-lowercased name starts with `sync_` or `_sync`, the
/// server storage namespace (so `_synchronize` is reserved too).
pub fn is_reserved_name(name: &str) -> bool {
    let head: String = name
        .bytes()
        .take(5)
        .map(|b| char::from(b.to_ascii_lowercase()))
        .collect();
    head == "sync_" || head == "_sync"
}

/// The first rule an identifier breaks, or `None` when it is valid.
pub fn identifier_failure(name: &str) -> Option<IdentifierFailure> {
    if name.is_empty() {
        Some(IdentifierFailure::Empty)
    } else if name.chars().any(|c| c <= '\u{1f}' || c == '\u{7f}') {
        Some(IdentifierFailure::InvalidCharacter)
    } else if is_reserved_name(name) {
        Some(IdentifierFailure::ReservedPrefix)
    } else if name.len() > MAX_IDENTIFIER_BYTES {
        Some(IdentifierFailure::TooLong)
    } else {
        None
    }
}

/// Validates one identifier; `kind` is `table`, `table <T>: column` or
/// `table <T>: index`.
///
/// Fails with `schema.invalid_identifier` and the §3.1 message; `details`:
/// `kind`, `identifier`, `failure`, `byteLength`.
pub fn validate_identifier(kind: &str, name: &str) -> Result<()> {
    let Some(failure) = identifier_failure(name) else {
        return Ok(());
    };
    let message = match failure {
        IdentifierFailure::Empty => format!("{kind} name must not be empty"),
        IdentifierFailure::InvalidCharacter => {
            format!("{kind} name \"{name}\" contains a control character")
        }
        IdentifierFailure::ReservedPrefix => format!(
            "{kind} name \"{name}\" uses a reserved prefix (sync_/_sync are the server storage namespace)"
        ),
        IdentifierFailure::TooLong => format!(
            // tidy: dialect-name (the message text is fixed by the contract)
            "{kind} name \"{name}\" exceeds 63 bytes (Postgres identifier limit; actual UTF-8 length: {} bytes)", // tidy: dialect-name
            name.len()
        ),
    };
    Err(
        Error::with_message(ErrorCode::SchemaInvalidIdentifier, message)
            .detail("kind", kind)
            .detail("identifier", name)
            .detail("failure", failure)
            .detail("byteLength", name.len()),
    )
}

/// The key under which names are compared for duplicates (ASCII
/// case-insensitive, because SQLite folds `"Tasks"` and `"tasks"`).
pub(crate) fn fold(name: &str) -> String {
    name.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_apply_in_order() {
        assert_eq!(identifier_failure(""), Some(IdentifierFailure::Empty));
        assert_eq!(
            identifier_failure("sync_\u{0}"),
            Some(IdentifierFailure::InvalidCharacter)
        );
        assert_eq!(
            identifier_failure(&format!("sync_{}", "x".repeat(70))),
            Some(IdentifierFailure::ReservedPrefix)
        );
        assert_eq!(
            identifier_failure("_SYNChronize"),
            Some(IdentifierFailure::ReservedPrefix)
        );
        assert_eq!(identifier_failure("syn"), None);
        assert_eq!(
            identifier_failure("\u{7f}a"),
            Some(IdentifierFailure::InvalidCharacter)
        );
        assert_eq!(identifier_failure(&"i".repeat(63)), None);
        assert_eq!(
            identifier_failure(&"ü".repeat(32)),
            Some(IdentifierFailure::TooLong)
        );
        assert_eq!(identifier_failure("ü"), None);
    }

    #[test]
    fn error_carries_details() {
        let error = validate_identifier("table t: column", "").unwrap_err();
        assert_eq!(error.message(), "table t: column name must not be empty");
        assert_eq!(error.get_detail("failure"), Some("empty"));
        assert_eq!(error.get_detail("byteLength"), Some("0"));
        assert_eq!(error.get_detail("kind"), Some("table t: column"));
    }
}
