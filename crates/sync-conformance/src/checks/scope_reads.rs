//! §8 Scope-indexed reads, C-142…C-156.

use sync_core::{
    ChangeOp, CommitPruneQuery, ErrorCode, RowScanQuery, ScannedRow, ScopeFilter, ServerStorage,
    StoredRow,
};

use crate::check::{expect_code, expect_message_free_of, CheckDef, CheckResult};
use crate::checks::support_pdata::{
    append_changes, filter, ids, project, row_scan, seqs, strings, touch, upsert_change, window,
    write_rows, EPOCH, P,
};
use crate::context::Ctx;
use crate::fixtures::{doc, fix1, push, scopes, task, Op};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "scope-reads";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-142",
        "window by project returns the matching commits oldest first and honours limit_changes",
        c142_window_by_project,
    ),
    check(
        GROUP,
        "C-143",
        "a two-variable filter keeps only changes matching both variables",
        c143_two_variable_filter,
    ),
    check(
        GROUP,
        "C-144",
        "empty filter, empty value list, limit 0 and through <= after return []",
        c144_window_empty_cases,
    ),
    check(
        GROUP,
        "C-145",
        "a commit larger than limit_changes is returned whole and alone",
        c145_commit_never_split,
    ),
    check(
        GROUP,
        "C-146",
        "a delete change carries the stored scopes and is found by the window",
        c146_delete_change_scoped,
    ),
    check(
        GROUP,
        "C-147",
        "a window on an unknown table is unknown_table",
        c147_window_unknown_table,
    ),
    check(
        GROUP,
        "C-148",
        "a window over a pruned range returns only retained commits",
        c148_window_after_prune,
    ),
    check(
        GROUP,
        "C-149",
        "a window pages across candidate pages up to limit_changes",
        c149_window_paging,
    ),
    check(
        GROUP,
        "C-150",
        "latest_scoped_change_seq: newest match, else 0",
        c150_latest_scoped_change_seq,
    ),
    check(
        GROUP,
        "C-151",
        "scan_rows is byte-ordered and resumes after the given row id",
        c151_scan_order_and_resume,
    ),
    check(
        GROUP,
        "C-152",
        "scan_rows with an empty filter is scan_requires_scope without the table name",
        c152_scan_empty_filter,
    ),
    check(
        GROUP,
        "C-153",
        "scan_rows: an empty filter wins over an unknown table",
        c153_scan_empty_filter_precedence,
    ),
    check(
        GROUP,
        "C-154",
        "scan_rows: an empty value list on an unknown table returns []",
        c154_scan_empty_values_unknown_table,
    ),
    check(
        GROUP,
        "C-155",
        "scan_rows orders row ids by UTF-8 bytes",
        c155_scan_byte_order,
    ),
    check(
        GROUP,
        "C-156",
        "transaction scan_rows sees staged deletes and inserts",
        c156_tx_scan_staged,
    ),
    check(
        GROUP,
        "C-337",
        "scan_rows with a two-variable filter returns only rows matching both (pool and transaction); scan_row_payloads returns the same rows",
        c337_scan_two_variable_filter,
    ),
    check(
        GROUP,
        "C-346",
        "scan_rows with many values returns every matching row once, in order, where they match densely and sparsely (pool and transaction)",
        c340_scan_many_values_dense_and_sparse,
    ),
];

/// Appends one commit with one `tasks` upsert of `id` in `project`.
fn task_commit(storage: &dyn ServerStorage, id: &str, project_id: &str) -> CheckResult<i64> {
    let schema = fix1()?;
    let row = task(&schema, id, project_id, &format!("title {id}"))?;
    append_changes(
        storage,
        P,
        &format!("commit-{id}"),
        vec![upsert_change("tasks", &row)],
    )
}

fn c142_window_by_project(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    task_commit(storage.as_ref(), "r1", "p1")?;
    task_commit(storage.as_ref(), "r2", "p2")?;
    task_commit(storage.as_ref(), "r3", "p1")?;
    let all = storage.read_commit_window(P, &window("tasks", project("p1"), 0, 100))?;
    check_eq!(seqs(&all), [1, 3], "window seqs for p1");
    let limited = storage.read_commit_window(P, &window("tasks", project("p1"), 0, 1))?;
    check_eq!(
        seqs(&limited),
        [1],
        "window seqs for p1 with limit_changes 1"
    );
    Ok(())
}

fn c143_two_variable_filter(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let changes = [
        doc(&schema, "d1", "o1", "p1", None)?,
        doc(&schema, "d2", "o1", "p2", None)?,
        doc(&schema, "d3", "o2", "p1", None)?,
        doc(&schema, "d4", "o1", "p1", Some("x"))?,
    ]
    .iter()
    .map(|row| upsert_change("docs", row))
    .collect();
    append_changes(storage.as_ref(), P, "c-1", changes)?;
    let both = filter(&[("org_id", &["o1"]), ("project_id", &["p1"])]);
    let commits = storage.read_commit_window(P, &window("docs", both, 0, 100))?;
    check_eq!(seqs(&commits), [1], "window seqs");
    let rows: Vec<&str> = commits[0]
        .changes
        .iter()
        .map(|c| c.row_id.as_str())
        .collect();
    check_eq!(rows, ["d1", "d4"], "changes matching both variables");
    Ok(())
}

fn c144_window_empty_cases(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    task_commit(storage.as_ref(), "r1", "p1")?;
    task_commit(storage.as_ref(), "r2", "p1")?;
    check_eq!(
        seqs(&storage.read_commit_window(P, &window("tasks", project("p1"), 0, 10))?),
        [1, 2],
        "baseline window"
    );
    let cases = [
        ("empty filter", window("tasks", ScopeFilter::new(), 0, 10)),
        (
            "empty value list",
            window("tasks", filter(&[("project_id", &[])]), 0, 10),
        ),
        ("limit_changes 0", window("tasks", project("p1"), 0, 0)),
        ("through = after", {
            let mut q = window("tasks", project("p1"), 1, 10);
            q.through_seq = 1;
            q
        }),
        ("through < after", {
            let mut q = window("tasks", project("p1"), 2, 10);
            q.through_seq = 1;
            q
        }),
    ];
    for (what, query) in cases {
        let commits = storage.read_commit_window(P, &query)?;
        check!(
            commits.is_empty(),
            "{what}: expected [], got {:?}",
            seqs(&commits)
        );
    }
    Ok(())
}

fn c145_commit_never_split(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let mut changes = Vec::new();
    for n in 1..=5 {
        let row = task(&schema, &format!("r{n}"), "p1", &format!("title {n}"))?;
        changes.push(upsert_change("tasks", &row));
    }
    append_changes(storage.as_ref(), P, "big", changes)?;
    task_commit(storage.as_ref(), "r6", "p1")?;
    let commits = storage.read_commit_window(P, &window("tasks", project("p1"), 0, 2))?;
    check_eq!(seqs(&commits), [1], "window seqs with limit_changes 2");
    check_eq!(commits[0].changes.len(), 5, "changes of the big commit");
    Ok(())
}

fn c146_delete_change_scoped(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    push(
        storage.as_ref(),
        P,
        "client-1",
        "c-1",
        &[Op::upsert("tasks", task(&schema, "r1", "p1", "t")?)],
    )?
    .seq()?;
    let delete_seq = push(
        storage.as_ref(),
        P,
        "client-1",
        "c-2",
        &[Op::delete("tasks", "r1")],
    )?
    .seq()?;
    let commits = storage.read_commit_window(P, &window("tasks", project("p1"), 1, 10))?;
    check_eq!(seqs(&commits), [delete_seq], "window seqs after the upsert");
    let change = &commits[0].changes;
    check_eq!(change.len(), 1, "changes of the delete commit");
    check_eq!(change[0].op, ChangeOp::Delete, "op");
    check_eq!(change[0].row_id, "r1", "row_id");
    check_eq!(
        change[0].scopes,
        scopes(&[("project_id", "p1")]),
        "stored scopes of the delete"
    );
    check_eq!(change[0].payload, None, "payload of the delete");
    Ok(())
}

fn c147_window_unknown_table(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    expect_code(
        storage.read_commit_window(P, &window("nope", project("p1"), 0, 10)),
        ErrorCode::UnknownTable,
        "window on table nope",
    )?;
    Ok(())
}

fn c148_window_after_prune(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    touch(storage.as_ref(), P)?;
    for id in ["r1", "r2", "r3", "r4"] {
        task_commit(storage.as_ref(), id, "p1")?;
    }
    storage.prune_commits_through(
        P,
        &CommitPruneQuery {
            log_epoch: EPOCH.to_owned(),
            through_seq: 2,
        },
    )?;
    let commits = storage.read_commit_window(P, &window("tasks", project("p1"), 0, 100))?;
    check_eq!(
        seqs(&commits),
        [3, 4],
        "window seqs after pruning through 2"
    );
    Ok(())
}

fn c149_window_paging(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    // 200 candidate commits (org o1); every fourth fails the second variable,
    // so the 150 matching commits end at seq 199, beyond the first candidate page.
    for n in 1..=200_i64 {
        let project_id = if n % 4 == 0 { "p2" } else { "p1" };
        let row = doc(&schema, &format!("d{n:03}"), "o1", project_id, None)?;
        append_changes(
            storage.as_ref(),
            P,
            &format!("c-{n}"),
            vec![upsert_change("docs", &row)],
        )?;
    }
    let both = filter(&[("org_id", &["o1"]), ("project_id", &["p1"])]);
    let commits = storage.read_commit_window(P, &window("docs", both, 0, 150))?;
    let expected: Vec<i64> = (1..=199).filter(|n| n % 4 != 0).collect();
    check_eq!(expected.len(), 150, "fixture arithmetic");
    check_eq!(
        seqs(&commits),
        expected,
        "window seqs with limit_changes 150"
    );
    let changes: usize = commits.iter().map(|c| c.changes.len()).sum();
    check_eq!(changes, 150, "matching changes returned");
    c149_multi_value_paging(ctx)
}

/// The same paging with candidate variables naming several values, where a
/// commit can match more than one of them (a dialect may merge per-value
/// ranges for such filters; the candidates must stay distinct and ordered).
fn c149_multi_value_paging(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let projects = ["q1", "q2", "q3"];
    // Commit n: one doc in project q[n % 3]; every fifth commit also one in
    // the next project, so it is a candidate under two values.
    let mut expected: Vec<(i64, Vec<String>)> = Vec::new();
    for n in 1..=200_usize {
        let first = projects[n % 3];
        let mut rows = vec![doc(&schema, &format!("d{n:03}"), "o1", first, None)?];
        if n % 5 == 0 {
            let second = projects[(n + 1) % 3];
            rows.push(doc(&schema, &format!("e{n:03}"), "o1", second, None)?);
        }
        let changes = rows.iter().map(|r| upsert_change("docs", r)).collect();
        let seq = append_changes(storage.as_ref(), P, &format!("m-{n}"), changes)?;
        expected.push((seq, rows.iter().map(|r| r.row_id.clone()).collect()));
    }
    for values in [&projects[..], &projects[..2], &["q3", "q1", "q3"][..]] {
        let wanted = |row_id: &str, n: usize| {
            let project = if row_id.starts_with('d') {
                projects[n % 3]
            } else {
                projects[(n + 1) % 3]
            };
            values.contains(&project)
        };
        let matching: Vec<(i64, Vec<String>)> = expected
            .iter()
            .enumerate()
            .map(|(i, (seq, rows))| {
                let kept = rows.iter().filter(|r| wanted(r, i + 1)).cloned().collect();
                (*seq, kept)
            })
            .filter(|(_, rows): &(i64, Vec<String>)| !rows.is_empty())
            .collect();
        // The candidate variable is the filter's first key: the project.
        let f = filter(&[("project_id", values)]);
        // One call: commits oldest first until 150 matching changes.
        let commits = storage.read_commit_window(P, &window("docs", f.clone(), 0, 150))?;
        let mut count = 0;
        let first_page: Vec<i64> = matching
            .iter()
            .take_while(|(_, rows)| {
                let before = count;
                count += rows.len();
                before < 150
            })
            .map(|(seq, _)| *seq)
            .collect();
        check_eq!(
            seqs(&commits),
            first_page,
            "{values:?}: window seqs, limit 150"
        );
        // A walk in small windows visits every matching commit once, with
        // exactly its matching changes.
        let mut walked: Vec<(i64, Vec<String>)> = Vec::new();
        let mut cursor = 0;
        loop {
            let page = storage.read_commit_window(P, &window("docs", f.clone(), cursor, 7))?;
            let Some(last) = page.last() else { break };
            cursor = last.commit_seq;
            walked.extend(page.iter().map(|c| {
                let rows = c.changes.iter().map(|ch| ch.row_id.clone()).collect();
                (c.commit_seq, rows)
            }));
        }
        check_eq!(walked, matching, "{values:?}: walk in windows of 7 changes");
    }
    Ok(())
}

fn c150_latest_scoped_change_seq(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    touch(storage.as_ref(), P)?;
    task_commit(storage.as_ref(), "r1", "p1")?;
    task_commit(storage.as_ref(), "r2", "p2")?;
    task_commit(storage.as_ref(), "r3", "p1")?;
    task_commit(storage.as_ref(), "r4", "p2")?;
    let latest = |f: &ScopeFilter| storage.latest_scoped_change_seq(P, "tasks", f);
    check_eq!(latest(&project("p1"))?, 3, "latest for p1");
    check_eq!(
        latest(&filter(&[("project_id", &["p1", "p2"])]))?,
        4,
        "latest for p1 or p2"
    );
    check_eq!(latest(&project("p9"))?, 0, "latest without a match");
    check_eq!(
        latest(&ScopeFilter::new())?,
        0,
        "latest for the empty filter"
    );
    storage.prune_commits_through(
        P,
        &CommitPruneQuery {
            log_epoch: EPOCH.to_owned(),
            through_seq: 4,
        },
    )?;
    check_eq!(
        latest(&project("p1"))?,
        0,
        "latest after pruning everything"
    );
    Ok(())
}

fn c151_scan_order_and_resume(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let rows = [
        task(&schema, "r4", "p1", "t4")?,
        task(&schema, "r2", "p2", "t2")?,
        task(&schema, "r3", "p1", "t3")?,
        task(&schema, "r1", "p1", "t1")?,
    ];
    write_rows(storage.as_ref(), P, "tasks", &rows)?;
    let first = storage.scan_rows(P, &row_scan("tasks", project("p1"), None, 2))?;
    check_eq!(ids(&first), strings(&["r1", "r3"]), "first page");
    let next = storage.scan_rows(P, &row_scan("tasks", project("p1"), Some("r3"), 2))?;
    check_eq!(ids(&next), strings(&["r4"]), "page after r3");
    Ok(())
}

fn c152_scan_empty_filter(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    write_rows(
        storage.as_ref(),
        P,
        "tasks",
        &[task(&schema, "r1", "p1", "t")?],
    )?;
    let error = expect_code(
        storage.scan_rows(P, &row_scan("tasks", ScopeFilter::new(), None, 10)),
        ErrorCode::ScanRequiresScope,
        "scan_rows with {}",
    )?;
    expect_message_free_of(&error, &["tasks"])?;
    Ok(())
}

fn c153_scan_empty_filter_precedence(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    expect_code(
        storage.scan_rows(P, &row_scan("nope", ScopeFilter::new(), None, 10)),
        ErrorCode::ScanRequiresScope,
        "scan_rows with {} on table nope",
    )?;
    Ok(())
}

fn c154_scan_empty_values_unknown_table(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let rows = storage.scan_rows(
        P,
        &row_scan("nope", filter(&[("project_id", &[])]), None, 10),
    )?;
    check!(rows.is_empty(), "expected [], got {:?}", ids(&rows));
    Ok(())
}

fn c155_scan_byte_order(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let mut rows = Vec::new();
    for id in ["B", "a", "é", "Z"] {
        rows.push(task(&schema, id, "p1", &format!("title {id}"))?);
    }
    write_rows(storage.as_ref(), P, "tasks", &rows)?;
    let scanned = storage.scan_rows(P, &row_scan("tasks", project("p1"), None, 10))?;
    check_eq!(ids(&scanned), strings(&["B", "Z", "a", "é"]), "scan order");
    Ok(())
}

fn c156_tx_scan_staged(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    write_rows(
        storage.as_ref(),
        P,
        "tasks",
        &[
            task(&schema, "r1", "p1", "t1")?,
            task(&schema, "r2", "p2", "t2")?,
        ],
    )?;
    write_rows(
        storage.as_ref(),
        "part-2",
        "tasks",
        &[task(&schema, "r0", "p1", "t0")?],
    )?;
    let mut tx = storage.begin(P)?;
    tx.delete_row("tasks", "r1")?;
    tx.upsert_row("tasks", &task(&schema, "r3", "p1", "t3")?, None)?;
    let scanned = tx.scan_rows(&row_scan("tasks", project("p1"), None, 10))?;
    tx.rollback()?;
    check_eq!(ids(&scanned), strings(&["r3"]), "transaction scan of p1");
    Ok(())
}

/// Beyond the checklist (`docs/decisions.md`): every candidate a scan finds
/// through one variable must also match the other variables of the filter,
/// whichever variable the dialect reads its candidates by.
fn c337_scan_two_variable_filter(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    write_rows(
        storage.as_ref(),
        P,
        "docs",
        &[
            doc(&schema, "d1", "o1", "p1", None)?,
            doc(&schema, "d2", "o1", "p2", None)?,
            doc(&schema, "d3", "o2", "p1", None)?,
            doc(&schema, "d4", "o1", "p1", Some("x"))?,
            doc(&schema, "d5", "o2", "p2", None)?,
        ],
    )?;
    let cases: [(&[&str], &[&str], &[&str]); 5] = [
        (&["o1"], &["p1"], &["d1", "d4"]),
        (&["o1"], &["p1", "p2"], &["d1", "d2", "d4"]),
        (&["o1", "o2"], &["p1"], &["d1", "d3", "d4"]),
        (&["o2"], &["p2"], &["d5"]),
        (&["o3"], &["p1", "p2"], &[]),
    ];
    for (orgs, projects, expected) in cases {
        let both = filter(&[("org_id", orgs), ("project_id", projects)]);
        let what = format!("org_id in {orgs:?} and project_id in {projects:?}");
        let rows = pool_scan(storage.as_ref(), &row_scan("docs", both.clone(), None, 100))?;
        check_eq!(ids(&rows), strings(expected), "pool scan_rows {what}");
        let mut tx = storage.begin(P)?;
        let staged = tx.scan_rows(&row_scan("docs", both, None, 100));
        tx.rollback()?;
        check_eq!(
            ids(&staged?),
            strings(expected),
            "transaction scan_rows {what}"
        );
    }
    let paged = pool_scan(
        storage.as_ref(),
        &row_scan(
            "docs",
            filter(&[("org_id", &["o1"]), ("project_id", &["p1"])]),
            Some("d1"),
            1,
        ),
    )?;
    check_eq!(
        ids(&paged),
        strings(&["d4"]),
        "scan after d1 with limit 1 skips non-matching candidates"
    );
    c337_payload_scan_checks(storage.as_ref())?;
    c337_candidate_pages(ctx)
}

/// `scan_rows` from the pool, checked against `scan_row_payloads` of the
/// same query: the same rows, in the same order, without their scopes.
fn pool_scan(storage: &dyn ServerStorage, query: &RowScanQuery) -> CheckResult<Vec<StoredRow>> {
    let rows = storage.scan_rows(P, query)?;
    let payloads = storage.scan_row_payloads(P, query)?;
    let projected: Vec<ScannedRow> = rows.iter().cloned().map(ScannedRow::from).collect();
    check_eq!(
        payloads,
        projected,
        "scan_row_payloads against scan_rows, filter {:?} after {:?} limit {}",
        query.scope_filter,
        query.after_row_id,
        query.limit
    );
    Ok(rows)
}

/// `scan_row_payloads` checks its arguments as `scan_rows` does
/// (C-152…C-155 for `scan_rows`).
fn c337_payload_scan_checks(storage: &dyn ServerStorage) -> CheckResult {
    let error = expect_code(
        storage.scan_row_payloads(P, &row_scan("docs", ScopeFilter::new(), None, 10)),
        ErrorCode::ScanRequiresScope,
        "scan_row_payloads with {}",
    )?;
    expect_message_free_of(&error, &["docs"])?;
    expect_code(
        storage.scan_row_payloads(P, &row_scan("nope", ScopeFilter::new(), None, 10)),
        ErrorCode::ScanRequiresScope,
        "scan_row_payloads with {} on table nope",
    )?;
    let empty = storage.scan_row_payloads(
        P,
        &row_scan("nope", filter(&[("project_id", &[])]), None, 10),
    )?;
    check!(
        empty.is_empty(),
        "an empty value list: expected [], got {empty:?}"
    );
    expect_code(
        storage.scan_row_payloads(
            P,
            &row_scan("nope", filter(&[("project_id", &["p1"])]), None, 10),
        ),
        ErrorCode::UnknownTable,
        "scan_row_payloads of table nope",
    )?;
    let none = storage.scan_row_payloads(
        P,
        &row_scan("docs", filter(&[("project_id", &["p1"])]), None, 0),
    )?;
    check!(none.is_empty(), "limit 0: expected [], got {none:?}");
    Ok(())
}

/// C-337 across candidate pages: 200 rows of org `o9`, of which only
/// `e063`, `e150` and `e199` are in project `p1`, so whole pages of
/// candidates (at least 64 each, `storage-contract.md` §4.7) fail the second
/// variable and several end on a row that fails it. Every limit finds the
/// same three rows, page after page, from the pool and in a transaction,
/// whether the project is the filter's only value or one of 21.
fn c337_candidate_pages(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let matching = ["e063", "e150", "e199"];
    let rows = (0..200)
        .map(|n| {
            let id = format!("e{n:03}");
            let project = if matching.contains(&id.as_str()) {
                "p1"
            } else {
                "p2"
            };
            doc(&schema, &id, "o9", project, None)
        })
        .collect::<Result<Vec<_>, _>>()?;
    write_rows(storage.as_ref(), P, "docs", &rows)?;
    // The second filter names the project among twenty others, so a
    // dialect that hashes long value lists verifies through its hash.
    let others: Vec<String> = (0..20).map(|n| format!("q{n:02}")).collect();
    let mut projects: Vec<&str> = others.iter().map(String::as_str).collect();
    projects.push("p1");
    let filters = [
        filter(&[("org_id", &["o9"]), ("project_id", &["p1"])]),
        filter(&[("org_id", &["o9"]), ("project_id", &projects)]),
    ];
    for (both, limit) in filters
        .iter()
        .flat_map(|f| [1, 2, 3, 500].map(|limit| (f, limit)))
    {
        let mut pool = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..4 {
            let page = pool_scan(
                storage.as_ref(),
                &row_scan("docs", both.clone(), after.as_deref(), limit),
            )?;
            let Some(last) = page.last() else { break };
            after = Some(last.row_id.clone());
            pool.extend(ids(&page));
        }
        let values = both.get("project_id").map_or(0, Vec::len);
        check_eq!(
            pool,
            strings(&matching),
            "pool scan pages of {limit}, {values} project values"
        );
        let mut tx = storage.begin(P)?;
        let staged = tx.scan_rows(&row_scan("docs", both.clone(), None, limit));
        tx.rollback()?;
        let expected = &matching[..matching.len().min(usize::try_from(limit).unwrap_or(0))];
        check_eq!(
            ids(&staged?),
            strings(expected),
            "transaction scan, first page of {limit}, {values} project values"
        );
    }
    Ok(())
}

/// The project of row `n` of C-346: rows 0…299 cycle over four projects
/// `a0`…`a3`, rows 300…699 over forty projects `b00`…`b39`.
fn c340_project(n: usize) -> String {
    if n < 300 {
        format!("a{}", n % 4)
    } else {
        format!("b{:02}", n % 40)
    }
}

/// Every row of `filter` by paging `scan_rows` (pool or transaction) with `limit`.
fn c340_scan_all(
    storage: &dyn ServerStorage,
    in_tx: bool,
    scope_filter: &ScopeFilter,
    limit: i64,
) -> CheckResult<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    loop {
        let query = row_scan(
            "tasks",
            scope_filter.clone(),
            out.last().map(String::as_str),
            limit,
        );
        let page = if in_tx {
            let mut tx = storage.begin(P)?;
            let page = tx.scan_rows(&query);
            tx.rollback()?;
            page?
        } else {
            pool_scan(storage, &query)?
        };
        let done = (page.len() as i64) < limit;
        out.extend(ids(&page));
        if done || page.is_empty() {
            return Ok(out);
        }
    }
}

/// A dialect may serve a many-value scan by walking the table where the
/// values match densely and by merging per-value ranges where they match
/// sparsely (`docs/decisions.md`): either way, and across the switch from
/// one to the other inside a page, the rows are exactly the matching ones
/// in byte order, each once, also after rows changed scope or were deleted.
fn c340_scan_many_values_dense_and_sparse(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let mut projects: Vec<String> = (0..700).map(c340_project).collect();
    let rows = projects
        .iter()
        .enumerate()
        .map(|(n, p)| task(&schema, &format!("m{n:04}"), p, &format!("title {n}")))
        .collect::<CheckResult<Vec<_>>>()?;
    write_rows(storage.as_ref(), P, "tasks", &rows)?;
    // Rescope some rows into and out of the filter and delete others.
    let mut tx = storage.begin(P)?;
    for n in (0..700).step_by(37) {
        let moved = if projects[n].starts_with('a') {
            "b01"
        } else {
            "a1"
        };
        projects[n] = moved.to_owned();
        tx.upsert_row(
            "tasks",
            &task(&schema, &format!("m{n:04}"), moved, &format!("moved {n}"))?,
            None,
        )?;
    }
    for n in (5..700).step_by(53) {
        projects[n] = String::new();
        tx.delete_row("tasks", &format!("m{n:04}"))?;
    }
    tx.commit()?;
    let cases: [&[&str]; 4] = [
        &["a0", "a1", "a2", "b07"],
        &["a1", "b00", "b01", "b02", "b03", "b04", "b05", "b06", "b07"],
        &["b03", "b11", "b19", "b27", "b35"],
        &["a3", "zz", "b39"],
    ];
    for values in cases {
        let expected: Vec<String> = (0..700)
            .filter(|&n| values.contains(&projects[n].as_str()))
            .map(|n| format!("m{n:04}"))
            .collect();
        let scope_filter = filter(&[("project_id", values)]);
        for limit in [1, 7, 64, 100, 1000] {
            for in_tx in [false, true] {
                let got = c340_scan_all(storage.as_ref(), in_tx, &scope_filter, limit)?;
                check_eq!(
                    got,
                    expected,
                    "project_id in {values:?}, limit {limit}, transaction {in_tx}"
                );
            }
        }
    }
    Ok(())
}
