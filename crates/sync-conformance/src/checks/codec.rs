//! §3 Row codec, C-077…C-091.
//!
//! Pure checks of `sync_core::codec` (`schema-and-migrations.md` §5). They
//! run on every dialect; the context is unused.

use sync_core::codec::{self, ColumnShape};
use sync_core::{ColumnType, Error, ErrorCode, RowValue};

use crate::check::{
    expect_code, expect_detail, expect_message_free_of, CheckDef, CheckResult, Failure,
};
use crate::context::Ctx;
use crate::fixtures::{fix1, task_values};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "codec";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-077",
        "encode(decode(p)) == p for every column type",
        c077_round_trip,
    ),
    check(
        GROUP,
        "C-078",
        "both §5.3 test vectors, exact bytes both ways",
        c078_test_vectors,
    ),
    check(
        GROUP,
        "C-079",
        "float NaN payloads, -0.0 and +inf keep their bits",
        c079_float_bits_preserved,
    ),
    check(
        GROUP,
        "C-080",
        "decode: input shorter than the bitmap is truncated",
        c080_shorter_than_bitmap,
    ),
    check(
        GROUP,
        "C-081",
        "decode: a length prefix beyond the input is truncated",
        c081_length_beyond_input,
    ),
    check(
        GROUP,
        "C-082",
        "decode: one extra trailing byte is trailing_bytes",
        c082_trailing_byte,
    ),
    check(
        GROUP,
        "C-083",
        "decode: a set padding bit is nonzero_padding",
        c083_padding_bit,
    ),
    check(
        GROUP,
        "C-084",
        "decode: NULL bit on a non-nullable column",
        c084_null_in_non_nullable,
    ),
    check(
        GROUP,
        "C-085",
        "decode: boolean byte 2 is invalid_boolean",
        c085_invalid_boolean,
    ),
    check(
        GROUP,
        "C-086",
        "decode: string bytes ff fe are invalid_utf8",
        c086_invalid_utf8,
    ),
    check(
        GROUP,
        "C-087",
        "decode: json text {a:1} is invalid_json",
        c087_invalid_json,
    ),
    check(
        GROUP,
        "C-088",
        "decode: blob_ref {\"id\":\"x\"} is invalid_blob_ref",
        c088_invalid_blob_ref,
    ),
    check(
        GROUP,
        "C-089",
        "decode: integer 2^53 is integer_out_of_range",
        c089_integer_out_of_range,
    ),
    check(
        GROUP,
        "C-090",
        "encode failures carry their reasons",
        c090_encode_failures,
    ),
    check(
        GROUP,
        "C-091",
        "codec errors name positions, never names or values",
        c091_error_details_positional,
    ),
];

const MAX_SAFE: i64 = (1 << 53) - 1;

fn req(column_type: ColumnType) -> ColumnShape {
    ColumnShape::required(column_type)
}

fn opt(column_type: ColumnType) -> ColumnShape {
    ColumnShape::optional(column_type)
}

/// Bytes from space-separated hex pairs.
fn hex(text: &str) -> CheckResult<Vec<u8>> {
    text.split_whitespace()
        .map(|pair| {
            u8::from_str_radix(pair, 16).map_err(|_| Failure::new(format!("bad hex {pair:?}")))
        })
        .collect()
}

/// A u32 little-endian length prefix followed by `bytes`.
fn prefixed(bytes: &[u8]) -> Vec<u8> {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    let mut out = len.to_le_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

/// A one-column payload: the bitmap byte then the value bytes.
fn one_column(bitmap: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![bitmap];
    out.extend_from_slice(value);
    out
}

/// Decodes `payload` under `columns`, expecting `decode_failed` with `reason`.
fn expect_decode_reason(
    columns: &[ColumnShape],
    payload: &[u8],
    reason: &str,
) -> CheckResult<Error> {
    let error = expect_code(
        codec::decode(columns, payload),
        ErrorCode::CodecDecodeFailed,
        &format!("decode {payload:02x?}"),
    )?;
    expect_detail(&error, "reason", reason)?;
    Ok(error)
}

fn encode(columns: &[ColumnShape], values: &[RowValue]) -> CheckResult<Vec<u8>> {
    codec::encode(columns, values).map_err(|e| Failure::new(format!("encode {values:?}: {e:?}")))
}

fn decode(columns: &[ColumnShape], payload: &[u8]) -> CheckResult<Vec<RowValue>> {
    codec::decode(columns, payload)
        .map_err(|e| Failure::new(format!("decode {payload:02x?}: {e:?}")))
}

fn c077_round_trip(_ctx: &mut Ctx<'_>) -> CheckResult {
    use ColumnType as T;
    let columns = [
        req(T::String),
        req(T::Integer),
        req(T::Integer),
        req(T::Float),
        req(T::Boolean),
        req(T::Json),
        req(T::Bytes),
        opt(T::String),
    ];
    let values = vec![
        RowValue::String("héllo".to_owned()),
        RowValue::Integer(42),
        RowValue::Integer(MAX_SAFE),
        RowValue::Float(std::f64::consts::PI),
        RowValue::Boolean(true),
        RowValue::Json(r#"{"b":1,"a":[null,2]}"#.to_owned()),
        RowValue::Bytes(vec![0x00, 0xff, 0x80]),
        RowValue::Null,
    ];
    let payload = encode(&columns, &values)?;
    let decoded = decode(&columns, &payload)?;
    check_eq!(decoded, values, "decode(encode(values))");
    check_eq!(encode(&columns, &decoded)?, payload, "encode(decode(p))");
    Ok(())
}

fn c078_test_vectors(_ctx: &mut Ctx<'_>) -> CheckResult {
    use ColumnType as T;
    let first = (
        vec![
            req(T::String),
            req(T::Integer),
            opt(T::Float),
            req(T::Boolean),
            opt(T::Json),
            opt(T::Bytes),
        ],
        vec![
            RowValue::String("t1".to_owned()),
            RowValue::Integer(42),
            RowValue::Null,
            RowValue::Boolean(true),
            RowValue::Json(r#"{"a":1}"#.to_owned()),
            RowValue::Null,
        ],
        hex("24 02 00 00 00 74 31 2a 00 00 00 00 00 00 00 01 07 00 00 00 7b 22 61 22 3a 31 7d")?,
    );
    let second = (
        vec![
            req(T::String),
            opt(T::Integer),
            req(T::Float),
            opt(T::Boolean),
            opt(T::Json),
            req(T::Bytes),
            opt(T::BlobRef),
            opt(T::Crdt),
            opt(T::String),
        ],
        vec![
            RowValue::String("x".to_owned()),
            RowValue::Null,
            RowValue::Float(1.5),
            RowValue::Null,
            RowValue::Null,
            RowValue::Bytes(vec![0x00, 0xff]),
            RowValue::Null,
            RowValue::Null,
            RowValue::String("é".to_owned()),
        ],
        hex("da 00 01 00 00 00 78 00 00 00 00 00 00 f8 3f 02 00 00 00 00 ff 02 00 00 00 c3 a9")?,
    );
    for (n, (columns, values, bytes)) in [first, second].into_iter().enumerate() {
        check_eq!(
            encode(&columns, &values)?,
            bytes,
            "vector {} encoded",
            n + 1
        );
        check_eq!(
            decode(&columns, &bytes)?,
            values,
            "vector {} decoded",
            n + 1
        );
    }
    Ok(())
}

fn c079_float_bits_preserved(_ctx: &mut Ctx<'_>) -> CheckResult {
    let patterns: [u64; 5] = [
        0x7ff8_0000_dead_beef,
        0x7ff0_0000_0000_0001,
        0xfff8_0000_0000_0042,
        (-0.0f64).to_bits(),
        f64::INFINITY.to_bits(),
    ];
    let columns = [req(ColumnType::Float)];
    for bits in patterns {
        let payload = encode(&columns, &[RowValue::Float(f64::from_bits(bits))])?;
        check_eq!(
            payload,
            one_column(0, &bits.to_le_bytes()),
            "payload of {bits:#018x}"
        );
        match decode(&columns, &payload)?.as_slice() {
            [RowValue::Float(value)] => check_eq!(value.to_bits(), bits, "decoded bits"),
            other => return Err(Failure::new(format!("decoded {other:?} for {bits:#018x}"))),
        }
    }
    Ok(())
}

fn c080_shorter_than_bitmap(_ctx: &mut Ctx<'_>) -> CheckResult {
    let columns = vec![opt(ColumnType::String); 9];
    expect_decode_reason(&columns, &[0x00], "truncated")?;
    expect_decode_reason(&[req(ColumnType::Boolean)], &[], "truncated")?;
    Ok(())
}

fn c081_length_beyond_input(_ctx: &mut Ctx<'_>) -> CheckResult {
    let mut value = 5u32.to_le_bytes().to_vec();
    value.push(b'a');
    expect_decode_reason(
        &[req(ColumnType::String)],
        &one_column(0, &value),
        "truncated",
    )?;
    expect_decode_reason(
        &[req(ColumnType::Bytes)],
        &one_column(0, &[0x02, 0x00]),
        "truncated",
    )?;
    Ok(())
}

fn c082_trailing_byte(_ctx: &mut Ctx<'_>) -> CheckResult {
    let columns = [req(ColumnType::Boolean)];
    check_eq!(
        decode(&columns, &[0x00, 0x01])?,
        [RowValue::Boolean(true)],
        "valid payload"
    );
    expect_decode_reason(&columns, &[0x00, 0x01, 0x00], "trailing_bytes")?;
    Ok(())
}

fn c083_padding_bit(_ctx: &mut Ctx<'_>) -> CheckResult {
    let columns = [req(ColumnType::String)];
    expect_decode_reason(
        &columns,
        &one_column(0x02, &prefixed(b"a")),
        "nonzero_padding",
    )?;
    expect_decode_reason(
        &columns,
        &one_column(0x80, &prefixed(b"a")),
        "nonzero_padding",
    )?;
    Ok(())
}

fn c084_null_in_non_nullable(_ctx: &mut Ctx<'_>) -> CheckResult {
    expect_decode_reason(&[req(ColumnType::String)], &[0x01], "null_in_non_nullable")?;
    Ok(())
}

fn c085_invalid_boolean(_ctx: &mut Ctx<'_>) -> CheckResult {
    expect_decode_reason(
        &[req(ColumnType::Boolean)],
        &[0x00, 0x02],
        "invalid_boolean",
    )?;
    Ok(())
}

fn c086_invalid_utf8(_ctx: &mut Ctx<'_>) -> CheckResult {
    expect_decode_reason(
        &[req(ColumnType::String)],
        &one_column(0, &prefixed(&[0xff, 0xfe])),
        "invalid_utf8",
    )?;
    Ok(())
}

fn c087_invalid_json(_ctx: &mut Ctx<'_>) -> CheckResult {
    expect_decode_reason(
        &[req(ColumnType::Json)],
        &one_column(0, &prefixed(b"{a:1}")),
        "invalid_json",
    )?;
    Ok(())
}

fn c088_invalid_blob_ref(_ctx: &mut Ctx<'_>) -> CheckResult {
    let columns = [req(ColumnType::BlobRef)];
    expect_decode_reason(
        &columns,
        &one_column(0, &prefixed(br#"{"id":"x"}"#)),
        "invalid_blob_ref",
    )?;
    let valid = one_column(0, &prefixed(br#"{"blobId":"x"}"#));
    check_eq!(
        decode(&columns, &valid)?,
        [RowValue::BlobRef(r#"{"blobId":"x"}"#.to_owned())],
        "valid BlobRef"
    );
    Ok(())
}

fn c089_integer_out_of_range(_ctx: &mut Ctx<'_>) -> CheckResult {
    let columns = [req(ColumnType::Integer)];
    for value in [1i64 << 53, -(1i64 << 53)] {
        expect_decode_reason(
            &columns,
            &one_column(0, &value.to_le_bytes()),
            "integer_out_of_range",
        )?;
    }
    check_eq!(
        decode(&columns, &one_column(0, &MAX_SAFE.to_le_bytes()))?,
        [RowValue::Integer(MAX_SAFE)],
        "2^53 - 1 decodes"
    );
    Ok(())
}

fn c090_encode_failures(_ctx: &mut Ctx<'_>) -> CheckResult {
    use ColumnType as T;
    let cases: [(&str, ColumnShape, Vec<RowValue>, &str); 4] = [
        (
            "wrong value count",
            req(T::String),
            vec![],
            "column_count_mismatch",
        ),
        (
            "wrong variant",
            req(T::String),
            vec![RowValue::Integer(1)],
            "type_mismatch",
        ),
        (
            "NULL in non-nullable",
            req(T::String),
            vec![RowValue::Null],
            "null_in_non_nullable",
        ),
        (
            "2^53",
            req(T::Integer),
            vec![RowValue::Integer(1 << 53)],
            "integer_out_of_range",
        ),
    ];
    for (what, column, values, reason) in cases {
        let error = expect_code(
            codec::encode(&[column], &values),
            ErrorCode::CodecEncodeFailed,
            what,
        )?;
        expect_detail(&error, "reason", reason)?;
    }
    Ok(())
}

/// Fails unless `error` names column `position` and leaks none of `needles`.
fn expect_positional(error: &Error, position: usize, needles: &[&str]) -> CheckResult {
    expect_detail(error, "column", &position.to_string())?;
    expect_message_free_of(error, needles)?;
    for (key, value) in error.details() {
        check!(
            !needles.iter().any(|n| value.contains(n)),
            "details.{key} = {value:?} leaks a column name or value"
        );
    }
    Ok(())
}

fn c091_error_details_positional(_ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let tasks = schema
        .table("tasks")
        .ok_or_else(|| Failure::new("FIX1 has no tasks"))?;

    let mut values = task_values(&schema, "t1", "p1", "zzzz-title");
    values[4] = RowValue::Integer(1 << 53);
    let error = expect_code(
        codec::encode_row(tasks, &values),
        ErrorCode::CodecEncodeFailed,
        "priority 2^53",
    )?;
    expect_positional(&error, 4, &["priority", "9007199254740992"])?;

    let payload = codec::encode_row(tasks, &task_values(&schema, "t1", "p1", "zzzz-title"))?;
    let start = payload
        .windows(4)
        .position(|w| w == b"zzzz")
        .ok_or_else(|| Failure::new("title bytes not found in payload"))?;
    let mut corrupt = payload;
    corrupt[start] = 0xff;
    let error = expect_code(
        codec::decode_row(tasks, &corrupt),
        ErrorCode::CodecDecodeFailed,
        "title not UTF-8",
    )?;
    expect_detail(&error, "reason", "invalid_utf8")?;
    expect_positional(&error, 2, &["title", "zzz-title"])?;
    Ok(())
}
