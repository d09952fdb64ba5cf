//! Row payload codec: one test per conformance check of group `codec`
//! (C-077 … C-091, `conformance-checklist.md` §3), then the rules of
//! `schema-and-migrations.md` §5 the checklist does not name.

use std::collections::BTreeMap;

use sync_core::codec::{
    self, decode, encode, json_projection_is_representable_in_jsonb, reencode, validate,
    ColumnShape, Reason,
};
use sync_core::{
    ColumnType, CompiledColumn, CompiledTable, Error, ErrorCode, LayoutColumn, RowValue,
};

const MAX_SAFE: i64 = (1 << 53) - 1;

fn req(column_type: ColumnType) -> ColumnShape {
    ColumnShape::required(column_type)
}

fn opt(column_type: ColumnType) -> ColumnShape {
    ColumnShape::optional(column_type)
}

fn string(text: &str) -> RowValue {
    RowValue::String(text.to_owned())
}

fn json(text: &str) -> RowValue {
    RowValue::Json(text.to_owned())
}

fn blob_ref(text: &str) -> RowValue {
    RowValue::BlobRef(text.to_owned())
}

fn unhex(text: &str) -> Vec<u8> {
    hex::decode(text.replace(' ', "")).expect("test hex")
}

/// Length-prefixed bytes as the codec writes them.
fn prefixed(bytes: &[u8]) -> Vec<u8> {
    let mut out = (bytes.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

#[track_caller]
fn assert_failure(error: &Error, code: ErrorCode, reason: Reason, column: usize) {
    assert_eq!(error.code(), code, "{error:?}");
    assert_eq!(
        error.get_detail("reason"),
        Some(reason.as_str()),
        "{error:?}"
    );
    assert_eq!(
        error.get_detail("column"),
        Some(column.to_string().as_str()),
        "{error:?}"
    );
    assert_eq!(error.message(), code.default_message());
}

#[track_caller]
fn assert_decode_fails(columns: &[ColumnShape], payload: &[u8], reason: Reason, column: usize) {
    let error = decode(columns, payload).expect_err("payload must not decode");
    assert_failure(&error, ErrorCode::CodecDecodeFailed, reason, column);
    let error = validate(columns, payload).expect_err("payload must not validate");
    assert_failure(&error, ErrorCode::CodecDecodeFailed, reason, column);
}

#[track_caller]
fn assert_encode_fails(
    columns: &[ColumnShape],
    values: &[RowValue],
    reason: Reason,
    column: usize,
) {
    let error = encode(columns, values).expect_err("values must not encode");
    assert_failure(&error, ErrorCode::CodecEncodeFailed, reason, column);
}

/// §5.3 first vector: `id string, n integer, f float?, b boolean, j json?, by bytes?`.
fn vector_one() -> (Vec<ColumnShape>, Vec<RowValue>, Vec<u8>) {
    use ColumnType::*;
    let columns = vec![
        req(String),
        req(Integer),
        opt(Float),
        req(Boolean),
        opt(Json),
        opt(Bytes),
    ];
    let values = vec![
        string("t1"),
        RowValue::Integer(42),
        RowValue::Null,
        RowValue::Boolean(true),
        json(r#"{"a":1}"#),
        RowValue::Null,
    ];
    let bytes =
        unhex("24 02 00 00 00 74 31 2a 00 00 00 00 00 00 00 01 07 00 00 00 7b 22 61 22 3a 31 7d");
    (columns, values, bytes)
}

/// §5.3 second vector: nine columns, two bitmap bytes.
fn vector_two() -> (Vec<ColumnShape>, Vec<RowValue>, Vec<u8>) {
    use ColumnType::*;
    let columns = vec![
        req(String),
        opt(Integer),
        req(Float),
        opt(Boolean),
        opt(Json),
        req(Bytes),
        opt(BlobRef),
        opt(Crdt),
        opt(String),
    ];
    let values = vec![
        string("x"),
        RowValue::Null,
        RowValue::Float(1.5),
        RowValue::Null,
        RowValue::Null,
        RowValue::Bytes(vec![0x00, 0xff]),
        RowValue::Null,
        RowValue::Null,
        string("é"),
    ];
    let bytes =
        unhex("da 00 01 00 00 00 78 00 00 00 00 00 00 f8 3f 02 00 00 00 00 ff 02 00 00 00 c3 a9");
    (columns, values, bytes)
}

// ---------------------------------------------------------------------------
// Conformance checks C-077 … C-091

#[test]
fn c077_round_trip_encode_decode_is_identity() {
    use ColumnType::*;
    let columns = [
        req(String),
        req(Integer),
        req(Integer),
        req(Float),
        req(Boolean),
        req(Json),
        req(Bytes),
        opt(String),
    ];
    let values = vec![
        string("héllo"),
        RowValue::Integer(42),
        RowValue::Integer(MAX_SAFE),
        RowValue::Float(std::f64::consts::PI),
        RowValue::Boolean(true),
        json(r#"{"b":1,"a":[null,2]}"#),
        RowValue::Bytes(vec![0x00, 0xff, 0x80]),
        RowValue::Null,
    ];
    let payload = encode(&columns, &values).unwrap();
    let decoded = decode(&columns, &payload).unwrap();
    assert_eq!(decoded, values);
    assert_eq!(encode(&columns, &decoded).unwrap(), payload);
}

#[test]
fn c078_spec_test_vectors_both_ways() {
    for (columns, values, bytes) in [vector_one(), vector_two()] {
        assert_eq!(encode(&columns, &values).unwrap(), bytes);
        assert_eq!(decode(&columns, &bytes).unwrap(), values);
    }
}

#[test]
fn c079_float_bit_patterns_are_preserved() {
    let patterns: [u64; 7] = [
        0x7ff8_0000_dead_beef, // quiet NaN with payload bits
        0x7ff0_0000_0000_0001, // signalling NaN
        0xfff8_0000_0000_0042, // negative NaN with payload
        (-0.0f64).to_bits(),
        f64::INFINITY.to_bits(),
        f64::NEG_INFINITY.to_bits(),
        f64::MIN_POSITIVE.to_bits() - 1, // subnormal
    ];
    let columns = [req(ColumnType::Float)];
    for bits in patterns {
        let payload = encode(&columns, &[RowValue::Float(f64::from_bits(bits))]).unwrap();
        assert_eq!(
            payload[1..],
            bits.to_le_bytes(),
            "{bits:#x} encodes verbatim"
        );
        match decode(&columns, &payload).unwrap().as_slice() {
            [RowValue::Float(v)] => assert_eq!(v.to_bits(), bits, "{bits:#x} decodes verbatim"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn c080_decode_input_shorter_than_the_bitmap_is_truncated() {
    let (columns, _, _) = vector_two(); // nine columns: two bitmap bytes
    assert_decode_fails(&columns, &[], Reason::Truncated, 0);
    assert_decode_fails(&columns, &[0xda], Reason::Truncated, 8);
    assert_decode_fails(&[req(ColumnType::Boolean)], &[], Reason::Truncated, 0);
}

#[test]
fn c081_decode_length_prefix_beyond_input_is_truncated() {
    let columns = [req(ColumnType::Integer), req(ColumnType::String)];
    let mut payload = vec![0x00];
    payload.extend_from_slice(&7i64.to_le_bytes());
    payload.extend_from_slice(&5u32.to_le_bytes());
    payload.extend_from_slice(b"abc");
    assert_decode_fails(&columns, &payload, Reason::Truncated, 1);

    // A huge prefix is rejected before anything is allocated for it.
    let mut payload = vec![0x00];
    payload.extend_from_slice(&7i64.to_le_bytes());
    payload.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_decode_fails(&columns, &payload, Reason::Truncated, 1);

    // Input ending inside the prefix itself or a fixed-width value.
    assert_decode_fails(&columns, &[0x00, 7, 0, 0], Reason::Truncated, 0);
    let mut payload = vec![0x00];
    payload.extend_from_slice(&7i64.to_le_bytes());
    payload.extend_from_slice(&[5, 0]);
    assert_decode_fails(&columns, &payload, Reason::Truncated, 1);
}

#[test]
fn c082_decode_one_trailing_byte_is_rejected() {
    for (columns, _, mut bytes) in [vector_one(), vector_two()] {
        bytes.push(0x00);
        assert_decode_fails(&columns, &bytes, Reason::TrailingBytes, columns.len());
    }
    let no_columns: [ColumnShape; 0] = [];
    assert_decode_fails(&no_columns, &[0x00], Reason::TrailingBytes, 0);
}

#[test]
fn c083_decode_padding_bit_set_is_rejected() {
    let (columns, _, mut bytes) = vector_one(); // six columns: bits 6 and 7 are padding
    bytes[0] |= 0x40;
    assert_decode_fails(&columns, &bytes, Reason::NonzeroPadding, 6);
    let (columns, _, mut bytes) = vector_two(); // nine columns: bits 9..16 are padding
    bytes[1] |= 0x80;
    assert_decode_fails(&columns, &bytes, Reason::NonzeroPadding, 15);
}

#[test]
fn c084_decode_null_bit_on_non_nullable_column_is_rejected() {
    let (columns, _, mut bytes) = vector_one();
    bytes[0] |= 0x02; // column 1 (`n integer`) is not nullable
    assert_decode_fails(&columns, &bytes, Reason::NullInNonNullable, 1);
}

#[test]
fn c085_decode_boolean_byte_two_is_rejected() {
    let columns = [req(ColumnType::String), req(ColumnType::Boolean)];
    let mut payload = vec![0x00];
    payload.extend(prefixed(b"id"));
    payload.push(2);
    assert_decode_fails(&columns, &payload, Reason::InvalidBoolean, 1);
}

#[test]
fn c086_decode_invalid_utf8_string_is_rejected() {
    let columns = [req(ColumnType::String)];
    let mut payload = vec![0x00];
    payload.extend(prefixed(&[0xff, 0xfe]));
    assert_decode_fails(&columns, &payload, Reason::InvalidUtf8, 0);
    for column_type in [ColumnType::Json, ColumnType::BlobRef] {
        assert_decode_fails(&[req(column_type)], &payload, Reason::InvalidUtf8, 0);
    }
}

#[test]
fn c087_decode_invalid_json_is_rejected() {
    let columns = [req(ColumnType::Integer), opt(ColumnType::Json)];
    let mut payload = vec![0x00];
    payload.extend_from_slice(&1i64.to_le_bytes());
    payload.extend(prefixed(b"{a:1}"));
    assert_decode_fails(&columns, &payload, Reason::InvalidJson, 1);
}

#[test]
fn c088_decode_invalid_blob_ref_is_rejected() {
    let columns = [opt(ColumnType::BlobRef)];
    let mut payload = vec![0x00];
    payload.extend(prefixed(br#"{"id":"x"}"#));
    assert_decode_fails(&columns, &payload, Reason::InvalidBlobRef, 0);
}

#[test]
fn c089_decode_integer_two_to_the_53_is_out_of_range() {
    let columns = [req(ColumnType::Integer)];
    for value in [1i64 << 53, -(1i64 << 53), i64::MIN, i64::MAX] {
        let mut payload = vec![0x00];
        payload.extend_from_slice(&value.to_le_bytes());
        assert_decode_fails(&columns, &payload, Reason::IntegerOutOfRange, 0);
    }
    for value in [MAX_SAFE, -MAX_SAFE] {
        let mut payload = vec![0x00];
        payload.extend_from_slice(&value.to_le_bytes());
        assert_eq!(
            decode(&columns, &payload).unwrap(),
            [RowValue::Integer(value)]
        );
    }
}

#[test]
fn c090_encode_failures_carry_their_reasons() {
    use ColumnType::*;
    let columns = [req(String), req(Integer), opt(Json)];
    let good = [string("a"), RowValue::Integer(1), RowValue::Null];
    assert!(encode(&columns, &good).is_ok());

    assert_encode_fails(&columns, &good[..2], Reason::ColumnCountMismatch, 2);
    let mut too_many = good.to_vec();
    too_many.push(RowValue::Null);
    assert_encode_fails(&columns, &too_many, Reason::ColumnCountMismatch, 3);

    let wrong_variant = [string("a"), string("1"), RowValue::Null];
    assert_encode_fails(&columns, &wrong_variant, Reason::TypeMismatch, 1);
    let json_as_string = [string("a"), RowValue::Integer(1), string("{}")];
    assert_encode_fails(&columns, &json_as_string, Reason::TypeMismatch, 2);

    let null_in_required = [RowValue::Null, RowValue::Integer(1), RowValue::Null];
    assert_encode_fails(&columns, &null_in_required, Reason::NullInNonNullable, 0);

    for value in [1i64 << 53, -(1i64 << 53)] {
        let out_of_range = [string("a"), RowValue::Integer(value), RowValue::Null];
        assert_encode_fails(&columns, &out_of_range, Reason::IntegerOutOfRange, 1);
    }
}

#[test]
fn c091_error_details_name_positions_and_messages_leak_nothing() {
    let table = table(
        "tasks",
        &[
            ("private_id_column", ColumnType::String, false),
            ("private_count_column", ColumnType::Integer, false),
        ],
    );
    let secret_text = "secret-value-4711";
    let secret_number = 1i64 << 60;

    let encode_error = codec::encode_row(
        &table,
        &[string(secret_text), RowValue::Integer(secret_number)],
    )
    .unwrap_err();
    let mut payload = vec![0x00];
    payload.extend(prefixed(secret_text.as_bytes()));
    payload.extend_from_slice(&secret_number.to_le_bytes());
    let decode_error = codec::decode_row(&table, &payload).unwrap_err();

    for (error, code) in [
        (encode_error, ErrorCode::CodecEncodeFailed),
        (decode_error, ErrorCode::CodecDecodeFailed),
    ] {
        // `column` is the position of `private_count_column`.
        assert_failure(&error, code, Reason::IntegerOutOfRange, 1);
        assert_eq!(error.message(), code.default_message());
        for text in [error.to_string(), error.message().to_owned()] {
            for leak in ["private", "secret", "4711", &secret_number.to_string()] {
                assert!(!text.contains(leak), "{text:?} contains {leak:?}");
            }
        }
        for (key, value) in error.details() {
            for leak in ["private", "secret", "4711", &secret_number.to_string()] {
                assert!(!value.contains(leak), "{key} = {value:?} contains {leak:?}");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Further rules of §5

fn table(name: &str, columns: &[(&str, ColumnType, bool)]) -> CompiledTable {
    let columns: Vec<CompiledColumn> = columns
        .iter()
        .map(|&(name, column_type, nullable)| CompiledColumn {
            name: name.to_owned(),
            column_type,
            nullable,
            crdt_type: (column_type == ColumnType::Crdt).then(|| "counter".to_owned()),
            encrypted: false,
            declared_type: None,
        })
        .collect();
    CompiledTable {
        name: name.to_owned(),
        column_index: columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect::<BTreeMap<_, _>>(),
        columns,
        primary_key_index: 0,
        scope_patterns: Vec::new(),
        indexes: Vec::new(),
        materialize: true,
        declared_variables: Vec::new(),
        blob_ref_column_indices: Vec::new(),
        crdt_columns: Vec::new(),
        encrypted_column_indices: Vec::new(),
    }
}

fn layout(columns: &[(&str, &str, bool)]) -> Vec<LayoutColumn> {
    columns
        .iter()
        .map(|&(name, column_type, nullable)| LayoutColumn {
            name: name.to_owned(),
            column_type: column_type.to_owned(),
            nullable,
        })
        .collect()
}

#[test]
fn zero_columns_have_the_empty_payload() {
    let none: [ColumnShape; 0] = [];
    assert_eq!(encode(&none, &[]).unwrap(), Vec::<u8>::new());
    assert_eq!(decode(&none, &[]).unwrap(), Vec::<RowValue>::new());
    validate(&none, &[]).unwrap();
}

#[test]
fn row_helpers_use_the_table_columns_and_name_the_table() {
    let table = table(
        "tasks",
        &[
            ("id", ColumnType::String, false),
            ("done", ColumnType::Boolean, false),
            ("state", ColumnType::Crdt, true),
        ],
    );
    let values = [
        string("t1"),
        RowValue::Boolean(false),
        RowValue::Crdt(vec![1, 2, 3]),
    ];
    let payload = codec::encode_row(&table, &values).unwrap();
    assert_eq!(codec::decode_row(&table, &payload).unwrap(), values);
    codec::validate_row(&table, &payload).unwrap();

    let error = codec::decode_row(&table, &payload[..payload.len() - 1]).unwrap_err();
    assert_failure(&error, ErrorCode::CodecDecodeFailed, Reason::Truncated, 2);
    assert_eq!(error.get_detail("table"), Some("tasks"));
    let error = codec::validate_row(&table, &[0x01]).unwrap_err();
    assert_failure(
        &error,
        ErrorCode::CodecDecodeFailed,
        Reason::NullInNonNullable,
        0,
    );
    assert_eq!(error.get_detail("table"), Some("tasks"));
    let error = codec::encode_row(&table, &values[..1]).unwrap_err();
    assert_failure(
        &error,
        ErrorCode::CodecEncodeFailed,
        Reason::ColumnCountMismatch,
        1,
    );
    assert_eq!(error.get_detail("table"), Some("tasks"));
}

#[test]
fn compiled_columns_layouts_and_shapes_decode_alike() {
    let table = table(
        "t",
        &[
            ("id", ColumnType::String, false),
            ("meta", ColumnType::Json, true),
        ],
    );
    let stored = table.layout();
    let shapes: Vec<ColumnShape> = stored.iter().filter_map(ColumnShape::of).collect();
    let values = [string("a"), json("[1]")];
    let payload = encode(&table.columns, &values).unwrap();
    assert_eq!(encode(&stored, &values).unwrap(), payload);
    assert_eq!(encode(&shapes, &values).unwrap(), payload);
    let by_reference: Vec<&CompiledColumn> = table.columns.iter().collect();
    assert_eq!(decode(&by_reference, &payload).unwrap(), values);
    assert_eq!(decode(&stored, &payload).unwrap(), values);
}

#[test]
fn unknown_layout_type_fails_with_a_code_instead_of_panicking() {
    let stored = layout(&[("id", "string", false), ("geo", "geometry", true)]);
    let mut payload = vec![0x02];
    payload.extend(prefixed(b"a"));
    for bytes in [&payload[..], &[], &[0xff; 3]] {
        let error = decode(&stored, bytes).unwrap_err();
        assert_failure(
            &error,
            ErrorCode::CodecDecodeFailed,
            Reason::UnknownColumnType,
            1,
        );
        assert!(validate(&stored, bytes).is_err());
    }
    let error = encode(&stored, &[string("a"), RowValue::Null]).unwrap_err();
    assert_failure(
        &error,
        ErrorCode::CodecEncodeFailed,
        Reason::UnknownColumnType,
        1,
    );
}

#[test]
fn reencode_appends_nulls_for_appended_columns() {
    let old = layout(&[("id", "string", false), ("n", "integer", true)]);
    let new = table(
        "t",
        &[
            ("id", ColumnType::String, false),
            ("n", ColumnType::Integer, true),
            ("a", ColumnType::String, true),
            ("b", ColumnType::Json, true),
        ],
    );
    let payload = encode(&old, &[string("x"), RowValue::Integer(5)]).unwrap();
    let rewritten = reencode(&old, &new.columns, &payload).unwrap();
    assert_eq!(rewritten[0], 0b1100);
    assert_eq!(rewritten[1..], payload[1..]);
    assert_eq!(
        codec::decode_row(&new, &rewritten).unwrap(),
        [
            string("x"),
            RowValue::Integer(5),
            RowValue::Null,
            RowValue::Null
        ]
    );
    // Same columns: the payload is unchanged.
    assert_eq!(reencode(&old, &old, &payload).unwrap(), payload);

    // Appending past a bitmap byte boundary grows the bitmap.
    let eight: Vec<ColumnShape> = (0..8).map(|_| opt(ColumnType::Boolean)).collect();
    let nine: Vec<ColumnShape> = (0..9).map(|_| opt(ColumnType::Boolean)).collect();
    let values: Vec<RowValue> = (0..8).map(|i| RowValue::Boolean(i % 2 == 0)).collect();
    let payload = encode(&eight, &values).unwrap();
    let rewritten = reencode(&eight, &nine, &payload).unwrap();
    assert_eq!(rewritten[..2], [0x00, 0x01]);
    assert_eq!(rewritten[2..], payload[1..]);
}

#[test]
fn reencode_fails_closed() {
    let old = [req(ColumnType::String)];
    let new = [req(ColumnType::String), opt(ColumnType::Integer)];
    let error = reencode(&old, &new, &[0x00, 1, 0]).unwrap_err();
    assert_failure(&error, ErrorCode::CodecDecodeFailed, Reason::Truncated, 0);

    let payload = encode(&old, &[string("x")]).unwrap();
    let appended_required = [req(ColumnType::String), req(ColumnType::Integer)];
    let error = reencode(&old, &appended_required, &payload).unwrap_err();
    assert_failure(
        &error,
        ErrorCode::CodecEncodeFailed,
        Reason::NullInNonNullable,
        1,
    );
    let changed_type = [req(ColumnType::Json)];
    let error = reencode(&old, &changed_type, &payload).unwrap_err();
    assert_failure(
        &error,
        ErrorCode::CodecEncodeFailed,
        Reason::TypeMismatch,
        0,
    );
    let none: [ColumnShape; 0] = [];
    let error = reencode(&old, &none, &payload).unwrap_err();
    assert_failure(
        &error,
        ErrorCode::CodecEncodeFailed,
        Reason::ColumnCountMismatch,
        0,
    );
}

#[test]
fn empty_values_are_distinct_from_null() {
    use ColumnType::*;
    let columns = [opt(String), opt(Bytes), opt(Crdt)];
    let values = [
        string(""),
        RowValue::Bytes(Vec::new()),
        RowValue::Crdt(Vec::new()),
    ];
    let payload = encode(&columns, &values).unwrap();
    assert_eq!(payload, unhex("00 00000000 00000000 00000000"));
    assert_eq!(decode(&columns, &payload).unwrap(), values);
}

#[test]
fn encode_validates_json_and_blob_ref_text() {
    let json_column = [req(ColumnType::Json)];
    for bad in [
        "",
        " ",
        "{a:1}",
        "[1,]",
        "01",
        "1 2",
        "\u{feff}1",
        "{\"a\":1}x",
        "NaN",
    ] {
        assert_encode_fails(&json_column, &[json(bad)], Reason::InvalidJson, 0);
    }
    let blob_column = [opt(ColumnType::BlobRef)];
    for bad in [
        r#"{"id":"x"}"#,
        r#"{"blobId":""}"#,
        r#"{"blobId":1}"#,
        r#"{"blobId":"x","blobId":""}"#,
        r#"[{"blobId":"x"}]"#,
        r#"{"inner":{"blobId":"x"}}"#,
        r#""blobId""#,
        "{blobId:1}",
        "",
    ] {
        assert_encode_fails(&blob_column, &[blob_ref(bad)], Reason::InvalidBlobRef, 0);
    }
    for good in [
        r#"{"blobId":"sha256:ab"}"#,
        r#" { "byteLength" : 3, "blobId" : "x" } "#,
        r#"{"blob\u0049d":"x"}"#,
        r#"{"blobId":"","blobId":"\u0000"}"#,
        r#"{"blobId":"x","meta":{"blobId":""},"n":1e999}"#,
    ] {
        let payload = encode(&blob_column, &[blob_ref(good)]).unwrap();
        assert_eq!(decode(&blob_column, &payload).unwrap(), [blob_ref(good)]);
    }
}

#[test]
fn json_text_is_kept_verbatim_and_follows_rfc_8259() {
    let column = [req(ColumnType::Json)];
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let accepted = [
        "0",
        "-0.0e+0",
        "1E-7",
        "1e400",
        "123456789012345678901234567890",
        "\"\"",
        "\"\\ud800\"",
        "\"\\/\\b\\f\\n\\r\\t\\u00e9 é \u{7f}\"",
        "null",
        " \t\r\n{ \"a\" : [ true , false , null ] , \"a\" : {} }\n",
        r#"{ "spaced" : true ,  "n" : 1.50 }"#,
        &deep,
    ];
    for text in accepted {
        let payload = encode(&column, &[json(text)]).unwrap();
        assert_eq!(payload[5..], *text.as_bytes(), "stored verbatim");
        assert_eq!(decode(&column, &payload).unwrap(), [json(text)]);
    }
    let deep_unclosed = "[".repeat(100_000);
    let rejected = [
        "",
        "\t",
        "tru",
        "True",
        "nul",
        "+1",
        "1.",
        ".5",
        "1e",
        "1e+",
        "-",
        "00",
        "0x10",
        "Infinity",
        "'a'",
        "\"a",
        "\"\\x\"",
        "\"\\u12\"",
        "\"\u{1}\"",
        "\"a\nb\"",
        "[1 2]",
        "[,1]",
        "{\"a\" 1}",
        "{\"a\":}",
        "{1:2}",
        "{\"a\":1,}",
        "[]]",
        "{}}",
        "[}",
        "1\u{a0}",
        "/* */ 1",
        &deep_unclosed,
    ];
    for text in rejected {
        assert!(!codec::is_valid_json(text), "{text:?} must be rejected");
        assert_encode_fails(&column, &[json(text)], Reason::InvalidJson, 0);
    }
}

#[test]
fn jsonb_representability_follows_section_5_5() {
    let representable = [
        r#"{"a":"\u0001 \u00e9 \ud83d\ude00"}"#,
        r#""\\u0000""#, // an escaped backslash followed by text, not an escape
        "1e15999",
        "1e-16000",
        "1.5e-15999",
        "0.0001e16003",
        "0e99999",
        // Zero written with fraction digits and a large exponent is still
        // zero: no digit before the point (`jsonb` stores `0`).
        "0.0e20000",
        "0.00e16001",
        "12345.6789",
        r#"{"a":1,"a":2}"#,
    ];
    for text in representable {
        assert!(
            json_projection_is_representable_in_jsonb(text),
            "{text} is representable"
        );
    }
    let not_representable = [
        r#""\u0000""#,
        r#"{"k\u0000":1}"#,
        r#"["ok", {"deep": "a\u0000b"}]"#,
        "1e16000",
        "-1e16000",
        "1e-16001",
        "1.5e-16000",
        "[1, 2e99999999999999999999]",
        r#""\ud83d""#,
        r#""\ude00""#,
        r#""\ud83d x""#,
        r#""\ude00\ud83d""#,
        "{a:1}",
        // A later representable escape does not undo an earlier refusal.
        r#"["\u0000", "\u0041"]"#,
        r#"[1e16000, "\u0041"]"#,
    ];
    for text in not_representable {
        assert!(
            !json_projection_is_representable_in_jsonb(text),
            "{text} is not representable"
        );
    }
    let long_integer = "9".repeat(16_000);
    assert!(json_projection_is_representable_in_jsonb(&long_integer));
    assert!(!json_projection_is_representable_in_jsonb(&format!(
        "{long_integer}9"
    )));
    let long_fraction = format!("0.{}", "1".repeat(16_001));
    assert!(!json_projection_is_representable_in_jsonb(&long_fraction));
}

#[test]
fn decode_reports_the_first_failing_column() {
    use ColumnType::*;
    let columns = [req(Boolean), req(Integer), req(String)];
    let mut payload = vec![0x00, 7];
    payload.extend_from_slice(&(1i64 << 60).to_le_bytes());
    payload.extend(prefixed(&[0xff]));
    assert_decode_fails(&columns, &payload, Reason::InvalidBoolean, 0);
    // Padding is checked before any value and before nullability.
    let mut payload = vec![0xff, 1];
    payload.extend_from_slice(&1i64.to_le_bytes());
    assert_decode_fails(&columns, &payload, Reason::NonzeroPadding, 3);
}

#[test]
fn references_to_columns_keep_their_type_and_nullability() {
    let required = req(ColumnType::Integer);
    let optional = opt(ColumnType::Integer);
    let by_ref: Vec<&ColumnShape> = vec![&required, &optional];
    let values = [RowValue::Integer(7), RowValue::Null];
    let payload = encode(&by_ref, &values).unwrap();
    assert_eq!(decode(&by_ref, &payload).unwrap(), values);
    let error = encode(&by_ref, &[RowValue::Null, RowValue::Null]).unwrap_err();
    assert_failure(
        &error,
        ErrorCode::CodecEncodeFailed,
        Reason::NullInNonNullable,
        0,
    );
    assert_eq!(ColumnShape::of(&&optional), Some(optional));
    assert_eq!(ColumnShape::of(&&required), Some(required));
}

#[test]
fn a_stored_layout_keeps_each_column_nullability() {
    let stored = layout(&[("id", "string", false), ("note", "string", true)]);
    let values = [string("r1"), RowValue::Null];
    let payload = encode(&stored, &values).unwrap();
    assert_eq!(decode(&stored, &payload).unwrap(), values);
    // The bitmap marks column 0 NULL: refused, as the layout requires it.
    let error = decode(&stored, &[0x03]).unwrap_err();
    assert_failure(
        &error,
        ErrorCode::CodecDecodeFailed,
        Reason::NullInNonNullable,
        0,
    );
    let error = encode(&stored, &[RowValue::Null, RowValue::Null]).unwrap_err();
    assert_failure(
        &error,
        ErrorCode::CodecEncodeFailed,
        Reason::NullInNonNullable,
        0,
    );
}
