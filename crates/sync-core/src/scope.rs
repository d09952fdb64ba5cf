//! Scopes: stored scope maps, scope filters and the matching rule
//! (`storage-contract.md` §2.1, §7.1).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

/// Variable → allowed values. An item matches when, for **every** variable,
/// its stored value exists and is one of the listed values.
pub type ScopeFilter = BTreeMap<String, Vec<String>>;

/// Variable → value, as stored with a row or change (without pattern prefixes).
pub type StoredScopes = BTreeMap<String, String>;

/// The candidate variable of a filter: its first key in byte order.
pub fn candidate_variable(filter: &ScopeFilter) -> Option<&str> {
    filter.keys().next().map(String::as_str)
}

/// Reads stored scopes in the form every dialect writes them: one flat
/// JSON object whose values are all strings (`{"project_id":"p1"}`).
///
/// `None` for any other text — not JSON, not an object, a value that is
/// not a string, or a document encoded once more as a JSON string — so a
/// dialect can fall back to its own, more forgiving reading of rows other
/// writers stored. This is the hot path of every scan: it builds the map
/// straight from the text, without an intermediate JSON tree.
pub fn parse_canonical_scopes(text: &str) -> Option<StoredScopes> {
    serde_json::from_str(text).ok()
}

/// Whether `stored` satisfies every variable of `filter`.
///
/// An empty filter matches nothing: scan contexts reject or short-circuit
/// before calling this.
pub fn matches_filter(stored: &StoredScopes, filter: &ScopeFilter) -> bool {
    FilterMatcher::new(filter).matches(stored)
}

/// A variable's allowed values up to this many are compared one by one;
/// more are looked up in a hash set.
const LISTED_VALUES: usize = 8;

/// A scope filter prepared for matching many stored maps ([`matches_filter`]
/// is one match through it): a scan or a commit window verifies every candidate
/// against the whole filter, and a filter naming a hundred lists would
/// otherwise compare each row's value with up to a hundred strings.
///
/// ```
/// use sync_core::{FilterMatcher, ScopeFilter, StoredScopes};
///
/// let lists: Vec<String> = (0..100).map(|n| format!("list-{n}")).collect();
/// let filter: ScopeFilter = [("list_id".to_owned(), lists)].into();
/// let matcher = FilterMatcher::new(&filter);
/// let row: StoredScopes = [("list_id".to_owned(), "list-42".to_owned())].into();
/// assert!(matcher.matches(&row));
/// ```
#[derive(Debug)]
pub struct FilterMatcher<'f> {
    variables: Vec<(&'f str, Allowed<'f>)>,
}

/// The allowed values of one variable.
#[derive(Debug)]
enum Allowed<'f> {
    /// Few: compared one by one.
    Listed(&'f [String]),
    /// Many: hashed.
    Hashed(HashSet<&'f str>),
}

impl Allowed<'_> {
    fn contains(&self, value: &str) -> bool {
        match self {
            Allowed::Listed(values) => values.iter().any(|a| a == value),
            Allowed::Hashed(values) => values.contains(value),
        }
    }
}

impl<'f> FilterMatcher<'f> {
    /// Prepares `filter`; a variable with more than a few values hashes them.
    pub fn new(filter: &'f ScopeFilter) -> Self {
        let variables = filter
            .iter()
            .map(|(variable, values)| {
                let allowed = if values.len() > LISTED_VALUES {
                    Allowed::Hashed(values.iter().map(String::as_str).collect())
                } else {
                    Allowed::Listed(values)
                };
                (variable.as_str(), allowed)
            })
            .collect();
        Self { variables }
    }

    /// Whether `stored` satisfies every variable of the filter: its value
    /// exists and is one of the allowed ones. An empty filter matches
    /// nothing.
    pub fn matches(&self, stored: &StoredScopes) -> bool {
        !self.variables.is_empty()
            && self.variables.iter().all(|(variable, allowed)| {
                stored
                    .get(*variable)
                    .is_some_and(|value| allowed.contains(value))
            })
    }

    /// [`Self::matches`] read straight from a stored map's text, without
    /// building the map: `Some` with the answer [`Self::matches`] gives for
    /// [`parse_canonical_scopes`]`(text)` when `text` is that canonical form,
    /// `None` for any other text (and, to stay exact, for a canonical map
    /// naming one of the filter's variables twice, or a filter of more than
    /// 64 variables), which the caller then parses its own way. Keys and
    /// values without escapes are compared where they lie in `text`.
    ///
    /// ```
    /// use sync_core::{FilterMatcher, ScopeFilter};
    ///
    /// let filter: ScopeFilter = [("list_id".to_owned(), vec!["l1".to_owned()])].into();
    /// let matcher = FilterMatcher::new(&filter);
    /// assert_eq!(matcher.matches_text(r#"{"list_id":"l1","org":"o"}"#), Some(true));
    /// assert_eq!(matcher.matches_text(r#"{"list_id":"l2"}"#), Some(false));
    /// assert_eq!(matcher.matches_text(r#"{"list_id":1}"#), None);
    /// ```
    pub fn matches_text(&self, text: &str) -> Option<bool> {
        if self.variables.len() > 64 {
            return None;
        }
        let mut reader = serde_json::Deserializer::from_str(text);
        let matched = MatchSeed { matcher: self }.deserialize(&mut reader).ok()?;
        reader.end().ok()?;
        let every = u64::MAX >> (64 - self.variables.len().max(1));
        Some(!self.variables.is_empty() && matched == every)
    }
}

/// A JSON string, borrowed from the text unless it holds escapes.
struct Text<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// Reads one canonical scope map, answering a bit per filter variable
/// (in the matcher's order) whose value is allowed; fails on anything not
/// canonical and on a filter variable named twice.
struct MatchSeed<'m, 'f> {
    matcher: &'m FilterMatcher<'f>,
}

impl<'de> DeserializeSeed<'de> for MatchSeed<'_, '_> {
    type Value = u64;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<u64, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MatchSeed<'_, '_> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a flat object of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<u64, A::Error> {
        let (mut seen, mut matched) = (0u64, 0u64);
        while let Some((key, value)) = map.next_entry::<Text<'de>, Text<'de>>()? {
            let Some(index) = self
                .matcher
                .variables
                .iter()
                .position(|(variable, _)| *variable == key.0)
            else {
                continue;
            };
            let bit = 1u64 << index;
            if seen & bit != 0 {
                return Err(serde::de::Error::custom("a filter variable named twice"));
            }
            seen |= bit;
            if self.matcher.variables[index].1.contains(&value.0) {
                matched |= bit;
            }
        }
        Ok(matched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(pairs: &[(&str, &[&str])]) -> ScopeFilter {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn canonical_scopes_are_a_flat_object_of_strings() {
        let parsed = parse_canonical_scopes(r#"{"b":"2","a":"1"}"#);
        let expected: StoredScopes = [("a".into(), "1".into()), ("b".into(), "2".into())].into();
        assert_eq!(parsed, Some(expected));
        assert_eq!(parse_canonical_scopes(" {} "), Some(StoredScopes::new()));
        assert_eq!(
            parse_canonical_scopes(r#"{"a":"\u00e9\"q"}"#),
            Some([("a".into(), "\u{e9}\"q".into())].into())
        );
        for other in [
            r#"{"a":1}"#,
            r#"{"a":null}"#,
            r#"{"a":true}"#,
            r#"{"a":["1"]}"#,
            r#"{"a":{"b":"1"}}"#,
            r#""{\"a\":\"1\"}""#,
            r#"["a"]"#,
            r#"{"a":"1"} x"#,
            "not json",
            "",
        ] {
            assert_eq!(parse_canonical_scopes(other), None, "{other}");
        }
    }

    #[test]
    fn listed_and_hashed_values_match_alike() {
        let many: Vec<String> = (0..40).map(|n| format!("v{n}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let row = |pairs: &[(&str, &str)]| -> StoredScopes {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let cases = [
            (filter(&[]), row(&[("a", "1")]), false),
            (filter(&[("a", &[])]), row(&[("a", "1")]), false),
            (filter(&[("a", &["1"])]), row(&[("a", "1")]), true),
            (filter(&[("a", &["1"])]), row(&[("b", "1")]), false),
            (filter(&[("a", &many)]), row(&[("a", "v39")]), true),
            (filter(&[("a", &many)]), row(&[("a", "v40")]), false),
            (filter(&[("a", &many)]), row(&[("b", "v3")]), false),
            (
                filter(&[("a", &many), ("b", &["2", "3"])]),
                row(&[("a", "v3"), ("b", "2")]),
                true,
            ),
            (
                filter(&[("a", &many), ("b", &["2", "3"])]),
                row(&[("a", "v3"), ("b", "4")]),
                false,
            ),
            (
                filter(&[("a", &many), ("b", &many)]),
                row(&[("a", "v3"), ("b", "1")]),
                false,
            ),
        ];
        for (f, stored, expected) in &cases {
            let matcher = FilterMatcher::new(f);
            assert_eq!(matcher.matches(stored), *expected, "{f:?} {stored:?}");
            assert_eq!(matches_filter(stored, f), *expected, "{f:?} {stored:?}");
        }
    }

    #[test]
    fn a_stored_map_is_matched_from_its_text() {
        let many: Vec<String> = (0..40).map(|n| format!("v{n}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let one = filter(&[("a", &["1"])]);
        let two = filter(&[("a", &many), ("b", &["2", "3"])]);
        let cases: [(&ScopeFilter, &str, Option<bool>); 16] = [
            (&one, r#"{"a":"1"}"#, Some(true)),
            (&one, r#" { "b" : "x" , "a" : "1" } "#, Some(true)),
            (&one, r#"{"a":"2"}"#, Some(false)),
            (&one, r#"{"b":"1"}"#, Some(false)),
            (&one, "{}", Some(false)),
            (&one, r#"{"\u0061":"\u0031"}"#, Some(true)),
            (&two, r#"{"a":"v39","b":"3"}"#, Some(true)),
            (&two, r#"{"b":"3","a":"v40"}"#, Some(false)),
            (&two, r#"{"a":"v3"}"#, Some(false)),
            (&ScopeFilter::new(), r#"{"a":"1"}"#, Some(false)),
            // Not the canonical form: the caller reads these its own way.
            (&one, r#"{"a":1}"#, None),
            (&one, r#"{"b":null,"a":"1"}"#, None),
            (&one, r#""{\"a\":\"1\"}""#, None),
            (&one, r#"{"a":"1"} x"#, None),
            (&one, "not json", None),
            // A filter variable named twice: the last value would win.
            (&one, r#"{"a":"2","a":"1"}"#, None),
        ];
        for (f, text, expected) in cases {
            let matcher = FilterMatcher::new(f);
            assert_eq!(matcher.matches_text(text), expected, "{f:?} {text}");
            // Wherever it answers, the answer is the parsed map's.
            if let (Some(answer), Some(parsed)) =
                (matcher.matches_text(text), parse_canonical_scopes(text))
            {
                assert_eq!(answer, matcher.matches(&parsed), "{f:?} {text}");
            }
        }
        // A key that is not a filter variable may repeat.
        let text = r#"{"b":"x","b":"y","a":"1"}"#;
        assert_eq!(FilterMatcher::new(&one).matches_text(text), Some(true));
    }

    #[test]
    fn candidate_is_first_key_in_byte_order() {
        let f = filter(&[("project_id", &["p"]), ("org_id", &["o"])]);
        assert_eq!(candidate_variable(&f), Some("org_id"));
        assert_eq!(candidate_variable(&ScopeFilter::new()), None);
    }

    #[test]
    fn matching_is_and_across_variables_or_within_one() {
        let stored: StoredScopes = [("a".into(), "1".into()), ("b".into(), "2".into())].into();
        assert!(matches_filter(&stored, &filter(&[("a", &["0", "1"])])));
        assert!(matches_filter(
            &stored,
            &filter(&[("a", &["1"]), ("b", &["2"])])
        ));
        assert!(!matches_filter(
            &stored,
            &filter(&[("a", &["1"]), ("b", &["3"])])
        ));
        assert!(!matches_filter(&stored, &filter(&[("c", &["1"])])));
        assert!(!matches_filter(&stored, &ScopeFilter::new()));
    }
}
