//! The deterministic workload of the fault sweeps and the process kills,
//! on the [`crate::fixture`] schema family plus a unique index
//! (see [`schema`]): a base state with commits, a tombstone and client
//! records; the standard push sequence (`storage-contract.md` §6.3) with
//! reactions and a tombstone cleared; a rejected push, by the caller or by
//! a constraint violation; and the backfill of a derived column at
//! version 2.
//!
//! Every time is fixed, so the same steps give the same database on any
//! run and either dialect.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sync_backfill::{
    CheckpointRunner, DerivedColumn, NoProgress, Pause, ProgressObserver, RunOutcome, RunnerConfig,
};
use sync_core::{
    check_serve_gate, CheckpointDeclaration, ClientRecord, CompiledSchema, EnsureOptions,
    ErrorCode, ManualClock, NewChange, NewCommit, NewReaction, PushCommitOutcome,
    PushPreludeRequest, Result, RowValue, ServeContext, ServerStorage, StorageTransaction,
    StoredPushResult,
};

use crate::fixture::{self, ITEMS, NOTES};

/// The partition every step works on.
pub const PARTITION: &str = "p1";
/// Its initial log epoch.
pub const EPOCH: &str = "epoch-1";
/// The base time of every step (ms).
pub const T0: i64 = 1_700_000_000_000;
/// The checkpoint the migration declares.
pub const MIGRATION_CHECKPOINT: &str = "cp_migrate";
/// The checkpoint the backfill runner declares and activates.
pub const BACKFILL_CHECKPOINT: &str = "cp_backfill";
/// The client of every scenario push.
pub const CLIENT: &str = "writer";

/// The unique index of the scenario schema: two notes never share a body.
pub const UNIQUE_INDEX: &str = "notes_by_body";

/// The scenario schema at `version`: the fixture schema (same tables,
/// columns, scopes and growth per version) plus a unique index on
/// `notes(body)`, so that a push can fail with a constraint violation.
pub fn schema(version: i32) -> CompiledSchema {
    let mut items = vec![
        serde_json::json!({"name": "id", "type": "string"}),
        serde_json::json!({"name": "grp", "type": "string"}),
        serde_json::json!({"name": "n", "type": "integer"}),
    ];
    for v in 2..=version {
        items.push(
            serde_json::json!({"name": format!("extra_{v}"), "type": "string", "nullable": true}),
        );
    }
    let input = serde_json::json!({
        "version": version,
        "tables": [
            {
                "name": ITEMS,
                "primaryKey": "id",
                "columns": items,
                "scopes": ["grp:{grp}"],
                "indexes": [{"name": "items_by_n", "columns": ["n"]}]
            },
            {
                "name": NOTES,
                "primaryKey": "id",
                "columns": [
                    {"name": "id", "type": "string"},
                    {"name": "grp", "type": "string"},
                    {"name": "body", "type": "string", "nullable": true}
                ],
                "scopes": ["grp:{grp}"],
                "indexes": [{"name": UNIQUE_INDEX, "columns": ["body"], "unique": true}]
            }
        ]
    });
    let parsed = sync_schema::parse_schema_value(&input)
        .unwrap_or_else(|e| panic!("scenario schema v{version} parses: {e:?}"));
    sync_schema::compile(&parsed)
        .unwrap_or_else(|e| panic!("scenario schema v{version} compiles: {e:?}"))
}

/// Every scenario schema from 1 through `max`, by version (for the checker).
pub fn schema_history(max: i32) -> BTreeMap<i32, CompiledSchema> {
    (1..=max.max(1)).map(|v| (v, schema(v))).collect()
}

/// A row change of a scenario push.
#[derive(Debug, Clone)]
pub enum Change {
    /// Upsert `(table, id)` into group `grp` with value `n`.
    Upsert(&'static str, String, &'static str, i64),
    /// Delete `(table, id)`.
    Delete(&'static str, String),
}

/// Options of [`push`].
#[derive(Debug, Clone, Default)]
pub struct PushOptions {
    /// Enqueue one reaction with the commit.
    pub reaction: bool,
    /// Finalize as a rejection instead of appending.
    pub reject: bool,
    /// What the pushing process brings to the serve gate (default: nothing
    /// declared, no expected log epoch).
    pub serve: ServeContext,
    /// Push as the engine does: `begin_push` (lock, gate, replay check and
    /// the candidate rows at once) with `deferred_violations`, a
    /// violation taken from whichever call reports it, and `commit_push`.
    pub prelude: bool,
}

impl PushOptions {
    /// The options of a process that declared the backfill checkpoint
    /// [`BACKFILL_CHECKPOINT`] at version 2: it serves pushes while the
    /// checkpoint is pending.
    pub fn declaring_backfill() -> Self {
        Self {
            serve: ServeContext {
                declarations: vec![CheckpointDeclaration::new(
                    PARTITION,
                    BACKFILL_CHECKPOINT,
                    2,
                )],
                expected_log_epoch: None,
            },
            ..Self::default()
        }
    }
}

/// The standard push sequence: optimistic pool replay check → `begin` →
/// `lock_partition_for_push` → serve gate → replay check (with
/// [`PushOptions::prelude`]: `begin_push` for the three) → for each change
/// `get_row` then `upsert_row` (clearing a tombstone) or `delete_row` →
/// `append_commit` → `enqueue_reactions` → `put_push_result` → `commit`;
/// or, when rejecting (asked to, or after a `constraint_violation` of a row
/// write, whichever call reports it), `commit_rejected_push_result` after
/// the staged writes (with the prelude, `commit_push` may find the
/// violation and reject by itself). Returns
/// the commit's `commit_seq` (`None` when rejected or replayed).
pub fn push(
    storage: &dyn ServerStorage,
    commit_id: &str,
    changes: &[Change],
    options: &PushOptions,
    now: i64,
) -> Result<Option<i64>> {
    if storage
        .get_push_result(PARTITION, CLIENT, commit_id)?
        .is_some()
    {
        return Ok(None);
    }
    let schema = storage
        .ensured_schema()
        .unwrap_or_else(|| Arc::new(schema(1)));
    let running = schema.version;
    let mut tx = storage.begin(PARTITION)?;
    let (gate, replay) = match options.prelude {
        true => {
            let prelude = tx.begin_push(&prelude_request(commit_id, changes, running))?;
            (prelude.gate, Some(prelude.push_result?.is_some()))
        }
        false => {
            tx.lock_partition_for_push()?;
            let gate = tx.read_serve_gate(running)?;
            (gate, None)
        }
    };
    if let Err(refusal) = check_serve_gate(&gate, running, &options.serve) {
        tx.rollback()?;
        return Err(refusal);
    }
    let replay = match replay {
        Some(replay) => replay,
        None => tx.get_push_result(CLIENT, commit_id)?.is_some(),
    };
    if replay {
        tx.rollback()?;
        return Ok(None);
    }
    let seq = match write(tx.as_mut(), &schema, commit_id, changes, options, now) {
        Ok(Some(seq)) => seq,
        // Asked to reject, or a row write's violation (reported by the
        // write itself, or by a later call when the push defers them).
        Ok(None) => {
            tx.commit_rejected_push_result(CLIENT, commit_id, &rejection(now))?;
            return Ok(None);
        }
        Err(e) if e.code() == ErrorCode::ConstraintViolation => {
            tx.commit_rejected_push_result(CLIENT, commit_id, &rejection(now))?;
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    if !options.prelude {
        tx.commit()?;
        return Ok(Some(seq));
    }
    match tx.commit_push(CLIENT, commit_id, &|_| rejection(now))? {
        PushCommitOutcome::Committed => Ok(Some(seq)),
        PushCommitOutcome::Rejected { .. } => Ok(None),
    }
}

/// The prelude of a scenario push: the rows its changes name, by table.
fn prelude_request(commit_id: &str, changes: &[Change], running: i32) -> PushPreludeRequest {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    for change in changes {
        let (table, id) = match change {
            Change::Upsert(table, id, ..) | Change::Delete(table, id) => (*table, id),
        };
        match rows.iter_mut().find(|(t, _)| t == table) {
            Some((_, ids)) if ids.contains(id) => {}
            Some((_, ids)) => ids.push(id.clone()),
            None => rows.push((table.to_owned(), vec![id.clone()])),
        }
    }
    PushPreludeRequest {
        running_schema_version: running,
        client_id: CLIENT.to_owned(),
        client_commit_id: commit_id.to_owned(),
        rows,
        deferred_violations: true,
    }
}

/// The writes of a scenario push up to its push result: the appended
/// sequence, or `None` when the push is to be rejected.
fn write(
    tx: &mut (dyn StorageTransaction + '_),
    schema: &CompiledSchema,
    commit_id: &str,
    changes: &[Change],
    options: &PushOptions,
    now: i64,
) -> Result<Option<i64>> {
    let mut logged = Vec::new();
    for (i, change) in changes.iter().enumerate() {
        match change {
            Change::Upsert(table, id, grp, n) => {
                let current = tx.get_row(table, id)?;
                if current.is_none() && tx.get_tombstone_seq(table, id)?.is_some() {
                    tx.clear_tombstone(table, id)?;
                }
                let version = current.map_or(1, |r| r.server_version + 1);
                let row = fixture::row(schema, table, id, grp, *n, version);
                tx.upsert_row(table, &row, u32::try_from(i).ok())?;
                logged.push(fixture::upsert_change(table, &row));
            }
            Change::Delete(table, id) => {
                if let Some(current) = tx.get_row(table, id)? {
                    tx.delete_row(table, id)?;
                    logged.push(NewChange::delete(*table, id.clone(), current.scopes));
                }
            }
        }
    }
    if options.reject {
        return Ok(None);
    }
    let seq = tx.append_commit(&NewCommit {
        client_id: CLIENT.to_owned(),
        client_commit_id: commit_id.to_owned(),
        actor_id: "actor".to_owned(),
        created_at_ms: now,
        changes: logged,
    })?;
    if options.reaction {
        tx.enqueue_reactions(&[NewReaction {
            idempotency_key: format!("react-{commit_id}"),
            kind: "notify".to_owned(),
            version: 1,
            payload: serde_json::json!({ "commit": commit_id }),
            source_client_id: CLIENT.to_owned(),
            source_client_commit_id: commit_id.to_owned(),
            source_commit_seq: seq,
            created_at_ms: now,
            max_attempts: 3,
        }])?;
    }
    tx.put_push_result(CLIENT, commit_id, &StoredPushResult::applied(seq))?;
    Ok(Some(seq))
}

/// The stored result of a rejected scenario push.
pub fn rejection(now: i64) -> StoredPushResult {
    StoredPushResult {
        status: sync_core::PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(now),
        cache_identity: None,
        results: Vec::new(),
        actor_id: None,
    }
}

/// An upsert of an `items` row.
pub fn item(id: &str, grp: &'static str, n: i64) -> Change {
    Change::Upsert(ITEMS, id.to_owned(), grp, n)
}

/// An upsert of a `notes` row.
pub fn note(id: &str, grp: &'static str, n: i64) -> Change {
    Change::Upsert(NOTES, id.to_owned(), grp, n)
}

/// The base state at schema `version` (1 or 2): the partition registered,
/// commit 1 creates `i1`–`i3` and `n1`, commit 2 moves `i1` to group `g2`
/// and deletes `i3` (a tombstone), two client records. Returns the
/// acknowledged pushes `(commit_id, commit_seq)`.
pub fn base(storage: &dyn ServerStorage, version: i32) -> Result<Vec<(String, i64)>> {
    storage.ensure_schema(&schema(1), &EnsureOptions::default())?;
    storage.touch_partition(PARTITION, T0, EPOCH)?;
    let mut acks = Vec::new();
    let commits: [(&str, Vec<Change>); 2] = [
        (
            "c1",
            vec![
                item("i1", "g1", 1),
                item("i2", "g1", 2),
                item("i3", "g2", 3),
                note("n1", "g1", 4),
            ],
        ),
        (
            "c2",
            vec![item("i1", "g2", 10), Change::Delete(ITEMS, "i3".to_owned())],
        ),
    ];
    for (i, (id, changes)) in commits.iter().enumerate() {
        let now = T0 + 1000 * (i as i64 + 1);
        if let Some(seq) = push(storage, id, changes, &PushOptions::default(), now)? {
            acks.push(((*id).to_owned(), seq));
        }
    }
    for (client, cursor) in [("cl1", 1), ("cl2", 2)] {
        storage.put_client_record(
            PARTITION,
            &ClientRecord {
                client_id: client.to_owned(),
                actor_id: "actor".to_owned(),
                wire_version: 1,
                cursor,
                updated_at_ms: T0,
                subscriptions: Vec::new(),
            },
        )?;
    }
    if version >= 2 {
        storage.ensure_schema(&schema(2), &EnsureOptions::default())?;
    }
    Ok(acks)
}

/// The scenario's standard push: moves `i1` back to `g1`, creates `i4`,
/// deletes `i2`, re-creates `i3` (clearing its tombstone), updates `n1`,
/// with one reaction.
pub fn standard_changes() -> Vec<Change> {
    vec![
        item("i1", "g1", 11),
        item("i4", "g1", 12),
        Change::Delete(ITEMS, "i2".to_owned()),
        item("i3", "g3", 13),
        note("n1", "g2", 14),
    ]
}

/// The derived value of the backfill: `extra_2 = "d<n>"`.
pub fn derived_column(storage: &dyn ServerStorage) -> Result<DerivedColumn> {
    let schema = storage
        .ensured_schema()
        .ok_or_else(|| sync_core::Error::new(sync_core::ErrorCode::SchemaNotEnsured))?;
    DerivedColumn::new(
        schema,
        ITEMS,
        "extra_2",
        Arc::new(|table, values| {
            let n = table.column_index.get("n").and_then(|&i| values.get(i));
            Ok(match n {
                Some(RowValue::Integer(n)) => RowValue::String(format!("d{n}")),
                _ => RowValue::Null,
            })
        }),
    )
}

/// Source writes made while a backfill of [`BACKFILL_CHECKPOINT`] is
/// stopped (after its full pass stored a watermark) and before another
/// owner takes over: `i1` updated, `w1` created, `i2` deleted, by a process
/// that declared the checkpoint. Returns the commit's `commit_seq`.
pub fn writes_before_takeover(storage: &dyn ServerStorage, now: i64) -> Result<Option<i64>> {
    let changes = [
        item("i1", "g2", 901),
        item("w1", "g1", 902),
        Change::Delete(ITEMS, "i2".to_owned()),
    ];
    push(
        storage,
        "takeover-writes",
        &changes,
        &PushOptions::declaring_backfill(),
        now,
    )
}

/// The projection expected after [`writes_before_takeover`] when the
/// backfill would otherwise have produced `projection`.
pub fn projection_after_writes(
    projection: &[(String, Option<String>)],
) -> Vec<(String, Option<String>)> {
    let mut expected: BTreeMap<String, Option<String>> = projection.iter().cloned().collect();
    expected.insert("i1".to_owned(), Some("d901".to_owned()));
    expected.insert("w1".to_owned(), Some("d902".to_owned()));
    expected.remove("i2");
    expected.into_iter().collect()
}

/// Waits for nothing: retries after `busy` happen at once (tests never sleep).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPause;

impl Pause for NoPause {
    fn pause(&self, _duration: Duration) {}
}

/// Runs the backfill of [`BACKFILL_CHECKPOINT`] to its end with `batch_size`
/// rows per batch, a fixed clock and no pauses.
pub fn backfill(storage: &dyn ServerStorage, batch_size: i64, now: i64) -> Result<RunOutcome> {
    backfill_observed(storage, batch_size, now, Arc::new(NoProgress))
}

/// [`backfill`] reporting its progress to `progress`.
pub fn backfill_observed(
    storage: &dyn ServerStorage,
    batch_size: i64,
    now: i64,
    progress: Arc<dyn ProgressObserver>,
) -> Result<RunOutcome> {
    let projector = derived_column(storage)?;
    CheckpointRunner::new(storage, PARTITION, BACKFILL_CHECKPOINT, 2, &projector)
        .with_config(RunnerConfig {
            batch_size,
            ..RunnerConfig::default()
        })
        .with_clock(Arc::new(ManualClock::new(now)))
        .with_pause(Arc::new(NoPause))
        .with_progress(progress)
        .run()
}

/// What a process starting on an existing database does first: ensures the
/// stored schema version (1 when none), declaring the checkpoints pending
/// at it.
pub fn ensure_stored(storage: &dyn ServerStorage) -> Result<i32> {
    let version = storage
        .read_schema_marker()?
        .map_or(1, |m| i32::try_from(m.schema_version).unwrap_or(1));
    if storage.ensured_version() == Some(version) {
        return Ok(version);
    }
    let declarations = storage
        .list_pending_checkpoints(version)?
        .into_iter()
        .map(|k| CheckpointDeclaration::new(k.partition, k.name, version))
        .collect();
    storage.ensure_schema(
        &schema(version),
        &EnsureOptions::with_declarations(declarations),
    )?;
    Ok(version)
}

/// The derived values of every `items` row of the partition, by row id:
/// what a finished backfill must have produced, whatever its history.
pub fn projection(storage: &dyn ServerStorage) -> Result<Vec<(String, Option<String>)>> {
    let schema = storage
        .ensured_schema()
        .ok_or_else(|| sync_core::Error::new(sync_core::ErrorCode::SchemaNotEnsured))?;
    let table = schema
        .table(ITEMS)
        .ok_or_else(|| sync_core::Error::unknown_table(ITEMS))?;
    let slot = table.column_index.get("extra_2").copied();
    let rows = crate::invariants::read_all_rows(storage, PARTITION, ITEMS)?;
    rows.iter()
        .map(|row| {
            let values = sync_core::codec::decode_row(table, &row.payload)?;
            let value = match slot.and_then(|i| values.get(i)) {
                Some(RowValue::String(s)) => Some(s.clone()),
                _ => None,
            };
            Ok((row.row_id.clone(), value))
        })
        .collect()
}
