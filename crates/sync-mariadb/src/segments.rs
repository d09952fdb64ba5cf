//! The segment store in the storage's database (`_syncstore_segments`,
//! `docs/decisions.md` "Bootstrap segments in the storage's database"):
//! [`SegmentStore`] for [`MariadbStorage`], one autocommit statement per
//! method. The build key is a `LONGBLOB` indexed by a prefix; lookups
//! compare the full value.

use mysql::Value;
use sync_core::segments::{
    check_key, check_prune_limit, check_put, check_segment_id, SegmentLimits,
};
use sync_core::{
    validate, Error, ErrorCode, NewSegment, Result, SegmentBuildKey, SegmentFetch,
    SegmentMediaType, SegmentMeta, SegmentStore, StoredSegment,
};

use crate::instance::MariadbStorage;
use crate::pool::Conn;
use crate::values::corrupt;

const META_COLUMNS: &str = "`segment_id`, `partition`, `tbl`, `scope_digest`, `media_type`, \
`schema_version`, `as_of_commit_seq`, `row_cursor`, `page_rows`, `next_row_cursor`, \
`row_count`, `byte_length`, `created_at_ms`, `expires_at_ms`";

fn meta(row: &mysql::Row) -> Result<SegmentMeta> {
    fn get<T: mysql::prelude::FromValue>(row: &mysql::Row, i: usize) -> Result<T> {
        match row.get_opt::<T, usize>(i) {
            Some(Ok(value)) => Ok(value),
            _ => Err(corrupt("segment_column")),
        }
    }
    let media: i64 = get(row, 4)?;
    let media_type = u8::try_from(media)
        .ok()
        .and_then(SegmentMediaType::from_code)
        .ok_or_else(|| corrupt("segment_media_type_unknown"))?;
    let page_rows: i64 = get(row, 8)?;
    Ok(SegmentMeta {
        segment_id: get(row, 0)?,
        partition: get(row, 1)?,
        key: SegmentBuildKey {
            table: get(row, 2)?,
            scope_digest: get(row, 3)?,
            media_type,
            schema_version: get(row, 5)?,
            as_of_commit_seq: get(row, 6)?,
            row_cursor: get(row, 7)?,
            page_rows: u32::try_from(page_rows).map_err(|_| corrupt("segment_page_rows"))?,
        },
        next_row_cursor: get(row, 9)?,
        row_count: get(row, 10)?,
        byte_length: get(row, 11)?,
        created_at_ms: get(row, 12)?,
        expires_at_ms: get(row, 13)?,
    })
}

fn put(conn: &mut Conn, segment: &NewSegment) -> Result<SegmentMeta> {
    let key = &segment.key;
    let byte_length =
        i64::try_from(segment.bytes.len()).map_err(|_| Error::new(ErrorCode::SegmentTooLarge))?;
    let params: Vec<Value> = vec![
        segment.partition.as_str().into(),
        segment.segment_id.as_str().into(),
        key.scope_digest.as_str().into(),
        key.canonical().into(),
        key.table.as_str().into(),
        i64::from(key.media_type.code()).into(),
        key.schema_version.into(),
        key.as_of_commit_seq.into(),
        key.row_cursor.clone().into(),
        i64::from(key.page_rows).into(),
        segment.next_row_cursor.clone().into(),
        segment.row_count.into(),
        byte_length.into(),
        segment.created_at_ms.into(),
        segment.expires_at_ms.into(),
        segment.bytes.clone().into(),
    ];
    let row: Option<mysql::Row> = conn.first(
        &format!(
            "INSERT INTO `_syncstore_segments` (`partition`, `segment_id`, `scope_digest`, \
             `build_key`, `tbl`, `media_type`, `schema_version`, `as_of_commit_seq`, `row_cursor`, \
             `page_rows`, `next_row_cursor`, `row_count`, `byte_length`, `created_at_ms`, \
             `expires_at_ms`, `bytes`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON DUPLICATE KEY UPDATE `expires_at_ms` = GREATEST(`expires_at_ms`, VALUE(`expires_at_ms`)) \
             RETURNING {META_COLUMNS}"
        ),
        params,
    )?;
    meta(&row.ok_or_else(|| corrupt("segment_put_returned_nothing"))?)
}

impl SegmentStore for MariadbStorage {
    fn segment_limits(&self) -> SegmentLimits {
        self.config().segment_limits
    }

    fn put_segment(&self, segment: &NewSegment) -> Result<SegmentMeta> {
        check_put(segment, self.segment_limits())?;
        self.with_conn(|conn| put(conn, segment))
    }

    fn find_live_segment(
        &self,
        partition: &str,
        key: &SegmentBuildKey,
        now_ms: i64,
    ) -> Result<Option<SegmentMeta>> {
        validate::partition(partition)?;
        check_key(key)?;
        let row: Option<mysql::Row> = self.with_conn(|conn| {
            conn.first(
                &format!(
                    "SELECT {META_COLUMNS} FROM `_syncstore_segments` WHERE `partition` = ? \
                     AND `build_key` = ? AND `expires_at_ms` > ? ORDER BY `expires_at_ms` DESC LIMIT 1"
                ),
                (partition, key.canonical(), now_ms),
            )
        })?;
        row.as_ref().map(meta).transpose()
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
        let row: Option<mysql::Row> = self.with_conn(|conn| {
            conn.first(
                &format!(
                    "SELECT {META_COLUMNS}, CASE WHEN `scope_digest` = ? THEN `bytes` END \
                     FROM `_syncstore_segments` WHERE `partition` = ? AND `segment_id` = ? \
                     ORDER BY `scope_digest` = ? DESC LIMIT 1"
                ),
                (scope_digest, partition, segment_id, scope_digest),
            )
        })?;
        let Some(row) = row else {
            return Ok(SegmentFetch::NotFound);
        };
        let meta = meta(&row)?;
        let bytes: Option<Vec<u8>> = match row.get_opt::<Option<Vec<u8>>, usize>(14) {
            Some(Ok(bytes)) => bytes,
            _ => return Err(corrupt("segment_bytes")),
        };
        Ok(match bytes {
            None => SegmentFetch::ScopeMismatch,
            Some(_) if !meta.is_live(now_ms) => SegmentFetch::Expired,
            Some(bytes) => SegmentFetch::Found(Box::new(StoredSegment { meta, bytes })),
        })
    }

    fn delete_expired_segments(&self, now_ms: i64, limit: u32) -> Result<u64> {
        check_prune_limit(limit)?;
        self.with_conn(|conn| {
            conn.exec(
                "DELETE FROM `_syncstore_segments` WHERE `expires_at_ms` <= ? \
                 ORDER BY `expires_at_ms` LIMIT ?",
                (now_ms, i64::from(limit)),
            )
        })
    }
}
