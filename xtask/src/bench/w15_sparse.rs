//! W15 sparse-push: updates of a ten-column row through `Engine::handle`,
//! one update per commit and request, in three forms on fresh databases
//! holding the same rows — (a) a wire-version-2 full row, (b) a version-3
//! sparse row changing 1 of the 10 columns (the key and `title`), (c) a
//! version-3 sparse row with every column present — A B C A B C in the
//! same run. Commits/s; the ratios are (b)/(a) and (c)/(a).
//!
//! The rows are inserted untimed through the engine (one commit of 50
//! rows each) before the clock starts; every timed update is unversioned,
//! so none conflicts.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use sync_core::{codec, CompiledSchema, EnsureOptions, RowValue};
use sync_engine::{
    Engine, EngineConfig, Operation, PushCommit, PushResultStatus, ResolveError, ResponseItem,
    ScopeMap, SyncRequest,
};
use sync_sqlite::Synchronous;

use super::db::Env;
use super::engine;
use super::pushes::{timed, PushRun};
use super::report::{Better, Measure, Sample};
use super::{progress, Scale};

const TABLE: &str = "notes";
const ACTOR: &str = "w15-writer";
const CLIENT: &str = "w15-client";
/// Rows inserted per untimed seeding commit.
const SEED_BATCH: usize = 50;

/// The three forms of one update.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Wire version 2, the full row.
    FullV2,
    /// Wire version 3, the key and one changed column present.
    OneColumnV3,
    /// Wire version 3, every column present.
    EveryColumnV3,
}

fn schema() -> Result<CompiledSchema> {
    let text = r#"{"version": 1, "tables": [{"name": "notes", "primaryKey": "id",
        "columns": [
            {"name": "id", "type": "string"},
            {"name": "list_id", "type": "string"},
            {"name": "title", "type": "string"},
            {"name": "body", "type": "string"},
            {"name": "done", "type": "boolean"},
            {"name": "position", "type": "integer"},
            {"name": "priority", "type": "integer"},
            {"name": "tag", "type": "string", "nullable": true},
            {"name": "created_at_ms", "type": "integer"},
            {"name": "updated_at_ms", "type": "integer"}],
        "scopes": ["list:{list_id}"]}]}"#;
    Ok(sync_schema::compile(&sync_schema::parse_schema_json(
        text,
    )?)?)
}

fn allow_all(_: &str, _: &str, _: &str) -> Result<ScopeMap, ResolveError> {
    Ok(ScopeMap::from([(
        "list_id".to_owned(),
        vec!["*".to_owned()],
    )]))
}

/// Row `n`'s values; `edit` > 0 changes the title (and nothing else).
fn values(n: usize, edit: usize) -> Vec<RowValue> {
    let title = if edit == 0 {
        format!("Note {n}")
    } else {
        format!("Note {n}, edit {edit}")
    };
    let position = i64::try_from(n).unwrap_or(i64::MAX);
    vec![
        RowValue::String(format!("note-{n:08}")),
        RowValue::String(format!("list-{:03}", n % 100)),
        RowValue::String(title),
        RowValue::String(format!("The body of note {n}, a sentence or two of text.")),
        RowValue::Boolean(n % 3 == 0),
        RowValue::Integer(position),
        RowValue::Integer(position % 5),
        RowValue::Null,
        RowValue::Integer(1_700_000_000_000 + position),
        RowValue::Integer(1_700_000_000_000 + position),
    ]
}

/// The payload of row `n`'s update in `form`.
fn payload(schema: &CompiledSchema, form: Form, n: usize) -> Result<Vec<u8>> {
    let table = &schema.tables[0];
    let full = values(n, 1);
    Ok(match form {
        Form::FullV2 => codec::encode_row(table, &full)?,
        Form::OneColumnV3 => {
            let slots: Vec<Option<RowValue>> = full
                .into_iter()
                .enumerate()
                .map(|(i, v)| (i == table.primary_key_index || i == 2).then_some(v))
                .collect();
            codec::encode_sparse(&table.columns, table.primary_key_index, &slots)?
        }
        Form::EveryColumnV3 => {
            let slots: Vec<Option<RowValue>> = full.into_iter().map(Some).collect();
            codec::encode_sparse(&table.columns, table.primary_key_index, &slots)?
        }
    })
}

fn request(epoch: &str, wire_version: u16, commit: String, ops: Vec<Operation>) -> SyncRequest {
    let mut req = engine::request(CLIENT, Some(epoch));
    req.wire_version = wire_version;
    req.pushes.push(PushCommit {
        client_commit_id: commit,
        operations: ops,
    });
    req
}

fn applied(items: &[ResponseItem]) -> bool {
    matches!(items.get(1), Some(ResponseItem::PushResult(r)) if r.status == PushResultStatus::Applied)
}

/// One timed run of `rows` updates in `form` on a fresh, seeded database.
fn form_round(env: &Env, schema: &Arc<CompiledSchema>, form: Form, rows: usize) -> Result<PushRun> {
    let db = env.fresh(Synchronous::Normal)?;
    let storage = db.open_with(|_| {})?;
    storage.ensure_schema(schema, &EnsureOptions::default())?;
    let engine = Engine::new(
        storage,
        schema.clone(),
        EngineConfig::new(Arc::new(allow_all)),
    )?;
    let epoch = engine::acquire_epoch(&engine, ACTOR, CLIENT)?;
    let table = &schema.tables[0];
    let seeds: Vec<usize> = (0..rows).collect();
    for (b, batch) in seeds.chunks(SEED_BATCH).enumerate() {
        let ops = batch
            .iter()
            .map(|&n| {
                let payload = codec::encode_row(table, &values(n, 0))?;
                Ok(Operation::upsert(
                    TABLE,
                    format!("note-{n:08}"),
                    None,
                    payload,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let items = engine::round(
            &engine,
            ACTOR,
            &request(&epoch, 2, format!("seed-{b}"), ops),
        )?;
        if !applied(&items) {
            bail!("W15: seeding batch {b} was not applied: {:?}", items.get(1));
        }
    }
    let wire_version = if form == Form::FullV2 { 2 } else { 3 };
    let requests = (0..rows)
        .map(|n| {
            let op = Operation::upsert(
                TABLE,
                format!("note-{n:08}"),
                None,
                payload(schema, form, n)?,
            );
            Ok(request(
                &epoch,
                wire_version,
                format!("update-{n}"),
                vec![op],
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    timed(requests.len(), rows, |i| {
        let items = engine::round(&engine, ACTOR, &requests[i])?;
        if applied(&items) {
            Ok(())
        } else {
            bail!("W15: update {i} was not applied: {:?}", items.get(1))
        }
    })
    .context("W15 updates")
}

/// Interleaved rounds of the three forms.
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let schema = Arc::new(schema()?);
    let rows = scale.w1_commits;
    let mut one = Vec::new();
    let mut every = Vec::new();
    for round in 0..scale.rounds {
        let full = form_round(env, &schema, Form::FullV2, rows)?;
        let sparse = form_round(env, &schema, Form::OneColumnV3, rows)?;
        let all = form_round(env, &schema, Form::EveryColumnV3, rows)?;
        progress(
            env.dialect,
            &format!("W15 round {}/{}", round + 1, scale.rounds),
            &format!(
                "v2 full row {:.0}, v3 1 of 10 columns {:.0}, v3 every column {:.0} commits/s",
                full.commits_per_s(),
                sparse.commits_per_s(),
                all.commits_per_s()
            ),
        );
        one.push(Sample {
            ours: sparse.commits_per_s(),
            raw: Some(full.commits_per_s()),
        });
        every.push(Sample {
            ours: all.commits_per_s(),
            raw: Some(full.commits_per_s()),
        });
    }
    let d = env.dialect;
    Ok(vec![
        Measure::from_samples(
            "W15",
            "v3 1 of 10 columns/v2 full row",
            d,
            "commits/s",
            Better::Higher,
            one,
        ),
        Measure::from_samples(
            "W15",
            "v3 every column/v2 full row",
            d,
            "commits/s",
            Better::Higher,
            every,
        ),
    ])
}
