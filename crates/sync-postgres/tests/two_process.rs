//! Two storage instances (separate pools, as two server processes would
//! have) on one schema: concurrent pushes stay dense; a migration by one
//! fences the other's writes.

mod common;

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::*;
use sync_core::{
    CheckpointDeclaration, CommitMetadataQuery, EnsureOptions, ErrorCode, ServerStorage,
};

#[test]
fn two_instances_push_concurrently_and_a_migration_fences_the_other() {
    let db = TestDb::new();
    let a = Arc::new(ensured(&db));
    let b = Arc::new(ensured(&db));
    let schema = Arc::new(fix1());
    let per_thread = 15;
    let instances = [a.clone(), b.clone(), a.clone(), b.clone()];
    let barrier = Arc::new(Barrier::new(instances.len()));
    let handles: Vec<_> = instances
        .into_iter()
        .enumerate()
        .map(|(t, storage)| {
            let (schema, barrier) = (schema.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                for i in 0..per_thread {
                    let id = format!("w{t}-{i}");
                    let row = task_row(&schema, &id, "p1", &id, 1);
                    push(
                        storage.as_ref(),
                        "shared",
                        &format!("w{t}"),
                        &format!("s{i}"),
                        std::slice::from_ref(&row),
                    )
                    .unwrap();
                    push(
                        storage.as_ref(),
                        &format!("own-{t}"),
                        &format!("w{t}"),
                        &format!("o{i}"),
                        &[row],
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total = (4 * per_thread) as i64;
    for storage in [&a, &b] {
        assert_eq!(storage.get_max_commit_seq("shared").unwrap(), total);
        let seqs: BTreeSet<i64> = storage
            .list_commit_metadata(
                "shared",
                &CommitMetadataQuery {
                    after_seq: 0,
                    before_seq: None,
                    limit: 1000,
                    table: None,
                },
            )
            .unwrap()
            .iter()
            .map(|m| m.commit_seq)
            .collect();
        assert_eq!(
            seqs,
            (1..=total).collect(),
            "every commit dense and present"
        );
        for t in 0..4 {
            assert_eq!(
                storage.get_max_commit_seq(&format!("own-{t}")).unwrap(),
                per_thread as i64
            );
        }
    }

    // Instance A bumps to v2 with a declaration; while it holds the migration
    // lock, instance B (still at v1) starts a push: it blocks at the
    // partition lock, then its commit insert is refused by the database.
    let (locked_tx, locked_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let opts = EnsureOptions {
        after_migration_lock: Some(Arc::new(move || {
            let _ = locked_tx.send(());
            if let Ok(release) = release_rx.lock() {
                let _ = release.recv();
            }
        })),
        ..EnsureOptions::with_declarations(vec![CheckpointDeclaration::new(
            "shared",
            "search_v2",
            2,
        )])
    };
    let v2 = fix2();
    let (bump, append, gate_version) = thread::scope(|scope| {
        let bumping = a.clone();
        let v2 = &v2;
        let opts = &opts;
        let bump = scope.spawn(move || bumping.ensure_schema(v2, opts));
        locked_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("migration lock taken");
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let writer = {
            let b = b.clone();
            let schema = schema.clone();
            scope.spawn(move || {
                let mut tx = b.begin("shared").unwrap();
                assert_eq!(tx.writer_version(), 1);
                let _ = started_tx.send(());
                tx.lock_partition_for_push().unwrap();
                let gate = tx.read_serve_gate(1).unwrap();
                let row = task_row(&schema, "late", "p1", "late", 1);
                tx.upsert_row("tasks", &row, None).unwrap();
                let append =
                    tx.append_commit(&commit("late", "late", vec![upsert_change(&row, "tasks")]));
                (append, gate.stored_schema_version)
            })
        };
        started_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("writer started");
        let _ = release_tx.send(());
        let bump = bump.join().unwrap();
        let (append, gate_version) = writer.join().unwrap();
        (bump, append, gate_version)
    });
    bump.expect("bump with a declaration");
    assert_eq!(
        gate_version, 2,
        "the writer's gate, read after the lock, sees the migration"
    );
    assert_eq!(append.unwrap_err().code(), ErrorCode::WriterFenceRejected);
    assert_eq!(b.get_row("shared", "tasks", "late").unwrap(), None);
    assert_eq!(b.get_max_commit_seq("shared").unwrap(), total);
    assert_eq!(a.required_writer_version("shared").unwrap(), Some(2));
    assert_eq!(
        a.read_checkpoint("shared", "search_v2")
            .unwrap()
            .unwrap()
            .schema_version,
        2
    );
}
