//! Operation apply (`engine.md` §4.2–§4.8 per-row part).

use sync_core::{
    codec, CompiledTable, ErrorCode, NewChange, PushOperationResult, RowValue, StorageTransaction,
    StoredRow,
};

use super::conflict::{decide, Decision};
use super::records;
use super::row_values::{blob_ids, decode, merge_crdts, named};
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

/// Applies a commit's operations through the transaction, collecting the
/// changes and the evidence for whole-commit hooks.
pub(crate) struct Applier<'a, 't, 'x> {
    pub(crate) engine: &'a Engine,
    pub(crate) partition: &'a str,
    pub(crate) actor_id: &'a str,
    pub(crate) resolved: &'a Resolved,
    pub(crate) tx: &'t mut (dyn StorageTransaction + 'x),
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
        if *self.resolved == Resolved::Failed {
            return Ok(forbidden(i)); // A2
        }
        match op.op {
            OpKind::Delete => self.delete(i, table, op),
            OpKind::Upsert => self.upsert(i, table, op),
        }
    }

    fn read_row(
        &mut self,
        table: &CompiledTable,
        row_id: &str,
    ) -> Result<Option<StoredRow>, Abort> {
        self.tx.get_row(&table.name, row_id).map_err(Abort::storage) // A3
    }

    fn delete(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
    ) -> Result<OpOutcome, Abort> {
        let Some(stored) = self.read_row(table, &op.row_id)? else {
            self.evidence.push(evidence(i, op, None, None, None, None)); // D1
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
        let stored_values = decode(table, &stored.payload).map_err(Abort::internal)?; // D4
        let stored_named = named(table, &stored_values);
        if let Some(record) = self.row_validator(i, table, op, None, Some(&stored_named)) {
            return Ok(Terminal(record)); // D5
        }
        self.tx
            .delete_row(&table.name, &op.row_id)
            .map_err(Abort::storage)?; // D6
        self.changes.push(NewChange::delete(
            &table.name,
            &op.row_id,
            stored.scopes.clone(),
        )); // D7
        self.evidence.push(evidence(
            i,
            op,
            None,
            Some(stored_named),
            Some(stored.server_version),
            None,
        ));
        Ok(Applied)
    }

    fn upsert(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
    ) -> Result<OpOutcome, Abort> {
        let Some(pushed) = op.payload.as_deref() else {
            return Ok(invalid(i, "upsert without payload")); // U1
        };
        let Ok(mut values) = decode(table, pushed) else {
            return Ok(invalid(i, "payload does not decode")); // U2
        };
        let key = values.get(table.primary_key_index).and_then(render);
        if key.as_deref() != Some(op.row_id.as_str()) {
            return Ok(invalid(i, "rowId does not match the primary key")); // U3
        }
        match self.read_row(table, &op.row_id)? {
            Some(stored) => self.update(i, table, op, values, stored),
            None => {
                let outcome = self.insert_checks(i, table, op, &values)?;
                match outcome {
                    Some(terminal) => Ok(terminal),
                    None => self.insert(i, table, op, &mut values),
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
        let payload = self.final_payload(table, op, &values, changed || merged)?; // U4f
        let version = stored.server_version + 1;
        if version > MAX_SAFE_INTEGER {
            return Err(Abort::internal(InternalFailure("server_version overflow")));
        }
        if let Some(t) = self.blobs(i, table, op, &values)? {
            return Ok(t); // U4g
        }
        let row_named = named(table, &values);
        let stored_named = named(table, &stored_values);
        if let Some(record) =
            self.row_validator(i, table, op, Some(&row_named), Some(&stored_named))
        {
            return Ok(Terminal(record)); // U4h
        }
        let row = StoredRow {
            row_id: op.row_id.clone(),
            server_version: version,
            scopes: stored.scopes,
            payload,
        };
        if let Some(t) = self.write(i, table, &row)? {
            return Ok(t); // U4i
        }
        self.changes.push(NewChange::upsert(
            &table.name,
            &op.row_id,
            version,
            row.scopes,
            row.payload,
        ));
        self.evidence.push(evidence(
            i,
            op,
            Some(row_named),
            Some(stored_named),
            Some(stored.server_version),
            Some(version),
        ));
        Ok(Applied)
    }

    /// U5a–d. `Some` = terminal.
    fn insert_checks(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        values: &[RowValue],
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
        if self.engine.config.delete_policy == DeletePolicy::DeleteWins {
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

    fn insert(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        values: &mut [RowValue],
    ) -> Result<OpOutcome, Abort> {
        let Some(scopes) = extract_scopes(table, values) else {
            return Ok(forbidden(i));
        };
        let Ok(merged) = merge_crdts(table, &self.engine.config.mergers, values, None) else {
            return Ok(merge_failed(i)); // U5e
        };
        let payload = self.final_payload(table, op, values, merged)?; // U5f
        if let Some(t) = self.blobs(i, table, op, values)? {
            return Ok(t); // U5g
        }
        let row_named = named(table, values);
        if let Some(record) = self.row_validator(i, table, op, Some(&row_named), None) {
            return Ok(Terminal(record)); // U5h
        }
        let row = StoredRow {
            row_id: op.row_id.clone(),
            server_version: 1,
            scopes,
            payload,
        };
        if let Some(t) = self.write(i, table, &row)? {
            return Ok(t); // U5i
        }
        self.changes.push(NewChange::upsert(
            &table.name,
            &op.row_id,
            1,
            row.scopes,
            row.payload,
        ));
        self.evidence
            .push(evidence(i, op, Some(row_named), None, None, Some(1)));
        Ok(Applied)
    }

    fn final_payload(
        &self,
        table: &CompiledTable,
        op: &Operation,
        values: &[RowValue],
        changed: bool,
    ) -> Result<Vec<u8>, Abort> {
        if changed {
            codec::encode_row(table, values).map_err(Abort::internal)
        } else {
            Ok(op.payload.clone().unwrap_or_default())
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
        row: Option<&crate::hooks::validators::RowValues>,
        stored: Option<&crate::hooks::validators::RowValues>,
    ) -> Option<PushOperationResult> {
        let validator = self.engine.config.row_validators.get(&table.name)?;
        let input = ValidateOperation {
            op: op.op,
            table: table.name.clone(),
            row_id: op.row_id.clone(),
            row: row.cloned(),
            stored: stored.cloned(),
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

fn evidence(
    i: u32,
    op: &Operation,
    row: Option<crate::hooks::validators::RowValues>,
    stored: Option<crate::hooks::validators::RowValues>,
    stored_server_version: Option<i64>,
    next_server_version: Option<i64>,
) -> OperationEvidence {
    OperationEvidence {
        op_index: i,
        op: op.op,
        table: op.table.clone(),
        row_id: op.row_id.clone(),
        row,
        stored,
        stored_server_version,
        next_server_version,
    }
}
