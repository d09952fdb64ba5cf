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
    "a command reads and writes in one transaction (by id and through an index); its replay skips the builder",
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

/// Finds t1 through the `tasks_by_title` index by its own title and writes
/// t3 naming the ids found: a lookup that finds nothing fails the command.
fn find_t1_by_title(reader: &mut dyn CommandReader) -> Result<Vec<CommandWrite>, WireError> {
    let failed = |why: &str| WireError::new("operation.execution_failed", why);
    let t1 = reader
        .get_row("tasks", "t1")
        .map_err(|_| failed("t1 unreadable"))?
        .ok_or_else(|| failed("t1 missing"))?;
    let title = t1
        .values
        .get("title")
        .cloned()
        .ok_or_else(|| failed("t1 has no title"))?;
    let found = reader
        .lookup("tasks", "tasks_by_title", &[title], None, 10)
        .map_err(|_| failed("lookup failed"))?;
    let ids: Vec<&str> = found.iter().map(|row| row.row_id.as_str()).collect();
    if ids != ["t1"] {
        return Err(failed("the title lookup did not find exactly t1"));
    }
    let mut row = t1.values;
    row.insert("id".to_owned(), RowValue::String("t3".to_owned()));
    row.insert(
        "title".to_owned(),
        RowValue::String(format!("found {}", ids.join(","))),
    );
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
    // A trusted index lookup through the same transaction.
    let found = engine
        .apply_command(&alice, "dev-a", "find", "r2", find_t1_by_title)
        .map_err(|e| Failure::new(format!("apply_command (lookup) failed: {e:?}")))?;
    let found_seq = expect_applied(&found.result, PushResultStatus::Applied, 1)?;
    check_eq!(found_seq, seq + 1, "the lookup command's commitSeq");
    let t3 = env
        .storage
        .get_row(P, "tasks", "t3")?
        .ok_or_else(|| Failure::new("t3 not written: the index lookup found no t1"))?;
    check_eq!(
        decode(&env.schema, "tasks", &t3.payload)?[2],
        RowValue::String("found t1".to_owned()),
        "t3 title names what the lookup found"
    );
    Ok(())
}
