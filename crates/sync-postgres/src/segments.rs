//! The segment store in the storage's schema (`_syncstore_segments`,
//! `docs/decisions.md` "Bootstrap segments in the storage's database"):
//! [`SegmentStore`] for [`PostgresStorage`]. Every method is one autocommit
//! statement on a pooled connection.

use postgres::Row;
use sync_core::segments::{
    check_key, check_prune_limit, check_put, check_segment_id, SegmentLimits,
};
use sync_core::{
    validate, Error, ErrorCode, NewSegment, Result, SegmentBuildKey, SegmentFetch,
    SegmentMediaType, SegmentMeta, SegmentStore, StoredSegment,
};

use crate::instance::PostgresStorage;
use crate::pool::{col, Conn};

/// Inserts a segment, or extends the expiry of the one stored under its key.
const PUT_SQL: &str = "INSERT INTO _syncstore_segments (partition, segment_id, scope_digest, \
build_key, tbl, media_type, schema_version, as_of_commit_seq, row_cursor, page_rows, \
next_row_cursor, row_count, byte_length, created_at_ms, expires_at_ms, bytes) \
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
ON CONFLICT (partition, segment_id, scope_digest) DO UPDATE SET \
expires_at_ms = GREATEST(_syncstore_segments.expires_at_ms, EXCLUDED.expires_at_ms) \
RETURNING segment_id, partition, tbl, scope_digest, media_type, schema_version, \
as_of_commit_seq, row_cursor, page_rows, next_row_cursor, row_count, byte_length, \
created_at_ms, expires_at_ms";

/// The live segment of a build key expiring last (`_syncstore_segments_by_key`).
const FIND_LIVE_SQL: &str = "SELECT segment_id, partition, tbl, scope_digest, media_type, \
schema_version, as_of_commit_seq, row_cursor, page_rows, next_row_cursor, row_count, \
byte_length, created_at_ms, expires_at_ms FROM _syncstore_segments \
WHERE partition = $1 AND build_key = $2 AND expires_at_ms > $3 \
ORDER BY expires_at_ms DESC LIMIT 1";

/// One entry of the id in the partition, the one of the scope digest first;
/// the bytes only for that one.
const GET_SQL: &str = "SELECT segment_id, partition, tbl, scope_digest, media_type, \
schema_version, as_of_commit_seq, row_cursor, page_rows, next_row_cursor, row_count, \
byte_length, created_at_ms, expires_at_ms, CASE WHEN scope_digest = $3 THEN bytes END \
FROM _syncstore_segments WHERE partition = $1 AND segment_id = $2 \
ORDER BY scope_digest = $3 DESC LIMIT 1";

/// At most `$2` expired entries (`_syncstore_segments_by_expiry`).
const DELETE_EXPIRED_SQL: &str = "DELETE FROM _syncstore_segments \
WHERE (partition, segment_id, scope_digest) IN (SELECT partition, segment_id, scope_digest \
FROM _syncstore_segments WHERE expires_at_ms <= $1 ORDER BY expires_at_ms LIMIT $2)";

/// Reads the metadata columns of a row; an unknown media type or a page
/// size out of range is a corrupt row.
fn meta(row: &Row) -> Result<SegmentMeta> {
    let media: i16 = col(row, 4)?;
    let media_type = u8::try_from(media)
        .ok()
        .and_then(SegmentMediaType::from_code)
        .ok_or_else(|| corrupt("segment_media_type_unknown"))?;
    let page_rows: i64 = col(row, 8)?;
    Ok(SegmentMeta {
        segment_id: col(row, 0)?,
        partition: col(row, 1)?,
        key: SegmentBuildKey {
            table: col(row, 2)?,
            scope_digest: col(row, 3)?,
            media_type,
            schema_version: col(row, 5)?,
            as_of_commit_seq: col(row, 6)?,
            row_cursor: col(row, 7)?,
            page_rows: u32::try_from(page_rows).map_err(|_| corrupt("segment_page_rows"))?,
        },
        next_row_cursor: col(row, 9)?,
        row_count: col(row, 10)?,
        byte_length: col(row, 11)?,
        created_at_ms: col(row, 12)?,
        expires_at_ms: col(row, 13)?,
    })
}

fn corrupt(reason: &str) -> Error {
    Error::new(ErrorCode::Backend).detail("reason", reason)
}

fn put(conn: &mut Conn, segment: &NewSegment) -> Result<SegmentMeta> {
    let key = &segment.key;
    let byte_length =
        i64::try_from(segment.bytes.len()).map_err(|_| Error::new(ErrorCode::SegmentTooLarge))?;
    let row = conn.query_one(
        PUT_SQL,
        &[
            &segment.partition,
            &segment.segment_id,
            &key.scope_digest,
            &key.canonical(),
            &key.table,
            &i16::from(key.media_type.code()),
            &key.schema_version,
            &key.as_of_commit_seq,
            &key.row_cursor,
            &i64::from(key.page_rows),
            &segment.next_row_cursor,
            &segment.row_count,
            &byte_length,
            &segment.created_at_ms,
            &segment.expires_at_ms,
            &segment.bytes,
        ],
    )?;
    meta(&row)
}

fn find_live(
    conn: &mut Conn,
    partition: &str,
    key: &SegmentBuildKey,
    now_ms: i64,
) -> Result<Option<SegmentMeta>> {
    conn.query_opt(FIND_LIVE_SQL, &[&partition, &key.canonical(), &now_ms])?
        .map(|row| meta(&row))
        .transpose()
}

fn get(
    conn: &mut Conn,
    partition: &str,
    segment_id: &str,
    scope_digest: &str,
    now_ms: i64,
) -> Result<SegmentFetch> {
    let Some(row) = conn.query_opt(GET_SQL, &[&partition, &segment_id, &scope_digest])? else {
        return Ok(SegmentFetch::NotFound);
    };
    let meta = meta(&row)?;
    Ok(match col::<Option<Vec<u8>>>(&row, 14)? {
        None => SegmentFetch::ScopeMismatch,
        Some(_) if !meta.is_live(now_ms) => SegmentFetch::Expired,
        Some(bytes) => SegmentFetch::Found(Box::new(StoredSegment { meta, bytes })),
    })
}

impl SegmentStore for PostgresStorage {
    fn segment_limits(&self) -> SegmentLimits {
        self.config().segment_limits
    }

    fn put_segment(&self, segment: &NewSegment) -> Result<SegmentMeta> {
        check_put(segment, self.segment_limits())?;
        self.with_conn_write(|conn| put(conn, segment))
    }

    fn find_live_segment(
        &self,
        partition: &str,
        key: &SegmentBuildKey,
        now_ms: i64,
    ) -> Result<Option<SegmentMeta>> {
        validate::partition(partition)?;
        check_key(key)?;
        self.with_conn(|conn| find_live(conn, partition, key, now_ms))
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
        self.with_conn(|conn| get(conn, partition, segment_id, scope_digest, now_ms))
    }

    fn delete_expired_segments(&self, now_ms: i64, limit: u32) -> Result<u64> {
        check_prune_limit(limit)?;
        self.with_conn_write(|conn| conn.execute(DELETE_EXPIRED_SQL, &[&now_ms, &i64::from(limit)]))
    }
}
