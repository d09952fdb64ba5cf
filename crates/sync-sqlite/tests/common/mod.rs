//! Shared helpers of the integration tests: a fresh database per test, the
//! fixture schema, payload builders and the standard push sequence.
#![allow(dead_code)]

use std::sync::Arc;

use sync_core::codec;
use sync_core::{
    CompiledSchema, EnsureOptions, ManualClock, NewChange, NewCommit, RowValue, ScopeFilter,
    ServeContext, ServerStorage, StoredPushResult, StoredRow, StoredScopes,
};
use sync_sqlite::{SqliteConfig, SqliteStorage};
use tempfile::TempDir;

pub const NOW: i64 = 1_700_000_000_000;

/// A temporary directory holding one database file.
pub struct Db {
    pub dir: TempDir,
    pub clock: Arc<ManualClock>,
}

impl Db {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            clock: Arc::new(ManualClock::new(NOW)),
        }
    }

    pub fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("sync.db")
    }

    pub fn open(&self) -> SqliteStorage {
        SqliteStorage::open(self.path(), SqliteConfig::with_clock(self.clock.clone())).unwrap()
    }

    pub fn open_with(&self, config: SqliteConfig) -> SqliteStorage {
        SqliteStorage::open(self.path(), config).unwrap()
    }

    /// Opens and ensures the v1 fixture schema.
    pub fn ready(&self) -> SqliteStorage {
        let storage = self.open();
        storage
            .ensure_schema(&fix1(), &EnsureOptions::default())
            .unwrap();
        storage
    }

    pub fn raw(&self) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open(self.path()).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        conn
    }
}

pub fn schema_json(version: i32, with_assignee: bool, extra_index: bool) -> String {
    let assignee = if with_assignee {
        r#",{"name":"assignee","type":"string","nullable":true}"#
    } else {
        ""
    };
    let project_title = if extra_index {
        r#",{"name":"tasks_by_project_title","columns":["project_id","title"],"unique":true}"#
    } else {
        ""
    };
    format!(
        r#"{{"version":{version},"tables":[
  {{"name":"tasks","primaryKey":"id","columns":[
    {{"name":"id","type":"string"}},{{"name":"project_id","type":"string"}},{{"name":"title","type":"string"}},
    {{"name":"done","type":"boolean"}},{{"name":"priority","type":"integer","nullable":true}},
    {{"name":"score","type":"float","nullable":true}},{{"name":"meta","type":"json","nullable":true}},
    {{"name":"thumb","type":"bytes","nullable":true}},{{"name":"attachment","type":"blob_ref","nullable":true}}{assignee}],
   "scopes":["project:{{project_id}}"],
   "indexes":[{{"name":"tasks_by_title","columns":["title"]}}{project_title}]}},
  {{"name":"docs","primaryKey":"id","columns":[
    {{"name":"id","type":"string"}},{{"name":"org_id","type":"string"}},{{"name":"project_id","type":"string"}},
    {{"name":"body","type":"string","nullable":true}}],
   "scopes":["org:{{org_id}}","project:{{project_id}}"],
   "indexes":[{{"name":"docs_by_body","columns":["body"]}}]}},
  {{"name":"secrets","primaryKey":"id","columns":[
    {{"name":"id","type":"string"}},{{"name":"project_id","type":"string"}},
    {{"name":"body","type":"bytes","encrypted":true}},{{"name":"attrs","type":"bytes","nullable":true,"encrypted":true}}],
   "scopes":["project:{{project_id}}"]}}
]}}"#
    )
}

pub fn compile(json: &str) -> CompiledSchema {
    sync_schema::compile(&sync_schema::parse_schema_json(json).unwrap()).unwrap()
}

/// The fixture schema at v1 (tasks with a unique (project_id, title) index).
pub fn fix1() -> CompiledSchema {
    compile(&schema_json(1, false, true))
}

/// v2: nullable `assignee` appended to tasks.
pub fn fix2() -> CompiledSchema {
    compile(&schema_json(2, true, true))
}

pub fn scopes(pairs: &[(&str, &str)]) -> StoredScopes {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn filter(var: &str, values: &[&str]) -> ScopeFilter {
    [(
        var.to_string(),
        values.iter().map(|v| v.to_string()).collect(),
    )]
    .into()
}

/// A valid v1 `tasks` payload.
pub fn task_payload(id: &str, project: &str, title: &str) -> Vec<u8> {
    let schema = fix1();
    let table = schema.table("tasks").unwrap();
    codec::encode_row(
        table,
        &[
            RowValue::String(id.into()),
            RowValue::String(project.into()),
            RowValue::String(title.into()),
            RowValue::Boolean(false),
            RowValue::Integer(7),
            RowValue::Null,
            RowValue::Json(r#"{"a":1}"#.into()),
            RowValue::Null,
            RowValue::Null,
        ],
    )
    .unwrap()
}

pub fn task_row(id: &str, project: &str, title: &str) -> StoredRow {
    StoredRow {
        row_id: id.into(),
        server_version: 1,
        scopes: scopes(&[("project_id", project)]),
        payload: task_payload(id, project, title),
        column_versions: None,
    }
}

pub fn upsert_change(row: &StoredRow) -> NewChange {
    NewChange::upsert(
        "tasks",
        row.row_id.clone(),
        row.server_version,
        row.scopes.clone(),
        row.payload.clone(),
    )
}

pub fn commit_of(client: &str, ccid: &str, changes: Vec<NewChange>) -> NewCommit {
    NewCommit {
        client_id: client.into(),
        client_commit_id: ccid.into(),
        actor_id: "actor".into(),
        created_at_ms: NOW,
        changes,
    }
}

/// Pushes tasks `t{from}`… one single-row commit each (keys `k{i}`), to
/// partition `p` as client `c`.
pub fn push_many(storage: &dyn ServerStorage, from: usize, count: usize) {
    for i in from..from + count {
        let id = format!("t{i}");
        push(
            storage,
            "p",
            "c",
            &format!("k{i}"),
            &[task_row(&id, "proj", &id)],
        );
    }
}

/// The standard push sequence of `storage-contract.md` §6 item 3 for task upserts.
pub fn push(
    storage: &dyn ServerStorage,
    partition: &str,
    client: &str,
    ccid: &str,
    rows: &[StoredRow],
) -> i64 {
    push_as(
        storage,
        &ServeContext::default(),
        partition,
        client,
        ccid,
        rows,
    )
}

/// [`push`] by a process with the given serve context (declarations).
pub fn push_as(
    storage: &dyn ServerStorage,
    ctx: &ServeContext,
    partition: &str,
    client: &str,
    ccid: &str,
    rows: &[StoredRow],
) -> i64 {
    assert!(storage
        .get_push_result(partition, client, ccid)
        .unwrap()
        .is_none());
    let mut tx = storage.begin(partition).unwrap();
    tx.lock_partition_for_push().unwrap();
    let gate = tx.read_serve_gate(tx.writer_version()).unwrap();
    assert!(sync_core::serve_gate_refusal(&gate, tx.writer_version(), ctx).is_none());
    assert!(tx.get_push_result(client, ccid).unwrap().is_none());
    for (i, row) in rows.iter().enumerate() {
        tx.upsert_row("tasks", row, Some(i as u32)).unwrap();
    }
    let seq = tx
        .append_commit(&commit_of(
            client,
            ccid,
            rows.iter().map(upsert_change).collect(),
        ))
        .unwrap();
    tx.put_push_result(client, ccid, &StoredPushResult::applied(seq))
        .unwrap();
    tx.commit().unwrap();
    seq
}

/// `EXPLAIN QUERY PLAN` of `sql` with every parameter NULL: the plan's
/// detail lines.
pub fn plan(conn: &rusqlite::Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
    stmt.query_map(rusqlite::params_from_iter(nulls.iter()), |r| {
        r.get::<_, String>(3)
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}
