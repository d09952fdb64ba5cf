//! Fixture `EFIX` of the engine checks (`engine.md` §7): `FIX1` plus
//! `notes` (with a `union` crdt column) and `counters`, row payload builders
//! and seeds written straight through the storage.

use serde_json::{json, Value};
use sync_core::{codec, CompiledSchema, NewCommit, RowValue, ServerStorage, StoredRow};

use crate::check::{CheckResult, Failure};
use crate::context::NOW;
use crate::fixtures::{compile_json, fix1_json, push, scopes, task_values, Op};

/// The partition every engine check serves.
pub(crate) const P: &str = "P";
/// A second partition (E-057).
pub(crate) const Q: &str = "Q";

/// The JSON of `EFIX` at `version`.
pub(crate) fn efix_json(version: i32) -> Value {
    let mut schema = fix1_json();
    schema["version"] = json!(version);
    if let Some(tables) = schema["tables"].as_array_mut() {
        tables.push(json!({
            "name": "notes",
            "primaryKey": "id",
            "columns": [
                {"name": "id", "type": "string"},
                {"name": "project_id", "type": "string"},
                {"name": "title", "type": "string", "nullable": true},
                {"name": "doc", "type": "crdt", "crdtType": "union"}
            ],
            "scopes": ["project:{project_id}"]
        }));
        tables.push(json!({
            "name": "counters",
            "primaryKey": "id",
            "columns": [
                {"name": "id", "type": "integer"},
                {"name": "project_id", "type": "string"},
                {"name": "n", "type": "integer"}
            ],
            "scopes": ["project:{project_id}"]
        }));
    }
    schema
}

/// `EFIX` at v1, compiled.
pub(crate) fn efix() -> CheckResult<CompiledSchema> {
    compile_json(&efix_json(1))
}

/// `EFIX` at v2 (`FIX1`'s tables unchanged apart from the version; E-059
/// bumps with `FIX2`'s `tasks` change on top).
pub(crate) fn efix_v2() -> CheckResult<CompiledSchema> {
    let mut value = efix_json(2);
    let fix2 = crate::fixtures::fix2_json();
    value["tables"][0] = fix2["tables"][0].clone();
    compile_json(&value)
}

fn encode(schema: &CompiledSchema, table: &str, values: &[RowValue]) -> CheckResult<Vec<u8>> {
    let table = schema
        .table(table)
        .ok_or_else(|| Failure::new(format!("EFIX table {table} missing")))?;
    codec::encode_row(table, values)
        .map_err(|e| Failure::new(format!("EFIX row does not encode: {e:?}")))
}

/// Decodes a payload of `table`.
pub(crate) fn decode(
    schema: &CompiledSchema,
    table: &str,
    payload: &[u8],
) -> CheckResult<Vec<RowValue>> {
    crate::fixtures::decode(schema, table, payload)
}

/// The values of a `tasks` row (every nullable column NULL).
pub(crate) fn task_vals(id: &str, project: &str, title: &str) -> Vec<RowValue> {
    let mut values = vec![
        RowValue::String(id.to_owned()),
        RowValue::String(project.to_owned()),
        RowValue::String(title.to_owned()),
        RowValue::Boolean(false),
    ];
    values.resize(9, RowValue::Null);
    values
}

/// A `tasks` payload.
pub(crate) fn task_payload(
    schema: &CompiledSchema,
    id: &str,
    project: &str,
    title: &str,
) -> CheckResult<Vec<u8>> {
    encode(schema, "tasks", &task_values(schema, id, project, title))
}

/// A `tasks` payload whose `attachment` references `blob` (`None` = NULL).
pub(crate) fn task_payload_blob(
    schema: &CompiledSchema,
    id: &str,
    project: &str,
    blob: Option<&str>,
) -> CheckResult<Vec<u8>> {
    let mut values = task_values(schema, id, project, &format!("title {id}"));
    values[8] = blob.map_or(RowValue::Null, |b| {
        RowValue::BlobRef(json!({ "blobId": b }).to_string())
    });
    encode(schema, "tasks", &values)
}

/// A `tasks` payload from explicit values.
pub(crate) fn task_payload_values(
    schema: &CompiledSchema,
    values: &[RowValue],
) -> CheckResult<Vec<u8>> {
    encode(schema, "tasks", values)
}

/// A `notes` payload (`doc` = the crdt bytes).
pub(crate) fn note_payload(
    schema: &CompiledSchema,
    id: &str,
    project: &str,
    title: Option<&str>,
    doc: &[u8],
) -> CheckResult<Vec<u8>> {
    encode(
        schema,
        "notes",
        &[
            RowValue::String(id.to_owned()),
            RowValue::String(project.to_owned()),
            title.map_or(RowValue::Null, |t| RowValue::String(t.to_owned())),
            RowValue::Crdt(doc.to_vec()),
        ],
    )
}

/// A `counters` payload.
pub(crate) fn counter_payload(
    schema: &CompiledSchema,
    id: i64,
    project: &str,
    n: i64,
) -> CheckResult<Vec<u8>> {
    encode(
        schema,
        "counters",
        &[
            RowValue::Integer(id),
            RowValue::String(project.to_owned()),
            RowValue::Integer(n),
        ],
    )
}

/// A stored `tasks` row at `version` in `project`.
pub(crate) fn task_row(
    schema: &CompiledSchema,
    id: &str,
    project: &str,
    version: i64,
) -> CheckResult<StoredRow> {
    Ok(StoredRow {
        row_id: id.to_owned(),
        server_version: version,
        scopes: scopes(&[("project_id", project)]),
        payload: task_payload(schema, id, project, &format!("title {id}"))?,
        column_versions: None,
    })
}

/// Seeds rows through the standard storage push (client `seed`), one commit.
pub(crate) fn seed(
    storage: &dyn ServerStorage,
    partition: &str,
    ccid: &str,
    ops: &[Op],
) -> CheckResult<i64> {
    push(storage, partition, "seed", ccid, ops)?.seq()
}

/// Seeds one `tasks` row at `version` in `project` (one commit).
pub(crate) fn seed_task(
    storage: &dyn ServerStorage,
    schema: &CompiledSchema,
    id: &str,
    project: &str,
    version: i64,
) -> CheckResult<i64> {
    let row = task_row(schema, id, project, version)?;
    seed(
        storage,
        P,
        &format!("seed-{id}-{version}"),
        &[Op::upsert("tasks", row)],
    )
}

/// Appends `count` empty commits to `partition` in one transaction
/// (raises `max_commit_seq` cheaply), created at `NOW`.
pub(crate) fn seed_empty_commits(
    storage: &dyn ServerStorage,
    partition: &str,
    count: usize,
) -> CheckResult {
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    for i in 0..count {
        tx.append_commit(&NewCommit {
            client_id: "seed".to_owned(),
            client_commit_id: format!("empty-{i}"),
            actor_id: "seed".to_owned(),
            created_at_ms: NOW,
            changes: Vec::new(),
        })?;
    }
    tx.commit()?;
    Ok(())
}

/// Appends `count` commits, each upserting one `tasks` row `r<n>` in
/// `project` (`n` = the commit's position in this call, zero-padded).
pub(crate) fn seed_task_commits(
    storage: &dyn ServerStorage,
    schema: &CompiledSchema,
    prefix: &str,
    count: usize,
    project: &str,
) -> CheckResult<Vec<i64>> {
    let mut seqs = Vec::with_capacity(count);
    for i in 0..count {
        let id = format!("{prefix}{i:04}");
        let row = task_row(schema, &id, project, 1)?;
        seqs.push(seed(
            storage,
            P,
            &format!("seed-{id}"),
            &[Op::upsert("tasks", row)],
        )?);
    }
    Ok(seqs)
}
