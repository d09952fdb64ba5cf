//! The reference's published clients of wire version 3 — the first release
//! that speaks it (0.24.0) and a later one (0.49.2) — on their own HTTP
//! transport, behind one trait so each scenario runs with both.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::server::Server;

/// A row as a client holds it: its version (`-1` while optimistic) and
/// its values.
pub type Row = (i64, Map<String, Value>);

/// A conflict record as the client surfaces it.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// The rejected commit.
    pub commit: String,
    /// The row.
    pub row_id: String,
    /// `sync.version_conflict`.
    pub code: String,
    /// The server's version of the row.
    pub server_version: i64,
    /// The server's row.
    pub server_row: Map<String, Value>,
    /// The columns the client names as conflicting.
    pub columns: Vec<String>,
}

/// What a scenario does with a version 3 client.
pub trait V3Client: Sized {
    /// The client release, for messages.
    const RELEASE: &'static str;

    /// A client with `client_id` and `schema`, talking to `server` with
    /// `Authorization: Bearer <token>`.
    fn open(server: &Server, client_id: &str, token: &str, schema: &Value) -> Self;

    /// Subscribes `id` to the todos of `lists`.
    fn subscribe(&mut self, id: &str, lists: &[&str]);

    /// Queues one commit upserting a whole row; returns its commit id.
    fn upsert(&mut self, values: Value, base_version: Option<i64>) -> String;

    /// Queues one commit writing only `columns` of the row `row_id` (a
    /// sparse row); returns its commit id.
    fn patch(&mut self, row_id: &str, columns: Value, base_version: Option<i64>) -> String;

    /// Queues one commit deleting `row_id`; returns its commit id.
    fn delete(&mut self, row_id: &str) -> String;

    /// Rounds until idle; fails the test on a failed round. Returns the
    /// ids of the commits applied and rejected.
    fn sync(&mut self) -> (Vec<String>, Vec<String>);

    /// The todos the client holds, by id.
    fn rows(&self) -> BTreeMap<String, Row>;

    /// The conflict records the client holds.
    fn conflicts(&self) -> Vec<Conflict>;

    /// The rejections (error records) the client holds: `(commit, code)`.
    fn rejections(&self) -> Vec<(String, String)>;

    /// The recorded outcome of `commit` (`applied`, `cached`, `conflict`,
    /// `rejected`).
    fn outcome(&self, commit: &str) -> String;
}

fn object(values: Value) -> Map<String, Value> {
    match values {
        Value::Object(map) => map,
        other => panic!("row values are an object, got {other}"),
    }
}

macro_rules! v3_client {
    ($name:ident, $krate:ident, $release:literal) => {
        #[doc = concat!("`syncular-client` ", $release, ".")]
        pub struct $name {
            sync: $krate::SyncClient,
            wire: $krate::native_transport::HostTransport,
        }

        impl V3Client for $name {
            const RELEASE: &'static str = $release;

            fn open(server: &Server, client_id: &str, token: &str, schema: &Value) -> Self {
                let wire = $krate::native_transport::HostTransport::from_config(&json!({
                    "baseUrl": server.base_url,
                    "headers": {"Authorization": format!("Bearer {token}")},
                }))
                .unwrap_or_else(|e| panic!("{}: the transport refused its config: {e}", $release));
                let sync = $krate::SyncClient::new(
                    client_id.to_owned(),
                    schema,
                    $krate::ClientLimits::default(),
                )
                .unwrap_or_else(|e| panic!("{}: the client refused to start: {e}", $release));
                Self { sync, wire }
            }

            fn subscribe(&mut self, id: &str, lists: &[&str]) {
                let lists = lists.iter().map(|l| (*l).to_owned()).collect();
                self.sync
                    .subscribe(
                        id.to_owned(),
                        "todos".to_owned(),
                        vec![("list_id".to_owned(), lists)],
                        None,
                    )
                    .unwrap_or_else(|e| panic!("subscribe {id}: {e}"));
            }

            fn upsert(&mut self, values: Value, base_version: Option<i64>) -> String {
                self.sync
                    .mutate(vec![$krate::Mutation::Upsert {
                        table: "todos".into(),
                        values: object(values),
                        base_version,
                    }])
                    .unwrap_or_else(|e| panic!("mutate: {e:?}"))
            }

            fn patch(&mut self, row_id: &str, columns: Value, base_version: Option<i64>) -> String {
                self.sync
                    .patch("todos", row_id, object(columns), base_version)
                    .unwrap_or_else(|e| panic!("patch: {e:?}"))
            }

            fn delete(&mut self, row_id: &str) -> String {
                self.sync
                    .mutate(vec![$krate::Mutation::Delete {
                        table: "todos".into(),
                        row_id: row_id.to_owned(),
                        base_version: None,
                    }])
                    .unwrap_or_else(|e| panic!("mutate: {e:?}"))
            }

            fn sync(&mut self) -> (Vec<String>, Vec<String>) {
                match self.sync.sync_until_idle(&mut self.wire, Some(64)) {
                    $krate::SyncOutcome::Ok(report) => (report.applied, report.rejected),
                    other => panic!("{}: the rounds did not complete: {other:?}", $release),
                }
            }

            fn rows(&self) -> BTreeMap<String, Row> {
                self.sync
                    .read_rows("todos")
                    .unwrap_or_else(|e| panic!("read_rows: {e}"))
                    .into_iter()
                    .map(|row| (row.row_id, (row.version, row.values)))
                    .collect()
            }

            fn conflicts(&self) -> Vec<Conflict> {
                self.sync
                    .conflicts()
                    .iter()
                    .map(|c| Conflict {
                        commit: c.client_commit_id.clone(),
                        row_id: c.row_id.clone(),
                        code: c.code.clone(),
                        server_version: c.server_version,
                        server_row: c.server_row.clone(),
                        columns: c.conflict_columns.clone(),
                    })
                    .collect()
            }

            fn rejections(&self) -> Vec<(String, String)> {
                self.sync
                    .rejections()
                    .iter()
                    .map(|r| (r.client_commit_id.clone(), r.code.clone()))
                    .collect()
            }

            fn outcome(&self, commit: &str) -> String {
                let outcome = self
                    .sync
                    .commit_outcome(commit)
                    .unwrap_or_else(|e| panic!("commit_outcome: {e}"))
                    .unwrap_or_else(|| panic!("no outcome recorded for {commit}"));
                match serde_json::to_value(outcome.status) {
                    Ok(Value::String(status)) => status,
                    other => panic!("an outcome status is a string, got {other:?}"),
                }
            }
        }
    };
}

v3_client!(First, client_v3_first, "0.24.0");
v3_client!(Latest, client_v3, "0.49.2");
