//! Multi-thread stress runs on both dialects: threads stand in for server
//! processes (each its own storage instance and pools) pushing, replaying,
//! pruning, touching, rotating and reading gates concurrently, while one of
//! them bumps the schema with a declaration in the middle and then backfills
//! and activates the declared checkpoint. Bounded in count (threads ×
//! operations, `SYNCSTORE_STRESS_OPS`), never in time.
//!
//! Every operation must succeed or fail with a code its situation allows;
//! at the end the invariant checker must find the database consistent and
//! every acknowledged push retained.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier, Mutex};

use sync_core::{
    CheckpointDeclaration, CommitPruneQuery, EnsureOptions, ErrorCode, RetentionPolicy,
    ServeContext, ServerStorage,
};
use syncstore_tests::invariants::InvariantChecker;
use syncstore_tests::model::{self, ChangeSpec, Outcome};
use syncstore_tests::{budget, deployment, fixture, Deployment, DIALECTS};

const THREADS: usize = 4;
const PARTITIONS: [&str; 3] = ["sA", "sB", "s'C\"; --"];
const DECLARED: &str = "stress_v2";
/// Retries of an operation that failed with a retryable code.
const RETRIES: usize = 50;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Default, Debug)]
struct ThreadLog {
    ops: usize,
    acks: Vec<(String, String, String, i64)>,
    outcomes: BTreeMap<String, usize>,
    retries: usize,
}

impl ThreadLog {
    fn note(&mut self, label: impl Into<String>) {
        *self.outcomes.entry(label.into()).or_default() += 1;
    }
}

/// Codes an operation may end with under concurrency; anything else fails the run.
fn allowed(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::SchemaNotReady
            | ErrorCode::WriterFenceRejected
            | ErrorCode::PruneEpochMismatch
            | ErrorCode::PartitionUnregistered
            | ErrorCode::CheckpointNotDeclared
            | ErrorCode::CheckpointVersionMismatch
            | ErrorCode::CheckpointDeclarationInvalid
            | ErrorCode::CheckpointWatermarkInvalid
            | ErrorCode::CheckpointIncomplete
    )
}

/// Runs `f` until it returns something other than a retryable error.
fn retrying<T>(
    log: &mut ThreadLog,
    mut f: impl FnMut() -> sync_core::Result<T>,
) -> sync_core::Result<T> {
    let mut attempt = 0;
    loop {
        match f() {
            Err(e)
                if e.retryable() && e.code() != ErrorCode::SchemaNotReady && attempt < RETRIES =>
            {
                attempt += 1;
                log.retries += 1;
            }
            other => return other,
        }
    }
}

fn record<T>(log: &mut ThreadLog, what: &str, result: sync_core::Result<T>) -> Option<T> {
    match result {
        Ok(v) => {
            log.note(what);
            Some(v)
        }
        Err(e) if allowed(e.code()) => {
            log.note(format!("{what}: {}", model::code_of(&e)));
            None
        }
        Err(e) => panic!("{what}: unexpected error {e:?}"),
    }
}

struct Shared {
    barrier: Barrier,
    migrated: Mutex<bool>,
}

#[allow(clippy::too_many_lines)]
fn worker(
    thread: usize,
    storage: Arc<dyn ServerStorage>,
    shared: &Shared,
    ops: usize,
    seed: u64,
) -> ThreadLog {
    let mut rng = Rng(seed ^ (thread as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    let mut log = ThreadLog::default();
    let client = format!("t{thread}'");
    let mut declarations: Vec<CheckpointDeclaration> = Vec::new();
    let mut owner_epoch = 0;
    for i in 0..ops {
        log.ops += 1;
        let now = model::step_time(i);
        let p = PARTITIONS[rng.below(PARTITIONS.len())];
        if i == ops / 2 {
            // Everyone reaches the middle before the bump, so that the bump
            // interleaves with the others' pushes of the second half.
            shared.barrier.wait();
            if thread == 0 {
                let decl = CheckpointDeclaration::new(PARTITIONS[1], DECLARED, 2);
                let result = retrying(&mut log, || {
                    storage.ensure_schema(
                        &fixture::schema(2),
                        &EnsureOptions::with_declarations(vec![decl.clone()]),
                    )
                });
                result.unwrap_or_else(|e| panic!("bump to v2: {e:?}"));
                declarations = vec![decl];
                *shared.migrated.lock().unwrap() = true;
                log.note("migrate");
            }
        }
        // A stale process catches up (declaring the pending checkpoint, as a
        // configured backfiller would) once it notices the bump.
        if storage.ensured_version() == Some(1)
            && *shared.migrated.lock().unwrap()
            && rng.below(4) == 0
        {
            let decl = CheckpointDeclaration::new(PARTITIONS[1], DECLARED, 2);
            let result = retrying(&mut log, || {
                storage.ensure_schema(
                    &fixture::schema(2),
                    &EnsureOptions::with_declarations(vec![decl.clone()]),
                )
            });
            if record(&mut log, "catch_up", result).is_some() {
                declarations = vec![decl];
            }
            continue;
        }
        match rng.below(100) {
            0..=64 => {
                let replay = rng.below(10) == 0 && i > 0;
                let commit = if replay {
                    format!("k{}", rng.below(i))
                } else {
                    format!("k{i}")
                };
                let changes: Vec<ChangeSpec> = (0..1 + rng.below(3))
                    .map(|_| ChangeSpec {
                        table: rng.below(2),
                        row: rng.below(model::ROW_IDS.len()),
                        delete: rng.below(5) == 0,
                        group: rng.below(model::GROUPS.len()),
                        n: rng.below(1000) as i64,
                    })
                    .collect();
                let aware = rng.below(8) != 0;
                let ctx = ServeContext {
                    declarations: declarations.clone(),
                    expected_log_epoch: None,
                };
                let result = retrying(&mut log, || {
                    model::push(
                        storage.as_ref(),
                        aware.then_some(&ctx),
                        p,
                        &client,
                        &commit,
                        &changes,
                        false,
                        now,
                    )
                });
                match record(&mut log, "push", result) {
                    Some(Outcome::Pushed(seq)) => {
                        log.acks
                            .push((p.to_owned(), client.clone(), commit.clone(), seq));
                    }
                    Some(Outcome::Replayed(_)) => log.note("push replayed"),
                    Some(other) => panic!("push returned {other:?}"),
                    None => {}
                }
            }
            65..=72 => {
                let epoch = format!("epoch-{thread}");
                let result = retrying(&mut log, || storage.touch_partition(p, now, &epoch));
                record(&mut log, "touch", result);
            }
            73..=80 => {
                let policy = RetentionPolicy {
                    active_window_ms: 1,
                    age_force_ms: 1,
                    min_retained_commits: 3,
                };
                let result = retrying(&mut log, || {
                    sync_core::prune_commit_log(storage.as_ref(), p, now, &policy)
                });
                record(&mut log, "prune_commit_log", result);
            }
            81..=84 => {
                let result = retrying(&mut log, || {
                    let epoch = storage.get_partition_log_epoch(p)?.unwrap_or_default();
                    let through = storage.get_max_commit_seq(p)? - 5;
                    storage.prune_commits_through(
                        p,
                        &CommitPruneQuery {
                            log_epoch: epoch,
                            through_seq: through,
                        },
                    )
                });
                // A counter below 5 makes a negative cursor: a coded refusal.
                let result = result.map(|_| ()).or_else(|e| {
                    if e.is(ErrorCode::InvalidPruneCursor) {
                        Ok(())
                    } else {
                        Err(e)
                    }
                });
                record(&mut log, "prune_commits_through", result);
            }
            85 => {
                let epoch = format!("rotated-{thread}-{i}");
                let result = retrying(&mut log, || {
                    storage.rotate_partition_log_epoch(p, &epoch, now)
                });
                record(&mut log, "rotate", result);
            }
            86..=91 => {
                let running = storage.ensured_version().unwrap_or(0);
                let result = retrying(&mut log, || storage.read_serve_gate(p, running));
                if let Some(gate) = record(&mut log, "gate", result) {
                    assert!(
                        gate.stored_schema_version >= i64::from(running),
                        "gate below the running version: {gate:?}"
                    );
                }
            }
            _ => {
                // The backfill of the declared checkpoint: claim, certify the
                // log as seen, activate; concurrent pushes make it stale.
                if storage.ensured_version() != Some(2) {
                    log.note("backfill: not yet");
                    continue;
                }
                let partition = PARTITIONS[1];
                match rng.below(3) {
                    0 => {
                        let result = retrying(&mut log, || {
                            storage.claim_checkpoint(partition, DECLARED, 2, now)
                        });
                        if let Some(c) = record(&mut log, "claim", result) {
                            owner_epoch = c.owner_epoch;
                        }
                    }
                    1 => {
                        let result = retrying(&mut log, || {
                            let seen = storage.get_max_commit_seq(partition)?;
                            storage.advance_checkpoint(
                                partition,
                                DECLARED,
                                owner_epoch,
                                seen,
                                1,
                                now,
                            )
                        });
                        record(&mut log, "advance", result);
                    }
                    _ => {
                        let result = retrying(&mut log, || {
                            let seen = storage.get_max_commit_seq(partition)?;
                            storage.activate_checkpoint(
                                partition,
                                DECLARED,
                                owner_epoch,
                                seen,
                                &[fixture::ITEMS.to_owned()],
                                now,
                            )
                        });
                        if let Some(outcome) = record(&mut log, "activate", result) {
                            log.note(format!("activate: {outcome:?}"));
                        }
                    }
                }
            }
        }
    }
    log
}

fn stress(dialect: &str, round: usize) -> (usize, usize, BTreeMap<String, usize>) {
    let deployment: Box<dyn Deployment> = deployment(dialect);
    let processes: Vec<Arc<dyn ServerStorage>> =
        (0..THREADS).map(|_| deployment.process()).collect();
    for s in &processes {
        s.ensure_schema(&fixture::schema(1), &EnsureOptions::default())
            .unwrap();
    }
    let shared = Shared {
        barrier: Barrier::new(THREADS),
        migrated: Mutex::new(false),
    };
    let ops = budget::stress_ops();
    let seed = budget::model_seed() ^ (round as u64) << 32;
    let logs: Vec<ThreadLog> = std::thread::scope(|scope| {
        let handles: Vec<_> = processes
            .iter()
            .enumerate()
            .map(|(t, s)| {
                let s = Arc::clone(s);
                let shared = &shared;
                scope.spawn(move || worker(t, s, shared, ops, seed))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    // A fresh process at v2 checks the invariants.
    let reader = deployment.process();
    let decl = CheckpointDeclaration::new(PARTITIONS[1], DECLARED, 2);
    reader
        .ensure_schema(
            &fixture::schema(2),
            &EnsureOptions::with_declarations(vec![decl]),
        )
        .unwrap();
    let mut checker =
        InvariantChecker::new(fixture::schema_history(2)).with_sources(DECLARED, &[fixture::ITEMS]);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut total_ops = 0;
    let mut acks = 0;
    for log in &logs {
        total_ops += log.ops;
        for (p, client, commit, seq) in &log.acks {
            checker.acknowledge(p, client, commit, *seq);
            acks += 1;
        }
        for (k, v) in &log.outcomes {
            *outcomes.entry(k.clone()).or_default() += v;
        }
        *outcomes.entry("retries (busy)".into()).or_default() += log.retries;
    }
    let summary = checker.assert_consistent(
        reader.as_ref(),
        &PARTITIONS,
        &format!("{dialect} stress round {round}"),
    );
    assert!(acks > 0, "{dialect}: no push was acknowledged");
    assert_eq!(
        summary.acknowledged, acks,
        "{dialect}: every acknowledged push was checked"
    );
    (total_ops, acks, outcomes)
}

#[test]
fn concurrent_processes_keep_every_invariant_on_both_dialects() {
    for dialect in DIALECTS {
        for round in 0..budget::stress_rounds() {
            let (ops, acks, outcomes) = stress(dialect, round);
            println!(
                "stress {dialect} round {round}: {THREADS} threads x {} ops = {ops} operations, {acks} acknowledged pushes retained; outcomes {outcomes:?}",
                budget::stress_ops()
            );
        }
    }
}
