//! The sparse payload of wire version 3 in the row codec: each rule with a
//! payload that breaks exactly it (the reason and the column it names), the
//! order of the rules, round trips, and the full payload inside a sparse
//! payload that writes every column.

use proptest::prelude::*;
use sync_core::codec::{
    decode_sparse, encode, encode_sparse, full_payload_of_sparse, ColumnShape, Reason,
};
use sync_core::{ColumnType, ErrorCode, RowValue};

/// Nine columns (two-byte presence bitmap, seven padding bits): `id` key,
/// `title`, `n?`, `done`, `body?`, `score`, `tags?` (json), `data`
/// (bytes), `doc?` (crdt).
fn columns() -> Vec<ColumnShape> {
    use ColumnType::*;
    vec![
        ColumnShape::required(String),
        ColumnShape::required(String),
        ColumnShape::optional(Integer),
        ColumnShape::required(Boolean),
        ColumnShape::optional(String),
        ColumnShape::required(Float),
        ColumnShape::optional(Json),
        ColumnShape::required(Bytes),
        ColumnShape::optional(Crdt),
    ]
}

fn text(s: &str) -> Vec<u8> {
    let mut out = (s.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

/// The reason and column of a refusal.
fn refusal(payload: &[u8]) -> (String, u64) {
    let error = decode_sparse(&columns(), 0, payload).unwrap_err();
    assert_eq!(error.code(), ErrorCode::CodecDecodeFailed);
    (
        error.get_detail("reason").unwrap_or_default().to_owned(),
        error
            .get_detail("column")
            .and_then(|c| c.parse().ok())
            .unwrap_or(u64::MAX),
    )
}

#[test]
fn a_partial_payload_decodes_to_its_slots() {
    let mut p = vec![0b0000_1101, 0, 0b0000_0010];
    p.extend(text("r1"));
    p.push(1);
    let slots = decode_sparse(&columns(), 0, &p).unwrap();
    assert_eq!(slots[0], Some(RowValue::String("r1".into())));
    assert_eq!(slots[1], None);
    assert_eq!(slots[2], Some(RowValue::Null));
    assert_eq!(slots[3], Some(RowValue::Boolean(true)));
    assert!(slots[4..].iter().all(Option::is_none));
    assert_eq!(encode_sparse(&columns(), 0, &slots).unwrap(), p);
    assert_eq!(full_payload_of_sparse(9, &p), None);
}

#[test]
fn each_rule_names_its_reason_and_column() {
    // Presence padding bit 9.
    let mut p = vec![0b0000_0001, 0b0000_0010, 0];
    p.extend(text("r1"));
    assert_eq!(refusal(&p), ("presence_padding".into(), 9));
    // No key.
    let mut p = vec![0b0000_0010, 0, 0];
    p.extend(text("t"));
    assert_eq!(refusal(&p), ("primary_key_absent".into(), 0));
    // A null for an absent column: one present column, null bit 1.
    let mut p = vec![0b0000_0001, 0, 0b0000_0010];
    p.extend(text("r1"));
    assert_eq!(refusal(&p), ("nonzero_padding".into(), 1));
    // A null in the non-nullable column `title` (position 1).
    let mut p = vec![0b0000_0011, 0, 0b0000_0010];
    p.extend(text("r1"));
    assert_eq!(refusal(&p), ("null_in_non_nullable".into(), 1));
    // A bad boolean in `done` (position 3).
    let mut p = vec![0b0000_1001, 0, 0];
    p.extend(text("r1"));
    p.push(2);
    assert_eq!(refusal(&p), ("invalid_boolean".into(), 3));
    // Bytes after the last value.
    let mut p = vec![0b0000_0001, 0, 0];
    p.extend(text("r1"));
    p.push(0);
    assert_eq!(refusal(&p), ("trailing_bytes".into(), 9));
    // Shorter than the presence bitmap.
    assert_eq!(refusal(&[1]).0, "truncated");
}

#[test]
fn the_first_broken_rule_decides() {
    // Presence padding before the key.
    assert_eq!(
        refusal(&[0b0000_0010, 0b1000_0000, 0]).0,
        "presence_padding"
    );
    // The key before the null padding.
    assert_eq!(
        refusal(&[0b0000_0010, 0, 0b1111_1110]).0,
        "primary_key_absent"
    );
    // A null in a non-nullable column before a later bad value.
    let mut p = vec![0b0000_1011, 0, 0b0000_0010];
    p.extend(text("r1"));
    p.push(2);
    assert_eq!(refusal(&p), ("null_in_non_nullable".into(), 1));
    // A bad value before a later null in a non-nullable column.
    let mut p = vec![0b1000_1001, 0, 0b0000_0100];
    p.extend(text("r1"));
    p.push(2);
    assert_eq!(refusal(&p), ("invalid_boolean".into(), 3));
}

#[test]
fn the_encoder_refuses_a_payload_without_its_key_or_with_a_bad_value() {
    let mut slots = vec![None; 9];
    slots[1] = Some(RowValue::String("t".into()));
    let e = encode_sparse(&columns(), 0, &slots).unwrap_err();
    assert_eq!(e.get_detail("reason"), Some("primary_key_absent"));
    slots[0] = Some(RowValue::String("r1".into()));
    slots[7] = Some(RowValue::Null);
    let e = encode_sparse(&columns(), 0, &slots).unwrap_err();
    assert_eq!(e.code(), ErrorCode::CodecEncodeFailed);
    assert_eq!(
        (e.get_detail("reason"), e.get_detail("column")),
        (Some("null_in_non_nullable"), Some("7"))
    );
    assert_eq!(Reason::PresencePadding.as_str(), "presence_padding");
}

fn value(column: ColumnShape, seed: u8, null: bool) -> RowValue {
    if null && column.nullable {
        return RowValue::Null;
    }
    match column.column_type {
        ColumnType::String => RowValue::String(format!("s{seed}")),
        ColumnType::Integer => RowValue::Integer(i64::from(seed) - 100),
        ColumnType::Float => RowValue::Float(f64::from(seed) / 7.0),
        ColumnType::Boolean => RowValue::Boolean(seed % 2 == 1),
        ColumnType::Json => RowValue::Json(format!("[{seed}]")),
        ColumnType::Bytes => RowValue::Bytes(vec![seed; usize::from(seed % 5)]),
        ColumnType::BlobRef => RowValue::BlobRef(format!(r#"{{"blobId":"b{seed}"}}"#)),
        ColumnType::Crdt => RowValue::Crdt(vec![seed; usize::from(seed % 3)]),
    }
}

proptest! {
    /// Sparse payloads round-trip; one that writes every column is its
    /// presence bitmap followed by exactly the full payload.
    #[test]
    fn round_trips_and_the_full_payload_inside(
        present in proptest::collection::vec(any::<bool>(), 9),
        nulls in proptest::collection::vec(any::<bool>(), 9),
        seeds in proptest::collection::vec(any::<u8>(), 9),
    ) {
        let columns = columns();
        let full: Vec<RowValue> = (0..9).map(|i| value(columns[i], seeds[i], nulls[i])).collect();
        let slots: Vec<Option<RowValue>> = (0..9)
            .map(|i| (present[i] || i == 0).then(|| full[i].clone()))
            .collect();
        let p = encode_sparse(&columns, 0, &slots).unwrap();
        prop_assert_eq!(decode_sparse(&columns, 0, &p).unwrap(), slots.clone());
        let all = encode_sparse(&columns, 0, &full.iter().cloned().map(Some).collect::<Vec<_>>()).unwrap();
        let whole = encode(&columns, &full).unwrap();
        prop_assert_eq!(full_payload_of_sparse(9, &all), Some(whole.as_slice()));
        prop_assert_eq!(full_payload_of_sparse(9, &p).is_some(), slots.iter().all(Option::is_some));
    }

    /// Any bytes: no panic, and whatever decodes re-encodes to the same
    /// bytes (one canonical form).
    #[test]
    fn any_bytes_decode_safely_and_canonically(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(slots) = decode_sparse(&columns(), 0, &bytes) {
            prop_assert_eq!(encode_sparse(&columns(), 0, &slots).unwrap(), bytes);
        }
    }
}
