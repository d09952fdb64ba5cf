//! The reference's version 2 client (0.15.48) as a child process: the
//! `v2_driver` example of the `interop/` workspace (its SQLite library
//! cannot be linked beside this workspace's). The driver is
//! `$SYNCSTORE_V2_DRIVER`, or built once per test process in the `interop/`
//! workspace. The process is killed when dropped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;

use serde_json::{json, Value};

use super::clients::Row;
use super::server::Server;

/// The path of the driver executable.
fn driver_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("SYNCSTORE_V2_DRIVER") {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "SYNCSTORE_V2_DRIVER names {}, which is not a file",
                path.display()
            );
            path
        }
        None => build(),
    })
}

/// `cargo build --example v2_driver` in the `interop/` workspace, into
/// that workspace's own target directory; the path is read from cargo's
/// artifact messages.
fn build() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--example",
            "v2_driver",
            "--message-format=json-render-diagnostics",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .env_remove("CARGO_TARGET_DIR")
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the v2 driver: {e}"));
    assert!(
        output.status.success(),
        "building the v2 driver failed (SYNCSTORE_V2_DRIVER is unset, so the scenarios build it)"
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "v2_driver")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported no v2_driver executable")
}

/// One version 2 client in its driver process.
pub struct V2Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl V2Client {
    /// A client with `client_id` and `schema`, talking to `server` with
    /// `Authorization: Bearer <token>`.
    pub fn open(server: &Server, client_id: &str, token: &str, schema: &Value) -> Self {
        let mut child = Command::new(driver_bin())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", driver_bin().display()));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut client = Self {
            child,
            stdin,
            stdout,
        };
        client.call(json!({
            "op": "open",
            "baseUrl": server.base_url,
            "token": token,
            "clientId": client_id,
            "schema": schema,
        }));
        client
    }

    /// Sends one command and returns its answer; fails the test on an
    /// answer that is not `ok`.
    pub fn call(&mut self, command: Value) -> Value {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("the v2 driver went away: {e}"));
        let mut line = String::new();
        let read = self
            .stdout
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("reading the v2 driver failed: {e}"));
        assert!(read > 0, "the v2 driver exited on {command}");
        let answer: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the v2 driver printed no JSON ({e}): {line}"));
        assert_eq!(answer["ok"], true, "{command} → {answer}");
        answer
    }

    /// Subscribes `id` to the todos of `lists`.
    pub fn subscribe(&mut self, id: &str, lists: &[&str]) {
        self.call(json!({"op": "subscribe", "id": id, "lists": lists}));
    }

    /// Queues one commit upserting a whole row; returns its commit id.
    pub fn upsert(&mut self, values: Value, base_version: Option<i64>) -> String {
        let answer =
            self.call(json!({"op": "upsert", "values": values, "baseVersion": base_version}));
        text(&answer["commit"])
    }

    /// Queues one commit deleting `row_id`; returns its commit id.
    pub fn delete(&mut self, row_id: &str) -> String {
        let answer = self.call(json!({"op": "delete", "rowId": row_id}));
        text(&answer["commit"])
    }

    /// Rounds until idle; returns the client's report (JSON, camelCase).
    pub fn sync(&mut self) -> Value {
        self.call(json!({"op": "sync"}))["report"].take()
    }

    /// The todos the client holds, by id.
    pub fn rows(&mut self) -> BTreeMap<String, Row> {
        let answer = self.call(json!({"op": "rows"}));
        answer["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("rows is an array: {answer}"))
            .iter()
            .map(|row| {
                let values = row["values"].as_object().cloned().unwrap_or_default();
                let version = row["version"].as_i64().unwrap_or(i64::MIN);
                (text(&row["rowId"]), (version, values))
            })
            .collect()
    }

    /// The conflict records the client holds (JSON, camelCase).
    pub fn conflicts(&mut self) -> Vec<Value> {
        match self.call(json!({"op": "conflicts"}))["conflicts"].take() {
            Value::Array(conflicts) => conflicts,
            other => panic!("conflicts is an array, got {other}"),
        }
    }

    /// The recorded outcome of `commit`.
    pub fn outcome(&mut self, commit: &str) -> String {
        text(&self.call(json!({"op": "outcome", "commit": commit}))["status"])
    }
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {value}"))
        .to_owned()
}

impl Drop for V2Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
