//! The dialect registry shape shared by the binaries: every binary keeps one
//! list of [`DialectEntry`] values (one line per dialect) and looks dialects
//! up by name or URL scheme here, so an unknown name or scheme is a
//! [`RegistryError`], never a fallback to some built-in dialect.

use std::fmt;

use crate::dialect::Dialect;

/// One registered dialect: its name, URL schemes, SQL rules, and what the
/// binary holding the list attaches to it (`H`: a harness constructor, a
/// storage opener, …).
#[derive(Clone, Copy)]
pub struct DialectEntry<H: 'static> {
    /// The SQL rules; the entry's name is [`SqlDialect::name`](crate::SqlDialect::name).
    pub sql: Dialect,
    /// URL schemes (without `:`) that select this dialect, e.g. `["file"]`.
    pub url_schemes: &'static [&'static str],
    /// What the binary attaches.
    pub hooks: H,
}

impl<H> DialectEntry<H> {
    /// The registry name.
    pub fn name(&self) -> &'static str {
        self.sql.as_str()
    }

    /// Whether `url` starts with one of the entry's schemes followed by `:`.
    pub fn matches_url(&self, url: &str) -> bool {
        url_scheme(url).is_some_and(|scheme| self.url_schemes.contains(&scheme))
    }
}

impl<H> fmt::Debug for DialectEntry<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DialectEntry")
            .field("name", &self.name())
            .field("url_schemes", &self.url_schemes)
            .finish_non_exhaustive()
    }
}

/// The scheme of `url`: the text before the first `:` when it is a URL
/// scheme (`[A-Za-z][A-Za-z0-9+.-]*`).
pub fn url_scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')))
    .then_some(scheme)
}

/// A lookup that found no dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryError {
    /// No registered dialect has this name.
    UnknownDialect {
        /// The name asked for.
        name: String,
        /// The registered names.
        known: Vec<&'static str>,
    },
    /// No registered dialect has this URL's scheme (or it has none).
    UnknownScheme {
        /// The scheme found, if any.
        scheme: Option<String>,
        /// The registered schemes.
        known: Vec<&'static str>,
    },
    /// Two entries claim the same name or scheme.
    Duplicate {
        /// The name or scheme.
        what: &'static str,
    },
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownDialect { name, known } => write!(
                f,
                "unknown dialect {name:?} (registered: {})",
                known.join(", ")
            ),
            Self::UnknownScheme { scheme, known } => match scheme {
                Some(scheme) => write!(
                    f,
                    "no dialect registered for URL scheme {scheme:?} (registered: {})",
                    known.join(", ")
                ),
                None => write!(
                    f,
                    "the URL has no scheme (registered: {})",
                    known.join(", ")
                ),
            },
            Self::Duplicate { what } => write!(f, "{what:?} is registered twice"),
        }
    }
}

impl std::error::Error for RegistryError {}

/// The entry named `name` (exact match).
pub fn find_dialect<'r, H>(
    entries: &'r [DialectEntry<H>],
    name: &str,
) -> Result<&'r DialectEntry<H>, RegistryError> {
    entries
        .iter()
        .find(|e| e.name() == name)
        .ok_or_else(|| RegistryError::UnknownDialect {
            name: name.to_owned(),
            known: entries.iter().map(DialectEntry::name).collect(),
        })
}

/// The entry whose scheme `url` uses.
pub fn find_dialect_for_url<'r, H>(
    entries: &'r [DialectEntry<H>],
    url: &str,
) -> Result<&'r DialectEntry<H>, RegistryError> {
    entries
        .iter()
        .find(|e| e.matches_url(url))
        .ok_or_else(|| RegistryError::UnknownScheme {
            scheme: url_scheme(url).map(str::to_owned),
            known: entries
                .iter()
                .flat_map(|e| e.url_schemes.iter().copied())
                .collect(),
        })
}

/// Fails when two entries share a name or a URL scheme (a binary's list is
/// checked by its own test).
pub fn check_registry<H>(entries: &[DialectEntry<H>]) -> Result<(), RegistryError> {
    for (i, entry) in entries.iter().enumerate() {
        for other in &entries[..i] {
            if other.name() == entry.name() {
                return Err(RegistryError::Duplicate { what: entry.name() });
            }
            if let Some(scheme) = entry
                .url_schemes
                .iter()
                .find(|s| other.url_schemes.contains(s))
            {
                return Err(RegistryError::Duplicate { what: scheme });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{InternalRole, SqlDialect};
    use sync_core::ColumnType;

    /// A test dialect named by its value.
    struct Named(&'static str);
    impl SqlDialect for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn sql_type(&self, _: ColumnType) -> &'static str {
            "T"
        }
        fn internal_type(&self, _: InternalRole) -> &'static str {
            "T"
        }
        fn placeholder(&self, _: usize) -> String {
            "?".to_owned()
        }
    }

    const ENTRIES: [DialectEntry<u8>; 1] = [DialectEntry {
        sql: Dialect::new(&A),
        url_schemes: &["a", "a+x"],
        hooks: 7,
    }];

    #[test]
    fn lookups_by_name_and_scheme() {
        assert_eq!(find_dialect(&ENTRIES, "a").map(|e| e.hooks), Ok(7));
        assert_eq!(
            find_dialect_for_url(&ENTRIES, "a+x://host/db").map(|e| e.hooks),
            Ok(7)
        );
        assert_eq!(
            find_dialect(&ENTRIES, "b").unwrap_err(),
            RegistryError::UnknownDialect {
                name: "b".to_owned(),
                known: vec!["a"]
            }
        );
        let error = find_dialect_for_url(&ENTRIES, "ab://x").unwrap_err();
        assert_eq!(
            error,
            RegistryError::UnknownScheme {
                scheme: Some("ab".to_owned()),
                known: vec!["a", "a+x"]
            }
        );
        assert!(find_dialect_for_url(&ENTRIES, "no scheme here").is_err());
    }

    #[test]
    fn a_url_scheme_is_a_letter_then_letters_digits_plus_dot_or_dash() {
        assert_eq!(url_scheme("store+tls.v-2://h/db"), Some("store+tls.v-2"));
        assert_eq!(url_scheme("embedded:relative.db"), Some("embedded"));
        // A digit first, or any other character, is no scheme.
        assert_eq!(url_scheme("2pg://h"), None);
        assert_eq!(url_scheme("p g://h"), None);
        assert_eq!(url_scheme(":x"), None);
        assert_eq!(url_scheme("/var/db.file"), None);
    }

    #[test]
    fn entries_and_errors_print_what_an_operator_needs() {
        let entry = format!("{:?}", ENTRIES[0]);
        assert!(
            entry.contains("\"a\"") && entry.contains("\"a+x\""),
            "{entry}"
        );
        let printed = |e: RegistryError| e.to_string();
        assert_eq!(
            printed(RegistryError::UnknownDialect {
                name: "b".into(),
                known: vec!["a", "c"]
            }),
            "unknown dialect \"b\" (registered: a, c)"
        );
        assert_eq!(
            printed(RegistryError::UnknownScheme {
                scheme: Some("ab".into()),
                known: vec!["a"]
            }),
            "no dialect registered for URL scheme \"ab\" (registered: a)"
        );
        assert_eq!(
            printed(RegistryError::UnknownScheme {
                scheme: None,
                known: vec!["a"]
            }),
            "the URL has no scheme (registered: a)"
        );
        assert_eq!(
            printed(RegistryError::Duplicate { what: "a" }),
            "\"a\" is registered twice"
        );
    }

    #[test]
    fn duplicates_are_refused() {
        assert_eq!(check_registry(&ENTRIES), Ok(()));
        let twice = [ENTRIES[0], ENTRIES[0]];
        assert_eq!(
            check_registry(&twice),
            Err(RegistryError::Duplicate { what: "a" })
        );
    }

    static A: Named = Named("a");
    static B: Named = Named("b");

    #[test]
    fn a_shared_name_or_a_shared_scheme_is_named() {
        let b = |url_schemes: &'static [&'static str]| DialectEntry {
            sql: Dialect::new(&B),
            url_schemes,
            hooks: 8,
        };
        let renamed_a = DialectEntry {
            url_schemes: &["other"],
            ..ENTRIES[0]
        };
        assert_eq!(check_registry(&[ENTRIES[0], b(&["b"])]), Ok(()));
        assert_eq!(
            check_registry(&[ENTRIES[0], renamed_a]),
            Err(RegistryError::Duplicate { what: "a" })
        );
        assert_eq!(
            check_registry(&[ENTRIES[0], b(&["b", "a+x"])]),
            Err(RegistryError::Duplicate { what: "a+x" })
        );
    }
}
