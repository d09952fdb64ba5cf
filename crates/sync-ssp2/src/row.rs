//! The positional row codec (§2.4) as used inside rows segments: a null
//! bitmap, then the non-null values in column order.

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{
    is_safe_integer, put_bool, put_bytes, put_f64, put_i64, put_json, put_str, Reader,
    MAX_SAFE_INTEGER,
};
use crate::segment::{Column, ColumnType, ColumnValue};
use crate::values::RawJson;

const BLOB_REF_KEYS: [&str; 4] = ["blobId", "byteLength", "mediaType", "name"];

/// Whether `text` is a canonical BlobRef (§5.9.1): a compact JSON object
/// with `blobId` (`sha256:` + 64 lowercase hex) and `byteLength` (a safe
/// non-negative integer), optionally `mediaType` and `name` (strings), in
/// exactly that key order and nothing else.
pub(crate) fn is_canonical_blob_ref(text: &str) -> bool {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    let Some(map) = value.as_object() else {
        return false;
    };
    let mut expected = BLOB_REF_KEYS.iter();
    for key in map.keys() {
        if !expected.any(|k| k == key) {
            return false;
        }
    }
    let blob_id_ok = map
        .get("blobId")
        .and_then(|v| v.as_str())
        .is_some_and(|id| {
            id.strip_prefix("sha256:").is_some_and(|hex| {
                hex.len() == 64
                    && hex
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            })
        });
    let length_ok = map
        .get("byteLength")
        .and_then(|v| v.as_u64())
        .is_some_and(|n| n <= MAX_SAFE_INTEGER as u64);
    let optional_ok = ["mediaType", "name"]
        .iter()
        .all(|k| map.get(*k).is_none_or(|v| v.is_string()));
    // No insignificant whitespace: the text is its own compact serialization.
    let compact = serde_json::to_string(&value).ok().as_deref() == Some(text);
    blob_id_ok && length_ok && optional_ok && compact
}

pub(crate) fn bitmap_len(columns: usize) -> usize {
    columns.div_ceil(8)
}

/// The smallest encoded row for `columns`: the bitmap alone.
pub(crate) fn min_row_len(columns: &[Column]) -> u64 {
    bitmap_len(columns.len()) as u64
}

pub(crate) fn decode_row(
    r: &mut Reader<'_>,
    columns: &[Column],
) -> Result<Vec<ColumnValue>, DecodeError> {
    let bitmap = r.take(bitmap_len(columns.len()), "a row null bitmap")?;
    for bit in columns.len()..bitmap.len() * 8 {
        if bitmap[bit / 8] >> (bit % 8) & 1 == 1 {
            return Err(DecodeError::Constraint {
                rule: "a row null bitmap has a padding bit set",
            });
        }
    }
    let mut values = Vec::with_capacity(columns.len());
    for (i, column) in columns.iter().enumerate() {
        if bitmap[i / 8] >> (i % 8) & 1 == 1 {
            if !column.nullable {
                return Err(DecodeError::Constraint {
                    rule: "a row has the null bit set on a non-nullable column",
                });
            }
            values.push(ColumnValue::Null);
            continue;
        }
        let value = decode_value(r, column)?;
        values.push(value);
    }
    Ok(values)
}

/// Reads one non-null value of `column`'s type (the tags of §2.4).
pub(crate) fn decode_value(
    r: &mut Reader<'_>,
    column: &Column,
) -> Result<ColumnValue, DecodeError> {
    Ok(match column.column_type {
        ColumnType::String => ColumnValue::String(r.str("a string column value")?),
        ColumnType::Integer => ColumnValue::Integer(r.i64("an integer column value")?),
        ColumnType::Float => ColumnValue::Float(r.f64("a float column value")?),
        ColumnType::Boolean => ColumnValue::Boolean(r.bool("a boolean column value")?),
        ColumnType::Json => ColumnValue::Json(r.json("a json column value")?),
        ColumnType::Bytes => ColumnValue::Bytes(r.bytes("a bytes column value")?),
        ColumnType::BlobRef => {
            let what = "a blob_ref column value";
            let text = r.str(what)?;
            if !is_canonical_blob_ref(&text) {
                return Err(DecodeError::InvalidJson { what });
            }
            ColumnValue::BlobRef(RawJson::new(text).map_err(|_| DecodeError::InvalidJson { what })?)
        }
        ColumnType::Crdt => ColumnValue::Crdt(r.bytes("a crdt column value")?),
    })
}

/// Checks one row as [`decode_row`] does — the same rules, in the same
/// order, with the same errors — without building its values: strings
/// and JSON are checked in place, nothing is allocated.
pub(crate) fn check_row(r: &mut Reader<'_>, columns: &[Column]) -> Result<(), DecodeError> {
    let bitmap = r.take(bitmap_len(columns.len()), "a row null bitmap")?;
    for bit in columns.len()..bitmap.len() * 8 {
        if bitmap[bit / 8] >> (bit % 8) & 1 == 1 {
            return Err(DecodeError::Constraint {
                rule: "a row null bitmap has a padding bit set",
            });
        }
    }
    for (i, column) in columns.iter().enumerate() {
        if bitmap[i / 8] >> (i % 8) & 1 == 1 {
            if !column.nullable {
                return Err(DecodeError::Constraint {
                    rule: "a row has the null bit set on a non-nullable column",
                });
            }
            continue;
        }
        match column.column_type {
            ColumnType::String => {
                r.str_ref("a string column value")?;
            }
            ColumnType::Integer => {
                r.i64("an integer column value")?;
            }
            ColumnType::Float => {
                r.f64("a float column value")?;
            }
            ColumnType::Boolean => {
                r.bool("a boolean column value")?;
            }
            ColumnType::Json => {
                let what = "a json column value";
                if !crate::json_syntax::is_json_document(r.str_ref(what)?) {
                    return Err(DecodeError::InvalidJson { what });
                }
            }
            ColumnType::Bytes => {
                r.bytes_ref("a bytes column value")?;
            }
            ColumnType::BlobRef => {
                let what = "a blob_ref column value";
                let text = r.str_ref(what)?;
                if !is_canonical_blob_ref(text) || !crate::json_syntax::is_json_document(text) {
                    return Err(DecodeError::InvalidJson { what });
                }
            }
            ColumnType::Crdt => {
                r.bytes_ref("a crdt column value")?;
            }
        }
    }
    Ok(())
}

const TYPE_MISMATCH: &str = "a row value does not match its column's type";

pub(crate) fn encode_row(
    out: &mut Vec<u8>,
    columns: &[Column],
    values: &[ColumnValue],
) -> Result<(), EncodeError> {
    if values.len() != columns.len() {
        return Err(EncodeError::Constraint {
            rule: "a row must have one value per column",
        });
    }
    let mut bitmap = vec![0u8; bitmap_len(columns.len())];
    for (i, (column, value)) in columns.iter().zip(values).enumerate() {
        if matches!(value, ColumnValue::Null) {
            if !column.nullable {
                return Err(EncodeError::Constraint {
                    rule: "a non-nullable column holds a null",
                });
            }
            bitmap[i / 8] |= 1 << (i % 8);
        }
    }
    out.extend_from_slice(&bitmap);
    for (column, value) in columns.iter().zip(values) {
        encode_value(out, column, value)?;
    }
    Ok(())
}

/// Writes one value of `column`'s type; a null writes nothing (nulls live
/// in the bitmap) and a value of another type is refused.
pub(crate) fn encode_value(
    out: &mut Vec<u8>,
    column: &Column,
    value: &ColumnValue,
) -> Result<(), EncodeError> {
    match (column.column_type, value) {
        (_, ColumnValue::Null) => {}
        (ColumnType::String, ColumnValue::String(s)) => put_str(out, s, "a string column value")?,
        (ColumnType::Integer, ColumnValue::Integer(v)) => {
            if !is_safe_integer(*v) {
                return Err(EncodeError::UnsafeInteger {
                    what: "an integer column value",
                });
            }
            put_i64(out, *v, "an integer column value")?
        }
        (ColumnType::Float, ColumnValue::Float(v)) => put_f64(out, *v),
        (ColumnType::Boolean, ColumnValue::Boolean(v)) => put_bool(out, *v),
        (ColumnType::Json, ColumnValue::Json(v)) => put_json(out, v, "a json column value")?,
        (ColumnType::Bytes, ColumnValue::Bytes(v)) => put_bytes(out, v, "a bytes column value")?,
        (ColumnType::BlobRef, ColumnValue::BlobRef(v)) => {
            if !is_canonical_blob_ref(v.as_str()) {
                return Err(EncodeError::Constraint {
                    rule: "a blob_ref value is not a canonical BlobRef",
                });
            }
            put_json(out, v, "a blob_ref column value")?
        }
        (ColumnType::Crdt, ColumnValue::Crdt(v)) => put_bytes(out, v, "a crdt column value")?,
        _ => {
            return Err(EncodeError::Constraint {
                rule: TYPE_MISMATCH,
            })
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{check_row, decode_row, encode_row, is_canonical_blob_ref};
    use crate::primitives::Reader;
    use crate::segment::{Column, ColumnType, ColumnValue};
    use crate::values::RawJson;

    fn columns() -> Vec<Column> {
        [
            (ColumnType::String, false),
            (ColumnType::Integer, true),
            (ColumnType::Json, true),
            (ColumnType::Bytes, false),
            (ColumnType::Boolean, true),
            (ColumnType::Float, false),
            (ColumnType::BlobRef, true),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, (column_type, nullable))| Column {
            name: format!("c{i}"),
            column_type,
            nullable,
        })
        .collect()
    }

    proptest! {
        /// The allocation-free check accepts exactly what the decoder
        /// accepts, with the same error and the same bytes consumed.
        #[test]
        fn check_row_agrees_with_decode_row(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
            let columns = columns();
            let mut checked = Reader::new(&bytes);
            let mut decoded = Reader::new(&bytes);
            let check = check_row(&mut checked, &columns);
            let decode = decode_row(&mut decoded, &columns).map(|_| ());
            prop_assert_eq!(&check, &decode);
            if check.is_ok() {
                prop_assert_eq!(checked.remaining(), decoded.remaining());
            }
        }

        /// The same on encoded rows, whole or with one byte changed or cut
        /// short (where the rules actually bite).
        #[test]
        fn check_row_agrees_on_encoded_rows(
            text in ".{0,12}",
            int in proptest::option::of(-(1i64 << 53) + 1..(1i64 << 53)),
            json in proptest::option::of(prop_oneof![
                Just("1"), Just("{\"a\":[true,null]}"), Just("\"x\"")
            ]),
            bytes in proptest::collection::vec(any::<u8>(), 0..8),
            flag in proptest::option::of(any::<bool>()),
            float in any::<f64>(),
            blob in any::<bool>(),
            at in any::<usize>(),
            xor in any::<u8>(),
            cut in any::<bool>(),
        ) {
            let columns = columns();
            let id = format!("sha256:{}", "ab".repeat(32));
            let values = vec![
                ColumnValue::String(text),
                int.map_or(ColumnValue::Null, ColumnValue::Integer),
                json.map_or(ColumnValue::Null, |j| ColumnValue::Json(RawJson::new(j).unwrap())),
                ColumnValue::Bytes(bytes),
                flag.map_or(ColumnValue::Null, ColumnValue::Boolean),
                ColumnValue::Float(float),
                if blob {
                    ColumnValue::BlobRef(
                        RawJson::new(format!(r#"{{"blobId":"{id}","byteLength":3}}"#)).unwrap(),
                    )
                } else {
                    ColumnValue::Null
                },
            ];
            let mut row = Vec::new();
            encode_row(&mut row, &columns, &values).unwrap();
            let at = at % row.len();
            if cut {
                row.truncate(at);
            } else {
                row[at] ^= xor;
            }
            let mut checked = Reader::new(&row);
            let mut decoded = Reader::new(&row);
            let check = check_row(&mut checked, &columns);
            let decode = decode_row(&mut decoded, &columns).map(|_| ());
            prop_assert_eq!(&check, &decode);
            if check.is_ok() {
                prop_assert_eq!(checked.remaining(), decoded.remaining());
            }
        }
    }

    #[test]
    fn blob_ref_shape() {
        let id = format!("sha256:{}", "ab".repeat(32));
        assert!(is_canonical_blob_ref(&format!(
            r#"{{"blobId":"{id}","byteLength":3}}"#
        )));
        assert!(is_canonical_blob_ref(&format!(
            r#"{{"blobId":"{id}","byteLength":0,"mediaType":"text/plain","name":"a.txt"}}"#
        )));
        for bad in [
            format!(r#"{{"byteLength":3,"blobId":"{id}"}}"#),
            format!(r#"{{"blobId":"{id}","byteLength":-1}}"#),
            format!(r#"{{"blobId":"{id}","byteLength":1.5}}"#),
            format!(r#"{{"blobId":"{id}"}}"#),
            format!(r#"{{"blobId":"{id}","byteLength":3,"extra":1}}"#),
            format!(r#"{{"blobId": "{id}","byteLength":3}}"#),
            format!(r#"{{"blobId":"{}","byteLength":3}}"#, id.to_uppercase()),
        ] {
            assert!(!is_canonical_blob_ref(&bad), "{bad}");
        }
    }
}
