//! JSON columns (`storage-contract.md` §9.2, `dialects.md` §8).
//!
//! Every JSON column is written as `($n::text)::jsonb` from the text built
//! here and read back as `col::text`. A stored value that is a JSON *string*
//! whose content is the document (double encoding by some drivers of the
//! reference implementation) is parsed once more.

use serde_json::{Map, Value};
use sync_core::{ClientSubscription, Error, ErrorCode, Result, ScopeFilter, StoredScopes};

/// Parses stored JSON text, unwrapping one level of double encoding.
pub(crate) fn read_json(text: &str) -> Option<Value> {
    let value: Value = serde_json::from_str(text).ok()?;
    match value {
        Value::String(inner) => match serde_json::from_str(&inner) {
            Ok(document) => Some(document),
            Err(_) => Some(Value::String(inner)),
        },
        other => Some(other),
    }
}

fn corrupt(what: &str) -> Error {
    Error::new(ErrorCode::Backend)
        .detail("reason", "corrupt_json")
        .detail("column", what)
}

/// Serializes stored scopes (`{"variable":"value",…}`).
pub(crate) fn scopes_json(scopes: &StoredScopes) -> String {
    let map: Map<String, Value> = scopes
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    Value::Object(map).to_string()
}

/// Parses stored scopes. Non-string scalar values are kept as their JSON text.
pub(crate) fn parse_scopes(text: &str) -> Result<StoredScopes> {
    if let Some(scopes) = sync_core::parse_canonical_scopes(text) {
        return Ok(scopes);
    }
    let Some(Value::Object(map)) = read_json(text) else {
        return Err(corrupt("scopes"));
    };
    map.into_iter()
        .map(|(key, value)| match value {
            Value::String(s) => Ok((key, s)),
            Value::Number(_) | Value::Bool(_) => Ok((key, value.to_string())),
            _ => Err(corrupt("scopes")),
        })
        .collect()
}

/// Parses optional stored scopes (`NULL` reads as an empty map).
pub(crate) fn parse_scopes_opt(text: Option<&str>) -> Result<StoredScopes> {
    text.map_or_else(|| Ok(StoredScopes::new()), parse_scopes)
}

/// Serializes client subscriptions (`[{"id":…,"table":…,"scopes":{var:[values]}}]`).
pub(crate) fn subscriptions_json(subscriptions: &[ClientSubscription]) -> String {
    let items = subscriptions
        .iter()
        .map(|s| {
            let scopes: Map<String, Value> = s
                .scopes
                .iter()
                .map(|(k, values)| {
                    let values = values.iter().cloned().map(Value::String).collect();
                    (k.clone(), Value::Array(values))
                })
                .collect();
            let mut item = Map::new();
            item.insert("id".into(), Value::String(s.id.clone()));
            item.insert("table".into(), Value::String(s.table.clone()));
            item.insert("scopes".into(), Value::Object(scopes));
            Value::Object(item)
        })
        .collect();
    Value::Array(items).to_string()
}

/// Parses stored client subscriptions.
pub(crate) fn parse_subscriptions(text: &str) -> Result<Vec<ClientSubscription>> {
    let Some(Value::Array(items)) = read_json(text) else {
        return Err(corrupt("subscriptions"));
    };
    items.iter().map(parse_subscription).collect()
}

fn parse_subscription(item: &Value) -> Result<ClientSubscription> {
    let map = item.as_object().ok_or_else(|| corrupt("subscriptions"))?;
    let text = |key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| corrupt("subscriptions"))
    };
    let mut scopes = ScopeFilter::new();
    if let Some(raw) = map.get("scopes") {
        let raw = raw.as_object().ok_or_else(|| corrupt("subscriptions"))?;
        for (variable, values) in raw {
            let values = match values {
                Value::Array(items) => items
                    .iter()
                    .map(|v| scalar_text(v).ok_or_else(|| corrupt("subscriptions")))
                    .collect::<Result<Vec<_>>>()?,
                other => vec![scalar_text(other).ok_or_else(|| corrupt("subscriptions"))?],
            };
            scopes.insert(variable.clone(), values);
        }
    }
    Ok(ClientSubscription {
        id: text("id")?,
        table: text("table")?,
        scopes,
    })
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(_) | Value::Bool(_) => Some(value.to_string()),
        _ => None,
    }
}

/// Parses an arbitrary stored JSON value (reaction payloads).
pub(crate) fn parse_value(text: &str, what: &str) -> Result<Value> {
    read_json(text).ok_or_else(|| corrupt(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn double_encoded_scopes_are_read_as_the_document() {
        let scopes = parse_scopes(r#""{\"project_id\":\"p1\"}""#).unwrap();
        assert_eq!(scopes.get("project_id").map(String::as_str), Some("p1"));
        assert_eq!(parse_scopes(r#"{"a":"b"}"#).unwrap().len(), 1);
        assert!(parse_scopes("[1]").is_err());
    }

    #[test]
    fn subscriptions_round_trip() {
        let subs = vec![ClientSubscription {
            id: "s".into(),
            table: "tasks".into(),
            scopes: [("project_id".to_string(), vec!["p1".to_string()])].into(),
        }];
        assert_eq!(
            parse_subscriptions(&subscriptions_json(&subs)).unwrap(),
            subs
        );
    }
}
