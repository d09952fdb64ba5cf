//! Shared support of the integration tests: a fresh schema per test on the
//! server named by `SYNCSTORE_PG_URL`, fixture schemas and row builders.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use postgres::{Client, NoTls};
use sync_core::{
    codec, CompiledSchema, ManualClock, NewChange, NewCommit, RowValue, StoredRow, StoredScopes,
};
use sync_postgres::{PostgresConfig, PostgresStorage};

pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
pub const NOW: i64 = 1_700_000_000_000;

pub fn pg_url() -> String {
    std::env::var("SYNCSTORE_PG_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// A direct client; an unreachable server fails the test loudly.
pub fn client() -> Client {
    let url = pg_url();
    Client::connect(&url, NoTls).unwrap_or_else(|e| {
        panic!(
            "cannot reach PostgreSQL at {url} ({e}). Start a server (e.g. `pg_ctlcluster <version> main start`) \
             or point SYNCSTORE_PG_URL at one."
        )
    })
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique_name() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!(
        "test_{:x}_{:x}_{:x}",
        nanos & 0xffff_ffff_ffff,
        std::process::id(),
        n
    )
}

/// A schema created for one test, dropped with CASCADE at the end.
pub struct TestDb {
    pub schema: String,
}

impl TestDb {
    pub fn new() -> Self {
        let schema = unique_name();
        client()
            .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
            .expect("create schema");
        Self { schema }
    }

    pub fn config(&self) -> PostgresConfig {
        PostgresConfig {
            schema: Some(self.schema.clone()),
            clock: Arc::new(ManualClock::new(NOW)),
            ..PostgresConfig::default()
        }
    }

    pub fn open(&self) -> PostgresStorage {
        PostgresStorage::connect(&pg_url(), self.config()).expect("connect")
    }

    pub fn open_with(&self, config: PostgresConfig) -> PostgresStorage {
        PostgresStorage::connect(&pg_url(), config).expect("connect")
    }

    /// A raw client with `search_path` set to this schema.
    pub fn raw(&self) -> Client {
        let mut c = client();
        c.batch_execute(&format!("SET search_path TO \"{}\"", self.schema))
            .expect("search_path");
        c
    }

    pub fn count(&self, sql: &str) -> i64 {
        self.raw().query_one(sql, &[]).expect("count").get(0)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut c) = Client::connect(&pg_url(), NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ));
        }
    }
}

pub const FIX1: &str = r#"{"version":1,"tables":[
 {"name":"tasks","primaryKey":"id","columns":[
   {"name":"id","type":"string"},{"name":"project_id","type":"string"},{"name":"title","type":"string"},
   {"name":"done","type":"boolean"},{"name":"priority","type":"integer","nullable":true},
   {"name":"score","type":"float","nullable":true},{"name":"meta","type":"json","nullable":true},
   {"name":"thumb","type":"bytes","nullable":true},{"name":"attachment","type":"blob_ref","nullable":true}],
  "scopes":["project:{project_id}"],
  "indexes":[{"name":"tasks_by_title","columns":["title"]},
             {"name":"tasks_by_project_title","columns":["project_id","title"],"unique":true}]},
 {"name":"docs","primaryKey":"id","columns":[
   {"name":"id","type":"string"},{"name":"org_id","type":"string"},{"name":"project_id","type":"string"},
   {"name":"body","type":"string","nullable":true}],
  "scopes":["org:{org_id}","project:{project_id}"],
  "indexes":[{"name":"docs_by_body","columns":["body"]}]},
 {"name":"secrets","primaryKey":"id","columns":[
   {"name":"id","type":"string"},{"name":"project_id","type":"string"},
   {"name":"body","type":"bytes","encrypted":true},{"name":"attrs","type":"bytes","nullable":true,"encrypted":true}],
  "scopes":["project:{project_id}"]}
]}"#;

/// FIX1 at v2 with a nullable `assignee` appended to `tasks` and an index on it.
pub fn fix2() -> CompiledSchema {
    let text = FIX1
        .replace("\"version\":1", "\"version\":2")
        .replace(
            "{\"name\":\"attachment\",\"type\":\"blob_ref\",\"nullable\":true}]",
            "{\"name\":\"attachment\",\"type\":\"blob_ref\",\"nullable\":true},{\"name\":\"assignee\",\"type\":\"string\",\"nullable\":true}]",
        )
        .replace(
            "{\"name\":\"tasks_by_project_title\",\"columns\":[\"project_id\",\"title\"],\"unique\":true}",
            "{\"name\":\"tasks_by_assignee\",\"columns\":[\"assignee\"]}",
        );
    compile(&text)
}

pub fn compile(text: &str) -> CompiledSchema {
    sync_schema::compile(&sync_schema::parse_schema_json(text).expect("parse")).expect("compile")
}

pub fn fix1() -> CompiledSchema {
    compile(FIX1)
}

pub fn scopes(pairs: &[(&str, &str)]) -> StoredScopes {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A `tasks` payload under FIX1.
pub fn task_payload(schema: &CompiledSchema, id: &str, project: &str, title: &str) -> Vec<u8> {
    let table = schema.table("tasks").expect("tasks");
    let mut values = vec![
        RowValue::String(id.into()),
        RowValue::String(project.into()),
        RowValue::String(title.into()),
        RowValue::Boolean(false),
        RowValue::Integer(1),
        RowValue::Null,
        RowValue::Null,
        RowValue::Null,
        RowValue::Null,
    ];
    values.resize(table.columns.len(), RowValue::Null);
    codec::encode_row(table, &values).expect("encode")
}

pub fn task_row(
    schema: &CompiledSchema,
    id: &str,
    project: &str,
    title: &str,
    version: i64,
) -> StoredRow {
    StoredRow {
        row_id: id.into(),
        server_version: version,
        scopes: scopes(&[("project_id", project)]),
        payload: task_payload(schema, id, project, title),
        column_versions: None,
    }
}

pub fn upsert_change(row: &StoredRow, table: &str) -> NewChange {
    NewChange::upsert(
        table,
        row.row_id.clone(),
        row.server_version,
        row.scopes.clone(),
        row.payload.clone(),
    )
}

pub fn commit(client: &str, ccid: &str, changes: Vec<NewChange>) -> NewCommit {
    NewCommit {
        client_id: client.into(),
        client_commit_id: ccid.into(),
        actor_id: "actor".into(),
        created_at_ms: NOW,
        changes,
    }
}

/// The standard push sequence of `storage-contract.md` §6 item 3 for upserts
/// of `tasks` rows; returns the commit sequence.
pub fn push(
    storage: &dyn sync_core::ServerStorage,
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
    rows: &[StoredRow],
) -> sync_core::Result<i64> {
    push_with(
        storage,
        &sync_core::ServeContext::default(),
        partition,
        client_id,
        client_commit_id,
        rows,
    )
}

/// [`push`] with the serving process's declarations / expected epoch.
pub fn push_with(
    storage: &dyn sync_core::ServerStorage,
    ctx: &sync_core::ServeContext,
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
    rows: &[StoredRow],
) -> sync_core::Result<i64> {
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    let running = tx.writer_version();
    let gate = tx.read_serve_gate(running)?;
    if let Err(refusal) = sync_core::check_serve_gate(&gate, running, ctx) {
        tx.rollback()?;
        return Err(refusal);
    }
    if let Some(existing) = tx.get_push_result(client_id, client_commit_id)? {
        tx.rollback()?;
        return Ok(existing.commit_seq.unwrap_or(0));
    }
    for (i, row) in rows.iter().enumerate() {
        tx.upsert_row("tasks", row, Some(i as u32))?;
    }
    let changes = rows.iter().map(|r| upsert_change(r, "tasks")).collect();
    let seq = tx.append_commit(&commit(client_id, client_commit_id, changes))?;
    tx.put_push_result(
        client_id,
        client_commit_id,
        &sync_core::StoredPushResult::applied(seq),
    )?;
    tx.commit()?;
    Ok(seq)
}

/// A storage with FIX1 ensured.
pub fn ensured(db: &TestDb) -> PostgresStorage {
    let storage = db.open();
    sync_core::ServerStorage::ensure_schema(
        &storage,
        &fix1(),
        &sync_core::EnsureOptions::default(),
    )
    .expect("ensure FIX1");
    storage
}

pub fn filter(variable: &str, values: &[&str]) -> sync_core::ScopeFilter {
    [(
        variable.to_owned(),
        values.iter().map(|v| v.to_string()).collect(),
    )]
    .into()
}
