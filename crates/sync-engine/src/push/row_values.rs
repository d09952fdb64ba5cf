//! Decoding payloads into named values and the CRDT / blob steps of an
//! upsert (`engine.md` §4.6, §4.7).

use sync_core::{codec, CompiledTable, RowValue};

use crate::hooks::crdt::MergerRegistry;
use crate::hooks::validators::RowValues;

/// Column name → value.
pub(crate) fn named(table: &CompiledTable, values: &[RowValue]) -> RowValues {
    table
        .columns
        .iter()
        .zip(values)
        .map(|(c, v)| (c.name.clone(), v.clone()))
        .collect()
}

/// Decodes a payload under the table's columns.
pub(crate) fn decode(table: &CompiledTable, payload: &[u8]) -> sync_core::Result<Vec<RowValue>> {
    codec::decode_row(table, payload)
}

/// Merges every non-NULL incoming CRDT value into the stored state.
/// `Ok(true)` when a value changed; `Err(())` = `sync.crdt_merge_failed`.
pub(crate) fn merge_crdts(
    table: &CompiledTable,
    mergers: &MergerRegistry,
    values: &mut [RowValue],
    stored: Option<&[RowValue]>,
) -> Result<bool, ()> {
    let mut changed = false;
    for (index, crdt_type) in &table.crdt_columns {
        let Some(RowValue::Crdt(incoming)) = values.get(*index) else {
            continue;
        };
        let merger = mergers.get(crdt_type).ok_or(())?;
        let stored_bytes = match stored.and_then(|s| s.get(*index)) {
            Some(RowValue::Crdt(bytes)) => Some(bytes.as_slice()),
            _ => None,
        };
        let merged = merger.merge(stored_bytes, incoming).map_err(|_| ())?;
        if &merged != incoming {
            changed = true;
        }
        values[*index] = RowValue::Crdt(merged);
    }
    Ok(changed)
}

/// Blob ids of the non-NULL `blob_ref` values, in column order.
pub(crate) fn blob_ids(table: &CompiledTable, values: &[RowValue]) -> Vec<String> {
    table
        .blob_ref_column_indices
        .iter()
        .filter_map(|&i| match values.get(i) {
            Some(RowValue::BlobRef(text)) => blob_id(text),
            _ => None,
        })
        .collect()
}

fn blob_id(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get("blobId")?.as_str().map(str::to_owned)
}
