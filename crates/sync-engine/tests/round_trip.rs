//! Push-then-pull round trips against the SQLite dialect.

use std::sync::Arc;

use serde_json::json;
use sync_core::{
    codec, CompiledSchema, EnsureOptions, PushOperationResult, RowValue, ServerStorage,
};
use sync_engine::{
    Engine, EngineConfig, ManualClock, Operation, PullHeader, PushCommit, PushResultStatus,
    ReqHeader, RequestContext, ResolveError, ResponseItem, ScopeMap, SectionStatus, Subscription,
    SyncRequest,
};
use sync_sqlite::{SqliteConfig, SqliteStorage};

struct Fixture {
    _dir: tempfile::TempDir,
    storage: Arc<SqliteStorage>,
    schema: Arc<CompiledSchema>,
    engine: Engine,
    clock: Arc<ManualClock>,
}

fn schema() -> CompiledSchema {
    let value = json!({
        "version": 1,
        "tables": [{
            "name": "tasks",
            "primaryKey": "id",
            "columns": [
                {"name": "id", "type": "string"},
                {"name": "project_id", "type": "string"},
                {"name": "title", "type": "string"}
            ],
            "scopes": ["project:{project_id}"]
        }]
    });
    let input = sync_schema::parse_schema_value(&value).expect("schema parses");
    sync_schema::compile(&input).expect("schema compiles")
}

fn resolver(_p: &str, actor: &str, _c: &str) -> Result<ScopeMap, ResolveError> {
    let project = if actor == "alice" { "p1" } else { "p2" };
    Ok([("project_id".to_owned(), vec![project.to_owned()])].into())
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = Arc::new(
        SqliteStorage::open(dir.path().join("db.sqlite"), SqliteConfig::default()).expect("open"),
    );
    let schema = Arc::new(schema());
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let mut config = EngineConfig::new(Arc::new(resolver));
    config.clock = clock.clone();
    let engine = Engine::new(storage.clone(), schema.clone(), config).expect("engine");
    Fixture {
        _dir: dir,
        storage,
        schema,
        engine,
        clock,
    }
}

impl Fixture {
    fn payload(&self, id: &str, project: &str, title: &str) -> Vec<u8> {
        let table = self.schema.table("tasks").expect("tasks");
        codec::encode_row(
            table,
            &[
                RowValue::String(id.into()),
                RowValue::String(project.into()),
                RowValue::String(title.into()),
            ],
        )
        .expect("encode")
    }

    fn epoch(&self) -> Option<String> {
        self.storage.get_partition_log_epoch("P").expect("epoch")
    }

    fn round(&self, actor: &str, request: &SyncRequest) -> Vec<ResponseItem> {
        let mut items = Vec::new();
        self.engine
            .handle(&RequestContext::new("P", actor), request, &mut items)
            .expect("round");
        items
    }

    fn request(
        &self,
        client: &str,
        pushes: Vec<PushCommit>,
        subs: Vec<Subscription>,
    ) -> SyncRequest {
        SyncRequest {
            wire_version: 2,
            header: ReqHeader {
                client_id: client.into(),
                schema_version: 1,
                log_epoch: self.epoch(),
            },
            pushes,
            pull: (!subs.is_empty()).then(PullHeader::default),
            subscriptions: subs,
        }
    }
}

fn sub(cursor: i64) -> Subscription {
    Subscription::new(
        "s",
        "tasks",
        [("project_id".to_owned(), vec!["p1".to_owned()])].into(),
        cursor,
    )
}

fn push_results(items: &[ResponseItem]) -> Vec<&sync_engine::PushResult> {
    items
        .iter()
        .filter_map(|i| match i {
            ResponseItem::PushResult(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// First contact acquires the epoch (reset response), then pushes apply.
fn acquire_epoch(f: &Fixture) {
    let mut req = f.request("c1", vec![], vec![sub(-1)]);
    req.header.log_epoch = None;
    let items = f.round("alice", &req);
    assert!(matches!(&items[0], ResponseItem::Header(h) if h.reset_required));
    assert_eq!(items.len(), 2);
}

#[test]
fn push_then_bootstrap_then_incremental() {
    let f = fixture();
    acquire_epoch(&f);
    let insert = PushCommit {
        client_commit_id: "k1".into(),
        operations: vec![Operation::upsert(
            "tasks",
            "t1",
            None,
            f.payload("t1", "p1", "a"),
        )],
    };
    let items = f.round(
        "alice",
        &f.request("c1", vec![insert.clone()], vec![sub(-1)]),
    );
    let results = push_results(&items);
    assert_eq!(results[0].status, PushResultStatus::Applied);
    assert_eq!(results[0].commit_seq, Some(1));
    let page = items
        .iter()
        .find_map(|i| match i {
            ResponseItem::BootstrapPage(p) => Some(p),
            _ => None,
        })
        .expect("a bootstrap page");
    assert_eq!(page.rows.len(), 1);
    assert_eq!(
        (page.rows[0].row_id.as_str(), page.rows[0].row_version),
        ("t1", 1)
    );
    assert!(matches!(items.last(), Some(ResponseItem::End)));

    // Update with the right base version, then pull incrementally from 1.
    f.clock.advance(10);
    let update = PushCommit {
        client_commit_id: "k2".into(),
        operations: vec![Operation::upsert(
            "tasks",
            "t1",
            Some(1),
            f.payload("t1", "p1", "b"),
        )],
    };
    let items = f.round("alice", &f.request("c1", vec![update], vec![sub(1)]));
    assert_eq!(push_results(&items)[0].commit_seq, Some(2));
    let commits: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            ResponseItem::Commit(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(commits.len(), 1);
    assert_eq!(commits[0].changes[0].row_version, Some(2));
    assert!(items
        .iter()
        .any(|i| matches!(i, ResponseItem::SubEnd(e) if e.next_cursor == 2)));

    // The replay of k1 is cached with its original sequence.
    let items = f.round("alice", &f.request("c1", vec![insert], vec![]));
    assert_eq!(push_results(&items)[0].status, PushResultStatus::Cached);
    assert_eq!(push_results(&items)[0].commit_seq, Some(1));
    assert_eq!(f.storage.get_max_commit_seq("P").expect("max"), 2);
}

#[test]
fn stale_base_version_is_a_persisted_conflict() {
    let f = fixture();
    acquire_epoch(&f);
    let first = f.payload("t1", "p1", "a");
    let insert = PushCommit {
        client_commit_id: "k1".into(),
        operations: vec![Operation::upsert("tasks", "t1", None, first.clone())],
    };
    f.round("alice", &f.request("c1", vec![insert], vec![]));
    let stale = PushCommit {
        client_commit_id: "k2".into(),
        operations: vec![Operation::upsert(
            "tasks",
            "t1",
            Some(7),
            f.payload("t1", "p1", "b"),
        )],
    };
    let items = f.round("alice", &f.request("c1", vec![stale.clone()], vec![]));
    let result = push_results(&items)[0].clone();
    assert_eq!(result.status, PushResultStatus::Rejected);
    match &result.results[..] {
        [PushOperationResult::Conflict {
            op_index: 0,
            server_version: 1,
            server_row,
            ..
        }] => assert_eq!(server_row, &first),
        other => panic!("unexpected {other:?}"),
    }
    let again = f.round("alice", &f.request("c1", vec![stale], vec![]));
    assert_eq!(push_results(&again)[0], &result);
    assert_eq!(f.storage.get_max_commit_seq("P").expect("max"), 1);
}

#[test]
fn writes_outside_the_scope_are_forbidden() {
    let f = fixture();
    acquire_epoch(&f);
    let foreign = PushCommit {
        client_commit_id: "k1".into(),
        operations: vec![Operation::upsert(
            "tasks",
            "t9",
            None,
            f.payload("t9", "p2", "x"),
        )],
    };
    let items = f.round("alice", &f.request("c1", vec![foreign], vec![]));
    match &push_results(&items)[0].results[..] {
        [PushOperationResult::Error { code, .. }] => assert_eq!(code, "sync.forbidden"),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(f.storage.get_max_commit_seq("P").expect("max"), 0);
}

#[test]
fn cursor_behind_the_horizon_resets() {
    let f = fixture();
    acquire_epoch(&f);
    for i in 0..3 {
        let commit = PushCommit {
            client_commit_id: format!("k{i}"),
            operations: vec![Operation::upsert(
                "tasks",
                "t1",
                None,
                f.payload("t1", "p1", &i.to_string()),
            )],
        };
        f.round("alice", &f.request("c1", vec![commit], vec![]));
    }
    f.storage
        .prune_commits_through(
            "P",
            &sync_core::CommitPruneQuery {
                log_epoch: f.epoch().expect("epoch"),
                through_seq: 2,
            },
        )
        .expect("prune");
    let items = f.round("alice", &f.request("c1", vec![], vec![sub(1)]));
    assert!(items.iter().any(|i| matches!(i,
        ResponseItem::SubStart(s) if s.status == SectionStatus::Reset && s.reason_code == "sync.cursor_expired")));
    let items = f.round("alice", &f.request("c1", vec![], vec![sub(2)]));
    assert!(items
        .iter()
        .any(|i| matches!(i, ResponseItem::Commit(c) if c.commit_seq == 3)));
}

#[test]
fn schema_floor_answers_without_work() {
    let f = fixture();
    acquire_epoch(&f);
    let mut req = f.request("c1", vec![], vec![sub(-1)]);
    req.header.schema_version = 2;
    let items = f.round("alice", &req);
    assert!(matches!(&items[0], ResponseItem::Header(h) if h.required_schema_version == Some(1)));
    assert_eq!(items.len(), 2);
}

#[test]
fn json_lines_round_trip_a_whole_response() {
    let f = fixture();
    acquire_epoch(&f);
    let insert = PushCommit {
        client_commit_id: "k1".into(),
        operations: vec![Operation::upsert(
            "tasks",
            "t1",
            None,
            f.payload("t1", "p1", "a"),
        )],
    };
    let request = f.request("c1", vec![insert], vec![sub(-1)]);
    let text = request.to_json_lines();
    assert_eq!(
        SyncRequest::from_json_lines(&text).expect("parses"),
        request
    );
    let items = f.round("alice", &request);
    let rendered: String = items.iter().map(ResponseItem::to_json_lines).collect();
    assert_eq!(
        ResponseItem::parse_json_lines(&rendered).expect("parses"),
        items
    );
}
