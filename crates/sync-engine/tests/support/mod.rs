//! Shared fixture of the engine's own integration tests: a SQLite storage
//! ensured at a schema, an engine with a manual clock, request builders.
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::{json, Value};
use sync_core::{codec, CompiledSchema, EnsureOptions, RowValue, ServerStorage};
use sync_engine::{
    Engine, EngineConfig, ManualClock, PullHeader, PushCommit, PushResult, ReqHeader,
    RequestContext, ResolveError, ResponseItem, ScopeMap, Subscription, SyncRequest,
};
use sync_sqlite::{SqliteConfig, SqliteStorage};

pub const NOW: i64 = 1_700_000_000_000;

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub storage: Arc<SqliteStorage>,
    pub schema: Arc<CompiledSchema>,
    pub engine: Engine,
    pub clock: Arc<ManualClock>,
}

/// `tasks(id, project_id, title, attachment blob_ref?)` and
/// `notes(id, project_id, doc crdt "union"?)`, both scoped by project.
pub fn schema_json() -> Value {
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
                    {"name": "attachment", "type": "blob_ref", "nullable": true}
                ],
                "scopes": ["project:{project_id}"],
                "indexes": [{"name": "tasks_by_project_title", "columns": ["project_id", "title"], "unique": true}]
            },
            {
                "name": "notes",
                "primaryKey": "id",
                "columns": [
                    {"name": "id", "type": "string"},
                    {"name": "project_id", "type": "string"},
                    {"name": "doc", "type": "crdt", "crdtType": "union", "nullable": true}
                ],
                "scopes": ["project:{project_id}"]
            }
        ]
    })
}

/// alice → p1, bob → p2, anyone else → nothing.
pub fn resolver(_p: &str, actor: &str, _c: &str) -> Result<ScopeMap, ResolveError> {
    let projects = match actor {
        "alice" => vec!["p1".to_owned()],
        "bob" => vec!["p2".to_owned()],
        _ => vec![],
    };
    Ok([("project_id".to_owned(), projects)].into())
}

pub fn fixture() -> Fixture {
    fixture_with(|_| {})
}

pub fn fixture_with(configure: impl FnOnce(&mut EngineConfig)) -> Fixture {
    fixture_with_storage(|config, _| configure(config))
}

/// A fixture whose configuration may capture the storage (race hooks).
pub fn fixture_with_storage(
    configure: impl FnOnce(&mut EngineConfig, Arc<SqliteStorage>),
) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = Arc::new(
        SqliteStorage::open(dir.path().join("db.sqlite"), SqliteConfig::default()).expect("open"),
    );
    let input = sync_schema::parse_schema_value(&schema_json()).expect("schema parses");
    let schema = Arc::new(sync_schema::compile(&input).expect("schema compiles"));
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let clock = Arc::new(ManualClock::new(NOW));
    let mut config = EngineConfig::new(Arc::new(resolver));
    config.clock = clock.clone();
    configure(&mut config, storage.clone());
    let engine = Engine::new(storage.clone(), schema.clone(), config).expect("engine");
    let fixture = Fixture {
        _dir: dir,
        storage,
        schema,
        engine,
        clock,
    };
    fixture.register();
    fixture
}

impl Fixture {
    /// Row codec bytes of a `tasks` row.
    pub fn task(&self, id: &str, project: &str, title: &str) -> Vec<u8> {
        self.task_with(id, project, title, None)
    }

    /// Row codec bytes of a `tasks` row with an attachment blob id.
    pub fn task_with(&self, id: &str, project: &str, title: &str, blob: Option<&str>) -> Vec<u8> {
        let attachment = blob.map_or(RowValue::Null, |b| {
            RowValue::BlobRef(json!({ "blobId": b }).to_string())
        });
        self.encode(
            "tasks",
            vec![
                RowValue::String(id.into()),
                RowValue::String(project.into()),
                RowValue::String(title.into()),
                attachment,
            ],
        )
    }

    /// Row codec bytes of a `notes` row.
    pub fn note(&self, id: &str, project: &str, doc: &[u8]) -> Vec<u8> {
        self.encode(
            "notes",
            vec![
                RowValue::String(id.into()),
                RowValue::String(project.into()),
                RowValue::Crdt(doc.to_vec()),
            ],
        )
    }

    pub fn encode(&self, table: &str, values: Vec<RowValue>) -> Vec<u8> {
        codec::encode_row(self.schema.table(table).expect("table"), &values).expect("encode")
    }

    pub fn decode(&self, table: &str, payload: &[u8]) -> Vec<RowValue> {
        codec::decode_row(self.schema.table(table).expect("table"), payload).expect("decode")
    }

    pub fn epoch(&self) -> Option<String> {
        self.storage.get_partition_log_epoch("P").expect("epoch")
    }

    /// Registers partition `P` (first contact, epoch acquisition).
    fn register(&self) {
        let mut req = self.request("setup", vec![], vec![]);
        req.header.log_epoch = None;
        req.pull = Some(PullHeader::default());
        let items = self.handle("alice", &req).expect("first contact");
        assert!(matches!(&items[0], ResponseItem::Header(h) if h.reset_required));
    }

    pub fn handle(
        &self,
        actor: &str,
        request: &SyncRequest,
    ) -> Result<Vec<ResponseItem>, sync_engine::EngineError> {
        let mut items = Vec::new();
        self.engine
            .handle(&RequestContext::new("P", actor), request, &mut items)?;
        Ok(items)
    }

    pub fn round(&self, actor: &str, request: &SyncRequest) -> Vec<ResponseItem> {
        self.handle(actor, request).expect("round")
    }

    pub fn request(
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

    /// Pushes one commit as `actor` and returns its result.
    pub fn push(&self, actor: &str, commit: PushCommit) -> PushResult {
        let items = self.round(
            actor,
            &self.request(&format!("{actor}-c"), vec![commit], vec![]),
        );
        push_results(&items)
            .into_iter()
            .next()
            .expect("a result")
            .clone()
    }
}

pub fn commit(id: &str, operations: Vec<sync_engine::Operation>) -> PushCommit {
    PushCommit {
        client_commit_id: id.into(),
        operations,
    }
}

pub fn sub(table: &str, project: &str, cursor: i64) -> Subscription {
    Subscription::new(
        "s",
        table,
        [("project_id".to_owned(), vec![project.to_owned()])].into(),
        cursor,
    )
}

pub fn push_results(items: &[ResponseItem]) -> Vec<&PushResult> {
    items
        .iter()
        .filter_map(|i| match i {
            ResponseItem::PushResult(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// The code of the single record of a rejected result.
pub fn rejected_code(result: &PushResult) -> (u32, String) {
    match &result.results[..] {
        [sync_core::PushOperationResult::Error { op_index, code, .. }]
        | [sync_core::PushOperationResult::Conflict { op_index, code, .. }] => {
            (*op_index, code.clone())
        }
        other => panic!("not a rejection: {other:?}"),
    }
}
