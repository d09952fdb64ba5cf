//! Argument validation of the RFC 0007 methods shared by the pool and the
//! transaction surfaces. Order (`storage-contract.md` §4.14 "Common
//! validation"): name, schema version, watermark / sequence arguments,
//! observed rows, table lists, limit.

use sync_core::{validate, Result};

use crate::state::{require_tables, Ensured};

/// `advance_checkpoint`: name, watermark, observed rows.
pub(crate) fn advance(name: &str, watermark: i64, observed_rows: i64) -> Result<()> {
    validate::checkpoint_name(name)?;
    validate::watermark(watermark)?;
    validate::non_negative("observed_rows", observed_rows)
}

/// `activate_checkpoint`: name, watermark, sources; returns the deduplicated sources.
pub(crate) fn activate(
    ensured: Option<&Ensured>,
    name: &str,
    watermark: i64,
    sources: &[String],
) -> Result<Vec<String>> {
    validate::checkpoint_name(name)?;
    validate::watermark(watermark)?;
    require_tables(ensured, sources)
}

/// `has_source_changes_above`: seq, tables.
pub(crate) fn coverage(
    ensured: Option<&Ensured>,
    tables: &[String],
    seq: i64,
) -> Result<Vec<String>> {
    validate::non_negative("seq", seq)?;
    require_tables(ensured, tables)
}

/// `list_source_changes`: after seq, tables, limit.
pub(crate) fn source_listing(
    ensured: Option<&Ensured>,
    tables: &[String],
    after_seq: i64,
    limit: i64,
) -> Result<Vec<String>> {
    validate::non_negative("after_seq", after_seq)?;
    let tables = require_tables(ensured, tables)?;
    validate::lookup_limit(limit)?;
    Ok(tables)
}
