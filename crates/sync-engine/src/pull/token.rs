//! The bootstrap resume token (`engine.md` §5.4).

use serde_json::{Map, Value};

/// A usable resume token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResumeToken {
    /// The pin.
    pub(crate) as_of: i64,
    /// The next page starts after this row id.
    pub(crate) row_cursor: Option<String>,
}

/// Parses a token; `None` unless it is usable for `table` with the
/// current `max_seq`.
pub(crate) fn parse(text: &str, table: &str, max_seq: i64) -> Option<ResumeToken> {
    let value: Value = serde_json::from_str(text).ok()?;
    let obj = value.as_object()?;
    let as_of = obj.get("asOfCommitSeq")?.as_i64()?;
    if !(0..=max_seq).contains(&as_of) {
        return None;
    }
    let tables = obj.get("tables")?.as_array()?;
    if tables.len() != 1 || tables[0].as_str() != Some(table) {
        return None;
    }
    if obj.get("tableIndex")?.as_i64()? != 0 {
        return None;
    }
    let row_cursor = match obj.get("rowCursor")? {
        Value::Null => None,
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => return None,
    };
    Some(ResumeToken { as_of, row_cursor })
}

/// Renders the token of an incomplete bootstrap, members in this order,
/// without whitespace.
/// `rowCursor` is null for a bootstrap that ended before its first page
/// (the round's byte budget): the resume starts at the first row.
pub(crate) fn render(pin: i64, table: &str, row_cursor: Option<&str>) -> String {
    let mut out = Map::new();
    out.insert("asOfCommitSeq".into(), pin.into());
    out.insert("tables".into(), Value::Array(vec![table.into()]));
    out.insert("tableIndex".into(), 0.into());
    out.insert(
        "rowCursor".into(),
        row_cursor.map_or(Value::Null, Value::from),
    );
    Value::Object(out).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendering_is_exact_and_parses_back() {
        let text = render(100, "tasks", Some("t-0999"));
        assert_eq!(
            text,
            r#"{"asOfCommitSeq":100,"tables":["tasks"],"tableIndex":0,"rowCursor":"t-0999"}"#
        );
        assert_eq!(
            parse(&text, "tasks", 100),
            Some(ResumeToken {
                as_of: 100,
                row_cursor: Some("t-0999".into())
            })
        );
        let before_first_page = render(7, "tasks", None);
        assert_eq!(
            before_first_page,
            r#"{"asOfCommitSeq":7,"tables":["tasks"],"tableIndex":0,"rowCursor":null}"#
        );
        assert_eq!(
            parse(&before_first_page, "tasks", 7),
            Some(ResumeToken {
                as_of: 7,
                row_cursor: None
            })
        );
    }

    #[test]
    fn unusable_tokens_are_refused() {
        let ok = r#"{"asOfCommitSeq":4,"tables":["tasks"],"tableIndex":0,"rowCursor":null}"#;
        assert!(parse(ok, "tasks", 10).is_some());
        for bad in [
            "x",
            "[]",
            r#"{"asOfCommitSeq":11,"tables":["tasks"],"tableIndex":0,"rowCursor":null}"#,
            r#"{"asOfCommitSeq":-1,"tables":["tasks"],"tableIndex":0,"rowCursor":null}"#,
            r#"{"asOfCommitSeq":4,"tables":["projects","tasks"],"tableIndex":0,"rowCursor":null}"#,
            r#"{"asOfCommitSeq":4,"tables":["docs"],"tableIndex":0,"rowCursor":null}"#,
            r#"{"asOfCommitSeq":4,"tables":["tasks"],"tableIndex":1,"rowCursor":null}"#,
            r#"{"asOfCommitSeq":4,"tables":["tasks"],"tableIndex":0,"rowCursor":""}"#,
            r#"{"asOfCommitSeq":4,"tables":["tasks"],"tableIndex":0}"#,
            r#"{"asOfCommitSeq":4.5,"tables":["tasks"],"tableIndex":0,"rowCursor":null}"#,
        ] {
            assert_eq!(parse(bad, "tasks", 10), None, "{bad}");
        }
    }
}
