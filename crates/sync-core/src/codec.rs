//! The row payload codec (`schema-and-migrations.md` §5).
//!
//! A payload is the byte form of one application row under an ordered list
//! of columns (the table's *codec order*):
//!
//! 1. a null bitmap of `ceil(n / 8)` bytes — bit `i` (mask `1 << (i & 7)` of
//!    byte `i >> 3`) is set when column `i` is NULL, padding bits are zero;
//! 2. for every non-null column in order, its value: `string`, `json` and
//!    `blob_ref` as a u32 little-endian byte length followed by UTF-8 text,
//!    `bytes` and `crdt` as a u32 length followed by raw bytes, `integer` and
//!    `float` as 8 little-endian bytes, `boolean` as one byte `0` / `1`.
//!
//! There are no type tags and no varints, so the encoding is canonical:
//! `encode(decode(p)) == p` for every valid payload `p`. Storage keeps
//! payloads verbatim and re-encodes only in migration rewrites ([`reencode`]).
//!
//! Columns are described by anything implementing [`ColumnSpec`]: the
//! compiled [`CompiledColumn`], a stored [`LayoutColumn`] (whose type string
//! may be unknown to this version) or a plain [`ColumnShape`].
//!
//! # Errors
//!
//! Decoding fails with `sync.codec.decode_failed`, encoding with
//! `sync.codec.encode_failed`. The message is the fixed sentence of the code;
//! `details.reason` is one of the [`Reason`] strings and `details.column` the
//! zero-based column **position** (never its name, never the value). For
//! failures that belong to no single column the position is the first one
//! concerned: the first column whose null bit is missing (truncated bitmap),
//! the column a set padding bit would stand for, the column count (trailing
//! bytes) or the shorter of the two lists (count mismatch).

use crate::limits::MAX_SAFE_INTEGER;
use crate::{
    ColumnType, CompiledColumn, CompiledTable, Error, ErrorCode, LayoutColumn, Result, RowValue,
};

/// Largest number of digits a JSON number may need before or after the
/// decimal point, written in plain decimal notation, for its `json` value to
/// be stored in a Postgres `jsonb` projection (`schema-and-migrations.md` §5.5).
pub const JSONB_MAX_PLAIN_DIGITS: u64 = 16_000;

/// Why a payload did not decode or values did not encode: the value of
/// `details.reason` (`schema-and-migrations.md` §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// Decode: the input ends inside the bitmap or a value, including a
    /// length prefix larger than the remaining bytes.
    Truncated,
    /// Decode: bytes remain after the last column.
    TrailingBytes,
    /// Decode: a padding bit of the null bitmap is set.
    NonzeroPadding,
    /// Decode and encode: NULL for a non-nullable column.
    NullInNonNullable,
    /// Decode: a boolean byte other than 0 or 1.
    InvalidBoolean,
    /// Decode: string, json or blob_ref bytes are not UTF-8.
    InvalidUtf8,
    /// Decode and encode: json text is not exactly one JSON value.
    InvalidJson,
    /// Decode and encode: blob_ref text is not a JSON object with a non-empty
    /// string member `blobId`.
    InvalidBlobRef,
    /// Decode and encode: an integer whose absolute value exceeds 2^53 − 1.
    IntegerOutOfRange,
    /// Encode: the number of values differs from the number of columns.
    ColumnCountMismatch,
    /// Encode: the value variant does not match the column type.
    TypeMismatch,
    /// Encode: a value longer than `u32::MAX` bytes.
    LengthOverflow,
    /// Decode and encode: the column's stored type name is unknown to this
    /// version (a [`LayoutColumn`] written by newer code), so no byte of the
    /// payload can be interpreted.
    UnknownColumnType,
    /// Sparse decode: a padding bit of the presence bitmap is set.
    PresencePadding,
    /// Sparse decode and encode: the primary key's presence bit is clear.
    PrimaryKeyAbsent,
}

impl Reason {
    /// The stable string stored in `details.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Truncated => "truncated",
            Reason::TrailingBytes => "trailing_bytes",
            Reason::NonzeroPadding => "nonzero_padding",
            Reason::NullInNonNullable => "null_in_non_nullable",
            Reason::InvalidBoolean => "invalid_boolean",
            Reason::InvalidUtf8 => "invalid_utf8",
            Reason::InvalidJson => "invalid_json",
            Reason::InvalidBlobRef => "invalid_blob_ref",
            Reason::IntegerOutOfRange => "integer_out_of_range",
            Reason::ColumnCountMismatch => "column_count_mismatch",
            Reason::TypeMismatch => "type_mismatch",
            Reason::LengthOverflow => "length_overflow",
            Reason::UnknownColumnType => "unknown_column_type",
            Reason::PresencePadding => "presence_padding",
            Reason::PrimaryKeyAbsent => "primary_key_absent",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn decode_error(reason: Reason, column: usize) -> Error {
    Error::new(ErrorCode::CodecDecodeFailed)
        .detail("reason", reason)
        .detail("column", column)
}

fn encode_error(reason: Reason, column: usize) -> Error {
    Error::new(ErrorCode::CodecEncodeFailed)
        .detail("reason", reason)
        .detail("column", column)
}

// ---------------------------------------------------------------------------
// Column descriptions

/// What the codec needs to know about one column: its type and whether it
/// accepts NULL.
///
/// Implemented for [`CompiledColumn`], [`LayoutColumn`], [`ColumnShape`] and
/// references to any of them, so `&table.columns`, a stored layout and a
/// hand-built list can all be passed as `&[C]`.
pub trait ColumnSpec {
    /// The column's codec type; `None` when the type is unknown (a stored
    /// layout type string this version does not know). Decoding or encoding
    /// under such a column fails with [`Reason::UnknownColumnType`].
    fn codec_type(&self) -> Option<ColumnType>;

    /// Whether the column accepts NULL.
    fn is_nullable(&self) -> bool;
}

impl ColumnSpec for CompiledColumn {
    fn codec_type(&self) -> Option<ColumnType> {
        Some(self.column_type)
    }

    fn is_nullable(&self) -> bool {
        self.nullable
    }
}

impl ColumnSpec for LayoutColumn {
    fn codec_type(&self) -> Option<ColumnType> {
        self.known_type()
    }

    fn is_nullable(&self) -> bool {
        self.nullable
    }
}

impl<T: ColumnSpec + ?Sized> ColumnSpec for &T {
    fn codec_type(&self) -> Option<ColumnType> {
        (**self).codec_type()
    }

    fn is_nullable(&self) -> bool {
        (**self).is_nullable()
    }
}

/// A column reduced to what the codec reads: type and nullability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ColumnShape {
    /// The column type.
    pub column_type: ColumnType,
    /// Whether NULL is allowed.
    pub nullable: bool,
}

impl ColumnShape {
    /// A column of this type and nullability.
    pub const fn new(column_type: ColumnType, nullable: bool) -> Self {
        Self {
            column_type,
            nullable,
        }
    }

    /// A non-nullable column of this type.
    pub const fn required(column_type: ColumnType) -> Self {
        Self::new(column_type, false)
    }

    /// A nullable column of this type.
    pub const fn optional(column_type: ColumnType) -> Self {
        Self::new(column_type, true)
    }

    /// The shape of any column description whose type is known.
    pub fn of(column: &impl ColumnSpec) -> Option<Self> {
        Some(Self::new(column.codec_type()?, column.is_nullable()))
    }
}

impl ColumnSpec for ColumnShape {
    fn codec_type(&self) -> Option<ColumnType> {
        Some(self.column_type)
    }

    fn is_nullable(&self) -> bool {
        self.nullable
    }
}

// ---------------------------------------------------------------------------
// Encoding

/// Encodes one row: `values[i]` under `columns[i]`.
///
/// Validates every value first (count, nullability, variant, integer range,
/// JSON and BlobRef text, u32 lengths) and then writes the payload into a
/// buffer of its exact size. Fails with `sync.codec.encode_failed`.
pub fn encode<C: ColumnSpec>(columns: &[C], values: &[RowValue]) -> Result<Vec<u8>> {
    let size = validated_size(columns, values)?;
    let mut out = Vec::with_capacity(size);
    write_row(&mut out, values)?;
    debug_assert_eq!(out.len(), size);
    Ok(out)
}

/// Checks every value against its column and returns the payload size.
fn validated_size<C: ColumnSpec>(columns: &[C], values: &[RowValue]) -> Result<usize> {
    if columns.len() != values.len() {
        return Err(encode_error(
            Reason::ColumnCountMismatch,
            columns.len().min(values.len()),
        ));
    }
    let mut size = columns.len().div_ceil(8);
    for (index, (column, value)) in columns.iter().zip(values).enumerate() {
        size = size
            .checked_add(encoded_len(column, value, index)?)
            .ok_or_else(|| encode_error(Reason::LengthOverflow, index))?;
    }
    Ok(size)
}

/// Writes the bitmap and the values of already validated `values`.
fn write_row(out: &mut Vec<u8>, values: &[RowValue]) -> Result<()> {
    out.resize(values.len().div_ceil(8), 0);
    for (index, value) in values.iter().enumerate() {
        match value {
            RowValue::Null => {
                if let Some(byte) = out.get_mut(index >> 3) {
                    *byte |= 1 << (index & 7);
                }
            }
            RowValue::Integer(v) => out.extend_from_slice(&v.to_le_bytes()),
            RowValue::Float(v) => out.extend_from_slice(&v.to_bits().to_le_bytes()),
            RowValue::Boolean(v) => out.push(u8::from(*v)),
            RowValue::String(text) | RowValue::Json(text) | RowValue::BlobRef(text) => {
                put_length_prefixed(out, text.as_bytes(), index)?;
            }
            RowValue::Bytes(bytes) | RowValue::Crdt(bytes) => {
                put_length_prefixed(out, bytes, index)?;
            }
        }
    }
    Ok(())
}

/// Encodes one row of `table` ([`encode`] under `table.columns`); errors
/// also carry `details.table`.
pub fn encode_row(table: &CompiledTable, values: &[RowValue]) -> Result<Vec<u8>> {
    encode(&table.columns, values).map_err(|error| error.detail("table", &table.name))
}

/// Validates `value` under `column` and returns the number of bytes it
/// takes in the value section.
fn encoded_len(column: &impl ColumnSpec, value: &RowValue, index: usize) -> Result<usize> {
    let column_type = column
        .codec_type()
        .ok_or_else(|| encode_error(Reason::UnknownColumnType, index))?;
    if value.is_null() {
        return if column.is_nullable() {
            Ok(0)
        } else {
            Err(encode_error(Reason::NullInNonNullable, index))
        };
    }
    if value.column_type() != Some(column_type) {
        return Err(encode_error(Reason::TypeMismatch, index));
    }
    match value {
        RowValue::Null => Ok(0),
        RowValue::Integer(v) => {
            check_integer(*v).ok_or_else(|| encode_error(Reason::IntegerOutOfRange, index))?;
            Ok(8)
        }
        RowValue::Float(_) => Ok(8),
        RowValue::Boolean(_) => Ok(1),
        RowValue::Json(text) => {
            if !is_valid_json(text) {
                return Err(encode_error(Reason::InvalidJson, index));
            }
            length_prefixed_len(text.len(), index)
        }
        RowValue::BlobRef(text) => {
            if !is_valid_blob_ref(text) {
                return Err(encode_error(Reason::InvalidBlobRef, index));
            }
            length_prefixed_len(text.len(), index)
        }
        RowValue::String(text) => length_prefixed_len(text.len(), index),
        RowValue::Bytes(bytes) | RowValue::Crdt(bytes) => length_prefixed_len(bytes.len(), index),
    }
}

/// The size of a length-prefixed value of `len` bytes, or `length_overflow`.
fn length_prefixed_len(len: usize, index: usize) -> Result<usize> {
    u32::try_from(len)
        .ok()
        .and_then(|_| len.checked_add(4))
        .ok_or_else(|| encode_error(Reason::LengthOverflow, index))
}

fn put_length_prefixed(out: &mut Vec<u8>, bytes: &[u8], index: usize) -> Result<()> {
    let len =
        u32::try_from(bytes.len()).map_err(|_| encode_error(Reason::LengthOverflow, index))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

fn check_integer(value: i64) -> Option<i64> {
    (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER)
        .contains(&value)
        .then_some(value)
}

// ---------------------------------------------------------------------------
// Decoding

/// Decodes a payload into one value per column.
///
/// Fails with `sync.codec.decode_failed`. Column types are resolved before
/// any byte is read, so an unknown layout type is reported even for a
/// truncated payload. No allocation is sized by a length read from the
/// payload before that length is known to fit in the remaining input.
pub fn decode<C: ColumnSpec>(columns: &[C], payload: &[u8]) -> Result<Vec<RowValue>> {
    let mut values = Vec::with_capacity(columns.len());
    walk(columns, payload, |value| values.push(value.to_row_value()))?;
    Ok(values)
}

/// Decodes one payload of `table` ([`decode`] under `table.columns`);
/// errors also carry `details.table`.
pub fn decode_row(table: &CompiledTable, payload: &[u8]) -> Result<Vec<RowValue>> {
    decode(&table.columns, payload).map_err(|error| error.detail("table", &table.name))
}

/// Checks that a payload decodes under `columns` without building the
/// values (same rules and errors as [`decode`]).
pub fn validate<C: ColumnSpec>(columns: &[C], payload: &[u8]) -> Result<()> {
    walk(columns, payload, |_| {})
}

/// Checks one payload of `table` ([`validate`] under `table.columns`);
/// errors also carry `details.table`.
pub fn validate_row(table: &CompiledTable, payload: &[u8]) -> Result<()> {
    validate(&table.columns, payload).map_err(|error| error.detail("table", &table.name))
}

/// Re-encodes a payload for a migration rewrite (`schema-and-migrations.md`
/// §11): decodes it under the `old` layout, appends NULL for every column of
/// `new` past the end of `old`, and encodes the result under `new`.
///
/// A payload that does not decode fails with `sync.codec.decode_failed`;
/// values that do not fit the new columns (fewer columns than the old
/// layout, a changed type, a NULL in a column that became non-nullable, an
/// appended non-nullable column) fail with `sync.codec.encode_failed`.
pub fn reencode<O: ColumnSpec, N: ColumnSpec>(
    old: &[O],
    new: &[N],
    payload: &[u8],
) -> Result<Vec<u8>> {
    let mut values = decode(old, payload)?;
    if new.len() < values.len() {
        return Err(encode_error(Reason::ColumnCountMismatch, new.len()));
    }
    values.resize(new.len(), RowValue::Null);
    encode(new, &values)
}

/// A decoded value borrowing from the payload.
#[derive(Debug, Clone, Copy)]
enum ValueRef<'a> {
    Null,
    String(&'a str),
    Integer(i64),
    Float(f64),
    Boolean(bool),
    Json(&'a str),
    Bytes(&'a [u8]),
    BlobRef(&'a str),
    Crdt(&'a [u8]),
}

impl ValueRef<'_> {
    fn to_row_value(self) -> RowValue {
        match self {
            ValueRef::Null => RowValue::Null,
            ValueRef::String(text) => RowValue::String(text.to_owned()),
            ValueRef::Integer(v) => RowValue::Integer(v),
            ValueRef::Float(v) => RowValue::Float(v),
            ValueRef::Boolean(v) => RowValue::Boolean(v),
            ValueRef::Json(text) => RowValue::Json(text.to_owned()),
            ValueRef::Bytes(bytes) => RowValue::Bytes(bytes.to_vec()),
            ValueRef::BlobRef(text) => RowValue::BlobRef(text.to_owned()),
            ValueRef::Crdt(bytes) => RowValue::Crdt(bytes.to_vec()),
        }
    }
}

/// Reads the payload column by column, handing every validated value to
/// `sink`, and checks that the payload is consumed exactly.
fn walk<'a, C: ColumnSpec>(
    columns: &[C],
    payload: &'a [u8],
    mut sink: impl FnMut(ValueRef<'a>),
) -> Result<()> {
    if let Some(index) = columns.iter().position(|c| c.codec_type().is_none()) {
        return Err(decode_error(Reason::UnknownColumnType, index));
    }
    let count = columns.len();
    let (bitmap, value_bytes) = read_bitmap(count, payload)?;
    let mut reader = Reader { rest: value_bytes };
    for (index, column) in columns.iter().enumerate() {
        let is_null = bitmap
            .get(index >> 3)
            .is_some_and(|byte| byte & (1 << (index & 7)) != 0);
        if is_null {
            if !column.is_nullable() {
                return Err(decode_error(Reason::NullInNonNullable, index));
            }
            sink(ValueRef::Null);
            continue;
        }
        let column_type = column
            .codec_type()
            .ok_or_else(|| decode_error(Reason::UnknownColumnType, index))?;
        sink(reader.value(column_type, index)?);
    }
    if !reader.rest.is_empty() {
        return Err(decode_error(Reason::TrailingBytes, count));
    }
    Ok(())
}

/// Splits off the null bitmap of `count` columns and checks its padding.
fn read_bitmap(count: usize, payload: &[u8]) -> Result<(&[u8], &[u8])> {
    let bitmap_len = count.div_ceil(8);
    let (bitmap, value_bytes) = payload
        .split_at_checked(bitmap_len)
        .ok_or_else(|| decode_error(Reason::Truncated, payload.len().saturating_mul(8)))?;
    let used_bits = count % 8;
    if let (Some(&last), true) = (bitmap.last(), used_bits != 0) {
        let padding = last >> used_bits;
        if padding != 0 {
            let first_set = used_bits + padding.trailing_zeros() as usize;
            return Err(decode_error(
                Reason::NonzeroPadding,
                (bitmap_len - 1) * 8 + first_set,
            ));
        }
    }
    Ok((bitmap, value_bytes))
}

/// The unread rest of a payload's value section.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, index: usize) -> Result<&'a [u8]> {
        let (head, tail) = self
            .rest
            .split_at_checked(len)
            .ok_or_else(|| decode_error(Reason::Truncated, index))?;
        self.rest = tail;
        Ok(head)
    }

    fn fixed<const N: usize>(&mut self, index: usize) -> Result<[u8; N]> {
        <[u8; N]>::try_from(self.take(N, index)?)
            .map_err(|_| decode_error(Reason::Truncated, index))
    }

    fn length_prefixed(&mut self, index: usize) -> Result<&'a [u8]> {
        let len = u32::from_le_bytes(self.fixed(index)?);
        let len = usize::try_from(len).map_err(|_| decode_error(Reason::Truncated, index))?;
        self.take(len, index)
    }

    fn text(&mut self, index: usize) -> Result<&'a str> {
        std::str::from_utf8(self.length_prefixed(index)?)
            .map_err(|_| decode_error(Reason::InvalidUtf8, index))
    }

    fn value(&mut self, column_type: ColumnType, index: usize) -> Result<ValueRef<'a>> {
        Ok(match column_type {
            ColumnType::String => ValueRef::String(self.text(index)?),
            ColumnType::Integer => {
                let value = i64::from_le_bytes(self.fixed(index)?);
                ValueRef::Integer(
                    check_integer(value)
                        .ok_or_else(|| decode_error(Reason::IntegerOutOfRange, index))?,
                )
            }
            ColumnType::Float => {
                ValueRef::Float(f64::from_bits(u64::from_le_bytes(self.fixed(index)?)))
            }
            ColumnType::Boolean => match self.fixed::<1>(index)? {
                [0] => ValueRef::Boolean(false),
                [1] => ValueRef::Boolean(true),
                _ => return Err(decode_error(Reason::InvalidBoolean, index)),
            },
            ColumnType::Json => {
                let text = self.text(index)?;
                if !is_valid_json(text) {
                    return Err(decode_error(Reason::InvalidJson, index));
                }
                ValueRef::Json(text)
            }
            ColumnType::Bytes => ValueRef::Bytes(self.length_prefixed(index)?),
            ColumnType::BlobRef => {
                let text = self.text(index)?;
                if !is_valid_blob_ref(text) {
                    return Err(decode_error(Reason::InvalidBlobRef, index));
                }
                ValueRef::BlobRef(text)
            }
            ColumnType::Crdt => ValueRef::Crdt(self.length_prefixed(index)?),
        })
    }
}

// ---------------------------------------------------------------------------
// Sparse payloads (wire version 3)

/// Decodes a sparse payload (wire version 3, `docs/design/wire-v3.md`
/// §2.4): for each column, `None` when the payload leaves it out,
/// `Some(value)` (`Some(RowValue::Null)` included) when it writes it.
///
/// The bytes are a presence bitmap of `ceil(n / 8)` bytes, a null bitmap
/// over the present columns, then the present non-null values in column
/// order, each as in a full payload. Checks run in this order, the first
/// broken one deciding: the presence bitmap's padding
/// ([`Reason::PresencePadding`]), the key's presence
/// ([`Reason::PrimaryKeyAbsent`]), the null bitmap's padding
/// ([`Reason::NonzeroPadding`], `details.column` the column the bit would
/// stand for among the present ones), then column by column a null in a
/// non-nullable column or a value that does not decode, then trailing
/// bytes. Fails with `sync.codec.decode_failed`.
pub fn decode_sparse<C: ColumnSpec>(
    columns: &[C],
    primary_key: usize,
    payload: &[u8],
) -> Result<Vec<Option<RowValue>>> {
    if let Some(index) = columns.iter().position(|c| c.codec_type().is_none()) {
        return Err(decode_error(Reason::UnknownColumnType, index));
    }
    let count = columns.len();
    let (presence, rest) = payload
        .split_at_checked(count.div_ceil(8))
        .ok_or_else(|| decode_error(Reason::Truncated, payload.len().saturating_mul(8)))?;
    let bit = |bitmap: &[u8], i: usize| {
        bitmap
            .get(i >> 3)
            .is_some_and(|byte| byte & (1 << (i & 7)) != 0)
    };
    if let Some(i) = (count..presence.len() * 8).find(|&i| bit(presence, i)) {
        return Err(decode_error(Reason::PresencePadding, i));
    }
    if !bit(presence, primary_key) || primary_key >= count {
        return Err(decode_error(Reason::PrimaryKeyAbsent, primary_key));
    }
    let present: Vec<usize> = (0..count).filter(|&i| bit(presence, i)).collect();
    let (nulls, value_bytes) = read_bitmap(present.len(), rest)?;
    let mut reader = Reader { rest: value_bytes };
    let mut slots = vec![None; count];
    for (j, &index) in present.iter().enumerate() {
        let column = &columns[index];
        if bit(nulls, j) {
            if !column.is_nullable() {
                return Err(decode_error(Reason::NullInNonNullable, index));
            }
            slots[index] = Some(RowValue::Null);
            continue;
        }
        let column_type = column
            .codec_type()
            .ok_or_else(|| decode_error(Reason::UnknownColumnType, index))?;
        slots[index] = Some(reader.value(column_type, index)?.to_row_value());
    }
    if !reader.rest.is_empty() {
        return Err(decode_error(Reason::TrailingBytes, count));
    }
    Ok(slots)
}

/// Decodes one sparse payload of `table` ([`decode_sparse`] under
/// `table.columns` and its primary key); errors also carry
/// `details.table`.
pub fn decode_sparse_row(table: &CompiledTable, payload: &[u8]) -> Result<Vec<Option<RowValue>>> {
    decode_sparse(&table.columns, table.primary_key_index, payload)
        .map_err(|error| error.detail("table", &table.name))
}

/// Encodes a sparse payload: one slot per column, `None` for a column left
/// out. The key must be present and every present value must encode in
/// its column (the rules of [`encode`]). Fails with
/// `sync.codec.encode_failed`.
pub fn encode_sparse<C: ColumnSpec>(
    columns: &[C],
    primary_key: usize,
    slots: &[Option<RowValue>],
) -> Result<Vec<u8>> {
    if slots.len() != columns.len() {
        return Err(encode_error(
            Reason::ColumnCountMismatch,
            slots.len().min(columns.len()),
        ));
    }
    if slots.get(primary_key).is_none_or(Option::is_none) {
        return Err(encode_error(Reason::PrimaryKeyAbsent, primary_key));
    }
    let mut presence = vec![0u8; columns.len().div_ceil(8)];
    let mut present_columns = Vec::new();
    let mut present_values = Vec::new();
    for (i, (column, slot)) in columns.iter().zip(slots).enumerate() {
        if let Some(value) = slot {
            // Checked here, so that an error names the table's column.
            encoded_len(column, value, i)?;
            presence[i >> 3] |= 1 << (i & 7);
            present_columns.push(column);
            present_values.push(value.clone());
        }
    }
    let mut out = presence;
    out.extend(encode(&present_columns, &present_values)?);
    Ok(out)
}

/// The full payload inside a sparse payload of `column_count` columns that
/// writes every column: the bytes after its all-ones presence bitmap are
/// exactly the full-row encoding of the same row. `None` for a partial
/// payload (or one too short for the bitmap); the rest is not checked.
pub fn full_payload_of_sparse(column_count: usize, payload: &[u8]) -> Option<&[u8]> {
    let len = column_count.div_ceil(8);
    let (presence, rest) = payload.split_at_checked(len)?;
    let all_present = (0..len * 8).all(|i| {
        let set = presence[i >> 3] & (1 << (i & 7)) != 0;
        set == (i < column_count)
    });
    all_present.then_some(rest)
}

// ---------------------------------------------------------------------------
// JSON text rules

/// Whether `text` is exactly one JSON value (RFC 8259), optionally
/// surrounded by JSON whitespace (space, tab, line feed, carriage return).
///
/// Validation is purely syntactic: duplicate object keys, numbers of any
/// magnitude or precision, escaped lone surrogates and any nesting depth
/// are accepted, as the grammar allows. This is the `json` column rule.
pub fn is_valid_json(text: &str) -> bool {
    json_text::scan(text, &mut json_text::Syntax)
}

/// Whether `text` is a valid BlobRef document for a `blob_ref` column: a
/// JSON object whose member `blobId` (the last one, when repeated) is a
/// non-empty string (**decision: minimal BlobRef validation**).
pub fn is_valid_blob_ref(text: &str) -> bool {
    let mut probe = json_text::BlobRefProbe::default();
    json_text::scan(text, &mut probe) && probe.is_valid()
}

/// Whether a `json` value can be bound to a Postgres `jsonb` projection
/// column (`schema-and-migrations.md` §5.5). The Postgres dialect binds NULL
/// (and keeps the payload unchanged) when this is false.
///
/// False when the text is not valid JSON, contains a `\u0000` escape,
/// contains a number literal that written in plain decimal notation needs
/// more than [`JSONB_MAX_PLAIN_DIGITS`] digits before or after the decimal
/// point, or contains a `\u` escape of a UTF-16 surrogate that is not part of
/// a high/low pair (which `jsonb` rejects as well).
pub fn json_projection_is_representable_in_jsonb(text: &str) -> bool {
    let mut probe = json_text::JsonbProbe::default();
    json_text::scan(text, &mut probe) && probe.representable
}

/// A non-recursive RFC 8259 scanner: nesting depth costs one byte of heap per
/// level instead of a stack frame, so no input can overflow the stack.
mod json_text {
    use super::JSONB_MAX_PLAIN_DIGITS;

    /// One number literal, split into its parts (all ASCII digits).
    #[derive(Debug, Clone, Copy)]
    pub(super) struct Number<'a> {
        /// Integer digits without sign (`0` or no leading zero).
        pub(super) int: &'a str,
        /// Fraction digits, empty without a fraction.
        pub(super) frac: &'a str,
        /// Exponent digits without sign, empty without an exponent.
        pub(super) exp: &'a str,
        /// Whether the exponent is negative.
        pub(super) exp_negative: bool,
    }

    /// A value the scanner has just recognised (containers when they open).
    #[derive(Debug, Clone, Copy)]
    pub(super) enum Value<'a> {
        Object,
        Array,
        /// The raw text between the quotes, escapes not decoded.
        String(&'a str),
        Number(Number<'a>),
        Literal,
    }

    /// Observes a scan. `depth` is the number of enclosing containers.
    pub(super) trait Visitor {
        /// An object member key (raw text between the quotes).
        fn key(&mut self, _depth: usize, _raw: &str) {}
        /// A value at `depth`.
        fn value(&mut self, _depth: usize, _value: Value<'_>) {}
    }

    /// Syntax only.
    pub(super) struct Syntax;

    impl Visitor for Syntax {}

    #[derive(Clone, Copy)]
    enum Container {
        Array,
        Object,
    }

    struct Scanner<'a> {
        text: &'a str,
        pos: usize,
    }

    impl<'a> Scanner<'a> {
        fn peek(&self) -> Option<u8> {
            self.text.as_bytes().get(self.pos).copied()
        }

        fn eat(&mut self, byte: u8) -> bool {
            let hit = self.peek() == Some(byte);
            if hit {
                self.pos += 1;
            }
            hit
        }

        fn skip_whitespace(&mut self) {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                self.pos += 1;
            }
        }

        fn slice(&self, start: usize) -> Option<&'a str> {
            self.text.get(start..self.pos)
        }

        fn digits(&mut self) -> usize {
            let start = self.pos;
            while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                self.pos += 1;
            }
            self.pos - start
        }

        /// A string starting at its opening quote; returns the raw content.
        fn string(&mut self) -> Option<&'a str> {
            if !self.eat(b'"') {
                return None;
            }
            let start = self.pos;
            loop {
                match self.peek()? {
                    b'"' => {
                        let raw = self.slice(start)?;
                        self.pos += 1;
                        return Some(raw);
                    }
                    b'\\' => {
                        self.pos += 1;
                        match self.peek()? {
                            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                                self.pos += 1;
                            }
                            b'u' => {
                                self.pos += 1;
                                for _ in 0..4 {
                                    if !self.peek()?.is_ascii_hexdigit() {
                                        return None;
                                    }
                                    self.pos += 1;
                                }
                            }
                            _ => return None,
                        }
                    }
                    0x00..=0x1f => return None,
                    _ => self.pos += 1,
                }
            }
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        fn number(&mut self) -> Option<Number<'a>> {
            self.eat(b'-');
            let int_start = self.pos;
            match self.peek()? {
                b'0' => self.pos += 1,
                b'1'..=b'9' => {
                    self.digits();
                }
                _ => return None,
            }
            let int = self.slice(int_start)?;
            let mut frac = "";
            if self.eat(b'.') {
                let start = self.pos;
                if self.digits() == 0 {
                    return None;
                }
                frac = self.slice(start)?;
            }
            let mut exp = "";
            let mut exp_negative = false;
            if matches!(self.peek(), Some(b'e' | b'E')) {
                self.pos += 1;
                if self.eat(b'-') {
                    exp_negative = true;
                } else {
                    self.eat(b'+');
                }
                let start = self.pos;
                if self.digits() == 0 {
                    return None;
                }
                exp = self.slice(start)?;
            }
            Some(Number {
                int,
                frac,
                exp,
                exp_negative,
            })
        }

        fn literal(&mut self, word: &str) -> bool {
            let hit = self
                .text
                .as_bytes()
                .get(self.pos..)
                .is_some_and(|rest| rest.starts_with(word.as_bytes()));
            if hit {
                self.pos += word.len();
            }
            hit
        }

        /// `string ws : ws` of an object member.
        fn member_key(&mut self, depth: usize, visitor: &mut impl Visitor) -> bool {
            let Some(raw) = self.string() else {
                return false;
            };
            visitor.key(depth, raw);
            self.skip_whitespace();
            if !self.eat(b':') {
                return false;
            }
            self.skip_whitespace();
            true
        }
    }

    /// Whether `text` is exactly one JSON value with optional surrounding
    /// whitespace, reporting what it sees to `visitor`.
    pub(super) fn scan(text: &str, visitor: &mut impl Visitor) -> bool {
        let mut s = Scanner { text, pos: 0 };
        let mut stack: Vec<Container> = Vec::new();
        s.skip_whitespace();
        'value: loop {
            // A value starts at `s.pos`.
            let depth = stack.len();
            match s.peek() {
                Some(b'{') => {
                    s.pos += 1;
                    visitor.value(depth, Value::Object);
                    s.skip_whitespace();
                    if !s.eat(b'}') {
                        stack.push(Container::Object);
                        if !s.member_key(depth + 1, visitor) {
                            return false;
                        }
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    s.pos += 1;
                    visitor.value(depth, Value::Array);
                    s.skip_whitespace();
                    if !s.eat(b']') {
                        stack.push(Container::Array);
                        continue 'value;
                    }
                }
                Some(b'"') => match s.string() {
                    Some(raw) => visitor.value(depth, Value::String(raw)),
                    None => return false,
                },
                Some(b'-' | b'0'..=b'9') => match s.number() {
                    Some(number) => visitor.value(depth, Value::Number(number)),
                    None => return false,
                },
                Some(b't') if s.literal("true") => visitor.value(depth, Value::Literal),
                Some(b'f') if s.literal("false") => visitor.value(depth, Value::Literal),
                Some(b'n') if s.literal("null") => visitor.value(depth, Value::Literal),
                _ => return false,
            }
            // A value ended: close containers until the next element starts.
            loop {
                s.skip_whitespace();
                match stack.last() {
                    None => return s.pos == text.len(),
                    Some(Container::Array) => {
                        if s.eat(b',') {
                            s.skip_whitespace();
                            continue 'value;
                        }
                        if !s.eat(b']') {
                            return false;
                        }
                        stack.pop();
                    }
                    Some(Container::Object) => {
                        if s.eat(b',') {
                            s.skip_whitespace();
                            if !s.member_key(stack.len(), visitor) {
                                return false;
                            }
                            continue 'value;
                        }
                        if !s.eat(b'}') {
                            return false;
                        }
                        stack.pop();
                    }
                }
            }
        }
    }

    /// Finds the top-level `blobId` member (last one wins, as in
    /// `JSON.parse`).
    #[derive(Default)]
    pub(super) struct BlobRefProbe {
        top_is_object: bool,
        at_blob_id: bool,
        blob_id_is_non_empty_string: bool,
    }

    impl BlobRefProbe {
        pub(super) fn is_valid(&self) -> bool {
            self.top_is_object && self.blob_id_is_non_empty_string
        }
    }

    impl Visitor for BlobRefProbe {
        fn key(&mut self, depth: usize, raw: &str) {
            if depth == 1 {
                self.at_blob_id = unescaped_equals(raw, "blobId");
            }
        }

        fn value(&mut self, depth: usize, value: Value<'_>) {
            match depth {
                0 => self.top_is_object = matches!(value, Value::Object),
                1 if self.at_blob_id => {
                    // Raw content is non-empty exactly when the decoded string is.
                    self.blob_id_is_non_empty_string =
                        matches!(value, Value::String(raw) if !raw.is_empty());
                    self.at_blob_id = false;
                }
                _ => {}
            }
        }
    }

    /// Whether the raw (escaped) string content decodes to `expected`.
    fn unescaped_equals(raw: &str, expected: &str) -> bool {
        if !raw.contains('\\') {
            return raw == expected;
        }
        let mut expected = expected.chars();
        let mut units = Utf16Units::new(raw);
        while let Some(decoded) = units.next_char() {
            if expected.next() != Some(decoded) {
                return false;
            }
        }
        expected.next().is_none()
    }

    /// One unit of a raw string: a literal char or a `\u` escape.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Unit {
        Char(char),
        Escape(u16),
    }

    /// Walks the raw content of a scanned (hence well-formed) string.
    struct Utf16Units<'a> {
        chars: std::str::Chars<'a>,
        pending: Option<Unit>,
    }

    impl<'a> Utf16Units<'a> {
        fn new(raw: &'a str) -> Self {
            Self {
                chars: raw.chars(),
                pending: None,
            }
        }

        fn next_unit(&mut self) -> Option<Unit> {
            if let Some(unit) = self.pending.take() {
                return Some(unit);
            }
            let c = self.chars.next()?;
            if c != '\\' {
                return Some(Unit::Char(c));
            }
            Some(Unit::Char(match self.chars.next()? {
                'b' => '\u{8}',
                'f' => '\u{c}',
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                'u' => {
                    let mut code: u16 = 0;
                    for _ in 0..4 {
                        let digit = self.chars.next()?.to_digit(16)?;
                        code = (code << 4) | digit as u16;
                    }
                    return Some(Unit::Escape(code));
                }
                other => other,
            }))
        }

        /// The next decoded char; an unpaired surrogate escape decodes to
        /// U+FFFD.
        fn next_char(&mut self) -> Option<char> {
            match self.next_unit()? {
                Unit::Char(c) => Some(c),
                Unit::Escape(high @ 0xD800..=0xDBFF) => match self.next_unit() {
                    Some(Unit::Escape(low @ 0xDC00..=0xDFFF)) => {
                        let code = 0x10000
                            + ((u32::from(high) - 0xD800) << 10)
                            + (u32::from(low) - 0xDC00);
                        Some(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER))
                    }
                    other => {
                        self.pending = other;
                        Some(char::REPLACEMENT_CHARACTER)
                    }
                },
                Unit::Escape(code) => {
                    Some(char::from_u32(u32::from(code)).unwrap_or(char::REPLACEMENT_CHARACTER))
                }
            }
        }
    }

    /// Looks for the valid-JSON constructs `jsonb` cannot store.
    pub(super) struct JsonbProbe {
        pub(super) representable: bool,
    }

    impl Default for JsonbProbe {
        fn default() -> Self {
            Self {
                representable: true,
            }
        }
    }

    impl JsonbProbe {
        fn check_string(&mut self, raw: &str) {
            if self.representable && raw.contains("\\u") {
                self.representable = string_is_representable(raw);
            }
        }
    }

    impl Visitor for JsonbProbe {
        fn key(&mut self, _depth: usize, raw: &str) {
            self.check_string(raw);
        }

        fn value(&mut self, _depth: usize, value: Value<'_>) {
            match value {
                Value::String(raw) => self.check_string(raw),
                Value::Number(number) if self.representable => {
                    let (before, after) = plain_digits(number);
                    self.representable =
                        before <= JSONB_MAX_PLAIN_DIGITS && after <= JSONB_MAX_PLAIN_DIGITS;
                }
                _ => {}
            }
        }
    }

    /// No `\u0000` escape and no unpaired surrogate escape.
    fn string_is_representable(raw: &str) -> bool {
        let mut units = Utf16Units::new(raw);
        let mut expecting_low = false;
        while let Some(unit) = units.next_unit() {
            let is_low = matches!(unit, Unit::Escape(0xDC00..=0xDFFF));
            if expecting_low != is_low {
                return false;
            }
            match unit {
                Unit::Escape(0) => return false,
                Unit::Escape(0xD800..=0xDBFF) => expecting_low = true,
                _ => expecting_low = false,
            }
        }
        !expecting_low
    }

    /// Digits before and after the decimal point of `number` written in plain
    /// decimal notation: without leading zeros before the point, keeping the
    /// written fraction digits (trailing zeros included) after it, as
    /// Postgres `numeric` counts its weight and display scale.
    pub(super) fn plain_digits(number: Number<'_>) -> (u64, u64) {
        // Saturating well above any length a text can have.
        const CAP: i128 = 1_000_000_000_000_000;
        let magnitude = number.exp.bytes().fold(0i128, |acc, digit| {
            (acc * 10 + i128::from(digit - b'0')).min(CAP)
        });
        let exp = if number.exp_negative {
            -magnitude
        } else {
            magnitude
        };
        let int_len = number.int.len() as i128;
        let frac_len = number.frac.len() as i128;
        let after = (frac_len - exp).max(0);
        let leading_zeros = if number.int == "0" {
            1 + number.frac.bytes().take_while(|&b| b == b'0').count() as i128
        } else {
            0
        };
        let before = if leading_zeros == int_len + frac_len {
            0
        } else {
            (int_len + exp - leading_zeros).max(0)
        };
        let clamp = |v: i128| u64::try_from(v).unwrap_or(u64::MAX);
        (clamp(before), clamp(after))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn digits_of(literal: &str) -> (u64, u64) {
            let mut scanner = Scanner {
                text: literal,
                pos: 0,
            };
            let number = scanner.number().expect("a number literal");
            assert_eq!(scanner.pos, literal.len(), "whole literal consumed");
            plain_digits(number)
        }

        #[test]
        fn plain_digit_counts() {
            assert_eq!(digits_of("0"), (0, 0));
            assert_eq!(digits_of("-12"), (2, 0));
            assert_eq!(digits_of("1.50"), (1, 2));
            assert_eq!(digits_of("123.45e1"), (4, 1));
            assert_eq!(digits_of("0.001e5"), (3, 0));
            assert_eq!(digits_of("1.5e-3"), (0, 4));
            assert_eq!(digits_of("1e15999"), (16_000, 0));
            assert_eq!(digits_of("1e-16000"), (0, 16_000));
            assert_eq!(digits_of("0e99999"), (0, 0));
            assert_eq!(digits_of("0.0e5"), (0, 0));
            assert_eq!(digits_of("0.0e-3"), (0, 4));
            assert_eq!(
                digits_of("1e99999999999999999999999999999999999999"),
                (1_000_000_000_000_001, 0)
            );
        }

        #[test]
        fn unescaped_key_comparison() {
            assert!(unescaped_equals("blobId", "blobId"));
            assert!(unescaped_equals("blob\\u0049d", "blobId"));
            assert!(unescaped_equals("\\ud83d\\ude00", "\u{1F600}"));
            assert!(!unescaped_equals("blobId\\u0000", "blobId"));
            assert!(!unescaped_equals("blob", "blobId"));
            assert!(unescaped_equals("\\ud83d", "\u{FFFD}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_value_longer_than_u32_max_overflows() {
        let too_long = u32::MAX as usize + 1;
        let error = length_prefixed_len(too_long, 4).unwrap_err();
        assert!(error.is(ErrorCode::CodecEncodeFailed));
        assert_eq!(error.get_detail("reason"), Some("length_overflow"));
        assert_eq!(error.get_detail("column"), Some("4"));
        assert_eq!(
            length_prefixed_len(u32::MAX as usize, 0).ok(),
            Some(u32::MAX as usize + 4)
        );
    }
}
