//! Bootstrap pages → SSG2 rows segments, delivered inline or by reference
//! (SSP2 §5.1, §5.4, §5.7; `engine.md` §5.4).

use std::sync::Arc;

use sync_core::segments::{NewSegment, SegmentBuildKey, SegmentMediaType, SegmentStore};
use sync_core::{CompiledSchema, CompiledTable};
use sync_engine::BootstrapPage;
use sync_ssp2::{
    Accept, Column, ColumnType, EncodedSegment, MediaType, ResponseFrame, SegmentEncoder,
    SegmentRef,
};

/// Why a page could not become a segment frame.
#[derive(Debug)]
pub(crate) enum SegmentFailure {
    /// The page's table is not in the schema, or a row does not fit it.
    Encode(String),
    /// The segment store refused or failed.
    Store(sync_core::Error),
}

/// What a page needs to become a frame: where and how segments go.
pub(crate) struct Delivery<'a> {
    pub(crate) schema: &'a CompiledSchema,
    pub(crate) store: &'a Arc<dyn SegmentStore>,
    pub(crate) partition: &'a str,
    pub(crate) accept: Accept,
    pub(crate) inline_limit: usize,
    pub(crate) ttl_ms: i64,
    pub(crate) now_ms: i64,
}

fn column_type(t: sync_core::ColumnType) -> ColumnType {
    match t {
        sync_core::ColumnType::String => ColumnType::String,
        sync_core::ColumnType::Integer => ColumnType::Integer,
        sync_core::ColumnType::Float => ColumnType::Float,
        sync_core::ColumnType::Boolean => ColumnType::Boolean,
        sync_core::ColumnType::Json => ColumnType::Json,
        sync_core::ColumnType::Bytes => ColumnType::Bytes,
        sync_core::ColumnType::BlobRef => ColumnType::BlobRef,
        sync_core::ColumnType::Crdt => ColumnType::Crdt,
    }
}

/// The column table of `table` as a segment declares it.
pub(crate) fn columns(table: &CompiledTable) -> Vec<Column> {
    table
        .columns
        .iter()
        .map(|c| Column {
            name: c.name.clone(),
            column_type: column_type(c.column_type),
            nullable: c.nullable,
        })
        .collect()
}

/// The SSG2 bytes of one page.
pub(crate) fn encode_page(
    schema: &CompiledSchema,
    page: &BootstrapPage,
) -> Result<EncodedSegment, SegmentFailure> {
    let table = schema
        .table(&page.table)
        .ok_or_else(|| SegmentFailure::Encode("unknown_table".to_owned()))?;
    let mut encoder = SegmentEncoder::new(&page.table, page.schema_version, columns(table))
        .map_err(|e| SegmentFailure::Encode(e.to_string()))?;
    for row in &page.rows {
        encoder
            .push_row(row.row_version, &row.row)
            .map_err(|e| SegmentFailure::Encode(e.to_string()))?;
    }
    encoder
        .finish()
        .map_err(|e| SegmentFailure::Encode(e.to_string()))
}

impl Delivery<'_> {
    /// The frame delivering `page` for a section whose effective scopes
    /// digest to `scope_digest`: inline when the client accepts inline
    /// rows and the segment is at most the inline limit (or references
    /// are not accepted), else a `SEGMENT_REF` to a stored segment.
    pub(crate) fn frame(
        &self,
        page: &BootstrapPage,
        scope_digest: &str,
    ) -> Result<ResponseFrame, SegmentFailure> {
        let inline_ok = self.accept.contains(Accept::INLINE_ROWS);
        let ref_ok = self.accept.contains(Accept::EXTERNAL_ROWS);
        let key = SegmentBuildKey {
            table: page.table.clone(),
            scope_digest: scope_digest.to_owned(),
            media_type: SegmentMediaType::Rows,
            schema_version: page.schema_version,
            as_of_commit_seq: page.as_of_commit_seq,
            row_cursor: page.row_cursor.clone(),
            page_rows: u32::try_from(page.rows.len()).unwrap_or(u32::MAX),
        };
        if ref_ok && !inline_ok {
            if let Some(reused) = self.reusable(&key, page)? {
                return Ok(reused);
            }
        }
        let bytes = encode_page(self.schema, page)?;
        if inline_ok && (bytes.len() <= self.inline_limit || !ref_ok) {
            return Ok(ResponseFrame::SegmentInline(bytes.into_inline()));
        }
        if let Some(reused) = self.reusable(&key, page)? {
            return Ok(reused);
        }
        let segment = NewSegment {
            segment_id: sync_ssp2::sha256::segment_id(bytes.as_bytes()),
            partition: self.partition.to_owned(),
            key,
            next_row_cursor: page.next_row_cursor.clone(),
            row_count: i64::try_from(page.rows.len()).unwrap_or(i64::MAX),
            bytes: bytes.into_bytes(),
            created_at_ms: self.now_ms,
            expires_at_ms: self.now_ms.saturating_add(self.ttl_ms),
        };
        let meta = self
            .store
            .put_segment(&segment)
            .map_err(SegmentFailure::Store)?;
        Ok(reference(&meta))
    }

    /// A live segment built for the same key (§5.1 reuse), when it still
    /// has at least half its lifetime ahead and describes the same page.
    fn reusable(
        &self,
        key: &SegmentBuildKey,
        page: &BootstrapPage,
    ) -> Result<Option<ResponseFrame>, SegmentFailure> {
        let found = self
            .store
            .find_live_segment(self.partition, key, self.now_ms)
            .map_err(SegmentFailure::Store)?;
        Ok(found
            .filter(|meta| {
                meta.next_row_cursor == page.next_row_cursor
                    && meta.expires_at_ms - self.now_ms >= self.ttl_ms / 2
            })
            .map(|meta| reference(&meta)))
    }
}

fn reference(meta: &sync_core::segments::SegmentMeta) -> ResponseFrame {
    ResponseFrame::SegmentRef(SegmentRef {
        segment_id: meta.segment_id.clone(),
        media_type: MediaType::Rows,
        table: meta.key.table.clone(),
        byte_length: meta.byte_length,
        row_count: meta.row_count,
        as_of_commit_seq: meta.key.as_of_commit_seq,
        scope_digest: meta.key.scope_digest.clone(),
        row_cursor: meta.key.row_cursor.clone(),
        next_row_cursor: meta.next_row_cursor.clone(),
        url: None,
    })
}
