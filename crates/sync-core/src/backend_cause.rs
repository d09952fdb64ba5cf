//! Why the database failed: the fixed vocabulary of `details.cause` on
//! `sync.storage.backend` (and on `sync.storage.connection_lost` and
//! `sync.storage.unavailable`), set by
//! the dialect crates from the driver error so that every user of the
//! library — not only the operator CLI — can tell a missing database from a
//! full disk without reading driver text.

use std::fmt;
use std::str::FromStr;

macro_rules! causes {
    ($( $(#[$doc:meta])* $variant:ident => $text:literal, )*) => {
        /// The cause of a backend error (`details.cause`). The string forms
        /// are stable; `Other` covers everything not classified.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum BackendCause {
            $( $(#[$doc])* $variant, )*
        }

        impl BackendCause {
            /// Every cause, in declaration order.
            pub const ALL: &'static [BackendCause] = &[ $( BackendCause::$variant, )* ];

            /// The stable string form (`details.cause`).
            pub fn as_str(self) -> &'static str {
                match self { $( BackendCause::$variant => $text, )* }
            }
        }

        impl FromStr for BackendCause {
            type Err = crate::UnknownErrorCode;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $( $text => Ok(BackendCause::$variant), )*
                    _ => Err(crate::UnknownErrorCode),
                }
            }
        }
    };
}

causes! {
    /// The server cannot be reached (refused, reset, closed, timed out).
    Unreachable => "unreachable",
    /// The server refused the credentials or the role may not log in.
    AuthFailed => "auth_failed",
    /// The named database does not exist.
    DatabaseMissing => "database_missing",
    /// The configured schema (`?schema=`, `search_path`) does not exist.
    SchemaMissing => "schema_missing",
    /// The directory of a database file does not exist.
    DirectoryMissing => "directory_missing",
    /// The database, its file or its directory is read-only.
    ReadOnly => "read_only",
    /// The disk (or a quota) is full.
    DiskFull => "disk_full",
    /// The database file or an index is corrupt, or the file is not a database.
    Corrupt => "corrupt",
    /// A value, row or index entry exceeds a limit of the database.
    TooLarge => "too_large",
    /// The database file was moved or unlinked under a live storage.
    Moved => "moved",
    /// The server lacks a resource other than disk (memory, connection
    /// slots, a configuration limit: Postgres SQLSTATE class 53).
    InsufficientResources => "insufficient_resources",
    /// Anything else; the driver error (attached as the source) tells more.
    Other => "other",
}

impl fmt::Display for BackendCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vocabulary_is_fixed_and_round_trips() {
        let texts: Vec<&str> = BackendCause::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            texts,
            [
                "unreachable",
                "auth_failed",
                "database_missing",
                "schema_missing",
                "directory_missing",
                "read_only",
                "disk_full",
                "corrupt",
                "too_large",
                "moved",
                "insufficient_resources",
                "other"
            ]
        );
        for cause in BackendCause::ALL {
            assert_eq!(cause.as_str().parse::<BackendCause>(), Ok(*cause));
        }
        assert!("nope".parse::<BackendCause>().is_err());
    }

    #[test]
    fn display_is_the_stable_string_form() {
        for cause in BackendCause::ALL {
            assert_eq!(cause.to_string(), cause.as_str());
        }
        assert_eq!(
            format!("cause {}", BackendCause::DiskFull),
            "cause disk_full"
        );
    }
}
