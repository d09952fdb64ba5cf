//! Scans and windows of several values on a live server, against a model
//! of what was pushed. The log mixes a region where the filter is dense,
//! one where it matches nothing, one where it is sparse, ten-change
//! commits, one commit of more changes than a page, moves and deletes, so
//! that every shape runs: the walk that fills its page, the walk that
//! stops on its budget and hands over to the merge, the merge alone, the
//! whole-commit read, the sorted candidates of a long value list and the
//! single-value range. The statement log shows which shapes ran.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use sync_conformance::fixtures::{self, Op};
use sync_core::fault::FaultPlan;
use sync_core::{
    ChangeOp, CommitWindowQuery, CompiledSchema, RowScanQuery, ScopeFilter, ServerStorage,
    StoredRow,
};
use sync_mariadb::scratch::ScratchDatabase;
use sync_mariadb::MariadbStorage;

const PARTITION: &str = "p1";

/// One change as the model keeps it: row id, op, project.
type Change = (String, ChangeOp, String);

/// What was pushed: the commits in order and the rows now stored.
#[derive(Default)]
struct Model {
    commits: Vec<(i64, Vec<Change>)>,
    rows: BTreeMap<String, StoredRow>,
    version: i64,
}

struct Fixture {
    _db: ScratchDatabase,
    storage: Arc<MariadbStorage>,
    schema: CompiledSchema,
    model: Model,
}

fn project(n: u64) -> String {
    format!("proj-{n:02}")
}

fn filter(values: &[String]) -> ScopeFilter {
    [("project_id".to_owned(), values.to_vec())].into()
}

impl Fixture {
    fn new() -> Self {
        let (db, storage) = common::fix1_storage();
        Self {
            _db: db,
            storage: Arc::new(storage),
            schema: fixtures::fix1().expect("fix1"),
            model: Model::default(),
        }
    }

    /// Pushes one commit of upserts `(id, project)` and deletes (`None`).
    fn commit(&mut self, ops: &[(String, Option<String>)]) {
        let mut pushed = Vec::new();
        let mut changes = Vec::new();
        for (id, project) in ops {
            match project {
                Some(project) => {
                    self.model.version += 1;
                    let mut row = fixtures::task(&self.schema, id, project, id).expect("task");
                    row.server_version = self.model.version;
                    self.model.rows.insert(id.clone(), row.clone());
                    changes.push((id.clone(), ChangeOp::Upsert, project.clone()));
                    pushed.push(Op::Upsert {
                        table: "tasks".into(),
                        row,
                    });
                }
                None => {
                    let row = self.model.rows.remove(id).expect("deleting a stored row");
                    let project = row.scopes["project_id"].clone();
                    changes.push((id.clone(), ChangeOp::Delete, project));
                    pushed.push(Op::Delete {
                        table: "tasks".into(),
                        row_id: id.clone(),
                    });
                }
            }
        }
        let commit_id = format!("cc{}", self.model.commits.len());
        let outcome = fixtures::push(self.storage.as_ref(), PARTITION, "c1", &commit_id, &pushed)
            .expect("push");
        let seq = outcome.seq().expect("applied");
        self.model.commits.push((seq, changes));
    }

    /// The log: a dense region (every fourth project 0–3), a region none of
    /// projects 0–3 touch and where 4 and 5 are sparse, a mixed region,
    /// ten-change commits, one commit of 80 changes, moves and deletes.
    fn populate(&mut self) {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in 0..200u64 {
            self.commit(&[(format!("r{i:04}"), Some(project(i % 4)))]);
        }
        for i in 200..400u64 {
            self.commit(&[(format!("r{i:04}"), Some(project(4 + i % 16)))]);
        }
        for chunk in 0..10u64 {
            let ops: Vec<_> = (0..10u64)
                .map(|k| {
                    let i = 400 + chunk * 10 + k;
                    (format!("r{i:04}"), Some(project(next() % 20)))
                })
                .collect();
            self.commit(&ops);
        }
        let big: Vec<_> = (500..580u64)
            .map(|i| (format!("r{i:04}"), Some(project(i % 2))))
            .collect();
        self.commit(&big);
        for i in 580..700u64 {
            self.commit(&[(format!("r{i:04}"), Some(project(next() % 20)))]);
        }
        for i in (0..200u64).step_by(7) {
            self.commit(&[(format!("r{i:04}"), Some(project(4 + next() % 16)))]);
        }
        for i in (200..400u64).step_by(11) {
            self.commit(&[(format!("r{i:04}"), None)]);
        }
    }

    fn expected_rows(&self, values: &[String]) -> Vec<StoredRow> {
        self.model
            .rows
            .values()
            .filter(|row| values.contains(&row.scopes["project_id"]))
            .cloned()
            .collect()
    }

    /// Pages through the filter's rows through the pool: each page must be
    /// the next `limit` rows of the model (a short page ends the scan).
    fn check_scan(&self, name: &str, values: &[String], limit: i64) {
        let expected = self.expected_rows(values);
        let size = usize::try_from(limit).expect("limit");
        let mut at = 0usize;
        loop {
            let page = self
                .storage
                .scan_rows(
                    PARTITION,
                    &RowScanQuery {
                        table: "tasks".into(),
                        scope_filter: filter(values),
                        after_row_id: at.checked_sub(1).map(|i| expected[i].row_id.clone()),
                        limit,
                    },
                )
                .expect("scan");
            let end = (at + size).min(expected.len());
            assert_eq!(
                page,
                expected[at..end],
                "{name}, limit {limit}, page at {at}"
            );
            if page.len() < size {
                return;
            }
            at = end;
        }
    }

    /// The commits of `(after, through]` with their changes of the filter,
    /// up to the first commit at which `limit` changes are reached.
    fn expected_window(
        &self,
        values: &[String],
        after: i64,
        through: i64,
        limit: i64,
    ) -> Vec<(i64, Vec<(String, ChangeOp)>)> {
        let mut out = Vec::new();
        let mut matched = 0i64;
        for (seq, changes) in &self.model.commits {
            if *seq <= after || *seq > through {
                continue;
            }
            let kept: Vec<(String, ChangeOp)> = changes
                .iter()
                .filter(|(_, _, project)| values.contains(project))
                .map(|(id, op, _)| (id.clone(), *op))
                .collect();
            if kept.is_empty() {
                continue;
            }
            matched += kept.len() as i64;
            out.push((*seq, kept));
            if matched >= limit {
                break;
            }
        }
        out
    }

    fn window(
        &self,
        values: &[String],
        after: i64,
        through: i64,
        limit: i64,
    ) -> Vec<(i64, Vec<(String, ChangeOp)>)> {
        self.storage
            .read_commit_window(
                PARTITION,
                &CommitWindowQuery {
                    table: "tasks".into(),
                    scope_filter: filter(values),
                    after_seq: after,
                    through_seq: through,
                    limit_changes: limit,
                },
            )
            .expect("window")
            .into_iter()
            .map(|commit| {
                for change in &commit.changes {
                    assert!(values.contains(&change.scopes["project_id"]));
                }
                (
                    commit.commit_seq,
                    commit
                        .changes
                        .into_iter()
                        .map(|c| (c.row_id, c.op))
                        .collect(),
                )
            })
            .collect()
    }
}

/// Whether a statement of the log satisfies `shape`.
fn ran(log: &[String], shape: impl Fn(&str) -> bool) -> bool {
    log.iter().any(|s| shape(s))
}

/// The filters checked: dense then absent then mixed, sparse, every
/// project, one project, and a list longer than the walked lists.
fn filters() -> Vec<(&'static str, Vec<String>)> {
    let mut long: Vec<String> = (0..20).map(project).collect();
    long.extend((100..230).map(project));
    vec![
        ("projects 0 and 1", vec![project(0), project(1)]),
        ("projects 4 and 5", vec![project(4), project(5)]),
        ("three projects", vec![project(2), project(9), project(17)]),
        ("every project", (0..20).map(project).collect()),
        ("one project", vec![project(3)]),
        ("150 values", long),
    ]
}

#[test]
fn scans_of_several_values_match_the_model_in_every_shape() {
    let mut fixture = Fixture::new();
    fixture.populate();
    let plan = FaultPlan::count_only();
    fixture.storage.set_fault_plan(Some(plan.clone()));
    for (name, values) in filters() {
        let expected = fixture.expected_rows(&values);
        assert!(!expected.is_empty(), "{name}: the model has rows");
        for limit in [1, 7, 64, 100, 1000] {
            fixture.check_scan(name, &values, limit);
        }
    }
    // Inside a write transaction the same scan runs without a snapshot of
    // its own.
    let values = vec![project(0), project(1)];
    let mut tx = fixture.storage.begin(PARTITION).expect("begin");
    let in_tx = tx
        .scan_rows(&RowScanQuery {
            table: "tasks".into(),
            scope_filter: filter(&values),
            after_row_id: None,
            limit: 1000,
        })
        .expect("scan in a transaction");
    tx.rollback().expect("rollback");
    assert_eq!(in_tx, fixture.expected_rows(&values));

    let log = plan.statement_log();
    assert!(ran(&log, |s| s.contains("ROWS EXAMINED")), "no scan walked");
    assert!(
        ran(&log, |s| s
            .starts_with("(SELECT `row_id` FROM `sync_row_scopes`")),
        "no scan merged the values' ranges"
    );
    assert!(
        ran(&log, |s| s.contains("WITH CONSISTENT SNAPSHOT")),
        "no scan needed a snapshot"
    );
}

#[test]
fn windows_of_several_values_match_the_model_in_every_shape() {
    let mut fixture = Fixture::new();
    fixture.populate();
    let last = fixture.model.commits.last().map_or(0, |c| c.0);
    let plan = FaultPlan::count_only();
    fixture.storage.set_fault_plan(Some(plan.clone()));
    for (name, values) in filters() {
        for limit in [1, 10, 64, 500, 100_000] {
            for (after, through) in [(0, last), (150, 420), (205, last), (0, 390)] {
                assert_eq!(
                    fixture.window(&values, after, through, limit),
                    fixture.expected_window(&values, after, through, limit),
                    "{name}, limit {limit}, window ({after}, {through}]"
                );
            }
        }
        // The newest change of the filter: one lookup per value.
        let newest = fixture
            .model
            .commits
            .iter()
            .filter(|(_, changes)| changes.iter().any(|(_, _, p)| values.contains(p)))
            .map(|(seq, _)| *seq)
            .max()
            .unwrap_or(0);
        assert_eq!(
            fixture
                .storage
                .latest_scoped_change_seq(PARTITION, "tasks", &filter(&values))
                .expect("latest"),
            newest,
            "{name}: the newest change"
        );
        // Paged to the end, the windows give every matching commit once.
        let mut after = 0;
        let mut paged = Vec::new();
        loop {
            let page = fixture.window(&values, after, last, 37);
            let Some(end) = page.last().map(|c| c.0) else {
                break;
            };
            after = end;
            paged.extend(page);
        }
        assert_eq!(
            paged,
            fixture.expected_window(&values, 0, last, i64::MAX),
            "{name}, paged"
        );
    }
    let log = plan.statement_log();
    assert!(
        ran(&log, |s| s.contains("ROWS EXAMINED")),
        "no window walked"
    );
    assert!(
        ran(&log, |s| s.starts_with(
            "(SELECT `commit_seq` FROM `sync_change_scopes`"
        )),
        "no window merged the values' ranges"
    );
}
