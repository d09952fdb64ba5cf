//! Helpers shared by the registered-query, RFC 0007 and concurrency groups:
//! fixture pushes, declarations, fence reads and bumps.

use std::sync::{mpsc, Arc, Mutex};

use serde_json::json;
use sync_core::{
    CheckpointDeclaration, CompiledSchema, EnsureOptions, NewCommit, ServerStorage,
    StorageTransaction, StoredCheckpoint,
};

use crate::check::{CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::fixtures::{compile_json, doc, fix1, fix2_json, push, task, Op};
use crate::harness::{RawAccess, RawFilter};

/// The client id of fixture pushes made through these helpers.
pub(crate) const CLIENT: &str = "client-1";

/// A new instance with `FIX1` ensured.
pub(crate) fn fix1_storage(ctx: &mut Ctx<'_>) -> CheckResult<Arc<dyn ServerStorage>> {
    ctx.ensured(&fix1()?)
}

/// Owned table names.
pub(crate) fn tables(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

/// A declaration.
pub(crate) fn decl(partition: &str, name: &str, version: i32) -> CheckpointDeclaration {
    CheckpointDeclaration::new(partition, name, version)
}

/// Pushes one `tasks` upsert (`FIX1` payload, project `proj`) and returns its seq.
pub(crate) fn push_task(
    storage: &dyn ServerStorage,
    partition: &str,
    ccid: &str,
    row_id: &str,
) -> CheckResult<i64> {
    let row = task(&fix1()?, row_id, "proj", &format!("title {row_id}"))?;
    push(
        storage,
        partition,
        CLIENT,
        ccid,
        &[Op::upsert("tasks", row)],
    )?
    .seq()
}

/// Pushes one `docs` upsert and returns its seq.
pub(crate) fn push_doc(
    storage: &dyn ServerStorage,
    partition: &str,
    ccid: &str,
    row_id: &str,
) -> CheckResult<i64> {
    let row = doc(&fix1()?, row_id, "org", "proj", Some("body"))?;
    push(storage, partition, CLIENT, ccid, &[Op::upsert("docs", row)])?.seq()
}

/// An empty commit with this client commit id.
pub(crate) fn empty_commit(ccid: &str) -> NewCommit {
    NewCommit {
        client_id: CLIENT.to_owned(),
        client_commit_id: ccid.to_owned(),
        actor_id: "actor-1".to_owned(),
        created_at_ms: NOW,
        changes: Vec::new(),
    }
}

/// Reads one checkpoint, failing the check when it is absent.
pub(crate) fn checkpoint(
    storage: &dyn ServerStorage,
    partition: &str,
    name: &str,
) -> CheckResult<StoredCheckpoint> {
    storage
        .read_checkpoint(partition, name)?
        .ok_or_else(|| Failure::new(format!("checkpoint ({partition}, {name}) is absent")))
}

/// Reads one checkpoint through a transaction, failing the check when it is absent.
pub(crate) fn tx_checkpoint(
    tx: &mut dyn StorageTransaction,
    name: &str,
) -> CheckResult<StoredCheckpoint> {
    tx.read_checkpoint(name)?
        .ok_or_else(|| Failure::new(format!("checkpoint {name} is absent in the transaction")))
}

/// The stored partition fence row (`None` when absent).
pub(crate) fn partition_fence(raw: &dyn RawAccess, partition: &str) -> CheckResult<Option<i64>> {
    let text = raw.read_text(
        "sync_writer_fence",
        "required_writer_version",
        RawFilter::eq("partition", partition),
    )?;
    parse_int(text, "sync_writer_fence.required_writer_version")
}

/// The stored database-wide fence (`None` when NULL or without a marker).
pub(crate) fn database_fence(storage: &dyn ServerStorage) -> CheckResult<Option<i32>> {
    Ok(storage
        .read_schema_marker()?
        .and_then(|m| m.required_writer_version))
}

/// The stored marker version (`None` without a marker).
pub(crate) fn marker_version(storage: &dyn ServerStorage) -> CheckResult<Option<i64>> {
    Ok(storage.read_schema_marker()?.map(|m| m.schema_version))
}

/// The stored `writer_version` of one commit (`None` for NULL or no row).
pub(crate) fn commit_writer_version(
    raw: &dyn RawAccess,
    partition: &str,
    seq: i64,
) -> CheckResult<Option<i64>> {
    let text = raw.read_text(
        "sync_commits",
        "writer_version",
        RawFilter::eq("partition", partition).and("commit_seq", &seq.to_string()),
    )?;
    parse_int(text, "sync_commits.writer_version")
}

/// Number of commit rows of a partition.
pub(crate) fn commit_rows(raw: &dyn RawAccess, partition: &str) -> CheckResult<i64> {
    Ok(raw.count("sync_commits", RawFilter::eq("partition", partition))?)
}

fn parse_int(text: Option<String>, what: &str) -> CheckResult<Option<i64>> {
    text.map(|t| {
        t.trim()
            .parse::<i64>()
            .map_err(|_| Failure::new(format!("{what} is not an integer: {t:?}")))
    })
    .transpose()
}

/// `FIX2` relabelled to another version (same tables as `FIX2`).
pub(crate) fn fix2_at(version: i32) -> CheckResult<CompiledSchema> {
    let mut value = fix2_json();
    value["version"] = json!(version);
    compile_json(&value)
}

/// A new instance that ensures `schema` with these declarations (a bump when
/// the database is older); returns the instance and the outcome.
pub(crate) fn ensure_with(
    ctx: &mut Ctx<'_>,
    schema: &CompiledSchema,
    declarations: Vec<CheckpointDeclaration>,
) -> CheckResult<(Arc<dyn ServerStorage>, sync_core::Result<()>)> {
    let storage = ctx.open()?;
    let outcome = storage.ensure_schema(schema, &EnsureOptions::with_declarations(declarations));
    Ok((storage, outcome))
}

/// Like [`ensure_with`], failing the check when `ensure_schema` fails.
pub(crate) fn ensured_with(
    ctx: &mut Ctx<'_>,
    schema: &CompiledSchema,
    declarations: Vec<CheckpointDeclaration>,
) -> CheckResult<Arc<dyn ServerStorage>> {
    let (storage, outcome) = ensure_with(ctx, schema, declarations)?;
    outcome
        .map_err(|e| Failure::new(format!("ensure_schema(v{}) failed: {e:?}", schema.version)))?;
    Ok(storage)
}

/// Whether `tasks` has a physical column named `name`.
pub(crate) fn has_column(raw: &dyn RawAccess, table: &str, name: &str) -> CheckResult<bool> {
    Ok(raw.list_columns(table)?.iter().any(|(n, _, _)| n == name))
}

/// Joins a scoped thread, turning a panic into an error result.
pub(crate) fn join_result<T>(
    handle: std::thread::ScopedJoinHandle<'_, sync_core::Result<T>>,
) -> sync_core::Result<T> {
    handle.join().unwrap_or_else(|_| {
        Err(sync_core::Error::new(sync_core::ErrorCode::Backend).detail("thread", "panicked"))
    })
}

/// Options whose `after_migration_lock` hook reports that the bump holds
/// its migration lock, then waits for a release (or for the sender to
/// drop). Returns the options, the "locked" receiver and the release sender.
pub(crate) fn held_migration_lock(
    base: EnsureOptions,
) -> (EnsureOptions, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (locked_tx, locked_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let opts = EnsureOptions {
        after_migration_lock: Some(Arc::new(move || {
            let _ = locked_tx.send(());
            if let Ok(release) = release_rx.lock() {
                let _ = release.recv();
            }
        })),
        ..base
    };
    (opts, locked_rx, release_tx)
}
