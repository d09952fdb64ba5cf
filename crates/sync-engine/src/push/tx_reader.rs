//! The candidate reader over the push transaction (`engine.md` §4.8).

use sync_core::{CompiledSchema, Error, ErrorCode, RowScanQuery, StorageTransaction, StoredRow};

use super::row_values::{decode, named};
use crate::hooks::reader::{CandidateReader, CandidateRow, CandidateScan};

const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 1000;

/// Reads through the transaction and remembers the first error that
/// poisons it.
pub(crate) struct TxReader<'t, 'x> {
    tx: &'t mut (dyn StorageTransaction + 'x),
    schema: &'t CompiledSchema,
    poison: Option<Error>,
}

impl<'t, 'x> TxReader<'t, 'x> {
    pub(crate) fn new(
        tx: &'t mut (dyn StorageTransaction + 'x),
        schema: &'t CompiledSchema,
    ) -> Self {
        Self {
            tx,
            schema,
            poison: None,
        }
    }

    /// The transaction-poisoning error seen by a hook, if any.
    pub(crate) fn into_poison(self) -> Option<Error> {
        self.poison
    }

    fn note(&mut self, error: Error) -> Error {
        if poisons(&error) && self.poison.is_none() {
            // A row write's violation reported by this read (the dialect
            // sent the write with it) keeps the operation it names.
            self.poison = Some(Error::new(error.code()).op_index(error.op_index_value()));
        }
        error
    }

    fn candidate(&self, table: &str, row: StoredRow) -> sync_core::Result<CandidateRow> {
        let compiled = self.schema.require_table(table)?;
        let values = decode(compiled, &row.payload)?;
        Ok(CandidateRow {
            row_id: row.row_id,
            server_version: row.server_version,
            scopes: row.scopes,
            values: named(compiled, &values),
        })
    }
}

/// Storage errors after which the transaction can only be rolled back (or,
/// after a row write's `constraint_violation`, finalize the rejection).
pub(crate) fn poisons(error: &Error) -> bool {
    matches!(
        error.code(),
        ErrorCode::Busy
            | ErrorCode::Backend
            | ErrorCode::TransactionAborted
            | ErrorCode::ConstraintViolation
    ) || (error.retryable() && error.code().as_str().starts_with("sync.storage."))
}

impl TxReader<'_, '_> {
    /// A trusted index lookup through the transaction (command builders only).
    pub(crate) fn lookup_by_index(
        &mut self,
        query: &sync_core::IndexRowScanQuery,
    ) -> sync_core::Result<Vec<CandidateRow>> {
        self.schema.require_table(&query.table)?;
        match self.tx.scan_rows_by_index(query) {
            Ok(rows) => rows
                .into_iter()
                .map(|row| self.candidate(&query.table, row))
                .collect(),
            Err(e) => Err(self.note(e)),
        }
    }
}

impl CandidateReader for TxReader<'_, '_> {
    fn get_row(&mut self, table: &str, row_id: &str) -> sync_core::Result<Option<CandidateRow>> {
        self.schema.require_table(table)?;
        match self.tx.get_row(table, row_id) {
            Ok(Some(row)) => self.candidate(table, row).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(self.note(e)),
        }
    }

    fn scan_rows(&mut self, scan: &CandidateScan) -> sync_core::Result<Vec<CandidateRow>> {
        self.schema.require_table(&scan.table)?;
        let limit = scan.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::new(ErrorCode::InvalidLimit));
        }
        let query = RowScanQuery {
            table: scan.table.clone(),
            scope_filter: scan.scope_filter.clone(),
            after_row_id: scan.after_row_id.clone(),
            limit,
        };
        match self.tx.scan_rows(&query) {
            Ok(rows) => rows
                .into_iter()
                .map(|row| self.candidate(&scan.table, row))
                .collect(),
            Err(e) => Err(self.note(e)),
        }
    }
}
