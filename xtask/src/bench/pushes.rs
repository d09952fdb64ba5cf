//! Timed push loops shared by W1, W2, W6, W7 and the concurrency runs: ours
//! through the storage API's full push sequence, raw through the baseline.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use sync_core::{
    check_serve_gate, NewChange, NewCommit, PushCommitOutcome, PushPreludeRequest, ServeContext,
    ServerStorage, StoredPushResult, StoredRow,
};

use super::fixture::{BenchCommit, TABLE};
use super::raw::RawClient;
use super::report::quantile;

/// A commit as the storage API takes it, built before the clock starts.
#[derive(Debug, Clone)]
pub struct OursCommit {
    pub rows: Vec<StoredRow>,
    pub commit: NewCommit,
    pub result: StoredPushResult,
}

impl OursCommit {
    /// The API form of a benchmark commit.
    pub fn from_bench(bench: &BenchCommit) -> Self {
        let rows: Vec<StoredRow> = bench
            .rows
            .iter()
            .map(|r| StoredRow {
                row_id: r.id.clone(),
                server_version: r.server_version,
                scopes: r.scopes.clone(),
                payload: r.payload.clone(),
                column_versions: None,
            })
            .collect();
        let changes = rows
            .iter()
            .map(|r| {
                NewChange::upsert(
                    TABLE,
                    r.row_id.clone(),
                    r.server_version,
                    r.scopes.clone(),
                    r.payload.clone(),
                )
            })
            .collect();
        let mut result = StoredPushResult::applied(0);
        result.recorded_at_ms = Some(bench.created_at_ms);
        Self {
            rows,
            commit: NewCommit {
                client_id: bench.client_id.clone(),
                client_commit_id: bench.commit_id.clone(),
                actor_id: bench.actor_id.clone(),
                created_at_ms: bench.created_at_ms,
                changes,
            },
            result,
        }
    }
}

/// Both forms of a list of commits.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub bench: Vec<BenchCommit>,
    pub ours: Vec<OursCommit>,
}

impl Prepared {
    pub fn new(bench: Vec<BenchCommit>) -> Self {
        let ours = bench.iter().map(OursCommit::from_bench).collect();
        Self { bench, ours }
    }
}

/// The full push sequence through the storage API: `begin` →
/// `lock_partition_for_push` → (`read_serve_gate` + `check_serve_gate`) →
/// `get_push_result` → `upsert_row` per row → `append_commit` →
/// `put_push_result` → `commit`.
pub fn push_ours(
    storage: &dyn ServerStorage,
    partition: &str,
    commit: &OursCommit,
    gate: Option<&ServeContext>,
) -> Result<i64> {
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    if let Some(ctx) = gate {
        let running = tx.writer_version();
        let token = tx.read_serve_gate(running)?;
        check_serve_gate(&token, running, ctx)?;
    }
    let key = (&commit.commit.client_id, &commit.commit.client_commit_id);
    if tx.get_push_result(key.0, key.1)?.is_some() {
        bail!("commit {} was already pushed", key.1);
    }
    for (index, row) in commit.rows.iter().enumerate() {
        tx.upsert_row(TABLE, row, u32::try_from(index).ok())?;
    }
    let seq = tx.append_commit(&commit.commit)?;
    let mut result = commit.result.clone();
    result.commit_seq = Some(seq);
    tx.put_push_result(key.0, key.1, &result)?;
    tx.commit()?;
    Ok(seq)
}

/// The same push through the prelude (`begin_push`: lock, gate, push
/// result and the row at once), as the engine pushes.
pub fn push_ours_prelude(
    storage: &dyn ServerStorage,
    partition: &str,
    commit: &OursCommit,
    gate: Option<&ServeContext>,
) -> Result<i64> {
    let mut tx = storage.begin(partition)?;
    let running = tx.writer_version();
    let key = (&commit.commit.client_id, &commit.commit.client_commit_id);
    let request = PushPreludeRequest {
        running_schema_version: running,
        client_id: key.0.clone(),
        client_commit_id: key.1.clone(),
        rows: vec![(
            TABLE.to_owned(),
            commit.rows.iter().map(|r| r.row_id.clone()).collect(),
        )],
        deferred_violations: true,
    };
    let prelude = tx.begin_push(&request)?;
    if let Some(ctx) = gate {
        check_serve_gate(&prelude.gate, running, ctx)?;
    }
    if prelude.push_result?.is_some() {
        bail!("commit {} was already pushed", key.1);
    }
    for (index, row) in commit.rows.iter().enumerate() {
        tx.upsert_row(TABLE, row, u32::try_from(index).ok())?;
    }
    let seq = tx.append_commit(&commit.commit)?;
    let mut result = commit.result.clone();
    result.commit_seq = Some(seq);
    tx.put_push_result(key.0, key.1, &result)?;
    // The bench's rows never violate a constraint: a rejection is a failure.
    let rejection = |_: u32| commit.result.clone();
    match tx.commit_push(key.0, key.1, &rejection)? {
        PushCommitOutcome::Committed => Ok(seq),
        PushCommitOutcome::Rejected { op_index } => {
            bail!("commit {} rejected at operation {op_index}", key.1)
        }
    }
}

/// What a timed push loop measured.
#[derive(Debug, Clone)]
pub struct PushRun {
    pub elapsed: Duration,
    pub commits: usize,
    pub rows: usize,
    pub latencies_us: Vec<f64>,
}

impl PushRun {
    /// Commits per second.
    pub fn commits_per_s(&self) -> f64 {
        self.commits as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Rows per second.
    pub fn rows_per_s(&self) -> f64 {
        self.rows as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Mean time per commit in µs.
    pub fn us_per_commit(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e6 / (self.commits.max(1) as f64)
    }

    /// A latency quantile in µs.
    pub fn latency(&self, q: f64) -> f64 {
        let mut values = self.latencies_us.clone();
        quantile(&mut values, q)
    }
}

pub fn timed(
    commits: usize,
    rows: usize,
    mut push: impl FnMut(usize) -> Result<()>,
) -> Result<PushRun> {
    let mut latencies_us = Vec::with_capacity(commits);
    let start = Instant::now();
    for i in 0..commits {
        let t = Instant::now();
        push(i)?;
        latencies_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(PushRun {
        elapsed: start.elapsed(),
        commits,
        rows,
        latencies_us,
    })
}

fn row_count(commits: &[BenchCommit]) -> usize {
    commits.iter().map(|c| c.rows.len()).sum()
}

/// Pushes every commit through the storage API, one transaction each.
pub fn run_ours(
    storage: &dyn ServerStorage,
    partition: &str,
    commits: &Prepared,
    gate: bool,
) -> Result<PushRun> {
    let ctx = ServeContext::default();
    let gate = gate.then_some(&ctx);
    timed(commits.ours.len(), row_count(&commits.bench), |i| {
        push_ours(storage, partition, &commits.ours[i], gate).map(|_| ())
    })
}

/// [`run_ours`] through [`push_ours_prelude`].
pub fn run_ours_prelude(
    storage: &dyn ServerStorage,
    partition: &str,
    commits: &Prepared,
    gate: bool,
) -> Result<PushRun> {
    let ctx = ServeContext::default();
    let gate = gate.then_some(&ctx);
    timed(commits.ours.len(), row_count(&commits.bench), |i| {
        push_ours_prelude(storage, partition, &commits.ours[i], gate).map(|_| ())
    })
}

/// Pushes every commit through the raw baseline, one transaction each.
pub fn run_raw(
    raw: &mut dyn RawClient,
    partition: &str,
    commits: &Prepared,
    gate: bool,
) -> Result<PushRun> {
    timed(commits.bench.len(), row_count(&commits.bench), |i| {
        raw.push(partition, &commits.bench[i], gate).map(|_| ())
    })
}
