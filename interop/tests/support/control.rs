//! `syncstore serve --test-control` as a black box: one server process over
//! a dialect's scratch storages, and its test instances driven through the
//! control routes. A client points its base URL at an instance.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use super::binary::syncstore_bin;
use super::db::{Db, Dialect};

/// How long the server may take to print its `listening on` line.
const STARTUP: Duration = Duration::from_secs(60);

/// A running control server, killed when dropped.
#[derive(Debug)]
pub struct ControlServer {
    /// `http://HOST:PORT`.
    pub base_url: String,
    child: Child,
    _db: Db,
}

/// One test instance of a [`ControlServer`].
#[derive(Debug)]
pub struct Instance {
    /// The base URL a client points at: `http://HOST:PORT/test/instances/{id}`.
    pub base_url: String,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// `method url` (`GET`, or `POST` with a JSON body); fails the test
/// unless it answers 2xx; the JSON answer.
fn call(method: &str, url: &str, body: &Value) -> Value {
    let response = match method {
        "GET" => agent().get(url).call(),
        _ => agent()
            .post(url)
            .header("content-type", "application/json")
            .send(body.to_string()),
    };
    let mut response = response.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .read_to_string()
        .unwrap_or_else(|e| panic!("{method} {url}: reading the body: {e}"));
    assert!(
        (200..300).contains(&status),
        "{method} {url}: {status} {text}"
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {url}: not JSON ({e}): {text}"))
}

impl ControlServer {
    /// `syncstore --db <a fresh database of dialect> serve --test-control`.
    pub fn start(dialect: Dialect) -> Self {
        let db = Db::new(dialect);
        let mut child = Command::new(syncstore_bin())
            .arg("--db")
            .arg(db.url())
            .args(["serve", "--test-control", "--listen", "127.0.0.1:0"])
            .env_remove("SYNCSTORE_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", syncstore_bin().display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next().and_then(Result::ok));
            for _ in lines {}
        });
        let line = match rx.recv_timeout(STARTUP) {
            Ok(Some(line)) => line,
            other => panic!("syncstore serve --test-control did not start: {other:?}"),
        };
        let base_url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("expected `listening on …`, got {line:?}"))
            .trim_end()
            .to_owned();
        Self {
            base_url,
            child,
            _db: db,
        }
    }

    /// A new instance at `schema` over partition `p1`, its clock at `now_ms`.
    pub fn instance(&self, schema: &Value, now_ms: i64) -> Instance {
        self.instance_with_limits(schema, now_ms, &json!({}))
    }

    /// As [`ControlServer::instance`], with the create request's `limits`.
    pub fn instance_with_limits(&self, schema: &Value, now_ms: i64, limits: &Value) -> Instance {
        let created = call(
            "POST",
            &format!("{}/test/instances", self.base_url),
            &json!({"schema": schema, "partition": "p1", "nowMs": now_ms, "limits": limits}),
        );
        let path = created["path"].as_str().expect("the instance's path");
        Instance {
            base_url: format!("{}{path}", self.base_url),
        }
    }
}

impl Drop for ControlServer {
    /// SIGTERM: the server frees its instances' files and schemas on the
    /// way out (SIGKILL would leave them).
    fn drop(&mut self) {
        let stopped = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if !stopped {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Instance {
    fn control(&self, method: &str, op: &str, body: &Value) -> Value {
        call(method, &format!("{}/control/{op}", self.base_url), body)
    }

    /// Sets `actor`'s allowed list ids (`*` for any).
    pub fn allow(&self, actor: &str, lists: &[&str]) {
        self.control(
            "POST",
            "scopes",
            &json!({"actorId": actor, "allowed": {"list_id": lists}}),
        );
    }

    /// Moves the virtual clock forward.
    pub fn advance_clock(&self, ms: i64) {
        self.control("POST", "clock/advance", &json!({"ms": ms}));
    }

    /// Prunes with every floor at zero; returns the horizon.
    pub fn prune_everything(&self) -> i64 {
        let body = json!({"activeWindowMs": 0, "ageForceMs": 0, "minRetainedCommits": 0});
        self.control("POST", "prune", &body)["horizonSeq"]
            .as_i64()
            .expect("a horizon")
    }

    /// The partition's commit counter.
    pub fn max_commit_seq(&self) -> i64 {
        self.control("GET", "seqs", &json!({}))["maxCommitSeq"]
            .as_i64()
            .expect("a commit counter")
    }

    /// The server's todo row ids, ascending.
    pub fn row_ids(&self) -> Vec<String> {
        self.control("GET", "tables/todos/rows", &json!({}))["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|row| row["rowId"].as_str().expect("a row id").to_owned())
            .collect()
    }

    /// Captures a backup.
    pub fn capture_backup(&self) {
        self.control("POST", "backup", &json!({}));
    }

    /// Restores the backup (the log epoch rotates).
    pub fn restore_backup(&self) {
        self.control("POST", "restore", &json!({}));
    }

    /// Fails the next idempotency lookup.
    pub fn fail_next_idempotency_lookup(&self) {
        self.control("POST", "idempotency-fault", &json!({}));
    }
}
