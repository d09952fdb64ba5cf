//! The checks of the front, one function per argument kind, each returning
//! the checked type a backend receives (`storage-contract.md` §1 rule 4,
//! §4, §5). The order in which a method calls them is the specification's.

use crate::error::{Error, ErrorCode, Result};
use crate::queries::IndexRowScanQuery;
use crate::rows::{NewCommit, StoredRow};
use crate::scope::{candidate_variable, ScopeFilter};
use crate::validate;

use super::checked::{
    Checked, CheckedRow, CheckpointName, IndexLookup, LogEpoch, Partition, RowId, Table, Tables,
};
use super::ensured::EnsuredSchema;

/// A non-empty partition.
pub(crate) fn partition(partition: &str) -> Result<Partition<'_>> {
    validate::partition(partition)?;
    Ok(Partition::new(partition))
}

/// A non-empty log epoch.
pub(crate) fn log_epoch(epoch: &str) -> Result<LogEpoch<'_>> {
    validate::log_epoch(epoch)?;
    Ok(LogEpoch::new(epoch))
}

/// A checkpoint name.
pub(crate) fn name(name: &str) -> Result<CheckpointName<'_>> {
    validate::checkpoint_name(name)?;
    Ok(CheckpointName::new(name))
}

/// A schema version ≥ 1.
pub(crate) fn schema_version(version: i32) -> Result<Checked<i32>> {
    validate::schema_version(version)?;
    Ok(Checked::new(version))
}

/// A running version ≥ 0 (0: this instance has not ensured).
pub(crate) fn running_version(running: i32) -> Result<Checked<i32>> {
    if running < 0 {
        return Err(Error::invalid_argument(
            "running_schema_version",
            "negative",
        ));
    }
    Ok(Checked::new(running))
}

/// A lookup limit in 1..=1000.
pub(crate) fn limit(limit: i64) -> Result<Checked<i64>> {
    validate::lookup_limit(limit)?;
    Ok(Checked::new(limit))
}

/// A sequence argument ≥ 0 (`invalid_argument` naming `argument`).
pub(crate) fn non_negative(argument: &str, value: i64) -> Result<Checked<i64>> {
    validate::non_negative(argument, value)?;
    Ok(Checked::new(value))
}

/// A watermark ≥ 0 (`checkpoint_watermark_invalid`, `reason = negative`).
pub(crate) fn watermark(value: i64) -> Result<Checked<i64>> {
    validate::watermark(value)?;
    Ok(Checked::new(value))
}

/// A table of the ensured schema (none ensured: every table is unknown).
pub(crate) fn table<'e, S: EnsuredSchema>(
    ensured: Option<&'e S>,
    name: &str,
) -> Result<Table<'e, S::Handle>> {
    match ensured.and_then(|e| e.table(name)) {
        Some((compiled, handle)) => Ok(Table::new(compiled, handle)),
        None => Err(Error::unknown_table(name)),
    }
}

/// A table list of the ensured schema, deduplicated; the first unknown
/// table in list order is the one reported.
pub(crate) fn tables<S: EnsuredSchema>(ensured: Option<&S>, tables: &[String]) -> Result<Tables> {
    for name in tables {
        table(ensured, name)?;
    }
    Ok(Tables::new(validate::dedup_tables(tables)))
}

/// The values of the filter's candidate variable, `None` when the filter
/// is empty or the candidate's list is: a read that can match nothing.
pub(crate) fn candidate_values(filter: &ScopeFilter) -> Option<&[String]> {
    let values = filter.get(candidate_variable(filter)?)?;
    (!values.is_empty()).then_some(values.as_slice())
}

/// `scan_rows_by_index` after the partition (§4.8 step 1): table, limit,
/// materialized, index, value count, value types.
pub(crate) fn index_lookup<'a, S: EnsuredSchema>(
    ensured: Option<&'a S>,
    query: &'a IndexRowScanQuery,
) -> Result<IndexLookup<'a, S::Handle>> {
    let table = table(ensured, &query.table)?;
    let limit = limit(query.limit)?;
    let compiled = table.compiled();
    if !compiled.materialize {
        return Err(Error::new(ErrorCode::IndexNotMaterialized).detail("table", &compiled.name));
    }
    let Some(index) = compiled.index(&query.index) else {
        return Err(Error::new(ErrorCode::IndexNotFound)
            .detail("table", &compiled.name)
            .detail("index", &query.index));
    };
    if index.columns.len() != query.values.len() {
        return Err(Error::new(ErrorCode::IndexValueCountMismatch)
            .detail("expected", index.columns.len())
            .detail("actual", query.values.len()));
    }
    for (position, (column, value)) in index.columns.iter().zip(&query.values).enumerate() {
        let fits = compiled
            .column(column)
            .is_some_and(|c| value.column_type().is_none_or(|t| t == c.column_type));
        if !fits {
            return Err(Error::new(ErrorCode::IndexValueTypeMismatch).detail("position", position));
        }
    }
    Ok(IndexLookup::new(
        table,
        index,
        &query.values,
        query.after_row_id.as_deref(),
        limit.get(),
    ))
}

/// A row to write to `table` (§5.4 `upsert_row` after the table): row id,
/// then the payload under the table's columns (decoded when materialized),
/// then its column versions: absent, or non-empty and no longer than
/// well-formed pairs for every column can be (`invalid_argument`; storage
/// never reads them, the check keeps a bug from being stored).
pub(crate) fn row<'r, T>(table: Table<'_, T>, row: &'r StoredRow) -> Result<CheckedRow<'r>> {
    validate::row_id(&row.row_id)?;
    let compiled = table.compiled();
    if !crate::column_versions::storable(row.column_versions.as_deref(), compiled.columns.len()) {
        let reason = if row.column_versions.as_ref().is_some_and(Vec::is_empty) {
            "empty"
        } else {
            "too_long"
        };
        return Err(
            Error::invalid_argument("column_versions", reason).detail("table", &compiled.name)
        );
    }
    let projection = if compiled.materialize {
        Some(crate::codec::decode_row(compiled, &row.payload)?)
    } else {
        crate::codec::validate_row(compiled, &row.payload)?;
        None
    };
    Ok(CheckedRow::new(row, projection))
}

/// A row id of a write (`invalid_row_id`).
pub(crate) fn row_id(row_id: &str) -> Result<RowId<'_>> {
    validate::row_id(row_id)?;
    Ok(RowId::new(row_id))
}

/// `append_commit` (§5.4): every change's table known, then each change
/// consistent with its operation (`invalid_change`).
pub(crate) fn commit<S: EnsuredSchema>(ensured: Option<&S>, commit: &NewCommit) -> Result<()> {
    for change in &commit.changes {
        table(ensured, &change.table)?;
    }
    for (index, change) in commit.changes.iter().enumerate() {
        if let Some(reason) = change.consistency_error() {
            return Err(Error::new(ErrorCode::InvalidChange)
                .detail("index", index)
                .detail("reason", reason));
        }
    }
    Ok(())
}
