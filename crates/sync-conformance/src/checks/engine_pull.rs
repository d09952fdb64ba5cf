//! `engine.md` §3.2 and §5: effective scopes and revocation, bootstrap
//! paging and resume tokens, incremental windows, the horizon rules, deletes
//! in pulls and the client record — E-064…E-078.

use std::sync::Arc;

use sync_core::{ClientSubscription, CommitPruneQuery};
use sync_engine::{OpKind, PullHeader, SectionStatus, SubEnd, SubStart, Subscription};

use super::engine_doubles::{scope_map, HookLog, ResolverMode};
use super::engine_fixture::{seed, seed_empty_commits, seed_task_commits, task_row, P};
use super::engine_round::{
    commit, del, env, expect_applied, expect_rejected, pull_req, push_req, run, scopes, sub,
    sub_p1, up, Section, EPOCH,
};
use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::Ctx;
use crate::fixtures::{doc, Op};
use crate::registry::check;
use crate::{check, check_eq};

use super::engine_entry::GROUP;

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "E-064",
        "bootstrap pages, resume token and resume",
        e064_bootstrap_paging,
    ),
    check(
        GROUP,
        "E-065",
        "an empty scope bootstraps as one empty page",
        e065_empty_bootstrap,
    ),
    check(
        GROUP,
        "E-066",
        "incremental windows stop at limitCommits and resume",
        e066_incremental_paging,
    ),
    check(
        GROUP,
        "E-067",
        "a commit larger than the limit is delivered whole and alone; one past it waits",
        e067_commit_never_split,
    ),
    check(
        GROUP,
        "E-068",
        "a quiet subscription advances to max_seq",
        e068_quiet_subscription,
    ),
    check(
        GROUP,
        "E-069",
        "a cursor below the horizon is reset; at the horizon incremental",
        e069_horizon_reset,
    ),
    check(
        GROUP,
        "E-070",
        "a prune after L2 turns the section into a reset",
        e070_prune_during_pull,
    ),
    check(
        GROUP,
        "E-071",
        "a resume pin behind the horizon starts a fresh bootstrap",
        e071_pin_behind_horizon,
    ),
    check(
        GROUP,
        "E-072",
        "an unusable token starts a fresh bootstrap, never incremental",
        e072_unusable_token,
    ),
    check(
        GROUP,
        "E-073",
        "a cursor beyond max_seq bootstraps",
        e073_cursor_from_future,
    ),
    check(
        GROUP,
        "E-074",
        "a failed resolver revokes sections and forbids pushes",
        e074_resolver_failed,
    ),
    check(
        GROUP,
        "E-075",
        "effective scopes are requested ∩ allowed",
        e075_effective_scopes,
    ),
    check(
        GROUP,
        "E-076",
        "a two-variable subscription matches both variables",
        e076_two_variable_scopes,
    ),
    check(
        GROUP,
        "E-077",
        "a delete reaches the window without version or row",
        e077_delete_in_window,
    ),
    check(
        GROUP,
        "E-078",
        "the client record: min active cursor, subscriptions, push-only",
        e078_client_record,
    ),
];

fn limits(commits: i32, rows: i32, pages: i32) -> PullHeader {
    PullHeader {
        limit_commits: commits,
        limit_snapshot_rows: rows,
        max_snapshot_pages: pages,
        ..PullHeader::default()
    }
}

fn pull_with(header: PullHeader, subs: Vec<Subscription>) -> sync_engine::SyncRequest {
    let mut req = pull_req("dev-a", subs);
    req.pull = Some(header);
    req
}

fn expect_start(start: &SubStart, status: SectionStatus, bootstrap: bool) -> CheckResult {
    check!(
        start.status == status && start.bootstrap == bootstrap,
        "expected SubStart {} bootstrap={bootstrap}, got {start:?}",
        status.as_str()
    );
    Ok(())
}

pub(crate) fn expect_end(section: &Section<'_>, next: i64, token: Option<&str>) -> CheckResult {
    let expected = SubEnd {
        next_cursor: next,
        bootstrap_state: token.map(str::to_owned),
    };
    check_eq!(section.end()?, &expected, "SubEnd of {}", section.start.id);
    Ok(())
}

/// A `reset` or `revoked` section with this reason, echoing `cursor`.
pub(crate) fn expect_dataless(
    section: &Section<'_>,
    status: SectionStatus,
    reason: &str,
    cursor: i64,
) -> CheckResult {
    expect_start(section.start, status, false)?;
    check_eq!(section.start.reason_code, reason, "reasonCode");
    check!(
        section.start.effective_scopes.is_empty(),
        "effective scopes of a {} section",
        status.as_str()
    );
    check!(
        section.commits.is_empty() && section.pages.is_empty(),
        "data in a {} section",
        status.as_str()
    );
    expect_end(section, cursor, None)
}

/// A fresh bootstrap section: first page starts at the beginning, pinned at `pin`.
fn expect_fresh_bootstrap(section: &Section<'_>, pin: i64) -> CheckResult {
    expect_start(section.start, SectionStatus::Active, true)?;
    let first = section
        .pages
        .first()
        .ok_or_else(|| Failure::new("bootstrap without a page"))?;
    check_eq!(
        (first.row_cursor.clone(), first.as_of_commit_seq),
        (None, pin),
        "(first page rowCursor, pin)"
    );
    check!(section.commits.is_empty(), "commits in a bootstrap section");
    Ok(())
}

fn ids(page: &sync_engine::BootstrapPage) -> Vec<String> {
    page.rows.iter().map(|r| r.row_id.clone()).collect()
}

fn e064_bootstrap_paging(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let rows: Vec<Op> = (0..2500)
        .map(|i| {
            Ok(Op::upsert(
                "tasks",
                task_row(&env.schema, &format!("t{i:04}"), "p1", 1)?,
            ))
        })
        .collect::<CheckResult<_>>()?;
    let max = seed(env.storage.as_ref(), P, "seed", &rows)?;
    let engine = env.engine()?;
    let round = run(
        &engine,
        "alice",
        pull_with(limits(0, 1000, 2), vec![sub_p1("s", -1)]),
    );
    round.ok()?;
    let section = round.section()?;
    expect_start(section.start, SectionStatus::Active, true)?;
    check_eq!(section.pages.len(), 2, "pages");
    let id = |i: usize| format!("t{i:04}");
    for (n, page) in section.pages.iter().enumerate() {
        check_eq!(
            ids(page),
            (n * 1000..(n + 1) * 1000).map(id).collect::<Vec<_>>(),
            "page {n} ids"
        );
        check_eq!(page.as_of_commit_seq, max, "page {n} pin");
        check_eq!(
            page.row_cursor,
            (n == 1).then(|| id(999)),
            "page {n} rowCursor"
        );
        check_eq!(
            page.next_row_cursor,
            Some(id(n * 1000 + 999)),
            "page {n} nextRowCursor"
        );
        check!(
            page.rows.iter().all(|r| r.row_version == 1),
            "page {n} versions"
        );
    }
    let stored = env
        .storage
        .get_row(P, "tasks", "t0000")?
        .ok_or_else(|| Failure::new("t0000"))?;
    check_eq!(section.pages[0].rows[0].row, stored.payload, "row bytes");
    let token = format!(
        r#"{{"asOfCommitSeq":{max},"tables":["tasks"],"tableIndex":0,"rowCursor":"t1999"}}"#
    );
    expect_end(&section, max, Some(&token))?;
    let mut resume = sub_p1("s", max);
    resume.bootstrap_state = Some(token);
    let round = run(
        &engine,
        "alice",
        pull_with(limits(0, 1000, 2), vec![resume]),
    );
    let section = round.section()?;
    expect_start(section.start, SectionStatus::Active, true)?;
    check_eq!(section.pages.len(), 1, "resumed pages");
    let page = section.pages[0];
    check_eq!(
        ids(page),
        (2000..2500).map(id).collect::<Vec<_>>(),
        "resumed ids"
    );
    check_eq!(
        (page.row_cursor.clone(), page.next_row_cursor.clone()),
        (Some(id(1999)), None),
        "resumed cursors"
    );
    expect_end(&section, max, None)
}

fn e065_empty_bootstrap(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 1, "p2")?;
    let engine = env.engine()?;
    let round = run(&engine, "alice", pull_req("dev-a", vec![sub_p1("s", -1)]));
    let section = round.section()?;
    expect_fresh_bootstrap(&section, 1)?;
    check_eq!(section.pages.len(), 1, "pages");
    check!(section.pages[0].rows.is_empty(), "rows on the empty page");
    expect_end(&section, 1, None)
}

fn e066_incremental_paging(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_empty_commits(env.storage.as_ref(), P, 10)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 10, "p1")?;
    let engine = env.engine()?;
    let first = run(
        &engine,
        "alice",
        pull_with(limits(5, 0, 0), vec![sub_p1("s", 10)]),
    );
    let section = first.section()?;
    expect_start(section.start, SectionStatus::Active, false)?;
    check_eq!(
        section.seqs(),
        (11..=15).collect::<Vec<i64>>(),
        "first window"
    );
    expect_end(&section, 15, None)?;
    let second = run(
        &engine,
        "alice",
        pull_with(limits(5, 0, 0), vec![sub_p1("s", 15)]),
    );
    let section = second.section()?;
    check_eq!(
        section.seqs(),
        (16..=20).collect::<Vec<i64>>(),
        "second window"
    );
    expect_end(&section, 20, None)
}

fn e067_commit_never_split(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let big: Vec<Op> = (0..7)
        .map(|i| {
            Ok(Op::upsert(
                "tasks",
                task_row(&env.schema, &format!("b{i}"), "p1", 1)?,
            ))
        })
        .collect::<CheckResult<_>>()?;
    seed(env.storage.as_ref(), P, "big", &big)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 1, "p1")?;
    let engine = env.engine()?;
    let round = run(
        &engine,
        "alice",
        pull_with(limits(5, 0, 0), vec![sub_p1("s", 0)]),
    );
    let section = round.section()?;
    let expected: Vec<String> = (0..7).map(|i| format!("b{i}")).collect();
    check_eq!(
        section.commit_rows(),
        vec![(1, expected)],
        "delivered commits"
    );
    expect_end(&section, 1, None)?;
    // After a delivered commit, one that would take the window past the
    // limit waits whole for the next window: seq 2 (one change), then seq
    // 3 (five changes), a window of 5 delivers seq 2 only.
    let five: Vec<Op> = (0..5)
        .map(|i| {
            Ok(Op::upsert(
                "tasks",
                task_row(&env.schema, &format!("f{i}"), "p1", 1)?,
            ))
        })
        .collect::<CheckResult<_>>()?;
    seed(env.storage.as_ref(), P, "five", &five)?;
    let window = |cursor| {
        run(
            &engine,
            "alice",
            pull_with(limits(5, 0, 0), vec![sub_p1("s", cursor)]),
        )
    };
    let round = window(1);
    let section = round.section()?;
    check_eq!(
        section.commit_rows(),
        vec![(2, vec!["r0000".to_owned()])],
        "window before a commit past the limit"
    );
    expect_end(&section, 2, None)?;
    let round = window(2);
    let section = round.section()?;
    let expected: Vec<String> = (0..5).map(|i| format!("f{i}")).collect();
    check_eq!(
        section.commit_rows(),
        vec![(3, expected)],
        "the next window"
    );
    expect_end(&section, 3, None)
}

fn e068_quiet_subscription(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_empty_commits(env.storage.as_ref(), P, 40)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 10, "p2")?;
    let engine = env.engine()?;
    let round = run(&engine, "alice", pull_req("dev-a", vec![sub_p1("s", 10)]));
    let section = round.section()?;
    expect_start(section.start, SectionStatus::Active, false)?;
    check!(
        section.commits.is_empty(),
        "commits delivered: {:?}",
        section.seqs()
    );
    expect_end(&section, 50, None)
}

fn e069_horizon_reset(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 10, "p1")?;
    env.storage.set_horizon_seq(P, 5)?;
    let engine = env.engine()?;
    let round = run(
        &engine,
        "alice",
        pull_req("dev-a", vec![sub_p1("old", 3), sub_p1("edge", 5)]),
    );
    let sections = round.sections();
    check_eq!(sections.len(), 2, "sections");
    expect_dataless(&sections[0], SectionStatus::Reset, "sync.cursor_expired", 3)?;
    expect_start(sections[1].start, SectionStatus::Active, false)?;
    check_eq!(
        sections[1].seqs(),
        (6..=10).collect::<Vec<i64>>(),
        "window above the horizon"
    );
    expect_end(&sections[1], 10, None)
}

fn e070_prune_during_pull(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 20, "p1")?;
    let storage = env.storage.clone();
    let log = HookLog::default();
    let hook_log = log.clone();
    let engine = env.engine_with(|c| {
        c.test_hooks.after_l2 = Some(Arc::new(move || {
            let query = CommitPruneQuery {
                log_epoch: EPOCH.to_owned(),
                through_seq: 15,
            };
            if let Err(e) = storage.prune_commits_through(P, &query) {
                hook_log.note(format!("prune failed: {e:?}"));
            }
        }));
    })?;
    let round = run(&engine, "alice", pull_req("dev-a", vec![sub_p1("s", 10)]));
    log.check_empty()?;
    check_eq!(
        env.storage.get_horizon_seq(P)?,
        15,
        "horizon after the injected prune"
    );
    expect_dataless(
        &round.section()?,
        SectionStatus::Reset,
        "sync.cursor_expired",
        10,
    )
}

fn e071_pin_behind_horizon(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 10, "p1")?;
    env.storage.set_horizon_seq(P, 5)?;
    let engine = env.engine()?;
    let mut resume = sub_p1("s", 4);
    resume.bootstrap_state = Some(
        r#"{"asOfCommitSeq":4,"tables":["tasks"],"tableIndex":0,"rowCursor":"r0003"}"#.to_owned(),
    );
    let round = run(&engine, "alice", pull_req("dev-a", vec![resume]));
    let section = round.section()?;
    expect_fresh_bootstrap(&section, 10)?;
    check_eq!(
        section.pages[0].rows.first().map(|r| r.row_id.as_str()),
        Some("r0000"),
        "first row"
    );
    expect_end(&section, 10, None)
}

fn e072_unusable_token(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 5, "p1")?;
    let engine = env.engine()?;
    let tokens = [
        "x".to_owned(),
        r#"{"asOfCommitSeq":5,"tables":["projects","tasks"],"tableIndex":0,"rowCursor":"r0001"}"#
            .to_owned(),
        r#"{"asOfCommitSeq":9,"tables":["tasks"],"tableIndex":0,"rowCursor":"r0001"}"#.to_owned(),
    ];
    for token in tokens {
        let mut resume = sub_p1("s", 5);
        resume.bootstrap_state = Some(token.clone());
        let round = run(&engine, "alice", pull_req("dev-a", vec![resume]));
        let section = round.section()?;
        expect_fresh_bootstrap(&section, 5)
            .map_err(|f| Failure::new(format!("token {token}: {f}")))?;
        check_eq!(section.pages[0].rows.len(), 5, "rows for token {token}");
    }
    Ok(())
}

fn e073_cursor_from_future(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_empty_commits(env.storage.as_ref(), P, 49)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 1, "p1")?;
    let engine = env.engine()?;
    let round = run(&engine, "alice", pull_req("dev-a", vec![sub_p1("s", 999)]));
    let section = round.section()?;
    expect_fresh_bootstrap(&section, 50)?;
    expect_end(&section, 50, None)
}

fn e074_resolver_failed(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    env.resolver.set(ResolverMode::Failed);
    let engine = env.engine()?;
    let mut req = pull_req(
        "dev-a",
        vec![sub_p1("a", 7), sub("b", "docs", &[("org_id", &["o1"])], -1)],
    );
    req.pushes = vec![commit(
        "c1",
        vec![up("tasks", "t1", None, env.task("t1", "p1")?)],
    )];
    let round = run(&engine, "alice", req);
    round.ok()?;
    expect_rejected(round.result(0)?, 0, "sync.forbidden")?;
    let sections = round.sections();
    check_eq!(sections.len(), 2, "sections");
    expect_dataless(
        &sections[0],
        SectionStatus::Revoked,
        "sync.scope_revoked",
        7,
    )?;
    expect_dataless(
        &sections[1],
        SectionStatus::Revoked,
        "sync.scope_revoked",
        -1,
    )
}

fn e075_effective_scopes(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let both = || vec![sub("s", "tasks", &[("project_id", &["p1", "p2"])], -1)];
    let narrowed = run(&engine, "alice", pull_req("dev-a", both()));
    check_eq!(
        narrowed.section()?.start.effective_scopes,
        scopes(&[("project_id", &["p1"])]),
        "alice's effective scopes"
    );
    env.resolver
        .set(ResolverMode::Fixed(scope_map(&[("project_id", &["*"])])));
    let any = run(&engine, "alice", pull_req("dev-a", both()));
    check_eq!(
        any.section()?.start.effective_scopes,
        scopes(&[("project_id", &["p1", "p2"])]),
        "wildcard effective scopes"
    );
    env.resolver.set(ResolverMode::Fixture);
    let other = run(
        &engine,
        "alice",
        pull_req(
            "dev-a",
            vec![sub("s", "tasks", &[("project_id", &["p3"])], 4)],
        ),
    );
    expect_dataless(
        &other.section()?,
        SectionStatus::Revoked,
        "sync.scope_revoked",
        4,
    )
}

fn e076_two_variable_scopes(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let schema = crate::fixtures::fix1()?;
    for (n, (org, project)) in [("o1", "p1"), ("o1", "p2"), ("o2", "p1")]
        .into_iter()
        .enumerate()
    {
        let row = doc(&schema, &format!("d{n}"), org, project, None)?;
        seed(
            env.storage.as_ref(),
            P,
            &format!("d{n}"),
            &[Op::upsert("docs", row)],
        )?;
    }
    let engine = env.engine()?;
    let wanted = sub(
        "s",
        "docs",
        &[("org_id", &["o1"]), ("project_id", &["p1"])],
        0,
    );
    let round = run(&engine, "root", pull_req("dev-r", vec![wanted]));
    let section = round.section()?;
    check_eq!(
        section.commit_rows(),
        vec![(1, vec!["d0".to_owned()])],
        "delivered commits"
    );
    expect_end(&section, 3, None)
}

fn e077_delete_in_window(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 1, "p1")?;
    let engine = env.engine()?;
    let gone = run(
        &engine,
        "alice",
        push_req("dev-a", vec![commit("c1", vec![del("tasks", "r0000")])]),
    );
    let seq = expect_applied(gone.result(0)?, sync_engine::PushResultStatus::Applied, 1)?;
    let round = run(&engine, "alice", pull_req("dev-a", vec![sub_p1("s", 1)]));
    let section = round.section()?;
    check_eq!(section.commits.len(), 1, "commits");
    let item = section.commits[0];
    check_eq!(
        (item.commit_seq, item.actor_id.as_str(), item.tables.clone()),
        (seq, "alice", vec!["tasks".to_owned()]),
        "commit"
    );
    let change = &item.changes;
    check_eq!(change.len(), 1, "changes");
    let c = &change[0];
    check_eq!(
        (c.table_index, c.row_id.as_str(), c.op),
        (0, "r0000", OpKind::Delete),
        "change"
    );
    check_eq!(
        (c.row_version, c.row.clone()),
        (None, None),
        "delete rowVersion/row"
    );
    check_eq!(
        c.scopes,
        crate::fixtures::scopes(&[("project_id", "p1")]),
        "delete scopes"
    );
    Ok(())
}

fn e078_client_record(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task_commits(env.storage.as_ref(), &env.schema, "r", 50, "p1")?;
    env.storage.set_horizon_seq(P, 5)?;
    let engine = env.engine()?;
    let subs = vec![
        sub_p1("act", 30),
        sub_p1("boot", -1),
        sub("rev", "tasks", &[("project_id", &["p2"])], 3),
        sub_p1("res", 2),
    ];
    let round = run(&engine, "alice", pull_with(limits(10, 0, 0), subs.clone()));
    round.ok()?;
    let ends: Vec<i64> = round
        .sections()
        .iter()
        .map(|s| s.end().map(|e| e.next_cursor))
        .collect::<CheckResult<_>>()?;
    check_eq!(ends, [40, 50, 3, 2], "section cursors");
    let expected_subs: Vec<ClientSubscription> = subs
        .iter()
        .map(|s| ClientSubscription {
            id: s.id.clone(),
            table: s.table.clone(),
            scopes: s.scopes.clone(),
        })
        .collect();
    let record = |client: &str| -> CheckResult<_> {
        env.storage
            .get_client_record(P, client)?
            .ok_or_else(|| Failure::new(format!("no client record for {client}")))
    };
    let after_pull = record("dev-a")?;
    check_eq!(
        (
            after_pull.cursor,
            after_pull.wire_version,
            after_pull.actor_id.as_str()
        ),
        (40, 2, "alice"),
        "record (cursor, wire, actor)"
    );
    check_eq!(
        after_pull.subscriptions,
        expected_subs,
        "record subscriptions"
    );
    let push_only =
        |client: &str, ccid: &str| -> CheckResult<_> { env.insert_req(client, ccid, ccid, "p1") };
    run(&engine, "alice", push_only("dev-a", "x1")?).ok()?;
    let after_push = record("dev-a")?;
    check_eq!(
        (after_push.cursor, after_push.subscriptions),
        (40, expected_subs),
        "record after a push-only request"
    );
    run(&engine, "alice", push_only("dev-new", "x2")?).ok()?;
    let fresh = record("dev-new")?;
    check_eq!(
        (fresh.cursor, fresh.subscriptions.len()),
        (-1, 0),
        "first push-only record"
    );
    Ok(())
}
