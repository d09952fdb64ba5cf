//! SSG2 rows segments (§5.2): a self-describing column table, then blocks
//! of rows, then the end marker.

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{put_i32, put_i64, put_len, put_str, put_u16, put_u8, Reader};
use crate::row::{check_row, decode_row, encode_row, min_row_len};
use crate::values::RawJson;

/// The segment magic, `SSG2`.
pub const SEGMENT_MAGIC: [u8; 4] = *b"SSG2";

/// The only segment format version specified.
pub const SEGMENT_FORMAT_VERSION: u16 = 1;

/// A column type and its wire tag (§2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// Tag 1: `str`.
    String,
    /// Tag 2: safe `i64`.
    Integer,
    /// Tag 3: `f64`.
    Float,
    /// Tag 4: `bool`.
    Boolean,
    /// Tag 5: a JSON document, kept as raw text.
    Json,
    /// Tag 6: `bytes`.
    Bytes,
    /// Tag 7: a canonical BlobRef JSON document.
    BlobRef,
    /// Tag 8: opaque CRDT bytes.
    Crdt,
}

impl ColumnType {
    /// The wire tag.
    pub fn tag(self) -> u8 {
        match self {
            Self::String => 1,
            Self::Integer => 2,
            Self::Float => 3,
            Self::Boolean => 4,
            Self::Json => 5,
            Self::Bytes => 6,
            Self::BlobRef => 7,
            Self::Crdt => 8,
        }
    }

    /// The type of a tag, if any.
    pub fn from_tag(tag: u8) -> Option<Self> {
        Some(match tag {
            1 => Self::String,
            2 => Self::Integer,
            3 => Self::Float,
            4 => Self::Boolean,
            5 => Self::Json,
            6 => Self::Bytes,
            7 => Self::BlobRef,
            8 => Self::Crdt,
            _ => return None,
        })
    }

    /// The §11 rendering name.
    pub fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Float => "float",
            Self::Boolean => "boolean",
            Self::Json => "json",
            Self::Bytes => "bytes",
            Self::BlobRef => "blob_ref",
            Self::Crdt => "crdt",
        }
    }
}

/// One entry of a segment's column table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column name.
    pub name: String,
    /// The column type.
    pub column_type: ColumnType,
    /// Whether NULL is allowed.
    pub nullable: bool,
}

/// One column value of a segment row.
#[derive(Debug, Clone)]
pub enum ColumnValue {
    /// NULL.
    Null,
    /// A string column value.
    String(String),
    /// An integer column value (safe range).
    Integer(i64),
    /// A float column value; any bit pattern, NaN included.
    Float(f64),
    /// A boolean column value.
    Boolean(bool),
    /// A json column value, as raw text.
    Json(RawJson),
    /// A bytes column value.
    Bytes(Vec<u8>),
    /// A blob_ref column value, as raw canonical BlobRef text.
    BlobRef(RawJson),
    /// A crdt column value, opaque bytes.
    Crdt(Vec<u8>),
}

impl PartialEq for ColumnValue {
    /// Floats compare by bit pattern, so a decoded NaN equals itself and
    /// `0.0` differs from `-0.0`, as their encodings do.
    fn eq(&self, other: &Self) -> bool {
        use ColumnValue::*;
        match (self, other) {
            (Null, Null) => true,
            (String(a), String(b)) => a == b,
            (Integer(a), Integer(b)) => a == b,
            (Float(a), Float(b)) => a.to_bits() == b.to_bits(),
            (Boolean(a), Boolean(b)) => a == b,
            (Json(a), Json(b)) | (BlobRef(a), BlobRef(b)) => a == b,
            (Bytes(a), Bytes(b)) | (Crdt(a), Crdt(b)) => a == b,
            _ => false,
        }
    }
}

/// One row record: its server version and its values in column order.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentRow {
    /// The row's `server_version` at the segment's pin; at least 1.
    pub server_version: i64,
    /// One value per column.
    pub values: Vec<ColumnValue>,
}

/// A decoded rows segment.
#[derive(Debug, Clone, PartialEq)]
pub struct RowsSegment {
    /// The table.
    pub table: String,
    /// The schema version the rows are encoded for.
    pub schema_version: i32,
    /// The column table.
    pub columns: Vec<Column>,
    /// Row blocks, each non-empty, in order.
    pub blocks: Vec<Vec<SegmentRow>>,
}

const LOW_SERVER_VERSION: &str = "a segment row's serverVersion must be at least 1";

fn decode_column(r: &mut Reader<'_>) -> Result<Column, DecodeError> {
    let name = r.str("a column name")?;
    let tag = r.u8("a column type")?;
    let column_type = ColumnType::from_tag(tag).ok_or(DecodeError::InvalidEnum {
        what: "a column type",
        value: tag,
    })?;
    let flags = r.u8("column flags")?;
    if flags & !1 != 0 {
        return Err(DecodeError::Constraint {
            rule: "column flags other than bit 0 must be zero",
        });
    }
    Ok(Column {
        name,
        column_type,
        nullable: flags & 1 == 1,
    })
}

/// Decodes a whole rows segment, checking its structure (§5.2); the column
/// table is not compared with any schema here.
pub fn decode_segment(bytes: &[u8]) -> Result<RowsSegment, DecodeError> {
    let mut r = Reader::new(bytes);
    if r.take(4, "the segment magic")? != SEGMENT_MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let version = r.u16("the segment format version")?;
    if version != SEGMENT_FORMAT_VERSION {
        return Err(DecodeError::UnsupportedSegmentVersion { version });
    }
    if r.u16("the segment flags")? != 0 {
        return Err(DecodeError::NonZeroFlags);
    }
    let table = r.str("the segment table")?;
    let schema_version = r.i32("the segment schemaVersion")?;
    let count = r.count16("the segment columns", 4 + 1 + 1)?;
    let mut columns = Vec::with_capacity(count);
    for _ in 0..count {
        columns.push(decode_column(&mut r)?);
    }
    let min_row = 8 + min_row_len(&columns);
    let mut blocks = Vec::new();
    loop {
        let row_count = r.u32("a block rowCount")?;
        if row_count == 0 {
            r.finish("the segment end marker")?;
            break;
        }
        let len = r.u32("a block byteLength")?;
        let mut block = Reader::new(r.take_claimed(u64::from(len), "a block's rows")?);
        block.check_claim("a block's rows", u64::from(row_count), min_row)?;
        let mut rows = Vec::with_capacity(row_count as usize);
        for _ in 0..row_count {
            let server_version = block.i64("a row serverVersion")?;
            if server_version < 1 {
                return Err(DecodeError::Constraint {
                    rule: LOW_SERVER_VERSION,
                });
            }
            rows.push(SegmentRow {
                server_version,
                values: decode_row(&mut block, &columns)?,
            });
        }
        block.finish("a row block")?;
        blocks.push(rows);
    }
    Ok(RowsSegment {
        table,
        schema_version,
        columns,
        blocks,
    })
}

/// Encodes a rows segment; refuses an empty block (its zero row count
/// would read as the end marker), rows that do not fit the column table,
/// and server versions below 1.
pub fn encode_segment(segment: &RowsSegment) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    out.extend_from_slice(&SEGMENT_MAGIC);
    put_u16(&mut out, SEGMENT_FORMAT_VERSION);
    put_u16(&mut out, 0);
    put_str(&mut out, &segment.table, "the segment table")?;
    put_i32(&mut out, segment.schema_version);
    let count = u16::try_from(segment.columns.len()).map_err(|_| EncodeError::TooLong {
        what: "the segment columns",
    })?;
    put_u16(&mut out, count);
    for column in &segment.columns {
        put_str(&mut out, &column.name, "a column name")?;
        put_u8(&mut out, column.column_type.tag());
        put_u8(&mut out, u8::from(column.nullable));
    }
    let mut rows = Vec::new();
    for block in &segment.blocks {
        if block.is_empty() {
            return Err(EncodeError::Constraint {
                rule: "a segment block must hold at least one row",
            });
        }
        rows.clear();
        for row in block {
            if row.server_version < 1 {
                return Err(EncodeError::Constraint {
                    rule: LOW_SERVER_VERSION,
                });
            }
            put_i64(&mut rows, row.server_version, "a row serverVersion")?;
            encode_row(&mut rows, &segment.columns, &row.values)?;
        }
        put_len(&mut out, block.len(), "a block rowCount")?;
        put_len(&mut out, rows.len(), "a block byteLength")?;
        out.extend_from_slice(&rows);
    }
    put_len(&mut out, 0, "the segment end marker")?;
    Ok(out)
}

/// Rows per block a [`SegmentEncoder`] aims for (§5.2: ~1000 rows).
pub const TARGET_BLOCK_ROWS: usize = 1000;

/// Bytes per block a [`SegmentEncoder`] aims for (§5.2: ~256 KiB).
pub const TARGET_BLOCK_BYTES: usize = 256 * 1024;

/// Builds a rows segment from rows already in the row codec (§2.4), as a
/// server holds them, without decoding them into [`ColumnValue`]s first.
///
/// Each row is checked against the column table as it is added (a row
/// that does not fit is refused and leaves the segment unchanged); blocks
/// close at [`TARGET_BLOCK_ROWS`] rows or [`TARGET_BLOCK_BYTES`] bytes,
/// whichever comes first. The bytes equal what [`encode_segment`] gives for
/// the same rows in the same blocks.
#[derive(Debug)]
pub struct SegmentEncoder {
    columns: Vec<Column>,
    out: Vec<u8>,
    block: Vec<u8>,
    block_rows: usize,
    rows: usize,
}

impl SegmentEncoder {
    /// Starts a segment of `table` at `schema_version` with `columns`.
    pub fn new(
        table: &str,
        schema_version: i32,
        columns: Vec<Column>,
    ) -> Result<Self, EncodeError> {
        let mut out = Vec::new();
        out.extend_from_slice(&SEGMENT_MAGIC);
        put_u16(&mut out, SEGMENT_FORMAT_VERSION);
        put_u16(&mut out, 0);
        put_str(&mut out, table, "the segment table")?;
        put_i32(&mut out, schema_version);
        let count = u16::try_from(columns.len()).map_err(|_| EncodeError::TooLong {
            what: "the segment columns",
        })?;
        put_u16(&mut out, count);
        for column in &columns {
            put_str(&mut out, &column.name, "a column name")?;
            put_u8(&mut out, column.column_type.tag());
            put_u8(&mut out, u8::from(column.nullable));
        }
        Ok(Self {
            columns,
            out,
            block: Vec::new(),
            block_rows: 0,
            rows: 0,
        })
    }

    /// Adds one row: its server version (at least 1) and its row-codec
    /// bytes, which must fit the column table exactly.
    pub fn push_row(&mut self, server_version: i64, row: &[u8]) -> Result<(), EncodeError> {
        if server_version < 1 {
            return Err(EncodeError::Constraint {
                rule: LOW_SERVER_VERSION,
            });
        }
        let mut reader = Reader::new(row);
        let fits = check_row(&mut reader, &self.columns)
            .ok()
            .is_some_and(|()| reader.finish("a row").is_ok());
        if !fits {
            return Err(EncodeError::Constraint {
                rule: "a row does not fit the segment's column table",
            });
        }
        put_i64(&mut self.block, server_version, "a row serverVersion")?;
        self.block.extend_from_slice(row);
        self.block_rows += 1;
        self.rows += 1;
        if self.block_rows >= TARGET_BLOCK_ROWS || self.block.len() >= TARGET_BLOCK_BYTES {
            self.close_block()?;
        }
        Ok(())
    }

    /// Rows added so far.
    pub fn row_count(&self) -> usize {
        self.rows
    }

    fn close_block(&mut self) -> Result<(), EncodeError> {
        if self.block_rows == 0 {
            return Ok(());
        }
        put_len(&mut self.out, self.block_rows, "a block rowCount")?;
        put_len(&mut self.out, self.block.len(), "a block byteLength")?;
        self.out.extend_from_slice(&self.block);
        self.block.clear();
        self.block_rows = 0;
        Ok(())
    }

    /// Closes the last block, writes the end marker and gives the segment.
    pub fn finish(mut self) -> Result<EncodedSegment, EncodeError> {
        self.close_block()?;
        put_len(&mut self.out, 0, "the segment end marker")?;
        Ok(EncodedSegment {
            bytes: self.out,
            rows: self.rows,
        })
    }
}

/// The bytes of a rows segment that a [`SegmentEncoder`] built: valid by
/// construction (every row was checked as it was added), so it becomes a
/// [`SegmentInline`](crate::SegmentInline) without being decoded again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedSegment {
    bytes: Vec<u8>,
    rows: usize,
}

impl EncodedSegment {
    /// The segment's bytes (what `segmentId` hashes).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Rows in the segment.
    pub fn row_count(&self) -> usize {
        self.rows
    }

    /// Never true: a segment holds at least its header and end marker.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Gives back the bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The segment for inline delivery.
    pub fn into_inline(self) -> crate::SegmentInline {
        crate::SegmentInline::from_valid(self.bytes, self.rows)
    }
}
