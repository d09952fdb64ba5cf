//! Value mapping between the domain and SQLite: row values bound to
//! projection columns (`schema-and-migrations.md` §3.3), registered-query
//! values, and the JSON text columns (`storage-contract.md` §9.2).

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::ToSql;
use serde_json::Value;
use sync_core::{ClientSubscription, Error, Result, RowValue, ScopeFilter, SqlValue, StoredScopes};

use crate::errors::corrupt;

/// Binds a [`RowValue`] as its SQLite projection value: text for
/// string/json/blob_ref, integer for integer and boolean (0/1), real for
/// float, blob for bytes/crdt. A NaN float (which SQLite would silently turn
/// into NULL, failing a `NOT NULL` projection) is bound as the text `NaN`;
/// lookups bind it the same way, so they still match.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BindRow<'a>(pub(crate) &'a RowValue);

impl ToSql for BindRow<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            RowValue::Null => ValueRef::Null,
            RowValue::String(s) | RowValue::Json(s) | RowValue::BlobRef(s) => {
                ValueRef::Text(s.as_bytes())
            }
            RowValue::Integer(i) => ValueRef::Integer(*i),
            RowValue::Float(f) if f.is_nan() => ValueRef::Text(b"NaN"),
            RowValue::Float(f) => ValueRef::Real(*f),
            RowValue::Boolean(b) => ValueRef::Integer(i64::from(*b)),
            RowValue::Bytes(b) | RowValue::Crdt(b) => ValueRef::Blob(b),
        }))
    }
}

/// Binds a registered-query parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BindSql<'a>(pub(crate) &'a SqlValue);

impl ToSql for BindSql<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            SqlValue::Null => ValueRef::Null,
            SqlValue::Integer(i) => ValueRef::Integer(*i),
            SqlValue::Float(f) => ValueRef::Real(*f),
            SqlValue::Text(s) => ValueRef::Text(s.as_bytes()),
            SqlValue::Bytes(b) => ValueRef::Blob(b),
            SqlValue::Bool(b) => ValueRef::Integer(i64::from(*b)),
        }))
    }
}

/// Reads a registered-query result cell (SQLite booleans are integers).
pub(crate) fn sql_value(value: ValueRef<'_>) -> SqlValue {
    match value {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(i) => SqlValue::Integer(i),
        ValueRef::Real(f) => SqlValue::Float(f),
        ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => SqlValue::Bytes(b.to_vec()),
    }
}

/// Stored scopes as the JSON object text of `_sync_scopes` /
/// `sync_changes.scopes` (keys in byte order).
pub(crate) fn scopes_json(scopes: &StoredScopes) -> String {
    let map = scopes
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    Value::Object(map).to_string()
}

/// Parses a stored scopes JSON object. A JSON string holding the object
/// text (double encoding by other writers) is parsed once more; scalar
/// non-string values are rendered as text.
pub(crate) fn parse_scopes(text: &str) -> Result<StoredScopes> {
    if let Some(scopes) = sync_core::parse_canonical_scopes(text) {
        return Ok(scopes);
    }
    let value: Value = serde_json::from_str(text).map_err(|_| corrupt("scopes_not_json"))?;
    scopes_from_value(value, true)
}

fn scopes_from_value(value: Value, allow_inner: bool) -> Result<StoredScopes> {
    match value {
        Value::Object(map) => map
            .into_iter()
            .filter_map(|(k, v)| match v {
                Value::String(s) => Some(Ok((k, s))),
                Value::Number(n) => Some(Ok((k, n.to_string()))),
                Value::Bool(b) => Some(Ok((k, b.to_string()))),
                Value::Null => None,
                _ => Some(Err(corrupt("scopes_not_flat"))),
            })
            .collect(),
        Value::String(inner) if allow_inner => {
            let value: Value =
                serde_json::from_str(&inner).map_err(|_| corrupt("scopes_not_json"))?;
            scopes_from_value(value, false)
        }
        _ => Err(corrupt("scopes_not_object")),
    }
}

/// A scope filter's value list as a JSON array (bound to `json_each`).
pub(crate) fn string_list_json<S: AsRef<str>>(values: &[S]) -> String {
    Value::Array(
        values
            .iter()
            .map(|v| Value::String(v.as_ref().to_owned()))
            .collect(),
    )
    .to_string()
}

/// Subscriptions as stored in `sync_clients.subscriptions`.
pub(crate) fn subscriptions_json(subscriptions: &[ClientSubscription]) -> String {
    let items = subscriptions
        .iter()
        .map(|s| {
            let scopes = s
                .scopes
                .iter()
                .map(|(k, values)| {
                    let list = values.iter().map(|v| Value::String(v.clone())).collect();
                    (k.clone(), Value::Array(list))
                })
                .collect();
            let mut item = serde_json::Map::new();
            item.insert("id".into(), Value::String(s.id.clone()));
            item.insert("table".into(), Value::String(s.table.clone()));
            item.insert("scopes".into(), Value::Object(scopes));
            Value::Object(item)
        })
        .collect();
    Value::Array(items).to_string()
}

/// Parses stored subscriptions (a double-encoded string is parsed once more).
/// A scope given as a single string is read as a one-element list.
pub(crate) fn parse_subscriptions(text: &str) -> Result<Vec<ClientSubscription>> {
    let mut value: Value =
        serde_json::from_str(text).map_err(|_| corrupt("subscriptions_not_json"))?;
    if let Value::String(inner) = &value {
        value = serde_json::from_str(inner).map_err(|_| corrupt("subscriptions_not_json"))?;
    }
    let Value::Array(items) = value else {
        return Err(corrupt("subscriptions_not_array"));
    };
    items.into_iter().map(subscription_from_value).collect()
}

fn subscription_from_value(item: Value) -> Result<ClientSubscription> {
    let bad = || corrupt("subscription_malformed");
    let Value::Object(mut map) = item else {
        return Err(bad());
    };
    let text = |v: Option<Value>| match v {
        Some(Value::String(s)) => Ok(s),
        _ => Err(bad()),
    };
    let id = text(map.remove("id"))?;
    let table = text(map.remove("table"))?;
    let mut scopes = ScopeFilter::new();
    match map.remove("scopes") {
        None | Some(Value::Null) => {}
        Some(Value::Object(entries)) => {
            for (variable, values) in entries {
                let list = match values {
                    Value::Array(list) => list
                        .into_iter()
                        .map(|v| match v {
                            Value::String(s) => Ok(s),
                            _ => Err(bad()),
                        })
                        .collect::<Result<Vec<_>>>()?,
                    Value::String(s) => vec![s],
                    _ => return Err(bad()),
                };
                scopes.insert(variable, list);
            }
        }
        Some(_) => return Err(bad()),
    }
    Ok(ClientSubscription { id, table, scopes })
}

/// Parses an arbitrary stored JSON value (reaction payloads).
pub(crate) fn parse_json(text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|_| corrupt("json_unreadable"))
}

/// Range-checks a stored integer into `i32` (schema versions, attempts).
pub(crate) fn to_i32(value: i64) -> Result<i32> {
    i32::try_from(value).map_err(|_| {
        Error::new(sync_core::ErrorCode::Backend).detail("reason", "integer_out_of_range")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_round_trip_and_accept_double_encoding() {
        let scopes: StoredScopes = [("b".into(), "2".into()), ("a".into(), "x\"y".into())].into();
        let text = scopes_json(&scopes);
        assert_eq!(text, r#"{"a":"x\"y","b":"2"}"#);
        assert_eq!(parse_scopes(&text).unwrap(), scopes);
        let double = Value::String(text).to_string();
        assert_eq!(parse_scopes(&double).unwrap(), scopes);
        assert!(parse_scopes("[1]").is_err());
    }

    #[test]
    fn subscriptions_round_trip() {
        let subs = vec![ClientSubscription {
            id: "s".into(),
            table: "tasks".into(),
            scopes: [("project_id".into(), vec!["p1".into(), "p2".into()])].into(),
        }];
        let text = subscriptions_json(&subs);
        assert_eq!(
            text,
            r#"[{"id":"s","table":"tasks","scopes":{"project_id":["p1","p2"]}}]"#
        );
        assert_eq!(parse_subscriptions(&text).unwrap(), subs);
    }
}
