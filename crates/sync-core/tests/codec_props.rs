//! Property tests of the row payload codec: encode/decode identity over
//! arbitrary column lists and values, canonical re-encoding, and decoding
//! arbitrary or corrupted bytes without panicking.

use proptest::collection::vec;
use proptest::prelude::*;
use sync_core::codec::{self, decode, encode, reencode, validate, ColumnShape};
use sync_core::{ColumnType, ErrorCode, RowValue};

const MAX_SAFE: i64 = (1 << 53) - 1;

fn column_type() -> impl Strategy<Value = ColumnType> {
    proptest::sample::select(ColumnType::ALL.to_vec())
}

fn column() -> impl Strategy<Value = ColumnShape> {
    (column_type(), any::<bool>()).prop_map(|(t, nullable)| ColumnShape::new(t, nullable))
}

fn whitespace() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[ \t\r\n]{0,2}").expect("regex")
}

fn json_string_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>().prop_map(|s| serde_json::to_string(&s).expect("string")),
        proptest::string::string_regex(r#""([a-z]|\\u00[0-9a-f]{2}|\\[nrt"\\/])*""#)
            .expect("regex"),
    ]
}

fn json_number_literal() -> impl Strategy<Value = String> {
    proptest::string::string_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,5})?")
        .expect("regex")
}

/// Arbitrary valid JSON text, including whitespace, duplicate keys and
/// numbers beyond f64 range.
fn json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        json_number_literal(),
        json_string_literal(),
    ];
    let value = leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            vec((whitespace(), inner.clone(), whitespace()), 0..6).prop_map(|items| {
                let items: Vec<String> = items
                    .into_iter()
                    .map(|(a, v, b)| format!("{a}{v}{b}"))
                    .collect();
                format!("[{}]", items.join(","))
            }),
            vec((json_string_literal(), whitespace(), inner), 0..6).prop_map(|members| {
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(k, ws, v)| format!("{ws}{k}{ws}:{ws}{v}{ws}"))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    });
    (whitespace(), value, whitespace()).prop_map(|(a, v, b)| format!("{a}{v}{b}"))
}

fn blob_ref_text() -> impl Strategy<Value = String> {
    (
        any::<String>().prop_filter("non-empty", |s| !s.is_empty()),
        vec((json_string_literal(), json_text()), 0..3),
    )
        .prop_map(|(id, extra)| {
            let mut members = vec![format!(
                "\"blobId\":{}",
                serde_json::to_string(&id).expect("string")
            )];
            members.extend(extra.into_iter().filter_map(|(k, v)| {
                // A member that decodes to `blobId` would replace the valid one.
                let key: String = serde_json::from_str(&k).unwrap_or_default();
                (key != "blobId").then(|| format!("{k}:{v}"))
            }));
            format!("{{{}}}", members.join(","))
        })
}

fn value_of(column_type: ColumnType) -> BoxedStrategy<RowValue> {
    match column_type {
        ColumnType::String => any::<String>().prop_map(RowValue::String).boxed(),
        ColumnType::Integer => (-MAX_SAFE..=MAX_SAFE).prop_map(RowValue::Integer).boxed(),
        ColumnType::Float => any::<u64>()
            .prop_map(|bits| RowValue::Float(f64::from_bits(bits)))
            .boxed(),
        ColumnType::Boolean => any::<bool>().prop_map(RowValue::Boolean).boxed(),
        ColumnType::Json => json_text().prop_map(RowValue::Json).boxed(),
        ColumnType::Bytes => vec(any::<u8>(), 0..40).prop_map(RowValue::Bytes).boxed(),
        ColumnType::BlobRef => blob_ref_text().prop_map(RowValue::BlobRef).boxed(),
        ColumnType::Crdt => vec(any::<u8>(), 0..40).prop_map(RowValue::Crdt).boxed(),
    }
}

fn cell(column: ColumnShape) -> BoxedStrategy<RowValue> {
    if column.nullable {
        prop_oneof![1 => Just(RowValue::Null), 3 => value_of(column.column_type)].boxed()
    } else {
        value_of(column.column_type)
    }
}

/// A column list (0–20 columns, every type, nullable or not) and a valid row.
fn row() -> impl Strategy<Value = (Vec<ColumnShape>, Vec<RowValue>)> {
    vec(column(), 0..20).prop_flat_map(|columns| {
        let cells: Vec<_> = columns.iter().map(|&c| cell(c)).collect();
        (Just(columns), cells)
    })
}

/// Equality with floats compared by bit pattern (NaN payloads, −0.0).
fn same(a: &[RowValue], b: &[RowValue]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|pair| match pair {
            (RowValue::Float(x), RowValue::Float(y)) => x.to_bits() == y.to_bits(),
            (x, y) => x == y,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn encode_then_decode_is_the_identity((columns, values) in row()) {
        let payload = encode(&columns, &values).expect("valid values encode");
        prop_assert_eq!(payload.len() >= columns.len().div_ceil(8), true);
        let decoded = decode(&columns, &payload).expect("own payload decodes");
        prop_assert!(same(&decoded, &values), "{:?} != {:?}", decoded, values);
        prop_assert_eq!(encode(&columns, &decoded).expect("re-encode"), payload.clone());
        prop_assert!(validate(&columns, &payload).is_ok());
    }

    #[test]
    fn reencode_with_appended_nullable_columns_appends_nulls(
        (columns, values) in row(),
        appended in vec(column_type(), 0..10),
    ) {
        let payload = encode(&columns, &values).expect("valid values encode");
        let mut new_columns = columns.clone();
        new_columns.extend(appended.iter().map(|&t| ColumnShape::optional(t)));
        let rewritten = reencode(&columns, &new_columns, &payload).expect("reencode");
        let mut expected = values.clone();
        expected.resize(new_columns.len(), RowValue::Null);
        let decoded = decode(&new_columns, &rewritten).expect("rewritten decodes");
        prop_assert!(same(&decoded, &expected));
        prop_assert_eq!(encode(&new_columns, &expected).expect("encode"), rewritten);
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(
        columns in vec(column(), 0..12),
        payload in vec(any::<u8>(), 0..96),
    ) {
        check_untrusted(&columns, &payload)?;
    }

    #[test]
    fn decoding_corrupted_payloads_never_panics(
        (columns, values) in row(),
        edits in vec((any::<proptest::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let mut payload = encode(&columns, &values).expect("valid values encode");
        for (at, byte, kind) in edits {
            match kind {
                0 if !payload.is_empty() => {
                    let i = at.index(payload.len());
                    payload[i] = byte;
                }
                1 if !payload.is_empty() => payload.truncate(at.index(payload.len())),
                _ => payload.push(byte),
            }
        }
        check_untrusted(&columns, &payload)?;
    }

    #[test]
    fn json_validation_agrees_with_serde_json(text in json_ish_text()) {
        let ours = codec::is_valid_json(&text);
        let theirs = serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
        prop_assert_eq!(ours, theirs, "{:?}", text);
    }

    #[test]
    fn generated_json_is_valid_and_blob_refs_are_valid(
        text in json_text(),
        blob in blob_ref_text(),
    ) {
        prop_assert!(codec::is_valid_json(&text), "{:?}", text);
        prop_assert!(codec::is_valid_blob_ref(&blob), "{:?}", blob);
    }
}

/// Texts over the JSON alphabet, mostly malformed, shallow enough for
/// serde_json's recursion limit.
fn json_ish_text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::string::string_regex(r#"[ \t\n\r{}\[\],:"\\/0-9.eE+\-a-z\x00-\x02é]{0,24}"#)
            .expect("regex"),
        (json_text(), 0usize..64, "[ -~]{0,2}").prop_map(|(text, at, insert)| {
            // Splice a few characters into valid JSON.
            let mut at = at.min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            format!("{}{}{}", &text[..at], insert, &text[at..])
        }),
    ]
}

/// Decoding untrusted bytes returns a value list or `decode_failed`; a
/// payload that decodes re-encodes to itself (canonical form), and
/// `validate` agrees with `decode`.
fn check_untrusted(columns: &[ColumnShape], payload: &[u8]) -> Result<(), TestCaseError> {
    let decoded = decode(columns, payload);
    let validated = validate(columns, payload);
    match decoded {
        Ok(values) => {
            prop_assert!(validated.is_ok());
            prop_assert_eq!(values.len(), columns.len());
            prop_assert_eq!(
                encode(columns, &values).expect("re-encode"),
                payload.to_vec()
            );
        }
        Err(error) => {
            prop_assert_eq!(error.code(), ErrorCode::CodecDecodeFailed);
            let validated = validated.expect_err("validate agrees with decode");
            prop_assert_eq!(validated.details(), error.details());
        }
    }
    Ok(())
}
