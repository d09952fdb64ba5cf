//! Decoded row values as JSON, in the encoding pinned by the `rows` and
//! `commits` commands (and used by the reference fixtures' manifests):
//! strings as strings, integers and finite floats as numbers, booleans as
//! booleans, `json` and `blob_ref` as their verbatim text, `bytes` (and the
//! opaque `crdt` bytes) as lowercase hex, NULL as `null`. A non-finite float
//! has no JSON number; it is written as the string `"NaN"`, `"inf"` or
//! `"-inf"`.

use serde_json::{Map, Number, Value};
use sync_core::codec::{self, ColumnSpec};
use sync_core::{ColumnType, LayoutColumn, RowValue, StoredScopes};

/// One value as JSON.
pub fn value_to_json(value: &RowValue) -> Value {
    match value {
        RowValue::Null => Value::Null,
        RowValue::String(text) | RowValue::Json(text) | RowValue::BlobRef(text) => {
            Value::String(text.clone())
        }
        RowValue::Integer(number) => Value::from(*number),
        RowValue::Float(number) => float_to_json(*number),
        RowValue::Boolean(flag) => Value::Bool(*flag),
        RowValue::Bytes(bytes) | RowValue::Crdt(bytes) => Value::String(hex::encode(bytes)),
    }
}

fn float_to_json(number: f64) -> Value {
    match Number::from_f64(number) {
        Some(n) => Value::Number(n),
        None if number.is_nan() => Value::String("NaN".to_owned()),
        None if number > 0.0 => Value::String("inf".to_owned()),
        None => Value::String("-inf".to_owned()),
    }
}

/// Stored scopes as a JSON object (variable → value).
pub fn scopes_to_json(scopes: &StoredScopes) -> Value {
    Value::Object(
        scopes
            .iter()
            .map(|(variable, value)| (variable.clone(), Value::String(value.clone())))
            .collect(),
    )
}

/// A payload decoded under a stored layout: column name → value, in layout
/// order.
///
/// History written before a bump that appended columns is encoded under a
/// prefix of the current layout (bumps only append nullable columns), so
/// when the whole layout does not decode the payload, the longest prefix
/// that does is used and the object holds only the columns the payload
/// encodes. `None` when no prefix decodes it.
pub fn decode_payload(layout: &[LayoutColumn], payload: &[u8]) -> Option<Map<String, Value>> {
    (1..=layout.len()).rev().find_map(|len| {
        let columns = &layout[..len];
        if columns.iter().any(|c| c.codec_type().is_none()) {
            return None;
        }
        let values = codec::decode(columns, payload).ok()?;
        Some(
            columns
                .iter()
                .zip(&values)
                .map(|(column, value)| (column.name.clone(), value_to_json(value)))
                .collect(),
        )
    })
}

/// The inverse of [`value_to_json`] for a column of `column_type`: how
/// `sync` reads a JSON-object payload. `null` is NULL; `json` and
/// `blob_ref` take their document as a string (or any other JSON value,
/// written as compact text); `bytes` and `crdt` take lowercase or uppercase
/// hex; a float also takes `"NaN"`, `"inf"` and `"-inf"`. `Err` names what
/// was expected.
pub fn value_from_json(column_type: ColumnType, value: &Value) -> Result<RowValue, &'static str> {
    if value.is_null() {
        return Ok(RowValue::Null);
    }
    match column_type {
        ColumnType::String => value
            .as_str()
            .map(|t| RowValue::String(t.to_owned()))
            .ok_or("a string"),
        ColumnType::Integer => value.as_i64().map(RowValue::Integer).ok_or("an integer"),
        ColumnType::Float => match value {
            Value::Number(n) => n.as_f64().map(RowValue::Float).ok_or("a number"),
            Value::String(t) => match t.as_str() {
                "NaN" => Ok(RowValue::Float(f64::NAN)),
                "inf" => Ok(RowValue::Float(f64::INFINITY)),
                "-inf" => Ok(RowValue::Float(f64::NEG_INFINITY)),
                _ => Err("a number, \"NaN\", \"inf\" or \"-inf\""),
            },
            _ => Err("a number"),
        },
        ColumnType::Boolean => value
            .as_bool()
            .map(RowValue::Boolean)
            .ok_or("true or false"),
        ColumnType::Json => Ok(RowValue::Json(document_text(value))),
        ColumnType::BlobRef => Ok(RowValue::BlobRef(document_text(value))),
        ColumnType::Bytes => hex_bytes(value).map(RowValue::Bytes),
        ColumnType::Crdt => hex_bytes(value).map(RowValue::Crdt),
    }
}

fn document_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn hex_bytes(value: &Value) -> Result<Vec<u8>, &'static str> {
    value
        .as_str()
        .and_then(|t| hex::decode(t).ok())
        .ok_or("hex text")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn column(name: &str, column_type: ColumnType, nullable: bool) -> LayoutColumn {
        LayoutColumn {
            name: name.to_owned(),
            column_type: column_type.as_str().to_owned(),
            nullable,
        }
    }

    #[test]
    fn every_value_kind_has_its_pinned_encoding() {
        assert_eq!(value_to_json(&RowValue::Null), Value::Null);
        assert_eq!(value_to_json(&RowValue::String("a".into())), json!("a"));
        assert_eq!(value_to_json(&RowValue::Integer(-7)), json!(-7));
        assert_eq!(value_to_json(&RowValue::Float(1.5)), json!(1.5));
        assert_eq!(value_to_json(&RowValue::Float(f64::NAN)), json!("NaN"));
        assert_eq!(
            value_to_json(&RowValue::Float(f64::NEG_INFINITY)),
            json!("-inf")
        );
        assert_eq!(value_to_json(&RowValue::Boolean(true)), json!(true));
        assert_eq!(
            value_to_json(&RowValue::Json("{\"b\":2, \"a\":1}".into())),
            json!("{\"b\":2, \"a\":1}")
        );
        assert_eq!(
            value_to_json(&RowValue::Bytes(vec![0, 0xAB])),
            json!("00ab")
        );
        assert_eq!(value_to_json(&RowValue::Bytes(Vec::new())), json!(""));
        assert_eq!(
            value_to_json(&RowValue::BlobRef("{\"blobId\":\"x\"}".into())),
            json!("{\"blobId\":\"x\"}")
        );
    }

    #[test]
    fn json_values_read_back_as_the_values_they_render() {
        let samples = [
            (ColumnType::String, RowValue::String("a".into())),
            (ColumnType::Integer, RowValue::Integer(-7)),
            (ColumnType::Float, RowValue::Float(1.5)),
            (ColumnType::Float, RowValue::Float(f64::NEG_INFINITY)),
            (ColumnType::Boolean, RowValue::Boolean(true)),
            (
                ColumnType::Json,
                RowValue::Json("{\"b\":2, \"a\":1}".into()),
            ),
            (ColumnType::Bytes, RowValue::Bytes(vec![0, 0xAB])),
            (ColumnType::Crdt, RowValue::Crdt(vec![1])),
            (ColumnType::String, RowValue::Null),
        ];
        for (column_type, value) in samples {
            assert_eq!(
                value_from_json(column_type, &value_to_json(&value)),
                Ok(value)
            );
        }
        assert_eq!(
            value_from_json(ColumnType::Json, &json!({"a": [1]})),
            Ok(RowValue::Json("{\"a\":[1]}".into()))
        );
        assert!(value_from_json(ColumnType::Integer, &json!("7")).is_err());
        assert!(value_from_json(ColumnType::Integer, &json!(1.5)).is_err());
        assert!(value_from_json(ColumnType::Bytes, &json!("xyz")).is_err());
        assert!(value_from_json(ColumnType::Boolean, &json!(1)).is_err());
    }

    #[test]
    fn a_payload_of_an_older_layout_decodes_under_its_prefix() {
        let v1 = [
            column("id", ColumnType::String, false),
            column("n", ColumnType::Integer, false),
        ];
        let v2 = [
            v1[0].clone(),
            v1[1].clone(),
            column("extra", ColumnType::String, true),
        ];
        let old =
            codec::encode(&v1, &[RowValue::String("r".into()), RowValue::Integer(3)]).unwrap();
        let new = codec::encode(
            &v2,
            &[
                RowValue::String("r".into()),
                RowValue::Integer(3),
                RowValue::Null,
            ],
        )
        .unwrap();
        assert_eq!(
            Value::Object(decode_payload(&v2, &new).unwrap()),
            json!({"id": "r", "n": 3, "extra": null})
        );
        assert_eq!(
            Value::Object(decode_payload(&v2, &old).unwrap()),
            json!({"id": "r", "n": 3})
        );
        assert_eq!(decode_payload(&v2, &[0xff]), None);
    }
}
