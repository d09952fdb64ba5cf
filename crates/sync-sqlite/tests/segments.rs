//! The segment store of a database file honours the configured limits.

mod common;

use common::Db;
use sync_core::segments::SegmentLimits;
use sync_core::{
    ErrorCode, NewSegment, SegmentBuildKey, SegmentFetch, SegmentMediaType, ServerStorage,
};
use sync_sqlite::SqliteConfig;

fn segment(len: usize) -> NewSegment {
    NewSegment {
        segment_id: format!("sha256:{:064x}", len),
        partition: "p1".into(),
        key: SegmentBuildKey {
            table: "tasks".into(),
            scope_digest: "d1".into(),
            media_type: SegmentMediaType::Rows,
            schema_version: 1,
            as_of_commit_seq: 0,
            row_cursor: None,
            page_rows: 100,
        },
        next_row_cursor: None,
        row_count: 1,
        bytes: vec![7; len],
        created_at_ms: 1,
        expires_at_ms: 2,
    }
}

#[test]
fn the_configured_segment_limit_is_the_stores() {
    let db = Db::new();
    let storage = db.open_with(SqliteConfig {
        segment_limits: SegmentLimits {
            max_segment_bytes: 1024,
        },
        ..SqliteConfig::default()
    });
    let store = storage.segment_store().expect("the dialect keeps segments");
    assert_eq!(store.segment_limits().max_segment_bytes, 1024);
    let refused = store.put_segment(&segment(1025)).unwrap_err();
    assert_eq!(refused.code(), ErrorCode::SegmentTooLarge);
    store.put_segment(&segment(1024)).unwrap();
    assert!(matches!(
        store
            .get_segment("p1", &segment(1024).segment_id, "d1", 1)
            .unwrap(),
        SegmentFetch::Found(_)
    ));
    assert_eq!(
        store
            .get_segment("p1", &segment(1025).segment_id, "d1", 1)
            .unwrap(),
        SegmentFetch::NotFound
    );
}
