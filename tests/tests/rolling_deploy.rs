//! A rolling deploy with a backfill, end to end, on both dialects
//! (`rfc0007-migration-barrier.md` §2). Threads stand in for processes: each
//! "process" is its own storage instance with its own pools.
//!
//! v1 fleet pushing → v2 bump with a declaration → v1 refused by the gate and
//! by the database fence, losing nothing it committed → undeclared v2 refused
//! at startup → backfill killed between batches and mid-batch, taken over,
//! activated while a v2 writer pushes without pause → the undeclared v2
//! process starts, is refused by the serve gate for a newly declared
//! partition until that backfill activates, and serves right after → the
//! projection equals the derivation of the final source state.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use serde_json::json;
use sync_backfill::{
    CheckpointRunner, DerivedColumn, Phase, Progress, ProgressObserver, Projector, RunOutcome,
    RunnerConfig, SourceRowRef,
};
use sync_core::{
    check_serve_gate, codec, CheckpointDeclaration, CompiledSchema, EnsureOptions, ErrorCode,
    NewChange, NewCommit, Result, RowValue, ServeContext, ServerStorage, StorageTransaction,
    StoredPushResult, StoredRow,
};
use syncstore_tests::{Deployment, PostgresDeployment, SqliteDeployment};

const NAME: &str = "search_v2";

fn schema(version: i32) -> CompiledSchema {
    let mut columns = vec![
        json!({"name": "id", "type": "string"}),
        json!({"name": "list_id", "type": "string"}),
        json!({"name": "title", "type": "string"}),
        json!({"name": "done", "type": "boolean"}),
    ];
    if version >= 2 {
        columns.push(json!({"name": "search_text", "type": "string", "nullable": true}));
    }
    let value = json!({
        "version": version,
        "tables": [{
            "name": "todos",
            "primaryKey": "id",
            "columns": columns,
            "scopes": ["list:{list_id}"],
            "indexes": [{"name": "todos_by_list", "columns": ["list_id"]}]
        }]
    });
    let input = sync_schema::parse_schema_value(&value).expect("schema parses");
    sync_schema::compile(&input).expect("schema compiles")
}

/// A row as the code of `schema.version` writes it (v2 derives `search_text`).
fn todo(schema: &CompiledSchema, id: &str, title: &str, version: i64) -> StoredRow {
    let list = format!("list-{}", id.len() % 7);
    let mut values = vec![
        RowValue::String(id.to_owned()),
        RowValue::String(list.clone()),
        RowValue::String(title.to_owned()),
        RowValue::Boolean(false),
    ];
    if schema.version >= 2 {
        values.push(RowValue::String(title.to_lowercase()));
    }
    let table = schema.table("todos").expect("todos");
    StoredRow {
        row_id: id.to_owned(),
        server_version: version,
        scopes: [("list_id".to_owned(), list)].into(),
        payload: codec::encode_row(table, &values).expect("row encodes"),
        column_versions: None,
    }
}

/// The standard push of one upsert; `gate = None` is a binary that predates
/// the serve gate (it still stamps its writer version).
fn push(
    storage: &dyn ServerStorage,
    gate: Option<&ServeContext>,
    partition: &str,
    client: &str,
    commit: &str,
    row: &StoredRow,
) -> Result<i64> {
    let running = storage.ensured_version().unwrap_or(0);
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    if let Some(ctx) = gate {
        let token = tx.read_serve_gate(running)?;
        if let Err(refusal) = check_serve_gate(&token, running, ctx) {
            tx.rollback()?;
            return Err(refusal);
        }
    }
    tx.upsert_row("todos", row, Some(0))?;
    let seq = tx.append_commit(&NewCommit {
        client_id: client.to_owned(),
        client_commit_id: commit.to_owned(),
        actor_id: client.to_owned(),
        created_at_ms: 1_700_000_000_000,
        changes: vec![NewChange::upsert(
            "todos",
            row.row_id.clone(),
            row.server_version,
            row.scopes.clone(),
            row.payload.clone(),
        )],
    })?;
    tx.put_push_result(client, commit, &StoredPushResult::applied(seq))?;
    tx.commit()?;
    Ok(seq)
}

fn derived_column(storage: &dyn ServerStorage) -> DerivedColumn {
    DerivedColumn::new(
        storage.ensured_schema().expect("ensured"),
        "todos",
        "search_text",
        Arc::new(|table, values| {
            Ok(
                match table.column_index.get("title").and_then(|&i| values.get(i)) {
                    Some(RowValue::String(t)) => RowValue::String(t.to_lowercase()),
                    _ => RowValue::Null,
                },
            )
        }),
    )
    .expect("projector")
}

/// Kills the runner (a panic unwinding through it) after the `nth` committed
/// full-pass batch: a process dying between batches.
struct KillAfterBatch(usize, AtomicUsize);

impl ProgressObserver for KillAfterBatch {
    fn on_progress(&self, progress: &Progress) {
        if progress.phase == Phase::FullPass
            && progress.batches > 0
            && self.1.fetch_add(1, Ordering::SeqCst) + 1 == self.0
        {
            panic!("process killed between batches");
        }
    }
}

/// Kills the runner inside its `nth` projection, with the batch's
/// transaction open and staged writes in it: a process dying mid-batch.
struct KillInsideBatch<'p>(&'p dyn Projector, usize, AtomicUsize);

impl Projector for KillInsideBatch<'_> {
    fn sources(&self) -> &[String] {
        self.0.sources()
    }

    fn project(
        &self,
        tx: &mut dyn StorageTransaction,
        rows: &[SourceRowRef],
    ) -> Result<Vec<NewChange>> {
        let changes = self.0.project(tx, rows)?;
        if self.2.fetch_add(1, Ordering::SeqCst) + 1 == self.1 {
            panic!("process killed mid-batch");
        }
        Ok(changes)
    }
}

fn every_row(storage: &dyn ServerStorage, partition: &str) -> Vec<StoredRow> {
    let mut rows = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = storage
            .scan_partition_rows(partition, "todos", after.as_deref(), 1000)
            .expect("scan");
        let Some(last) = page.last() else { break };
        after = Some(last.row_id.clone());
        rows.extend(page);
    }
    rows
}

fn assert_projection_consistent(
    storage: &dyn ServerStorage,
    partition: &str,
    expected_rows: usize,
) {
    let v2 = schema(2);
    let table = v2.table("todos").expect("todos");
    let rows = every_row(storage, partition);
    assert_eq!(rows.len(), expected_rows, "{partition}: row count");
    for row in rows {
        let values = codec::decode_row(table, &row.payload).expect("v2 payload");
        let RowValue::String(title) = &values[2] else {
            panic!("title of {}", row.row_id)
        };
        assert_eq!(
            values[4],
            RowValue::String(title.to_lowercase()),
            "{partition}/{}: search_text is not the derivation of the final title",
            row.row_id
        );
    }
}

fn seed(storage: &dyn ServerStorage, partition: &str, count: usize) {
    let v1 = schema(1);
    for i in 0..count {
        let id = format!("{partition}-seed-{i:05}");
        push(
            storage,
            Some(&ServeContext::default()),
            partition,
            "seeder",
            &id,
            &todo(&v1, &id, &format!("Seed Title {i}"), 1),
        )
        .expect("seed push");
    }
}

fn rolling_deploy(deployment: &dyn Deployment) {
    let dialect = deployment.dialect();
    let (v1, v2) = (schema(1), schema(2));
    let declared = |p: &str| CheckpointDeclaration::new(p, NAME, 2);

    // Process A runs v1 and has data in two partitions.
    let a = deployment.process();
    a.ensure_schema(&v1, &EnsureOptions::default())
        .expect("v1 ensure");
    seed(a.as_ref(), "p1", 1_200);
    seed(a.as_ref(), "p2", 300);

    // The v1 fleet pushes continuously (gate-aware v1 code) until refused.
    let (progress_tx, progress_rx) = mpsc::channel::<usize>();
    let fleet_storage = a.clone();
    let fleet = std::thread::spawn(move || {
        let v1 = schema(1);
        let mut applied = Vec::new();
        for i in 0.. {
            let id = format!("fleet-{i:05}");
            match push(
                fleet_storage.as_ref(),
                Some(&ServeContext::default()),
                "p1",
                "fleet",
                &id,
                &todo(&v1, &id, &format!("Fleet {i}"), 1),
            ) {
                Ok(_) => {
                    applied.push(id);
                    let _ = progress_tx.send(applied.len());
                }
                Err(refusal) => return (applied, refusal),
            }
        }
        unreachable!()
    });
    // Let the fleet commit a few pushes before the deploy starts.
    while progress_rx.recv().expect("fleet alive") < 20 {}

    // Process C (v2) bumps with a declaration for p1.
    let c = deployment.process();
    c.ensure_schema(&v2, &EnsureOptions::with_declarations(vec![declared("p1")]))
        .expect("v2 bump with declaration");
    let (fleet_applied, refusal) = fleet.join().expect("fleet thread");
    assert_eq!(
        refusal.code(),
        ErrorCode::SchemaNotReady,
        "{dialect}: fleet refusal"
    );
    assert_eq!(
        refusal.get_detail("reason"),
        Some("schema_ahead"),
        "{dialect}: {refusal:?}"
    );
    for id in &fleet_applied {
        assert!(
            c.get_row("p1", "todos", id).expect("get_row").is_some(),
            "{dialect}: fleet row {id} lost"
        );
        assert!(
            c.get_push_result("p1", "fleet", id)
                .expect("result")
                .is_some(),
            "{dialect}: fleet result {id} lost"
        );
    }

    // A v1 binary that predates the gate is refused by the database itself.
    let legacy = push(
        a.as_ref(),
        None,
        "p1",
        "legacy",
        "legacy-1",
        &todo(&v1, "legacy-row", "Legacy", 1),
    );
    let fenced = legacy.expect_err("the fence must refuse a v1 commit");
    assert_eq!(
        fenced.code(),
        ErrorCode::WriterFenceRejected,
        "{dialect}: {fenced:?}"
    );
    assert!(
        c.get_row("p1", "todos", "legacy-row")
            .expect("get_row")
            .is_none(),
        "{dialect}: fenced row persisted"
    );
    assert!(c
        .get_push_result("p1", "legacy", "legacy-1")
        .expect("result")
        .is_none());

    // An undeclared v2 process cannot start while p1's checkpoint is pending.
    let d = deployment.process();
    let incomplete = d
        .ensure_schema(&v2, &EnsureOptions::default())
        .expect_err("startup gate");
    assert_eq!(
        incomplete.code(),
        ErrorCode::CheckpointIncomplete,
        "{dialect}: {incomplete:?}"
    );

    // C backfills p1 while its own v2 writer pushes without pause.
    let c_ctx = ServeContext {
        declarations: vec![declared("p1"), declared("p2")],
        expected_log_epoch: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (storage, stop, ctx) = (c.clone(), stop.clone(), c_ctx.clone());
        std::thread::spawn(move || {
            let v2 = schema(2);
            let mut written = 0usize;
            let mut i = 0usize;
            while !stop.load(Ordering::SeqCst) {
                // Re-title seed rows (both sides of the backfill cursor) and add new rows.
                let (id, version) = if i % 2 == 0 {
                    (format!("p1-seed-{:05}", (i * 37) % 1_200), 2)
                } else {
                    (format!("v2-new-{i:05}"), 1)
                };
                let row = todo(&v2, &id, &format!("Written By V2 {i}"), version);
                match push(
                    storage.as_ref(),
                    Some(&ctx),
                    "p1",
                    "writer-v2",
                    &format!("w-{i}"),
                    &row,
                ) {
                    Ok(_) => written += usize::from(version == 1),
                    Err(e) => panic!("v2 writer refused: {e:?}"),
                }
                i += 1;
            }
            written
        })
    };
    let projector = derived_column(c.as_ref());
    let config = RunnerConfig {
        batch_size: 200,
        ..RunnerConfig::default()
    };
    let run_p1 = |projector: &dyn Projector, observer: Arc<dyn ProgressObserver>| {
        CheckpointRunner::new(c.as_ref(), "p1", NAME, 2, projector)
            .with_config(config.clone())
            .with_serve_context(c_ctx.clone())
            .with_progress(observer)
            .run()
    };
    // Killed between batches (after two committed batches)…
    let killed = catch_unwind(AssertUnwindSafe(|| {
        run_p1(&projector, Arc::new(KillAfterBatch(2, AtomicUsize::new(0))))
    }));
    assert!(
        killed.is_err(),
        "{dialect}: the first runner was not killed"
    );
    // …then killed again inside a batch, its transaction open…
    let dying = KillInsideBatch(&projector, 2, AtomicUsize::new(0));
    let killed = catch_unwind(AssertUnwindSafe(|| {
        run_p1(&dying, Arc::new(sync_backfill::NoProgress))
    }));
    assert!(
        killed.is_err(),
        "{dialect}: the second runner was not killed"
    );
    let before_takeover = c
        .read_checkpoint("p1", NAME)
        .expect("read")
        .expect("checkpoint");
    assert_eq!(
        before_takeover.owner_epoch, 2,
        "{dialect}: two owners so far"
    );
    // …and a third process takes over and activates under continuous writes.
    let outcome = run_p1(&projector, Arc::new(sync_backfill::NoProgress)).expect("takeover run");
    stop.store(true, Ordering::SeqCst);
    let new_rows = writer.join().expect("writer thread");
    match outcome {
        RunOutcome::Activated { owner_epoch, .. } => {
            assert_eq!(owner_epoch, 3, "{dialect}: takeover epoch")
        }
        other => panic!("{dialect}: expected Activated, got {other:?}"),
    }
    assert_projection_consistent(c.as_ref(), "p1", 1_200 + fleet_applied.len() + new_rows);

    // Now the undeclared v2 process starts and serves p1.
    d.ensure_schema(&v2, &EnsureOptions::default())
        .expect("undeclared v2 starts after activation");
    push(
        d.as_ref(),
        Some(&ServeContext::default()),
        "p1",
        "client-d",
        "d-1",
        &todo(&v2, "d-row", "From D", 1),
    )
    .expect("D serves p1");

    // C declares p2 at the current version: D is refused there until activation.
    c.declare_checkpoint("p2", NAME, 2, 1_700_000_000_000)
        .expect("declare p2");
    let refused = push(
        d.as_ref(),
        Some(&ServeContext::default()),
        "p2",
        "client-d",
        "d-2",
        &todo(&v2, "d-row-2", "From D", 1),
    )
    .expect_err("gate must refuse p2");
    assert_eq!(
        refused.get_detail("reason"),
        Some("checkpoint_pending"),
        "{dialect}: {refused:?}"
    );
    assert_eq!(refused.get_detail("projection"), Some(NAME));
    let outcome = CheckpointRunner::new(c.as_ref(), "p2", NAME, 2, &projector)
        .with_config(config.clone())
        .with_serve_context(c_ctx.clone())
        .run()
        .expect("p2 backfill");
    assert!(
        matches!(outcome, RunOutcome::Activated { .. }),
        "{dialect}: p2 outcome {outcome:?}"
    );
    push(
        d.as_ref(),
        Some(&ServeContext::default()),
        "p2",
        "client-d",
        "d-2",
        &todo(&v2, "d-row-2", "From D", 1),
    )
    .expect("D serves p2 right after activation");
    assert_projection_consistent(c.as_ref(), "p2", 301);
}

#[test]
fn rolling_deploy_sqlite() {
    rolling_deploy(&SqliteDeployment::new());
}

#[test]
fn rolling_deploy_postgres() {
    rolling_deploy(&PostgresDeployment::new());
}
