//! The sparse row of wire version 3 (§2.4): a push payload that names the
//! columns it writes.
//!
//! For a table of `n` columns in declaration order, the bytes are:
//!
//! 1. a presence bitmap of `ceil(n / 8)` bytes (bit `i` = column `i` is
//!    present; least significant bit first; padding bits zero);
//! 2. a null bitmap over the `p` present columns, `ceil(p / 8)` bytes (bit
//!    `j` = the `j`-th present column is null; same layout);
//! 3. the non-null present values in declaration order, each in its
//!    column type's encoding.
//!
//! A row with every column present is the presence bitmap followed by
//! exactly the full-row encoding ([`full_row_suffix`]).

use std::fmt;

use crate::error::{DecodeError, EncodeError};
use crate::primitives::Reader;
use crate::row::{bitmap_len, decode_value, encode_value};
use crate::segment::{Column, ColumnValue};

/// Which rule of the sparse row a payload breaks, in the order the
/// decoder checks them. Every one is `sync.invalid_request`; the variant
/// says which, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SparseRowViolation {
    /// A presence bit past the last column is set.
    PresencePadding,
    /// The primary key's presence bit is clear.
    PrimaryKeyAbsent,
    /// A null bit past the last present column is set (a null for a column
    /// that is not there).
    NullPadding,
    /// A present column that may not be null has its null bit set.
    NullInNonNullable,
}

impl SparseRowViolation {
    /// The message of the violation, fixed text.
    pub fn message(self) -> &'static str {
        match self {
            Self::PresencePadding => "sparse row: presence padding bit set",
            Self::PrimaryKeyAbsent => "sparse row: primary key absent",
            Self::NullPadding => "sparse row: null padding bit set",
            Self::NullInNonNullable => "sparse row: null in a non-nullable column",
        }
    }
}

impl fmt::Display for SparseRowViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// A decoded sparse row: for each column in declaration order, `None` when
/// the payload leaves it out, `Some(value)` when it writes it
/// (`Some(ColumnValue::Null)` writes a null).
#[derive(Debug, Clone, PartialEq)]
pub struct SparseRow {
    slots: Vec<Option<ColumnValue>>,
}

impl SparseRow {
    /// A row of the given slots, one per column.
    pub fn new(slots: Vec<Option<ColumnValue>>) -> Self {
        Self { slots }
    }

    /// A row that writes every column: the full row `values`.
    pub fn full(values: Vec<ColumnValue>) -> Self {
        Self {
            slots: values.into_iter().map(Some).collect(),
        }
    }

    /// The slots, one per column, in declaration order.
    pub fn slots(&self) -> &[Option<ColumnValue>] {
        &self.slots
    }

    /// Gives back the slots.
    pub fn into_slots(self) -> Vec<Option<ColumnValue>> {
        self.slots
    }

    /// Whether column `index` is present.
    pub fn is_present(&self, index: usize) -> bool {
        self.slots.get(index).is_some_and(Option::is_some)
    }

    /// Whether every column is present.
    pub fn is_full(&self) -> bool {
        self.slots.iter().all(Option::is_some)
    }

    /// The presence bitmap of this row (`ceil(columns / 8)` bytes, padding
    /// bits zero) — the layout of a v3 conflict record's `conflictColumns`.
    pub fn presence_bitmap(&self) -> Vec<u8> {
        let mut bitmap = vec![0u8; bitmap_len(self.slots.len())];
        for (i, slot) in self.slots.iter().enumerate() {
            if slot.is_some() {
                bitmap[i / 8] |= 1 << (i % 8);
            }
        }
        bitmap
    }
}

fn bit(bitmap: &[u8], index: usize) -> bool {
    bitmap
        .get(index / 8)
        .is_some_and(|byte| byte >> (index % 8) & 1 == 1)
}

fn violation(kind: SparseRowViolation) -> DecodeError {
    DecodeError::SparseRow { violation: kind }
}

/// Decodes one sparse row of a table with `columns` (declaration order)
/// whose primary key is column `primary_key`. The bytes hold exactly one
/// row.
///
/// Checks run in this order, the first broken one deciding: the presence
/// bitmap's padding, the primary key's presence, the null bitmap's
/// padding, then column by column a null on a non-nullable column or a
/// value that does not decode (the full-row codec's errors), then bytes
/// after the last value. Nothing is allocated before the bytes that back
/// it have been read.
pub fn decode_sparse_row(
    columns: &[Column],
    primary_key: usize,
    bytes: &[u8],
) -> Result<SparseRow, DecodeError> {
    let mut r = Reader::new(bytes);
    let presence = r.take(bitmap_len(columns.len()), "a sparse row presence bitmap")?;
    if (columns.len()..presence.len() * 8).any(|i| bit(presence, i)) {
        return Err(violation(SparseRowViolation::PresencePadding));
    }
    if primary_key >= columns.len() || !bit(presence, primary_key) {
        return Err(violation(SparseRowViolation::PrimaryKeyAbsent));
    }
    let present = presence.iter().map(|b| b.count_ones() as usize).sum();
    let nulls = r.take(bitmap_len(present), "a sparse row null bitmap")?;
    if (present..nulls.len() * 8).any(|j| bit(nulls, j)) {
        return Err(violation(SparseRowViolation::NullPadding));
    }
    let mut slots = Vec::with_capacity(columns.len());
    let mut j = 0;
    for (i, column) in columns.iter().enumerate() {
        if !bit(presence, i) {
            slots.push(None);
            continue;
        }
        let is_null = bit(nulls, j);
        j += 1;
        if !is_null {
            slots.push(Some(decode_value(&mut r, column)?));
        } else if column.nullable {
            slots.push(Some(ColumnValue::Null));
        } else {
            return Err(violation(SparseRowViolation::NullInNonNullable));
        }
    }
    r.finish("a sparse row")?;
    Ok(SparseRow { slots })
}

/// Encodes `row` as the one canonical sparse row of a table with `columns`
/// whose primary key is column `primary_key`. Refuses a row with another
/// number of slots, without its primary key, with a null in a
/// non-nullable column or a value of another type than its column's.
pub fn encode_sparse_row(
    columns: &[Column],
    primary_key: usize,
    row: &SparseRow,
) -> Result<Vec<u8>, EncodeError> {
    if row.slots.len() != columns.len() {
        return Err(EncodeError::Constraint {
            rule: "a sparse row must have one slot per column",
        });
    }
    if !row.is_present(primary_key) {
        return Err(EncodeError::Constraint {
            rule: "a sparse row must carry its primary key",
        });
    }
    let mut out = row.presence_bitmap();
    let present: Vec<(&Column, &ColumnValue)> = columns
        .iter()
        .zip(&row.slots)
        .filter_map(|(column, slot)| slot.as_ref().map(|value| (column, value)))
        .collect();
    let mut nulls = vec![0u8; bitmap_len(present.len())];
    for (j, (column, value)) in present.iter().enumerate() {
        if matches!(value, ColumnValue::Null) {
            if !column.nullable {
                return Err(EncodeError::Constraint {
                    rule: "a non-nullable column holds a null",
                });
            }
            nulls[j / 8] |= 1 << (j % 8);
        }
    }
    out.extend_from_slice(&nulls);
    for (column, value) in present {
        encode_value(&mut out, column, value)?;
    }
    Ok(out)
}

/// For a sparse payload of a table with `column_count` columns whose
/// presence bitmap says "every column present" (padding bits zero), the
/// bytes after that bitmap: exactly the full-row encoding of the same row,
/// to be stored and served without re-encoding. `None` for any other
/// payload (a partial row, or bytes too short to hold the bitmap); the
/// suffix itself is not checked here.
pub fn full_row_suffix(column_count: usize, bytes: &[u8]) -> Option<&[u8]> {
    let len = bitmap_len(column_count);
    let presence = bytes.get(..len)?;
    let all_present = (0..len * 8).all(|i| bit(presence, i) == (i < column_count));
    all_present.then(|| &bytes[len..])
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{decode_sparse_row, encode_sparse_row, full_row_suffix, SparseRow};
    use crate::row::encode_row;
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
            (ColumnType::Crdt, true),
            (ColumnType::String, true),
            (ColumnType::Integer, false),
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

    fn value(column: &Column, seed: u8, null: bool) -> ColumnValue {
        if null && column.nullable {
            return ColumnValue::Null;
        }
        let bytes = vec![seed; usize::from(seed % 4)];
        match column.column_type {
            ColumnType::String => ColumnValue::String(format!("s{seed}")),
            ColumnType::Integer => ColumnValue::Integer(i64::from(seed) - 100),
            ColumnType::Float => ColumnValue::Float(f64::from(seed) / 3.0),
            ColumnType::Boolean => ColumnValue::Boolean(seed % 2 == 0),
            ColumnType::Json => ColumnValue::Json(RawJson::new(format!("[{seed}]")).unwrap()),
            ColumnType::Crdt => ColumnValue::Crdt(bytes),
            ColumnType::Bytes | ColumnType::BlobRef => ColumnValue::Bytes(bytes),
        }
    }

    proptest! {
        /// Any sparse row with its key present round-trips, and a row with
        /// every column present is its presence bitmap followed by exactly
        /// the full-row encoding.
        #[test]
        fn round_trip_and_full_suffix(
            present in proptest::collection::vec(any::<bool>(), 9),
            nulls in proptest::collection::vec(any::<bool>(), 9),
            seeds in proptest::collection::vec(any::<u8>(), 9),
            key in 0usize..9,
        ) {
            let columns = columns();
            let slots: Vec<Option<ColumnValue>> = columns
                .iter()
                .enumerate()
                .map(|(i, c)| (present[i] || i == key).then(|| value(c, seeds[i], nulls[i])))
                .collect();
            let row = SparseRow::new(slots);
            let bytes = encode_sparse_row(&columns, key, &row).unwrap();
            prop_assert_eq!(&decode_sparse_row(&columns, key, &bytes).unwrap(), &row);

            let full: Vec<ColumnValue> = columns
                .iter()
                .enumerate()
                .map(|(i, c)| value(c, seeds[i], nulls[i]))
                .collect();
            let sparse = encode_sparse_row(&columns, key, &SparseRow::full(full.clone())).unwrap();
            let mut whole = Vec::new();
            encode_row(&mut whole, &columns, &full).unwrap();
            prop_assert_eq!(full_row_suffix(columns.len(), &sparse), Some(whole.as_slice()));
            prop_assert_eq!(
                full_row_suffix(columns.len(), &bytes).is_some(),
                row.is_full()
            );
        }

        /// No input makes the decoder panic, and whatever it accepts
        /// re-encodes to the same bytes (one canonical form).
        #[test]
        fn decode_is_total_and_canonical(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            key in 0usize..10,
        ) {
            let columns = columns();
            if let Ok(row) = decode_sparse_row(&columns, key, &bytes) {
                prop_assert_eq!(encode_sparse_row(&columns, key, &row).unwrap(), bytes);
            }
        }
    }
}
