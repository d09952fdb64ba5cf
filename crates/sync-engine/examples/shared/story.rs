//! The todos story every example tells, over any storage: two clients push
//! (one conflict, one idempotent retry) and pull (bootstrap, then
//! incremental); the log is pruned; a client behind the horizon is told to
//! re-bootstrap.
//!
//! Every step checks what it claims and returns an error otherwise, so a
//! broken engine makes the example exit non-zero.

use std::error::Error;
use std::sync::Arc;

use sync_core::{
    codec, CompiledSchema, EnsureOptions, ManualClock, PushOperationResult, RetentionPolicy,
    RowValue, ServerStorage,
};
use sync_engine::{
    Engine, EngineConfig, Operation, PullHeader, PushCommit, PushResult, PushResultStatus,
    ReqHeader, RequestContext, ResolveError, ResponseItem, ScopeMap, SectionStatus, SubEnd,
    SubStart, Subscription, SyncRequest,
};

/// The application's schema, as a server ships it.
pub const SCHEMA_JSON: &str = r#"{
  "version": 1,
  "tables": [{
    "name": "todos",
    "primaryKey": "id",
    "columns": [
      {"name": "id", "type": "string"},
      {"name": "list_id", "type": "string"},
      {"name": "title", "type": "string"},
      {"name": "done", "type": "boolean"}
    ],
    "scopes": ["list:{list_id}"]
  }]
}"#;

const PARTITION: &str = "acme";
const START_MS: i64 = 1_700_000_000_000;

type Outcome<T = ()> = Result<T, Box<dyn Error>>;

/// Parses and compiles [`SCHEMA_JSON`].
pub fn schema() -> Outcome<Arc<CompiledSchema>> {
    let input = sync_schema::parse_schema_json(SCHEMA_JSON)?;
    Ok(Arc::new(sync_schema::compile(&input)?))
}

/// Members of the list `shopping` may read and write it; nobody else may.
fn resolver(_partition: &str, actor: &str, _client: &str) -> Result<ScopeMap, ResolveError> {
    let lists = match actor {
        "alice" | "bob" => vec!["shopping".to_owned()],
        _ => Vec::new(),
    };
    Ok(ScopeMap::from([("list_id".to_owned(), lists)]))
}

/// One device: its client id and the state a client library keeps.
struct Client {
    actor: &'static str,
    id: &'static str,
    epoch: Option<String>,
    cursor: i64,
    bootstrap_state: Option<String>,
}

impl Client {
    fn new(actor: &'static str, id: &'static str) -> Self {
        Self {
            actor,
            id,
            epoch: None,
            cursor: -1,
            bootstrap_state: None,
        }
    }

    fn request(&self, pushes: Vec<PushCommit>, pull: bool) -> SyncRequest {
        let subscriptions = if pull {
            let mut sub = Subscription::new(
                "todos",
                "todos",
                [("list_id".to_owned(), vec!["shopping".to_owned()])].into(),
                self.cursor,
            );
            sub.bootstrap_state = self.bootstrap_state.clone();
            vec![sub]
        } else {
            Vec::new()
        };
        SyncRequest {
            wire_version: 2,
            header: ReqHeader {
                client_id: self.id.to_owned(),
                schema_version: 1,
                log_epoch: self.epoch.clone(),
            },
            pushes,
            pull: pull.then(PullHeader::default),
            subscriptions,
        }
    }

    /// One round; applies the header's epoch and every section's cursor.
    fn sync(
        &mut self,
        engine: &Engine,
        pushes: Vec<PushCommit>,
        pull: bool,
    ) -> Outcome<Vec<ResponseItem>> {
        let ctx = RequestContext::new(PARTITION, self.actor);
        let mut items: Vec<ResponseItem> = Vec::new();
        engine.handle(&ctx, &self.request(pushes, pull), &mut items)?;
        // A reset section means: drop the local rows and bootstrap again
        // from -1 (its SUB_END only repeats the old cursor).
        let mut reset = false;
        for item in &items {
            match item {
                ResponseItem::Header(h) if h.reset_required => {
                    self.epoch = h.log_epoch.clone();
                    self.cursor = -1;
                }
                ResponseItem::SubStart(start) => reset = start.status == SectionStatus::Reset,
                ResponseItem::SubEnd(_) if reset => {
                    self.cursor = -1;
                    self.bootstrap_state = None;
                }
                ResponseItem::SubEnd(SubEnd {
                    next_cursor,
                    bootstrap_state,
                }) => {
                    self.cursor = *next_cursor;
                    self.bootstrap_state = bootstrap_state.clone();
                }
                ResponseItem::Error(e) => return Err(format!("request refused: {e}").into()),
                _ => {}
            }
        }
        Ok(items)
    }
}

fn check(claim: bool, what: &str) -> Outcome {
    if claim {
        println!("  ok: {what}");
        Ok(())
    } else {
        Err(format!("the story broke: {what}").into())
    }
}

fn todo(schema: &CompiledSchema, id: &str, title: &str, done: bool) -> Outcome<Vec<u8>> {
    let table = schema.require_table("todos")?;
    Ok(codec::encode_row(
        table,
        &[
            RowValue::String(id.into()),
            RowValue::String("shopping".into()),
            RowValue::String(title.into()),
            RowValue::Boolean(done),
        ],
    )?)
}

fn commit(id: &str, operation: Operation) -> PushCommit {
    PushCommit {
        client_commit_id: id.to_owned(),
        operations: vec![operation],
    }
}

fn push_result(items: &[ResponseItem]) -> Outcome<&PushResult> {
    items
        .iter()
        .find_map(|item| match item {
            ResponseItem::PushResult(result) => Some(result),
            _ => None,
        })
        .ok_or_else(|| "no PUSH_RESULT in the response".into())
}

fn titles(schema: &CompiledSchema, items: &[ResponseItem]) -> Outcome<Vec<String>> {
    let table = schema.require_table("todos")?;
    let mut rows: Vec<&[u8]> = Vec::new();
    for item in items {
        match item {
            ResponseItem::BootstrapPage(page) => rows.extend(page.rows.iter().map(|r| &r.row[..])),
            ResponseItem::Commit(c) => {
                rows.extend(c.changes.iter().filter_map(|ch| ch.row.as_deref()))
            }
            _ => {}
        }
    }
    rows.into_iter()
        .map(|row| match codec::decode_row(table, row)?.get(2) {
            Some(RowValue::String(title)) => Ok(title.clone()),
            other => Err(format!("unexpected title value {other:?}").into()),
        })
        .collect()
}

fn section(items: &[ResponseItem]) -> Option<&SubStart> {
    items.iter().find_map(|item| match item {
        ResponseItem::SubStart(start) => Some(start),
        _ => None,
    })
}

/// Ensures the schema on `storage`, builds the engine and tells the story.
pub fn run(storage: Arc<dyn ServerStorage>, schema: Arc<CompiledSchema>) -> Outcome {
    // Readiness is a startup act: ensure the schema (with the checkpoint
    // declarations of this process, none here), then build the engine.
    storage.ensure_schema(&schema, &EnsureOptions::default())?;
    let clock = Arc::new(ManualClock::new(START_MS));
    let mut config = EngineConfig::new(Arc::new(resolver));
    config.clock = clock.clone();
    config.retention = RetentionPolicy {
        active_window_ms: 60_000,
        age_force_ms: 60_000,
        min_retained_commits: 1,
    };
    let engine = Engine::new(storage, schema.clone(), config)?;

    println!("1. first contact: each client acquires the partition's log epoch");
    let mut alice = Client::new("alice", "alice-phone");
    let mut bob = Client::new("bob", "bob-laptop");
    for client in [&mut alice, &mut bob] {
        let items = client.sync(&engine, Vec::new(), true)?;
        check(
            matches!(&items[0], ResponseItem::Header(h) if h.reset_required)
                && client.epoch.is_some(),
            &format!("{} is told the epoch and to reset", client.id),
        )?;
    }

    println!("2. alice adds a todo; her retry of the same commit is answered from the cache");
    let add = commit(
        "a-1",
        Operation::upsert("todos", "milk", None, todo(&schema, "milk", "Milk", false)?),
    );
    let first = alice.sync(&engine, vec![add.clone()], false)?;
    let applied = push_result(&first)?.clone();
    check(applied.status == PushResultStatus::Applied, "a-1 applied")?;
    let retry = alice.sync(&engine, vec![add], false)?;
    let cached = push_result(&retry)?;
    check(
        cached.status == PushResultStatus::Cached && cached.commit_seq == applied.commit_seq,
        "the retry of a-1 is cached with the same commitSeq (nothing applied twice)",
    )?;

    println!("3. bob bootstraps and sees alice's todo");
    let boot = bob.sync(&engine, Vec::new(), true)?;
    check(
        section(&boot).is_some_and(|s| s.bootstrap),
        "bob's section is a bootstrap",
    )?;
    check(
        titles(&schema, &boot)? == ["Milk"],
        "bob's bootstrap page holds Milk",
    )?;

    println!("4. both edit the todo from version 1: bob first, so alice conflicts");
    let bob_edit = commit(
        "b-1",
        Operation::upsert(
            "todos",
            "milk",
            Some(1),
            todo(&schema, "milk", "Oat milk", false)?,
        ),
    );
    let bob_items = bob.sync(&engine, vec![bob_edit], false)?;
    check(
        push_result(&bob_items)?.status == PushResultStatus::Applied,
        "b-1 applied (version 2)",
    )?;
    let alice_edit = commit(
        "a-2",
        Operation::upsert(
            "todos",
            "milk",
            Some(1),
            todo(&schema, "milk", "Milk", true)?,
        ),
    );
    let alice_items = alice.sync(&engine, vec![alice_edit], false)?;
    let rejected = push_result(&alice_items)?;
    let conflict = matches!(
        rejected.results.as_slice(),
        [PushOperationResult::Conflict {
            server_version: 2,
            ..
        }]
    );
    check(
        rejected.status == PushResultStatus::Rejected && conflict,
        "a-2 is rejected with a conflict carrying the server's version 2 and row",
    )?;

    println!("5. alice pulls: a bootstrap, then only what changed since");
    let boot = alice.sync(&engine, Vec::new(), true)?;
    check(
        titles(&schema, &boot)? == ["Oat milk"],
        "alice's bootstrap shows bob's edit",
    )?;
    let add_bread = commit(
        "b-2",
        Operation::upsert(
            "todos",
            "bread",
            None,
            todo(&schema, "bread", "Bread", false)?,
        ),
    );
    bob.sync(&engine, vec![add_bread], false)?;
    let incremental = alice.sync(&engine, Vec::new(), true)?;
    check(
        section(&incremental).is_some_and(|s| !s.bootstrap)
            && titles(&schema, &incremental)? == ["Bread"],
        "alice's incremental pull carries exactly the new commit",
    )?;

    println!("6. bob adds two todos, an hour passes, he adds one more; the log is pruned");
    for (id, key, title) in [
        ("b-3", "eggs", "Eggs"),
        ("b-4", "tea", "Tea"),
        ("b-5", "jam", "Jam"),
    ] {
        if id == "b-5" {
            clock.advance(3_600_000);
        }
        let add = commit(
            id,
            Operation::upsert("todos", key, None, todo(&schema, key, title, false)?),
        );
        bob.sync(&engine, vec![add], false)?;
    }
    let pruned = engine.prune(PARTITION, START_MS + 3_600_000)?;
    println!(
        "  pruned {} commits, horizon {}",
        pruned.removed_commits, pruned.horizon_seq
    );
    check(
        pruned.horizon_seq > alice.cursor,
        "the horizon passed alice's cursor",
    )?;

    println!("7. alice comes back behind the horizon: reset, then a fresh bootstrap");
    let behind = alice.sync(&engine, Vec::new(), true)?;
    check(
        section(&behind).is_some_and(|s| {
            s.status == SectionStatus::Reset && s.reason_code == "sync.cursor_expired"
        }),
        "alice's section is reset with sync.cursor_expired (no change is skipped silently)",
    )?;
    let again = alice.sync(&engine, Vec::new(), true)?;
    let mut seen = titles(&schema, &again)?;
    seen.sort();
    check(
        seen == ["Bread", "Eggs", "Jam", "Oat milk", "Tea"],
        &format!("the re-bootstrap holds every current todo ({seen:?})"),
    )?;
    println!("done");
    Ok(())
}
