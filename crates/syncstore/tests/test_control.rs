//! `serve --test-control` as a black box on SQLite, Postgres and MariaDB: instances
//! created over HTTP, synced through their own `/sync` route with our SSP2
//! codec as the client, and every control operation observed through what
//! a round or a control read then shows; bad control requests and a
//! non-loopback address refused with stable codes.

mod common;

use common::http::{read_answer, Answer};

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use common::{compile, syncstore, Db};
use serde_json::{json, Value};
use sync_core::RowValue;
use sync_ssp2::{
    OpResultKind, PullHeader, PushCommit, PushOp, PushOperation, PushStatus, ReqHeader, Request,
    RequestFrame, ResponseFrame, SubStatus, Subscription, WireVersion,
};

macro_rules! on_each_dialect {
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

on_each_dialect!(
    an_instance_serves_its_own_sync_route_and_reads_back,
    scopes_and_a_failing_resolver_change_what_a_pull_sees,
    prune_returns_the_horizon_at_the_virtual_time,
    validators_reject_what_their_rules_say,
    the_idempotency_fault_answers_one_retryable_cache_miss,
    a_restore_brings_back_the_backup_under_a_new_epoch,
    closing_frees_the_instance,
    limits_and_segment_expiry_follow_the_instance,
    sigterm_frees_every_instance,
    the_served_database_and_the_control_routes_share_a_server,
    bad_control_requests_are_refused_with_stable_codes,
);

/// The table every test uses, in the harness's schema form (a scope
/// without `column`).
fn create_body(partition: &str) -> Value {
    json!({
        "schema": {"version": 1, "tables": [{
            "name": "tasks", "primaryKey": "id",
            "columns": [
                {"name": "id", "type": "string", "nullable": false},
                {"name": "project_id", "type": "string", "nullable": false},
                {"name": "title", "type": "string", "nullable": false},
                {"name": "status", "type": "string", "nullable": false}],
            "scopes": [{"pattern": "project:{project_id}"}]}]},
        "partition": partition,
        "nowMs": 1_700_000_000_000_i64,
    })
}

fn row(id: &str, project: &str, title: &str, status: &str) -> Vec<u8> {
    let schema = compile(
        r#"{"version": 1, "tables": [{"name": "tasks", "primaryKey": "id",
            "columns": [{"name": "id", "type": "string"}, {"name": "project_id", "type": "string"},
                        {"name": "title", "type": "string"}, {"name": "status", "type": "string"}],
            "scopes": ["project:{project_id}"]}]}"#,
    );
    let table = schema.table("tasks").expect("tasks");
    sync_core::codec::encode_row(
        table,
        &[
            RowValue::String(id.into()),
            RowValue::String(project.into()),
            RowValue::String(title.into()),
            RowValue::String(status.into()),
        ],
    )
    .expect("row encodes")
}

/// A running `syncstore serve --test-control`, killed when dropped.
struct Server {
    child: Child,
    address: String,
}

impl Server {
    fn start(db: &Db, extra: &[&str]) -> Self {
        Self::start_in(db, extra, &std::env::temp_dir())
    }

    /// A server whose temporary directory is `tmp`.
    fn start_in(db: &Db, extra: &[&str], tmp: &std::path::Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_syncstore"))
            .args(["--db", &db.url(), "serve", "--test-control"])
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .env("TMPDIR", tmp)
            .env_remove("SYNCSTORE_DATABASE_URL")
            .env_remove("SYNCSTORE_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the syncstore binary runs");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the first line");
        let address = line
            .trim_end()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Self { child, address }
    }

    fn call(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
        let mut stream = TcpStream::connect(&self.address).expect("connect");
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body))
            .expect("send the request");
        read_answer(&mut BufReader::new(stream))
    }

    /// A control call with a JSON body; the answer's status and JSON.
    fn control(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let answer = self.call(method, path, &[], body.as_bytes());
        let json = serde_json::from_slice(&answer.body).unwrap_or_else(|_| {
            panic!(
                "{method} {path}: not JSON: {}",
                String::from_utf8_lossy(&answer.body)
            )
        });
        (answer.status, json)
    }

    /// A control call that must succeed.
    fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, json) = self.control(method, path, body);
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {json}"
        );
        json
    }

    /// Creates an instance; returns its path.
    fn instance(&self, body: Value) -> String {
        let created = self.ok("POST", "/test/instances", Some(body));
        created["path"].as_str().expect("a path").to_owned()
    }

    /// One round; a request without a log epoch gets the partition's
    /// first (as a client acquires it with a round of its own).
    fn sync(&self, instance: &str, actor: &str, mut request: Request) -> Vec<ResponseFrame> {
        if let Some(RequestFrame::ReqHeader(h)) = request.frames.first_mut() {
            if h.log_epoch.is_none() {
                let acquired = self.round(instance, actor, pull_nothing(&h.client_id));
                h.log_epoch = Some(epoch_of(&acquired));
            }
        }
        self.round(instance, actor, request)
    }

    fn round(&self, instance: &str, actor: &str, request: Request) -> Vec<ResponseFrame> {
        let body = sync_ssp2::encode_request(&request).expect("the request encodes");
        let auth = format!("Bearer {actor}");
        let answer = self.call(
            "POST",
            &format!("{instance}/sync"),
            &[
                ("Content-Type", "application/vnd.syncular.sync.v2"),
                ("Authorization", &auth),
            ],
            &body,
        );
        assert_eq!(
            answer.status,
            200,
            "{}",
            String::from_utf8_lossy(&answer.body)
        );
        sync_ssp2::decode_response(&answer.body)
            .expect("an SSP2 response")
            .frames
    }

    fn set_scopes(&self, instance: &str, actor: &str, projects: &[&str]) {
        self.ok(
            "POST",
            &format!("{instance}/control/scopes"),
            Some(json!({"actorId": actor, "allowed": {"project_id": projects}})),
        );
    }

    fn seqs(&self, instance: &str) -> (i64, i64) {
        let seqs = self.ok("GET", &format!("{instance}/control/seqs"), None);
        (
            seqs["maxCommitSeq"].as_i64().expect("max"),
            seqs["horizonSeq"].as_i64().expect("horizon"),
        )
    }

    fn row_ids(&self, instance: &str) -> Vec<String> {
        let rows = self.ok(
            "GET",
            &format!("{instance}/control/tables/tasks/rows"),
            None,
        );
        rows["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| r["rowId"].as_str().expect("rowId").to_owned())
            .collect()
    }
}

impl Drop for Server {
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

fn header(client: &str, epoch: Option<String>) -> ReqHeader {
    ReqHeader {
        client_id: client.into(),
        schema_version: 1,
        log_epoch: epoch,
    }
}

fn subscription(project: &str, cursor: i64) -> Subscription {
    let mut scopes = sync_ssp2::ScopeMap::new();
    scopes.insert("project_id", vec![project.to_owned()]);
    Subscription {
        id: "tasks".into(),
        table: "tasks".into(),
        scopes,
        params: None,
        cursor,
        bootstrap_state: None,
    }
}

fn upsert(id: &str, project: &str, title: &str, status: &str) -> PushOperation {
    PushOperation {
        table: "tasks".into(),
        row_id: id.into(),
        base_version: None,
        op: PushOp::Upsert {
            payload: row(id, project, title, status),
        },
    }
}

/// A push of one commit by client `writer` (its epoch is acquired first by
/// [`Server::sync`]).
fn push(commit: &str, operations: Vec<PushOperation>) -> Request {
    Request::from_parts(
        WireVersion::V2,
        header("writer", None),
        vec![PushCommit {
            client_commit_id: commit.into(),
            operations,
        }],
        None,
    )
}

fn pull_nothing(client: &str) -> Request {
    Request::pull_only(
        WireVersion::V2,
        header(client, None),
        PullHeader::default(),
        Vec::new(),
    )
}

fn pull(client: &str, epoch: Option<String>, cursor: i64) -> Request {
    Request::pull_only(
        WireVersion::V2,
        header(client, epoch),
        PullHeader::default(),
        vec![subscription("p1", cursor)],
    )
}

/// The one push result of a round.
fn result(frames: &[ResponseFrame]) -> (PushStatus, Vec<OpResultKind>) {
    frames
        .iter()
        .find_map(|f| match f {
            ResponseFrame::PushResult(r) => {
                Some((r.status, r.results.iter().map(|o| o.kind.clone()).collect()))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no push result in {frames:?}"))
}

fn error_code(kinds: &[OpResultKind]) -> Option<(String, bool)> {
    kinds.iter().find_map(|k| match k {
        OpResultKind::Error {
            code, retryable, ..
        } => Some((code.clone(), *retryable)),
        _ => None,
    })
}

/// The `PUSH_RESULT_DETAILS` entries of a round: operation index and
/// details.
fn details(frames: &[ResponseFrame]) -> Vec<(i32, Value)> {
    frames
        .iter()
        .filter_map(|f| match f {
            ResponseFrame::PushResultDetails(d) => Some(d),
            _ => None,
        })
        .flat_map(|d| &d.entries)
        .map(|e| {
            let details = serde_json::from_str(&e.details_json).expect("details are JSON");
            (e.op_index, details)
        })
        .collect()
}

fn section_status(frames: &[ResponseFrame]) -> SubStatus {
    frames
        .iter()
        .find_map(|f| match f {
            ResponseFrame::SubStart(s) => Some(s.status),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no section in {frames:?}"))
}

fn epoch_of(frames: &[ResponseFrame]) -> String {
    match frames.first() {
        Some(ResponseFrame::RespHeader(h)) => h.epoch.clone().expect("a v2 epoch").log_epoch,
        other => panic!("expected RESP_HEADER, got {other:?}"),
    }
}

fn next_cursor(frames: &[ResponseFrame]) -> i64 {
    frames
        .iter()
        .find_map(|f| match f {
            ResponseFrame::SubEnd(end) => Some(end.next_cursor),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no SUB_END in {frames:?}"))
}

fn an_instance_serves_its_own_sync_route_and_reads_back(db: Db) {
    let server = Server::start(&db, &[]);
    let created = server.ok("POST", "/test/instances", Some(create_body("acme")));
    assert_eq!(created["partition"], "acme");
    assert_eq!(created["nowMs"], 1_700_000_000_000_i64);
    assert_eq!(
        created["capabilities"],
        json!([
            "backup-restore",
            "idempotency-fault",
            "validators",
            "commit-validators"
        ])
    );
    let first = created["path"].as_str().expect("a path").to_owned();
    let second = server.instance(create_body("acme"));
    assert_ne!(first, second);
    server.set_scopes(&first, "writer", &["*"]);
    let frames = server.sync(
        &first,
        "writer",
        push("c1", vec![upsert("t1", "p1", "milk", "open")]),
    );
    assert_eq!(result(&frames).0, PushStatus::Applied { commit_seq: 1 });

    // The first instance holds the row with its version and scopes; the
    // second, the same partition name in its own storage, holds nothing.
    let rows = server.ok("GET", &format!("{first}/control/tables/tasks/rows"), None);
    assert_eq!(
        rows["rows"],
        json!([{"rowId": "t1", "version": 1,
                "values": {"id": "t1", "project_id": "p1", "title": "milk", "status": "open"},
                "scopes": {"project_id": "p1"}}])
    );
    assert_eq!(server.seqs(&first), (1, 0));
    assert_eq!(server.seqs(&second), (0, 0));
    assert!(server.row_ids(&second).is_empty());

    // The virtual clock moves only when told.
    let clock = server.ok("GET", &format!("{first}/control/clock"), None);
    assert_eq!(clock["nowMs"], 1_700_000_000_000_i64);
    let moved = server.ok(
        "POST",
        &format!("{first}/control/clock/advance"),
        Some(json!({"ms": 5000})),
    );
    assert_eq!(moved["nowMs"], 1_700_000_005_000_i64);
    let clock = server.ok("GET", &format!("{second}/control/clock"), None);
    assert_eq!(clock["nowMs"], 1_700_000_000_000_i64);

    // No bearer token: the instance's sync route answers 401.
    let body = sync_ssp2::encode_request(&pull("c", None, -1)).expect("encodes");
    let answer = server.call(
        "POST",
        &format!("{first}/sync"),
        &[("Content-Type", "application/vnd.syncular.sync.v2")],
        &body,
    );
    assert_eq!(answer.status, 401);
}

fn scopes_and_a_failing_resolver_change_what_a_pull_sees(db: Db) {
    let server = Server::start(&db, &[]);
    let i = server.instance(create_body("acme"));
    server.set_scopes(&i, "writer", &["*"]);
    server.sync(
        &i,
        "writer",
        push("c1", vec![upsert("t1", "p1", "milk", "open")]),
    );

    // An actor never given scopes holds nothing: revoked.
    let frames = server.sync(&i, "alice", pull("phone", None, -1));
    assert_eq!(section_status(&frames), SubStatus::Revoked);
    server.set_scopes(&i, "alice", &["p1"]);
    let frames = server.sync(&i, "alice", pull("phone", None, -1));
    assert_eq!(section_status(&frames), SubStatus::Active);

    // A failing resolver revokes, and answers again once switched back.
    let path = format!("{i}/control/resolver");
    server.ok("POST", &path, Some(json!({"failing": true})));
    let frames = server.sync(&i, "alice", pull("phone", None, -1));
    assert_eq!(section_status(&frames), SubStatus::Revoked);
    server.ok("POST", &path, Some(json!({"failing": false})));
    let frames = server.sync(&i, "alice", pull("phone", None, -1));
    assert_eq!(section_status(&frames), SubStatus::Active);
}

fn prune_returns_the_horizon_at_the_virtual_time(db: Db) {
    let server = Server::start(&db, &[]);
    let i = server.instance(create_body("acme"));
    // Before any round the partition has nothing to prune.
    let pruned = server.ok("POST", &format!("{i}/control/prune"), Some(json!({})));
    assert_eq!(pruned["horizonSeq"], 0);
    server.set_scopes(&i, "writer", &["*"]);
    for n in 1..=3 {
        server.sync(
            &i,
            "writer",
            push(
                &format!("c{n}"),
                vec![upsert(&format!("t{n}"), "p1", "x", "open")],
            ),
        );
    }
    let zero = json!({"activeWindowMs": 0, "ageForceMs": 0, "minRetainedCommits": 0});
    // At the commits' own time nothing is old enough.
    let pruned = server.ok("POST", &format!("{i}/control/prune"), Some(zero.clone()));
    assert_eq!(pruned["horizonSeq"], 0);
    server.ok(
        "POST",
        &format!("{i}/control/clock/advance"),
        Some(json!({"ms": 3_600_000})),
    );
    let pruned = server.ok("POST", &format!("{i}/control/prune"), Some(zero));
    assert_eq!(pruned["horizonSeq"], 3);
    assert_eq!(server.seqs(&i), (3, 3));

    // A client behind the horizon is reset.
    server.set_scopes(&i, "alice", &["p1"]);
    let epoch = epoch_of(&server.sync(&i, "alice", pull("phone", None, -1)));
    let frames = server.sync(&i, "alice", pull("phone", Some(epoch), 1));
    assert_eq!(section_status(&frames), SubStatus::Reset);
}

fn validators_reject_what_their_rules_say(db: Db) {
    let server = Server::start(&db, &[]);
    let i = server.instance(create_body("acme"));
    server.set_scopes(&i, "writer", &["*"]);
    let validators = format!("{i}/control/validators");
    server.ok(
        "PUT",
        &validators,
        Some(json!({"validators": [{"table": "tasks",
            "rule": {"kind": "maxLength", "column": "title", "max": 5, "code": "app.too_long"}}]})),
    );
    let frames = server.sync(
        &i,
        "writer",
        push("c1", vec![upsert("t1", "p1", "too long", "open")]),
    );
    assert_eq!(result(&frames).0, PushStatus::Rejected);
    assert_eq!(
        error_code(&result(&frames).1),
        Some(("app.too_long".to_owned(), false))
    );
    assert_eq!(
        details(&frames),
        [(
            0,
            json!({"fieldPaths": ["title"], "reason": "max_length_exceeded",
                   "requiredAction": "edit_fields"})
        )]
    );
    let frames = server.sync(
        &i,
        "writer",
        push("c2", vec![upsert("t1", "p1", "short", "done")]),
    );
    assert_eq!(result(&frames).0, PushStatus::Applied { commit_seq: 1 });

    // immutableWhen reads the stored row: t1 is done, its title is frozen,
    // its status is not.
    server.ok(
        "PUT",
        &validators,
        Some(json!({"validators": [{"table": "tasks",
            "rule": {"kind": "immutableWhen", "column": "title", "guardColumn": "status",
                     "guardValue": "done", "code": "app.frozen"}}]})),
    );
    let frames = server.sync(
        &i,
        "writer",
        push("c3", vec![upsert("t1", "p1", "other", "done")]),
    );
    assert_eq!(
        error_code(&result(&frames).1),
        Some(("app.frozen".to_owned(), false))
    );
    let frames = server.sync(
        &i,
        "writer",
        push("c4", vec![upsert("t1", "p1", "short", "open")]),
    );
    assert!(matches!(result(&frames).0, PushStatus::Applied { .. }));

    // An empty list clears; the commit validator needs a sibling row.
    server.ok("PUT", &validators, Some(json!({"validators": []})));
    let commit_validator = format!("{i}/control/commit-validator");
    server.ok(
        "PUT",
        &commit_validator,
        Some(
            json!({"validator": {"kind": "requireSiblingWhen", "table": "tasks",
            "column": "status", "equals": "parent", "siblingRowIdSuffix": "-child",
            "code": "app.needs_child"}}),
        ),
    );
    let frames = server.sync(
        &i,
        "writer",
        push(
            "c5",
            vec![
                upsert("t0", "p1", "x", "open"),
                upsert("t2", "p1", "x", "parent"),
            ],
        ),
    );
    assert_eq!(
        error_code(&result(&frames).1),
        Some(("app.needs_child".to_owned(), false))
    );
    assert_eq!(
        details(&frames),
        [(
            1,
            json!({"fieldPaths": ["status"], "reason": "missing_sibling_operation",
                   "requiredAction": "repair_aggregate"})
        )]
    );
    let frames = server.sync(
        &i,
        "writer",
        push(
            "c6",
            vec![
                upsert("t2", "p1", "x", "parent"),
                upsert("t2-child", "p1", "y", "open"),
            ],
        ),
    );
    assert!(matches!(result(&frames).0, PushStatus::Applied { .. }));
    server.ok("PUT", &commit_validator, Some(json!({"validator": null})));
    let frames = server.sync(
        &i,
        "writer",
        push("c7", vec![upsert("t3", "p1", "x", "parent")]),
    );
    assert!(matches!(result(&frames).0, PushStatus::Applied { .. }));
    assert_eq!(server.row_ids(&i), ["t1", "t2", "t2-child", "t3"]);
}

fn the_idempotency_fault_answers_one_retryable_cache_miss(db: Db) {
    let server = Server::start(&db, &[]);
    let i = server.instance(create_body("acme"));
    server.set_scopes(&i, "writer", &["*"]);
    server.ok("POST", &format!("{i}/control/idempotency-fault"), None);
    let commit = || push("c1", vec![upsert("t1", "p1", "milk", "open")]);
    let frames = server.sync(&i, "writer", commit());
    assert_eq!(result(&frames).0, PushStatus::Rejected);
    assert_eq!(
        error_code(&result(&frames).1),
        Some(("sync.idempotency_cache_miss".to_owned(), true))
    );
    assert_eq!(server.seqs(&i), (0, 0));
    let frames = server.sync(&i, "writer", commit());
    assert_eq!(result(&frames).0, PushStatus::Applied { commit_seq: 1 });
}

fn a_restore_brings_back_the_backup_under_a_new_epoch(db: Db) {
    let server = Server::start(&db, &[]);
    let i = server.instance(create_body("acme"));
    server.set_scopes(&i, "writer", &["*"]);
    server.set_scopes(&i, "alice", &["p1"]);
    server.sync(
        &i,
        "writer",
        push("c1", vec![upsert("before", "p1", "x", "open")]),
    );
    let frames = server.sync(&i, "alice", pull("phone", None, -1));
    let epoch = epoch_of(&frames);
    let cursor = next_cursor(&frames);

    // Restoring without a backup is refused.
    let (status, body) = server.control("POST", &format!("{i}/control/restore"), None);
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (409, json!("sync.cli.control_no_backup"))
    );

    server.ok("POST", &format!("{i}/control/backup"), None);
    server.sync(
        &i,
        "writer",
        push("c2", vec![upsert("lost", "p1", "y", "open")]),
    );
    assert_eq!(server.row_ids(&i), ["before", "lost"]);
    let restored = server.ok("POST", &format!("{i}/control/restore"), None);
    let new_epoch = restored["logEpoch"].as_str().expect("an epoch").to_owned();
    assert_ne!(new_epoch, epoch);
    assert_eq!(server.row_ids(&i), ["before"]);
    assert_eq!(server.seqs(&i).0, 1);

    // The client of the old epoch is told to reset; a push of the lost
    // commit's id applies again in the restored log.
    let frames = server.sync(&i, "alice", pull("phone", Some(epoch), cursor));
    assert_eq!(epoch_of(&frames), new_epoch);
    let reset = match frames.first() {
        Some(ResponseFrame::RespHeader(h)) => h.epoch.as_ref().is_some_and(|e| e.reset_required),
        _ => false,
    };
    assert!(reset, "{frames:?}");
    let frames = server.sync(
        &i,
        "writer",
        push("c2", vec![upsert("offline", "p1", "z", "open")]),
    );
    assert_eq!(result(&frames).0, PushStatus::Applied { commit_seq: 2 });
    assert_eq!(server.row_ids(&i), ["before", "offline"]);

    // The backup stays: a second restore at the same virtual time brings
    // it back again, under yet another epoch.
    let again = server.ok("POST", &format!("{i}/control/restore"), None);
    assert_ne!(again["logEpoch"], json!(new_epoch));
    assert_eq!(server.row_ids(&i), ["before"]);
}

fn limits_and_segment_expiry_follow_the_instance(db: Db) {
    let server = Server::start(&db, &[]);
    let mut body = create_body("acme");
    body["limits"] = json!({"maxOperationsPerRequest": 2, "inlineSegmentMaxBytes": 0,
                            "segmentTtlMs": 60_000});
    let i = server.instance(body);
    server.set_scopes(&i, "writer", &["*"]);
    server.set_scopes(&i, "alice", &["p1"]);

    // Three operations in one request are over this instance's limit.
    let three = push(
        "c1",
        (1..=3)
            .map(|n| upsert(&format!("t{n}"), "p1", "x", "open"))
            .collect(),
    );
    let epoch = epoch_of(&server.sync(&i, "writer", pull_nothing("writer")));
    let mut three = three;
    if let Some(RequestFrame::ReqHeader(h)) = three.frames.first_mut() {
        h.log_epoch = Some(epoch);
    }
    let encoded = sync_ssp2::encode_request(&three).expect("encodes");
    let answer = server.call(
        "POST",
        &format!("{i}/sync"),
        &[
            ("Content-Type", "application/vnd.syncular.sync.v2"),
            ("Authorization", "Bearer writer"),
        ],
        &encoded,
    );
    let refusal: Value = serde_json::from_slice(&answer.body).expect("a JSON refusal");
    assert_eq!(
        (answer.status, refusal["code"].clone()),
        (400, json!("sync.too_many_operations"))
    );
    server.sync(
        &i,
        "writer",
        push("c2", vec![upsert("t1", "p1", "x", "open")]),
    );

    // An inline limit of 0 sends the bootstrap page by reference, served
    // by the instance's own segment route until the virtual clock passes
    // the instance's TTL.
    let frames = server.sync(&i, "alice", pull("phone", None, -1));
    let segment = frames
        .iter()
        .find_map(|f| match f {
            ResponseFrame::SegmentRef(r) => Some(r.segment_id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("expected a SEGMENT_REF in {frames:?}"));
    let download = || {
        server.call(
            "GET",
            &format!("{i}/segments/{segment}"),
            &[
                ("Authorization", "Bearer alice"),
                ("X-Syncular-Scopes", r#"{"project_id":["p1"]}"#),
            ],
            b"",
        )
    };
    let answer = download();
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(sync_ssp2::sha256::segment_id(&answer.body), segment);
    server.ok(
        "POST",
        &format!("{i}/control/clock/advance"),
        Some(json!({"ms": 60_001})),
    );
    let answer = download();
    let refusal: Value = serde_json::from_slice(&answer.body).expect("a JSON refusal");
    assert_eq!(
        (answer.status, refusal["code"].clone()),
        (404, json!("sync.segment_expired"))
    );
}

fn closing_frees_the_instance(db: Db) {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let server = Server::start_in(&db, &["--max-instances", "1"], tmp.path());
    let stored = |server: &Server| match &db {
        Db::Postgres { .. } => instance_schemas(server),
        Db::Sqlite { .. } => files_under(tmp.path()),
        Db::Mariadb { .. } => instance_databases(server),
    };
    let i = server.instance(create_body("acme"));
    server.ok("POST", &format!("{i}/control/backup"), None);
    let (status, body) = server.control("POST", "/test/instances", Some(create_body("acme")));
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "sync.cli.control_instance_limit");
    assert_eq!(stored(&server), 2, "the instance and its backup");

    server.ok("DELETE", &i, None);
    let (status, body) = server.control("GET", &format!("{i}/control/seqs"), None);
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "sync.cli.control_unknown_instance");
    let (status, _) = server.control("DELETE", &i, None);
    assert_eq!(status, 404);
    assert_eq!(stored(&server), 0, "the files or schemas are removed");
    // The slot is free again.
    server.instance(create_body("acme"));
}

fn the_served_database_and_the_control_routes_share_a_server(db: Db) {
    let dir = db.scratch();
    let schema = common::write_file(&dir, "schema.json", &common::todos_schema(1, false, ""));
    let tokens = common::write_file(
        &dir,
        "tokens.json",
        r#"{"t": {"partition": "acme", "actor": "a", "allow": {"list_id": ["*"]}}}"#,
    );
    db.json(&["migrate", "--schema", &schema]);
    let server = Server::start(&db, &["--schema", &schema, "--tokens", &tokens]);
    let body = sync_ssp2::encode_request(&pull_nothing("c")).expect("encodes");
    let served = |token: &str| {
        server
            .call(
                "POST",
                "/sync",
                &[
                    ("Content-Type", "application/vnd.syncular.sync.v2"),
                    ("Authorization", &format!("Bearer {token}")),
                ],
                &body,
            )
            .status
    };
    assert_eq!(served("t"), 200);
    assert_eq!(served("a"), 401, "an actor id is no token of the database");
    let i = server.instance(create_body("acme"));
    assert_eq!(server.seqs(&i), (0, 0));
}

fn sigterm_frees_every_instance(db: Db) {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let mut server = Server::start_in(&db, &[], tmp.path());
    for _ in 0..2 {
        let i = server.instance(create_body("acme"));
        server.ok("POST", &format!("{i}/control/backup"), None);
    }
    let stored = match &db {
        Db::Postgres { .. } => instance_schemas(&server),
        Db::Sqlite { .. } => files_under(tmp.path()),
        Db::Mariadb { .. } => instance_databases(&server),
    };
    assert_eq!(stored, 4, "two instances and two backups");
    let killed = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = server.child.wait().expect("serve exits");
    assert_eq!(status.code(), Some(0));
    match &db {
        Db::Postgres { .. } => assert_eq!(instance_schemas(&server), 0),
        Db::Sqlite { .. } => {
            let left: Vec<_> = std::fs::read_dir(tmp.path())
                .expect("read the temporary directory")
                .collect();
            assert!(left.is_empty(), "{left:?}");
        }
        Db::Mariadb { .. } => assert_eq!(instance_databases(&server), 0),
    }
}

/// SQLite database files (not their `-wal`/`-shm`) anywhere under `dir`.
fn files_under(dir: &std::path::Path) -> i64 {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).expect("read a directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            count += files_under(&path);
        } else if path.extension().is_some_and(|e| e == "db") {
            count += 1;
        }
    }
    count
}

/// Schemas of the instances of `server` (its process id is in their
/// name).
fn instance_schemas(server: &Server) -> i64 {
    let mut client =
        postgres::Client::connect(&common::pg_url(), postgres::NoTls).expect("connect");
    let pattern = format!("syncstore\\_test\\_{}\\_%", server.child.id());
    client
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE $1",
            &[&pattern],
        )
        .expect("count")
        .get(0)
}

/// MariaDB databases of the instances of `server` (its process id is in
/// their name).
fn instance_databases(server: &Server) -> i64 {
    let url = sync_mariadb::scratch::url_from_env().replacen("mariadb://", "mysql://", 1);
    let opts = mysql::Opts::from_url(&url).expect("SYNCSTORE_MARIADB_URL parses");
    let mut conn = mysql::Conn::new(opts).expect("connect");
    let pattern = format!("syncstore\\_test\\_{}\\_%", server.child.id());
    mysql::prelude::Queryable::exec_first(
        &mut conn,
        "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?",
        (pattern,),
    )
    .expect("count")
    .expect("one row")
}

fn bad_control_requests_are_refused_with_stable_codes(db: Db) {
    let server = Server::start(&db, &[]);
    let i = server.instance(create_body("acme"));
    let refused = |method: &str, path: &str, body: &[u8]| {
        let answer = server.call(method, path, &[], body);
        let json: Value = serde_json::from_slice(&answer.body).expect("a JSON error");
        (
            answer.status,
            json["error"]["code"].as_str().unwrap_or("").to_owned(),
            json["error"]["details"].clone(),
        )
    };
    let (status, code, details) = refused("POST", "/test/instances", b"{not json");
    assert_eq!(
        (status, code.as_str()),
        (400, "sync.cli.control_invalid_request")
    );
    assert_eq!(details["reason"], "not_json");

    let mut leases = create_body("acme");
    leases["leases"] = json!({"ttlMs": 1000});
    let (status, code, details) = refused("POST", "/test/instances", leases.to_string().as_bytes());
    assert_eq!(
        (status, code.as_str()),
        (400, "sync.cli.control_unsupported")
    );
    assert_eq!(details["field"], "leases");

    let mut bad_schema = create_body("acme");
    bad_schema["schema"]["tables"][0]["primaryKey"] = json!("nope");
    let (status, code, _) = refused("POST", "/test/instances", bad_schema.to_string().as_bytes());
    assert_eq!(status, 400);
    assert!(code.starts_with("schema."), "{code}");

    let (status, code, _) = refused("GET", "/test/instances/i999/control/seqs", b"");
    assert_eq!(
        (status, code.as_str()),
        (404, "sync.cli.control_unknown_instance")
    );
    let (status, code, _) = refused("GET", &format!("{i}/control/tables/nope/rows"), b"");
    assert_eq!((status, code.as_str()), (404, "sync.storage.unknown_table"));

    let (status, code, details) = refused(
        "POST",
        &format!("{i}/control/clock/advance"),
        br#"{"ms": -1}"#,
    );
    assert_eq!(
        (status, code.as_str()),
        (400, "sync.cli.control_invalid_request")
    );
    assert_eq!(details["field"], "ms");
    let (status, code, details) = refused(
        "PUT",
        &format!("{i}/control/validators"),
        br#"{"validators": [{"table": "tasks", "rule": {"kind": "maxLength", "column": "title", "max": 1, "code": "sync.mine"}}]}"#,
    );
    assert_eq!(
        (status, code.as_str()),
        (400, "sync.cli.control_invalid_request")
    );
    assert_eq!(details["reason"], "code_reserved");

    let big = vec![b' '; (1 << 20) + 1];
    let (status, code, _) = refused("POST", &format!("{i}/control/prune"), &big);
    assert_eq!((status, code.as_str()), (413, "sync.cli.request_too_large"));
}

#[test]
fn test_control_is_refused_off_loopback() {
    let db = Db::sqlite();
    let run = syncstore(&[
        "--db",
        &db.url(),
        "--json",
        "serve",
        "--test-control",
        "--listen",
        "0.0.0.0:0",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let doc = run.json();
    assert_eq!(doc["error"]["code"], "sync.cli.control_not_loopback");
    let listen = doc["error"]["details"]["listen"].as_str().unwrap_or("");
    assert!(listen.starts_with("0.0.0.0:"), "{doc}");
    assert!(!run.stdout.contains("listening on"), "{}", run.stdout);
}
