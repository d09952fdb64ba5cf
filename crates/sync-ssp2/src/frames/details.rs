//! The bounded details object of `PUSH_RESULT_DETAILS` (§6.3.1).

use serde_json::Value;

const MAX_BYTES: usize = 4096;

/// `[a-z][a-z0-9]*([._-][a-z0-9]+)*`, at most `max` characters.
fn is_token(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > max || !b[0].is_ascii_lowercase() {
        return false;
    }
    let mut after_separator = false;
    for &c in &b[1..] {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            after_separator = false;
        } else if matches!(c, b'.' | b'_' | b'-') && !after_separator {
            after_separator = true;
        } else {
            return false;
        }
    }
    !after_separator
}

/// `identifier(.identifier)*` with identifiers `[A-Za-z_][A-Za-z0-9_]*`.
fn is_field_path(s: &str) -> bool {
    s.len() <= 160
        && s.split('.').all(|part| {
            let mut chars = part.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

fn check_field_paths(v: &Value) -> Result<(), &'static str> {
    let list = v
        .as_array()
        .ok_or("detailsJson.fieldPaths must be an array")?;
    if list.is_empty() || list.len() > 32 {
        return Err("detailsJson.fieldPaths must hold 1 to 32 paths");
    }
    for (i, item) in list.iter().enumerate() {
        let path = item
            .as_str()
            .ok_or("detailsJson.fieldPaths entries must be strings")?;
        if !is_field_path(path) {
            return Err("detailsJson.fieldPaths has a malformed path");
        }
        if list[..i]
            .iter()
            .any(|earlier| earlier.as_str() == Some(path))
        {
            return Err("detailsJson.fieldPaths has a duplicate path");
        }
    }
    Ok(())
}

fn check_references(v: &Value) -> Result<(), &'static str> {
    let map = v
        .as_object()
        .ok_or("detailsJson.references must be an object")?;
    if map.is_empty() || map.len() > 16 {
        return Err("detailsJson.references must hold 1 to 16 entries");
    }
    for (key, value) in map {
        if !is_token(key, 64) {
            return Err("detailsJson.references has a malformed key");
        }
        let value = value
            .as_str()
            .ok_or("detailsJson.references values must be strings")?;
        if value.is_empty()
            || value.trim() != value
            || value.len() > 256
            || value.chars().any(char::is_control)
        {
            return Err("detailsJson.references has a malformed value");
        }
    }
    Ok(())
}

/// Checks one `detailsJson` text against the bounded shape: a compact JSON
/// object of at most 4,096 bytes with only the four known members, at least
/// one of them, each well-formed.
pub(crate) fn check_details_json(text: &str) -> Result<(), &'static str> {
    if text.len() > MAX_BYTES {
        return Err("detailsJson exceeds 4096 bytes");
    }
    let value: Value = serde_json::from_str(text).map_err(|_| "detailsJson is not JSON")?;
    // Compact and free of repeated members: the text is its own
    // serialization (a repeated member would be lost in the parse).
    if serde_json::to_string(&value).ok().as_deref() != Some(text) {
        return Err("detailsJson is not a normalized JSON object");
    }
    let map = value.as_object().ok_or("detailsJson must be an object")?;
    if map.is_empty() {
        return Err("detailsJson must carry at least one member");
    }
    for (key, member) in map {
        match key.as_str() {
            "fieldPaths" => check_field_paths(member)?,
            "reason" | "requiredAction" => {
                if !member.as_str().is_some_and(|s| is_token(s, 96)) {
                    return Err("detailsJson reason or requiredAction is not a token");
                }
            }
            "references" => check_references(member)?,
            _ => return Err("detailsJson has an unknown member"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_bounded_shape() {
        assert!(
            check_details_json(r#"{"fieldPaths":["title","meta.tags"],"reason":"too-long"}"#)
                .is_ok()
        );
        assert!(check_details_json(r#"{"references":{"ticket.id":"T-1"}}"#).is_ok());
    }

    #[test]
    fn refuses_what_the_shape_excludes() {
        for bad in [
            r#"{}"#,
            r#"{"other":1}"#,
            r#"{"reason":"Bad Token"}"#,
            r#"{"reason":"a","reason":"b"}"#,
            r#"{ "reason":"a"}"#,
            r#"{"fieldPaths":[]}"#,
            r#"{"fieldPaths":["a","a"]}"#,
            r#"{"fieldPaths":["1a"]}"#,
            r#"{"references":{"k":" padded"}}"#,
            r#"["reason"]"#,
        ] {
            assert!(check_details_json(bad).is_err(), "{bad}");
        }
    }
}
