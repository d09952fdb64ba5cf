//! Value types shared by frames and segments: host-opaque JSON kept as raw
//! text, and maps kept in canonical (UTF-16 code-unit) key order.

use std::cmp::Ordering;
use std::fmt;

/// Compares two strings by their UTF-16 code units, the order the protocol's
/// maps use (and JavaScript string comparison yields).
///
/// This differs from Rust's `str` order (UTF-8 bytes) exactly when one
/// string has a character in U+E000–U+FFFF where the other has a
/// supplementary-plane character: `"\u{FFFF}" < "\u{10000}"` by bytes, but
/// the surrogate `0xD800` sorts before `0xFFFF` in UTF-16.
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// A JSON document kept as the exact text it arrived as.
///
/// Host-opaque values (`params`, `bootstrapState`, `details`, json columns)
/// are checked to parse as JSON and otherwise carried verbatim: re-encoding
/// emits the same bytes, never a re-serialization.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawJson(String);

/// The text given to [`RawJson::new`] is not a JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidJson;

impl fmt::Display for InvalidJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the text is not a JSON document")
    }
}

impl std::error::Error for InvalidJson {}

impl RawJson {
    /// Checks that `text` is one JSON document (RFC 8259: any value,
    /// scalars included, any nesting depth, numbers of any magnitude) and
    /// keeps it unchanged.
    pub fn new(text: impl Into<String>) -> Result<Self, InvalidJson> {
        let text = text.into();
        if crate::json_syntax::is_json_document(&text) {
            Ok(Self(text))
        } else {
            Err(InvalidJson)
        }
    }

    /// Serializes `value` compactly and keeps that text.
    pub fn from_value(value: &serde_json::Value) -> Self {
        Self(value.to_string())
    }

    /// The raw text, exactly as received or given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The parsed document, as `serde_json` represents it. A valid
    /// document `serde_json` cannot hold (nesting deeper than 128 levels, a
    /// number beyond the `f64` range, a `\u` escape of a lone surrogate)
    /// comes back as a JSON string of the raw text.
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(&self.0).unwrap_or_else(|_| serde_json::Value::String(self.0.clone()))
    }

    /// Gives back the raw text.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// A map with string keys kept in ascending UTF-16 code-unit order with no
/// duplicate, the one canonical order of the wire's `map` primitive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CanonicalMap<V> {
    entries: Vec<(String, V)>,
}

/// Two entries given to [`CanonicalMap::from_entries`] have the same key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey(pub String);

impl fmt::Display for DuplicateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map key is given twice")
    }
}

impl std::error::Error for DuplicateKey {}

impl<V> Default for CanonicalMap<V> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<V> CanonicalMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a map from entries in any order; refuses a repeated key.
    pub fn from_entries(
        entries: impl IntoIterator<Item = (String, V)>,
    ) -> Result<Self, DuplicateKey> {
        let mut entries: Vec<(String, V)> = entries.into_iter().collect();
        entries.sort_by(|a, b| cmp_utf16(&a.0, &b.0));
        for pair in entries.windows(2) {
            if pair[0].0 == pair[1].0 {
                return Err(DuplicateKey(pair[0].0.clone()));
            }
        }
        Ok(Self { entries })
    }

    /// Entries already checked to be in strictly ascending order.
    pub(crate) fn from_sorted(entries: Vec<(String, V)>) -> Self {
        Self { entries }
    }

    /// Inserts or replaces the value of `key`; returns the replaced value.
    pub fn insert(&mut self, key: impl Into<String>, value: V) -> Option<V> {
        let key = key.into();
        match self.entries.binary_search_by(|(k, _)| cmp_utf16(k, &key)) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// The value of `key`, if any.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.entries
            .binary_search_by(|(k, _)| cmp_utf16(k, key))
            .ok()
            .map(|i| &self.entries[i].1)
    }

    /// The entries in canonical order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &V)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in canonical order.
    pub fn into_entries(self) -> Vec<(String, V)> {
        self.entries
    }
}

/// Requested or effective scopes: scope key → list of values (§3.2).
pub type ScopeMap = CanonicalMap<Vec<String>>;

/// The stored scopes of a change: scope key → one value (§3.1).
pub type StoredScopes = CanonicalMap<String>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_order_differs_from_utf8_above_u_e000() {
        let bmp_high = "\u{FFFD}";
        let astral = "\u{1F600}";
        // UTF-8 bytes: EF BF BD < F0 9F 98 80, so Rust orders the BMP key first.
        assert_eq!(bmp_high.cmp(astral), Ordering::Less);
        // UTF-16: 0xFFFD > 0xD83D, so the supplementary-plane key comes first.
        assert_eq!(cmp_utf16(bmp_high, astral), Ordering::Greater);
        let map = CanonicalMap::from_entries([(bmp_high.to_string(), 1), (astral.to_string(), 2)])
            .unwrap();
        let keys: Vec<&str> = map.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, [astral, bmp_high]);
    }

    #[test]
    fn duplicate_keys_are_refused_when_building() {
        let err = CanonicalMap::from_entries([("a".to_string(), 1), ("a".to_string(), 2)]);
        assert_eq!(err, Err(DuplicateKey("a".into())));
    }

    #[test]
    fn insert_keeps_utf16_order() {
        let mut map = CanonicalMap::new();
        map.insert("\u{E000}", 1);
        map.insert("\u{10000}", 2);
        map.insert("a", 3);
        assert_eq!(map.insert("a", 4), Some(3));
        let keys: Vec<&str> = map.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["a", "\u{10000}", "\u{E000}"]);
        assert_eq!(map.get("\u{10000}"), Some(&2));
    }

    #[test]
    fn raw_json_keeps_the_text_and_accepts_scalars() {
        let raw = RawJson::new("{ \"b\":1,\"a\" : [ ] }").unwrap();
        assert_eq!(raw.as_str(), "{ \"b\":1,\"a\" : [ ] }");
        assert!(RawJson::new("7").is_ok());
        assert!(RawJson::new("null").is_ok());
        assert_eq!(RawJson::new("{"), Err(InvalidJson));
        assert_eq!(RawJson::new(""), Err(InvalidJson));
    }
}
