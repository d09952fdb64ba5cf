//! The upsert of wire version 3 (`docs/design/wire-v3.md` §4): a sparse
//! payload, per-column conflicts, immutable scope columns, delete
//! precedence. Steps are named V1–V6f as in the design, in the order of
//! its §4.5.

use sync_core::codec::{self, Reason};
use sync_core::column_versions::{ColumnVersions, Reading};
use sync_core::{CompiledTable, RowValue, StoredRow, StoredScopes};

use super::{forbidden, invalid, merge_failed, row_missing, Applier, OpOutcome, Terminal};
use crate::engine::MAX_SAFE_INTEGER;
use crate::push::records;
use crate::push::row_values::{decode, merge_crdts};
use crate::push::semantics::{column_bitmap, comparable};
use crate::push::storable;
use crate::round::abort::{Abort, InternalFailure};
use crate::scopes::{extract_scopes, render, write_authorized};
use crate::wire::request::Operation;

/// A decoded sparse payload: one slot per column, `None` = absent.
struct Sparse {
    slots: Vec<Option<RowValue>>,
}

impl Sparse {
    fn present(&self, i: usize) -> bool {
        self.slots.get(i).is_some_and(Option::is_some)
    }

    fn presence(&self) -> Vec<bool> {
        self.slots.iter().map(Option::is_some).collect()
    }

    fn is_full(&self) -> bool {
        self.slots.iter().all(Option::is_some)
    }

    /// The values with every absent column as NULL.
    fn values_or_null(&self) -> Vec<RowValue> {
        self.slots
            .iter()
            .map(|slot| slot.clone().unwrap_or(RowValue::Null))
            .collect()
    }
}

/// The message of a sparse decode failure (design §2.4, P1–P6): the
/// bitmap checks have their own; a value or trailing bytes keep the
/// full-row codec's.
fn decode_message(table: &CompiledTable, payload: &[u8], error: &sync_core::Error) -> &'static str {
    let count = table.columns.len();
    let presence_len = count.div_ceil(8);
    let Some(presence) = payload.get(..presence_len) else {
        return "sparse row: presence padding bit set"; // P1, short input
    };
    let reason = error.get_detail("reason");
    let is = |r: Reason| reason == Some(r.as_str());
    if is(Reason::PresencePadding) {
        return "sparse row: presence padding bit set"; // P1
    }
    if is(Reason::PrimaryKeyAbsent) {
        return "sparse row: primary key absent"; // P2
    }
    let present = (0..count)
        .filter(|&i| presence[i / 8] & (1 << (i % 8)) != 0)
        .count();
    let nulls_end = presence_len + present.div_ceil(8);
    if is(Reason::NonzeroPadding) || (is(Reason::Truncated) && payload.len() < nulls_end) {
        return "sparse row: null padding bit set"; // P3
    }
    if is(Reason::NullInNonNullable) {
        return "sparse row: null in a non-nullable column"; // P4
    }
    "payload does not decode" // P5, P6
}

/// The record of `sync.row_deleted`.
fn row_deleted(i: u32) -> OpOutcome {
    Terminal(records::error(
        i,
        "sync.row_deleted",
        "row was deleted; re-create it with baseVersion 0",
    ))
}

impl Applier<'_, '_, '_> {
    /// V1–V4, then the update (V5) or the absent-row rules (V6).
    pub(super) fn sparse_upsert(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
    ) -> Result<OpOutcome, Abort> {
        let Some(pushed) = op.payload.as_deref() else {
            return Ok(invalid(i, "upsert without payload")); // V1
        };
        let slots = match codec::decode_sparse_row(table, pushed) {
            Ok(slots) => slots,
            Err(error) => return Ok(invalid(i, decode_message(table, pushed, &error))), // V2
        };
        let sparse = Sparse { slots };
        if let Some(problem) = storable::values_problem(table, &sparse.values_or_null()) {
            return Ok(invalid(i, problem));
        }
        let key = sparse
            .slots
            .get(table.primary_key_index)
            .and_then(Option::as_ref)
            .and_then(render);
        if key.as_deref() != Some(op.row_id.as_str()) {
            return Ok(invalid(i, "rowId does not match the primary key")); // V3
        }
        match self.read_row(table, &op.row_id)? {
            // V4
            Some(stored) => self.sparse_update(i, table, op, sparse, stored),
            None => self.sparse_absent(i, table, op, sparse, pushed),
        }
    }

    /// V5a–V5m: the row exists.
    fn sparse_update(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        sparse: Sparse,
        stored: StoredRow,
    ) -> Result<OpOutcome, Abort> {
        if !write_authorized(table, &stored.scopes, self.resolved) {
            return Ok(forbidden(i)); // V5a
        }
        let stored_values = decode(table, &stored.payload).map_err(Abort::internal)?;
        let scope_changed = table.scope_patterns.iter().any(|p| {
            let ci = p.column_index;
            matches!(
                (sparse.slots.get(ci), stored_values.get(ci)),
                (Some(Some(new)), Some(old)) if new != old
            )
        });
        if scope_changed {
            return Ok(invalid(i, "scope column is immutable")); // V5b
        }
        let n = table.columns.len();
        let conflict = |marked: Vec<usize>| {
            Terminal(records::conflict(
                i,
                stored.server_version,
                stored.payload.clone(),
                Some(column_bitmap(n, marked)),
            ))
        };
        let versions = ColumnVersions::read(
            stored.column_versions.as_deref(),
            n,
            table.primary_key_index,
            stored.server_version,
        );
        if versions.reading() == Reading::Malformed {
            let count = &self.engine.unreadable_column_versions;
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        match op.base_version {
            Some(b) if b < 0 => return Ok(invalid(i, "baseVersion is negative")), // V5c
            Some(b) if b > stored.server_version => {
                return Ok(invalid(i, "baseVersion is newer than the row")); // V5c
            }
            Some(b) => {
                // V5d (b = 0: every present column is newer) and V5e.
                let marked: Vec<usize> = (0..n)
                    .filter(|&c| sparse.present(c) && comparable(table, c))
                    .filter(|&c| b == 0 || versions.version(c) > b)
                    .collect();
                if b == 0 || !marked.is_empty() {
                    return Ok(conflict(marked));
                }
            }
            None => {} // V5f
        }
        // V5g: present non-crdt values over the stored row; V5h: each
        // present crdt value merged into the stored state (an absent one
        // is NULL here, which no merge reads, then the stored value).
        let mut values = sparse.values_or_null();
        let Ok(merged) = merge_crdts(
            table,
            &self.engine.config.mergers,
            &mut values,
            Some(&stored_values),
        ) else {
            return Ok(merge_failed(i));
        };
        for (c, value) in values.iter_mut().enumerate() {
            if !sparse.present(c) {
                if let Some(old) = stored_values.get(c) {
                    *value = old.clone();
                }
            }
        }
        let payload = self.sparse_payload(table, op, &values, &sparse, merged)?; // V5i
        let version = stored.server_version + 1; // V5j
        if version > MAX_SAFE_INTEGER {
            return Err(Abort::internal(InternalFailure("server_version overflow")));
        }
        let column_versions = if sparse.is_full() {
            None
        } else {
            versions
                .updated(&sparse.presence(), table.primary_key_index, version)
                .encode(table.primary_key_index, version)
        };
        if let Some(t) = self.blobs(i, table, op, &values)? {
            return Ok(t); // V5k
        }
        if let Some(record) = self.row_validator(i, table, op, Some(&values), Some(&stored_values))
        {
            return Ok(Terminal(record)); // V5l
        }
        let row = StoredRow {
            row_id: op.row_id.clone(),
            server_version: version,
            scopes: stored.scopes,
            payload,
            column_versions,
        };
        let before = (stored_values.as_slice(), stored.server_version);
        self.record_evidence(i, table, op, Some((&values, version)), Some(before));
        self.store(i, table, row) // V5m
    }

    /// V5i: a full payload without a merge is its bytes after the presence
    /// bitmap; anything else a fresh full-row encoding.
    fn sparse_payload(
        &self,
        table: &CompiledTable,
        op: &Operation,
        values: &[RowValue],
        sparse: &Sparse,
        merged: bool,
    ) -> Result<Vec<u8>, Abort> {
        let pushed = op.payload.as_deref().unwrap_or_default();
        match codec::full_payload_of_sparse(table.columns.len(), pushed) {
            Some(full) if sparse.is_full() && !merged => Ok(full.to_vec()),
            _ => codec::encode_row(table, values).map_err(Abort::internal),
        }
    }

    /// V6a–V6f: the row is absent.
    fn sparse_absent(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        sparse: Sparse,
        pushed: &[u8],
    ) -> Result<OpOutcome, Abort> {
        let tombstone = self
            .tx
            .get_tombstone_seq(&table.name, &op.row_id)
            .map_err(Abort::storage)?;
        if let Some(outcome) = self.absent_authorization(i, table, op, &sparse, tombstone)? {
            return Ok(outcome); // V6a
        }
        match (op.base_version, tombstone) {
            (Some(b), _) if b < 0 => return Ok(invalid(i, "baseVersion is negative")), // V6b
            (Some(b), _) if b > 0 => return Ok(row_missing(i)),                        // V6c
            (Some(_), _) if !sparse.is_full() => return Ok(row_missing(i)),            // V6d
            (Some(_), Some(_)) => self
                .tx
                .clear_tombstone(&table.name, &op.row_id)
                .map_err(Abort::storage)?, // V6d
            (None, Some(_)) => return Ok(row_deleted(i)),                              // V6e
            (None, None) if !sparse.is_full() => return Ok(row_missing(i)),            // V6e
            (_, None) => {}
        }
        let Some(full) = codec::full_payload_of_sparse(table.columns.len(), pushed) else {
            return Ok(row_missing(i));
        };
        let mut values = sparse.values_or_null();
        self.insert(i, table, op, &mut values, full) // V6f
    }

    /// V6a (decision D7): the payload's scopes when it carries every scope
    /// column, else the scopes of the row's delete, else none. `Some` =
    /// the terminal outcome.
    fn absent_authorization(
        &mut self,
        i: u32,
        table: &CompiledTable,
        op: &Operation,
        sparse: &Sparse,
        tombstone: Option<i64>,
    ) -> Result<Option<OpOutcome>, Abort> {
        let all_scopes = table
            .scope_patterns
            .iter()
            .all(|p| sparse.present(p.column_index));
        let scopes: Option<StoredScopes> = if all_scopes {
            match extract_scopes(table, &sparse.values_or_null()) {
                Some(scopes) => Some(scopes),
                None => return Ok(Some(forbidden(i))), // an empty scope value
            }
        } else if let Some(seq) = tombstone {
            self.tx
                .get_delete_scopes(&table.name, &op.row_id, seq)
                .map_err(Abort::storage)?
        } else {
            None
        };
        Ok(scopes
            .filter(|s| !write_authorized(table, s, self.resolved))
            .map(|_| forbidden(i)))
    }
}
