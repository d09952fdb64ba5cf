//! §19 Backfill runner, C-290…C-300 (and C-339, C-353 beyond the checklist).
//!
//! Interference "during" a run is injected at batch boundaries through the
//! runner's progress observer, which runs between transactions: the run is
//! deterministic on every dialect and nothing sleeps.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use sync_backfill::{
    CheckpointRunner, DerivedColumn, DerivedTable, Phase, Progress, ProgressObserver, Projector,
    RunOutcome, RunnerConfig, SourceRowRef,
};
use sync_core::{
    CheckpointDeclaration, CheckpointState, CommitMetadataQuery, CompiledSchema, EnsureOptions,
    Error, ErrorCode, NewChange, Result, RowValue, ServeContext, ServerStorage, StorageTransaction,
    StoredPushResult, StoredRow,
};

use crate::check::{expect_code, expect_detail, CheckDef, CheckResult, Failure};
use crate::context::Ctx;
use crate::fixtures::{compile_json, decode, fix1, fix1_json, push, push_with, task, Op};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "rfc0007-runner";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-290",
        "derived-table backfill of 1 200 rows in batches of 500 activates",
        c290_derived_table_backfill,
    ),
    check(
        GROUP,
        "C-291",
        "derived-column backfill activates; its own commits are not stale",
        c291_derived_column_backfill,
    ),
    check(
        GROUP,
        "C-292",
        "writes during the full pass end up derived; deleted rows lose their projection",
        c292_concurrent_writer,
    ),
    check(
        GROUP,
        "C-293",
        "an activated checkpoint returns AlreadyActivated and writes nothing",
        c293_already_activated,
    ),
    check(
        GROUP,
        "C-294",
        "a claim by another owner during batch 2 supersedes the run; batch 2 is absent",
        c294_superseded_mid_run,
    ),
    check(
        GROUP,
        "C-295",
        "a prune past the watermark falls back to a full pass and activates",
        c295_prune_forces_full_pass,
    ),
    check(
        GROUP,
        "C-296",
        "a rotated log epoch stops the runner with log_epoch_rotated",
        c296_epoch_rotated,
    ),
    check(
        GROUP,
        "C-297",
        "a newer schema bump stops the runner with schema_ahead",
        c297_schema_ahead,
    ),
    check(
        GROUP,
        "C-298",
        "after a projector error a new run claims epoch + 1 and activates",
        c298_projector_error_then_rerun,
    ),
    check(
        GROUP,
        "C-299",
        "a batch whose push result exists is skipped",
        c299_batch_idempotency,
    ),
    check(
        GROUP,
        "C-300",
        "batch_size 0 is invalid_argument before any write",
        c300_batch_size_zero,
    ),
    check(
        GROUP,
        "C-339",
        "a takeover after the full pass stored watermark W projects a source row written at W + 1",
        c339_takeover_after_stored_watermark,
    ),
    check(
        GROUP,
        "C-353",
        "a catch-up tail of several batches and listing pages projects every row and reports each batch",
        c353_long_catch_up_tail,
    ),
];

const PARTITION: &str = "p1";
const NAME: &str = "search_v2";

/// `FIX1` at v2 with `tasks.search_text` appended and a `task_search` table.
fn runner_v2() -> CheckResult<CompiledSchema> {
    let mut schema = fix1_json();
    schema["version"] = json!(2);
    if let Some(columns) = schema["tables"][0]["columns"].as_array_mut() {
        columns.push(json!({"name": "search_text", "type": "string", "nullable": true}));
    }
    if let Some(tables) = schema["tables"].as_array_mut() {
        tables.push(json!({
            "name": "task_search",
            "primaryKey": "id",
            "columns": [
                {"name": "id", "type": "string"},
                {"name": "project_id", "type": "string"},
                {"name": "terms", "type": "string", "nullable": true}
            ],
            "scopes": ["project:{project_id}"]
        }));
    }
    compile_json(&schema)
}

fn lower_title(table: &sync_core::CompiledTable, values: &[RowValue]) -> RowValue {
    match table.column_index.get("title").and_then(|&i| values.get(i)) {
        Some(RowValue::String(title)) => RowValue::String(title.to_lowercase()),
        _ => RowValue::Null,
    }
}

fn search_table(storage: &dyn ServerStorage) -> CheckResult<DerivedTable> {
    let schema = storage
        .ensured_schema()
        .ok_or_else(|| Failure::new("storage has no ensured schema"))?;
    Ok(DerivedTable::new(
        schema,
        "tasks",
        "task_search",
        Arc::new(|source, values| {
            let get = |name: &str| {
                source
                    .column_index
                    .get(name)
                    .and_then(|&i| values.get(i))
                    .cloned()
                    .unwrap_or(RowValue::Null)
            };
            Ok(Some(vec![
                get("id"),
                get("project_id"),
                lower_title(source, values),
            ]))
        }),
    )?)
}

fn search_column(storage: &dyn ServerStorage) -> CheckResult<DerivedColumn> {
    let schema = storage
        .ensured_schema()
        .ok_or_else(|| Failure::new("storage has no ensured schema"))?;
    Ok(DerivedColumn::new(
        schema,
        "tasks",
        "search_text",
        Arc::new(|table, values| Ok(lower_title(table, values))),
    )?)
}

/// Pushes `count` tasks rows (`t0000`…) at v1 in commits of 100 rows.
fn seed_v1(ctx: &mut Ctx<'_>, count: usize) -> CheckResult<()> {
    let v1 = fix1()?;
    let storage = ctx.ensured(&v1)?;
    let ids: Vec<String> = (0..count).map(|i| format!("t{i:04}")).collect();
    for (n, chunk) in ids.chunks(100).enumerate() {
        let ops = chunk
            .iter()
            .map(|id| {
                Ok(Op::upsert(
                    "tasks",
                    task(
                        &v1,
                        id,
                        &format!("proj{}", id.len() % 3),
                        &format!("Title {id}"),
                    )?,
                ))
            })
            .collect::<CheckResult<Vec<_>>>()?;
        push(
            storage.as_ref(),
            PARTITION,
            "seeder",
            &format!("seed-{n}"),
            &ops,
        )?;
    }
    Ok(())
}

fn declaration() -> CheckpointDeclaration {
    CheckpointDeclaration::new(PARTITION, NAME, 2)
}

/// A new instance that bumps to the runner's v2 declaring the checkpoint.
fn bumped(ctx: &mut Ctx<'_>) -> CheckResult<Arc<dyn ServerStorage>> {
    let storage = ctx.open()?;
    storage.ensure_schema(
        &runner_v2()?,
        &EnsureOptions::with_declarations(vec![declaration()]),
    )?;
    Ok(storage)
}

fn serve_ctx() -> ServeContext {
    ServeContext {
        declarations: vec![declaration()],
        expected_log_epoch: None,
    }
}

fn runner<'a>(
    ctx: &Ctx<'_>,
    storage: &'a dyn ServerStorage,
    projector: &'a dyn Projector,
) -> CheckpointRunner<'a> {
    CheckpointRunner::new(storage, PARTITION, NAME, 2, projector)
        .with_clock(ctx.clock.clone())
        .with_serve_context(serve_ctx())
}

/// Every row of `table` in the partition, paged.
fn all_rows(storage: &dyn ServerStorage, table: &str) -> CheckResult<Vec<StoredRow>> {
    let mut rows = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = storage.scan_partition_rows(PARTITION, table, after.as_deref(), 1000)?;
        let Some(last) = page.last() else { break };
        after = Some(last.row_id.clone());
        let short = page.len() < 1000;
        rows.extend(page);
        if short {
            break;
        }
    }
    Ok(rows)
}

/// The derived table equals the derivation of the final source state, row for row.
fn assert_table_projection(
    storage: &dyn ServerStorage,
    schema: &CompiledSchema,
) -> CheckResult<usize> {
    let sources = all_rows(storage, "tasks")?;
    let projections = all_rows(storage, "task_search")?;
    check_eq!(projections.len(), sources.len(), "projection row count");
    for (source, projection) in sources.iter().zip(&projections) {
        check_eq!(projection.row_id, source.row_id, "projection row id");
        check_eq!(
            projection.scopes,
            source.scopes,
            "projection scopes of {}",
            source.row_id
        );
        let values = decode(schema, "tasks", &source.payload)?;
        let table = schema
            .table("tasks")
            .ok_or_else(|| Failure::new("tasks missing"))?;
        let terms = decode(schema, "task_search", &projection.payload)?;
        check_eq!(
            terms.get(2).cloned(),
            Some(lower_title(table, &values)),
            "terms of {}",
            source.row_id
        );
    }
    Ok(sources.len())
}

/// The derived column equals the derivation of every source row.
fn assert_column_projection(
    storage: &dyn ServerStorage,
    schema: &CompiledSchema,
) -> CheckResult<usize> {
    let table = schema
        .table("tasks")
        .ok_or_else(|| Failure::new("tasks missing"))?;
    let index = *table
        .column_index
        .get("search_text")
        .ok_or_else(|| Failure::new("search_text missing"))?;
    let rows = all_rows(storage, "tasks")?;
    for row in &rows {
        let values = decode(schema, "tasks", &row.payload)?;
        check_eq!(
            values.get(index).cloned(),
            Some(lower_title(table, &values)),
            "search_text of {}",
            row.row_id
        );
    }
    Ok(rows.len())
}

fn expect_activated(outcome: RunOutcome) -> CheckResult<(i64, i64, i64)> {
    match outcome {
        RunOutcome::Activated {
            owner_epoch,
            watermark,
            observed_rows,
        } => Ok((owner_epoch, watermark, observed_rows)),
        other => Err(Failure::new(format!("expected Activated, got {other:?}"))),
    }
}

fn checkpoint_state(storage: &dyn ServerStorage) -> CheckResult<CheckpointState> {
    storage
        .read_checkpoint(PARTITION, NAME)?
        .map(|cp| cp.state)
        .ok_or_else(|| Failure::new("checkpoint missing"))
}

/// Calls `action` once, after the `nth` committed batch of the given phase
/// (reports that announce a phase without a new batch are not counted).
struct OnBatch<F: Fn() + Send + Sync> {
    phase: Phase,
    nth: u64,
    seen: AtomicUsize,
    last_batches: AtomicU64,
    fired: AtomicBool,
    action: F,
}

impl<F: Fn() + Send + Sync> OnBatch<F> {
    fn new(phase: Phase, nth: u64, action: F) -> Arc<Self> {
        Arc::new(Self {
            phase,
            nth,
            seen: AtomicUsize::new(0),
            last_batches: AtomicU64::new(0),
            fired: AtomicBool::new(false),
            action,
        })
    }

    fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl<F: Fn() + Send + Sync> ProgressObserver for OnBatch<F> {
    fn on_progress(&self, progress: &Progress) {
        let previous = self.last_batches.swap(progress.batches, Ordering::SeqCst);
        if progress.phase != self.phase || progress.batches <= previous {
            return;
        }
        let seen = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if u64::try_from(seen).unwrap_or(u64::MAX) == self.nth
            && !self.fired.swap(true, Ordering::SeqCst)
        {
            (self.action)();
        }
    }
}

/// Where a competing claim leaves its epoch (or its error).
type ClaimSlot = Arc<Mutex<Option<Result<i64>>>>;

/// An observer that makes another owner claim the checkpoint after the
/// `nth` committed batch of `phase`, and the slot its outcome lands in.
fn competing_claim(
    storage: &Arc<dyn ServerStorage>,
    phase: Phase,
    nth: u64,
) -> (Arc<OnBatch<impl Fn() + Send + Sync>>, ClaimSlot) {
    let other = storage.clone();
    let claimed: ClaimSlot = Arc::default();
    let claimed_by_other = claimed.clone();
    let observer = OnBatch::new(phase, nth, move || {
        let result = other
            .claim_checkpoint(PARTITION, NAME, 2, crate::context::NOW)
            .map(|cp| cp.owner_epoch);
        if let Ok(mut slot) = claimed_by_other.lock() {
            *slot = Some(result);
        }
    });
    (observer, claimed)
}

/// The epoch the competing claim obtained.
fn claimed_epoch(slot: &ClaimSlot) -> CheckResult<i64> {
    Ok(slot
        .lock()
        .ok()
        .and_then(|mut slot| slot.take())
        .ok_or_else(|| Failure::new("the competing claim never ran"))??)
}

fn c290_derived_table_backfill(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 1200)?;
    let storage = bumped(ctx)?;
    let projector = search_table(storage.as_ref())?;
    let config = RunnerConfig {
        batch_size: 500,
        ..RunnerConfig::default()
    };
    let outcome = runner(ctx, storage.as_ref(), &projector)
        .with_config(config)
        .run()?;
    let (_, watermark, observed) = expect_activated(outcome)?;
    check_eq!(observed, 1200, "observed_rows");
    check_eq!(
        watermark,
        storage.get_max_commit_seq(PARTITION)?,
        "watermark = max_commit_seq at seal"
    );
    check_eq!(
        checkpoint_state(storage.as_ref())?,
        CheckpointState::Activated,
        "state"
    );
    let stored = storage
        .read_checkpoint(PARTITION, NAME)?
        .ok_or_else(|| Failure::new("checkpoint missing"))?;
    check_eq!(stored.observed_rows, 1200, "stored observed_rows");
    let schema = runner_v2()?;
    check_eq!(
        assert_table_projection(storage.as_ref(), &schema)?,
        1200,
        "source rows with a projection"
    );
    Ok(())
}

fn c291_derived_column_backfill(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 600)?;
    let storage = bumped(ctx)?;
    let projector = search_column(storage.as_ref())?;
    let outcome = runner(ctx, storage.as_ref(), &projector).run()?;
    let (_, watermark, observed) = expect_activated(outcome)?;
    check_eq!(observed, 600, "observed_rows");
    check_eq!(
        watermark,
        storage.get_max_commit_seq(PARTITION)?,
        "watermark"
    );
    check_eq!(
        assert_column_projection(storage.as_ref(), &runner_v2()?)?,
        600,
        "rows derived"
    );
    Ok(())
}

fn c292_concurrent_writer(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 1200)?;
    let storage = bumped(ctx)?;
    let schema = runner_v2()?;
    let projector = search_table(storage.as_ref())?;
    let writer_storage = storage.clone();
    let writer_schema = schema.clone();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let writer_errors = errors.clone();
    // After the first full-pass batch: rename rows on both sides of the
    // cursor, delete some, insert new ones — a writer between two batches.
    let observer = OnBatch::new(Phase::FullPass, 1, move || {
        let mut ops = Vec::new();
        for id in ["t0001", "t0700", "t1100"] {
            match task(&writer_schema, id, "proj2", &format!("RENAMED {id}")) {
                Ok(mut row) => {
                    row.server_version = 2;
                    ops.push(Op::upsert("tasks", row));
                }
                Err(e) => writer_errors
                    .lock()
                    .map(|mut v| v.push(e.message))
                    .unwrap_or(()),
            }
        }
        // Written again with its projected values unchanged: the catch-up
        // re-derives the same projection and must not rewrite it.
        match task(&writer_schema, "t0004", "proj2", "Title t0004") {
            Ok(mut row) => {
                row.server_version = 2;
                ops.push(Op::upsert("tasks", row));
            }
            Err(e) => writer_errors
                .lock()
                .map(|mut v| v.push(e.message))
                .unwrap_or(()),
        }
        ops.push(Op::delete("tasks", "t0002"));
        ops.push(Op::delete("tasks", "t0900"));
        if let Ok(row) = task(&writer_schema, "t9999", "proj1", "Brand New") {
            ops.push(Op::upsert("tasks", row));
        }
        if let Err(e) = push_with(
            writer_storage.as_ref(),
            &serve_ctx(),
            PARTITION,
            "writer",
            "w-1",
            &ops,
        ) {
            writer_errors
                .lock()
                .map(|mut v| v.push(format!("{e:?}")))
                .unwrap_or(());
        }
    });
    let outcome = runner(ctx, storage.as_ref(), &projector)
        .with_config(RunnerConfig {
            batch_size: 500,
            ..RunnerConfig::default()
        })
        .with_progress(observer.clone())
        .run()?;
    let problems = errors.lock().map(|v| v.clone()).unwrap_or_default();
    check!(problems.is_empty(), "writer failed: {problems:?}");
    check!(
        observer.fired(),
        "the writer never ran during the full pass"
    );
    expect_activated(outcome)?;
    check_eq!(
        assert_table_projection(storage.as_ref(), &schema)?,
        1199,
        "final source rows"
    );
    let unchanged = storage
        .get_row(PARTITION, "task_search", "t0004")?
        .ok_or_else(|| Failure::new("projection of t0004 missing"))?;
    check_eq!(
        unchanged.server_version,
        1,
        "version of t0004's projection (its source was rewritten with the same projected values)"
    );
    check!(
        storage
            .get_row(PARTITION, "task_search", "t0002")?
            .is_none(),
        "projection of deleted t0002 remains"
    );
    check!(
        storage
            .get_row(PARTITION, "task_search", "t0900")?
            .is_none(),
        "projection of deleted t0900 remains"
    );
    Ok(())
}

fn c293_already_activated(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 10)?;
    let storage = bumped(ctx)?;
    let projector = search_table(storage.as_ref())?;
    expect_activated(runner(ctx, storage.as_ref(), &projector).run()?)?;
    let before = storage.read_checkpoint(PARTITION, NAME)?;
    let max_before = storage.get_max_commit_seq(PARTITION)?;
    let projections_before = all_rows(storage.as_ref(), "task_search")?;
    ctx.clock.advance(1000);
    let outcome = runner(ctx, storage.as_ref(), &projector).run()?;
    check_eq!(outcome, RunOutcome::AlreadyActivated, "second run");
    check_eq!(
        storage.get_max_commit_seq(PARTITION)?,
        max_before,
        "no commit appended"
    );
    check_eq!(
        all_rows(storage.as_ref(), "task_search")?,
        projections_before,
        "projection untouched"
    );
    check_eq!(
        storage.read_checkpoint(PARTITION, NAME)?,
        before,
        "checkpoint row unchanged"
    );
    Ok(())
}

fn c294_superseded_mid_run(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 1200)?;
    let storage = bumped(ctx)?;
    let projector = search_table(storage.as_ref())?;
    // Between batch 1 and batch 2 another owner claims: batch 2's CAS fails.
    let (observer, claimed) = competing_claim(&storage, Phase::FullPass, 1);
    let outcome = runner(ctx, storage.as_ref(), &projector)
        .with_config(RunnerConfig {
            batch_size: 500,
            ..RunnerConfig::default()
        })
        .with_progress(observer)
        .run()?;
    let other_epoch = claimed_epoch(&claimed)?;
    check_eq!(other_epoch, 2, "competing claim's epoch");
    check_eq!(
        outcome,
        RunOutcome::Superseded { owner_epoch: 1 },
        "outcome"
    );
    let projections = all_rows(storage.as_ref(), "task_search")?;
    check_eq!(projections.len(), 500, "only batch 1's projections exist");
    check!(
        projections.iter().all(|r| r.row_id.as_str() < "t0500"),
        "a batch 2 projection exists"
    );
    let stored = storage
        .read_checkpoint(PARTITION, NAME)?
        .ok_or_else(|| Failure::new("checkpoint missing"))?;
    check_eq!(stored.owner_epoch, 2, "stored epoch");
    check_eq!(stored.observed_rows, 500, "observed rows stop at batch 1");
    Ok(())
}

fn c295_prune_forces_full_pass(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 300)?;
    let storage = bumped(ctx)?;
    let epoch = storage
        .touch_partition(PARTITION, crate::context::NOW, "epoch-1")?
        .log_epoch;
    let schema = runner_v2()?;
    let projector = search_table(storage.as_ref())?;
    let other = storage.clone();
    let full_passes = Arc::new(AtomicUsize::new(0));
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let (errors2, schema2) = (errors.clone(), schema.clone());
    // When the first catch-up starts: write a source change, then prune
    // through the whole log, so the tail above the watermark is gone.
    let observer = OnBatch::new(Phase::CatchUp, 1, move || {
        let result = task(&schema2, "t0005", "proj1", "Changed After Pass")
            .map_err(|f| f.message)
            .and_then(|mut row| {
                row.server_version = 2;
                push_with(
                    other.as_ref(),
                    &serve_ctx(),
                    PARTITION,
                    "writer",
                    "w-1",
                    &[Op::upsert("tasks", row)],
                )
                .map_err(|e| format!("{e:?}"))
            })
            .and_then(|_| {
                let through = other
                    .get_max_commit_seq(PARTITION)
                    .map_err(|e| format!("{e:?}"))?;
                other
                    .prune_commits_through(
                        PARTITION,
                        &sync_core::CommitPruneQuery {
                            log_epoch: epoch.clone(),
                            through_seq: through,
                        },
                    )
                    .map_err(|e| format!("{e:?}"))
            });
        if let Err(e) = result {
            errors2.lock().map(|mut v| v.push(e)).unwrap_or(());
        }
    });
    let counting = Arc::new(PassCounter {
        inner: observer.clone(),
        last: Mutex::new(None),
        passes: full_passes.clone(),
    });
    let outcome = runner(ctx, storage.as_ref(), &projector)
        .with_progress(counting)
        .run()?;
    let problems = errors.lock().map(|v| v.clone()).unwrap_or_default();
    check!(problems.is_empty(), "interference failed: {problems:?}");
    check!(observer.fired(), "the prune never ran");
    check_eq!(
        full_passes.load(Ordering::SeqCst),
        2,
        "full passes (the second after the prune)"
    );
    expect_activated(outcome)?;
    check_eq!(
        assert_table_projection(storage.as_ref(), &schema)?,
        300,
        "projection after fallback"
    );
    Ok(())
}

/// Counts entries into the full-pass phase, forwarding every snapshot.
struct PassCounter<O: ProgressObserver> {
    inner: Arc<O>,
    last: Mutex<Option<Phase>>,
    passes: Arc<AtomicUsize>,
}

impl<O: ProgressObserver> ProgressObserver for PassCounter<O> {
    fn on_progress(&self, progress: &Progress) {
        if let Ok(mut last) = self.last.lock() {
            if progress.phase == Phase::FullPass && *last != Some(Phase::FullPass) {
                self.passes.fetch_add(1, Ordering::SeqCst);
            }
            *last = Some(progress.phase);
        }
        self.inner.on_progress(progress);
    }
}

fn c296_epoch_rotated(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 1200)?;
    let storage = bumped(ctx)?;
    storage.touch_partition(PARTITION, crate::context::NOW, "epoch-1")?;
    let projector = search_table(storage.as_ref())?;
    let other = storage.clone();
    let observer = OnBatch::new(Phase::FullPass, 1, move || {
        let _ = other.rotate_partition_log_epoch(PARTITION, "epoch-2", crate::context::NOW);
    });
    let result = runner(ctx, storage.as_ref(), &projector)
        .with_config(RunnerConfig {
            batch_size: 500,
            ..RunnerConfig::default()
        })
        .with_progress(observer.clone())
        .run();
    check!(observer.fired(), "the rotation never ran");
    let error = expect_code(result, ErrorCode::SchemaNotReady, "run after rotation")?;
    expect_detail(&error, "reason", "log_epoch_rotated")?;
    check!(
        checkpoint_state(storage.as_ref())? != CheckpointState::Activated,
        "activated despite rotation"
    );
    Ok(())
}

fn c297_schema_ahead(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 1200)?;
    let storage = bumped(ctx)?;
    let projector = search_table(storage.as_ref())?;
    let newer = ctx.open()?;
    let mut v3 = runner_v2()?;
    v3.version = 3;
    let bump_errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let errors = bump_errors.clone();
    let observer = OnBatch::new(Phase::FullPass, 1, move || {
        if let Err(e) = newer.ensure_schema(&v3, &EnsureOptions::default()) {
            errors
                .lock()
                .map(|mut v| v.push(format!("{e:?}")))
                .unwrap_or(());
        }
    });
    let result = runner(ctx, storage.as_ref(), &projector)
        .with_config(RunnerConfig {
            batch_size: 500,
            ..RunnerConfig::default()
        })
        .with_progress(observer.clone())
        .run();
    let problems = bump_errors.lock().map(|v| v.clone()).unwrap_or_default();
    check!(problems.is_empty(), "bump to v3 failed: {problems:?}");
    check!(observer.fired(), "the bump never ran");
    let error = expect_code(result, ErrorCode::SchemaNotReady, "run after a newer bump")?;
    expect_detail(&error, "reason", "schema_ahead")?;
    Ok(())
}

/// Fails on the `fail_on`-th call, then delegates.
struct Flaky<'p> {
    inner: &'p dyn Projector,
    calls: AtomicUsize,
    fail_on: usize,
}

impl Projector for Flaky<'_> {
    fn sources(&self) -> &[String] {
        self.inner.sources()
    }

    fn project(
        &self,
        tx: &mut dyn StorageTransaction,
        rows: &[SourceRowRef],
    ) -> Result<Vec<NewChange>> {
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_on {
            return Err(Error::invalid_argument("projector", "injected_failure"));
        }
        self.inner.project(tx, rows)
    }
}

fn c298_projector_error_then_rerun(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 1200)?;
    let storage = bumped(ctx)?;
    let projector = search_table(storage.as_ref())?;
    let flaky = Flaky {
        inner: &projector,
        calls: AtomicUsize::new(0),
        fail_on: 2,
    };
    let config = RunnerConfig {
        batch_size: 500,
        ..RunnerConfig::default()
    };
    let first = runner(ctx, storage.as_ref(), &flaky)
        .with_config(config.clone())
        .run();
    expect_code(
        first,
        ErrorCode::InvalidArgument,
        "first run with a failing projector",
    )?;
    let (epoch, _, _) = expect_activated(
        runner(ctx, storage.as_ref(), &projector)
            .with_config(config)
            .run()?,
    )?;
    check_eq!(epoch, 2, "second run's owner epoch");
    check_eq!(
        assert_table_projection(storage.as_ref(), &runner_v2()?)?,
        1200,
        "projection"
    );
    Ok(())
}

fn c299_batch_idempotency(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 50)?;
    let storage = bumped(ctx)?;
    let projector = search_table(storage.as_ref())?;
    let target = storage.get_max_commit_seq(PARTITION)?;
    let client_id = format!("sync.backfill:{NAME}");
    // The first claim gets epoch 1; its first batch key is fixed by the spec.
    let key = format!("1:full{target}:tasks:");
    let mut tx = storage.begin(PARTITION)?;
    tx.lock_partition_for_push()?;
    tx.put_push_result(&client_id, &key, &StoredPushResult::applied(target))?;
    tx.commit()?;
    expect_activated(runner(ctx, storage.as_ref(), &projector).run()?)?;
    let commits = storage.list_commit_metadata(
        PARTITION,
        &CommitMetadataQuery {
            after_seq: 0,
            before_seq: None,
            limit: 1000,
            table: None,
        },
    )?;
    let with_key = commits
        .iter()
        .filter(|c| c.client_id == client_id && c.client_commit_id == key)
        .count();
    check_eq!(
        with_key,
        0,
        "commits carrying the already-recorded batch key"
    );
    check!(
        all_rows(storage.as_ref(), "task_search")?.is_empty(),
        "the skipped batch was projected anyway"
    );
    Ok(())
}

fn c300_batch_size_zero(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 5)?;
    let storage = bumped(ctx)?;
    let projector = search_table(storage.as_ref())?;
    let result =
        CheckpointRunner::new(storage.as_ref(), PARTITION, "never_declared", 2, &projector)
            .with_config(RunnerConfig {
                batch_size: 0,
                ..RunnerConfig::default()
            })
            .run();
    let error = expect_code(result, ErrorCode::InvalidArgument, "batch_size 0")?;
    expect_detail(&error, "argument", "batch_size")?;
    check!(
        storage
            .read_checkpoint(PARTITION, "never_declared")?
            .is_none(),
        "a checkpoint row was written"
    );
    Ok(())
}

/// Beyond the checklist (`docs/decisions.md`): a takeover resumes at the
/// stored watermark itself. Two `docs` commits put the log at W = 2 while
/// `tasks` (the source) is empty, so the first owner's full pass appends
/// nothing and stores exactly W; another owner claims right after that,
/// a source row lands at W + 1, and the next owner must project it.
fn c339_takeover_after_stored_watermark(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1()?;
    let seeder = ctx.ensured(&v1)?;
    for (n, id) in ["d1", "d2"].iter().enumerate() {
        let row = crate::fixtures::doc(&v1, id, "o1", "proj1", None)?;
        push(
            seeder.as_ref(),
            PARTITION,
            "seeder",
            &format!("doc-{n}"),
            &[Op::upsert("docs", row)],
        )?;
    }
    let storage = bumped(ctx)?;
    let watermark = storage.get_max_commit_seq(PARTITION)?;
    check_eq!(watermark, 2, "log head before the backfill");
    let projector = search_table(storage.as_ref())?;
    let (observer, claimed) = competing_claim(&storage, Phase::CatchUp, 1);
    let first = runner(ctx, storage.as_ref(), &projector)
        .with_progress(observer)
        .run()?;
    let other_epoch = claimed_epoch(&claimed)?;
    check_eq!(other_epoch, 2, "competing claim's epoch");
    check_eq!(
        first,
        RunOutcome::Superseded { owner_epoch: 1 },
        "first owner's outcome"
    );
    let stored = storage
        .read_checkpoint(PARTITION, NAME)?
        .ok_or_else(|| Failure::new("checkpoint missing"))?;
    check_eq!(
        (stored.watermark, stored.owner_epoch),
        (watermark, 2),
        "stored (watermark, owner_epoch) after the full pass"
    );
    let schema = runner_v2()?;
    let late = task(&schema, "t-late", "proj1", "Late Arrival")?;
    let seq = push_with(
        storage.as_ref(),
        &serve_ctx(),
        PARTITION,
        "writer",
        "late-1",
        &[Op::upsert("tasks", late)],
    )?
    .seq()?;
    check_eq!(seq, watermark + 1, "the source row's commit_seq");
    let outcome = runner(ctx, storage.as_ref(), &projector).run()?;
    let (epoch, _, _) = expect_activated(outcome)?;
    check_eq!(epoch, 3, "takeover epoch");
    check_eq!(
        assert_table_projection(storage.as_ref(), &schema)?,
        1,
        "source rows with a projection after the takeover"
    );
    Ok(())
}

/// One progress snapshot, as C-353 compares them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot {
    phase: Phase,
    batches: u64,
    rows_seen: i64,
    watermark: i64,
}

/// An [`OnBatch`] that also keeps every snapshot.
struct Tape<F: Fn() + Send + Sync> {
    trigger: Arc<OnBatch<F>>,
    snapshots: Mutex<Vec<Snapshot>>,
}

impl<F: Fn() + Send + Sync> Tape<F> {
    /// The snapshots reported after the first one of `phase` — the one
    /// whose report ran the action, when the trigger is the first batch of
    /// that phase.
    fn after_first(&self, phase: Phase) -> CheckResult<Vec<Snapshot>> {
        check!(self.trigger.fired(), "the writer never ran");
        let snapshots = self
            .snapshots
            .lock()
            .map_err(|_| Failure::new("snapshot tape poisoned"))?;
        let first = snapshots
            .iter()
            .position(|s| s.phase == phase)
            .ok_or_else(|| Failure::new(format!("no {phase} snapshot")))?;
        Ok(snapshots[first + 1..].to_vec())
    }
}

impl<F: Fn() + Send + Sync> ProgressObserver for Tape<F> {
    fn on_progress(&self, progress: &Progress) {
        if let Ok(mut snapshots) = self.snapshots.lock() {
            snapshots.push(Snapshot {
                phase: progress.phase,
                batches: progress.batches,
                rows_seen: progress.rows_seen,
                watermark: progress.watermark,
            });
        }
        self.trigger.on_progress(progress);
    }
}

/// Rows per writer commit in C-353.
const TAIL_COMMIT_ROWS: usize = 150;
/// Writer commits in C-353.
const TAIL_COMMITS: usize = 8;

/// Beyond the checklist (`docs/decisions.md`): the catch-up of a long tail.
/// Ten rows are projected by the full pass; when it ends, a writer commits
/// 8 × 150 new source rows. The runner lists the tail in pages of 1 000
/// changes and cuts batches at commit boundaries once `batch_size` (1 000)
/// distinct rows are gathered, so:
/// - the first listing page ends inside the 7th commit, which must be read
///   whole from the next page (a commit is never split);
/// - the first catch-up batch is commits 1–7 (1 050 rows), not exhausted:
///   it advances the watermark to the 7th commit and reports it;
/// - the second is commit 8, exhausted: the seal activates.
///
/// Every source row must end up projected, and each batch reported with
/// its rows and watermark.
fn c353_long_catch_up_tail(ctx: &mut Ctx<'_>) -> CheckResult {
    seed_v1(ctx, 10)?;
    let storage = bumped(ctx)?;
    let schema = runner_v2()?;
    let projector = search_table(storage.as_ref())?;
    let writer_storage = storage.clone();
    let writer_schema = schema.clone();
    let seqs: Arc<Mutex<Vec<i64>>> = Arc::default();
    let writer_seqs = seqs.clone();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let writer_errors = errors.clone();
    let write_tail = move || {
        let note = |e: String| writer_errors.lock().map(|mut v| v.push(e)).unwrap_or(());
        for commit in 0..TAIL_COMMITS {
            let ops: std::result::Result<Vec<Op>, Failure> = (0..TAIL_COMMIT_ROWS)
                .map(|i| {
                    let id = format!("n{commit}-{i:03}");
                    Ok(Op::upsert(
                        "tasks",
                        task(&writer_schema, &id, "proj1", &format!("Tail {id}"))?,
                    ))
                })
                .collect();
            let pushed = ops.and_then(|ops| {
                push_with(
                    writer_storage.as_ref(),
                    &serve_ctx(),
                    PARTITION,
                    "writer",
                    &format!("tail-{commit}"),
                    &ops,
                )?
                .seq()
            });
            match pushed {
                Ok(seq) => writer_seqs.lock().map(|mut v| v.push(seq)).unwrap_or(()),
                Err(e) => note(format!("{e:?}")),
            }
        }
    };
    let tape = Arc::new(Tape {
        trigger: OnBatch::new(Phase::CatchUp, 1, write_tail),
        snapshots: Mutex::default(),
    });
    let outcome = runner(ctx, storage.as_ref(), &projector)
        .with_config(RunnerConfig {
            batch_size: 1000,
            ..RunnerConfig::default()
        })
        .with_progress(tape.clone())
        .run()?;
    let problems = errors.lock().map(|v| v.clone()).unwrap_or_default();
    check!(problems.is_empty(), "writer failed: {problems:?}");
    let seqs = seqs.lock().map(|v| v.clone()).unwrap_or_default();
    check_eq!(seqs.len(), TAIL_COMMITS, "writer commits");
    let (_, watermark, observed) = expect_activated(outcome)?;
    check_eq!(observed, 10, "observed_rows (the full pass's rows)");
    check_eq!(
        watermark,
        storage.get_max_commit_seq(PARTITION)?,
        "watermark = max_commit_seq at seal"
    );
    check_eq!(
        assert_table_projection(storage.as_ref(), &schema)?,
        10 + TAIL_COMMITS * TAIL_COMMIT_ROWS,
        "source rows with a projection"
    );
    let seventh = seqs.get(6).copied().unwrap_or_default();
    let first_batch_rows = i64::try_from(7 * TAIL_COMMIT_ROWS).unwrap_or_default();
    let all_rows_seen = i64::try_from(10 + TAIL_COMMITS * TAIL_COMMIT_ROWS).unwrap_or_default();
    // The full pass was batch 1 and its end (certifying its target) batch 2.
    let expected = vec![
        Snapshot {
            phase: Phase::CatchUp,
            batches: 3,
            rows_seen: 10 + first_batch_rows,
            watermark: seventh,
        },
        Snapshot {
            phase: Phase::Seal,
            batches: 3,
            rows_seen: 10 + first_batch_rows,
            watermark: seventh,
        },
        Snapshot {
            phase: Phase::Done,
            batches: 4,
            rows_seen: all_rows_seen,
            watermark,
        },
    ];
    check_eq!(
        tape.after_first(Phase::CatchUp)?,
        expected,
        "snapshots after the tail was written"
    );
    Ok(())
}
