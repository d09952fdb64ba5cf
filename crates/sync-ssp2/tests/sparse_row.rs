//! The wire version 3 sparse row: each rule with a payload that breaks
//! exactly it, the order in which they are checked, and the full row.

use sync_ssp2::{
    decode_sparse_row, encode_sparse_row, full_row_suffix, Column, ColumnType, ColumnValue,
    DecodeError, SparseRow, SparseRowViolation,
};

/// Nine columns, so the presence bitmap spans two bytes with seven
/// padding bits: `id` (key), `title`, `n` (nullable), `done`, `body`
/// (nullable), `score`, `tags` (json, nullable), `data` (bytes), `doc`
/// (crdt, nullable).
fn columns() -> Vec<Column> {
    [
        ("id", ColumnType::String, false),
        ("title", ColumnType::String, false),
        ("n", ColumnType::Integer, true),
        ("done", ColumnType::Boolean, false),
        ("body", ColumnType::String, true),
        ("score", ColumnType::Float, false),
        ("tags", ColumnType::Json, true),
        ("data", ColumnType::Bytes, false),
        ("doc", ColumnType::Crdt, true),
    ]
    .into_iter()
    .map(|(name, column_type, nullable)| Column {
        name: name.into(),
        column_type,
        nullable,
    })
    .collect()
}

fn str_value(s: &str) -> Vec<u8> {
    let mut out = (s.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

fn violation(bytes: &[u8]) -> Option<SparseRowViolation> {
    match decode_sparse_row(&columns(), 0, bytes) {
        Err(DecodeError::SparseRow { violation }) => Some(violation),
        _ => None,
    }
}

#[test]
fn a_partial_row_with_a_present_null_round_trips() {
    let row = SparseRow::new(vec![
        Some(ColumnValue::String("r1".into())),
        None,
        Some(ColumnValue::Null),
        Some(ColumnValue::Boolean(true)),
        None,
        None,
        None,
        None,
        None,
    ]);
    let bytes = encode_sparse_row(&columns(), 0, &row).unwrap();
    // presence: id, n, done = bits 0, 2, 3; one null bit (n is the 2nd
    // present column); then "r1" and the bool.
    let mut expected = vec![0b0000_1101, 0, 0b0000_0010];
    expected.extend(str_value("r1"));
    expected.push(1);
    assert_eq!(bytes, expected);
    assert_eq!(decode_sparse_row(&columns(), 0, &bytes).unwrap(), row);
    assert_eq!(row.presence_bitmap(), vec![0b0000_1101, 0]);
    assert!(!row.is_full());
    assert_eq!(full_row_suffix(9, &bytes), None);
}

#[test]
fn p1_a_presence_padding_bit_is_refused() {
    // Only the key present, plus padding bit 9 set.
    let mut bytes = vec![0b0000_0001, 0b0000_0010, 0];
    bytes.extend(str_value("r1"));
    assert_eq!(violation(&bytes), Some(SparseRowViolation::PresencePadding));
}

#[test]
fn p2_an_absent_primary_key_is_refused() {
    let mut bytes = vec![0b0000_0010, 0, 0];
    bytes.extend(str_value("t"));
    assert_eq!(
        violation(&bytes),
        Some(SparseRowViolation::PrimaryKeyAbsent)
    );
    // A key index past the columns reads as absent, never a panic.
    assert!(matches!(
        decode_sparse_row(&columns(), 9, &bytes),
        Err(DecodeError::SparseRow {
            violation: SparseRowViolation::PrimaryKeyAbsent
        })
    ));
}

#[test]
fn p3_a_null_for_an_absent_column_is_refused() {
    // One present column (the key); null bit 1 names a second one.
    let mut bytes = vec![0b0000_0001, 0, 0b0000_0010];
    bytes.extend(str_value("r1"));
    assert_eq!(violation(&bytes), Some(SparseRowViolation::NullPadding));
}

#[test]
fn p4_a_null_in_a_non_nullable_present_column_is_refused() {
    // id and title present; title (non-nullable) marked null.
    let mut bytes = vec![0b0000_0011, 0, 0b0000_0010];
    bytes.extend(str_value("r1"));
    assert_eq!(
        violation(&bytes),
        Some(SparseRowViolation::NullInNonNullable)
    );
}

#[test]
fn p5_a_value_that_does_not_decode_is_the_full_row_codecs_error() {
    // id and done present; the bool byte is 2.
    let mut bytes = vec![0b0000_1001, 0, 0];
    bytes.extend(str_value("r1"));
    bytes.push(2);
    assert!(matches!(
        decode_sparse_row(&columns(), 0, &bytes),
        Err(DecodeError::InvalidBool { .. })
    ));
    // A json column whose text is no JSON document.
    let mut bytes = vec![0b0100_0001, 0, 0];
    bytes.extend(str_value("r1"));
    bytes.extend(str_value("{nope"));
    assert!(matches!(
        decode_sparse_row(&columns(), 0, &bytes),
        Err(DecodeError::InvalidJson { .. })
    ));
}

#[test]
fn p6_bytes_after_the_last_present_value_are_refused() {
    let mut bytes = vec![0b0000_0001, 0, 0];
    bytes.extend(str_value("r1"));
    bytes.push(0);
    assert!(matches!(
        decode_sparse_row(&columns(), 0, &bytes),
        Err(DecodeError::TrailingBytes { .. })
    ));
}

#[test]
fn where_two_rules_are_broken_the_first_in_order_decides() {
    // P1 and P2: padding set and no key.
    assert_eq!(
        violation(&[0b0000_0010, 0b1000_0000, 0]),
        Some(SparseRowViolation::PresencePadding)
    );
    // P2 and P3: no key, and a null for an absent column.
    assert_eq!(
        violation(&[0b0000_0010, 0, 0b1111_1110]),
        Some(SparseRowViolation::PrimaryKeyAbsent)
    );
    // P3 and P4: title null (non-nullable) and a padding null bit.
    let mut bytes = vec![0b0000_0011, 0, 0b0000_0110];
    bytes.extend(str_value("r1"));
    assert_eq!(violation(&bytes), Some(SparseRowViolation::NullPadding));
    // P4 before P5 when the null column comes first: title null, done 2.
    let mut bytes = vec![0b0000_1011, 0, 0b0000_0010];
    bytes.extend(str_value("r1"));
    bytes.push(2);
    assert_eq!(
        violation(&bytes),
        Some(SparseRowViolation::NullInNonNullable)
    );
    // P5 before P4 when the bad value comes first: done 2, then data
    // (non-nullable) null.
    let mut bytes = vec![0b1000_1001, 0, 0b0000_0100];
    bytes.extend(str_value("r1"));
    bytes.push(2);
    assert!(matches!(
        decode_sparse_row(&columns(), 0, &bytes),
        Err(DecodeError::InvalidBool { .. })
    ));
    // Input shorter than the presence bitmap is refused before any rule.
    assert!(matches!(
        decode_sparse_row(&columns(), 0, &[0b0000_0001]),
        Err(DecodeError::Truncated { .. } | DecodeError::ClaimExceedsInput { .. })
    ));
}

#[test]
fn every_violation_is_an_invalid_request_with_its_own_message() {
    for v in [
        SparseRowViolation::PresencePadding,
        SparseRowViolation::PrimaryKeyAbsent,
        SparseRowViolation::NullPadding,
        SparseRowViolation::NullInNonNullable,
    ] {
        let e = DecodeError::SparseRow { violation: v };
        assert_eq!(e.code(), "sync.invalid_request");
        assert_eq!(e.to_string(), v.message());
    }
}

#[test]
fn the_encoder_refuses_what_the_decoder_would() {
    let columns = columns();
    let mut slots = vec![None; 9];
    slots[1] = Some(ColumnValue::String("t".into()));
    assert!(encode_sparse_row(&columns, 0, &SparseRow::new(slots.clone())).is_err());
    slots[0] = Some(ColumnValue::String("r1".into()));
    slots[1] = Some(ColumnValue::Null);
    assert!(encode_sparse_row(&columns, 0, &SparseRow::new(slots.clone())).is_err());
    slots[1] = Some(ColumnValue::Integer(1));
    assert!(encode_sparse_row(&columns, 0, &SparseRow::new(slots.clone())).is_err());
    assert!(encode_sparse_row(&columns, 0, &SparseRow::new(vec![None; 8])).is_err());
}

#[test]
fn the_full_row_suffix_needs_exactly_every_presence_bit() {
    assert_eq!(full_row_suffix(9, &[0xff, 0x01, 7, 8]), Some(&[7u8, 8][..]));
    assert_eq!(full_row_suffix(9, &[0xff, 0x03, 7]), None);
    assert_eq!(full_row_suffix(9, &[0xff, 0x00, 7]), None);
    assert_eq!(full_row_suffix(9, &[0xff]), None);
    assert_eq!(full_row_suffix(8, &[0xff]), Some(&[][..]));
    assert_eq!(full_row_suffix(0, &[1]), Some(&[1u8][..]));
}
