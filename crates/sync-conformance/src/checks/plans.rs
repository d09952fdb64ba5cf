//! §22 Hot-path plans, C-326…C-329.

use sync_core::{Capability, CompiledSchema, ServerStorage};

use crate::check;
use crate::check::{CheckDef, CheckResult, Requires};
use crate::checks::support_lifecycle::{one_change_commit, seeded_rows};
use crate::context::Ctx;
use crate::fixtures::fix1;
use crate::harness::{HotPath, PlanSummary, RawAccess};
use crate::registry::check;

/// Group name.
pub(crate) const GROUP: &str = "plans";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-326",
        "window and scan candidates search the scope indexes by primary key",
        c326_candidate_plans,
    )
    .requires(Requires::PlansByShape),
    check(
        GROUP,
        "C-327",
        "the exact scope delete searches sync_row_scopes by primary key",
        c327_scope_delete_plan,
    )
    .requires(Requires::PlansByShape),
    check(
        GROUP,
        "C-328",
        "hot paths over 2 000 rows use index nodes and no Seq Scan",
        c328_pg_hot_paths,
    )
    .requires(Requires::PlansByStatistics)
    .needs(Capability::BlobRefs),
    check(
        GROUP,
        "C-329",
        "per-row scope replacement uses sync_row_scopes_by_row",
        c329_pg_scope_replacement,
    )
    .requires(Requires::PlansByStatistics),
];

/// Rows (and commits) the plan checks populate.
const ROWS: usize = 2000;
/// Distinct `project_id` scope values among them.
const PROJECTS: usize = 20;
/// Rows per populating transaction.
const BATCH: usize = 100;

/// Populates partition `p1` as documented on [`HotPath`]: 2 000 `tasks` rows
/// over 20 `project_id` values, each upserted and logged as its own commit,
/// each referencing blob `blob-<n mod 20>` when blob refs are supported.
fn populate(storage: &dyn ServerStorage, schema: &CompiledSchema) -> CheckResult {
    let blob_refs = storage.capabilities().blob_refs;
    let rows = seeded_rows(schema, ROWS, PROJECTS)?;
    for (batch, chunk) in rows.chunks(BATCH).enumerate() {
        let mut tx = storage.begin("p1")?;
        tx.lock_partition_for_push()?;
        for (offset, row) in chunk.iter().enumerate() {
            let n = batch * BATCH + offset;
            tx.upsert_row("tasks", row, Some(0))?;
            if blob_refs {
                tx.set_blob_refs("tasks", &row.row_id, &[format!("blob-{}", n % PROJECTS)])?;
            }
            tx.append_commit(&one_change_commit(&format!("plan-{n}"), "tasks", row))?;
        }
        tx.commit()?;
    }
    Ok(())
}

/// A populated database and its raw access.
fn populated(ctx: &mut Ctx<'_>) -> CheckResult<Box<dyn RawAccess>> {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    populate(storage.as_ref(), &schema)?;
    ctx.raw()
}

fn explain(raw: &dyn RawAccess, path: HotPath) -> CheckResult<PlanSummary> {
    Ok(raw.explain(path)?)
}

/// Fails unless `plan` reads `table` by its primary key and never scans it.
fn expect_pk_search(plan: &PlanSummary, path: HotPath, table: &str) -> CheckResult {
    check!(
        plan.uses_index(table, "PRIMARY KEY"),
        "{path:?}: no primary-key SEARCH of {table}; plan:\n{}",
        plan.raw
    );
    expect_no_scan(plan, path, &[table])
}

/// Fails if `plan` fully scans any of `tables`.
fn expect_no_scan(plan: &PlanSummary, path: HotPath, tables: &[&str]) -> CheckResult {
    for table in tables {
        check!(
            !plan.scans(table),
            "{path:?}: full scan of {table}; plan:\n{}",
            plan.raw
        );
    }
    Ok(())
}

/// Fails if `plan` collects its input (sorts, hashes, temporary B-trees)
/// before a first row: a candidate page that does so collects every entry
/// above the cursor, so its cost grows with the table (`dialects.md` §7).
fn expect_streaming(plan: &PlanSummary, path: HotPath) -> CheckResult {
    check!(
        plan.collects.is_empty(),
        "{path:?}: collects its input ({}); plan:\n{}",
        plan.collects.join("; "),
        plan.raw
    );
    Ok(())
}

fn c326_candidate_plans(ctx: &mut Ctx<'_>) -> CheckResult {
    let raw = populated(ctx)?;
    let raw = raw.as_ref();
    let window = explain(raw, HotPath::WindowCandidates)?;
    expect_pk_search(&window, HotPath::WindowCandidates, "sync_change_scopes")?;
    for path in [HotPath::ScanCandidates, HotPath::ScanCandidatesMulti] {
        let scan = explain(raw, path)?;
        expect_pk_search(&scan, path, "sync_row_scopes")?;
        expect_streaming(&scan, path)?;
    }
    let lookup = explain(raw, HotPath::IndexLookupShared)?;
    check!(
        lookup.uses_index("tasks", "sync_ix_tasks_by_title"),
        "IndexLookupShared does not search sync_ix_tasks_by_title; plan:\n{}",
        lookup.raw
    );
    expect_no_scan(&lookup, HotPath::IndexLookupShared, &["tasks"])?;
    expect_streaming(&lookup, HotPath::IndexLookupShared)?;
    for path in [
        HotPath::WindowPage,
        HotPath::WindowPageMulti,
        HotPath::ScanPage,
        HotPath::ScanPageMulti,
        HotPath::ScanWalk,
    ] {
        let plan = explain(raw, path)?;
        if path == HotPath::WindowPageMulti {
            expect_pk_search(&plan, path, "sync_change_scopes")?;
        }
        if path == HotPath::ScanPageMulti {
            expect_pk_search(&plan, path, "sync_row_scopes")?;
        }
        if path == HotPath::ScanWalk {
            expect_pk_search(&plan, path, "tasks")?;
        }
        expect_no_scan(
            &plan,
            path,
            &["sync_change_scopes", "sync_row_scopes", "tasks"],
        )?;
    }
    Ok(())
}

fn c327_scope_delete_plan(ctx: &mut Ctx<'_>) -> CheckResult {
    let raw = populated(ctx)?;
    let plan = explain(raw.as_ref(), HotPath::ScopeReplacement)?;
    expect_pk_search(&plan, HotPath::ScopeReplacement, "sync_row_scopes")
}

/// The tables no Postgres hot path may read by `Seq Scan` (`dialects.md` §7.1).
const PG_HOT_TABLES: [&str; 6] = [
    "sync_change_scopes",
    "sync_commits",
    "sync_changes",
    "sync_row_scopes",
    "sync_blob_refs",
    "tasks",
];

fn c328_pg_hot_paths(ctx: &mut Ctx<'_>) -> CheckResult {
    let raw = populated(ctx)?;
    let raw = raw.as_ref();
    for (path, driving) in [
        (HotPath::WindowPage, "sync_change_scopes"),
        (HotPath::WindowPageMulti, "sync_change_scopes"),
        (HotPath::ScanPage, "sync_row_scopes"),
        (HotPath::ScanPageMulti, "sync_row_scopes"),
        (HotPath::ScanWalk, "tasks"),
        (HotPath::IndexLookup, "tasks"),
        (HotPath::IndexLookupShared, "tasks"),
        (HotPath::BlobCandidates, "sync_blob_refs"),
        (HotPath::CoverageProbe, "sync_changes"),
    ] {
        let plan = explain(raw, path)?;
        check!(
            plan.reads_by_index(driving),
            "{path:?}: no index node on {driving}; plan:\n{}",
            plan.raw
        );
        expect_no_scan(&plan, path, &PG_HOT_TABLES)?;
        let streams = match path {
            HotPath::ScanPage | HotPath::ScanPageMulti | HotPath::ScanWalk => true,
            // A prefix index sorts one value's matches (bounded by them).
            HotPath::IndexLookup | HotPath::IndexLookupShared => {
                !ctx.properties().prefix_lookup_indexes
            }
            _ => false,
        };
        if streams {
            expect_streaming(&plan, path)?;
        }
        if matches!(path, HotPath::ScanPage | HotPath::ScanPageMulti) {
            // The by-row index orders by row id too, but a range read by
            // it filters out every other value's entries.
            check!(
                !plan.uses_index("sync_row_scopes", "sync_row_scopes_by_row"),
                "{path:?}: sync_row_scopes_by_row reads the scan's ranges; plan:\n{}",
                plan.raw
            );
        }
        if path == HotPath::IndexLookupShared {
            check!(
                plan.uses_index("tasks", "sync_ix_tasks_by_title"),
                "IndexLookupShared does not use sync_ix_tasks_by_title; plan:\n{}",
                plan.raw
            );
        }
        if path == HotPath::IndexLookup {
            check!(
                plan.uses_index("tasks", "sync_ix_tasks_by_project_title"),
                "IndexLookup does not use sync_ix_tasks_by_project_title; plan:\n{}",
                plan.raw
            );
        }
    }
    Ok(())
}

fn c329_pg_scope_replacement(ctx: &mut Ctx<'_>) -> CheckResult {
    let raw = populated(ctx)?;
    let plan = explain(raw.as_ref(), HotPath::ScopeReplacement)?;
    check!(
        plan.uses_index("sync_row_scopes", "sync_row_scopes_by_row"),
        "ScopeReplacement does not use sync_row_scopes_by_row; plan:\n{}",
        plan.raw
    );
    expect_no_scan(&plan, HotPath::ScopeReplacement, &["sync_row_scopes"])
}
