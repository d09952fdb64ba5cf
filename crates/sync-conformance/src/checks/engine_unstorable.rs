//! E-097: values one dialect stores and another cannot (U+0000 in text,
//! keys wider than an index entry) get the same coded refusal on every
//! dialect, before the storage.

use sync_core::limits::{MAX_BLOB_ID_BYTES, MAX_ROW_ID_BYTES, MAX_SCOPE_VALUE_BYTES};
use sync_core::RowValue;
use sync_engine::{PushResultStatus, Rejection, ValidationFailure};

use super::engine_doubles::{plan, Planner, RowCheck};

use super::engine_entry::GROUP;
use super::engine_fixture::{task_payload_values, P};
use super::engine_round::{
    commit, del, env, expect_applied, expect_rejected, pull_req, push_req, run, sub, up, Env,
};
use crate::check::{CheckDef, CheckResult, Failure};
use crate::context::Ctx;
use crate::fixtures::task_values;
use crate::registry::check;
use crate::{check, check_eq};

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[check(
    GROUP,
    "E-097",
    "unstorable text and keys are refused alike on every dialect",
    e097_unstorable_values,
)];

/// A `tasks` payload for `id` in `project` with `edit` applied to its values.
fn task(
    env: &Env,
    id: &str,
    project: &str,
    edit: impl FnOnce(&mut Vec<RowValue>),
) -> CheckResult<Vec<u8>> {
    let mut values = task_values(&env.schema, id, project, &format!("title {id}"));
    edit(&mut values);
    task_payload_values(&env.schema, &values)
}

/// A `blob_ref` value naming `blob_id`.
fn blob_ref(blob_id: &str) -> RowValue {
    RowValue::BlobRef(serde_json::json!({ "blobId": blob_id }).to_string())
}

fn e097_unstorable_values(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    let engine = env.engine()?;
    let long_id = format!("r{}", "x".repeat(MAX_ROW_ID_BYTES));
    let widest_id = "y".repeat(MAX_ROW_ID_BYTES);
    let long_project = "p".repeat(MAX_SCOPE_VALUE_BYTES + 1);
    let widest_project = "q".repeat(MAX_SCOPE_VALUE_BYTES);
    let nul_json = r#"{"a":"\u0000"}"#;
    let long_blob = "b".repeat(MAX_BLOB_ID_BYTES + 1);
    let widest_blob = "c".repeat(MAX_BLOB_ID_BYTES);
    // Both exist: only the length can refuse the longer one.
    env.blobs.hold(&long_blob);
    env.blobs.hold(&widest_blob);
    let commits = vec![
        commit(
            "nul-text",
            vec![up(
                "tasks",
                "t1",
                None,
                task(&env, "t1", "p1", |v| v[2] = RowValue::String("a\0b".into()))?,
            )],
        ),
        commit("nul-row-id", vec![del("tasks", "t\0")]),
        commit(
            "long-row-id",
            vec![up(
                "tasks",
                &long_id,
                None,
                task(&env, &long_id, "p1", |_| {})?,
            )],
        ),
        commit(
            "long-scope",
            vec![up(
                "tasks",
                "t2",
                None,
                task(&env, "t2", &long_project, |_| {})?,
            )],
        ),
        commit(
            "widest-row-id",
            vec![up(
                "tasks",
                &widest_id,
                None,
                task(&env, &widest_id, "p1", |_| {})?,
            )],
        ),
        commit(
            "nul-json-escape",
            vec![up(
                "tasks",
                "t3",
                None,
                task(&env, "t3", "p1", |v| v[6] = RowValue::Json(nul_json.into()))?,
            )],
        ),
        commit(
            "long-blob-id",
            vec![up(
                "tasks",
                "b-long",
                None,
                task(&env, "b-long", "p1", |v| v[8] = blob_ref(&long_blob))?,
            )],
        ),
        commit(
            "widest-blob-id",
            vec![up(
                "tasks",
                "b-widest",
                None,
                task(&env, "b-widest", "p1", |v| v[8] = blob_ref(&widest_blob))?,
            )],
        ),
        commit(
            "widest-scope",
            vec![up(
                "tasks",
                "t5",
                None,
                task(&env, "t5", &widest_project, |_| {})?,
            )],
        ),
    ];
    let json_payload = match &commits[5].operations[0].payload {
        Some(p) => p.clone(),
        None => return Err(Failure::new("t3 payload")),
    };
    env.resolver.set(super::engine_doubles::ResolverMode::Fixed(
        super::engine_doubles::scope_map(&[("project_id", &["*"])]),
    ));
    let round = run(&engine, "alice", push_req("dev-a", commits));
    round.ok()?;
    for i in 0..4 {
        let (retryable, _) = expect_rejected(round.result(i)?, 0, "sync.invalid_request")?;
        check!(!retryable, "rejection {i} retryable");
    }
    expect_applied(round.result(4)?, PushResultStatus::Applied, 1)?;
    expect_applied(round.result(5)?, PushResultStatus::Applied, 1)?;
    let (retryable, _) = expect_rejected(round.result(6)?, 0, "sync.invalid_request")?;
    check!(!retryable, "the long blob id's rejection is retryable");
    expect_applied(round.result(7)?, PushResultStatus::Applied, 1)?;
    expect_applied(round.result(8)?, PushResultStatus::Applied, 1)
        .map_err(|f| Failure::new(format!("the widest scope value: {f}")))?;
    check_eq!(
        env.storage
            .list_rows_referencing_blob(P, &widest_blob)?
            .len(),
        1,
        "rows referencing the widest blob id"
    );
    for absent in ["t1", "t2", "b-long", long_id.as_str()] {
        check!(
            env.storage.get_row(P, "tasks", absent)?.is_none(),
            "row {} stored",
            &absent[..absent.len().min(8)]
        );
    }
    check!(
        env.storage.get_row(P, "tasks", &widest_id)?.is_some(),
        "the widest row id is not stored"
    );
    let stored = env
        .storage
        .get_row(P, "tasks", "t3")?
        .ok_or_else(|| Failure::new("t3 not stored"))?;
    check_eq!(stored.payload, json_payload, "t3 payload bytes");
    let max_seq = env.max_seq()?;

    let nul_client = run(
        &engine,
        "alice",
        push_req(
            "dev\0a",
            vec![commit(
                "c1",
                vec![up("tasks", "t4", None, task(&env, "t4", "p1", |_| {})?)],
            )],
        ),
    );
    let error = nul_client.expect_error("sync.invalid_request")?;
    check!(
        nul_client.items.is_empty(),
        "items before the refusal of a NUL clientId: {:?} ({error:?})",
        nul_client.items
    );
    let nul_commit = run(
        &engine,
        "alice",
        push_req(
            "dev-a",
            vec![commit(
                "c\0",
                vec![up("tasks", "t4", None, task(&env, "t4", "p1", |_| {})?)],
            )],
        ),
    );
    nul_commit.expect_error("sync.invalid_request")?;
    let nul_scope = run(
        &engine,
        "alice",
        pull_req(
            "dev-a",
            vec![sub("s", "tasks", &[("project_id", &["p\u{0}1"])], -1)],
        ),
    );
    nul_scope.expect_error("sync.invalid_request")?;
    check_eq!(env.max_seq()?, max_seq, "max_commit_seq after the refusals");

    // A host rejection whose message holds U+0000 is stored (the message
    // is a diagnostic; its U+0000 does not reach the stored result).
    let rejecting = RowCheck::new(|_| {
        let rejection = Rejection::new("task.refused", "no\0pe", None, None)
            .map_err(|e| ValidationFailure::Failed(Box::new(e)))?;
        Err(ValidationFailure::Reject(rejection))
    });
    let validated = env.engine_with(|c| {
        c.row_validators
            .insert("tasks".to_owned(), rejecting.clone());
    })?;
    let request = || {
        Ok::<_, Failure>(push_req(
            "dev-a",
            vec![commit(
                "refused",
                vec![up("tasks", "t5", None, task(&env, "t5", "p1", |_| {})?)],
            )],
        ))
    };
    let refused = run(&validated, "alice", request()?);
    refused.ok()?;
    expect_rejected(refused.result(0)?, 0, "task.refused")?;
    let replayed = run(&validated, "alice", request()?);
    replayed.ok()?;
    check_eq!(
        replayed.result(0)?,
        refused.result(0)?,
        "replayed host rejection"
    );

    // A planned reaction whose payload holds a `\u0000` escape is an
    // invalid plan on every dialect (internal; nothing persisted).
    let planner = Planner::new(|_| {
        let mut p = plan("k1", "notify");
        p.payload = serde_json::json!({"a": "x\u{0}"});
        Ok(vec![p])
    });
    let planning = env.engine_with(|c| c.reaction_planner = Some(planner.clone()))?;
    let planned = run(
        &planning,
        "alice",
        push_req(
            "dev-a",
            vec![commit(
                "planned",
                vec![up("tasks", "t6", None, task(&env, "t6", "p1", |_| {})?)],
            )],
        ),
    );
    planned.expect_internal()?;
    check!(
        env.storage
            .get_push_result(P, "dev-a", "planned")?
            .is_none(),
        "a result was stored for the invalid plan"
    );
    check!(
        env.storage.get_row(P, "tasks", "t6")?.is_none(),
        "the row of the invalid plan was stored"
    );
    Ok(())
}
