//! Typed member access for the JSON rendering, with one error type.

use std::fmt;

use serde_json::{Map, Value};

use crate::base64;

/// A frame of the JSON rendering that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonFrameError {
    /// 1-based line number of the frame (0 when parsing a single value).
    pub line: usize,
    /// What is wrong, naming the frame member.
    pub reason: String,
}

impl JsonFrameError {
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        Self {
            line: 0,
            reason: reason.into(),
        }
    }

    pub(crate) fn at_line(mut self, line: usize) -> Self {
        self.line = line;
        self
    }

    /// The request-level error a transport answers with
    /// (`sync.invalid_request`).
    pub fn to_wire_error(&self) -> crate::WireError {
        crate::WireError::invalid_request("malformed_frame")
    }
}

impl fmt::Display for JsonFrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: {}", self.line, self.reason)
        } else {
            f.write_str(&self.reason)
        }
    }
}

impl std::error::Error for JsonFrameError {}

pub(crate) type Obj = Map<String, Value>;

pub(crate) fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Obj, JsonFrameError> {
    value
        .as_object()
        .ok_or_else(|| JsonFrameError::new(format!("{what} must be a JSON object")))
}

pub(crate) fn string(obj: &Obj, key: &str) -> Result<String, JsonFrameError> {
    opt_string(obj, key)?.ok_or_else(|| missing(key))
}

pub(crate) fn opt_string(obj: &Obj, key: &str) -> Result<Option<String>, JsonFrameError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(wrong(key, "a string")),
    }
}

pub(crate) fn i64_of(obj: &Obj, key: &str) -> Result<i64, JsonFrameError> {
    opt_i64(obj, key)?.ok_or_else(|| missing(key))
}

pub(crate) fn opt_i64(obj: &Obj, key: &str) -> Result<Option<i64>, JsonFrameError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| wrong(key, "an integer")),
    }
}

pub(crate) fn i32_of(obj: &Obj, key: &str) -> Result<i32, JsonFrameError> {
    opt_i32(obj, key)?.ok_or_else(|| missing(key))
}

pub(crate) fn opt_i32(obj: &Obj, key: &str) -> Result<Option<i32>, JsonFrameError> {
    match opt_i64(obj, key)? {
        None => Ok(None),
        Some(v) => i32::try_from(v)
            .map(Some)
            .map_err(|_| wrong(key, "a 32-bit integer")),
    }
}

pub(crate) fn opt_bool(obj: &Obj, key: &str) -> Result<Option<bool>, JsonFrameError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong(key, "a boolean")),
    }
}

pub(crate) fn opt_bytes(obj: &Obj, key: &str) -> Result<Option<Vec<u8>>, JsonFrameError> {
    match opt_string(obj, key)? {
        None => Ok(None),
        Some(text) => base64::decode(&text)
            .map(Some)
            .ok_or_else(|| wrong(key, "base64 text")),
    }
}

pub(crate) fn array<'a>(obj: &'a Obj, key: &str) -> Result<&'a Vec<Value>, JsonFrameError> {
    match obj.get(key) {
        Some(Value::Array(items)) => Ok(items),
        None => Err(missing(key)),
        Some(_) => Err(wrong(key, "an array")),
    }
}

pub(crate) fn string_list(value: &Value, key: &str) -> Result<Vec<String>, JsonFrameError> {
    let items = value.as_array().ok_or_else(|| wrong(key, "an array"))?;
    items
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| wrong(key, "an array of strings"))
        })
        .collect()
}

/// A JSON member holding raw JSON text: an embedded value is rendered
/// compactly (member order preserved), a string is taken as the text.
pub(crate) fn opt_raw_json(obj: &Obj, key: &str) -> Result<Option<String>, JsonFrameError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Ok(Some(v.to_string())),
    }
}

/// Renders raw JSON text as an embedded value when it parses, else as a string.
pub(crate) fn raw_json_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

pub(crate) fn missing(key: &str) -> JsonFrameError {
    JsonFrameError::new(format!("member `{key}` is required"))
}

pub(crate) fn wrong(key: &str, expected: &str) -> JsonFrameError {
    JsonFrameError::new(format!("member `{key}` must be {expected}"))
}
