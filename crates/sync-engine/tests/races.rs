//! Races injected through the `test-hooks` callbacks, with real threads
//! and barriers.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use sync_core::{CommitPruneQuery, ServerStorage};
use sync_engine::{Operation, PushResultStatus, ResponseItem, SectionStatus};

use support::{commit, fixture_with_storage, push_results, sub};

#[test]
fn a_prune_after_the_horizon_read_resets_instead_of_skipping() {
    let armed = Arc::new(AtomicBool::new(false));
    let flag = armed.clone();
    let f = fixture_with_storage(move |config, storage| {
        config.test_hooks.after_l2 = Some(Arc::new(move || {
            if flag.swap(false, Ordering::SeqCst) {
                let epoch = storage
                    .get_partition_log_epoch("P")
                    .expect("epoch")
                    .expect("registered");
                storage
                    .prune_commits_through(
                        "P",
                        &CommitPruneQuery {
                            log_epoch: epoch,
                            through_seq: 2,
                        },
                    )
                    .expect("prune");
            }
        }));
    });
    for i in 0..3 {
        let id = format!("t{i}");
        f.push(
            "alice",
            commit(
                &format!("k{i}"),
                vec![Operation::upsert(
                    "tasks",
                    id.clone(),
                    None,
                    f.task(&id, "p1", &id),
                )],
            ),
        );
    }
    armed.store(true, Ordering::SeqCst);
    let items = f.round(
        "alice",
        &f.request("c", vec![], vec![sub("tasks", "p1", 1)]),
    );
    assert!(
        items
            .iter()
            .any(|i| matches!(i, ResponseItem::SubStart(s) if s.status == SectionStatus::Reset)),
        "{items:?}"
    );
    assert!(!items.iter().any(|i| matches!(i, ResponseItem::Commit(_))));
}

#[test]
fn concurrent_deliveries_of_one_commit_apply_once() {
    let armed = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(2));
    let (flag, gate) = (armed.clone(), barrier.clone());
    let f = Arc::new(fixture_with_storage(move |config, _| {
        config.test_hooks.after_p1 = Some(Arc::new(move |_| {
            if flag.load(Ordering::SeqCst) {
                gate.wait();
            }
        }));
    }));
    armed.store(true, Ordering::SeqCst);
    let c = commit(
        "k1",
        vec![Operation::upsert(
            "tasks",
            "t1",
            None,
            f.task("t1", "p1", "a"),
        )],
    );
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (f, c) = (f.clone(), c.clone());
            std::thread::spawn(move || {
                let items = f.round("alice", &f.request("c", vec![c], vec![]));
                push_results(&items)[0].clone()
            })
        })
        .collect();
    let mut results: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect();
    results.sort_by_key(|r| r.status == PushResultStatus::Cached);
    assert_eq!(results[0].status, PushResultStatus::Applied);
    assert_eq!(results[1].status, PushResultStatus::Cached);
    assert_eq!(results[0].commit_seq, results[1].commit_seq);
    assert_eq!(f.storage.get_max_commit_seq("P").expect("max"), 1);
}
