//! `MemorySegmentStore`: the contract of `SegmentStore` in process memory,
//! its bounds and its eviction order, and its use from many threads.

use std::sync::{Arc, Barrier};
use std::thread;

use sync_core::segments::{MemoryLimits, SegmentLimits};
use sync_core::{
    ErrorCode, MemorySegmentStore, NewSegment, SegmentBuildKey, SegmentFetch, SegmentMediaType,
    SegmentStore,
};

const NOW: i64 = 1_700_000_000_000;
const HOUR: i64 = 3_600_000;

fn id(n: u64) -> String {
    format!("sha256:{n:064x}")
}

fn key(digest: &str) -> SegmentBuildKey {
    SegmentBuildKey {
        table: "tasks".into(),
        scope_digest: digest.into(),
        media_type: SegmentMediaType::Rows,
        schema_version: 1,
        as_of_commit_seq: 7,
        row_cursor: None,
        page_rows: 1000,
    }
}

fn segment(partition: &str, n: u64, len: usize) -> NewSegment {
    NewSegment {
        segment_id: id(n),
        partition: partition.into(),
        key: key("d1"),
        next_row_cursor: Some("t0100".into()),
        row_count: 3,
        bytes: (0..len).map(|i| (i as u64 + n) as u8).collect(),
        created_at_ms: NOW,
        expires_at_ms: NOW + HOUR,
    }
}

fn store(max_segments: usize, max_total_bytes: usize) -> MemorySegmentStore {
    MemorySegmentStore::new(MemoryLimits {
        segment: SegmentLimits {
            max_segment_bytes: 1024,
        },
        max_total_bytes,
        max_segments,
    })
}

fn held(store: &MemorySegmentStore, partition: &str, n: u64) -> bool {
    matches!(
        store.get_segment(partition, &id(n), "d1", NOW),
        Ok(SegmentFetch::Found(_))
    )
}

#[test]
fn a_put_segment_comes_back_byte_exact_with_its_metadata() {
    let store = store(10, 10_000);
    let new = segment("p1", 1, 300);
    let meta = store.put_segment(&new).unwrap();
    assert_eq!(meta, new.meta());
    assert_eq!(meta.byte_length, 300);
    match store.get_segment("p1", &id(1), "d1", NOW).unwrap() {
        SegmentFetch::Found(found) => {
            assert_eq!(found.bytes, new.bytes);
            assert_eq!(found.meta, new.meta());
        }
        other => panic!("expected the segment, got {other:?}"),
    }
}

#[test]
fn a_second_put_of_one_id_keeps_one_segment_and_the_later_expiry() {
    let store = store(10, 10_000);
    let first = segment("p1", 1, 100);
    store.put_segment(&first).unwrap();
    let mut again = first.clone();
    again.expires_at_ms = NOW + 5 * HOUR;
    again.row_count = 99;
    let meta = store.put_segment(&again).unwrap();
    assert_eq!(store.len(), 1);
    assert_eq!(store.total_bytes(), 100);
    assert_eq!(meta.expires_at_ms, NOW + 5 * HOUR);
    assert_eq!(meta.row_count, 3, "the first metadata stays");
    // An earlier expiry never shortens the stored one.
    let mut shorter = first.clone();
    shorter.expires_at_ms = NOW + 1;
    assert_eq!(
        store.put_segment(&shorter).unwrap().expires_at_ms,
        NOW + 5 * HOUR
    );
}

#[test]
fn expiry_is_judged_by_the_callers_clock() {
    let store = store(10, 10_000);
    store.put_segment(&segment("p1", 1, 10)).unwrap();
    let at = |now| store.get_segment("p1", &id(1), "d1", now).unwrap();
    assert!(matches!(at(NOW + HOUR - 1), SegmentFetch::Found(_)));
    assert_eq!(at(NOW + HOUR), SegmentFetch::Expired);
    assert_eq!(at(NOW + 10 * HOUR), SegmentFetch::Expired);
}

#[test]
fn another_partition_other_scopes_and_unknown_ids_are_told_apart() {
    let store = store(10, 10_000);
    store.put_segment(&segment("p1", 1, 10)).unwrap();
    let get = |p: &str, i: &str, d: &str| store.get_segment(p, i, d, NOW).unwrap();
    assert_eq!(get("p2", &id(1), "d1"), SegmentFetch::NotFound);
    assert_eq!(get("p1", &id(1), "d2"), SegmentFetch::ScopeMismatch);
    assert_eq!(get("p2", &id(1), "d2"), SegmentFetch::NotFound);
    assert_eq!(get("p1", &id(2), "d1"), SegmentFetch::NotFound);
    assert_eq!(get("p1", "sha256:zz", "d1"), SegmentFetch::NotFound);
    assert_eq!(
        store.get_segment("", &id(1), "d1", NOW).unwrap_err().code(),
        ErrorCode::InvalidPartition
    );
}

#[test]
fn identical_bytes_for_two_scope_digests_are_two_segments() {
    let store = store(10, 10_000);
    let first = segment("p1", 1, 10);
    let mut second = first.clone();
    second.key = key("d2");
    store.put_segment(&first).unwrap();
    store.put_segment(&second).unwrap();
    assert_eq!(store.len(), 2);
    for digest in ["d1", "d2"] {
        match store.get_segment("p1", &id(1), digest, NOW).unwrap() {
            SegmentFetch::Found(found) => assert_eq!(found.meta.key.scope_digest, digest),
            other => panic!("{digest}: {other:?}"),
        }
    }
}

#[test]
fn reuse_finds_the_live_segment_of_a_build_key_expiring_last() {
    let store = store(10, 10_000);
    let mut old = segment("p1", 1, 10);
    old.expires_at_ms = NOW + 10;
    let mut newer = segment("p1", 2, 10);
    newer.expires_at_ms = NOW + 2 * HOUR;
    store.put_segment(&old).unwrap();
    store.put_segment(&newer).unwrap();
    let found = store.find_live_segment("p1", &key("d1"), NOW).unwrap();
    assert_eq!(found.map(|m| m.segment_id), Some(id(2)));
    assert_eq!(
        store.find_live_segment("p2", &key("d1"), NOW).unwrap(),
        None
    );
    assert_eq!(
        store.find_live_segment("p1", &key("d2"), NOW).unwrap(),
        None
    );
    let mut other_page = key("d1");
    other_page.row_cursor = Some("t0100".into());
    assert_eq!(
        store.find_live_segment("p1", &other_page, NOW).unwrap(),
        None
    );
    assert_eq!(
        store
            .find_live_segment("p1", &key("d1"), NOW + 2 * HOUR)
            .unwrap(),
        None
    );
}

#[test]
fn pruning_deletes_only_expired_segments_and_at_most_the_limit() {
    let store = store(20, 10_000);
    for n in 0..5 {
        let mut s = segment("p1", n, 10);
        s.expires_at_ms = NOW + 1;
        store.put_segment(&s).unwrap();
    }
    for n in 5..8 {
        store.put_segment(&segment("p2", n, 10)).unwrap();
    }
    let later = NOW + 1;
    assert_eq!(store.delete_expired_segments(later, 2).unwrap(), 2);
    assert_eq!(store.delete_expired_segments(later, 2).unwrap(), 2);
    assert_eq!(store.delete_expired_segments(later, 2).unwrap(), 1);
    assert_eq!(store.delete_expired_segments(later, 2).unwrap(), 0);
    assert_eq!(store.len(), 3);
    assert_eq!(store.total_bytes(), 30);
    assert!((5..8).all(|n| held(&store, "p2", n)));
    assert_eq!(
        store.delete_expired_segments(later, 0).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn a_segment_above_the_limit_is_refused_with_its_code() {
    let store = store(10, 10_000);
    let error = store.put_segment(&segment("p1", 1, 1025)).unwrap_err();
    assert_eq!(error.code(), ErrorCode::SegmentTooLarge);
    assert_eq!(error.get_detail("max_bytes"), Some("1024"));
    assert_eq!(error.get_detail("byte_length"), Some("1025"));
    assert!(store.is_empty());
    store.put_segment(&segment("p1", 1, 1024)).unwrap();
}

#[test]
fn malformed_puts_are_refused_before_anything_is_stored() {
    let store = store(10, 10_000);
    let mut cases = Vec::new();
    let mut s = segment("p1", 1, 1);
    s.segment_id = format!("sha256:{}", "A".repeat(64));
    cases.push((s, ErrorCode::InvalidArgument));
    let mut s = segment("p1", 1, 1);
    s.partition.clear();
    cases.push((s, ErrorCode::InvalidPartition));
    let mut s = segment("p1", 1, 1);
    s.expires_at_ms = s.created_at_ms;
    cases.push((s, ErrorCode::InvalidArgument));
    let mut s = segment("p1", 1, 1);
    s.key.page_rows = 0;
    cases.push((s, ErrorCode::InvalidArgument));
    let mut s = segment("p1", 1, 1);
    s.key.schema_version = 0;
    cases.push((s, ErrorCode::InvalidArgument));
    for (s, code) in cases {
        assert_eq!(store.put_segment(&s).unwrap_err().code(), code, "{s:?}");
    }
    assert!(store.is_empty());
}

#[test]
fn the_count_bound_evicts_the_segment_put_longest_ago() {
    let store = store(3, 10_000);
    for n in 1..=3 {
        store.put_segment(&segment("p1", n, 10)).unwrap();
    }
    // A repeated put neither evicts nor refreshes the age.
    store.put_segment(&segment("p1", 1, 10)).unwrap();
    assert_eq!(store.len(), 3);
    store.put_segment(&segment("p1", 4, 10)).unwrap();
    assert_eq!(store.len(), 3);
    assert!(!held(&store, "p1", 1));
    assert!((2..=4).all(|n| held(&store, "p1", n)));
}

#[test]
fn the_byte_bound_evicts_oldest_first_until_the_new_segment_fits() {
    let store = store(100, 1000);
    for n in 1..=4 {
        store.put_segment(&segment("p1", n, 250)).unwrap();
    }
    assert_eq!(store.total_bytes(), 1000);
    // 600 bytes need three of the four 250-byte segments gone.
    store.put_segment(&segment("p1", 5, 600)).unwrap();
    assert_eq!(store.total_bytes(), 850);
    assert_eq!(store.len(), 2);
    assert!(!held(&store, "p1", 1) && !held(&store, "p1", 2) && !held(&store, "p1", 3));
    assert!(held(&store, "p1", 4) && held(&store, "p1", 5));
}

#[test]
fn a_segment_limit_above_the_total_is_lowered_to_the_total() {
    let store = store(10, 500);
    assert_eq!(store.segment_limits().max_segment_bytes, 500);
    assert_eq!(
        store
            .put_segment(&segment("p1", 1, 501))
            .unwrap_err()
            .code(),
        ErrorCode::SegmentTooLarge
    );
}

#[test]
fn threads_putting_and_reading_at_once_never_exceed_the_bounds() {
    const THREADS: u64 = 8;
    const PUTS: u64 = 200;
    let store = Arc::new(store(50, 50 * 64));
    let start = Arc::new(Barrier::new(THREADS as usize));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, start) = (Arc::clone(&store), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                for i in 0..PUTS {
                    let n = t * PUTS + i;
                    let put = segment("p1", n, 64);
                    store.put_segment(&put).unwrap();
                    // Read back something: either the segment or, when other
                    // threads evicted it already, not found — never torn bytes.
                    match store.get_segment("p1", &id(n), "d1", NOW).unwrap() {
                        SegmentFetch::Found(found) => assert_eq!(found.bytes, put.bytes),
                        SegmentFetch::NotFound => {}
                        other => panic!("{other:?}"),
                    }
                    assert!(store.len() <= 50);
                    assert!(store.total_bytes() <= 50 * 64);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(store.len(), 50);
    assert_eq!(store.total_bytes(), 50 * 64);
    let held_count = (0..THREADS * PUTS)
        .filter(|n| held(&store, "p1", *n))
        .count();
    assert_eq!(held_count, 50, "the counters agree with what is held");
}
