//! §18 Serve gate, C-278…C-289.

use std::sync::{mpsc, Arc};
use std::thread;

use sync_core::{
    serve_gate_refusal, serve_gate_token_changed, serve_not_ready_error, EnsureOptions, ErrorCode,
    ServeContext, ServeGate, ServeGateRefusal,
};

use crate::check::{
    expect_code, expect_detail, expect_message_free_of, CheckDef, CheckResult, Failure,
};
use crate::checks::support_barrier::{
    decl, fix1_storage, fix2_at, held_migration_lock, join_result, push_task, CLIENT,
};
use crate::context::{Ctx, NOW};
use crate::fixtures::{fix1, push_with, task, Op, PushOutcome};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "rfc0007-serve-gate";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(GROUP, "C-278", "read_serve_gate: marker version, partition epoch, this partition's pending names at the running version", c278_read_serve_gate),
    check(GROUP, "C-279", "the serve gate is not memoized", c279_gate_not_memoized),
    check(GROUP, "C-280", "rule 1: stored 0 / running 0 refuse with SchemaBehind", c280_rule_schema_behind),
    check(GROUP, "C-281", "rule 2: stored 3, running 2 refuses with SchemaAhead", c281_rule_schema_ahead),
    check(GROUP, "C-282", "rules 3-4: expected epoch against none / another / the same", c282_rules_log_epoch),
    check(GROUP, "C-283", "rule 5: pending name declared / undeclared / declared at another version", c283_rule_checkpoint_pending),
    check(GROUP, "C-284", "rule order: schema ahead wins over an undeclared pending checkpoint", c284_rule_order),
    check(GROUP, "C-285", "a pending checkpoint in partition A refuses A only", c285_gate_partition_scoped),
    check(GROUP, "C-286", "serve_gate_token_changed: epoch or version change, not pending-only changes", c286_token_changed),
    check(GROUP, "C-287", "serve_not_ready_error: code, retryable, fixed message, details per refusal", c287_not_ready_error),
    check(GROUP, "C-288", "push path: a bump after the entry gate is refused inside the push transaction", c288_push_gate_inside_transaction),
    check(GROUP, "C-289", "the declaring process serves pushes while backfilling", c289_declaring_process_serves),
];

fn gate(stored: i64, epoch: Option<&str>, pending: &[&str]) -> ServeGate {
    ServeGate {
        partition: "p1".to_owned(),
        stored_schema_version: stored,
        log_epoch: epoch.map(str::to_owned),
        pending: pending.iter().map(|p| (*p).to_owned()).collect(),
    }
}

fn expecting(epoch: &str) -> ServeContext {
    ServeContext {
        declarations: Vec::new(),
        expected_log_epoch: Some(epoch.to_owned()),
    }
}

fn declaring(partition: &str, name: &str, version: i32) -> ServeContext {
    ServeContext {
        declarations: vec![decl(partition, name, version)],
        expected_log_epoch: None,
    }
}

fn names(pending: &[&str]) -> Vec<String> {
    pending.iter().map(|p| (*p).to_owned()).collect()
}

fn c278_read_serve_gate(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    s.touch_partition("p1", NOW, "e1")?;
    s.declare_checkpoint("p1", "b_v1", 1, NOW)?;
    s.declare_checkpoint("p1", "a_v1", 1, NOW)?;
    s.declare_checkpoint("p1", "d_v1", 1, NOW)?;
    s.activate_checkpoint("p1", "d_v1", 0, 0, &[], NOW)?;
    s.declare_checkpoint("p2", "c_v1", 1, NOW)?;
    ctx.raw()?
        .insert_checkpoint("p1", "z_v2", 2, "declared", 0)?;
    let p1 = s.read_serve_gate("p1", 1)?;
    check_eq!(p1.partition, "p1", "partition");
    check_eq!(p1.stored_schema_version, 1, "stored_schema_version");
    check_eq!(p1.log_epoch.as_deref(), Some("e1"), "log_epoch of p1");
    check_eq!(p1.pending, names(&["a_v1", "b_v1"]), "pending of p1 at 1");
    let p1_at_2 = s.read_serve_gate("p1", 2)?;
    check_eq!(
        p1_at_2.pending,
        names(&["z_v2"]),
        "pending of p1 at running version 2"
    );
    let p3 = s.read_serve_gate("p3", 1)?;
    check_eq!(p3.log_epoch, None, "log_epoch of unregistered p3");
    check_eq!(p3.pending, Vec::<String>::new(), "pending of p3");
    check_eq!(p3.stored_schema_version, 1, "stored_schema_version for p3");
    Ok(())
}

fn c279_gate_not_memoized(ctx: &mut Ctx<'_>) -> CheckResult {
    let reader = fix1_storage(ctx)?;
    check_eq!(
        reader.read_serve_gate("p1", 1)?.pending,
        Vec::<String>::new(),
        "pending before"
    );
    let other = ctx.ensured(&fix1()?)?;
    other.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    check_eq!(
        reader.read_serve_gate("p1", 1)?.pending,
        names(&["search_v1"]),
        "pending after another instance declared"
    );
    Ok(())
}

fn c280_rule_schema_behind(_ctx: &mut Ctx<'_>) -> CheckResult {
    let none = ServeContext::default();
    check_eq!(
        serve_gate_refusal(&gate(0, None, &[]), 1, &none),
        Some(ServeGateRefusal::SchemaBehind {
            stored: 0,
            running: 1
        }),
        "stored 0, running 1"
    );
    check_eq!(
        serve_gate_refusal(&gate(1, None, &[]), 0, &none),
        Some(ServeGateRefusal::SchemaBehind {
            stored: 1,
            running: 0
        }),
        "stored 1, running 0"
    );
    Ok(())
}

fn c281_rule_schema_ahead(_ctx: &mut Ctx<'_>) -> CheckResult {
    check_eq!(
        serve_gate_refusal(&gate(3, None, &[]), 2, &ServeContext::default()),
        Some(ServeGateRefusal::SchemaAhead {
            stored: 3,
            running: 2
        }),
        "stored 3, running 2"
    );
    Ok(())
}

fn c282_rules_log_epoch(_ctx: &mut Ctx<'_>) -> CheckResult {
    let ctx = expecting("e1");
    check_eq!(
        serve_gate_refusal(&gate(1, None, &[]), 1, &ctx),
        Some(ServeGateRefusal::LogEpochUnknown {
            partition: "p1".to_owned()
        }),
        "expected e1, gate None"
    );
    check_eq!(
        serve_gate_refusal(&gate(1, Some("e2"), &[]), 1, &ctx),
        Some(ServeGateRefusal::LogEpochRotated {
            partition: "p1".to_owned()
        }),
        "expected e1, gate e2"
    );
    check_eq!(
        serve_gate_refusal(&gate(1, Some("e1"), &[]), 1, &ctx),
        None,
        "expected e1, gate e1"
    );
    Ok(())
}

fn c283_rule_checkpoint_pending(_ctx: &mut Ctx<'_>) -> CheckResult {
    let pending = gate(1, None, &["x"]);
    check_eq!(
        serve_gate_refusal(&pending, 1, &declaring("p1", "x", 1)),
        None,
        "x declared"
    );
    let refused = Some(ServeGateRefusal::CheckpointPending {
        partition: "p1".to_owned(),
        name: "x".to_owned(),
    });
    check_eq!(
        serve_gate_refusal(&pending, 1, &ServeContext::default()),
        refused,
        "x undeclared"
    );
    check_eq!(
        serve_gate_refusal(&pending, 1, &declaring("p1", "x", 2)),
        refused,
        "x declared at version 2"
    );
    Ok(())
}

fn c284_rule_order(_ctx: &mut Ctx<'_>) -> CheckResult {
    check_eq!(
        serve_gate_refusal(&gate(3, None, &["x"]), 2, &ServeContext::default()),
        Some(ServeGateRefusal::SchemaAhead {
            stored: 3,
            running: 2
        }),
        "stored 3 ahead of 2 with x pending"
    );
    Ok(())
}

fn c285_gate_partition_scoped(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    storage.declare_checkpoint("A", "search_v1", 1, NOW)?;
    let none = ServeContext::default();
    check_eq!(
        serve_gate_refusal(&storage.read_serve_gate("B", 1)?, 1, &none),
        None,
        "gate for B"
    );
    check_eq!(
        serve_gate_refusal(&storage.read_serve_gate("A", 1)?, 1, &none),
        Some(ServeGateRefusal::CheckpointPending {
            partition: "A".to_owned(),
            name: "search_v1".to_owned(),
        }),
        "gate for A"
    );
    Ok(())
}

fn c286_token_changed(_ctx: &mut Ctx<'_>) -> CheckResult {
    let before = gate(1, Some("e1"), &[]);
    let changed = Some(ServeGateRefusal::TokenChanged {
        partition: "p1".to_owned(),
    });
    check_eq!(
        serve_gate_token_changed(&before, &gate(1, Some("e2"), &[])),
        changed,
        "epoch e1 -> e2"
    );
    check_eq!(
        serve_gate_token_changed(&before, &gate(1, None, &[])),
        changed,
        "epoch e1 -> none"
    );
    check_eq!(
        serve_gate_token_changed(&before, &gate(2, Some("e1"), &[])),
        changed,
        "version 1 -> 2"
    );
    check_eq!(
        serve_gate_token_changed(&before, &gate(1, Some("e1"), &["x"])),
        None,
        "pending-only change"
    );
    check_eq!(
        serve_gate_token_changed(&before, &before.clone()),
        None,
        "unchanged token"
    );
    Ok(())
}

fn c287_not_ready_error(_ctx: &mut Ctx<'_>) -> CheckResult {
    let partition = || "tenant-secret".to_owned();
    let cases: Vec<(ServeGateRefusal, Vec<(&str, &str)>)> = vec![
        (
            ServeGateRefusal::SchemaAhead {
                stored: 3,
                running: 2,
            },
            vec![
                ("reason", "schema_ahead"),
                ("storedSchemaVersion", "3"),
                ("runningSchemaVersion", "2"),
            ],
        ),
        (
            ServeGateRefusal::SchemaBehind {
                stored: 0,
                running: 1,
            },
            vec![
                ("reason", "schema_behind"),
                ("storedSchemaVersion", "0"),
                ("runningSchemaVersion", "1"),
            ],
        ),
        (
            ServeGateRefusal::LogEpochUnknown {
                partition: partition(),
            },
            vec![
                ("reason", "log_epoch_unknown"),
                ("partition", "tenant-secret"),
            ],
        ),
        (
            ServeGateRefusal::LogEpochRotated {
                partition: partition(),
            },
            vec![
                ("reason", "log_epoch_rotated"),
                ("partition", "tenant-secret"),
            ],
        ),
        (
            ServeGateRefusal::CheckpointPending {
                partition: partition(),
                name: "search_projection_v7".to_owned(),
            },
            vec![
                ("reason", "checkpoint_pending"),
                ("partition", "tenant-secret"),
                ("projection", "search_projection_v7"),
            ],
        ),
        (
            ServeGateRefusal::TokenChanged {
                partition: partition(),
            },
            vec![("reason", "token_changed"), ("partition", "tenant-secret")],
        ),
    ];
    let mut messages = Vec::new();
    for (refusal, details) in &cases {
        let error = serve_not_ready_error(refusal);
        check_eq!(
            error.code(),
            ErrorCode::SchemaNotReady,
            "code for {refusal:?}"
        );
        check!(error.retryable(), "{refusal:?}: error is not retryable");
        for (key, value) in details {
            expect_detail(&error, key, value)?;
        }
        check_eq!(
            error.details().len(),
            details.len(),
            "number of details for {refusal:?}"
        );
        expect_message_free_of(&error, &["tenant-secret", "search_projection_v7"])?;
        messages.push(error.message().to_owned());
    }
    let fixed = ErrorCode::SchemaNotReady.default_message();
    for message in &messages {
        check_eq!(message.as_str(), fixed, "message");
    }
    Ok(())
}

/// The bump holds its migration lock (the `after_migration_lock` hook) when
/// the push passes its entry gate; the push then starts (`begin`, the push
/// lock) while the bump is released, so the bump commits after the entry
/// gate and before the push holds its lock (the push waits for the
/// migration). The gate read inside the transaction must see the bump —
/// a gate read before the lock, or with a snapshot taken before it was
/// granted, sees version 1.
fn c288_push_gate_inside_transaction(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    // A first push readies the writer's connection, so the racing push
    // reaches its lock with no setup of its own left to do.
    push_task(storage.as_ref(), "p1", "c1", "r1")?;
    let bumper = ctx.open()?;
    let schema = fix2_at(2)?;
    let (opts, locked_rx, release_tx) = held_migration_lock(EnsureOptions::default());
    let (bump, inside) = thread::scope(|scope| -> CheckResult<_> {
        let bumping = Arc::clone(&bumper);
        let bump = scope.spawn(move || bumping.ensure_schema(&schema, &opts));
        if locked_rx.recv().is_err() {
            return Err(Failure::new(format!(
                "the bump ended without calling after_migration_lock: {:?}",
                join_result(bump)
            )));
        }
        let entry = storage.read_serve_gate("p1", 1)?;
        check_eq!(
            serve_gate_refusal(&entry, 1, &ServeContext::default()),
            None,
            "request-entry gate while the bump holds its lock"
        );
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let pushing = storage.as_ref();
        let push = scope.spawn(move || -> sync_core::Result<ServeGate> {
            let _ = started_tx.send(());
            let mut tx = pushing.begin("p1")?;
            tx.lock_partition_for_push()?;
            let gate = tx.read_serve_gate(1);
            tx.rollback()?;
            gate
        });
        let _ = started_rx.recv();
        let _ = release_tx.send(());
        drop(release_tx);
        Ok((join_result(bump), join_result(push)))
    })?;
    bump.map_err(|e| Failure::new(format!("the bump failed: {e:?}")))?;
    let inside = inside.map_err(|e| Failure::new(format!("the push transaction: {e:?}")))?;
    check_eq!(
        serve_gate_refusal(&inside, 1, &ServeContext::default()),
        Some(ServeGateRefusal::SchemaAhead {
            stored: 2,
            running: 1
        }),
        "gate inside the push transaction"
    );
    check_eq!(storage.get_max_commit_seq("p1")?, 1, "max_commit_seq of p1");
    Ok(())
}

fn c289_declaring_process_serves(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    storage.declare_checkpoint("p1", "search_v1", 1, NOW)?;
    storage.claim_checkpoint("p1", "search_v1", 1, NOW)?;
    let ops = [Op::upsert("tasks", task(&fix1()?, "r1", "proj", "one")?)];
    let refused = expect_code(
        push_with(
            storage.as_ref(),
            &ServeContext::default(),
            "p1",
            CLIENT,
            "c1",
            &ops,
        ),
        ErrorCode::SchemaNotReady,
        "push by a process that did not declare",
    )?;
    expect_detail(&refused, "reason", "checkpoint_pending")?;
    let serving = declaring("p1", "search_v1", 1);
    let outcome = push_with(storage.as_ref(), &serving, "p1", CLIENT, "c1", &ops)?;
    check_eq!(
        outcome,
        PushOutcome::Applied(1),
        "push by the declaring process"
    );
    check_eq!(storage.get_max_commit_seq("p1")?, 1, "max_commit_seq of p1");
    Ok(())
}
