//! `sync` on SQLite and Postgres: push (applied, conflict, idempotent
//! retry), bootstrap and incremental pull with decoded rows, `--raw-bytes`,
//! `--allow`, and the exit statuses (request-level `ERROR` frames exit 1,
//! a database not at the schema's version exits 2).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use common::{todos_schema, write_file, Db, Run};
use serde_json::{json, Value};

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                super::$name(super::Db::sqlite());
            }
            #[test]
            fn postgres() {
                super::$name(super::Db::postgres());
            }
            #[test]
            fn mariadb() {
                super::$name(super::Db::mariadb());
            }
        }
    )*};
}

on_both!(
    pushes_conflict_and_retry_then_pull_bootstrap_and_incremental,
    allowed_scopes_and_raw_bytes,
    refusals_exit_one_with_an_error_frame,
    a_database_not_at_the_schema_version_exits_two,
    a_request_over_its_limits_is_refused_before_any_round,
);

/// A migrated todos database and the schema file path.
struct Setup {
    db: Db,
    _dir: tempfile::TempDir,
    schema: String,
}

impl Setup {
    fn new(db: Db) -> Self {
        let dir = db.scratch();
        let schema = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
        db.json(&["migrate", "--schema", &schema]);
        Self {
            db,
            _dir: dir,
            schema,
        }
    }

    /// Runs `sync` as `actor` with `extra` flags, the request on stdin.
    fn sync(&self, actor: &str, extra: &[&str], request: &[Value]) -> Run {
        let url = self.db.url();
        let mut args = vec![
            "--db",
            url.as_str(),
            "sync",
            "--schema",
            &self.schema,
            "--partition",
            "acme",
            "--actor",
            actor,
        ];
        args.extend_from_slice(extra);
        let text: String = request.iter().map(|frame| format!("{frame}\n")).collect();
        run_with_stdin(&args, &text)
    }

    /// `sync` allowed every list, expecting exit 0; returns the frames.
    fn ok(&self, actor: &str, request: &[Value]) -> Vec<Value> {
        let run = self.sync(actor, &["--allow", "list_id=*"], request);
        assert_eq!(
            run.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
        frames(&run)
    }

    /// The partition's log epoch, acquired as a client does.
    fn epoch(&self, client: &str) -> String {
        let out = self.ok(
            "alice",
            &[header(client, None), pull(), subscription("s", -1)],
        );
        assert_eq!(types(&out), ["RESP_HEADER", "END"]);
        assert_eq!(out[0]["resetRequired"], true);
        out[0]["logEpoch"].as_str().expect("logEpoch").to_owned()
    }
}

fn run_with_stdin(args: &[&str], stdin: &str) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_syncstore"))
        .args(args)
        .env_remove("SYNCSTORE_DATABASE_URL")
        .env_remove("SYNCSTORE_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the syncstore binary runs");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin.as_bytes())
        .expect("write the request");
    let output = child.wait_with_output().expect("syncstore finishes");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn frames(run: &Run) -> Vec<Value> {
    run.stdout
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}\n{}", run.stdout))
        })
        .collect()
}

fn types(frames: &[Value]) -> Vec<&str> {
    frames
        .iter()
        .map(|f| f["type"].as_str().unwrap_or("?"))
        .collect()
}

fn header(client: &str, epoch: Option<&str>) -> Value {
    let mut h = json!({"type": "REQ_HEADER", "clientId": client, "schemaVersion": 1});
    if let Some(epoch) = epoch {
        h["logEpoch"] = json!(epoch);
    }
    h
}

fn pull() -> Value {
    json!({"type": "PULL_HEADER", "limitCommits": 100, "limitSnapshotRows": 100, "maxSnapshotPages": 10})
}

fn subscription(id: &str, cursor: i64) -> Value {
    json!({"type": "SUBSCRIPTION", "id": id, "table": "todos", "scopes": {"list_id": ["l1"]}, "cursor": cursor})
}

fn upsert(commit: &str, id: &str, title: &str, base: Option<i64>) -> Value {
    let mut op = json!({"table": "todos", "rowId": id, "op": "upsert",
        "payload": {"id": id, "list_id": "l1", "title": title, "done": false}});
    if let Some(base) = base {
        op["baseVersion"] = json!(base);
    }
    json!({"type": "PUSH_COMMIT", "clientCommitId": commit, "operations": [op]})
}

fn pushes_conflict_and_retry_then_pull_bootstrap_and_incremental(db: Db) {
    let s = Setup::new(db);
    let epoch = s.epoch("c1");
    let h1 = header("c1", Some(&epoch));
    let h2 = header("c2", Some(&epoch));

    let first = s.ok("alice", &[h1.clone(), upsert("c1-1", "t1", "Milk", None)]);
    assert_eq!(types(&first), ["RESP_HEADER", "PUSH_RESULT", "END"]);
    assert_eq!(first[0]["resetRequired"], false);
    assert_eq!(first[1]["status"], "applied");
    let seq = first[1]["commitSeq"].as_i64().expect("commitSeq");
    assert_eq!(
        first[1]["results"],
        json!([{"opIndex": 0, "status": "applied"}])
    );

    let retry = s.ok("alice", &[h1.clone(), upsert("c1-1", "t1", "Milk", None)]);
    assert_eq!(retry[1]["status"], "cached", "{retry:?}");
    assert_eq!(retry[1]["commitSeq"], seq);

    let second = s.ok(
        "bob",
        &[h2.clone(), upsert("c2-1", "t1", "Oat milk", Some(1))],
    );
    assert_eq!(second[1]["status"], "applied", "{second:?}");

    let conflict = s.ok(
        "alice",
        &[h1.clone(), upsert("c1-2", "t1", "Soy milk", Some(1))],
    );
    assert_eq!(conflict[1]["status"], "rejected", "{conflict:?}");
    let record = &conflict[1]["results"][0];
    assert_eq!(record["status"], "conflict");
    assert_eq!(record["code"], "sync.version_conflict");
    assert_eq!(record["serverVersion"], 2);
    assert_eq!(
        record["serverRow"],
        json!({"id": "t1", "list_id": "l1", "title": "Oat milk", "done": false})
    );

    let boot = s.ok("alice", &[h1.clone(), pull(), subscription("s", -1)]);
    assert_eq!(
        types(&boot),
        [
            "RESP_HEADER",
            "SUB_START",
            "BOOTSTRAP_PAGE",
            "SUB_END",
            "END"
        ]
    );
    assert_eq!(boot[1]["status"], "active");
    assert_eq!(boot[1]["bootstrap"], true);
    assert_eq!(boot[1]["effectiveScopes"], json!({"list_id": ["l1"]}));
    assert_eq!(
        boot[2]["rows"],
        json!([{"rowId": "t1", "rowVersion": 2,
                "row": {"id": "t1", "list_id": "l1", "title": "Oat milk", "done": false}}])
    );
    let cursor = boot[3]["nextCursor"].as_i64().expect("nextCursor");
    assert!(boot[3].get("bootstrapState").is_none(), "{boot:?}");

    let quiet = s.ok("alice", &[h1.clone(), pull(), subscription("s", cursor)]);
    assert_eq!(
        types(&quiet),
        ["RESP_HEADER", "SUB_START", "SUB_END", "END"]
    );
    assert_eq!(quiet[1]["bootstrap"], false);

    s.ok("bob", &[h2, upsert("c2-2", "t2", "Bread", None)]);
    let incremental = s.ok("alice", &[h1, pull(), subscription("s", cursor)]);
    assert_eq!(
        types(&incremental),
        ["RESP_HEADER", "SUB_START", "COMMIT", "SUB_END", "END"]
    );
    let commit = &incremental[2];
    assert_eq!(commit["actorId"], "bob");
    assert_eq!(commit["tables"], json!(["todos"]));
    assert_eq!(
        commit["changes"],
        json!([{"tableIndex": 0, "rowId": "t2", "op": "upsert", "rowVersion": 1,
                "scopes": {"list_id": "l1"},
                "row": {"id": "t2", "list_id": "l1", "title": "Bread", "done": false}}])
    );
    assert_eq!(incremental[3]["nextCursor"], commit["commitSeq"]);
}

fn allowed_scopes_and_raw_bytes(db: Db) {
    let s = Setup::new(db);
    let epoch = s.epoch("c1");
    let h1 = header("c1", Some(&epoch));
    s.ok("alice", &[h1.clone(), upsert("c1-1", "t1", "Milk", None)]);

    // No --allow: nothing is allowed.
    let denied = s.sync(
        "alice",
        &[],
        &[
            h1.clone(),
            upsert("c1-2", "t1", "Tea", None),
            pull(),
            subscription("s", -1),
        ],
    );
    assert_eq!(denied.code, 0, "{}", denied.stderr);
    let denied = frames(&denied);
    assert_eq!(denied[1]["status"], "rejected", "{denied:?}");
    assert_eq!(denied[1]["results"][0]["code"], "sync.forbidden");
    assert_eq!(denied[2]["type"], "SUB_START");
    assert_eq!(denied[2]["status"], "revoked");

    // Another list only: the subscription to l1 is revoked.
    let other = s.sync(
        "alice",
        &["--allow", "list_id=l2,l3"],
        &[h1.clone(), pull(), subscription("s", -1)],
    );
    assert_eq!(frames(&other)[1]["status"], "revoked");

    // --raw-bytes: rows stay base64 row-codec bytes.
    let raw = s.sync(
        "alice",
        &["--allow", "list_id=l1", "--raw-bytes"],
        &[h1, pull(), subscription("s", -1)],
    );
    assert_eq!(raw.code, 0, "{}", raw.stderr);
    let raw = frames(&raw);
    assert_eq!(raw[1]["status"], "active");
    let row = raw[2]["rows"][0]["row"].as_str().expect("base64 row");
    let decoded = BASE64.decode(row).expect("base64");
    let schema = common::compile(&todos_schema(1, false, ""));
    let values = sync_core::codec::decode_row(schema.table("todos").unwrap(), &decoded).unwrap();
    assert_eq!(values[2], sync_core::RowValue::String("Milk".into()));
}

fn refusals_exit_one_with_an_error_frame(db: Db) {
    let s = Setup::new(db);
    let error_frame = |run: &Run, code: &str| {
        assert_eq!(
            run.code, 1,
            "stdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
        let out = frames(run);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0]["type"], "ERROR");
        assert_eq!(out[0]["code"], code, "{out:?}");
        assert!(out[0]["retryable"].is_boolean(), "{out:?}");
        assert!(out[0]["category"].is_string(), "{out:?}");
    };
    // A push without a log epoch (wire version 2).
    let run = s.sync(
        "alice",
        &["--allow", "list_id=*"],
        &[header("c1", None), upsert("c1-1", "t1", "Milk", None)],
    );
    error_frame(&run, "sync.invalid_request");
    // The first frame is not REQ_HEADER.
    let run = s.sync("alice", &[], &[pull()]);
    error_frame(&run, "sync.invalid_request");
    // A payload that does not fit the schema.
    let epoch = s.epoch("c1");
    let bad = json!({"type": "PUSH_COMMIT", "clientCommitId": "x", "operations": [
        {"table": "todos", "rowId": "t1", "op": "upsert", "payload": {"id": "t1", "title": 5}}]});
    let run = s.sync("alice", &[], &[header("c1", Some(&epoch)), bad]);
    error_frame(&run, "sync.invalid_request");
    // A subscription to a table the schema does not have.
    let sub = json!({"type": "SUBSCRIPTION", "id": "s", "table": "nope", "scopes": {"list_id": ["l1"]}, "cursor": -1});
    let run = s.sync(
        "alice",
        &["--allow", "list_id=*"],
        &[header("c1", Some(&epoch)), pull(), sub],
    );
    error_frame(&run, "sync.unknown_table");
    // Nothing was written by any of them.
    let rows =
        s.db.json(&["rows", "--partition", "acme", "--table", "todos"]);
    assert_eq!(rows["rows"], json!([]));
}

fn a_database_not_at_the_schema_version_exits_two(db: Db) {
    let dir = db.scratch();
    let v1 = write_file(&dir, "v1.json", &todos_schema(1, false, ""));
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    let request = write_file(
        &dir,
        "req.jsonl",
        &format!("{}\n{}\n", header("c1", None), pull()),
    );
    let url = db.url();
    let sync = |schema: &str, request: &str| {
        common::syncstore(&[
            "--db",
            &url,
            "sync",
            "--schema",
            schema,
            "--partition",
            "acme",
            "--actor",
            "alice",
            "--request",
            request,
        ])
    };
    let not_started = |run: &Run, code: &str| {
        assert_eq!(
            run.code, 2,
            "stdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        assert!(
            run.stderr.starts_with(&format!("error: {code}: ")),
            "{}",
            run.stderr
        );
    };
    not_started(&sync(&v1, &request), "sync.cli.schema_mismatch");
    db.json(&["migrate", "--schema", &v1]);
    not_started(&sync(&v2, &request), "sync.cli.schema_mismatch");
    let missing = dir.path().join("absent.jsonl").display().to_string();
    not_started(&sync(&v1, &missing), "sync.cli.io");
    let ok = sync(&v1, &request);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(frames(&ok)[0]["type"], "RESP_HEADER");
}

/// `--max-line-bytes` and `--max-request-bytes` refuse a request before the
/// round with `sync.cli.request_too_large` (exit 2, nothing written); the
/// same request within the limits is served.
fn a_request_over_its_limits_is_refused_before_any_round(db: Db) {
    let s = Setup::new(db);
    let epoch = s.epoch("c1");
    let long_title = "m".repeat(300);
    let request = [
        header("c1", Some(&epoch)),
        upsert("c1-1", "t1", &long_title, None),
    ];
    let line = |frame: &Value| frame.to_string().len();
    let total: usize = request.iter().map(|f| line(f) + 1).sum();
    let refused = |run: &Run, limit: &str, max: usize, number: usize| {
        assert_eq!(
            run.code, 2,
            "stdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        assert!(
            run.stderr
                .starts_with("error: sync.cli.request_too_large: "),
            "{}",
            run.stderr
        );
        for part in [
            format!("  limit: {limit}\n"),
            format!("  max_bytes: {max}\n"),
            format!("  line: {number}\n"),
            "  path: -\n".to_owned(),
        ] {
            assert!(run.stderr.contains(&part), "{part} in {}", run.stderr);
        }
    };
    let max_line = line(&request[1]) - 1;
    let run = s.sync(
        "alice",
        &[
            "--allow",
            "list_id=*",
            "--max-line-bytes",
            &max_line.to_string(),
        ],
        &request,
    );
    refused(&run, "line", max_line, 2);
    let run = s.sync(
        "alice",
        &[
            "--allow",
            "list_id=*",
            "--max-request-bytes",
            &(total - 1).to_string(),
        ],
        &request,
    );
    refused(&run, "request", total - 1, 2);
    let rows =
        s.db.json(&["rows", "--partition", "acme", "--table", "todos"]);
    assert_eq!(rows["rows"], json!([]), "nothing was written");

    let run = s.sync(
        "alice",
        &[
            "--allow",
            "list_id=*",
            "--max-line-bytes",
            &line(&request[1]).to_string(),
            "--max-request-bytes",
            &total.to_string(),
        ],
        &request,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows =
        s.db.json(&["rows", "--partition", "acme", "--table", "todos"]);
    assert_eq!(rows["rows"][0]["values"]["title"], json!(long_title));
}
