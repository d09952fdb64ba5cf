//! The segment store in the database file (`_syncstore_segments`,
//! `docs/decisions.md` "Bootstrap segments in the storage's database"):
//! [`SegmentStore`] for [`SqliteStorage`]. Writes are single autocommit
//! statements on the writer; reads run on the reader pool.

use rusqlite::{Connection, OptionalExtension, Row};
use sync_core::segments::SegmentLimits;
use sync_core::segments::{check_key, check_prune_limit, check_put, check_segment_id};
use sync_core::{
    validate, Error, ErrorCode, NewSegment, Result, SegmentBuildKey, SegmentFetch,
    SegmentMediaType, SegmentMeta, SegmentStore, StoredSegment,
};

use crate::errors::DbResultExt;
use crate::instance::SqliteStorage;
use crate::seam;

/// The metadata columns, in the order [`meta`] reads them.
const META_COLUMNS: &str = "segment_id, partition, tbl, scope_digest, media_type, \
schema_version, as_of_commit_seq, row_cursor, page_rows, next_row_cursor, row_count, \
byte_length, created_at_ms, expires_at_ms";

/// Inserts a segment, or extends the expiry of the one stored under its key.
fn put_sql() -> String {
    format!(
        "INSERT INTO _syncstore_segments (partition, segment_id, scope_digest, build_key, tbl, \
         media_type, schema_version, as_of_commit_seq, row_cursor, page_rows, next_row_cursor, \
         row_count, byte_length, created_at_ms, expires_at_ms, bytes) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) \
         ON CONFLICT (partition, segment_id, scope_digest) DO UPDATE SET \
         expires_at_ms = max(_syncstore_segments.expires_at_ms, excluded.expires_at_ms) \
         RETURNING {META_COLUMNS}"
    )
}

/// The live segment of a build key expiring last (`_syncstore_segments_by_key`).
fn find_live_sql() -> String {
    format!(
        "SELECT {META_COLUMNS} FROM _syncstore_segments \
         WHERE partition = ?1 AND build_key = ?2 AND expires_at_ms > ?3 \
         ORDER BY expires_at_ms DESC LIMIT 1"
    )
}

/// One entry of the id in the partition, the one of the scope digest first;
/// the bytes only for that one.
fn get_sql() -> String {
    format!(
        "SELECT {META_COLUMNS}, CASE WHEN scope_digest = ?3 THEN bytes END \
         FROM _syncstore_segments WHERE partition = ?1 AND segment_id = ?2 \
         ORDER BY scope_digest = ?3 DESC LIMIT 1"
    )
}

/// At most `?2` expired entries (`_syncstore_segments_by_expiry`).
const DELETE_EXPIRED_SQL: &str = "DELETE FROM _syncstore_segments WHERE rowid IN \
(SELECT rowid FROM _syncstore_segments WHERE expires_at_ms <= ?1 ORDER BY expires_at_ms LIMIT CAST(?2 AS INTEGER))";

/// Reads the metadata columns of a row.
fn meta(row: &Row<'_>) -> rusqlite::Result<(SegmentMeta, i64)> {
    let media: i64 = row.get(4)?;
    let meta = SegmentMeta {
        segment_id: row.get(0)?,
        partition: row.get(1)?,
        key: SegmentBuildKey {
            table: row.get(2)?,
            scope_digest: row.get(3)?,
            media_type: SegmentMediaType::Rows,
            schema_version: row.get(5)?,
            as_of_commit_seq: row.get(6)?,
            row_cursor: row.get(7)?,
            page_rows: row.get(8)?,
        },
        next_row_cursor: row.get(9)?,
        row_count: row.get(10)?,
        byte_length: row.get(11)?,
        created_at_ms: row.get(12)?,
        expires_at_ms: row.get(13)?,
    };
    Ok((meta, media))
}

/// Completes the media type read by [`meta`]; an unknown code is a corrupt row.
fn with_media((mut meta, media): (SegmentMeta, i64)) -> Result<SegmentMeta> {
    meta.key.media_type = u8::try_from(media)
        .ok()
        .and_then(SegmentMediaType::from_code)
        .ok_or_else(|| {
            Error::new(ErrorCode::Backend)
                .detail("reason", "segment_media_type_unknown")
                .detail("media_type", media)
        })?;
    Ok(meta)
}

fn put(conn: &Connection, segment: &NewSegment) -> Result<SegmentMeta> {
    let key = &segment.key;
    let byte_length =
        i64::try_from(segment.bytes.len()).map_err(|_| Error::new(ErrorCode::SegmentTooLarge))?;
    let row = seam::cached(conn, &put_sql())
        .db()?
        .query_row(
            rusqlite::params![
                segment.partition,
                segment.segment_id,
                key.scope_digest,
                key.canonical(),
                key.table,
                key.media_type.code(),
                key.schema_version,
                key.as_of_commit_seq,
                key.row_cursor,
                key.page_rows,
                segment.next_row_cursor,
                segment.row_count,
                byte_length,
                segment.created_at_ms,
                segment.expires_at_ms,
                segment.bytes,
            ],
            meta,
        )
        .db()?;
    with_media(row)
}

fn find_live(
    conn: &Connection,
    partition: &str,
    key: &SegmentBuildKey,
    now_ms: i64,
) -> Result<Option<SegmentMeta>> {
    seam::cached(conn, &find_live_sql())
        .db()?
        .query_row((partition, key.canonical(), now_ms), meta)
        .optional()
        .db()?
        .map(with_media)
        .transpose()
}

fn get(
    conn: &Connection,
    partition: &str,
    segment_id: &str,
    scope_digest: &str,
    now_ms: i64,
) -> Result<SegmentFetch> {
    let found = seam::cached(conn, &get_sql())
        .db()?
        .query_row((partition, segment_id, scope_digest), |row| {
            Ok((meta(row)?, row.get::<_, Option<Vec<u8>>>(14)?))
        })
        .optional()
        .db()?;
    let Some((row, bytes)) = found else {
        return Ok(SegmentFetch::NotFound);
    };
    let meta = with_media(row)?;
    Ok(match bytes {
        None => SegmentFetch::ScopeMismatch,
        Some(_) if !meta.is_live(now_ms) => SegmentFetch::Expired,
        Some(bytes) => SegmentFetch::Found(Box::new(StoredSegment { meta, bytes })),
    })
}

fn delete_expired(conn: &Connection, now_ms: i64, limit: u32) -> Result<u64> {
    let deleted = seam::cached(conn, DELETE_EXPIRED_SQL)
        .db()?
        .execute((now_ms, limit))
        .db()?;
    Ok(deleted as u64)
}

impl SegmentStore for SqliteStorage {
    fn segment_limits(&self) -> SegmentLimits {
        self.configured_segment_limits()
    }

    fn put_segment(&self, segment: &NewSegment) -> Result<SegmentMeta> {
        check_put(segment, self.segment_limits())?;
        self.pools().write_once(|conn| put(conn, segment))
    }

    fn find_live_segment(
        &self,
        partition: &str,
        key: &SegmentBuildKey,
        now_ms: i64,
    ) -> Result<Option<SegmentMeta>> {
        validate::partition(partition)?;
        check_key(key)?;
        self.pools()
            .read(|conn| find_live(conn, partition, key, now_ms))
    }

    fn get_segment(
        &self,
        partition: &str,
        segment_id: &str,
        scope_digest: &str,
        now_ms: i64,
    ) -> Result<SegmentFetch> {
        validate::partition(partition)?;
        if !check_segment_id(segment_id) {
            return Ok(SegmentFetch::NotFound);
        }
        self.pools()
            .read(|conn| get(conn, partition, segment_id, scope_digest, now_ms))
    }

    fn delete_expired_segments(&self, now_ms: i64, limit: u32) -> Result<u64> {
        check_prune_limit(limit)?;
        self.pools()
            .write_once(|conn| delete_expired(conn, now_ms, limit))
    }
}
