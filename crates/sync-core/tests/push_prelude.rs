//! The default body of `StorageTransaction::begin_push` (the single methods
//! in the lock → gate → idempotency order, then the candidate rows of a
//! fresh key) and `PushPrelude::row`, the lookup of one prefetched row.

mod common;

use common::{row, PreludeTx};
use sync_core::*;

fn request() -> PushPreludeRequest {
    PushPreludeRequest {
        running_schema_version: 2,
        client_id: "c1".to_owned(),
        client_commit_id: "k1".to_owned(),
        rows: vec![
            ("tasks".to_owned(), vec!["t1".to_owned(), "t2".to_owned()]),
            ("docs".to_owned(), vec!["d1".to_owned()]),
            ("tasks".to_owned(), vec!["t3".to_owned()]),
        ],
        deferred_violations: false,
    }
}

#[test]
fn a_fresh_key_reads_the_gate_then_the_key_then_the_candidate_rows() {
    let mut tx = PreludeTx::new(None);
    let request = request();
    let prelude = tx.begin_push(&request).unwrap();
    assert_eq!(
        tx.calls,
        [
            "lock",
            "gate 2",
            "get_push_result c1 k1",
            "get_row tasks t1",
            "get_row tasks t2",
            "get_row docs d1",
            "get_row tasks t3",
        ]
    );
    assert_eq!(prelude.gate.stored_schema_version, 2);
    assert_eq!(prelude.push_result.unwrap(), None);
    let rows = prelude.rows.as_ref().expect("a fresh key reads its rows");
    assert_eq!(
        rows,
        &vec![
            vec![Some(row("t1")), None],
            vec![Some(row("d1"))],
            vec![Some(row("t3"))],
        ]
    );
}

#[test]
fn a_replay_reads_no_row() {
    let mut tx = PreludeTx::new(Some(StoredPushResult::applied(7)));
    let prelude = tx.begin_push(&request()).unwrap();
    assert_eq!(tx.calls, ["lock", "gate 2", "get_push_result c1 k1"]);
    assert_eq!(
        prelude.push_result.unwrap(),
        Some(StoredPushResult::applied(7))
    );
    assert!(prelude.rows.is_none());
}

#[test]
fn a_prefetched_row_is_found_by_its_table_and_id() {
    let request = request();
    let prelude = PreludeTx::new(None).begin_push(&request).unwrap();
    // Read and present, in either group of its table.
    assert_eq!(prelude.row(&request, "tasks", "t1"), Some(Some(&row("t1"))));
    assert_eq!(prelude.row(&request, "tasks", "t3"), Some(Some(&row("t3"))));
    assert_eq!(prelude.row(&request, "docs", "d1"), Some(Some(&row("d1"))));
    // Read and absent.
    assert_eq!(prelude.row(&request, "tasks", "t2"), Some(None));
    // Not asked for: under another table, or not at all.
    assert_eq!(prelude.row(&request, "docs", "t1"), None);
    assert_eq!(prelude.row(&request, "tasks", "d1"), None);
    assert_eq!(prelude.row(&request, "tasks", "t9"), None);
    // A prelude without rows answers nothing.
    let replay = PreludeTx::new(Some(StoredPushResult::applied(7)))
        .begin_push(&request)
        .unwrap();
    assert_eq!(replay.row(&request, "tasks", "t1"), None);
}
