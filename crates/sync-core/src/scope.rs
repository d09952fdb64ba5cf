//! Scopes: stored scope maps, scope filters and the matching rule
//! (`storage-contract.md` §2.1, §7.1).

use std::collections::BTreeMap;

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
    !filter.is_empty()
        && filter.iter().all(|(variable, allowed)| {
            stored
                .get(variable)
                .is_some_and(|value| allowed.iter().any(|a| a == value))
        })
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
