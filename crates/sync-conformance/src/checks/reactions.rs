//! §7 Durable reactions, C-129…C-141.

use std::collections::BTreeMap;
use std::sync::Barrier;
use std::thread;

use serde_json::json;
use sync_core::{
    Capability, ErrorCode, NewReaction, PrunedReactionCounts, ReactionClaimQuery, ReactionFailure,
    ReactionFailureUpdate, ReactionListQuery, ReactionPruneQuery, ReactionStatus, ServerStorage,
    StoredReaction,
};

use crate::check::{expect_code, CheckDef, CheckResult, Failure};
use crate::checks::support_pdata::{append_changes, commit_at, joined, touch, EPOCH, P};
use crate::context::{Ctx, NOW};
use crate::fixtures::fix1;
use crate::harness::RawFilter;
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "reactions";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-129",
        "a committed enqueue is pending with attempts 0 and listed by status and type",
        c129_enqueue_committed,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-130",
        "an enqueue in a rolled-back transaction leaves no reaction and no commit",
        c130_enqueue_rolled_back,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-131",
        "enqueueing an existing idempotency key is duplicate_reaction",
        c131_duplicate_key,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-132",
        "claims with empty kinds or limit 0 return nothing and write nothing",
        c132_empty_claims,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-133",
        "two concurrent claims of limit 1 lease the reaction exactly once",
        c133_concurrent_claims,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-134",
        "an extended lease is reclaimable exactly at its new expiry",
        c134_extended_lease_expiry,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-135",
        "after a takeover the old owner cannot complete, the new owner can",
        c135_takeover_completion,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-136",
        "the owner completes after lease expiry when nobody reclaimed",
        c136_complete_after_expiry,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-137",
        "fail with retry, fail to dead-letter, retry_reaction",
        c137_fail_and_retry,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-138",
        "retry_reaction on a pending reaction is false",
        c138_retry_pending,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-139",
        "prune_reactions deletes the oldest aged rows first and spares the rest",
        c139_prune_reactions,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-140",
        "commit-log pruning keeps reactions of pruned commits",
        c140_log_prune_keeps_reactions,
    )
    .needs(Capability::Reactions),
    check(
        GROUP,
        "C-141",
        "list_reactions orders created_at_ms DESC, key DESC and honours limit",
        c141_list_order,
    )
    .needs(Capability::Reactions),
];

/// Lease duration of every claim in this group.
const LEASE_MS: i64 = 100;

fn reaction(key: &str, kind: &str, source_commit_seq: i64, created_at_ms: i64) -> NewReaction {
    NewReaction {
        idempotency_key: key.to_owned(),
        kind: kind.to_owned(),
        version: 1,
        payload: json!({"key": key, "n": [1, 2]}),
        source_client_id: "client-1".to_owned(),
        source_client_commit_id: format!("commit-{key}"),
        source_commit_seq,
        created_at_ms,
        max_attempts: 5,
    }
}

/// Appends one commit and enqueues `(key, kind, created_at_ms)` reactions
/// sourced from it, in one committed transaction. Returns the commit's seq.
fn enqueue(storage: &dyn ServerStorage, specs: &[(&str, &str, i64)]) -> CheckResult<i64> {
    let mut tx = storage.begin(P)?;
    tx.lock_partition_for_push()?;
    let seq = tx.append_commit(&commit_at(
        &format!("enqueue-{}", specs.first().map_or("none", |s| s.0)),
        NOW,
        Vec::new(),
    ))?;
    let reactions: Vec<NewReaction> = specs
        .iter()
        .map(|(key, kind, created)| reaction(key, kind, seq, *created))
        .collect();
    tx.enqueue_reactions(&reactions)?;
    tx.commit()?;
    Ok(seq)
}

fn claim_query(owner: &str, kinds: &[&str], now_ms: i64, limit: i64) -> ReactionClaimQuery {
    ReactionClaimQuery {
        lease_owner: owner.to_owned(),
        kinds: kinds.iter().map(|k| (*k).to_owned()).collect(),
        now_ms,
        lease_duration_ms: LEASE_MS,
        limit,
    }
}

fn claim(
    storage: &dyn ServerStorage,
    owner: &str,
    kinds: &[&str],
    now_ms: i64,
) -> CheckResult<Vec<StoredReaction>> {
    Ok(storage.claim_reactions(P, &claim_query(owner, kinds, now_ms, 10))?)
}

fn get(storage: &dyn ServerStorage, key: &str) -> CheckResult<StoredReaction> {
    storage
        .get_reaction(P, key)?
        .ok_or_else(|| Failure::new(format!("reaction {key} missing")))
}

fn keys(reactions: &[StoredReaction]) -> Vec<&str> {
    reactions
        .iter()
        .map(|r| r.idempotency_key.as_str())
        .collect()
}

fn failure(at_ms: i64) -> ReactionFailure {
    let mut details = BTreeMap::new();
    details.insert("attempt".to_owned(), json!(1));
    ReactionFailure {
        code: "worker.failed".to_owned(),
        at_ms,
        details: Some(details),
    }
}

fn fail(
    storage: &dyn ServerStorage,
    key: &str,
    owner: &str,
    at_ms: i64,
    retry_at_ms: Option<i64>,
) -> CheckResult<bool> {
    let update = ReactionFailureUpdate {
        lease_owner: owner.to_owned(),
        failure: failure(at_ms),
        retry_at_ms,
    };
    Ok(storage.fail_reaction(P, key, &update)?)
}

fn c129_enqueue_committed(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let created = NOW + 5;
    let seq = enqueue(storage.as_ref(), &[("r-1", "email", created)])?;
    check_eq!(seq, 1, "source commit seq");
    let stored = get(storage.as_ref(), "r-1")?;
    check_eq!(stored.status, ReactionStatus::Pending, "status");
    check_eq!(stored.source_commit_seq, 1, "source_commit_seq");
    check_eq!(stored.attempts, 0, "attempts");
    check_eq!(
        stored.available_at_ms,
        created,
        "available_at_ms = created_at_ms"
    );
    check_eq!(stored.created_at_ms, created, "created_at_ms");
    check_eq!(stored.kind, "email", "kind");
    check_eq!(
        stored.payload,
        json!({"key": "r-1", "n": [1, 2]}),
        "payload"
    );
    let listed = storage.list_reactions(
        P,
        &ReactionListQuery {
            statuses: vec![ReactionStatus::Pending],
            kinds: vec!["email".to_owned()],
            limit: 10,
        },
    )?;
    check_eq!(keys(&listed), ["r-1"], "list_reactions(pending, email)");
    Ok(())
}

fn c130_enqueue_rolled_back(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let mut tx = storage.begin(P)?;
    tx.lock_partition_for_push()?;
    let seq = tx.append_commit(&commit_at("c-1", NOW, Vec::new()))?;
    tx.enqueue_reactions(&[reaction("r-1", "email", seq, NOW)])?;
    tx.rollback()?;
    check!(
        storage.get_reaction(P, "r-1")?.is_none(),
        "a reaction enqueued in a rolled-back transaction exists"
    );
    check_eq!(
        storage.get_max_commit_seq(P)?,
        0,
        "max_commit_seq after rollback"
    );
    Ok(())
}

fn c131_duplicate_key(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    enqueue(storage.as_ref(), &[("r-1", "email", NOW)])?;
    let mut tx = storage.begin(P)?;
    tx.lock_partition_for_push()?;
    let seq = tx.append_commit(&commit_at("c-2", NOW, Vec::new()))?;
    expect_code(
        tx.enqueue_reactions(&[reaction("r-1", "other", seq, NOW + 1)]),
        ErrorCode::DuplicateReaction,
        "enqueue of an existing key",
    )?;
    tx.rollback()?;
    check_eq!(
        get(storage.as_ref(), "r-1")?.kind,
        "email",
        "original reaction kept"
    );
    Ok(())
}

fn c132_empty_claims(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    enqueue(storage.as_ref(), &[("r-1", "email", NOW)])?;
    let before = get(storage.as_ref(), "r-1")?;
    let empty_kinds = storage.claim_reactions(P, &claim_query("w-1", &[], NOW + 10, 10))?;
    check!(
        empty_kinds.is_empty(),
        "claim with empty kinds returned {empty_kinds:?}"
    );
    let zero_limit = storage.claim_reactions(P, &claim_query("w-1", &["email"], NOW + 10, 0))?;
    check!(
        zero_limit.is_empty(),
        "claim with limit 0 returned {zero_limit:?}"
    );
    check_eq!(
        get(storage.as_ref(), "r-1")?,
        before,
        "reaction after empty claims"
    );
    Ok(())
}

fn c133_concurrent_claims(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let first = ctx.ensured(&schema)?;
    let second = ctx.ensured(&schema)?;
    enqueue(first.as_ref(), &[("r-1", "email", NOW)])?;
    let barrier = Barrier::new(2);
    let query_a = claim_query("worker-a", &["email"], NOW + 10, 1);
    let query_b = claim_query("worker-b", &["email"], NOW + 10, 1);
    let (a, b) = thread::scope(|s| {
        let a = s.spawn(|| {
            barrier.wait();
            first.claim_reactions(P, &query_a)
        });
        let b = s.spawn(|| {
            barrier.wait();
            second.claim_reactions(P, &query_b)
        });
        (a.join(), b.join())
    });
    let (a, b) = (joined(a)??, joined(b)??);
    check_eq!(
        a.len() + b.len(),
        1,
        "reactions claimed in total (a: {a:?}, b: {b:?})"
    );
    let winner = if a.is_empty() { "worker-b" } else { "worker-a" };
    let stored = get(first.as_ref(), "r-1")?;
    check_eq!(stored.status, ReactionStatus::Leased, "status");
    check_eq!(stored.attempts, 1, "attempts");
    check_eq!(stored.lease_owner.as_deref(), Some(winner), "lease_owner");
    Ok(())
}

fn c134_extended_lease_expiry(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    enqueue(storage.as_ref(), &[("r-1", "email", NOW)])?;
    check_eq!(
        keys(&claim(storage.as_ref(), "w-1", &["email"], NOW)?),
        ["r-1"],
        "first claim"
    );
    check!(
        storage.extend_reaction_lease(P, "r-1", "w-1", NOW + 200)?,
        "extend_reaction_lease by the owner returned false"
    );
    let early = claim(storage.as_ref(), "w-2", &["email"], NOW + 199)?;
    check!(
        early.is_empty(),
        "claim before the extended expiry returned {early:?}"
    );
    let taken = claim(storage.as_ref(), "w-2", &["email"], NOW + 200)?;
    check_eq!(keys(&taken), ["r-1"], "claim at the extended expiry");
    let stored = get(storage.as_ref(), "r-1")?;
    check_eq!(stored.status, ReactionStatus::Leased, "status");
    check_eq!(stored.lease_owner.as_deref(), Some("w-2"), "lease_owner");
    check_eq!(stored.attempts, 2, "attempts");
    check_eq!(
        stored.lease_expires_at_ms,
        Some(NOW + 200 + LEASE_MS),
        "lease_expires_at_ms"
    );
    Ok(())
}

fn c135_takeover_completion(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    enqueue(storage.as_ref(), &[("r-1", "email", NOW)])?;
    check_eq!(
        keys(&claim(storage.as_ref(), "w-1", &["email"], NOW)?),
        ["r-1"],
        "first claim"
    );
    check_eq!(
        keys(&claim(storage.as_ref(), "w-2", &["email"], NOW + LEASE_MS)?),
        ["r-1"],
        "takeover at expiry"
    );
    check!(
        !storage.complete_reaction(P, "r-1", "w-1", NOW + LEASE_MS + 1)?,
        "the superseded owner completed the reaction"
    );
    check_eq!(
        get(storage.as_ref(), "r-1")?.status,
        ReactionStatus::Leased,
        "status after refused completion"
    );
    check!(
        storage.complete_reaction(P, "r-1", "w-2", NOW + LEASE_MS + 2)?,
        "the current owner could not complete"
    );
    let stored = get(storage.as_ref(), "r-1")?;
    check_eq!(stored.status, ReactionStatus::Completed, "status");
    check_eq!(
        stored.completed_at_ms,
        Some(NOW + LEASE_MS + 2),
        "completed_at_ms"
    );
    Ok(())
}

fn c136_complete_after_expiry(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    enqueue(storage.as_ref(), &[("r-1", "email", NOW)])?;
    check_eq!(
        keys(&claim(storage.as_ref(), "w-1", &["email"], NOW)?),
        ["r-1"],
        "claim"
    );
    let late = NOW + 5 * LEASE_MS;
    check!(
        storage.complete_reaction(P, "r-1", "w-1", late)?,
        "completion after lease expiry (not reclaimed) returned false"
    );
    let stored = get(storage.as_ref(), "r-1")?;
    check_eq!(stored.status, ReactionStatus::Completed, "status");
    check_eq!(stored.completed_at_ms, Some(late), "completed_at_ms");
    Ok(())
}

fn c137_fail_and_retry(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    enqueue(storage.as_ref(), &[("r-1", "email", NOW)])?;
    check_eq!(
        keys(&claim(storage.as_ref(), "w-1", &["email"], NOW)?),
        ["r-1"],
        "first claim"
    );
    let retry_at = NOW + 1_000;
    check!(
        fail(storage.as_ref(), "r-1", "w-1", NOW + 10, Some(retry_at))?,
        "fail with retry returned false"
    );
    let retried = get(storage.as_ref(), "r-1")?;
    check_eq!(
        retried.status,
        ReactionStatus::Pending,
        "status after fail with retry"
    );
    check_eq!(
        retried.available_at_ms,
        retry_at,
        "available_at_ms after fail with retry"
    );
    check_eq!(retried.attempts, 1, "attempts after fail with retry");
    check_eq!(
        retried.last_failure,
        Some(failure(NOW + 10)),
        "last_failure"
    );
    check_eq!(retried.lease_owner, None, "lease_owner after fail");
    check!(
        claim(storage.as_ref(), "w-2", &["email"], retry_at - 1)?.is_empty(),
        "claimed before the retry time"
    );
    check_eq!(
        keys(&claim(storage.as_ref(), "w-2", &["email"], retry_at)?),
        ["r-1"],
        "reclaim at retry time"
    );
    check!(
        fail(storage.as_ref(), "r-1", "w-2", retry_at + 10, None)?,
        "fail without retry returned false"
    );
    let dead = get(storage.as_ref(), "r-1")?;
    check_eq!(
        dead.status,
        ReactionStatus::DeadLetter,
        "status after fail without retry"
    );
    check_eq!(dead.attempts, 2, "attempts of the dead-letter row");
    check_eq!(
        dead.available_at_ms,
        retry_at + 10,
        "available_at_ms = failure time"
    );
    check!(
        storage.retry_reaction(P, "r-1", NOW + 2_000)?,
        "retry_reaction of a dead-letter row returned false"
    );
    let revived = get(storage.as_ref(), "r-1")?;
    check_eq!(
        revived.status,
        ReactionStatus::Pending,
        "status after retry_reaction"
    );
    check_eq!(revived.attempts, 0, "attempts after retry_reaction");
    check_eq!(
        revived.available_at_ms,
        NOW + 2_000,
        "available_at_ms after retry_reaction"
    );
    check_eq!(
        revived.last_failure,
        None,
        "last_failure after retry_reaction"
    );
    check_eq!(
        revived.lease_owner,
        None,
        "lease_owner after retry_reaction"
    );
    Ok(())
}

fn c138_retry_pending(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    enqueue(storage.as_ref(), &[("r-1", "email", NOW)])?;
    let before = get(storage.as_ref(), "r-1")?;
    check!(
        !storage.retry_reaction(P, "r-1", NOW + 50)?,
        "retry_reaction on a pending row returned true"
    );
    check_eq!(
        get(storage.as_ref(), "r-1")?,
        before,
        "pending row after retry_reaction"
    );
    Ok(())
}

fn c139_prune_reactions(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let all = ["c-old", "c-cut", "d-old", "d-cut", "pending", "leased"];
    let specs: Vec<(&str, &str, i64)> = all.iter().map(|k| (*k, *k, NOW)).collect();
    enqueue(storage.as_ref(), &specs)?;
    let cutoff = NOW + 50;
    for (key, at) in [("c-old", NOW + 10), ("c-cut", cutoff)] {
        check_eq!(
            keys(&claim(storage.as_ref(), "w", &[key], NOW)?),
            [key],
            "claim {key}"
        );
        check!(
            storage.complete_reaction(P, key, "w", at)?,
            "complete {key}"
        );
    }
    for (key, at) in [("d-old", NOW + 20), ("d-cut", cutoff)] {
        check_eq!(
            keys(&claim(storage.as_ref(), "w", &[key], NOW)?),
            [key],
            "claim {key}"
        );
        check!(
            fail(storage.as_ref(), key, "w", at, None)?,
            "dead-letter {key}"
        );
    }
    check_eq!(
        keys(&claim(storage.as_ref(), "w", &["leased"], NOW)?),
        ["leased"],
        "claim leased"
    );
    let query = |limit| ReactionPruneQuery {
        completed_before_ms: cutoff,
        dead_letter_before_ms: cutoff,
        limit,
    };
    check_eq!(
        storage.prune_reactions(P, &query(1))?,
        PrunedReactionCounts {
            completed: 1,
            dead_letter: 0
        },
        "prune limit 1"
    );
    check!(
        storage.get_reaction(P, "c-old")?.is_none(),
        "oldest aged completed row survived"
    );
    check!(
        storage.get_reaction(P, "d-old")?.is_some(),
        "limit 1 deleted the dead-letter row too"
    );
    check_eq!(
        storage.prune_reactions(P, &query(10))?,
        PrunedReactionCounts {
            completed: 0,
            dead_letter: 1
        },
        "prune limit 10"
    );
    check!(
        storage.get_reaction(P, "d-old")?.is_none(),
        "aged dead-letter row survived"
    );
    for (key, status) in [
        ("c-cut", ReactionStatus::Completed),
        ("d-cut", ReactionStatus::DeadLetter),
        ("pending", ReactionStatus::Pending),
        ("leased", ReactionStatus::Leased),
    ] {
        check_eq!(
            get(storage.as_ref(), key)?.status,
            status,
            "surviving {key}"
        );
    }
    Ok(())
}

fn c140_log_prune_keeps_reactions(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    touch(storage.as_ref(), P)?;
    let seq = enqueue(storage.as_ref(), &[("r-1", "email", NOW)])?;
    append_changes(storage.as_ref(), P, "later", Vec::new())?;
    let pruned = storage.prune_commits_through(
        P,
        &sync_core::CommitPruneQuery {
            log_epoch: EPOCH.to_owned(),
            through_seq: seq,
        },
    )?;
    check_eq!(pruned.removed_commits, 1, "commits removed by the prune");
    check_eq!(
        ctx.raw()?.count(
            "sync_commits",
            RawFilter::eq("partition", P).and("commit_seq", &seq.to_string())
        )?,
        0,
        "source commit rows after the prune"
    );
    let stored = get(storage.as_ref(), "r-1")?;
    check_eq!(
        stored.status,
        ReactionStatus::Pending,
        "reaction status after the prune"
    );
    check_eq!(stored.source_commit_seq, seq, "source_commit_seq");
    Ok(())
}

fn c141_list_order(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    enqueue(
        storage.as_ref(),
        &[
            ("a", "k1", NOW),
            ("d", "k2", NOW - 1),
            ("c", "k1", NOW + 1),
            ("b", "k2", NOW),
        ],
    )?;
    let list = |limit| {
        storage.list_reactions(
            P,
            &ReactionListQuery {
                statuses: Vec::new(),
                kinds: Vec::new(),
                limit,
            },
        )
    };
    check_eq!(
        keys(&list(10)?),
        ["c", "b", "a", "d"],
        "list_reactions order"
    );
    check_eq!(keys(&list(3)?), ["c", "b", "a"], "list_reactions limit 3");
    Ok(())
}
