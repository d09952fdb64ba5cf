//! What a segment store keeps and answers with.

use serde_json::{json, Value};

/// The format of a segment's bytes (the `mediaType` of its descriptor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SegmentMediaType {
    /// A rows segment (`SSG2` bytes), descriptor code 1.
    Rows,
    /// A database image, descriptor code 2 (`mediaType = sqlite`: a
    /// protocol format, not a storage dialect).
    Sqlite, // tidy: dialect-name (the protocol's media type)
}

impl SegmentMediaType {
    /// The descriptor code: 1 for rows, 2 for SQLite.
    pub fn code(self) -> u8 {
        match self {
            SegmentMediaType::Rows => 1,
            SegmentMediaType::Sqlite => 2, // tidy: dialect-name (the protocol's media type)
        }
    }

    /// The media type of a descriptor code; `None` for an unknown code.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(SegmentMediaType::Rows),
            2 => Some(SegmentMediaType::Sqlite), // tidy: dialect-name (the protocol's media type)
            _ => None,
        }
    }
}

/// What a segment was built for: one page of one table at one pinned
/// commit, for one set of effective scopes, under one schema version. Two
/// requests with equal keys in one partition may share one segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SegmentBuildKey {
    /// The table the rows belong to.
    pub table: String,
    /// Digest of the effective scopes the rows were selected for.
    pub scope_digest: String,
    /// The format of the bytes.
    pub media_type: SegmentMediaType,
    /// The schema version the rows are encoded for.
    pub schema_version: i32,
    /// The commit the snapshot is pinned at.
    pub as_of_commit_seq: i64,
    /// Where the page starts (`None`: the first page of the table).
    pub row_cursor: Option<String>,
    /// The most rows the page may hold.
    pub page_rows: u32,
}

impl SegmentBuildKey {
    /// One text naming every field, equal for equal keys and different for
    /// different ones (a JSON array in field order); what stores index.
    pub fn canonical(&self) -> String {
        let value: Value = json!([
            self.table,
            self.scope_digest,
            self.media_type.code(),
            self.schema_version,
            self.as_of_commit_seq,
            self.row_cursor,
            self.page_rows,
        ]);
        value.to_string()
    }
}

/// A segment to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSegment {
    /// `"sha256:"` and the lowercase hex SHA-256 of `bytes`, computed by the
    /// builder (a store checks the shape, not the digest).
    pub segment_id: String,
    /// The partition that owns it; no other partition ever sees it.
    pub partition: String,
    /// What it was built for.
    pub key: SegmentBuildKey,
    /// Where the next page starts (`None`: the last page of the table).
    pub next_row_cursor: Option<String>,
    /// Rows it holds.
    pub row_count: i64,
    /// Its bytes, uncompressed.
    pub bytes: Vec<u8>,
    /// When it was built, ms since the epoch.
    pub created_at_ms: i64,
    /// When it expires, ms since the epoch: from then on it is expired.
    pub expires_at_ms: i64,
}

impl NewSegment {
    /// The metadata of this segment as a store keeps it.
    pub fn meta(&self) -> SegmentMeta {
        SegmentMeta {
            segment_id: self.segment_id.clone(),
            partition: self.partition.clone(),
            key: self.key.clone(),
            next_row_cursor: self.next_row_cursor.clone(),
            row_count: self.row_count,
            byte_length: i64::try_from(self.bytes.len()).unwrap_or(i64::MAX),
            created_at_ms: self.created_at_ms,
            expires_at_ms: self.expires_at_ms,
        }
    }
}

/// A stored segment without its bytes: everything its descriptor needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentMeta {
    /// The content address.
    pub segment_id: String,
    /// The owning partition.
    pub partition: String,
    /// What it was built for.
    pub key: SegmentBuildKey,
    /// Where the next page starts (`None`: the last page).
    pub next_row_cursor: Option<String>,
    /// Rows it holds.
    pub row_count: i64,
    /// Length of its bytes.
    pub byte_length: i64,
    /// When it was built.
    pub created_at_ms: i64,
    /// When it expires (the latest expiry any put of it asked for).
    pub expires_at_ms: i64,
}

impl SegmentMeta {
    /// Whether it is still live at `now_ms` (expired from `expires_at_ms` on).
    pub fn is_live(&self, now_ms: i64) -> bool {
        now_ms < self.expires_at_ms
    }
}

/// A stored segment with its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSegment {
    /// Its metadata.
    pub meta: SegmentMeta,
    /// Its bytes, exactly as put.
    pub bytes: Vec<u8>,
}

/// The answer to a download: the segment, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentFetch {
    /// Stored for this partition and these scopes, and live.
    Found(Box<StoredSegment>),
    /// Stored for this partition and these scopes, but expired
    /// (`sync.segment_expired` on the wire).
    Expired,
    /// Stored for this partition, but only for other effective scopes
    /// (`sync.forbidden` on the wire).
    ScopeMismatch,
    /// Not stored for this partition: unknown, forgotten, or another
    /// partition's (`sync.not_found` on the wire).
    NotFound,
}
