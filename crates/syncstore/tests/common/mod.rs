//! Shared helpers of the binary's integration tests: running `syncstore`
//! as a user would, fresh databases (a temporary SQLite file, or a fresh
//! Postgres schema per test on `SYNCSTORE_PG_URL`, a fresh MariaDB database
//! on `SYNCSTORE_MARIADB_URL`), schema files, and an
//! application writer that seeds rows through the storage library (the
//! operator CLI has no push command, exactly like production).
//!
//! An unreachable Postgres server fails the Postgres tests; it never skips
//! them.
#![allow(dead_code)]

pub mod http;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sync_core::{
    codec, CompiledSchema, EnsureOptions, NewChange, NewCommit, RowValue, ServerStorage,
    StoredPushResult, StoredRow, StoredScopes,
};

/// The default Postgres server of the tests.
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The Postgres server: `SYNCSTORE_PG_URL`, else the default.
pub fn pg_url() -> String {
    std::env::var("SYNCSTORE_PG_URL").unwrap_or_else(|_| DEFAULT_PG_URL.to_owned())
}

/// What one run of the binary produced.
#[derive(Debug)]
pub struct Run {
    /// Exit status code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    fn from(output: Output) -> Self {
        Self {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Stdout as exactly one JSON document.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Asserts success and returns the JSON document.
    pub fn ok_json(&self) -> Value {
        assert_eq!(
            self.code, 0,
            "expected success; stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self.json()
    }

    /// Asserts a JSON error with `code` (exit 1) and returns its details.
    pub fn json_error(&self, code: &str) -> Value {
        assert_eq!(
            self.code, 1,
            "expected exit 1; stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        let doc = self.json();
        let error = &doc["error"];
        assert_eq!(error["code"], code, "unexpected error document {doc:#}");
        assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{doc:#}"
        );
        assert!(error["details"].is_object(), "{doc:#}");
        let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["error"], "{doc:#}");
        error["details"].clone()
    }

    /// Asserts a text error with `code` (exit 1, first stderr line `error: <code>: …`).
    pub fn text_error(&self, code: &str) {
        assert_eq!(
            self.code, 1,
            "expected exit 1; stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        let first = self
            .stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_default();
        assert!(
            first.starts_with(&format!("error: {code}: ")),
            "expected `error: {code}: …` on stderr, got:\n{}",
            self.stderr
        );
        assert!(
            self.stdout.is_empty(),
            "stdout should be empty on a text error:\n{}",
            self.stdout
        );
    }
}

/// Runs the binary with `args` (no `SYNCSTORE_DATABASE_URL` inherited).
pub fn syncstore(args: &[&str]) -> Run {
    syncstore_in(None, args, &[])
}

/// Runs the binary in `dir` with extra environment variables.
pub fn syncstore_in(dir: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_syncstore"));
    command
        .args(args)
        .env_remove("SYNCSTORE_DATABASE_URL")
        .env_remove("SYNCSTORE_LOG");
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    Run::from(command.output().expect("the syncstore binary runs"))
}

/// A database a test runs against.
pub enum Db {
    /// A SQLite file in its own temporary directory.
    Sqlite {
        /// The directory (removed on drop).
        dir: tempfile::TempDir,
        /// The file.
        path: PathBuf,
    },
    /// A fresh Postgres schema (dropped on drop).
    Postgres {
        /// Server URL.
        server: String,
        /// Schema name.
        schema: String,
    },
    /// A fresh MariaDB database (dropped on drop).
    Mariadb {
        /// The database (dropped when this value is).
        scratch: sync_mariadb::scratch::ScratchDatabase,
        /// Its `--db` URL.
        url: String,
    },
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{:x}{:x}{}",
        nanos & 0xffff_ffff_ffff,
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl Db {
    /// A new SQLite database file (not created yet).
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("test.sqlite");
        Self::Sqlite { dir, path }
    }

    /// A new, empty Postgres schema. Panics (fails the test) when the server
    /// is unreachable.
    pub fn postgres() -> Self {
        let server = pg_url();
        let schema = format!("syncstore_cli_{}", unique());
        let mut client = postgres::Client::connect(&server, postgres::NoTls).unwrap_or_else(|e| {
            panic!(
                "cannot reach PostgreSQL at {server} ({e}); start it (e.g. `pg_ctlcluster <version> main start`) \
                 or set SYNCSTORE_PG_URL — Postgres tests are never skipped"
            )
        });
        client
            .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
            .expect("create the test schema");
        Self::Postgres { server, schema }
    }

    /// A new, empty MariaDB database on `SYNCSTORE_MARIADB_URL`'s server.
    /// Panics (fails the test) when the server is unreachable.
    pub fn mariadb() -> Self {
        let server = sync_mariadb::scratch::url_from_env();
        let base = sync_mariadb::MariadbUrl::parse(&server)
            .unwrap_or_else(|e| panic!("SYNCSTORE_MARIADB_URL {server:?}: {e}"));
        let scratch = sync_mariadb::scratch::ScratchDatabase::create(&base).unwrap_or_else(|e| {
            panic!(
                "cannot reach MariaDB at {server} ({e}); start it or set SYNCSTORE_MARIADB_URL \
                 — MariaDB tests are never skipped"
            )
        });
        let (server_part, _) = server.rsplit_once('/').expect("a database in the URL");
        let url = format!("{server_part}/{}", scratch.url().database());
        Self::Mariadb { scratch, url }
    }

    /// The `--db` URL of this database.
    pub fn url(&self) -> String {
        match self {
            Self::Sqlite { path, .. } => format!("sqlite:{}", path.display()),
            Self::Postgres { server, schema } => {
                let separator = if server.contains('?') { '&' } else { '?' };
                format!("{server}{separator}schema={schema}")
            }
            Self::Mariadb { url, .. } => url.clone(),
        }
    }

    /// A directory for files of this test (removed when dropped).
    pub fn scratch(&self) -> tempfile::TempDir {
        tempfile::tempdir().expect("scratch directory")
    }

    /// Runs `syncstore --db <this> args…`.
    pub fn run(&self, args: &[&str]) -> Run {
        let url = self.url();
        let mut all = vec!["--db", url.as_str()];
        all.extend_from_slice(args);
        syncstore(&all)
    }

    /// Runs with `--json` appended and expects success.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        self.run(&all).ok_json()
    }

    /// Runs with `--json` appended and expects the error `code`; returns its details.
    pub fn json_error(&self, args: &[&str], code: &str) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        self.run(&all).json_error(code)
    }

    /// A storage instance of the application (a server process).
    pub fn storage(&self) -> Box<dyn ServerStorage> {
        match self {
            Self::Sqlite { path, .. } => Box::new(
                sync_sqlite::SqliteStorage::open(path, sync_sqlite::SqliteConfig::default())
                    .expect("open the SQLite database"),
            ),
            Self::Postgres { server, schema } => Box::new(
                sync_postgres::PostgresStorage::connect(
                    server,
                    sync_postgres::PostgresConfig {
                        schema: Some(schema.clone()),
                        pool_size: 4,
                        ..sync_postgres::PostgresConfig::default()
                    },
                )
                .expect("connect to Postgres"),
            ),
            Self::Mariadb { url, .. } => Box::new(
                sync_mariadb::MariadbStorage::connect(
                    url,
                    sync_mariadb::MariadbConfig {
                        pool_size: 4,
                        ..sync_mariadb::MariadbConfig::default()
                    },
                )
                .expect("connect to MariaDB"),
            ),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Self::Postgres { server, schema } = self {
            if let Ok(mut client) = postgres::Client::connect(server, postgres::NoTls) {
                let _ =
                    client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
            }
        }
    }
}

/// Writes `text` to `dir/name` and returns the path as a string.
pub fn write_file(dir: impl AsRef<Path>, name: &str, text: &str) -> String {
    let path = dir.as_ref().join(name);
    std::fs::write(&path, text).expect("write a test file");
    path.display().to_string()
}

/// The todos table at v1 (`search_text` appended at v2).
pub fn todos_schema(version: i32, with_search_text: bool, extra_tables: &str) -> String {
    let search = if with_search_text {
        r#", {"name": "search_text", "type": "string", "nullable": true}"#
    } else {
        ""
    };
    format!(
        r#"{{"version": {version}, "tables": [
  {{"name": "todos", "primaryKey": "id",
    "columns": [{{"name": "id", "type": "string"}}, {{"name": "list_id", "type": "string"}},
                {{"name": "title", "type": "string"}}, {{"name": "done", "type": "boolean"}}{search}],
    "scopes": ["list:{{list_id}}"],
    "indexes": [{{"name": "todos_by_list", "columns": ["list_id"]}}]}}{extra_tables}
]}}"#
    )
}

/// A projection table `todo_search(id, list_id, terms?)` (for derived-table).
pub const TODO_SEARCH_TABLE: &str = r#",
  {"name": "todo_search", "primaryKey": "id",
   "columns": [{"name": "id", "type": "string"}, {"name": "list_id", "type": "string"},
               {"name": "terms", "type": "string", "nullable": true}],
   "scopes": ["list:{list_id}"]}"#;

/// Compiles schema JSON text.
pub fn compile(text: &str) -> CompiledSchema {
    sync_schema::compile(&sync_schema::parse_schema_json(text).expect("schema parses"))
        .expect("schema compiles")
}

/// An application server pushing rows: standard push sequence, one commit
/// per call.
pub struct App {
    /// The storage instance.
    pub storage: Box<dyn ServerStorage>,
    /// The schema it ensured.
    pub schema: CompiledSchema,
    next_commit: u64,
}

impl App {
    /// Starts an application server on `db` with `schema_text` ensured and
    /// the partition registered.
    pub fn start(db: &Db, schema_text: &str, partition: &str) -> Self {
        let storage = db.storage();
        let schema = compile(schema_text);
        storage
            .ensure_schema(&schema, &EnsureOptions::default())
            .expect("ensure_schema");
        storage
            .touch_partition(partition, 1_700_000_000_000, &format!("{partition}-epoch"))
            .expect("touch_partition");
        Self {
            storage,
            schema,
            next_commit: 0,
        }
    }

    /// Pushes one commit upserting `rows` (values in column order) and
    /// deleting `deletes` of `table`. Returns its `commit_seq`.
    pub fn push(
        &mut self,
        partition: &str,
        table: &str,
        rows: &[Vec<RowValue>],
        deletes: &[&str],
    ) -> i64 {
        let compiled = self.schema.table(table).expect("known table").clone();
        self.next_commit += 1;
        let commit_id = format!("commit-{}", self.next_commit);
        let mut tx = self.storage.begin(partition).expect("begin");
        tx.lock_partition_for_push().expect("lock");
        let mut changes = Vec::new();
        for (i, values) in rows.iter().enumerate() {
            let row_id = values[compiled.primary_key_index]
                .render_key()
                .expect("row id");
            let scopes: StoredScopes = compiled
                .scope_patterns
                .iter()
                .map(|p| {
                    (
                        p.variable.clone(),
                        values[p.column_index].render_key().expect("scope"),
                    )
                })
                .collect();
            let payload = codec::encode_row(&compiled, values).expect("encode");
            let version = tx
                .get_row(table, &row_id)
                .expect("get_row")
                .map_or(1, |r| r.server_version + 1);
            tx.upsert_row(
                table,
                &StoredRow {
                    row_id: row_id.clone(),
                    server_version: version,
                    scopes: scopes.clone(),
                    payload: payload.clone(),
                    column_versions: None,
                },
                Some(i as u32),
            )
            .expect("upsert_row");
            changes.push(NewChange::upsert(table, row_id, version, scopes, payload));
        }
        for row_id in deletes {
            let row = tx
                .get_row(table, row_id)
                .expect("get_row")
                .expect("row to delete exists");
            tx.delete_row(table, row_id).expect("delete_row");
            changes.push(NewChange::delete(table, *row_id, row.scopes));
        }
        let seq = tx
            .append_commit(&NewCommit {
                client_id: "test-client".to_owned(),
                client_commit_id: commit_id.clone(),
                actor_id: "user:test".to_owned(),
                created_at_ms: 1_700_000_000_000 + self.next_commit as i64,
                changes,
            })
            .expect("append_commit");
        tx.put_push_result("test-client", &commit_id, &StoredPushResult::applied(seq))
            .expect("put_push_result");
        tx.commit().expect("commit");
        seq
    }
}

/// A v1 todo: `(id, list_id, title, done)`.
pub fn todo(n: u32) -> Vec<RowValue> {
    vec![
        RowValue::String(format!("t-{n:04}")),
        RowValue::String(format!("list-{}", n % 3)),
        RowValue::String(format!("Buy MILK Nr {n}")),
        RowValue::Boolean(n % 2 == 0),
    ]
}

/// Seeds `count` v1 todos in `partition`, `per_commit` per commit.
pub fn seed_todos(db: &Db, partition: &str, count: u32, per_commit: u32) -> App {
    let mut app = App::start(db, &todos_schema(1, false, ""), partition);
    let rows: Vec<Vec<RowValue>> = (0..count).map(todo).collect();
    for chunk in rows.chunks(per_commit.max(1) as usize) {
        app.push(partition, "todos", chunk, &[]);
    }
    app
}

/// Collects every page of `rows` (following `next`).
pub fn all_rows(db: &Db, partition: &str, table: &str, limit: u32) -> Vec<Value> {
    let limit = limit.to_string();
    let mut rows = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut args = vec![
            "rows",
            "--partition",
            partition,
            "--table",
            table,
            "--limit",
            &limit,
        ];
        if let Some(after) = &after {
            args.extend_from_slice(&["--after", after]);
        }
        let page = db.json(&args);
        rows.extend(page["rows"].as_array().expect("rows array").iter().cloned());
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return rows,
        }
    }
}

/// Collects every page of `commits`.
pub fn all_commits(db: &Db, partition: &str, limit: u32) -> Vec<Value> {
    let limit = limit.to_string();
    let mut commits = Vec::new();
    let mut after = "0".to_owned();
    loop {
        let page = db.json(&[
            "commits",
            "--partition",
            partition,
            "--after",
            &after,
            "--limit",
            &limit,
        ]);
        commits.extend(
            page["commits"]
                .as_array()
                .expect("commits array")
                .iter()
                .cloned(),
        );
        match page["next"].as_i64() {
            Some(next) => after = next.to_string(),
            None => return commits,
        }
    }
}

/// The sorted keys of a JSON object.
pub fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}
