//! The storage invariants, checked through the public API only, so that any
//! test — model sequences, concurrent stress runs, fault injection, process
//! kills — can ask "is this database still consistent?" after doing its worst.
//!
//! An [`InvariantChecker`] is created once per database and called after every
//! disturbance; it remembers what it saw last to check the monotone values.
//! Each [`Violation`] names the partition, the invariant and what was seen.
//!
//! | Invariant | What is read |
//! |---|---|
//! | `dense_log` | retained `commit_seq`s form one gap-free range ending at the counter, and every `seq` in `(horizon, counter]` is retained |
//! | `rows_match_log` | for every `(table, row_id)` whose newest change is retained: an upsert is the current row (version, scopes, payload — decoded under the writer's layout and padded with NULLs when a migration appended columns since), a delete left no row |
//! | `rows_decode` | every current row's payload decodes under the stored schema version's layout (a migration rewrote every row it re-encodes; checked when the checker knows that version's schema) |
//! | `scope_index` | for every table and every scope value carried by a row, `scan_rows` returns exactly the rows carrying it, with their payloads; filters naming two or more variables (a row's whole scopes, values of two variables from different rows, a carried value with a variable no row carries) return exactly the rows matching every variable |
//! | `change_scope_index` | for every scope value carried by a retained change (an even sample of at most 16 per table), `read_commit_window` returns exactly the commits and changes carrying it |
//! | `monotone` | counters, horizons, partition and database fences, checkpoint watermarks and owner epochs never decrease; an activated checkpoint stays activated |
//! | `checkpoints` | watermark ≤ counter; `declared` ⇒ epoch 0, `backfilling` ⇒ epoch ≥ 1; an activated checkpoint has its fence and no retained source change above its watermark written by an older (or unaware) writer |
//! | `acknowledged` | every push the caller saw acknowledged has its result stored, and its commit retained with the same client ids unless the horizon passed it |

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use sync_core::{
    codec, matches_filter, CheckpointState, CommitRecord, CommitWindowQuery, CompiledSchema,
    CompiledTable, PushStatus, RowScanQuery, RowValue, ScopeFilter, ServerStorage,
    StoredCheckpoint, StoredRow,
};

/// Page size of every paged read the checker makes.
const PAGE: i64 = 1000;

/// Most scope values per table whose commit window is compared with the log.
const WINDOW_SAMPLE: usize = 16;

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The partition (empty for database-wide invariants).
    pub partition: String,
    /// The invariant's name (see the module table).
    pub invariant: &'static str,
    /// What was observed.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] partition {:?}: {}",
            self.invariant, self.partition, self.detail
        )
    }
}

/// What one [`InvariantChecker::check`] call looked at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckSummary {
    /// Partitions checked.
    pub partitions: usize,
    /// Retained commits read.
    pub commits: usize,
    /// Current rows read.
    pub rows: usize,
    /// Scope values whose index entries were compared with the rows and the log.
    pub scope_values: usize,
    /// Checkpoints checked.
    pub checkpoints: usize,
    /// Acknowledged pushes checked.
    pub acknowledged: usize,
}

impl std::ops::AddAssign for CheckSummary {
    fn add_assign(&mut self, other: Self) {
        self.partitions += other.partitions;
        self.commits += other.commits;
        self.rows += other.rows;
        self.scope_values += other.scope_values;
        self.checkpoints += other.checkpoints;
        self.acknowledged += other.acknowledged;
    }
}

/// A push the caller saw succeed: its commit must never be lost.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Acknowledged {
    client_id: String,
    client_commit_id: String,
    commit_seq: i64,
}

/// Monotone values of one partition as last seen.
#[derive(Debug, Clone, Default)]
struct Seen {
    counter: i64,
    horizon: i64,
    fence: Option<i32>,
    checkpoints: BTreeMap<String, (CheckpointState, i64, i64)>,
}

/// Checks every invariant of a database through one storage instance.
#[derive(Debug, Default)]
pub struct InvariantChecker {
    layouts: BTreeMap<i32, CompiledSchema>,
    sources: BTreeMap<String, Vec<String>>,
    acknowledged: BTreeMap<String, Vec<Acknowledged>>,
    seen: BTreeMap<String, Seen>,
    seen_database_fence: Option<i32>,
    seen_marker: i64,
    /// The stored schema version read by the running check.
    stored_version: Option<i64>,
}

impl InvariantChecker {
    /// A checker that knows the schemas of the given versions (used to decode
    /// change payloads under the layout of the version that wrote them).
    /// Without the writer's schema, payloads are compared byte for byte.
    pub fn new(layouts: BTreeMap<i32, CompiledSchema>) -> Self {
        Self {
            layouts,
            ..Self::default()
        }
    }

    /// Declares the source tables of a checkpoint name (any partition). A
    /// checkpoint without declared sources is checked against every table of
    /// the ensured schema.
    pub fn with_sources(mut self, name: &str, sources: &[&str]) -> Self {
        self.sources.insert(
            name.to_owned(),
            sources.iter().map(|s| (*s).to_owned()).collect(),
        );
        self
    }

    /// Records a push the caller saw acknowledged with `commit_seq`.
    pub fn acknowledge(
        &mut self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
        commit_seq: i64,
    ) {
        self.acknowledged
            .entry(partition.to_owned())
            .or_default()
            .push(Acknowledged {
                client_id: client_id.to_owned(),
                client_commit_id: client_commit_id.to_owned(),
                commit_seq,
            });
    }

    /// Checks every registered partition plus `extra` (partitions that may
    /// hold commits without being registered). `storage` must have ensured a
    /// schema. Returns what was checked, or every violation found.
    pub fn check(
        &mut self,
        storage: &dyn ServerStorage,
        extra: &[&str],
    ) -> Result<CheckSummary, Vec<Violation>> {
        let mut violations = Vec::new();
        let mut partitions: BTreeSet<String> = match storage.list_partitions() {
            Ok(list) => list.into_iter().collect(),
            Err(e) => {
                violations.push(violation("", "readable", format!("list_partitions: {e}")));
                BTreeSet::new()
            }
        };
        partitions.extend(extra.iter().map(|p| (*p).to_owned()));
        partitions.extend(self.acknowledged.keys().cloned());
        let mut summary = CheckSummary::default();
        self.check_database(storage, &mut violations);
        for partition in &partitions {
            let mut report = Report {
                partition,
                violations: &mut violations,
            };
            match self.check_partition(storage, partition, &mut report) {
                Ok(s) => summary += s,
                Err(e) => report.push("readable", format!("read failed: {e} ({e:?})")),
            }
        }
        if violations.is_empty() {
            Ok(summary)
        } else {
            Err(violations)
        }
    }

    /// [`Self::check`], panicking with every violation.
    pub fn assert_consistent(
        &mut self,
        storage: &dyn ServerStorage,
        extra: &[&str],
        context: &str,
    ) -> CheckSummary {
        match self.check(storage, extra) {
            Ok(summary) => summary,
            Err(violations) => {
                let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
                panic!(
                    "{context}: {} invariant violation(s):\n{}",
                    lines.len(),
                    lines.join("\n")
                )
            }
        }
    }

    fn check_database(&mut self, storage: &dyn ServerStorage, violations: &mut Vec<Violation>) {
        self.stored_version = None;
        match storage.read_schema_marker() {
            Ok(Some(marker)) => {
                self.stored_version = Some(marker.schema_version);
                if marker.schema_version < self.seen_marker {
                    violations.push(violation(
                        "",
                        "monotone",
                        format!(
                            "schema marker went from {} to {}",
                            self.seen_marker, marker.schema_version
                        ),
                    ));
                }
                if marker.required_writer_version < self.seen_database_fence {
                    violations.push(violation(
                        "",
                        "monotone",
                        format!(
                            "database fence went from {:?} to {:?}",
                            self.seen_database_fence, marker.required_writer_version
                        ),
                    ));
                }
                self.seen_marker = self.seen_marker.max(marker.schema_version);
                self.seen_database_fence =
                    self.seen_database_fence.max(marker.required_writer_version);
            }
            Ok(None) => {
                if self.seen_marker > 0 {
                    violations.push(violation("", "monotone", "schema marker vanished".into()));
                }
            }
            Err(e) => violations.push(violation("", "readable", format!("marker: {e}"))),
        }
    }

    fn check_partition(
        &mut self,
        storage: &dyn ServerStorage,
        partition: &str,
        report: &mut Report<'_>,
    ) -> sync_core::Result<CheckSummary> {
        let schema = storage.ensured_schema().ok_or_else(|| {
            sync_core::Error::new(sync_core::ErrorCode::SchemaNotEnsured)
                .detail("checker", "needs an ensured schema")
        })?;
        let counter = storage.get_max_commit_seq(partition)?;
        let horizon = storage.get_horizon_seq(partition)?;
        let commits = read_all_commits(storage, partition)?;
        check_dense(&commits, counter, horizon, report);

        let mut summary = CheckSummary {
            partitions: 1,
            commits: commits.len(),
            ..CheckSummary::default()
        };
        for table in &schema.tables {
            let rows = read_all_rows(storage, partition, &table.name)?;
            summary.rows += rows.len();
            self.check_rows_decode(&table.name, &rows, report);
            self.check_rows_match_log(table, &rows, &commits, report);
            summary.scope_values += check_scope_index(storage, partition, table, &rows, report)?;
            summary.scope_values +=
                check_change_scope_index(storage, partition, table, &commits, counter, report)?;
        }

        let fence = storage.required_writer_version(partition)?;
        let checkpoints = storage.read_checkpoints(partition)?;
        summary.checkpoints = checkpoints.len();
        for checkpoint in &checkpoints {
            self.check_checkpoint(&schema, checkpoint, counter, fence, &commits, report);
        }
        self.check_monotone(partition, counter, horizon, fence, &checkpoints, report);
        summary.acknowledged =
            self.check_acknowledged(storage, partition, horizon, &commits, report)?;
        Ok(summary)
    }

    /// Every row of `table` decodes under the stored version's layout: a
    /// migration that re-encodes payloads rewrote every row (a row it
    /// skipped still matches its logged bytes, so `rows_match_log` alone
    /// cannot tell).
    fn check_rows_decode(&self, table: &str, rows: &[StoredRow], report: &mut Report<'_>) {
        let Some(layout) = self
            .stored_version
            .and_then(|v| i32::try_from(v).ok())
            .and_then(|v| self.layouts.get(&v))
            .and_then(|schema| schema.table(table))
        else {
            return;
        };
        for row in rows {
            if let Err(e) = codec::validate_row(layout, &row.payload) {
                report.push(
                    "rows_decode",
                    format!(
                        "{table}/{}: the payload does not decode under the stored version {:?}: {e}",
                        row.row_id, self.stored_version
                    ),
                );
            }
        }
    }

    /// The newest retained change of each row against the current row.
    fn check_rows_match_log(
        &self,
        table: &CompiledTable,
        rows: &[StoredRow],
        commits: &[CommitRecord],
        report: &mut Report<'_>,
    ) {
        let mut newest: BTreeMap<&str, (&CommitRecord, &sync_core::StoredChange)> = BTreeMap::new();
        for commit in commits {
            for change in commit.changes.iter().filter(|c| c.table == table.name) {
                newest.insert(&change.row_id, (commit, change));
            }
        }
        let current: BTreeMap<&str, &StoredRow> =
            rows.iter().map(|r| (r.row_id.as_str(), r)).collect();
        for (row_id, (commit, change)) in newest {
            let row = current.get(row_id);
            match (change.op, row) {
                (sync_core::ChangeOp::Delete, Some(_)) => report.push(
                    "rows_match_log",
                    format!(
                        "{}/{row_id}: deleted by commit {} but still present",
                        table.name, commit.commit_seq
                    ),
                ),
                (sync_core::ChangeOp::Delete, None) => {}
                (sync_core::ChangeOp::Upsert, None) => report.push(
                    "rows_match_log",
                    format!(
                        "{}/{row_id}: upserted by commit {} but absent",
                        table.name, commit.commit_seq
                    ),
                ),
                (sync_core::ChangeOp::Upsert, Some(row)) => {
                    if Some(row.server_version) != change.row_version || row.scopes != change.scopes
                    {
                        report.push(
                            "rows_match_log",
                            format!(
                                "{}/{row_id}: row (version {}, scopes {:?}) differs from commit {} \
                                 (version {:?}, scopes {:?})",
                                table.name,
                                row.server_version,
                                row.scopes,
                                commit.commit_seq,
                                change.row_version,
                                change.scopes
                            ),
                        );
                    }
                    let payload = change.payload.as_deref().unwrap_or_default();
                    if !self.same_payload(table, commit.writer_version, payload, &row.payload) {
                        report.push(
                            "rows_match_log",
                            format!(
                                "{}/{row_id}: payload differs from commit {} (writer v{:?})",
                                table.name, commit.commit_seq, commit.writer_version
                            ),
                        );
                    }
                }
            }
        }
    }

    /// Byte equality, or — when a migration appended columns since the
    /// change was written — equality of the decoded values padded with NULLs.
    fn same_payload(
        &self,
        current: &CompiledTable,
        writer_version: Option<i32>,
        logged: &[u8],
        stored: &[u8],
    ) -> bool {
        if logged == stored {
            return true;
        }
        let Some(old) = writer_version
            .and_then(|v| self.layouts.get(&v))
            .and_then(|s| s.table(&current.name))
        else {
            return false;
        };
        match (
            codec::decode_row(old, logged),
            codec::decode_row(current, stored),
        ) {
            (Ok(mut before), Ok(after)) if before.len() <= after.len() => {
                before.resize(after.len(), RowValue::Null);
                before == after
            }
            _ => false,
        }
    }

    fn check_checkpoint(
        &self,
        schema: &CompiledSchema,
        checkpoint: &StoredCheckpoint,
        counter: i64,
        fence: Option<i32>,
        commits: &[CommitRecord],
        report: &mut Report<'_>,
    ) {
        let name = &checkpoint.name;
        if checkpoint.watermark < 0 || checkpoint.watermark > counter {
            report.push(
                "checkpoints",
                format!(
                    "{name}: watermark {} outside 0..={counter}",
                    checkpoint.watermark
                ),
            );
        }
        let epoch_ok = match checkpoint.state {
            CheckpointState::Declared => checkpoint.owner_epoch == 0,
            CheckpointState::Backfilling => checkpoint.owner_epoch >= 1,
            CheckpointState::Activated => checkpoint.owner_epoch >= 0,
        };
        if !epoch_ok {
            report.push(
                "checkpoints",
                format!(
                    "{name}: state {:?} with owner epoch {}",
                    checkpoint.state, checkpoint.owner_epoch
                ),
            );
        }
        if checkpoint.state != CheckpointState::Activated {
            return;
        }
        if fence.is_none_or(|f| f < checkpoint.schema_version) {
            report.push(
                "checkpoints",
                format!(
                    "{name}: activated at v{} with effective fence {fence:?}",
                    checkpoint.schema_version
                ),
            );
        }
        let sources: Vec<String> = self
            .sources
            .get(name)
            .cloned()
            .unwrap_or_else(|| schema.tables.iter().map(|t| t.name.clone()).collect());
        for commit in commits
            .iter()
            .filter(|c| c.commit_seq > checkpoint.watermark)
        {
            let older = commit
                .writer_version
                .is_none_or(|w| w < checkpoint.schema_version);
            if older && commit.changes.iter().any(|c| sources.contains(&c.table)) {
                report.push(
                    "checkpoints",
                    format!(
                        "{name}: activated at watermark {} (v{}) but commit {} by writer v{:?} \
                         changes its sources",
                        checkpoint.watermark,
                        checkpoint.schema_version,
                        commit.commit_seq,
                        commit.writer_version
                    ),
                );
            }
        }
    }

    fn check_monotone(
        &mut self,
        partition: &str,
        counter: i64,
        horizon: i64,
        fence: Option<i32>,
        checkpoints: &[StoredCheckpoint],
        report: &mut Report<'_>,
    ) {
        let seen = self.seen.entry(partition.to_owned()).or_default();
        let mut lowered = |what: &str, before: String, after: String| {
            report.push("monotone", format!("{what} went from {before} to {after}"));
        };
        if counter < seen.counter {
            lowered("counter", seen.counter.to_string(), counter.to_string());
        }
        if horizon < seen.horizon {
            lowered("horizon", seen.horizon.to_string(), horizon.to_string());
        }
        if fence < seen.fence {
            lowered(
                "writer fence",
                format!("{:?}", seen.fence),
                format!("{fence:?}"),
            );
        }
        let now: BTreeMap<&str, &StoredCheckpoint> =
            checkpoints.iter().map(|c| (c.name.as_str(), c)).collect();
        for (name, (state, watermark, epoch)) in &seen.checkpoints {
            let Some(c) = now.get(name.as_str()) else {
                lowered(
                    &format!("checkpoint {name}"),
                    "present".into(),
                    "absent".into(),
                );
                continue;
            };
            if c.watermark < *watermark {
                lowered(
                    &format!("checkpoint {name} watermark"),
                    watermark.to_string(),
                    c.watermark.to_string(),
                );
            }
            if c.owner_epoch < *epoch {
                lowered(
                    &format!("checkpoint {name} owner epoch"),
                    epoch.to_string(),
                    c.owner_epoch.to_string(),
                );
            }
            if *state == CheckpointState::Activated && c.state != CheckpointState::Activated {
                lowered(
                    &format!("checkpoint {name} state"),
                    "activated".into(),
                    format!("{:?}", c.state),
                );
            }
        }
        seen.counter = seen.counter.max(counter);
        seen.horizon = seen.horizon.max(horizon);
        seen.fence = seen.fence.max(fence);
        for c in checkpoints {
            seen.checkpoints
                .insert(c.name.clone(), (c.state, c.watermark, c.owner_epoch));
        }
    }

    fn check_acknowledged(
        &self,
        storage: &dyn ServerStorage,
        partition: &str,
        horizon: i64,
        commits: &[CommitRecord],
        report: &mut Report<'_>,
    ) -> sync_core::Result<usize> {
        let Some(acks) = self.acknowledged.get(partition) else {
            return Ok(0);
        };
        let by_seq: BTreeMap<i64, &CommitRecord> =
            commits.iter().map(|c| (c.commit_seq, c)).collect();
        for ack in acks {
            let stored =
                storage.get_push_result(partition, &ack.client_id, &ack.client_commit_id)?;
            let recorded = stored.as_ref().is_some_and(|r| {
                r.status == PushStatus::Applied && r.commit_seq == Some(ack.commit_seq)
            });
            if !recorded {
                report.push(
                    "acknowledged",
                    format!(
                        "push {}/{} acknowledged as commit {} but its stored result is {stored:?}",
                        ack.client_id, ack.client_commit_id, ack.commit_seq
                    ),
                );
            }
            if ack.commit_seq <= horizon {
                continue;
            }
            let kept = by_seq.get(&ack.commit_seq).is_some_and(|c| {
                c.client_id == ack.client_id && c.client_commit_id == ack.client_commit_id
            });
            if !kept {
                report.push(
                    "acknowledged",
                    format!(
                        "commit {} of push {}/{} is lost (horizon {horizon})",
                        ack.commit_seq, ack.client_id, ack.client_commit_id
                    ),
                );
            }
        }
        Ok(acks.len())
    }
}

struct Report<'v> {
    partition: &'v str,
    violations: &'v mut Vec<Violation>,
}

impl Report<'_> {
    fn push(&mut self, invariant: &'static str, detail: String) {
        self.violations
            .push(violation(self.partition, invariant, detail));
    }
}

fn violation(partition: &str, invariant: &'static str, detail: String) -> Violation {
    Violation {
        partition: partition.to_owned(),
        invariant,
        detail,
    }
}

/// Every retained commit of the partition, oldest first.
pub fn read_all_commits(
    storage: &dyn ServerStorage,
    partition: &str,
) -> sync_core::Result<Vec<CommitRecord>> {
    let mut commits = Vec::new();
    let mut after = 0;
    loop {
        let page = storage.read_commits(partition, after, PAGE)?;
        let Some(last) = page.last() else { break };
        after = last.commit_seq;
        let full = page.len() as i64 == PAGE;
        commits.extend(page);
        if !full {
            break;
        }
    }
    Ok(commits)
}

/// Every current row of one table of the partition, in row-id byte order.
pub fn read_all_rows(
    storage: &dyn ServerStorage,
    partition: &str,
    table: &str,
) -> sync_core::Result<Vec<StoredRow>> {
    let mut rows = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = storage.scan_partition_rows(partition, table, after.as_deref(), PAGE)?;
        let Some(last) = page.last() else { break };
        after = Some(last.row_id.clone());
        let full = page.len() as i64 == PAGE;
        rows.extend(page);
        if !full {
            break;
        }
    }
    Ok(rows)
}

fn check_dense(commits: &[CommitRecord], counter: i64, horizon: i64, report: &mut Report<'_>) {
    for pair in commits.windows(2) {
        if pair[1].commit_seq != pair[0].commit_seq + 1 {
            report.push(
                "dense_log",
                format!(
                    "gap between retained commits {} and {}",
                    pair[0].commit_seq, pair[1].commit_seq
                ),
            );
        }
    }
    if let Some(last) = commits.last() {
        if last.commit_seq != counter {
            report.push(
                "dense_log",
                format!(
                    "last retained commit {} but counter {counter}",
                    last.commit_seq
                ),
            );
        }
    }
    let first_required = horizon.max(0) + 1;
    if first_required <= counter {
        let first = commits.first().map(|c| c.commit_seq);
        if first.is_none_or(|f| f > first_required) {
            report.push(
                "dense_log",
                format!(
                    "commits {first_required}..={counter} above the horizon {horizon} must be \
                     retained; first retained {first:?}"
                ),
            );
        }
    }
}

/// Scans by every scope value a row carries; each scan must return exactly
/// the rows carrying that value. Then scans with multi-variable filters
/// ([`multi_variable_filters`]); each must return exactly the rows matching
/// every variable. Returns the number of filters checked.
fn check_scope_index(
    storage: &dyn ServerStorage,
    partition: &str,
    table: &CompiledTable,
    rows: &[StoredRow],
    report: &mut Report<'_>,
) -> sync_core::Result<usize> {
    let mut carriers: BTreeMap<(&str, &str), Vec<&StoredRow>> = BTreeMap::new();
    for row in rows {
        for (variable, value) in &row.scopes {
            carriers
                .entry((variable.as_str(), value.as_str()))
                .or_default()
                .push(row);
        }
    }
    for ((variable, value), expected) in &carriers {
        let filter: ScopeFilter = [((*variable).to_owned(), vec![(*value).to_owned()])].into();
        let found = scan_all(storage, partition, &table.name, &filter)?;
        let expected: Vec<StoredRow> = expected.iter().map(|r| (*r).clone()).collect();
        compare_scan(table, &filter, &found, &expected, report);
    }
    let filters = multi_variable_filters(carriers.keys().copied(), rows);
    for filter in &filters {
        let found = scan_all(storage, partition, &table.name, filter)?;
        let expected: Vec<StoredRow> = rows
            .iter()
            .filter(|r| matches_filter(&r.scopes, filter))
            .cloned()
            .collect();
        compare_scan(table, filter, &found, &expected, report);
    }
    Ok(carriers.len() + filters.len())
}

/// Most rows, variable pairs and values each family of
/// [`multi_variable_filters`] draws from (an even sample).
const MULTI_SAMPLE: usize = 8;

/// Filters naming two or more variables, so that a scan must re-check the
/// candidates it found through one variable against the others:
/// - the whole scopes of rows carrying two or more variables;
/// - for each pair of variables the table's rows carry, a value of the first
///   with a value of the second taken from different rows;
/// - a carried value with a variable no row carries, named so that the
///   carried variable stays the candidate (first in byte order): no row
///   can match.
fn multi_variable_filters<'a>(
    carried: impl Iterator<Item = (&'a str, &'a str)>,
    rows: &[StoredRow],
) -> Vec<ScopeFilter> {
    let mut values: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (variable, value) in carried {
        values.entry(variable).or_default().push(value);
    }
    let mut filters: Vec<ScopeFilter> = Vec::new();
    let multi: Vec<&StoredRow> = rows.iter().filter(|r| r.scopes.len() >= 2).collect();
    for row in sample(&multi) {
        filters.push(
            row.scopes
                .iter()
                .map(|(k, v)| (k.clone(), vec![v.clone()]))
                .collect(),
        );
    }
    let variables: Vec<&str> = values.keys().copied().collect();
    for (i, first) in variables.iter().enumerate() {
        for second in &variables[i + 1..] {
            let firsts = sample(&values[first]);
            let seconds = sample(&values[second]);
            for (a, b) in firsts.iter().zip(seconds.iter().rev()) {
                filters.push(
                    [
                        ((*first).to_owned(), vec![(*a).to_owned()]),
                        ((*second).to_owned(), vec![(*b).to_owned()]),
                    ]
                    .into(),
                );
            }
        }
    }
    for (variable, carried) in &values {
        for value in sample(carried) {
            filters.push(
                [
                    ((*variable).to_owned(), vec![(*value).to_owned()]),
                    (format!("{variable}_absent"), vec![(*value).to_owned()]),
                ]
                .into(),
            );
        }
    }
    filters
}

/// An even sample of at most [`MULTI_SAMPLE`] items.
fn sample<T: Copy>(items: &[T]) -> Vec<T> {
    let stride = items.len().div_ceil(MULTI_SAMPLE).max(1);
    items.iter().step_by(stride).copied().collect()
}

/// Every row `scan_rows` returns for `filter`, paged.
fn scan_all(
    storage: &dyn ServerStorage,
    partition: &str,
    table: &str,
    filter: &ScopeFilter,
) -> sync_core::Result<Vec<StoredRow>> {
    let mut found = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = storage.scan_rows(
            partition,
            &RowScanQuery {
                table: table.to_owned(),
                scope_filter: filter.clone(),
                after_row_id: after.clone(),
                limit: PAGE,
            },
        )?;
        let Some(last) = page.last() else { break };
        after = Some(last.row_id.clone());
        let full = page.len() as i64 == PAGE;
        found.extend(page);
        if !full {
            break;
        }
    }
    Ok(found)
}

/// Reports a `scope_index` violation when a scan differs from the rows.
fn compare_scan(
    table: &CompiledTable,
    filter: &ScopeFilter,
    found: &[StoredRow],
    expected: &[StoredRow],
    report: &mut Report<'_>,
) {
    if found != expected {
        let ids = |rows: &[StoredRow]| rows.iter().map(|r| r.row_id.clone()).collect::<Vec<_>>();
        report.push(
            "scope_index",
            format!(
                "{}: scan {filter:?} returned {:?}, rows matching it are {:?}",
                table.name,
                ids(found),
                ids(expected)
            ),
        );
    }
}

/// Reads the commit window of every scope value carried by a retained change
/// of `table`; it must list exactly the commits and changes carrying it.
fn check_change_scope_index(
    storage: &dyn ServerStorage,
    partition: &str,
    table: &CompiledTable,
    commits: &[CommitRecord],
    counter: i64,
    report: &mut Report<'_>,
) -> sync_core::Result<usize> {
    let mut expected: BTreeMap<(&str, &str), Vec<(i64, usize)>> = BTreeMap::new();
    for commit in commits {
        for change in commit.changes.iter().filter(|c| c.table == table.name) {
            for (variable, value) in &change.scopes {
                let entry = expected
                    .entry((variable.as_str(), value.as_str()))
                    .or_default();
                match entry.last_mut() {
                    Some((seq, n)) if *seq == commit.commit_seq => *n += 1,
                    _ => entry.push((commit.commit_seq, 1)),
                }
            }
        }
    }
    // Each window returns whole commits, so checking every value of a
    // commit with thousands of distinct values is quadratic: check an even
    // sample of at most `WINDOW_SAMPLE` values per table.
    let stride = expected.len().div_ceil(WINDOW_SAMPLE).max(1);
    for ((variable, value), wanted) in expected.iter().step_by(stride) {
        let window = storage.read_commit_window(
            partition,
            &CommitWindowQuery {
                table: table.name.clone(),
                scope_filter: [((*variable).to_owned(), vec![(*value).to_owned()])].into(),
                after_seq: 0,
                through_seq: counter,
                limit_changes: 1_000_000,
            },
        )?;
        let got: Vec<(i64, usize)> = window
            .iter()
            .map(|c| (c.commit_seq, c.changes.len()))
            .collect();
        if &got != wanted {
            report.push(
                "change_scope_index",
                format!(
                    "{}: window {variable}={value:?} returned (seq, changes) {got:?}, log has {wanted:?}",
                    table.name
                ),
            );
        }
    }
    Ok(expected.len().min(WINDOW_SAMPLE))
}
