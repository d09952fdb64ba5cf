//! Reads several commands share: the schema file, the stored marker and
//! layouts, whether a partition is known, and checkpoint rows as JSON.

use std::io::Read;
use std::path::Path;

use serde_json::{json, Value};
use sync_core::{
    validate, CompiledSchema, LayoutColumn, SchemaMarker, ServerStorage, StoredCheckpoint,
};
use sync_schema::StoredLayouts;

use crate::error::{CliCode, CliError, CliResult};
use crate::escape::field;

/// The largest schema file read (16 MiB; real ones are a few KiB). A
/// device or a runaway file fails with `reason = too_large` instead of
/// exhausting memory.
pub const MAX_SCHEMA_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Reads, parses and compiles a schema file. An unreadable, oversized or
/// non-UTF-8 file is `sync.cli.schema_file`; bad content keeps the
/// parser's or compiler's `schema.*` code.
pub fn load_schema_file(path: &Path) -> CliResult<CompiledSchema> {
    let failed = |reason: &dyn std::fmt::Display| {
        CliError::new(CliCode::SchemaFile)
            .detail("path", path.display())
            .detail("reason", reason)
    };
    let file = std::fs::File::open(path).map_err(|error| failed(&error.kind()))?;
    let mut bytes = Vec::new();
    file.take(MAX_SCHEMA_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| failed(&error.kind()))?;
    if bytes.len() as u64 > MAX_SCHEMA_FILE_BYTES {
        return Err(failed(&"too_large").detail("max_bytes", MAX_SCHEMA_FILE_BYTES));
    }
    let text = String::from_utf8(bytes).map_err(|_| failed(&"not_utf8"))?;
    let input = sync_schema::parse_schema_json(&text)?;
    Ok(sync_schema::compile(&input)?)
}

/// The stored marker and its parsed layouts (empty without a marker).
pub fn stored_schema(
    storage: &dyn ServerStorage,
) -> CliResult<(Option<SchemaMarker>, StoredLayouts)> {
    let marker = storage.read_schema_marker()?;
    let layouts = sync_schema::parse_layouts(marker.as_ref().map(|m| m.layouts.as_str()))?;
    Ok((marker, layouts))
}

/// The stored layout of a table, or `sync.storage.unknown_table`.
pub fn stored_layout<'a>(layouts: &'a StoredLayouts, table: &str) -> CliResult<&'a [LayoutColumn]> {
    layouts
        .get(table)
        .ok_or_else(|| sync_core::Error::unknown_table(table).into())
}

/// A layout as JSON: `[{"name","type","nullable"}]`.
pub fn layout_json(layout: &[LayoutColumn]) -> Value {
    Value::Array(
        layout
            .iter()
            .map(|c| json!({"name": c.name, "type": c.column_type, "nullable": c.nullable}))
            .collect(),
    )
}

/// Whether the database knows the partition: a registry entry, a commit
/// counter or a checkpoint.
pub fn partition_is_known(storage: &dyn ServerStorage, partition: &str) -> CliResult<bool> {
    Ok(storage.get_partition_log_epoch(partition)?.is_some()
        || storage.get_max_commit_seq(partition)? > 0
        || !storage.read_checkpoints(partition)?.is_empty())
}

/// Fails with `sync.storage.invalid_partition` for an empty name and
/// `sync.cli.unknown_partition` for a partition the database does not know.
pub fn require_known_partition(storage: &dyn ServerStorage, partition: &str) -> CliResult<()> {
    validate::partition(partition)?;
    if partition_is_known(storage, partition)? {
        Ok(())
    } else {
        Err(CliError::new(CliCode::UnknownPartition).detail("partition", partition))
    }
}

/// Every partition worth listing: the registry, plus partitions with a
/// checkpoint pending at the stored version; byte-ordered.
pub fn listed_partitions(
    storage: &dyn ServerStorage,
    stored_version: i32,
) -> CliResult<Vec<String>> {
    let mut partitions = storage.list_partitions()?;
    if stored_version > 0 {
        partitions.extend(
            storage
                .list_pending_checkpoints(stored_version)?
                .into_iter()
                .map(|key| key.partition),
        );
    }
    partitions.sort();
    partitions.dedup();
    Ok(partitions)
}

/// The running version a marker implies (0 without one).
pub fn stored_version(marker: Option<&SchemaMarker>) -> i32 {
    marker
        .and_then(|m| i32::try_from(m.schema_version).ok())
        .unwrap_or(0)
}

/// One checkpoint as in `status`: `{"name","schema_version","state","watermark","owner_epoch","observed_rows"}`.
pub fn checkpoint_json(checkpoint: &StoredCheckpoint) -> Value {
    json!({
        "name": checkpoint.name,
        "schema_version": checkpoint.schema_version,
        "state": checkpoint.state.as_str(),
        "watermark": checkpoint.watermark,
        "owner_epoch": checkpoint.owner_epoch,
        "observed_rows": checkpoint.observed_rows,
    })
}

/// One checkpoint as a line of text.
pub fn checkpoint_text(checkpoint: &StoredCheckpoint) -> String {
    format!(
        "{} (schema v{}): {}, watermark {}, owner epoch {}, {} rows observed",
        field(&checkpoint.name),
        checkpoint.schema_version,
        checkpoint.state.as_str(),
        checkpoint.watermark,
        checkpoint.owner_epoch,
        checkpoint.observed_rows
    )
}

/// Current rows of `table` in `partition`, counted page by page (the
/// storage has no count; pages of 1 000 in row-id order).
pub fn count_rows(storage: &dyn ServerStorage, partition: &str, table: &str) -> CliResult<u64> {
    const PAGE: i64 = 1000;
    let mut count = 0u64;
    let mut after: Option<String> = None;
    loop {
        let page = storage.inspect_table_rows(partition, table, after.as_deref(), PAGE)?;
        count += page.len() as u64;
        match page.last() {
            Some(last) if page.len() as i64 == PAGE => after = Some(last.row_id.clone()),
            _ => return Ok(count),
        }
    }
}
