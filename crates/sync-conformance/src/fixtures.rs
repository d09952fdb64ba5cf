//! Fixture schemas `FIX1` / `FIX2`, row builders and the standard push
//! sequence (`conformance-checklist.md` §0.3, `storage-contract.md` §6 item 3).

use serde_json::{json, Value};
use sync_core::{
    check_serve_gate, codec, CompiledSchema, Error, ErrorCode, NewChange, NewCommit,
    PushOperationResult, PushStatus, RowValue, ServeContext, ServerStorage, StoredPushResult,
    StoredRow, StoredScopes,
};

use crate::check::{CheckResult, Failure};

/// The JSON of fixture schema v1 (`FIX1`).
pub fn fix1_json() -> Value {
    json!({
        "version": 1,
        "tables": [
            {
                "name": "tasks",
                "primaryKey": "id",
                "columns": [
                    {"name": "id", "type": "string"},
                    {"name": "project_id", "type": "string"},
                    {"name": "title", "type": "string"},
                    {"name": "done", "type": "boolean"},
                    {"name": "priority", "type": "integer", "nullable": true},
                    {"name": "score", "type": "float", "nullable": true},
                    {"name": "meta", "type": "json", "nullable": true},
                    {"name": "thumb", "type": "bytes", "nullable": true},
                    {"name": "attachment", "type": "blob_ref", "nullable": true}
                ],
                "scopes": ["project:{project_id}"],
                "indexes": [
                    {"name": "tasks_by_title", "columns": ["title"]},
                    {"name": "tasks_by_project_title", "columns": ["project_id", "title"], "unique": true}
                ]
            },
            {
                "name": "docs",
                "primaryKey": "id",
                "columns": [
                    {"name": "id", "type": "string"},
                    {"name": "org_id", "type": "string"},
                    {"name": "project_id", "type": "string"},
                    {"name": "body", "type": "string", "nullable": true}
                ],
                "scopes": ["org:{org_id}", "project:{project_id}"],
                "indexes": [{"name": "docs_by_body", "columns": ["body"]}]
            },
            {
                "name": "secrets",
                "primaryKey": "id",
                "columns": [
                    {"name": "id", "type": "string"},
                    {"name": "project_id", "type": "string"},
                    {"name": "body", "type": "bytes", "encrypted": true},
                    {"name": "attrs", "type": "bytes", "nullable": true, "encrypted": true}
                ],
                "scopes": ["project:{project_id}"]
            },
            {
                "name": "device_key_grants",
                "primaryKey": "id",
                "columns": [
                    {"name": "id", "type": "string"},
                    {"name": "user_id", "type": "string"},
                    {"name": "device_key", "type": "string"}
                ],
                "scopes": ["user:{user_id}"],
                "indexes": [{"name": "grants_by_device", "columns": ["device_key"]}]
            }
        ]
    })
}

/// The JSON of fixture schema v2 (`FIX2`): `FIX1` with a nullable `assignee`
/// appended to `tasks` and `tasks_by_assignee` replacing `tasks_by_project_title`.
pub fn fix2_json() -> Value {
    let mut schema = fix1_json();
    schema["version"] = json!(2);
    let tasks = &mut schema["tables"][0];
    if let Some(columns) = tasks["columns"].as_array_mut() {
        columns.push(json!({"name": "assignee", "type": "string", "nullable": true}));
    }
    tasks["indexes"] = json!([
        {"name": "tasks_by_title", "columns": ["title"]},
        {"name": "tasks_by_assignee", "columns": ["assignee"]}
    ]);
    schema
}

/// Compiles schema JSON, failing the check on error.
pub fn compile_json(value: &Value) -> CheckResult<CompiledSchema> {
    let input = sync_schema::parse_schema_value(value)
        .map_err(|e| Failure::new(format!("fixture schema does not parse: {e:?}")))?;
    sync_schema::compile(&input)
        .map_err(|e| Failure::new(format!("fixture schema does not compile: {e:?}")))
}

/// `FIX1` compiled.
pub fn fix1() -> CheckResult<CompiledSchema> {
    compile_json(&fix1_json())
}

/// `FIX2` compiled.
pub fn fix2() -> CheckResult<CompiledSchema> {
    compile_json(&fix2_json())
}

/// `FIX1` relabelled to another version (same tables).
pub fn fix1_at(version: i32) -> CheckResult<CompiledSchema> {
    let mut value = fix1_json();
    value["version"] = json!(version);
    compile_json(&value)
}

/// Stored scopes from `(variable, value)` pairs.
pub fn scopes(pairs: &[(&str, &str)]) -> StoredScopes {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn encode(schema: &CompiledSchema, table: &str, values: &[RowValue]) -> CheckResult<Vec<u8>> {
    let table = schema
        .table(table)
        .ok_or_else(|| Failure::new(format!("fixture table {table} missing")))?;
    codec::encode_row(table, values)
        .map_err(|e| Failure::new(format!("fixture row does not encode: {e:?}")))
}

/// The values of a `tasks` row with every nullable column NULL (under `schema`,
/// so `FIX2` rows get a NULL `assignee`).
pub fn task_values(schema: &CompiledSchema, id: &str, project: &str, title: &str) -> Vec<RowValue> {
    let width = schema.table("tasks").map_or(9, |t| t.columns.len());
    let mut values = vec![
        RowValue::String(id.to_owned()),
        RowValue::String(project.to_owned()),
        RowValue::String(title.to_owned()),
        RowValue::Boolean(false),
    ];
    values.resize(width, RowValue::Null);
    values
}

/// A valid `tasks` row (version 1, scopes `{project_id: project}`).
pub fn task(
    schema: &CompiledSchema,
    id: &str,
    project: &str,
    title: &str,
) -> CheckResult<StoredRow> {
    task_with(schema, task_values(schema, id, project, title))
}

/// A `tasks` row from explicit values (scopes from `project_id`).
pub fn task_with(schema: &CompiledSchema, values: Vec<RowValue>) -> CheckResult<StoredRow> {
    let id = values
        .first()
        .and_then(RowValue::render_key)
        .unwrap_or_default();
    let project = values
        .get(1)
        .and_then(RowValue::render_key)
        .unwrap_or_default();
    Ok(StoredRow {
        row_id: id,
        server_version: 1,
        scopes: scopes(&[("project_id", &project)]),
        payload: encode(schema, "tasks", &values)?,
        column_versions: None,
    })
}

/// A valid `docs` row (scopes `org_id`, `project_id`).
pub fn doc(
    schema: &CompiledSchema,
    id: &str,
    org: &str,
    project: &str,
    body: Option<&str>,
) -> CheckResult<StoredRow> {
    let values = vec![
        RowValue::String(id.to_owned()),
        RowValue::String(org.to_owned()),
        RowValue::String(project.to_owned()),
        body.map_or(RowValue::Null, |b| RowValue::String(b.to_owned())),
    ];
    Ok(StoredRow {
        row_id: id.to_owned(),
        server_version: 1,
        scopes: scopes(&[("org_id", org), ("project_id", project)]),
        payload: encode(schema, "docs", &values)?,
        column_versions: None,
    })
}

/// A valid `secrets` row.
pub fn secret(
    schema: &CompiledSchema,
    id: &str,
    project: &str,
    body: &[u8],
) -> CheckResult<StoredRow> {
    let values = vec![
        RowValue::String(id.to_owned()),
        RowValue::String(project.to_owned()),
        RowValue::Bytes(body.to_vec()),
        RowValue::Null,
    ];
    Ok(StoredRow {
        row_id: id.to_owned(),
        server_version: 1,
        scopes: scopes(&[("project_id", project)]),
        payload: encode(schema, "secrets", &values)?,
        column_versions: None,
    })
}

/// A valid `device_key_grants` row.
pub fn grant(
    schema: &CompiledSchema,
    id: &str,
    user: &str,
    device_key: &str,
) -> CheckResult<StoredRow> {
    let values = vec![
        RowValue::String(id.to_owned()),
        RowValue::String(user.to_owned()),
        RowValue::String(device_key.to_owned()),
    ];
    Ok(StoredRow {
        row_id: id.to_owned(),
        server_version: 1,
        scopes: scopes(&[("user_id", user)]),
        payload: encode(schema, "device_key_grants", &values)?,
        column_versions: None,
    })
}

/// Decodes a stored row of `table` under `schema`.
pub fn decode(schema: &CompiledSchema, table: &str, payload: &[u8]) -> CheckResult<Vec<RowValue>> {
    let table = schema
        .table(table)
        .ok_or_else(|| Failure::new(format!("fixture table {table} missing")))?;
    codec::decode_row(table, payload)
        .map_err(|e| Failure::new(format!("stored payload does not decode: {e:?}")))
}

/// One operation of a fixture push.
#[derive(Debug, Clone)]
pub enum Op {
    /// Upsert `row` into `table`.
    Upsert {
        /// Table.
        table: String,
        /// Row (its `server_version` becomes the change's `row_version`).
        row: StoredRow,
    },
    /// Delete a row (the change carries its stored scopes).
    Delete {
        /// Table.
        table: String,
        /// Row id.
        row_id: String,
    },
}

impl Op {
    /// An upsert.
    pub fn upsert(table: &str, row: StoredRow) -> Self {
        Op::Upsert {
            table: table.to_owned(),
            row,
        }
    }

    /// A delete.
    pub fn delete(table: &str, row_id: &str) -> Self {
        Op::Delete {
            table: table.to_owned(),
            row_id: row_id.to_owned(),
        }
    }
}

/// How a fixture push ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// Applied with this `commit_seq`.
    Applied(i64),
    /// An earlier result existed and was replayed.
    Replayed(StoredPushResult),
    /// Finalized as a rejection (constraint violation).
    Rejected(StoredPushResult),
}

impl PushOutcome {
    /// The applied `commit_seq`, failing the check otherwise.
    pub fn seq(&self) -> CheckResult<i64> {
        match self {
            PushOutcome::Applied(seq) => Ok(*seq),
            other => Err(Failure::new(format!(
                "expected an applied push, got {other:?}"
            ))),
        }
    }
}

/// The standard push sequence with the default serve context.
pub fn push(
    storage: &dyn ServerStorage,
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
    ops: &[Op],
) -> sync_core::Result<PushOutcome> {
    push_with(
        storage,
        &ServeContext::default(),
        partition,
        client_id,
        client_commit_id,
        ops,
    )
}

/// The standard push sequence (`storage-contract.md` §6 item 3).
pub fn push_with(
    storage: &dyn ServerStorage,
    ctx: &ServeContext,
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
    ops: &[Op],
) -> sync_core::Result<PushOutcome> {
    if let Some(existing) = storage.get_push_result(partition, client_id, client_commit_id)? {
        return Ok(PushOutcome::Replayed(existing));
    }
    let running = storage.ensured_version().unwrap_or(0);
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    let gate = tx.read_serve_gate(running)?;
    check_serve_gate(&gate, running, ctx)?;
    if let Some(existing) = tx.get_push_result(client_id, client_commit_id)? {
        tx.rollback()?;
        return Ok(PushOutcome::Replayed(existing));
    }
    let mut changes = Vec::with_capacity(ops.len());
    for (index, op) in ops.iter().enumerate() {
        let op_index = u32::try_from(index).ok();
        match op {
            Op::Upsert { table, row } => {
                if let Err(error) = tx.upsert_row(table, row, op_index) {
                    if error.code() != ErrorCode::ConstraintViolation {
                        return Err(error);
                    }
                    let result = rejection(&error, index);
                    tx.commit_rejected_push_result(client_id, client_commit_id, &result)?;
                    return Ok(PushOutcome::Rejected(result));
                }
                changes.push(NewChange::upsert(
                    table.clone(),
                    row.row_id.clone(),
                    row.server_version,
                    row.scopes.clone(),
                    row.payload.clone(),
                ));
            }
            Op::Delete { table, row_id } => {
                let scopes = tx
                    .get_row(table, row_id)?
                    .map(|r| r.scopes)
                    .unwrap_or_default();
                tx.delete_row(table, row_id)?;
                changes.push(NewChange::delete(table.clone(), row_id.clone(), scopes));
            }
        }
    }
    let seq = tx.append_commit(&NewCommit {
        client_id: client_id.to_owned(),
        client_commit_id: client_commit_id.to_owned(),
        actor_id: format!("actor:{client_id}"),
        created_at_ms: crate::context::NOW,
        changes,
    })?;
    let mut result = StoredPushResult::applied(seq);
    result.results = (0..ops.len())
        .filter_map(|i| u32::try_from(i).ok())
        .map(|op_index| PushOperationResult::Applied { op_index })
        .collect();
    tx.put_push_result(client_id, client_commit_id, &result)?;
    tx.commit()?;
    Ok(PushOutcome::Applied(seq))
}

fn rejection(error: &Error, index: usize) -> StoredPushResult {
    StoredPushResult {
        status: PushStatus::Rejected,
        commit_seq: None,
        recorded_at_ms: Some(crate::context::NOW),
        cache_identity: None,
        results: vec![PushOperationResult::Error {
            op_index: u32::try_from(index).unwrap_or(u32::MAX),
            code: "sync.constraint_violation".to_owned(),
            message: error.message().to_owned(),
            retryable: false,
            details: None,
        }],
        actor_id: None,
    }
}
