//! Reading control request bodies: every missing or mistyped member is
//! `sync.cli.control_invalid_request` naming the member (`details.field`)
//! and what is wrong with it (`details.reason`).

use serde_json::{Map, Value};

use crate::error::{CliCode, CliError, CliResult};

/// `sync.cli.control_invalid_request` for `field`.
pub(crate) fn invalid(field: &str, reason: &str) -> CliError {
    CliError::new(CliCode::ControlInvalidRequest)
        .detail("field", field)
        .detail("reason", reason)
}

/// `value` as an object whose members are all in `known`.
pub(crate) fn object<'v>(
    value: &'v Value,
    field: &str,
    known: &[&str],
) -> CliResult<&'v Map<String, Value>> {
    let object = value
        .as_object()
        .ok_or_else(|| invalid(field, "not_an_object"))?;
    if let Some(unknown) = object.keys().find(|k| !known.contains(&k.as_str())) {
        let path = if field.is_empty() {
            unknown.clone()
        } else {
            format!("{field}.{unknown}")
        };
        return Err(invalid(&path, "unknown_member"));
    }
    Ok(object)
}

fn path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// A required non-empty string member.
pub(crate) fn text(object: &Map<String, Value>, parent: &str, key: &str) -> CliResult<String> {
    match object.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(invalid(&path(parent, key), "empty")),
        Some(_) => Err(invalid(&path(parent, key), "not_a_string")),
        None => Err(invalid(&path(parent, key), "missing")),
    }
}

/// An optional integer member within `min..=max`.
pub(crate) fn integer(
    object: &Map<String, Value>,
    parent: &str,
    key: &str,
    min: i64,
    max: i64,
) -> CliResult<Option<i64>> {
    match object.get(key) {
        None => Ok(None),
        Some(value) => match value.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            Some(_) => Err(invalid(&path(parent, key), "out_of_range")),
            None => Err(invalid(&path(parent, key), "not_an_integer")),
        },
    }
}

/// A required integer member within `min..=max`.
pub(crate) fn required_integer(
    object: &Map<String, Value>,
    parent: &str,
    key: &str,
    min: i64,
    max: i64,
) -> CliResult<i64> {
    integer(object, parent, key, min, max)?.ok_or_else(|| invalid(&path(parent, key), "missing"))
}

/// A required boolean member.
pub(crate) fn boolean(object: &Map<String, Value>, parent: &str, key: &str) -> CliResult<bool> {
    match object.get(key) {
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(&path(parent, key), "not_a_boolean")),
        None => Err(invalid(&path(parent, key), "missing")),
    }
}

/// A required member of any JSON type.
pub(crate) fn member<'v>(
    object: &'v Map<String, Value>,
    parent: &str,
    key: &str,
) -> CliResult<&'v Value> {
    object
        .get(key)
        .ok_or_else(|| invalid(&path(parent, key), "missing"))
}

/// A driver row value (`null`, a string, a number, a boolean or
/// `{"$bytes": "<hex>"}`), as given.
pub(crate) fn row_value(value: &Value, field: &str) -> CliResult<Value> {
    match value {
        Value::Null | Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(value.clone()),
        Value::Object(map) => match (map.len(), map.get("$bytes")) {
            (1, Some(Value::String(hex_text))) if hex::decode(hex_text).is_ok() => {
                Ok(value.clone())
            }
            _ => Err(invalid(field, "not_a_row_value")),
        },
        Value::Array(_) => Err(invalid(field, "not_a_row_value")),
    }
}
