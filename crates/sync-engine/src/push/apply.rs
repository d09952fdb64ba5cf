//! Operation apply (`engine.md` §4.2–§4.8 per-row part); the upsert of
//! wire version 3 is [`sparse`].

mod sparse;

use std::collections::HashMap;

use sync_core::{
    codec, CompiledTable, ErrorCode, NewChange, PushOperationResult, PushPreludeRequest, RowValue,
    StorageTransaction, StoredRow,
};

use super::conflict::{decide, Decision};
use super::row_values::{blob_ids, decode, merge_crdts, named};
use super::semantics::WriteSemantics;
use super::{records, storable};
use crate::config::DeletePolicy;
use crate::engine::{Engine, MAX_SAFE_INTEGER};
use crate::hooks::validators::{
    OperationEvidence, ValidateContext, ValidateOperation, ValidationFailure,
};
use crate::round::abort::{Abort, InternalFailure};
use crate::scopes::{extract_scopes, has_all_scopes, render, write_authorized, Resolved};
use crate::wire::request::{OpKind, Operation};

/// One operation's result: applied, or the commit's terminating record.
pub(crate) enum OpOutcome {
    Applied,
    Terminal(PushOperationResult),
}

use OpOutcome::{Applied, Terminal};

/// Rows the push prelude read before any write: each serves the first
/// read of its row (A3) and is then gone, so a later read of the same row
/// sees this commit's own writes through the transaction.
#[derive(Debug, Default)]
pub(crate) struct Prefetched {
    rows: HashMap<(String, String), Option<StoredRow>>,
}

impl Prefetched {
    /// The rows of a prelude, keyed by the request's tables and ids.
    pub(crate) fn new(
        request: PushPreludeRequest,
        rows: Option<Vec<Vec<Option<StoredRow>>>>,
    ) -> Self {
        let mut out = HashMap::new();
        if let Some(rows) = rows {
            for ((table, ids), found) in request.rows.into_iter().zip(rows) {
                if ids.len() != found.len() {
                    continue; // a malformed answer is not trusted
                }
                for (id, row) in ids.into_iter().zip(found) {
                    out.insert((table.clone(), id), row);
                }
            }
        }
        Self { rows: out }
    }

    fn take(&mut self, table: &str, row_id: &str) -> Option<Option<StoredRow>> {
        self.rows.remove(&(table.to_owned(), row_id.to_owned()))
    }
}

/// Applies a commit's operations through the transaction, collecting the
/// changes and the evidence for whole-commit hooks.
pub(crate) struct Applier<'a, 't, 'x> {
    pub(crate) engine: &'a Engine,
    pub(crate) partition: &'a str,
    pub(crate) actor_id: &'a str,
    pub(crate) resolved: &'a Resolved,
    pub(crate) semantics: WriteSemantics,
    pub(crate) tx: &'t mut (dyn StorageTransaction + 'x),
    pub(crate) prefetched: Prefetched,
    pub(crate) changes: Vec<NewChange>,
    pub(crate) evidence: Vec<OperationEvidence>,
}

fn forbidden(i: u32) -> OpOutcome {
    Terminal(records::error(
        i,
        "sync.forbidden",
        "write is outside the actor's scopes",
    ))
}

fn invalid(i: u32, message: &str) -> OpOutcome {
    Terminal(records::error(i, "sync.invalid_request", message))
}

impl Applier<'_, '_, '_> {
    /// Applies every operation in order; the first terminal outcome stops.
    pub(crate) fn apply_all(&mut self, operations: &[Operation]) -> Result<OpOutcome, Abort> {
        for (i, op) in operations.iter().enumerate() {
            let i = u32::try_from(i).map_err(|_| Abort::internal(InternalFailure("op index")))?;
            if let Terminal(record) = self.apply(i, op)? {
                return Ok(Terminal(record));
            }
        }
        Ok(Applied)
    }

    fn apply(&mut self, i: u32, op: &Operation) -> Result<OpOutcome, Abort> {
        let engine = self.engine;
        let Some(table) = engine.schema.table(&op.table) else {
            return Ok(Terminal(records::error(
                i,
                "sync.unknown_table",
                "operation names an unknown table",
            ))); // A1
        };
        if let Some(problem) = storable::row_id_problem(&op.row_id) {
            return Ok(invalid(i, problem)); // before any read of the row
        }
        if *self.resolved == Resolved::Failed {
            return Ok(forbidden(i)); // A2
        }
        match (op.op, self.semantics) {
            (OpKind::Delete, _) => self.delete(i, table, op),
            (OpKind::Upsert, WriteSemantics::FullRow { delete_policy }) => {
                self.upsert(i, table, op, delete_policy)
            }
            (OpKind::Upsert, WriteSemantics::Sparse) => self.sparse_upsert(i, table, op),
        }
    }

    fn read_row(
        &mut self,
        table: &CompiledTable,
        row_id: &str,
    ) -> Result<Option<StoredRow>, Abort> {
        if let Some(row) = self.prefetched.take(&table.name, row_id) {
            return Ok(row); // A3, read by the prelude
        }
        self.tx.get_row(&table.name, row_id).map_err(Abort::storage) // A3
    }

    fn delete(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
    ) -> Result<OpOutcome, Abort> {
        let Some(stored) = self.read_row(table, &op.row_id)? else {
            self.record_evidence(i, table, op, None, None); // D1
            return Ok(Applied);
        };
        if !write_authorized(table, &stored.scopes, self.resolved) {
            return Ok(forbidden(i)); // D2
        }
        if !has_all_scopes(table, &stored.scopes) {
            return Ok(Terminal(records::error(
                i,
                "sync.missing_scopes",
                "stored row lacks scopes",
            ))); // D3
        }
        if self.row_hook(table) || self.wants_evidence() {
            let stored_values = decode(table, &stored.payload).map_err(Abort::internal)?; // D4
            if let Some(record) = self.row_validator(i, table, op, None, Some(&stored_values)) {
                return Ok(Terminal(record)); // D5
            }
            let before = (stored_values.as_slice(), stored.server_version);
            self.record_evidence(i, table, op, None, Some(before));
        }
        self.tx
            .delete_row(&table.name, &op.row_id)
            .map_err(Abort::storage)?; // D6
        self.changes.push(NewChange::delete(
            &table.name,
            &op.row_id,
            stored.scopes.clone(),
        )); // D7
        Ok(Applied)
    }

    fn upsert(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        delete_policy: DeletePolicy,
    ) -> Result<OpOutcome, Abort> {
        let Some(pushed) = op.payload.as_deref() else {
            return Ok(invalid(i, "upsert without payload")); // U1
        };
        let Ok(mut values) = decode(table, pushed) else {
            return Ok(invalid(i, "payload does not decode")); // U2
        };
        if let Some(problem) = storable::values_problem(table, &values) {
            return Ok(invalid(i, problem));
        }
        let key = values.get(table.primary_key_index).and_then(render);
        if key.as_deref() != Some(op.row_id.as_str()) {
            return Ok(invalid(i, "rowId does not match the primary key")); // U3
        }
        match self.read_row(table, &op.row_id)? {
            Some(stored) => self.update(i, table, op, values, stored),
            None => {
                let outcome = self.insert_checks(i, table, op, &values, delete_policy)?;
                match outcome {
                    Some(terminal) => Ok(terminal),
                    None => self.insert(i, table, op, &mut values, pushed),
                }
            }
        }
    }

    fn update(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        mut values: Vec<RowValue>,
        stored: StoredRow,
    ) -> Result<OpOutcome, Abort> {
        if !write_authorized(table, &stored.scopes, self.resolved) {
            return Ok(forbidden(i)); // U4a
        }
        if decide(op.op, Some(stored.server_version), op.base_version) == Decision::Conflict {
            return Ok(Terminal(records::conflict(
                i,
                stored.server_version,
                stored.payload,
                None,
            ))); // U4b, U4c
        }
        let stored_values = decode(table, &stored.payload).map_err(Abort::internal)?; // U4d
        let mut changed = false;
        for pattern in &table.scope_patterns {
            let ci = pattern.column_index;
            if let (Some(new), Some(old)) = (values.get(ci), stored_values.get(ci)) {
                if new != old {
                    values[ci] = old.clone();
                    changed = true;
                }
            }
        }
        let Ok(merged) = merge_crdts(
            table,
            &self.engine.config.mergers,
            &mut values,
            Some(&stored_values),
        ) else {
            return Ok(merge_failed(i)); // U4e
        };
        let pushed = op.payload.as_deref().unwrap_or_default();
        let payload = self.final_payload(table, pushed, &values, changed || merged)?; // U4f
        let version = stored.server_version + 1;
        if version > MAX_SAFE_INTEGER {
            return Err(Abort::internal(InternalFailure("server_version overflow")));
        }
        if let Some(t) = self.blobs(i, table, op, &values)? {
            return Ok(t); // U4g
        }
        if let Some(record) = self.row_validator(i, table, op, Some(&values), Some(&stored_values))
        {
            return Ok(Terminal(record)); // U4h
        }
        let row = StoredRow {
            row_id: op.row_id.clone(),
            server_version: version,
            scopes: stored.scopes,
            payload,
            column_versions: None,
        };
        let before = (stored_values.as_slice(), stored.server_version);
        self.record_evidence(i, table, op, Some((&values, version)), Some(before));
        self.store(i, table, row) // U4i, U4j
    }

    /// U5a–d. `Some` = terminal.
    fn insert_checks(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        values: &[RowValue],
        delete_policy: DeletePolicy,
    ) -> Result<Option<OpOutcome>, Abort> {
        let scopes = extract_scopes(table, values);
        let authorized = scopes
            .as_ref()
            .is_some_and(|s| write_authorized(table, s, self.resolved));
        if decide(op.op, None, op.base_version) == Decision::RowMissing {
            return Ok(Some(if authorized {
                row_missing(i)
            } else {
                forbidden(i)
            })); // U5a
        }
        if !authorized {
            return Ok(Some(forbidden(i))); // U5b, U5c
        }
        if delete_policy == DeletePolicy::DeleteWins {
            let tombstone = self
                .tx
                .get_tombstone_seq(&table.name, &op.row_id)
                .map_err(Abort::storage)?;
            match (op.base_version, tombstone) {
                (None, Some(_)) => return Ok(Some(row_missing(i))),
                (Some(0), Some(_)) => self
                    .tx
                    .clear_tombstone(&table.name, &op.row_id)
                    .map_err(Abort::storage)?,
                _ => {}
            }
        }
        Ok(None)
    }

    /// Inserts `values` at version 1; `pushed` is the full-row encoding
    /// the client sent, stored as is unless a merge changed a value.
    fn insert(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        values: &mut [RowValue],
        pushed: &[u8],
    ) -> Result<OpOutcome, Abort> {
        let Some(scopes) = extract_scopes(table, values) else {
            return Ok(forbidden(i));
        };
        let Ok(merged) = merge_crdts(table, &self.engine.config.mergers, values, None) else {
            return Ok(merge_failed(i)); // U5e
        };
        let payload = self.final_payload(table, pushed, values, merged)?; // U5f
        if let Some(t) = self.blobs(i, table, op, values)? {
            return Ok(t); // U5g
        }
        if let Some(record) = self.row_validator(i, table, op, Some(values), None) {
            return Ok(Terminal(record)); // U5h
        }
        let row = StoredRow {
            row_id: op.row_id.clone(),
            server_version: 1,
            scopes,
            payload,
            column_versions: None,
        };
        self.record_evidence(i, table, op, Some((values, 1)), None);
        self.store(i, table, row) // U5i, U5j
    }

    /// The payload to store: `pushed` (a full-row encoding of `values`)
    /// unless `changed`, then a fresh encoding of `values`.
    fn final_payload(
        &self,
        table: &CompiledTable,
        pushed: &[u8],
        values: &[RowValue],
        changed: bool,
    ) -> Result<Vec<u8>, Abort> {
        if changed {
            codec::encode_row(table, values).map_err(Abort::internal)
        } else {
            Ok(pushed.to_vec())
        }
    }

    /// §4.7: existence check and reference index. `Some` = terminal.
    fn blobs(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        values: &[RowValue],
    ) -> Result<Option<OpOutcome>, Abort> {
        if table.blob_ref_column_indices.is_empty() {
            return Ok(None);
        }
        let ids = blob_ids(table, values);
        let not_found = || {
            Some(Terminal(records::error(
                i,
                "blob.not_found",
                "referenced blob does not exist",
            )))
        };
        if !ids.is_empty() {
            let Some(store) = &self.engine.config.blobs else {
                return Ok(not_found());
            };
            for id in &ids {
                if !store.exists(self.partition, id).map_err(Abort::internal)? {
                    return Ok(not_found());
                }
            }
        }
        if self.engine.storage.capabilities().blob_refs {
            self.tx
                .set_blob_refs(&table.name, &op.row_id, &ids)
                .map_err(Abort::storage)?;
        }
        Ok(None)
    }

    /// Writes an upserted row and records its change.
    fn store(&mut self, i: u32, table: &CompiledTable, row: StoredRow) -> Result<OpOutcome, Abort> {
        if let Some(t) = self.write(i, table, &row)? {
            return Ok(t);
        }
        self.changes.push(NewChange::upsert(
            &table.name,
            row.row_id,
            row.server_version,
            row.scopes,
            row.payload,
        ));
        Ok(Applied)
    }

    /// Whether whole-commit hooks will read the evidence.
    fn wants_evidence(&self) -> bool {
        let config = &self.engine.config;
        config.commit_validator.is_some() || config.reaction_planner.is_some()
    }

    /// Whether the table has a row validator.
    fn row_hook(&self, table: &CompiledTable) -> bool {
        self.engine.config.row_validators.contains_key(&table.name)
    }

    /// Records the evidence of an applied operation when a whole-commit
    /// hook will read it: `written` = the row and version written,
    /// `before` = the stored row and its version.
    fn record_evidence(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        written: Option<(&[RowValue], i64)>,
        before: Option<(&[RowValue], i64)>,
    ) {
        if !self.wants_evidence() {
            return;
        }
        self.evidence.push(OperationEvidence {
            op_index: i,
            op: op.op,
            table: op.table.clone(),
            row_id: op.row_id.clone(),
            row: written.map(|(v, _)| named(table, v)),
            stored: before.map(|(v, _)| named(table, v)),
            stored_server_version: before.map(|(_, version)| version),
            next_server_version: written.map(|(_, version)| version),
        });
    }

    /// The row write; a relational constraint violation terminates the commit.
    fn write(
        &mut self,
        i: u32,
        table: &CompiledTable,
        row: &StoredRow,
    ) -> Result<Option<OpOutcome>, Abort> {
        match self.tx.upsert_row(&table.name, row, Some(i)) {
            Ok(()) => Ok(None),
            Err(e) if e.is(ErrorCode::ConstraintViolation) => Ok(Some(Terminal(
                records::constraint_violation(e.op_index_value().unwrap_or(0)),
            ))),
            Err(e) => Err(Abort::storage(e)),
        }
    }

    /// The table's row validator; `Some` = the terminating record.
    fn row_validator(
        &self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        row: Option<&[RowValue]>,
        stored: Option<&[RowValue]>,
    ) -> Option<PushOperationResult> {
        let validator = self.engine.config.row_validators.get(&table.name)?;
        let input = ValidateOperation {
            op: op.op,
            table: table.name.clone(),
            row_id: op.row_id.clone(),
            row: row.map(|v| named(table, v)),
            stored: stored.map(|v| named(table, v)),
        };
        let ctx = ValidateContext {
            actor_id: self.actor_id.to_owned(),
            partition: self.partition.to_owned(),
        };
        match validator.validate(&input, &ctx) {
            Ok(()) => None,
            Err(failure) => Some(failure_record(i, failure)),
        }
    }
}

/// The record of a validator failure at `i`.
pub(crate) fn failure_record(i: u32, failure: ValidationFailure) -> PushOperationResult {
    match failure {
        ValidationFailure::Reject(r) => PushOperationResult::Error {
            op_index: i,
            code: r.code().to_owned(),
            message: r.message().to_owned(),
            retryable: false,
            details: r.details().cloned(),
        },
        ValidationFailure::Failed(_) => {
            records::error(i, "sync.constraint_violation", "validation failed")
        }
    }
}

fn row_missing(i: u32) -> OpOutcome {
    Terminal(records::error(i, "sync.row_missing", "row does not exist"))
}

fn merge_failed(i: u32) -> OpOutcome {
    Terminal(records::error(
        i,
        "sync.crdt_merge_failed",
        "crdt merge failed",
    ))
}
