//! `FilterMatcher::matches_text` over any scope map written in the
//! canonical form answers what parsing it and `FilterMatcher::matches`
//! answer, for any filter (listed and hashed value lists, several
//! variables, escapes in keys and values).

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use sync_core::{parse_canonical_scopes, FilterMatcher, ScopeFilter, StoredScopes};

/// Short texts over an alphabet with characters JSON escapes.
fn text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[ab\"\\\\\u{e9}\u{1}/]{0,3}").expect("a valid pattern")
}

fn scopes() -> impl Strategy<Value = StoredScopes> {
    btree_map(text(), text(), 0..5)
}

fn filters() -> impl Strategy<Value = ScopeFilter> {
    // Up to 12 values, so that some lists are hashed (more than 8).
    btree_map(text(), vec(text(), 0..12), 0..4)
}

proptest! {
    #[test]
    fn the_text_answers_as_the_parsed_map(stored in scopes(), filter in filters()) {
        let text = serde_json::to_string(&stored).expect("a map of strings serializes");
        let matcher = FilterMatcher::new(&filter);
        prop_assert_eq!(parse_canonical_scopes(&text), Some(stored.clone()));
        prop_assert_eq!(matcher.matches_text(&text), Some(matcher.matches(&stored)));
    }
}
