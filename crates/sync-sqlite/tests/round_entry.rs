//! The round entry beside pushes: it reads on the writer connection only
//! when nobody holds or waits for it, so it never waits behind an open push
//! transaction, and it sees committed state only, on either connection.

mod common;

use common::*;
use sync_core::{EnsureOptions, RoundEntryRequest, ServerStorage, StoredPushResult};
use sync_sqlite::SqliteConfig;

fn request(ids: &[&str]) -> RoundEntryRequest {
    RoundEntryRequest {
        partition: "p".to_owned(),
        authenticated_at_ms: NOW,
        initial_log_epoch: "epoch-1".to_owned(),
        // Fresh for an hour: the entry only reads (no registry touch).
        refresh_after_ms: 3_600_000,
        running_schema_version: 1,
        client_id: "c".to_owned(),
        client_commit_ids: ids.iter().map(|id| (*id).to_owned()).collect(),
        log_bounds: true,
    }
}

/// Which of `ids` have a stored push result, and the log's last commit.
fn entry(storage: &dyn ServerStorage, ids: &[&str]) -> (Vec<bool>, i64) {
    let entry = storage.enter_round(&request(ids)).unwrap();
    let stored = entry
        .push_results
        .into_iter()
        .map(|r| r.unwrap().is_some())
        .collect();
    (stored, entry.log_bounds.unwrap().max_commit_seq)
}

#[test]
fn a_round_entry_reads_beside_an_open_push_and_sees_only_committed_state() {
    let db = Db::new();
    // A short writer wait: an entry that waited for the writer held by the
    // open push below would fail `busy` instead of answering.
    let storage = db.open_with(SqliteConfig {
        writer_wait_ms: 50,
        ..SqliteConfig::with_clock(db.clock.clone())
    });
    storage
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .unwrap();
    push(&storage, "p", "c", "k1", &[task_row("t1", "p1", "one")]);
    storage.touch_partition("p", NOW, "epoch-1").unwrap();

    let mut tx = storage.begin("p").unwrap();
    tx.lock_partition_for_push().unwrap();
    tx.upsert_row("tasks", &task_row("t2", "p1", "two"), Some(0))
        .unwrap();
    let seq = tx
        .append_commit(&commit_of(
            "c",
            "k2",
            vec![upsert_change(&task_row("t2", "p1", "two"))],
        ))
        .unwrap();
    tx.put_push_result("c", "k2", &StoredPushResult::applied(seq))
        .unwrap();
    let beside = std::thread::scope(|s| s.spawn(|| entry(&storage, &["k1", "k2"])).join());
    let beside = beside.unwrap_or_else(|_| panic!("the entry beside the push panicked"));
    assert_eq!(beside, (vec![true, false], 1));
    tx.commit().unwrap();

    // The writer is idle now: the same entry sees the committed push.
    assert_eq!(entry(&storage, &["k1", "k2"]), (vec![true, true], 2));
}
