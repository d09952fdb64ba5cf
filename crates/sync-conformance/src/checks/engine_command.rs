//! `engine.md` §4.13 command variant: E-082.

use std::sync::atomic::{AtomicUsize, Ordering};

use sync_core::{PushStatus, RowValue};
use sync_engine::{CommandReader, CommandWrite, PushResultStatus, RequestContext, WireError};

use super::engine_fixture::{decode, seed_task, P};
use super::engine_round::{env, expect_applied};
use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::Ctx;
use crate::registry::check;
use crate::{check, check_eq};

use super::engine_entry::GROUP;

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[check(
    GROUP,
    "E-082",
    "a command reads and writes in one transaction; its replay skips the builder",
    e082_command,
)];

fn copy_t1(reader: &mut dyn CommandReader) -> Result<Vec<CommandWrite>, WireError> {
    let failed = || WireError::new("operation.execution_failed", "t1 unreadable");
    let t1 = reader
        .get_row("tasks", "t1")
        .map_err(|_| failed())?
        .ok_or_else(failed)?;
    let title = match t1.values.get("title") {
        Some(RowValue::String(t)) => format!("copy of {t}"),
        _ => return Err(failed()),
    };
    let mut row = t1.values;
    row.insert("id".to_owned(), RowValue::String("t2".to_owned()));
    row.insert("title".to_owned(), RowValue::String(title));
    Ok(vec![CommandWrite::Upsert {
        table: "tasks".to_owned(),
        row,
        base_version: None,
    }])
}

fn e082_command(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_task(env.storage.as_ref(), &env.schema, "t1", "p1", 1)?;
    let engine = env.engine()?;
    let calls = AtomicUsize::new(0);
    let alice = RequestContext::new(P, "alice");
    let command = || {
        engine
            .apply_command(
                &alice,
                "dev-a",
                "copy",
                "r1",
                |reader: &mut dyn CommandReader| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    copy_t1(reader)
                },
            )
            .map_err(|e| Failure::new(format!("apply_command failed: {e:?}")))
    };
    let first = command()?;
    let seq = expect_applied(&first.result, PushResultStatus::Applied, 1)?;
    let t1 = env
        .storage
        .get_row(P, "tasks", "t1")?
        .ok_or_else(|| Failure::new("t1 gone"))?;
    let t2 = env
        .storage
        .get_row(P, "tasks", "t2")?
        .ok_or_else(|| Failure::new("t2 not written"))?;
    let title = match &decode(&env.schema, "tasks", &t1.payload)?[2] {
        RowValue::String(t) => format!("copy of {t}"),
        other => return Err(Failure::new(format!("t1 title {other:?}"))),
    };
    check_eq!(
        decode(&env.schema, "tasks", &t2.payload)?[2],
        RowValue::String(title),
        "t2 title read from t1"
    );
    let cid = r#"["remote-command","alice","dev-a"]"#;
    let stored = env.storage.get_push_result(P, cid, r#"["copy","r1"]"#)?;
    check!(
        stored
            .as_ref()
            .is_some_and(|r| r.status == PushStatus::Applied && r.commit_seq == Some(seq)),
        "stored result under the command client id: {stored:?}"
    );
    let replay = command()?;
    check_eq!(
        expect_applied(&replay.result, PushResultStatus::Cached, 1)?,
        seq,
        "replayed commitSeq"
    );
    check_eq!(calls.load(Ordering::SeqCst), 1, "builder calls");
    check_eq!(env.max_seq()?, seq, "max_commit_seq");
    Ok(())
}
