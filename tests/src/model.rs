//! A reference model of the storage contract and a driver that runs the same
//! operations against a real deployment.
//!
//! The model is plain in-memory Rust written from the specification, not from
//! the dialects: partitions with counters, horizons, log epochs, commits,
//! rows, tombstones, push results, checkpoints and partition fences; the
//! schema marker and the database-wide fence; and a few "processes", each
//! with its running schema version and its declarations. [`Model::apply`]
//! says what an [`Op`] must return and how the state changes;
//! [`System::run`] performs it through [`ServerStorage`] /
//! [`sync_core::StorageTransaction`] exactly as a server would; the caller
//! compares both outcomes and the observable state ([`View`]) after every step.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;
use sync_core::{
    limits::MAX_SAFE_INTEGER, serve_gate_refusal, ActivationOutcome, CheckpointDeclaration,
    CheckpointKey, CheckpointState, CommitPruneQuery, CommitPruneResult, CommitRecord,
    EnsureOptions, Error, NewChange, NewCommit, PartitionRegistryEntry, PushOperationResult,
    PushStatus, RowScanQuery, RowValue, ServeContext, ServeGate, ServerStorage, StoredCheckpoint,
    StoredPushResult, StoredRow,
};

use crate::fixture::{self, ITEMS, NOTES, TABLES};
use crate::invariants::{read_all_commits, read_all_rows};
use crate::Deployment;

/// Partitions the operations address; one is an SQL-injection attempt.
pub const PARTITIONS: [&str; 3] = ["pA", "pB", "p'; DROP TABLE sync_commits; --"];
/// Row ids (per table); one carries quotes.
pub const ROW_IDS: [&str; 4] = ["r0", "r1", "r2", "r'3\""];
/// Scope values; one is an SQL-injection attempt.
pub const GROUPS: [&str; 3] = ["g0", "g1", "g' OR '1'='1"];
/// Client ids.
pub const CLIENTS: [&str; 2] = ["c0", "c'1"];
/// Client commit ids (few, so that replays happen).
pub const COMMIT_IDS: [&str; 5] = ["k0", "k1", "k2", "k3", "k4"];
/// Checkpoint names; one is an SQL-injection attempt.
pub const CHECKPOINTS: [&str; 3] = ["cp0", "cp1", "cp'; UPDATE sync_backfill_checkpoints --"];
/// Log epochs; one is an SQL-injection attempt.
pub const EPOCHS: [&str; 3] = ["e0", "e1", "e'); DELETE FROM sync_partitions; --"];
/// Processes (storage instances) of one deployment.
pub const PROCESSES: usize = 2;

const BASE_MS: i64 = 1_700_000_000_000;

/// One change of a pushed commit.
#[derive(Debug, Clone)]
pub struct ChangeSpec {
    /// Index into [`TABLES`].
    pub table: usize,
    /// Index into [`ROW_IDS`].
    pub row: usize,
    /// Delete instead of upsert.
    pub delete: bool,
    /// Index into [`GROUPS`].
    pub group: usize,
    /// The `n` column.
    pub n: i64,
}

/// One operation of a sequence. Indices select from the constant pools;
/// `*_choice` fields pick a value relative to the model state (current,
/// stale, ahead, negative …) so that every error path is reachable. Field
/// names follow the storage method's parameters (`p` = partition index).
#[allow(missing_docs)]
#[derive(Debug, Clone)]
pub enum Op {
    /// `touch_partition`.
    Touch { p: usize, epoch: usize },
    /// `rotate_partition_log_epoch`.
    Rotate { p: usize, epoch: usize },
    /// A push through a transaction (gate-aware or not; applied or rejected).
    Push {
        proc: usize,
        p: usize,
        client: usize,
        commit: usize,
        changes: Vec<ChangeSpec>,
        aware: bool,
        reject: bool,
    },
    /// `prune_commits_through`.
    Prune {
        p: usize,
        through_choice: usize,
        epoch_choice: usize,
    },
    /// `set_horizon_seq`.
    SetHorizon { p: usize, seq_choice: usize },
    /// `declare_checkpoint`.
    Declare {
        p: usize,
        name: usize,
        version_choice: usize,
    },
    /// `claim_checkpoint`.
    Claim {
        proc: usize,
        p: usize,
        name: usize,
        version_choice: usize,
    },
    /// `advance_checkpoint`.
    Advance {
        proc: usize,
        p: usize,
        name: usize,
        epoch_choice: usize,
        watermark_choice: usize,
        rows: i64,
    },
    /// `activate_checkpoint`.
    Activate {
        proc: usize,
        p: usize,
        name: usize,
        epoch_choice: usize,
        watermark_choice: usize,
        sources: usize,
    },
    /// `ensure_schema` bump to the next version (appends a nullable column),
    /// optionally installing one declaration.
    Migrate {
        proc: usize,
        declare: Option<(usize, usize)>,
    },
    /// `ensure_schema` at the stored version (a stale process catching up);
    /// declarations: 0 none, 1 every pending checkpoint, 2 all but the first.
    Ensure { proc: usize, mode: usize },
    /// `read_serve_gate` and the refusal rules; expected epoch: 0 none,
    /// 1 the registry's, 2 a wrong one.
    Gate {
        proc: usize,
        p: usize,
        expect: usize,
    },
}

impl Op {
    /// The partition the operation addresses (`None` for database-wide ones).
    pub fn partition(&self) -> Option<&'static str> {
        match self {
            Op::Touch { p, .. }
            | Op::Rotate { p, .. }
            | Op::Push { p, .. }
            | Op::Prune { p, .. }
            | Op::SetHorizon { p, .. }
            | Op::Declare { p, .. }
            | Op::Claim { p, .. }
            | Op::Advance { p, .. }
            | Op::Activate { p, .. }
            | Op::Gate { p, .. } => Some(PARTITIONS[*p]),
            Op::Migrate { .. } | Op::Ensure { .. } => None,
        }
    }

    /// The operation's kind, for counting.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Touch { .. } => "touch",
            Op::Rotate { .. } => "rotate",
            Op::Push { .. } => "push",
            Op::Prune { .. } => "prune",
            Op::SetHorizon { .. } => "set_horizon",
            Op::Declare { .. } => "declare",
            Op::Claim { .. } => "claim",
            Op::Advance { .. } => "advance",
            Op::Activate { .. } => "activate",
            Op::Migrate { .. } => "migrate",
            Op::Ensure { .. } => "ensure",
            Op::Gate { .. } => "gate",
        }
    }
}

fn change_spec() -> impl Strategy<Value = ChangeSpec> {
    (
        0..TABLES.len(),
        0..ROW_IDS.len(),
        prop::bool::weighted(0.25),
        0..GROUPS.len(),
        -3i64..1000,
    )
        .prop_map(|(table, row, delete, group, n)| ChangeSpec {
            table,
            row,
            delete,
            group,
            n,
        })
}

/// The `(partition, checkpoint)` a checkpoint operation addresses: mostly
/// one pair, so that life cycles run to activation within one sequence.
fn target() -> impl Strategy<Value = (usize, usize)> {
    prop::sample::select(vec![
        (0usize, 0usize),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 0),
        (1, 0),
        (0, 1),
        (1, 1),
        (2, 2),
    ])
}

fn epoch_choice() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![0usize, 0, 0, 0, 1, 2])
}

fn watermark_choice() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![0usize, 0, 0, 1, 2, 2, 3, 4, 5])
}

/// Random operations, weighted towards pushes and the checkpoint life cycle.
pub fn op() -> impl Strategy<Value = Op> {
    let p = prop::sample::select(vec![0usize, 0, 0, 1, 1, 2]);
    let proc = 0..PROCESSES;
    prop_oneof![
        3 => (p.clone(), 0..EPOCHS.len()).prop_map(|(p, epoch)| Op::Touch { p, epoch }),
        1 => (p.clone(), 0..EPOCHS.len()).prop_map(|(p, epoch)| Op::Rotate { p, epoch }),
        14 => (
            proc.clone(),
            p.clone(),
            0..CLIENTS.len(),
            0..COMMIT_IDS.len(),
            prop::collection::vec(change_spec(), 0..4),
            prop::bool::weighted(0.8),
            prop::bool::weighted(0.1),
        )
            .prop_map(|(proc, p, client, commit, changes, aware, reject)| Op::Push {
                proc, p, client, commit, changes, aware, reject
            }),
        2 => (p.clone(), 0..4usize, 0..3usize)
            .prop_map(|(p, through_choice, epoch_choice)| Op::Prune { p, through_choice, epoch_choice }),
        1 => (p.clone(), 0..3usize).prop_map(|(p, seq_choice)| Op::SetHorizon { p, seq_choice }),
        3 => (target(), prop::sample::select(vec![0usize, 0, 0, 1, 2]))
            .prop_map(|((p, name), version_choice)| Op::Declare { p, name, version_choice }),
        3 => (proc.clone(), target(), prop::sample::select(vec![0usize, 0, 0, 0, 0, 1, 2]))
            .prop_map(|(proc, (p, name), version_choice)| Op::Claim { proc, p, name, version_choice }),
        3 => (proc.clone(), target(), epoch_choice(), watermark_choice(), 0i64..50)
            .prop_map(|(proc, (p, name), epoch_choice, watermark_choice, rows)| Op::Advance {
                proc, p, name, epoch_choice, watermark_choice, rows
            }),
        3 => (proc.clone(), target(), epoch_choice(), watermark_choice(), 0..4usize)
            .prop_map(|(proc, (p, name), epoch_choice, watermark_choice, sources)| Op::Activate {
                proc, p, name, epoch_choice, watermark_choice, sources
            }),
        1 => (proc.clone(), prop::option::of(target()))
            .prop_map(|(proc, declare)| Op::Migrate { proc, declare }),
        3 => (proc.clone(), prop::sample::select(vec![0usize, 1, 1, 2])).prop_map(|(proc, mode)| Op::Ensure { proc, mode }),
        2 => (proc, p, 0..3usize).prop_map(|(proc, p, expect)| Op::Gate { proc, p, expect }),
    ]
}

/// What an operation returned, in a form both sides can produce.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `Ok(())`.
    Done,
    /// A registry entry.
    Entry(PartitionRegistryEntry),
    /// A prune result.
    Pruned(CommitPruneResult),
    /// A checkpoint row (`updated_at_ms` -1 when the model cannot know it).
    Checkpoint(StoredCheckpoint),
    /// `advance_checkpoint`.
    Advanced(bool),
    /// `activate_checkpoint`.
    Activation(ActivationOutcome),
    /// The gate token and the refusal reason, if any.
    Gate(ServeGate, Option<&'static str>),
    /// A push applied as this commit.
    Pushed(i64),
    /// A replayed push result.
    Replayed(StoredPushResult),
    /// A push finalized as a rejection.
    Rejected,
    /// A coded error: `code` or `code/reason`.
    Failed(String),
}

/// The code of an error, with its `reason` detail when it has one.
/// (`invalid_argument` reasons are not pinned by the specification: code only.)
pub fn code_of(error: &Error) -> String {
    if error.is(sync_core::ErrorCode::InvalidArgument) {
        return error.code().as_str().to_owned();
    }
    match error.get_detail("reason") {
        Some(reason) => format!("{}/{reason}", error.code().as_str()),
        None => error.code().as_str().to_owned(),
    }
}

fn failed(code: &str) -> Outcome {
    Outcome::Failed(code.to_owned())
}

/// The rejection every rejected push records.
pub fn rejection(now: i64) -> StoredPushResult {
    StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(now),
        cache_identity: Some("model".to_owned()),
        results: vec![PushOperationResult::Error {
            op_index: 0,
            code: "sync.forbidden".to_owned(),
            message: "refused by the model".to_owned(),
            retryable: false,
            details: None,
        }],
        actor_id: None,
    }
}

#[derive(Debug, Clone)]
struct ProcModel {
    running: i32,
    declarations: Vec<CheckpointDeclaration>,
}

#[derive(Debug, Clone)]
struct RowModel {
    version: i64,
    group: String,
    values: Vec<RowValue>,
}

#[derive(Debug, Clone)]
struct CheckpointModel {
    version: i32,
    state: CheckpointState,
    watermark: i64,
    epoch: i64,
    observed: i64,
    /// `None` for rows installed by `ensure_schema` (storage clock).
    updated: Option<i64>,
}

#[derive(Debug, Clone, Default)]
struct PartitionModel {
    counter: i64,
    horizon: i64,
    registry: Option<PartitionRegistryEntry>,
    commits: BTreeMap<i64, CommitRecord>,
    rows: BTreeMap<(usize, String), RowModel>,
    tombstones: BTreeMap<(usize, String), i64>,
    results: BTreeMap<(String, String), StoredPushResult>,
    checkpoints: BTreeMap<String, CheckpointModel>,
    fence: Option<i32>,
}

impl PartitionModel {
    fn effective_fence(&self, database: Option<i32>) -> Option<i32> {
        self.fence.max(database)
    }
}

/// The reference model.
#[derive(Debug, Clone)]
pub struct Model {
    marker: i32,
    database_fence: Option<i32>,
    procs: Vec<ProcModel>,
    parts: BTreeMap<String, PartitionModel>,
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

impl Model {
    /// Every process has ensured version 1 on a fresh database.
    pub fn new() -> Self {
        Self {
            marker: 1,
            database_fence: Some(1),
            procs: vec![
                ProcModel {
                    running: 1,
                    declarations: Vec::new()
                };
                PROCESSES
            ],
            parts: PARTITIONS
                .iter()
                .map(|p| ((*p).to_owned(), PartitionModel::default()))
                .collect(),
        }
    }

    /// The stored schema version.
    pub fn marker(&self) -> i32 {
        self.marker
    }

    /// The running version of a process.
    pub fn running(&self, proc: usize) -> i32 {
        self.procs[proc].running
    }

    /// The declarations a process serves with.
    pub fn declarations(&self, proc: usize) -> Vec<CheckpointDeclaration> {
        self.procs[proc].declarations.clone()
    }

    fn part(&mut self, p: usize) -> &mut PartitionModel {
        self.parts
            .get_mut(PARTITIONS[p])
            .unwrap_or_else(|| panic!("model partition {p}"))
    }

    /// The registry epoch of a partition, if registered.
    pub fn epoch(&self, p: usize) -> Option<String> {
        self.parts[PARTITIONS[p]]
            .registry
            .as_ref()
            .map(|r| r.log_epoch.clone())
    }

    /// The expected log epoch of a gate read (`Op::Gate::expect`).
    pub fn expected_epoch(&self, p: usize, expect: usize) -> Option<String> {
        match expect {
            0 => None,
            1 => Some(self.epoch(p).unwrap_or_else(|| EPOCHS[0].to_owned())),
            _ => Some("never-this-epoch".to_owned()),
        }
    }

    /// The concrete arguments of a prune: `(through_seq, log_epoch)`.
    pub fn prune_args(
        &self,
        p: usize,
        through_choice: usize,
        epoch_choice: usize,
    ) -> (i64, String) {
        let part = &self.parts[PARTITIONS[p]];
        let through = match through_choice {
            0 => part.counter,
            1 => part.counter - 2,
            2 => part.counter + 1,
            _ => 0,
        };
        let epoch = match epoch_choice {
            0 => self.epoch(p).unwrap_or_else(|| EPOCHS[0].to_owned()),
            1 => "stale-epoch".to_owned(),
            _ => String::new(),
        };
        (through, epoch)
    }

    /// The concrete horizon of `Op::SetHorizon`.
    pub fn horizon_arg(&self, p: usize, seq_choice: usize) -> i64 {
        let part = &self.parts[PARTITIONS[p]];
        match seq_choice {
            0 => part.counter,
            1 => part.horizon - 1,
            _ => -1,
        }
    }

    /// The concrete schema version of a declare/claim.
    pub fn version_arg(&self, version_choice: usize) -> i32 {
        match version_choice {
            0 => self.marker,
            1 => self.marker - 1,
            _ => self.marker + 1,
        }
    }

    /// The concrete `(owner_epoch, watermark)` of an advance/activate.
    pub fn progress_args(
        &self,
        p: usize,
        name: usize,
        epoch_choice: usize,
        watermark_choice: usize,
    ) -> (i64, i64) {
        let part = &self.parts[PARTITIONS[p]];
        let checkpoint = part.checkpoints.get(CHECKPOINTS[name]);
        let epoch = checkpoint.map_or(0, |c| c.epoch);
        let stored = checkpoint.map_or(0, |c| c.watermark);
        let epoch = match epoch_choice {
            0 => epoch,
            1 => epoch - 1,
            _ => epoch + 1,
        };
        let watermark = match watermark_choice {
            0 => part.counter,
            1 => part.counter - 1,
            2 => stored,
            3 => part.counter + 1,
            4 => -1,
            _ => stored - 1,
        };
        (epoch, watermark)
    }

    /// The source tables of `Op::Activate::sources`.
    pub fn sources(choice: usize) -> Vec<String> {
        match choice {
            0 => vec![],
            1 => vec![ITEMS.to_owned()],
            2 => vec![NOTES.to_owned()],
            _ => vec![ITEMS.to_owned(), NOTES.to_owned()],
        }
    }

    /// The declarations of `Op::Ensure::mode`.
    pub fn ensure_declarations(&self, mode: usize) -> Vec<CheckpointDeclaration> {
        let pending = self.pending(self.marker);
        let all: Vec<CheckpointDeclaration> = pending
            .iter()
            .map(|k| CheckpointDeclaration::new(&k.partition, &k.name, self.marker))
            .collect();
        match mode {
            0 => Vec::new(),
            1 => all,
            _ => all.into_iter().skip(1).collect(),
        }
    }

    fn pending(&self, version: i32) -> Vec<CheckpointKey> {
        let mut keys = Vec::new();
        for (partition, part) in &self.parts {
            for (name, c) in &part.checkpoints {
                if c.version == version && c.state != CheckpointState::Activated {
                    keys.push(CheckpointKey {
                        partition: partition.clone(),
                        name: name.clone(),
                    });
                }
            }
        }
        keys.sort();
        keys
    }

    fn gate(&self, p: usize, running: i32) -> ServeGate {
        let part = &self.parts[PARTITIONS[p]];
        let mut pending: Vec<String> = part
            .checkpoints
            .iter()
            .filter(|(_, c)| c.version == running && c.state != CheckpointState::Activated)
            .map(|(n, _)| n.clone())
            .collect();
        pending.sort();
        ServeGate {
            partition: PARTITIONS[p].to_owned(),
            stored_schema_version: i64::from(self.marker),
            log_epoch: self.epoch(p),
            pending,
        }
    }

    /// The refusal rules of the serve gate, written from the specification.
    fn refusal(gate: &ServeGate, running: i32, ctx: &ServeContext) -> Option<&'static str> {
        if running == 0 || gate.stored_schema_version < i64::from(running) {
            return Some("schema_behind");
        }
        if gate.stored_schema_version > i64::from(running) {
            return Some("schema_ahead");
        }
        if let Some(expected) = &ctx.expected_log_epoch {
            match &gate.log_epoch {
                None => return Some("log_epoch_unknown"),
                Some(e) if e != expected => return Some("log_epoch_rotated"),
                Some(_) => {}
            }
        }
        let undeclared = gate.pending.iter().any(|name| {
            !ctx.declarations.iter().any(|d| {
                d.partition == gate.partition && &d.name == name && d.schema_version == running
            })
        });
        undeclared.then_some("checkpoint_pending")
    }

    fn checkpoint_row(p: usize, name: &str, c: &CheckpointModel) -> StoredCheckpoint {
        StoredCheckpoint {
            partition: PARTITIONS[p].to_owned(),
            name: name.to_owned(),
            schema_version: c.version,
            state: c.state,
            watermark: c.watermark,
            owner_epoch: c.epoch,
            observed_rows: c.observed,
            updated_at_ms: c.updated.unwrap_or(-1),
        }
    }

    /// Applies `op` at time `now` and returns what the storage must answer.
    pub fn apply(&mut self, op: &Op, now: i64) -> Outcome {
        match op {
            Op::Touch { p, epoch } => {
                let part = self.part(*p);
                let entry = part.registry.get_or_insert_with(|| PartitionRegistryEntry {
                    partition: PARTITIONS[*p].to_owned(),
                    log_epoch: EPOCHS[*epoch].to_owned(),
                    epoch_required: false,
                    last_authenticated_at_ms: now,
                });
                entry.last_authenticated_at_ms = now;
                Outcome::Entry(entry.clone())
            }
            Op::Rotate { p, epoch } => {
                let entry = PartitionRegistryEntry {
                    partition: PARTITIONS[*p].to_owned(),
                    log_epoch: EPOCHS[*epoch].to_owned(),
                    epoch_required: true,
                    last_authenticated_at_ms: now,
                };
                self.part(*p).registry = Some(entry.clone());
                Outcome::Entry(entry)
            }
            Op::Push { .. } => self.apply_push(op, now),
            Op::Prune {
                p,
                through_choice,
                epoch_choice,
            } => {
                let (through, epoch) = self.prune_args(*p, *through_choice, *epoch_choice);
                if !(0..=MAX_SAFE_INTEGER).contains(&through) || epoch.is_empty() {
                    return failed("sync.storage.invalid_prune_cursor");
                }
                let part = self.part(*p);
                if part.registry.as_ref().map(|r| r.log_epoch.as_str()) != Some(epoch.as_str()) {
                    return failed("sync.storage.prune_epoch_mismatch");
                }
                // C-335: never past the head of the log.
                if through > part.counter {
                    return failed("sync.storage.invalid_prune_cursor/beyond_head");
                }
                let previous = part.horizon;
                part.horizon = previous.max(through);
                let horizon = part.horizon;
                let before = part.commits.len();
                part.commits.retain(|seq, _| *seq > horizon);
                part.tombstones.retain(|_, seq| *seq > horizon);
                Outcome::Pruned(CommitPruneResult {
                    previous_horizon_seq: previous,
                    horizon_seq: horizon,
                    removed_commits: (before - part.commits.len()) as i64,
                })
            }
            Op::SetHorizon { p, seq_choice } => {
                let seq = self.horizon_arg(*p, *seq_choice);
                if !(0..=MAX_SAFE_INTEGER).contains(&seq) {
                    return failed("sync.storage.invalid_argument");
                }
                let part = self.part(*p);
                part.horizon = part.horizon.max(seq);
                Outcome::Done
            }
            Op::Declare {
                p,
                name,
                version_choice,
            } => {
                let version = self.version_arg(*version_choice);
                if version < 1 {
                    return failed("sync.storage.invalid_argument");
                }
                if version != self.marker {
                    return failed(
                        "sync.storage.checkpoint_declaration_invalid/version_not_current",
                    );
                }
                let part = self.part(*p);
                let c = part
                    .checkpoints
                    .entry(CHECKPOINTS[*name].to_owned())
                    .or_insert(CheckpointModel {
                        version,
                        state: CheckpointState::Declared,
                        watermark: 0,
                        epoch: 0,
                        observed: 0,
                        updated: Some(now),
                    })
                    .clone();
                if c.version != version {
                    return failed("sync.storage.checkpoint_version_mismatch");
                }
                part.fence = part.fence.max(Some(version));
                Outcome::Checkpoint(Self::checkpoint_row(*p, CHECKPOINTS[*name], &c))
            }
            Op::Claim {
                p,
                name,
                version_choice,
                ..
            } => {
                let version = self.version_arg(*version_choice);
                if version < 1 {
                    return failed("sync.storage.invalid_argument");
                }
                let part = self.part(*p);
                let Some(c) = part.checkpoints.get_mut(CHECKPOINTS[*name]) else {
                    return failed("sync.storage.checkpoint_not_declared");
                };
                if c.state == CheckpointState::Activated {
                    return failed("sync.storage.checkpoint_not_declared");
                }
                if c.version != version {
                    return failed("sync.storage.checkpoint_version_mismatch");
                }
                c.epoch += 1;
                c.state = CheckpointState::Backfilling;
                c.updated = Some(now);
                let c = c.clone();
                Outcome::Checkpoint(Self::checkpoint_row(*p, CHECKPOINTS[*name], &c))
            }
            Op::Advance {
                p,
                name,
                epoch_choice,
                watermark_choice,
                rows,
                ..
            } => {
                let (epoch, watermark) =
                    self.progress_args(*p, *name, *epoch_choice, *watermark_choice);
                if watermark < 0 {
                    return failed("sync.storage.checkpoint_watermark_invalid/negative");
                }
                let part = self.part(*p);
                let counter = part.counter;
                let Some(c) = part.checkpoints.get_mut(CHECKPOINTS[*name]) else {
                    return Outcome::Advanced(false);
                };
                if c.epoch != epoch || c.state != CheckpointState::Backfilling {
                    return Outcome::Advanced(false);
                }
                if watermark < c.watermark {
                    return failed("sync.storage.checkpoint_watermark_invalid/regression");
                }
                if watermark > counter {
                    return failed("sync.storage.checkpoint_watermark_invalid/ahead_of_log");
                }
                c.watermark = watermark;
                c.observed = *rows;
                c.updated = Some(now);
                Outcome::Advanced(true)
            }
            Op::Activate {
                p,
                name,
                epoch_choice,
                watermark_choice,
                sources,
                ..
            } => {
                let (epoch, watermark) =
                    self.progress_args(*p, *name, *epoch_choice, *watermark_choice);
                if watermark < 0 {
                    return failed("sync.storage.checkpoint_watermark_invalid/negative");
                }
                let sources = Self::sources(*sources);
                let database_fence = self.database_fence;
                let part = self.part(*p);
                let fence = part.effective_fence(database_fence);
                let (counter, horizon) = (part.counter, part.horizon);
                let changed = part
                    .commits
                    .range(watermark + 1..)
                    .any(|(_, commit)| commit.changes.iter().any(|c| sources.contains(&c.table)));
                let Some(c) = part.checkpoints.get_mut(CHECKPOINTS[*name]) else {
                    return failed("sync.storage.checkpoint_not_declared");
                };
                if fence.is_none_or(|f| f < c.version) {
                    return failed("sync.storage.checkpoint_fence_missing");
                }
                if c.state == CheckpointState::Activated || c.epoch != epoch {
                    return Outcome::Activation(ActivationOutcome::Stale);
                }
                if watermark < c.watermark {
                    return failed("sync.storage.checkpoint_watermark_invalid/regression");
                }
                if watermark > counter {
                    return failed("sync.storage.checkpoint_watermark_invalid/ahead_of_log");
                }
                if !sources.is_empty() && changed {
                    return Outcome::Activation(ActivationOutcome::Stale);
                }
                if !sources.is_empty() && horizon > watermark {
                    return Outcome::Activation(ActivationOutcome::Unverifiable);
                }
                c.state = CheckpointState::Activated;
                c.watermark = watermark;
                c.updated = Some(now);
                Outcome::Activation(ActivationOutcome::Activated)
            }
            Op::Migrate { proc, declare } => {
                let version = self.marker + 1;
                if let Some((p, name)) = declare {
                    let existing = self.parts[PARTITIONS[*p]]
                        .checkpoints
                        .get(CHECKPOINTS[*name]);
                    if existing.is_some_and(|c| c.version != version) {
                        return failed("sync.storage.checkpoint_version_mismatch");
                    }
                }
                self.marker = version;
                self.database_fence = self.database_fence.max(Some(version));
                for part in self.parts.values_mut() {
                    for ((table, _), row) in part.rows.iter_mut() {
                        if TABLES[*table] == ITEMS {
                            row.values.push(RowValue::Null);
                        }
                    }
                }
                let mut declarations = Vec::new();
                if let Some((p, name)) = declare {
                    let part = self.part(*p);
                    part.checkpoints
                        .entry(CHECKPOINTS[*name].to_owned())
                        .or_insert(CheckpointModel {
                            version,
                            state: CheckpointState::Declared,
                            watermark: 0,
                            epoch: 0,
                            observed: 0,
                            updated: None,
                        });
                    part.fence = part.fence.max(Some(version));
                    declarations.push(CheckpointDeclaration::new(
                        PARTITIONS[*p],
                        CHECKPOINTS[*name],
                        version,
                    ));
                }
                self.procs[*proc] = ProcModel {
                    running: version,
                    declarations,
                };
                Outcome::Done
            }
            Op::Ensure { proc, mode } => {
                let declarations = self.ensure_declarations(*mode);
                if self.procs[*proc].running != self.marker {
                    let undeclared = self.pending(self.marker).into_iter().any(|k| {
                        !declarations
                            .iter()
                            .any(|d| d.partition == k.partition && d.name == k.name)
                    });
                    if undeclared {
                        return failed("sync.storage.checkpoint_incomplete");
                    }
                }
                self.procs[*proc] = ProcModel {
                    running: self.marker,
                    declarations,
                };
                Outcome::Done
            }
            Op::Gate { proc, p, expect } => {
                let running = self.procs[*proc].running;
                let gate = self.gate(*p, running);
                let ctx = ServeContext {
                    declarations: self.procs[*proc].declarations.clone(),
                    expected_log_epoch: self.expected_epoch(*p, *expect),
                };
                let refusal = Self::refusal(&gate, running, &ctx);
                Outcome::Gate(gate, refusal)
            }
        }
    }

    fn apply_push(&mut self, op: &Op, now: i64) -> Outcome {
        let Op::Push {
            proc,
            p,
            client,
            commit,
            changes,
            aware,
            reject,
        } = op
        else {
            unreachable!("apply_push takes pushes")
        };
        let running = self.procs[*proc].running;
        if *aware {
            let ctx = ServeContext {
                declarations: self.procs[*proc].declarations.clone(),
                expected_log_epoch: None,
            };
            if let Some(reason) = Self::refusal(&self.gate(*p, running), running, &ctx) {
                return Outcome::Failed(format!("sync.schema_not_ready/{reason}"));
            }
        }
        let key = (CLIENTS[*client].to_owned(), COMMIT_IDS[*commit].to_owned());
        let database_fence = self.database_fence;
        let part = self.part(*p);
        if let Some(previous) = part.results.get(&key) {
            return Outcome::Replayed(previous.clone());
        }
        if *reject {
            part.results.insert(key, rejection(now));
            return Outcome::Rejected;
        }
        if part
            .effective_fence(database_fence)
            .is_some_and(|f| running < f)
        {
            return failed("sync.storage.writer_fence_rejected");
        }
        let seq = part.counter + 1;
        let mut logged = Vec::new();
        // A row's tombstone follows its last change in the commit: the
        // tombstone a row had before this commit deleted it, restored when
        // the commit writes the row again.
        let mut before_delete: BTreeMap<(usize, String), Option<i64>> = BTreeMap::new();
        for change in changes {
            let row_id = ROW_IDS[change.row].to_owned();
            let key = (change.table, row_id.clone());
            let table = TABLES[change.table];
            if change.delete {
                let group = part
                    .rows
                    .remove(&key)
                    .map_or_else(|| GROUPS[change.group].to_owned(), |r| r.group);
                let previous = part.tombstones.insert(key.clone(), seq);
                before_delete.entry(key).or_insert(previous);
                logged.push(NewChange::delete(table, row_id, fixture::scopes(&group)));
            } else {
                match before_delete.get(&key) {
                    Some(Some(previous)) => {
                        part.tombstones.insert(key.clone(), *previous);
                    }
                    Some(None) => {
                        part.tombstones.remove(&key);
                    }
                    None => {}
                }
                let version = part.rows.get(&key).map_or(1, |r| r.version + 1);
                let group = GROUPS[change.group];
                let values = fixture::row_values(table, running, &row_id, group, change.n);
                let payload = fixture::encode(&fixture::schema(running), table, &values);
                logged.push(NewChange::upsert(
                    table,
                    row_id,
                    version,
                    fixture::scopes(group),
                    payload,
                ));
                part.rows.insert(
                    key,
                    RowModel {
                        version,
                        group: group.to_owned(),
                        values,
                    },
                );
            }
        }
        part.counter = seq;
        part.commits.insert(
            seq,
            CommitRecord {
                commit_seq: seq,
                client_id: key.0.clone(),
                client_commit_id: key.1.clone(),
                actor_id: key.0.clone(),
                created_at_ms: now,
                writer_version: Some(running),
                changes: logged,
            },
        );
        part.results.insert(key, StoredPushResult::applied(seq));
        Outcome::Pushed(seq)
    }

    /// The observable state of one partition the model predicts.
    pub fn view(&self, p: usize) -> View {
        let part = &self.parts[PARTITIONS[p]];
        let schema = fixture::schema(self.marker);
        let mut rows: BTreeMap<&'static str, Vec<StoredRow>> = BTreeMap::new();
        for ((table, row_id), row) in &part.rows {
            rows.entry(TABLES[*table]).or_default().push(StoredRow {
                row_id: row_id.clone(),
                server_version: row.version,
                scopes: fixture::scopes(&row.group),
                payload: fixture::encode(&schema, TABLES[*table], &row.values),
                column_versions: None,
            });
        }
        for list in rows.values_mut() {
            list.sort_by(|a, b| a.row_id.cmp(&b.row_id));
        }
        let mut scans = BTreeMap::new();
        for table in TABLES {
            for group in GROUPS {
                let ids: Vec<String> = rows
                    .get(table)
                    .map(|list| {
                        list.iter()
                            .filter(|r| {
                                r.scopes.get(fixture::SCOPE_VAR).map(String::as_str) == Some(group)
                            })
                            .map(|r| r.row_id.clone())
                            .collect()
                    })
                    .unwrap_or_default();
                scans.insert((table, group), ids);
            }
        }
        let mut results = BTreeMap::new();
        for client in CLIENTS {
            for commit in COMMIT_IDS {
                let key = (client.to_owned(), commit.to_owned());
                results.insert((client, commit), part.results.get(&key).cloned());
            }
        }
        let mut tombstones = BTreeMap::new();
        for (t, table) in TABLES.iter().enumerate() {
            for row_id in ROW_IDS {
                tombstones.insert(
                    (*table, row_id),
                    part.tombstones.get(&(t, row_id.to_owned())).copied(),
                );
            }
        }
        View {
            counter: part.counter,
            horizon: part.horizon,
            registry: part.registry.clone(),
            fence: part.effective_fence(self.database_fence),
            checkpoints: part
                .checkpoints
                .iter()
                .map(|(name, c)| Self::checkpoint_row(p, name, c))
                .collect(),
            commits: part.commits.values().cloned().collect(),
            rows,
            scans,
            results,
            tombstones,
        }
    }

    /// The database-wide state the model predicts.
    pub fn global_view(&self) -> GlobalView {
        GlobalView {
            marker: i64::from(self.marker),
            database_fence: self.database_fence,
            pending: self.pending(self.marker),
            registered: self
                .parts
                .iter()
                .filter(|(_, p)| p.registry.is_some())
                .map(|(name, _)| name.clone())
                .collect(),
        }
    }
}

/// The observable state of one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// `get_max_commit_seq`.
    pub counter: i64,
    /// `get_horizon_seq`.
    pub horizon: i64,
    /// The registry entry.
    pub registry: Option<PartitionRegistryEntry>,
    /// `required_writer_version`.
    pub fence: Option<i32>,
    /// `read_checkpoints`.
    pub checkpoints: Vec<StoredCheckpoint>,
    /// Every retained commit.
    pub commits: Vec<CommitRecord>,
    /// Every row per table.
    pub rows: BTreeMap<&'static str, Vec<StoredRow>>,
    /// `scan_rows` row ids per `(table, group)`.
    pub scans: BTreeMap<(&'static str, &'static str), Vec<String>>,
    /// `get_push_result` per key.
    pub results: BTreeMap<(&'static str, &'static str), Option<StoredPushResult>>,
    /// `get_tombstone_seq` per `(table, row)`.
    pub tombstones: BTreeMap<(&'static str, &'static str), Option<i64>>,
}

/// The observable database-wide state.
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalView {
    /// Stored schema version.
    pub marker: i64,
    /// Database-wide writer fence.
    pub database_fence: Option<i32>,
    /// `list_pending_checkpoints(marker)`.
    pub pending: Vec<CheckpointKey>,
    /// `list_partitions`.
    pub registered: BTreeSet<String>,
}

/// A deployment with [`PROCESSES`] storage instances, all at version 1.
pub struct System {
    _deployment: Box<dyn Deployment>,
    procs: Vec<Arc<dyn ServerStorage>>,
}

impl std::fmt::Debug for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("System")
            .field("procs", &self.procs.len())
            .finish()
    }
}

impl System {
    /// Opens the processes and ensures version 1 on each.
    pub fn new(deployment: Box<dyn Deployment>) -> Self {
        let procs: Vec<Arc<dyn ServerStorage>> =
            (0..PROCESSES).map(|_| deployment.process()).collect();
        for proc in &procs {
            proc.ensure_schema(&fixture::schema(1), &EnsureOptions::default())
                .unwrap_or_else(|e| panic!("ensure v1: {e:?}"));
        }
        Self {
            _deployment: deployment,
            procs,
        }
    }

    /// A process.
    pub fn proc(&self, i: usize) -> &dyn ServerStorage {
        self.procs[i].as_ref()
    }

    /// Performs `op` as a server would, with the model's concrete arguments.
    pub fn run(&self, model: &Model, op: &Op, now: i64) -> Outcome {
        let result = self.try_run(model, op, now);
        result.unwrap_or_else(|e| Outcome::Failed(code_of(&e)))
    }

    fn try_run(&self, model: &Model, op: &Op, now: i64) -> sync_core::Result<Outcome> {
        let s0 = self.proc(0);
        Ok(match op {
            Op::Touch { p, epoch } => {
                Outcome::Entry(s0.touch_partition(PARTITIONS[*p], now, EPOCHS[*epoch])?)
            }
            Op::Rotate { p, epoch } => Outcome::Entry(s0.rotate_partition_log_epoch(
                PARTITIONS[*p],
                EPOCHS[*epoch],
                now,
            )?),
            Op::Push {
                proc,
                p,
                client,
                commit,
                changes,
                aware,
                reject,
            } => {
                let ctx = aware.then(|| ServeContext {
                    declarations: model.declarations(*proc),
                    expected_log_epoch: None,
                });
                push(
                    self.proc(*proc),
                    ctx.as_ref(),
                    PARTITIONS[*p],
                    CLIENTS[*client],
                    COMMIT_IDS[*commit],
                    changes,
                    *reject,
                    now,
                )?
            }
            Op::Prune {
                p,
                through_choice,
                epoch_choice,
            } => {
                let (through_seq, log_epoch) = model.prune_args(*p, *through_choice, *epoch_choice);
                Outcome::Pruned(s0.prune_commits_through(
                    PARTITIONS[*p],
                    &CommitPruneQuery {
                        log_epoch,
                        through_seq,
                    },
                )?)
            }
            Op::SetHorizon { p, seq_choice } => {
                s0.set_horizon_seq(PARTITIONS[*p], model.horizon_arg(*p, *seq_choice))?;
                Outcome::Done
            }
            Op::Declare {
                p,
                name,
                version_choice,
            } => Outcome::Checkpoint(s0.declare_checkpoint(
                PARTITIONS[*p],
                CHECKPOINTS[*name],
                model.version_arg(*version_choice),
                now,
            )?),
            Op::Claim {
                proc,
                p,
                name,
                version_choice,
            } => Outcome::Checkpoint(self.proc(*proc).claim_checkpoint(
                PARTITIONS[*p],
                CHECKPOINTS[*name],
                model.version_arg(*version_choice),
                now,
            )?),
            Op::Advance {
                proc,
                p,
                name,
                epoch_choice,
                watermark_choice,
                rows,
            } => {
                let (epoch, watermark) =
                    model.progress_args(*p, *name, *epoch_choice, *watermark_choice);
                Outcome::Advanced(self.proc(*proc).advance_checkpoint(
                    PARTITIONS[*p],
                    CHECKPOINTS[*name],
                    epoch,
                    watermark,
                    *rows,
                    now,
                )?)
            }
            Op::Activate {
                proc,
                p,
                name,
                epoch_choice,
                watermark_choice,
                sources,
            } => {
                let (epoch, watermark) =
                    model.progress_args(*p, *name, *epoch_choice, *watermark_choice);
                Outcome::Activation(self.proc(*proc).activate_checkpoint(
                    PARTITIONS[*p],
                    CHECKPOINTS[*name],
                    epoch,
                    watermark,
                    &Model::sources(*sources),
                    now,
                )?)
            }
            Op::Migrate { proc, declare } => {
                let version = model.marker() + 1;
                let declarations = declare
                    .iter()
                    .map(|(p, name)| {
                        CheckpointDeclaration::new(PARTITIONS[*p], CHECKPOINTS[*name], version)
                    })
                    .collect();
                self.proc(*proc).ensure_schema(
                    &fixture::schema(version),
                    &EnsureOptions::with_declarations(declarations),
                )?;
                Outcome::Done
            }
            Op::Ensure { proc, mode } => {
                self.proc(*proc).ensure_schema(
                    &fixture::schema(model.marker()),
                    &EnsureOptions::with_declarations(model.ensure_declarations(*mode)),
                )?;
                Outcome::Done
            }
            Op::Gate { proc, p, expect } => {
                let storage = self.proc(*proc);
                let running = storage.ensured_version().unwrap_or(0);
                let gate = storage.read_serve_gate(PARTITIONS[*p], running)?;
                let ctx = ServeContext {
                    declarations: model.declarations(*proc),
                    expected_log_epoch: model.expected_epoch(*p, *expect),
                };
                let refusal = serve_gate_refusal(&gate, running, &ctx).map(|r| r.reason());
                Outcome::Gate(gate, refusal)
            }
        })
    }

    /// The observable state of one partition, read through the API.
    pub fn view(&self, p: usize) -> sync_core::Result<View> {
        let s = self.proc(0);
        let partition = PARTITIONS[p];
        let mut rows = BTreeMap::new();
        let mut scans = BTreeMap::new();
        for table in TABLES {
            let list = read_all_rows(s, partition, table)?;
            if !list.is_empty() {
                rows.insert(table, list);
            }
            for group in GROUPS {
                let found = s.scan_rows(
                    partition,
                    &RowScanQuery {
                        table: table.to_owned(),
                        scope_filter: [(fixture::SCOPE_VAR.to_owned(), vec![group.to_owned()])]
                            .into(),
                        after_row_id: None,
                        limit: 100,
                    },
                )?;
                scans.insert(
                    (table, group),
                    found.into_iter().map(|r| r.row_id).collect(),
                );
            }
        }
        let mut results = BTreeMap::new();
        for client in CLIENTS {
            for commit in COMMIT_IDS {
                results.insert(
                    (client, commit),
                    s.get_push_result(partition, client, commit)?,
                );
            }
        }
        let mut tombstones = BTreeMap::new();
        let mut tx = s.begin(partition)?;
        for table in TABLES {
            for row_id in ROW_IDS {
                tombstones.insert((table, row_id), tx.get_tombstone_seq(table, row_id)?);
            }
        }
        tx.rollback()?;
        let registry = s
            .list_partition_registry()?
            .into_iter()
            .find(|e| e.partition == partition);
        Ok(View {
            counter: s.get_max_commit_seq(partition)?,
            horizon: s.get_horizon_seq(partition)?,
            registry,
            fence: s.required_writer_version(partition)?,
            checkpoints: s.read_checkpoints(partition)?,
            commits: read_all_commits(s, partition)?,
            rows,
            scans,
            results,
            tombstones,
        })
    }

    /// The database-wide state, read through the API.
    pub fn global_view(&self) -> sync_core::Result<GlobalView> {
        let s = self.proc(0);
        let marker = s.read_schema_marker()?;
        let version = marker.as_ref().map_or(0, |m| m.schema_version);
        Ok(GlobalView {
            marker: version,
            database_fence: marker.and_then(|m| m.required_writer_version),
            pending: s.list_pending_checkpoints(i32::try_from(version).unwrap_or(0))?,
            registered: s.list_partitions()?.into_iter().collect(),
        })
    }
}

/// Blanks `updated_at_ms` of checkpoints whose time the model cannot know.
pub fn normalize_checkpoint(expected: &StoredCheckpoint, actual: &mut StoredCheckpoint) {
    if expected.updated_at_ms == -1 {
        actual.updated_at_ms = -1;
    }
}

/// Blanks the unknowable timestamps of `actual` where `expected` has them blank.
pub fn normalize_view(expected: &View, actual: &mut View) {
    for (e, a) in expected
        .checkpoints
        .iter()
        .zip(actual.checkpoints.iter_mut())
    {
        if e.name == a.name {
            normalize_checkpoint(e, a);
        }
    }
}

/// The standard push sequence of `storage-contract.md` §6.3: lock, gate
/// (when `ctx` is given), replay, writes, rejection or append + result.
#[allow(clippy::too_many_arguments)]
pub fn push(
    storage: &dyn ServerStorage,
    ctx: Option<&ServeContext>,
    partition: &str,
    client: &str,
    commit: &str,
    changes: &[ChangeSpec],
    reject: bool,
    now: i64,
) -> sync_core::Result<Outcome> {
    let running = storage.ensured_version().unwrap_or(0);
    let schema = storage
        .ensured_schema()
        .unwrap_or_else(|| Arc::new(fixture::schema(1)));
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    if let Some(ctx) = ctx {
        let gate = tx.read_serve_gate(running)?;
        if let Err(refusal) = sync_core::check_serve_gate(&gate, running, ctx) {
            tx.rollback()?;
            return Err(refusal);
        }
    }
    if let Some(previous) = tx.get_push_result(client, commit)? {
        tx.rollback()?;
        return Ok(Outcome::Replayed(previous));
    }
    let mut logged = Vec::new();
    for (i, change) in changes.iter().enumerate() {
        let table = TABLES[change.table];
        let row_id = ROW_IDS[change.row];
        let current = tx.get_row(table, row_id)?;
        if change.delete {
            let scopes =
                current.map_or_else(|| fixture::scopes(GROUPS[change.group]), |r| r.scopes);
            tx.delete_row(table, row_id)?;
            logged.push(NewChange::delete(table, row_id, scopes));
        } else {
            let version = current.map_or(1, |r| r.server_version + 1);
            let row = fixture::row(
                &schema,
                table,
                row_id,
                GROUPS[change.group],
                change.n,
                version,
            );
            tx.upsert_row(table, &row, u32::try_from(i).ok())?;
            logged.push(fixture::upsert_change(table, &row));
        }
    }
    if reject {
        tx.commit_rejected_push_result(client, commit, &rejection(now))?;
        return Ok(Outcome::Rejected);
    }
    let seq = tx.append_commit(&NewCommit {
        client_id: client.to_owned(),
        client_commit_id: commit.to_owned(),
        actor_id: client.to_owned(),
        created_at_ms: now,
        changes: logged,
    })?;
    tx.put_push_result(client, commit, &StoredPushResult::applied(seq))?;
    tx.commit()?;
    Ok(Outcome::Pushed(seq))
}

/// The time of step `i`.
pub fn step_time(i: usize) -> i64 {
    BASE_MS + (i as i64) * 1000
}
