//! Decoded row values as JSON, in the encoding pinned by the `rows` and
//! `commits` commands (and used by the reference fixtures' manifests):
//! strings as strings, integers and finite floats as numbers, booleans as
//! booleans, `json` and `blob_ref` as their verbatim text, `bytes` (and the
//! opaque `crdt` bytes) as lowercase hex, NULL as `null`. A non-finite float
//! has no JSON number; it is written as the string `"NaN"`, `"inf"` or
//! `"-inf"`.

use serde_json::{Map, Number, Value};
use sync_core::codec::{self, ColumnSpec};
use sync_core::{LayoutColumn, RowValue, StoredScopes};

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

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sync_core::ColumnType;

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
