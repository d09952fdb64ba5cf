//! §21 Bad input across the API, C-315…C-325.

use std::fmt::Debug;

use serde_json::json;
use sync_core::{
    AuthoritativeQueryRequest, ClientRecord, CommitMetadataQuery, CommitPruneQuery,
    CommitWindowQuery, Error, ErrorCode, IndexRowScanQuery, NewCommit, NewReaction,
    ReactionClaimQuery, ReactionFailure, ReactionFailureUpdate, ReactionListQuery,
    ReactionPruneQuery, RowScanQuery, RowValue, ScopeActivityQuery, ScopeFilter, ServeContext,
    ServerStorage, SqlValue, StorageTransaction, StoredPushResult,
};

use crate::check::{
    expect_code, expect_detail, expect_message_free_of, CheckDef, CheckResult, Failure, Requires,
};
use crate::checks::support_lifecycle::{
    ensure_fails, ensure_fails_with_reason, fix1_variant, no_opts, one_change_commit, TASKS,
};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, fix1_at, fix2, push, task, Op};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "bad-input";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-315",
        "every row-level and table-list method rejects table `nope` with unknown_table",
        c315_unknown_table,
    ),
    check(
        GROUP,
        "C-316",
        "every partition-taking method rejects \"\" with invalid_partition",
        c316_empty_partition,
    ),
    check(
        GROUP,
        "C-317",
        "stored layouts [1,2] at the same version: layouts_corrupt (not_object)",
        c317_layouts_not_object,
    ),
    check(
        GROUP,
        "C-318",
        "stored layouts {\"tasks\":{}}: layouts_corrupt (not_array)",
        c318_layouts_not_array,
    ),
    check(
        GROUP,
        "C-319",
        "stored layout column without nullable: layouts_corrupt (bad_column)",
        c319_layouts_bad_column,
    ),
    check(
        GROUP,
        "C-320",
        "unparsable stored layouts during a bump: layouts_corrupt (not_json), marker unchanged",
        c320_layouts_not_json_bump,
    )
    .requires(Requires::TransactionalDdl),
    check(
        GROUP,
        "C-321",
        "stored layout columns with extra members are accepted",
        c321_layouts_extra_members,
    ),
    check(
        GROUP,
        "C-322",
        "a corrupt stored payload aborts the bump rewrite with decode_failed",
        c322_corrupt_payload_bump,
    )
    .requires(Requires::TransactionalDdl),
    check(
        GROUP,
        "C-323",
        "upsert_row with a payload truncated by one byte: decode_failed (truncated)",
        c323_truncated_payload,
    ),
    check(
        GROUP,
        "C-324",
        "claim_checkpoint with schema version 0: invalid_argument",
        c324_claim_version_zero,
    ),
    check(
        GROUP,
        "C-325",
        "sync.storage.* messages name no table, column, index, partition or value",
        c325_messages_leak_nothing,
    ),
];

/// Collects every mismatching call of a sweep instead of stopping at the first.
#[derive(Default)]
struct Sweep {
    failures: Vec<String>,
}

impl Sweep {
    /// Records a failure unless `result` is an error with `code`.
    fn expect<T: Debug>(
        &mut self,
        what: &str,
        result: sync_core::Result<T>,
        code: ErrorCode,
    ) -> Option<Error> {
        match expect_code(result, code, what) {
            Ok(error) => Some(error),
            Err(failure) => {
                self.failures.push(failure.message);
                None
            }
        }
    }

    /// Records a failure unless `result` is `unknown_table` naming `nope`.
    fn unknown<T: Debug>(&mut self, what: &str, result: sync_core::Result<T>) {
        if let Some(error) = self.expect(what, result, ErrorCode::UnknownTable) {
            if let Err(failure) = expect_detail(&error, "table", "nope") {
                self.failures.push(format!("{what}: {failure}"));
            }
        }
    }

    /// Records a failure unless `result` is `invalid_partition`.
    fn partition<T: Debug>(&mut self, what: &str, result: sync_core::Result<T>) {
        self.expect(what, result, ErrorCode::InvalidPartition);
    }

    /// Records a check-level failure (setup error) under `what`.
    fn setup<T>(&mut self, what: &str, result: sync_core::Result<T>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                self.failures
                    .push(format!("{what}: setup failed with {error:?}"));
                None
            }
        }
    }

    fn finish(self) -> CheckResult {
        if self.failures.is_empty() {
            Ok(())
        } else {
            Err(Failure::new(format!(
                "{} call(s) misbehaved:\n  {}",
                self.failures.len(),
                self.failures.join("\n  ")
            )))
        }
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn project_filter() -> ScopeFilter {
    [("project_id".to_owned(), vec!["proj-1".to_owned()])]
        .into_iter()
        .collect()
}

fn window(table: &str) -> CommitWindowQuery {
    CommitWindowQuery {
        table: table.to_owned(),
        scope_filter: project_filter(),
        after_seq: 0,
        through_seq: 10,
        limit_changes: 10,
    }
}

fn row_scan(table: &str) -> RowScanQuery {
    RowScanQuery {
        table: table.to_owned(),
        scope_filter: project_filter(),
        after_row_id: None,
        limit: 10,
    }
}

fn index_scan(table: &str) -> IndexRowScanQuery {
    IndexRowScanQuery {
        table: table.to_owned(),
        index: "tasks_by_title".to_owned(),
        values: vec![RowValue::String("x".to_owned())],
        after_row_id: None,
        limit: 10,
    }
}

/// Runs `call` on a fresh transaction of `p1` (after taking the push lock)
/// and rolls it back, so one misbehaving method cannot poison the next.
fn in_tx<T>(
    storage: &dyn ServerStorage,
    sweep: &mut Sweep,
    what: &str,
    call: impl FnOnce(&mut dyn StorageTransaction) -> sync_core::Result<T>,
) -> Option<sync_core::Result<T>> {
    let mut tx = sweep.setup(what, storage.begin("p1"))?;
    sweep.setup(what, tx.lock_partition_for_push())?;
    let result = call(tx.as_mut());
    sweep.setup(what, tx.rollback())?;
    Some(result)
}

// ---- C-315 -------------------------------------------------------------------

fn c315_unknown_table(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let mut sweep = Sweep::default();
    let unensured = ctx.open()?;
    sweep.unknown(
        "get_row before ensure_schema",
        unensured.get_row("p1", "nope", "r1"),
    );
    let storage = ctx.ensured(&schema)?;
    storage.declare_checkpoint("p1", "cp", 1, NOW)?;
    let caps = storage.capabilities();
    let s = storage.as_ref();
    let nope = names(&["nope"]);

    sweep.unknown("get_row", s.get_row("p1", "nope", "r1"));
    sweep.unknown(
        "read_commit_window",
        s.read_commit_window("p1", &window("nope")),
    );
    sweep.unknown(
        "latest_scoped_change_seq",
        s.latest_scoped_change_seq("p1", "nope", &project_filter()),
    );
    sweep.unknown("scan_rows", s.scan_rows("p1", &row_scan("nope")));
    sweep.unknown(
        "scan_partition_rows",
        s.scan_partition_rows("p1", "nope", None, 10),
    );
    if caps.index_scan {
        sweep.unknown(
            "scan_rows_by_index",
            s.scan_rows_by_index("p1", &index_scan("nope")),
        );
    }
    if caps.admin {
        sweep.unknown("get_row_scopes", s.get_row_scopes("p1", "nope", "r1"));
    }
    sweep.unknown("source_coverage_seq", s.source_coverage_seq("p1", &nope));
    sweep.unknown(
        "source_coverage_seq([tasks, nope])",
        s.source_coverage_seq("p1", &names(&["tasks", "nope"])),
    );
    sweep.unknown(
        "has_source_changes_above",
        s.has_source_changes_above("p1", &nope, 0),
    );
    sweep.unknown(
        "list_source_changes",
        s.list_source_changes("p1", &nope, 0, 10),
    );
    sweep.unknown(
        "activate_checkpoint",
        s.activate_checkpoint("p1", "cp", 0, 0, &nope, NOW),
    );

    let row = task(&schema, "r1", "proj-1", "t")?;
    let bad_commit = one_change_commit("cc1", "nope", &row);
    let tx_calls: [(&str, TxCall<'_>); 12] = [
        (
            "tx.get_row",
            Box::new(|tx| tx.get_row("nope", "r1").map(|r| format!("{r:?}"))),
        ),
        (
            "tx.get_tombstone_seq",
            Box::new(|tx| tx.get_tombstone_seq("nope", "r1").map(|r| format!("{r:?}"))),
        ),
        (
            "tx.scan_rows",
            Box::new(|tx| tx.scan_rows(&row_scan("nope")).map(|r| format!("{r:?}"))),
        ),
        (
            "tx.scan_partition_rows",
            Box::new(|tx| {
                tx.scan_partition_rows("nope", None, 10)
                    .map(|r| format!("{r:?}"))
            }),
        ),
        (
            "tx.upsert_row",
            Box::new(|tx| {
                tx.upsert_row("nope", &row, Some(0))
                    .map(|r| format!("{r:?}"))
            }),
        ),
        (
            "tx.delete_row",
            Box::new(|tx| tx.delete_row("nope", "r1").map(|r| format!("{r:?}"))),
        ),
        (
            "tx.clear_tombstone",
            Box::new(|tx| tx.clear_tombstone("nope", "r1").map(|r| format!("{r:?}"))),
        ),
        (
            "tx.append_commit",
            Box::new(|tx| tx.append_commit(&bad_commit).map(|r| format!("{r:?}"))),
        ),
        (
            "tx.has_source_changes_above",
            Box::new(|tx| {
                tx.has_source_changes_above(&nope, 0)
                    .map(|r| format!("{r:?}"))
            }),
        ),
        (
            "tx.list_source_changes",
            Box::new(|tx| {
                tx.list_source_changes(&nope, 0, 10)
                    .map(|r| format!("{r:?}"))
            }),
        ),
        (
            "tx.activate_checkpoint",
            Box::new(|tx| {
                tx.activate_checkpoint("cp", 0, 0, &nope, NOW)
                    .map(|r| format!("{r:?}"))
            }),
        ),
        (
            "tx.scan_rows_by_index",
            Box::new(|tx| {
                tx.scan_rows_by_index(&index_scan("nope"))
                    .map(|r| format!("{r:?}"))
            }),
        ),
    ];
    for (what, call) in tx_calls {
        if what == "tx.scan_rows_by_index" && !caps.index_scan {
            continue;
        }
        if let Some(result) = in_tx(s, &mut sweep, what, call) {
            sweep.unknown(what, result);
        }
    }
    if caps.blob_refs {
        if let Some(result) = in_tx(s, &mut sweep, "tx.set_blob_refs", |tx| {
            tx.set_blob_refs("nope", "r1", &names(&["b1"]))
        }) {
            sweep.unknown("tx.set_blob_refs", result);
        }
    }
    sweep.finish()
}

type TxCall<'a> = Box<dyn FnOnce(&mut dyn StorageTransaction) -> sync_core::Result<String> + 'a>;

// ---- C-316 -------------------------------------------------------------------

fn c316_empty_partition(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let caps = storage.capabilities();
    let s = storage.as_ref();
    let mut sweep = Sweep::default();
    let tasks = names(&["tasks"]);

    sweep.partition("begin", s.begin("").map(|_| "a transaction"));
    sweep.partition("touch_partition", s.touch_partition("", NOW, "e1"));
    sweep.partition(
        "rotate_partition_log_epoch",
        s.rotate_partition_log_epoch("", "e2", NOW),
    );
    sweep.partition("get_partition_log_epoch", s.get_partition_log_epoch(""));
    sweep.partition("get_max_commit_seq", s.get_max_commit_seq(""));
    sweep.partition("get_horizon_seq", s.get_horizon_seq(""));
    sweep.partition("set_horizon_seq", s.set_horizon_seq("", 1));
    sweep.partition(
        "prune_commits_through",
        s.prune_commits_through(
            "",
            &CommitPruneQuery {
                log_epoch: "e1".to_owned(),
                through_seq: 0,
            },
        ),
    );
    sweep.partition("get_commit_seq_before", s.get_commit_seq_before("", NOW));
    sweep.partition("get_row", s.get_row("", "tasks", "t1"));
    sweep.partition("get_push_result", s.get_push_result("", "c1", "cc1"));
    sweep.partition(
        "read_commit_window",
        s.read_commit_window("", &window("tasks")),
    );
    sweep.partition(
        "latest_scoped_change_seq",
        s.latest_scoped_change_seq("", "tasks", &project_filter()),
    );
    sweep.partition("scan_rows", s.scan_rows("", &row_scan("tasks")));
    sweep.partition(
        "scan_partition_rows",
        s.scan_partition_rows("", "tasks", None, 10),
    );
    sweep_clients(s, &mut sweep);
    sweep.partition("read_checkpoints", s.read_checkpoints(""));
    sweep.partition("read_checkpoint", s.read_checkpoint("", "cp"));
    sweep.partition("read_serve_gate", s.read_serve_gate("", 1));
    sweep.partition("declare_checkpoint", s.declare_checkpoint("", "cp", 1, NOW));
    sweep.partition("claim_checkpoint", s.claim_checkpoint("", "cp", 1, NOW));
    sweep.partition(
        "advance_checkpoint",
        s.advance_checkpoint("", "cp", 1, 0, 0, NOW),
    );
    sweep.partition(
        "activate_checkpoint",
        s.activate_checkpoint("", "cp", 1, 0, &tasks, NOW),
    );
    sweep.partition("source_coverage_seq", s.source_coverage_seq("", &tasks));
    sweep.partition(
        "has_source_changes_above",
        s.has_source_changes_above("", &tasks, 0),
    );
    sweep.partition(
        "list_source_changes",
        s.list_source_changes("", &tasks, 0, 10),
    );
    sweep.partition("required_writer_version", s.required_writer_version(""));
    if caps.index_scan {
        sweep.partition(
            "scan_rows_by_index",
            s.scan_rows_by_index("", &index_scan("tasks")),
        );
    }
    if caps.reactions {
        sweep_reactions(s, &mut sweep);
    }
    if caps.blob_refs {
        sweep.partition(
            "list_rows_referencing_blob",
            s.list_rows_referencing_blob("", "b1"),
        );
        sweep.partition("list_referenced_blob_ids", s.list_referenced_blob_ids(""));
    }
    if caps.admin {
        sweep.partition("list_client_records", s.list_client_records(""));
        sweep.partition(
            "list_commit_metadata",
            s.list_commit_metadata(
                "",
                &CommitMetadataQuery {
                    after_seq: 0,
                    before_seq: None,
                    limit: 10,
                    table: None,
                },
            ),
        );
        sweep.partition(
            "scope_activity",
            s.scope_activity(
                "",
                &ScopeActivityQuery {
                    variable: "project_id".to_owned(),
                    value: "proj-1".to_owned(),
                    limit: 10,
                },
            ),
        );
        sweep.partition("get_row_scopes", s.get_row_scopes("", "tasks", "t1"));
    }
    if caps.authoritative_query {
        let request = AuthoritativeQueryRequest {
            sql: "SELECT id FROM tasks WHERE project_id = ?".to_owned(),
            params: vec![SqlValue::Text("proj-1".to_owned())],
            tables: tasks.clone(),
        };
        sweep.partition(
            "query_authoritative",
            s.query_authoritative("", &request, &ServeContext::default()),
        );
    }
    sweep.finish()
}

fn sweep_clients(s: &dyn ServerStorage, sweep: &mut Sweep) {
    let record = ClientRecord {
        client_id: "c1".to_owned(),
        actor_id: "a1".to_owned(),
        wire_version: 1,
        cursor: 0,
        updated_at_ms: NOW,
        subscriptions: Vec::new(),
    };
    sweep.partition("get_client_record", s.get_client_record("", "c1"));
    sweep.partition("put_client_record", s.put_client_record("", &record));
    sweep.partition("list_client_cursors", s.list_client_cursors(""));
    sweep.partition(
        "advance_client_cursor",
        s.advance_client_cursor("", "c1", "a1", "e1", 1, NOW),
    );
    sweep.partition(
        "update_client_cursor",
        s.update_client_cursor("", "c1", 1, NOW),
    );
    sweep.partition(
        "get_active_client_cursor_floor",
        s.get_active_client_cursor_floor("", NOW),
    );
}

fn sweep_reactions(s: &dyn ServerStorage, sweep: &mut Sweep) {
    let claim = ReactionClaimQuery {
        lease_owner: "w1".to_owned(),
        kinds: names(&["k"]),
        now_ms: NOW,
        lease_duration_ms: 1000,
        limit: 10,
    };
    let failure = ReactionFailureUpdate {
        lease_owner: "w1".to_owned(),
        failure: ReactionFailure {
            code: "x".to_owned(),
            at_ms: NOW,
            details: None,
        },
        retry_at_ms: None,
    };
    sweep.partition("claim_reactions", s.claim_reactions("", &claim));
    sweep.partition(
        "complete_reaction",
        s.complete_reaction("", "k1", "w1", NOW),
    );
    sweep.partition(
        "extend_reaction_lease",
        s.extend_reaction_lease("", "k1", "w1", NOW),
    );
    sweep.partition("fail_reaction", s.fail_reaction("", "k1", &failure));
    sweep.partition("retry_reaction", s.retry_reaction("", "k1", NOW));
    sweep.partition("get_reaction", s.get_reaction("", "k1"));
    sweep.partition(
        "list_reactions",
        s.list_reactions(
            "",
            &ReactionListQuery {
                statuses: Vec::new(),
                kinds: Vec::new(),
                limit: 10,
            },
        ),
    );
    sweep.partition(
        "prune_reactions",
        s.prune_reactions(
            "",
            &ReactionPruneQuery {
                completed_before_ms: NOW,
                dead_letter_before_ms: NOW,
                limit: 10,
            },
        ),
    );
}

// ---- C-317…C-321 stored layouts ------------------------------------------

/// Ensures `FIX1`, overwrites the stored layouts, and ensures `FIX1` again
/// on a new instance, expecting `layouts_corrupt` with `reason`.
fn corrupt_layouts(ctx: &mut Ctx<'_>, text: &str, reason: &str) -> CheckResult {
    let schema = fix1()?;
    ctx.ensured(&schema)?;
    ctx.raw()?.set_layouts_text(Some(text))?;
    ensure_fails_with_reason(
        ctx,
        &schema,
        ErrorCode::LayoutsCorrupt,
        reason,
        &format!("stored layouts {text}"),
    )?;
    Ok(())
}

fn c317_layouts_not_object(ctx: &mut Ctx<'_>) -> CheckResult {
    corrupt_layouts(ctx, "[1,2]", "not_object")
}

fn c318_layouts_not_array(ctx: &mut Ctx<'_>) -> CheckResult {
    corrupt_layouts(ctx, r#"{"tasks":{}}"#, "not_array")
}

fn c319_layouts_bad_column(ctx: &mut Ctx<'_>) -> CheckResult {
    corrupt_layouts(
        ctx,
        r#"{"tasks":[{"name":"id","type":"string"}]}"#,
        "bad_column",
    )
}

fn c320_layouts_not_json_bump(ctx: &mut Ctx<'_>) -> CheckResult {
    let first = ctx.ensured(&fix1()?)?;
    ctx.raw()?.set_layouts_text(Some("not json"))?;
    let before = first.read_schema_marker()?;
    ensure_fails_with_reason(
        ctx,
        &fix2()?,
        ErrorCode::LayoutsCorrupt,
        "not_json",
        "bump over `not json`",
    )?;
    check_eq!(
        first.read_schema_marker()?,
        before,
        "marker after the refused bump"
    );
    Ok(())
}

fn c321_layouts_extra_members(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    ctx.ensured(&schema)?;
    let extended = sync_schema::layouts_json(&schema)
        .replace(
            "\"nullable\":false}",
            "\"nullable\":false,\"comment\":\"x\"}",
        )
        .replace("\"nullable\":true}", "\"nullable\":true,\"comment\":\"x\"}");
    ctx.raw()?.set_layouts_text(Some(&extended))?;
    ctx.open()?
        .ensure_schema(&schema, &no_opts())
        .map_err(|e| Failure::new(format!("layouts with extra column members refused: {e:?}")))
}

// ---- C-322…C-324 -------------------------------------------------------------

fn c322_corrupt_payload_bump(ctx: &mut Ctx<'_>) -> CheckResult {
    let v1 = fix1()?;
    let first = ctx.ensured(&v1)?;
    let intact = task(&v1, "t2", "proj-1", "intact")?;
    push(
        first.as_ref(),
        "p1",
        "c1",
        "cc1",
        &[
            Op::upsert("tasks", task(&v1, "t1", "proj-1", "corrupt")?),
            Op::upsert("tasks", intact.clone()),
        ],
    )?
    .seq()?;
    let raw = ctx.raw()?;
    raw.set_row_payload("tasks", "p1", "t1", &[0xff])?;
    let error = ensure_fails(
        ctx,
        &fix2()?,
        ErrorCode::CodecDecodeFailed,
        "bump over a corrupt payload",
    )?;
    expect_detail(&error, "table", "tasks")?;
    let marker = first
        .read_schema_marker()?
        .ok_or_else(|| Failure::new("marker vanished after the failed bump"))?;
    check_eq!(marker.schema_version, 1, "marker after the failed bump");
    let columns = raw.list_columns("tasks")?;
    check!(
        !columns.iter().any(|(n, _, _)| n == "assignee"),
        "assignee column survived the rolled-back bump"
    );
    let stored = first.get_row("p1", "tasks", "t2")?.map(|r| r.payload);
    check_eq!(
        stored,
        Some(intact.payload),
        "payload of the intact row after the rollback"
    );
    Ok(())
}

fn c323_truncated_payload(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let mut row = task(&schema, "t1", "proj-1", "short")?;
    row.payload.pop();
    let mut tx = storage.begin("p1")?;
    tx.lock_partition_for_push()?;
    let error = expect_code(
        tx.upsert_row("tasks", &row, Some(0)),
        ErrorCode::CodecDecodeFailed,
        "upsert_row with a truncated payload",
    )?;
    tx.rollback()?;
    expect_detail(&error, "reason", "truncated")
}

fn c324_claim_version_zero(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    storage.declare_checkpoint("p1", "cp", 1, NOW)?;
    expect_code(
        storage.claim_checkpoint("p1", "cp", 0, NOW),
        ErrorCode::InvalidArgument,
        "claim_checkpoint at version 0",
    )?;
    Ok(())
}

// ---- C-325 -------------------------------------------------------------------

/// Distinctive identifiers and values the provoked errors must not echo.
const PART: &str = "zq-part-325";
const NEEDLES: [&str; 8] = [
    PART,
    "zq_table_325",
    "zq-row-325",
    "zq_index_325",
    "zq_ckpt_325",
    "zq-client-325",
    "zq-title-325",
    "zq-epoch-325",
];

/// Collects provoked `sync.storage.*` errors and checks their messages.
struct Leaks<'a> {
    sweep: &'a mut Sweep,
    checked: usize,
}

impl Leaks<'_> {
    fn provoke<T: Debug>(
        &mut self,
        what: &str,
        result: sync_core::Result<T>,
        code: ErrorCode,
        extra: &[&str],
    ) {
        if let Some(error) = self.sweep.expect(what, result, code) {
            self.checked += 1;
            let mut needles: Vec<&str> = NEEDLES.to_vec();
            needles.extend_from_slice(extra);
            if let Err(failure) = expect_message_free_of(&error, &needles) {
                self.sweep
                    .failures
                    .push(format!("{what} ({code}): {failure}"));
            }
        }
    }
}

fn c325_messages_leak_nothing(ctx: &mut Ctx<'_>) -> CheckResult {
    let mut sweep = Sweep::default();
    let mut leaks = Leaks {
        sweep: &mut sweep,
        checked: 0,
    };
    leaks_in_api(ctx, &mut leaks)?;
    leaks_in_ensure(ctx, &mut leaks)?;
    check!(
        leaks.checked >= 20,
        "only {} errors were provoked",
        leaks.checked
    );
    sweep.finish()
}

/// Row, lookup, log, checkpoint and registry errors with distinctive arguments.
fn leaks_in_api(ctx: &mut Ctx<'_>, leaks: &mut Leaks<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let s = storage.as_ref();
    let caps = s.capabilities();
    let table = "zq_table_325";

    leaks.provoke(
        "get_row unknown table",
        s.get_row(PART, table, "zq-row-325"),
        ErrorCode::UnknownTable,
        &[],
    );
    leaks.provoke(
        "source_coverage_seq unknown table",
        s.source_coverage_seq(PART, &names(&[table])),
        ErrorCode::UnknownTable,
        &[],
    );
    leaks.provoke(
        "scan_rows without scope",
        s.scan_rows(
            PART,
            &RowScanQuery {
                table: "tasks".to_owned(),
                scope_filter: ScopeFilter::new(),
                after_row_id: None,
                limit: 10,
            },
        ),
        ErrorCode::ScanRequiresScope,
        &["tasks"],
    );
    leaks.provoke(
        "scan_partition_rows limit 0",
        s.scan_partition_rows(PART, "tasks", None, 0),
        ErrorCode::InvalidLimit,
        &["tasks"],
    );
    if caps.index_scan {
        let lookup = |index: &str, table: &str, values: Vec<RowValue>| IndexRowScanQuery {
            table: table.to_owned(),
            index: index.to_owned(),
            values,
            after_row_id: Some("zq-row-325".to_owned()),
            limit: 10,
        };
        leaks.provoke(
            "scan_rows_by_index unknown index",
            s.scan_rows_by_index(PART, &lookup("zq_index_325", "tasks", vec![RowValue::Null])),
            ErrorCode::IndexNotFound,
            &["tasks"],
        );
        leaks.provoke(
            "scan_rows_by_index non-materialized",
            s.scan_rows_by_index(
                PART,
                &lookup("zq_index_325", "secrets", vec![RowValue::Null]),
            ),
            ErrorCode::IndexNotMaterialized,
            &["secrets"],
        );
        leaks.provoke(
            "scan_rows_by_index value count",
            s.scan_rows_by_index(PART, &lookup("tasks_by_title", "tasks", Vec::new())),
            ErrorCode::IndexValueCountMismatch,
            &["tasks_by_title", "sync_ix_tasks_by_title", "title"],
        );
        leaks.provoke(
            "scan_rows_by_index value type",
            s.scan_rows_by_index(
                PART,
                &lookup(
                    "tasks_by_title",
                    "tasks",
                    vec![RowValue::Integer(987_654_321)],
                ),
            ),
            ErrorCode::IndexValueTypeMismatch,
            &["tasks_by_title", "987654321", "title"],
        );
    }
    leaks_in_transactions(&schema, s, leaks)?;
    leaks_in_checkpoints(s, leaks)?;
    leaks_in_registry(s, leaks)?;
    if caps.authoritative_query {
        let request = AuthoritativeQueryRequest {
            sql: "SELECT zq_col_325 FROM sync_changes".to_owned(),
            params: Vec::new(),
            tables: Vec::new(),
        };
        leaks.provoke(
            "query_authoritative reserved reference",
            s.query_authoritative(PART, &request, &ServeContext::default()),
            ErrorCode::QueryRejected,
            &["zq_col_325", "sync_changes", "SELECT"],
        );
    }
    if caps.reactions {
        leaks_in_reactions(s, leaks)?;
    }
    Ok(())
}

fn leaks_in_transactions(
    schema: &sync_core::CompiledSchema,
    s: &dyn ServerStorage,
    leaks: &mut Leaks<'_>,
) -> CheckResult {
    let first = task(schema, "zq-row-325", "zq-proj-325", "zq-title-325")?;
    let clash = task(schema, "zq-row-326", "zq-proj-325", "zq-title-325")?;
    let mut tx = s.begin(PART)?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &first, Some(0))?;
    tx.append_commit(&one_change_commit("zq-commit-325", "tasks", &first))?;
    tx.commit()?;

    let mut tx = s.begin(PART)?;
    tx.lock_partition_for_push()?;
    let mut unnamed = first.clone();
    unnamed.row_id = String::new();
    leaks.provoke(
        "upsert_row empty row id",
        tx.upsert_row("tasks", &unnamed, Some(0)),
        ErrorCode::InvalidRowId,
        &["tasks"],
    );
    let mut invalid = one_change_commit("zq-commit-326", "tasks", &first);
    invalid.changes[0].payload = None;
    leaks.provoke(
        "append_commit invalid change",
        tx.append_commit(&invalid),
        ErrorCode::InvalidChange,
        &["zq-commit-326", "tasks"],
    );
    leaks.provoke(
        "upsert_row unique clash",
        tx.upsert_row("tasks", &clash, Some(0)),
        ErrorCode::ConstraintViolation,
        &[
            "zq-row-326",
            "zq-proj-325",
            "tasks_by_project_title",
            "sync_ix_tasks_by_project_title",
            "tasks",
        ],
    );
    leaks.provoke(
        "call after poisoning",
        tx.get_row("tasks", "zq-row-325"),
        ErrorCode::TransactionAborted,
        &["tasks"],
    );
    tx.rollback()?;

    let tx = s.begin(PART)?;
    leaks.provoke(
        "commit_rejected_push_result without lock",
        tx.commit_rejected_push_result(
            "zq-client-325",
            "zq-commit-327",
            &StoredPushResult::applied(1),
        ),
        ErrorCode::PushLockRequired,
        &["zq-commit-327"],
    );

    Ok(())
}

fn leaks_in_checkpoints(s: &dyn ServerStorage, leaks: &mut Leaks<'_>) -> CheckResult {
    let ckpt = "zq_ckpt_325";
    let tasks = names(&["tasks"]);
    leaks.provoke(
        "claim absent checkpoint",
        s.claim_checkpoint(PART, ckpt, 1, NOW),
        ErrorCode::CheckpointNotDeclared,
        &[],
    );
    leaks.provoke(
        "declare at a future version",
        s.declare_checkpoint(PART, ckpt, 2, NOW),
        ErrorCode::CheckpointDeclarationInvalid,
        &[],
    );
    leaks.provoke(
        "declare with a 129-byte name",
        s.declare_checkpoint(PART, &"zq".repeat(65), 1, NOW),
        ErrorCode::InvalidArgument,
        &["zqzqzqzq"],
    );
    s.declare_checkpoint(PART, ckpt, 1, NOW)?;
    leaks.provoke(
        "claim at another version",
        s.claim_checkpoint(PART, ckpt, 2, NOW),
        ErrorCode::CheckpointVersionMismatch,
        &[],
    );
    let claimed = s.claim_checkpoint(PART, ckpt, 1, NOW)?;
    leaks.provoke(
        "advance ahead of the log",
        s.advance_checkpoint(PART, ckpt, claimed.owner_epoch, 7_777, 0, NOW),
        ErrorCode::CheckpointWatermarkInvalid,
        &["7777"],
    );
    leaks.provoke(
        "activate with a negative watermark",
        s.activate_checkpoint(PART, ckpt, claimed.owner_epoch, -4_444, &tasks, NOW),
        ErrorCode::CheckpointWatermarkInvalid,
        &["4444", "tasks"],
    );
    Ok(())
}

fn leaks_in_registry(s: &dyn ServerStorage, leaks: &mut Leaks<'_>) -> CheckResult {
    s.touch_partition(PART, NOW, "zq-epoch-325")?;
    leaks.provoke(
        "prune with another epoch",
        s.prune_commits_through(
            PART,
            &CommitPruneQuery {
                log_epoch: "zq-epoch-999".to_owned(),
                through_seq: 0,
            },
        ),
        ErrorCode::PruneEpochMismatch,
        &["zq-epoch-999"],
    );
    leaks.provoke(
        "touch with an empty epoch",
        s.touch_partition(PART, NOW, ""),
        ErrorCode::InvalidLogEpoch,
        &[],
    );
    leaks.provoke(
        "put_client_record with an empty client id",
        s.put_client_record(
            PART,
            &ClientRecord {
                client_id: String::new(),
                actor_id: "zq-actor-325".to_owned(),
                wire_version: 1,
                cursor: 0,
                updated_at_ms: NOW,
                subscriptions: Vec::new(),
            },
        ),
        ErrorCode::InvalidArgument,
        &["zq-actor-325"],
    );
    Ok(())
}

fn leaks_in_reactions(s: &dyn ServerStorage, leaks: &mut Leaks<'_>) -> CheckResult {
    let reaction = NewReaction {
        idempotency_key: "zq-key-325".to_owned(),
        kind: "zq-kind-325".to_owned(),
        version: 1,
        payload: json!({"secret": "zq-payload-325"}),
        source_client_id: "zq-client-325".to_owned(),
        source_client_commit_id: "zq-commit-329".to_owned(),
        source_commit_seq: 1,
        created_at_ms: NOW,
        max_attempts: 3,
    };
    let mut tx = s.begin(PART)?;
    tx.lock_partition_for_push()?;
    tx.enqueue_reactions(std::slice::from_ref(&reaction))?;
    tx.commit()?;
    let mut tx = s.begin(PART)?;
    tx.lock_partition_for_push()?;
    leaks.provoke(
        "enqueue a duplicate reaction",
        tx.enqueue_reactions(std::slice::from_ref(&reaction)),
        ErrorCode::DuplicateReaction,
        &["zq-key-325", "zq-kind-325", "zq-payload-325"],
    );
    tx.rollback()?;
    Ok(())
}

/// Schema-level `sync.storage.*` errors of `ensure_schema`, each on its own database.
fn leaks_in_ensure(ctx: &mut Ctx<'_>, leaks: &mut Leaks<'_>) -> CheckResult {
    let harness = ctx.harness();
    let clock: std::sync::Arc<dyn sync_core::Clock> = ctx.clock.clone();
    let fresh = |ctx: &Ctx<'_>| -> CheckResult<(crate::harness::DbHandle, Box<dyn crate::harness::RawAccess>)> {
        let db = ctx.extra_db()?;
        let raw = harness.raw(&db)?;
        Ok((db, raw))
    };
    let open = |db: &crate::harness::DbHandle| harness.open(db, clock.clone());
    let v1 = fix1()?;

    // Newer database, physical mismatch, stored mismatch, corrupt layouts, refused bump.
    let (db, raw) = fresh(ctx)?;
    open(&db)?.ensure_schema(&fix1_at(5)?, &no_opts())?;
    leaks.provoke(
        "older code",
        open(&db)?.ensure_schema(&v1, &no_opts()),
        ErrorCode::SchemaNewerThanCode,
        &["5"],
    );
    drop(raw);

    let (db, raw) = fresh(ctx)?;
    open(&db)?.ensure_schema(&v1, &no_opts())?;
    raw.drop_column("tasks", "priority")?;
    leaks.provoke(
        "dropped projection column",
        open(&db)?.ensure_schema(&v1, &no_opts()),
        ErrorCode::PhysicalLayoutMismatch,
        &["priority", "tasks"],
    );
    raw.drop_table("tasks")?;
    leaks.provoke(
        "dropped table",
        open(&db)?.ensure_schema(&v1, &no_opts()),
        ErrorCode::PhysicalLayoutMismatch,
        &["tasks"],
    );

    let (db, raw) = fresh(ctx)?;
    open(&db)?.ensure_schema(&v1, &no_opts())?;
    raw.drop_index("sync_ix_tasks_by_title")?;
    leaks.provoke(
        "dropped owned index",
        open(&db)?.ensure_schema(&v1, &no_opts()),
        ErrorCode::PhysicalLayoutMismatch,
        &["sync_ix_tasks_by_title", "tasks_by_title", "tasks"],
    );

    let (db, raw) = fresh(ctx)?;
    open(&db)?.ensure_schema(&v1, &no_opts())?;
    let layouts = sync_schema::layouts_json(&v1);
    let body = layouts.strip_suffix('}').unwrap_or(&layouts);
    let ghost = format!("{body},\"zq_table_325\":[]}}");
    raw.set_layouts_text(Some(&ghost))?;
    leaks.provoke(
        "extra stored table",
        open(&db)?.ensure_schema(&v1, &no_opts()),
        ErrorCode::StoredLayoutMismatch,
        &[],
    );
    raw.set_layouts_text(Some("zq-layouts-325"))?;
    leaks.provoke(
        "corrupt layouts",
        open(&db)?.ensure_schema(&v1, &no_opts()),
        ErrorCode::LayoutsCorrupt,
        &["zq-layouts-325"],
    );
    raw.set_layouts_text(Some(&layouts))?;
    let refused = fix1_variant(2, |s| {
        s["tables"][TASKS]["columns"][4]["type"] = json!("string")
    })?;
    leaks.provoke(
        "refused bump",
        open(&db)?.ensure_schema(&refused, &no_opts()),
        ErrorCode::MigrationRefused,
        &["priority", "tasks"],
    );

    let (db, _raw) = fresh(ctx)?;
    let pending = open(&db)?;
    pending.ensure_schema(&v1, &no_opts())?;
    pending.declare_checkpoint(PART, "zq_ckpt_325", 1, NOW)?;
    leaks.provoke(
        "pending checkpoint",
        open(&db)?.ensure_schema(&v1, &no_opts()),
        ErrorCode::CheckpointIncomplete,
        &[],
    );
    let fenced = open(&db)?;
    let mut tx = fenced.begin(PART)?;
    tx.lock_partition_for_push()?;
    leaks.provoke(
        "writer fence",
        tx.append_commit(&NewCommit {
            client_id: "zq-client-325".to_owned(),
            client_commit_id: "zq-commit-330".to_owned(),
            actor_id: "zq-actor-325".to_owned(),
            created_at_ms: NOW,
            changes: Vec::new(),
        }),
        ErrorCode::WriterFenceRejected,
        &["zq-commit-330", "zq-actor-325"],
    );
    tx.rollback()?;
    Ok(())
}
