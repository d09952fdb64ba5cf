//! The scope digest (§3.5): SHA-256 over the canonical JSON of an
//! effective-scope map, as lowercase hex.

use serde_json::{Map, Value};

use crate::canonical_json::to_canonical_string;
use crate::sha256::sha256_hex;
use crate::values::{cmp_utf16, ScopeMap};

/// The canonical JSON of a scope map: keys sorted, each value list sorted
/// by UTF-16 code units with duplicates removed.
pub fn canonical_scopes_json(scopes: &ScopeMap) -> String {
    let mut map = Map::new();
    for (key, values) in scopes.iter() {
        let mut values: Vec<&String> = values.iter().collect();
        values.sort_by(|a, b| cmp_utf16(a, b));
        values.dedup();
        map.insert(
            key.to_owned(),
            Value::Array(
                values
                    .into_iter()
                    .map(|v| Value::String(v.clone()))
                    .collect(),
            ),
        );
    }
    to_canonical_string(&Value::Object(map))
}

/// The scope digest of `scopes`: 64 lowercase hex characters.
pub fn scope_digest(scopes: &ScopeMap) -> String {
    sha256_hex(canonical_scopes_json(scopes).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_sorted_and_deduplicated() {
        let scopes = ScopeMap::from_entries([
            (
                "team".to_string(),
                vec!["t2".into(), "t1".into(), "t2".into()],
            ),
            ("project".to_string(), vec!["p1".into()]),
        ])
        .unwrap();
        assert_eq!(
            canonical_scopes_json(&scopes),
            r#"{"project":["p1"],"team":["t1","t2"]}"#
        );
    }

    #[test]
    fn digest_of_the_golden_bootstrap_scopes() {
        // The effective scopes and scope digest of the
        // response/bootstrap-segments golden vector.
        let scopes = ScopeMap::from_entries([("project".to_string(), vec!["p1".into()])]).unwrap();
        assert_eq!(
            scope_digest(&scopes),
            "5a993aa4d503af6f5dc77acc12ad399ff2e9d933c393f4de6af5f6aef4fa2977"
        );
    }
}
