//! Value mapping between the domain and MariaDB: projection values, the
//! JSON text columns (scopes, subscriptions) and corrupt-value errors.

use mysql::Value;
use serde_json::Value as Json;
use sync_core::{
    ClientSubscription, Error, ErrorCode, Result, RowValue, ScopeFilter, StoredScopes,
};

/// `sync.storage.backend` for a stored value this crate cannot read.
pub(crate) fn corrupt(what: &'static str) -> Error {
    Error::new(ErrorCode::Backend).detail("reason", what)
}

/// The projection value of a row value: text for string/json/blob_ref,
/// integer for integer and boolean (0/1), double for float, bytes for
/// bytes/crdt. NaN and ±∞, which a `DOUBLE` cannot hold, are bound as NULL
/// (the payload keeps the exact value; `docs/design/mariadb.md` §12).
pub(crate) fn projection_value(value: &RowValue) -> Value {
    match value {
        RowValue::Null => Value::NULL,
        RowValue::String(s) | RowValue::Json(s) | RowValue::BlobRef(s) => {
            Value::Bytes(s.as_bytes().to_vec())
        }
        RowValue::Integer(i) => Value::Int(*i),
        RowValue::Float(f) if f.is_finite() => Value::Double(*f),
        RowValue::Float(_) => Value::NULL,
        RowValue::Boolean(b) => Value::Int(i64::from(*b)),
        RowValue::Bytes(b) | RowValue::Crdt(b) => Value::Bytes(b.clone()),
    }
}

/// Stored scopes as the JSON object text of `_sync_scopes` /
/// `sync_changes.scopes` (keys in byte order).
pub(crate) fn scopes_json(scopes: &StoredScopes) -> String {
    let map = scopes
        .iter()
        .map(|(k, v)| (k.clone(), Json::String(v.clone())))
        .collect();
    Json::Object(map).to_string()
}

/// Parses a stored scopes JSON object (string values only).
pub(crate) fn parse_scopes(text: &str) -> Result<StoredScopes> {
    if let Some(scopes) = sync_core::parse_canonical_scopes(text) {
        return Ok(scopes);
    }
    let value: Json = serde_json::from_str(text).map_err(|_| corrupt("scopes_not_json"))?;
    let Json::Object(map) = value else {
        return Err(corrupt("scopes_not_object"));
    };
    map.into_iter()
        .map(|(k, v)| match v {
            Json::String(s) => Ok((k, s)),
            _ => Err(corrupt("scope_value_not_text")),
        })
        .collect()
}

/// Subscriptions as the JSON array text of `sync_clients.subscriptions`.
pub(crate) fn subscriptions_json(subscriptions: &[ClientSubscription]) -> String {
    let items = subscriptions
        .iter()
        .map(|s| {
            let scopes = s
                .scopes
                .iter()
                .map(|(k, values)| {
                    let list = values.iter().map(|v| Json::String(v.clone())).collect();
                    (k.clone(), Json::Array(list))
                })
                .collect();
            let mut item = serde_json::Map::new();
            item.insert("id".into(), Json::String(s.id.clone()));
            item.insert("table".into(), Json::String(s.table.clone()));
            item.insert("scopes".into(), Json::Object(scopes));
            Json::Object(item)
        })
        .collect();
    Json::Array(items).to_string()
}

/// Parses stored subscriptions.
pub(crate) fn parse_subscriptions(text: &str) -> Result<Vec<ClientSubscription>> {
    let bad = || corrupt("subscriptions_malformed");
    let value: Json = serde_json::from_str(text).map_err(|_| bad())?;
    let Json::Array(items) = value else {
        return Err(bad());
    };
    items
        .into_iter()
        .map(|item| {
            let Json::Object(mut map) = item else {
                return Err(bad());
            };
            let text = |v: Option<Json>| match v {
                Some(Json::String(s)) => Ok(s),
                _ => Err(bad()),
            };
            let id = text(map.remove("id"))?;
            let table = text(map.remove("table"))?;
            let mut scopes = ScopeFilter::new();
            if let Some(Json::Object(entries)) = map.remove("scopes") {
                for (variable, values) in entries {
                    let Json::Array(values) = values else {
                        return Err(bad());
                    };
                    let values = values
                        .into_iter()
                        .map(|v| text(Some(v)))
                        .collect::<Result<Vec<_>>>()?;
                    scopes.insert(variable, values);
                }
            }
            Ok(ClientSubscription { id, table, scopes })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unrepresentable_floats_project_as_null() {
        assert_eq!(projection_value(&RowValue::Float(f64::NAN)), Value::NULL);
        assert_eq!(
            projection_value(&RowValue::Float(f64::INFINITY)),
            Value::NULL
        );
        assert_eq!(projection_value(&RowValue::Float(1.5)), Value::Double(1.5));
        assert_eq!(projection_value(&RowValue::Boolean(true)), Value::Int(1));
    }

    #[test]
    fn scopes_and_subscriptions_round_trip() {
        let scopes: StoredScopes = [("project".to_owned(), "p1".to_owned())].into();
        assert_eq!(parse_scopes(&scopes_json(&scopes)).expect("parses"), scopes);
        let subscriptions = vec![ClientSubscription {
            id: "s1".into(),
            table: "tasks".into(),
            scopes: [("project".to_owned(), vec!["p1".to_owned(), "p2".to_owned()])].into(),
        }];
        assert_eq!(
            parse_subscriptions(&subscriptions_json(&subscriptions)).expect("parses"),
            subscriptions
        );
        assert!(parse_scopes("[1]").is_err());
    }
}
