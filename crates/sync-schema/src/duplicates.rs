//! Duplicate member names in schema input JSON. `serde_json::Value` keeps
//! the last of two equal keys silently; this pass walks the text once with a
//! path-tracking visitor and reports the first repeated member's JSON
//! pointer (RFC 6901), so the parser can refuse it.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// `Err(pointer)` when some object repeats a member name; `Ok` otherwise
/// (including text that is not JSON at all: the strict parser reports that).
pub(crate) fn reject_duplicate_members(text: &str) -> Result<(), String> {
    let found = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let walked = Walk {
        pointer: String::new(),
        found: &found,
    }
    .deserialize(&mut deserializer);
    match (walked, found.into_inner()) {
        (Err(_), Some(pointer)) => Err(pointer),
        _ => Ok(()),
    }
}

struct Walk<'a> {
    pointer: String,
    found: &'a RefCell<Option<String>>,
}

impl Walk<'_> {
    fn child(&self, member: &str) -> String {
        format!(
            "{}/{}",
            self.pointer,
            member.replace('~', "~0").replace('/', "~1")
        )
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let pointer = self.child(&key);
            if !seen.insert(key) {
                *self.found.borrow_mut() = Some(pointer);
                return Err(de::Error::custom("duplicate member"));
            }
            map.next_value_seed(Walk {
                pointer,
                found: self.found,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        while seq
            .next_element_seed(Walk {
                pointer: format!("{}/{index}", self.pointer),
                found: self.found,
            })?
            .is_some()
        {
            index += 1;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pointer_names_the_element_and_member_that_repeat() {
        let text = r#"{"tables": [{"name": "a"}, {"x": 1}, {"name": "b", "name": "c"}]}"#;
        assert_eq!(
            reject_duplicate_members(text),
            Err("/tables/2/name".to_owned())
        );
        let text = r#"{"a/b": {"~k": 1, "~k": 2}}"#;
        assert_eq!(reject_duplicate_members(text), Err("/a~1b/~0k".to_owned()));
        assert_eq!(reject_duplicate_members(r#"[{"a": 1}, {"a": 2}]"#), Ok(()));
        assert_eq!(reject_duplicate_members("not json"), Ok(()));
    }
}
