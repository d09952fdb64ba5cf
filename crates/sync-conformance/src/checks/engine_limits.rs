//! `engine.md` §8 item 8: bounded rounds — subscriptions per request,
//! payload bytes per operation, and the response byte budget (E-094…E-096).

use sync_core::{RowValue, StoredRow};
use sync_engine::{
    PushResultStatus, SectionStatus, Subscription, SyncRequest, WireError,
    DEFAULT_MAX_SUBSCRIPTIONS, DEFAULT_RESPONSE_BUDGET_BYTES,
};

use super::engine_entry::GROUP;
use super::engine_fixture::{seed, task_payload_values, P};
use super::engine_round::{
    commit, env, expect_applied, pull_req, push_req, run, sub_p1, up, Env, Round,
};
use crate::check::{CheckDef, CheckResult};
use crate::context::Ctx;
use crate::fixtures::{scopes, task_values, Op};
use crate::registry::check;
use crate::{check, check_eq};

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "E-094",
        "subscriptions one above the limit refuse the request",
        e094_subscription_limit,
    ),
    check(
        GROUP,
        "E-095",
        "an operation payload one byte above the limit refuses the request",
        e095_payload_limit,
    ),
    check(
        GROUP,
        "E-096",
        "the response byte budget ends sections early; later pulls continue",
        e096_response_budget,
    ),
];

/// Fails unless `error` is `sync.invalid_request` naming `limit`.
fn expect_limit(round: &Round, limit: &str) -> CheckResult<WireError> {
    check!(
        round.items.is_empty(),
        "items before a request-level refusal: {:?}",
        round.items
    );
    let error = round.expect_error("sync.invalid_request")?.clone();
    let named = error
        .details
        .as_ref()
        .and_then(|d| d.get("limit"))
        .and_then(|l| l.as_str());
    check_eq!(named, Some(limit), "details.limit of {error:?}");
    Ok(error)
}

fn subs(n: usize) -> Vec<Subscription> {
    (0..n).map(|i| sub_p1(&format!("s{i}"), -1)).collect()
}

fn e094_subscription_limit(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let over = run(
        &engine,
        "alice",
        pull_req("dev-a", subs(DEFAULT_MAX_SUBSCRIPTIONS + 1)),
    );
    expect_limit(&over, "subscriptions")?;
    check_eq!(env.resolver.calls(), 0, "resolver calls");
    check!(
        env.storage.get_client_record(P, "dev-a")?.is_none(),
        "a refused request wrote a client record"
    );
    let at = run(
        &engine,
        "alice",
        pull_req("dev-a", subs(DEFAULT_MAX_SUBSCRIPTIONS)),
    );
    at.ok()?;
    check_eq!(
        at.sections().len(),
        DEFAULT_MAX_SUBSCRIPTIONS,
        "sections at the limit"
    );
    Ok(())
}

fn e095_payload_limit(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let payload = env.task("t1", "p1")?;
    let request = || {
        push_req(
            "dev-a",
            vec![commit("c1", vec![up("tasks", "t1", None, payload.clone())])],
        )
    };
    let tight = env.engine_with(|c| c.limits.max_payload_bytes = payload.len() - 1)?;
    expect_limit(&run(&tight, "alice", request()), "payload_bytes")?;
    check_eq!(env.max_seq()?, 0, "max_commit_seq after the refusal");
    check!(
        env.storage.get_push_result(P, "dev-a", "c1")?.is_none(),
        "a refused request stored a push result"
    );
    check!(
        env.storage.get_row(P, "tasks", "t1")?.is_none(),
        "a refused request stored the row"
    );
    let exact = env.engine_with(|c| c.limits.max_payload_bytes = payload.len())?;
    let applied = run(&exact, "alice", request());
    applied.ok()?;
    expect_applied(applied.result(0)?, PushResultStatus::Applied, 1)?;
    Ok(())
}

/// Seeds `tasks/id` in p1 with a `thumb` of `bytes` bytes; returns its seq
/// and the measure of the row (row id + payload).
fn seed_big(env: &Env, id: &str, bytes: usize) -> CheckResult<(i64, usize)> {
    let mut values = task_values(&env.schema, id, "p1", id);
    values[7] = RowValue::Bytes(vec![7; bytes]);
    let payload = task_payload_values(&env.schema, &values)?;
    let size = id.len() + payload.len();
    let row = StoredRow {
        row_id: id.to_owned(),
        server_version: 1,
        scopes: scopes(&[("project_id", "p1")]),
        payload,
        column_versions: None,
    };
    Ok((
        seed(env.storage.as_ref(), P, id, &[Op::upsert("tasks", row)])?,
        size,
    ))
}

/// The data bytes a round emitted, by the engine's measure (row ids,
/// payloads, scopes, actors).
fn emitted(round: &Round) -> usize {
    round
        .sections()
        .iter()
        .map(|s| {
            let rows: usize = s
                .pages
                .iter()
                .flat_map(|p| &p.rows)
                .map(|r| r.row_id.len() + r.row.len())
                .sum();
            let commits: usize = s
                .commits
                .iter()
                .map(|c| {
                    c.actor_id.len()
                        + c.changes
                            .iter()
                            .map(|ch| {
                                ch.row_id.len()
                                    + ch.scopes
                                        .iter()
                                        .map(|(k, v)| k.len() + v.len())
                                        .sum::<usize>()
                                    + ch.row.as_ref().map_or(0, Vec::len)
                            })
                            .sum::<usize>()
                })
                .sum();
            rows + commits
        })
        .sum()
}

/// The next pull of `subs` from what `round` answered each of them.
fn continue_from(round: &Round, subs: &[Subscription]) -> CheckResult<Vec<Subscription>> {
    let sections = round.sections();
    check_eq!(sections.len(), subs.len(), "sections");
    subs.iter()
        .zip(&sections)
        .map(|(sub, section)| {
            check_eq!(section.start.id, sub.id, "section order");
            let end = section.end()?;
            let mut next = sub.clone();
            next.cursor = end.next_cursor;
            next.bootstrap_state = end.bootstrap_state.clone();
            Ok(next)
        })
        .collect()
}

fn pull_of(subs: Vec<Subscription>) -> SyncRequest {
    pull_req("dev-a", subs)
}

fn e096_response_budget(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let (pin, row) = seed_big(&env, "big", 2_000_000)?;
    let budget = DEFAULT_RESPONSE_BUDGET_BYTES;
    let engine = env.engine_with(|c| c.limits.max_subscriptions_per_request = 200)?;
    let mut current = subs(200);
    let mut received = vec![0usize; 200];
    for pull in 0.. {
        check!(pull < 40, "the bootstrap did not finish in 40 pulls");
        let round = run(&engine, "alice", pull_of(current.clone()));
        round.ok()?;
        let bytes = emitted(&round);
        check!(
            bytes <= budget + row,
            "pull {pull} emitted {bytes} bytes, budget {budget} + one row {row}"
        );
        for (i, section) in round.sections().iter().enumerate() {
            check!(
                section.start.status == SectionStatus::Active,
                "section {i} of pull {pull}: {:?}",
                section.start
            );
            received[i] += section.pages.iter().map(|p| p.rows.len()).sum::<usize>();
            let end = section.end()?;
            check_eq!(
                end.next_cursor,
                pin,
                "nextCursor of section {i}, pull {pull}"
            );
            if section.pages.is_empty() && section.start.bootstrap {
                let token = format!(
                    r#"{{"asOfCommitSeq":{pin},"tables":["tasks"],"tableIndex":0,"rowCursor":null}}"#
                );
                check_eq!(
                    end.bootstrap_state.as_deref(),
                    Some(token.as_str()),
                    "token of unstarted section {i}, pull {pull}"
                );
            }
        }
        if pull == 0 {
            check!(
                received.contains(&0),
                "the first pull delivered every section: no budget applied"
            );
        }
        let next = continue_from(&round, &current)?;
        let done = next.iter().all(|s| s.bootstrap_state.is_none());
        current = next;
        if done {
            break;
        }
    }
    check!(
        received.iter().all(|&n| n == 1),
        "rows received per subscription: {received:?}"
    );

    // Incremental windows stop at a commit once the budget is reached.
    let seqs: Vec<i64> = (1..=4)
        .map(|i| Ok(seed_big(&env, &format!("w{i}"), 2_000_000)?.0))
        .collect::<CheckResult<_>>()?;
    let small = env.engine_with(|c| c.limits.response_budget_bytes = 5_000_000)?;
    let first = run(&small, "alice", pull_of(vec![sub_p1("w", pin)]));
    first.ok()?;
    let section = first.section()?;
    check_eq!(section.seqs(), seqs[..3].to_vec(), "first window");
    check_eq!(
        section.end()?.next_cursor,
        seqs[2],
        "first window nextCursor"
    );
    let second = run(&small, "alice", pull_of(vec![sub_p1("w", seqs[2])]));
    second.ok()?;
    let section = second.section()?;
    check_eq!(section.seqs(), seqs[3..].to_vec(), "second window");
    check_eq!(
        section.end()?.next_cursor,
        seqs[3],
        "second window nextCursor"
    );

    // A bootstrap page ends inside the page once the budget is used up
    // (after big, w1 and w2: 6 MB against 5 MB), and the next round resumes
    // after its last row: nothing skipped or repeated.
    let all = bootstrap_rounds(&engine, 1000)?.concat();
    check!(all.len() >= 5, "rows of p1: {all:?}");
    let cut = bootstrap_rounds(&small, 1000)?;
    check!(
        cut.len() > 1,
        "the 5 MB budget did not end the first page early: {cut:?}"
    );
    check_eq!(cut.concat(), all, "rows over the budgeted rounds");
    // A page filled exactly by the last rows completes the bootstrap: no
    // cursor, no second round.
    let exact = bootstrap_rounds(&engine, i32::try_from(all.len()).unwrap_or(i32::MAX))?;
    check_eq!(exact.len(), 1, "rounds of an exactly full page");
    check_eq!(exact.concat(), all, "rows of an exactly full page");
    Ok(())
}

/// The row ids a bootstrap of `p1` delivers, one list per round, with
/// pages of `page_rows` rows and one page a round, until it completes.
fn bootstrap_rounds(engine: &sync_engine::Engine, page_rows: i32) -> CheckResult<Vec<Vec<String>>> {
    let mut rounds = Vec::new();
    let mut sub = sub_p1("boot", -1);
    loop {
        check!(
            rounds.len() < 20,
            "the bootstrap did not finish in 20 rounds"
        );
        let mut req = pull_of(vec![sub.clone()]);
        req.pull = Some(sync_engine::PullHeader {
            limit_snapshot_rows: page_rows,
            max_snapshot_pages: 1,
            ..sync_engine::PullHeader::default()
        });
        let round = run(engine, "alice", req);
        round.ok()?;
        let section = round.section()?;
        rounds.push(
            section
                .pages
                .iter()
                .flat_map(|p| &p.rows)
                .map(|r| r.row_id.clone())
                .collect::<Vec<_>>(),
        );
        let end = section.end()?;
        match &end.bootstrap_state {
            Some(state) => {
                sub.cursor = end.next_cursor;
                sub.bootstrap_state = Some(state.clone());
            }
            None => return Ok(rounds),
        }
    }
}
