//! Row values in the form test harnesses exchange them: a `bytes` (or
//! opaque `crdt`) value is `{"$bytes": "<lowercase hex>"}`, a `json` or
//! `blob_ref` value is its raw text, every other value its natural JSON.
//! Two values are equal as JavaScript's `===` compares primitives, except
//! that bytes compare by content.

use serde_json::{json, Value};
use sync_core::RowValue;

/// `value` in the harness form.
pub(crate) fn to_driver(value: &RowValue) -> Value {
    match value {
        RowValue::Bytes(bytes) | RowValue::Crdt(bytes) => json!({"$bytes": hex::encode(bytes)}),
        other => crate::values::value_to_json(other),
    }
}

/// Whether two harness values are the same (numbers by their value, so
/// `1` equals `1.0`; an absent value equals only an absent one).
pub(crate) fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (Some(x), Some(y)) => x == y,
        (None, None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_travel_as_hex_objects_and_numbers_compare_by_value() {
        assert_eq!(
            to_driver(&RowValue::Bytes(vec![0, 255])),
            json!({"$bytes": "00ff"})
        );
        assert_eq!(to_driver(&RowValue::Integer(3)), json!(3));
        assert!(same(Some(&json!(1)), Some(&json!(1.0))));
        assert!(!same(Some(&json!("1")), Some(&json!(1))));
        assert!(!same(None, Some(&Value::Null)));
    }
}
