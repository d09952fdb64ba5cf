//! What every dialect can store, checked before any storage call
//! (`engine.md` E-097): a row id within [`MAX_ROW_ID_BYTES`] without U+0000,
//! text values without U+0000, scope values within
//! [`MAX_SCOPE_VALUE_BYTES`], blob ids within [`MAX_BLOB_ID_BYTES`] without
//! U+0000. Postgres refuses
//! U+0000 in `text` and keys wider than its B-tree entries with a backend
//! error that would abort the round, MariaDB refuses keys longer than its
//! columns (`docs/design/mariadb.md` §4) the same way; SQLite stores all of
//! them. Checking here gives
//! the same commit-level `sync.invalid_request` on every dialect.
//!
//! A `\u0000` escape inside a `json` value is not refused: the JSON text
//! holds no U+0000 character, and where `jsonb` cannot represent it the
//! dialect stores no projection value
//! (`sync_core::codec::json_projection_is_representable_in_jsonb`).

use sync_core::limits::{MAX_BLOB_ID_BYTES, MAX_ROW_ID_BYTES, MAX_SCOPE_VALUE_BYTES};
use sync_core::{CompiledTable, RowValue};

use super::row_values::blob_ids;
use crate::scopes::render;

const NUL: char = '\0';

/// Why an operation's `rowId` cannot be stored, if it cannot.
pub(crate) fn row_id_problem(row_id: &str) -> Option<&'static str> {
    if row_id.contains(NUL) {
        return Some("rowId holds U+0000");
    }
    if row_id.len() > MAX_ROW_ID_BYTES {
        return Some("rowId is longer than any dialect can index");
    }
    None
}

/// Why a decoded row cannot be stored, if it cannot.
pub(crate) fn values_problem(table: &CompiledTable, values: &[RowValue]) -> Option<&'static str> {
    let text_with_nul = values.iter().any(|v| match v {
        RowValue::String(s) | RowValue::Json(s) | RowValue::BlobRef(s) => s.contains(NUL),
        _ => false,
    });
    if text_with_nul {
        return Some("a text value holds U+0000");
    }
    let long_scope = table.scope_patterns.iter().any(|p| {
        values
            .get(p.column_index)
            .and_then(render)
            .is_some_and(|v| v.len() > MAX_SCOPE_VALUE_BYTES)
    });
    if long_scope {
        return Some("a scope value is longer than any dialect can index");
    }
    let ids = blob_ids(table, values);
    if ids.iter().any(|id| id.contains(NUL)) {
        return Some("a blob id holds U+0000");
    }
    if ids.iter().any(|id| id.len() > MAX_BLOB_ID_BYTES) {
        return Some("a blob id is longer than any dialect can index");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_ids_are_bounded_and_nul_free() {
        assert_eq!(row_id_problem("t1"), None);
        assert_eq!(row_id_problem(&"x".repeat(MAX_ROW_ID_BYTES)), None);
        assert!(row_id_problem(&"x".repeat(MAX_ROW_ID_BYTES + 1)).is_some());
        // bytes, not characters: 342 four-byte characters are 1 368 bytes
        assert!(row_id_problem(&"😀".repeat(342)).is_some());
        assert!(row_id_problem("t\u{0}1").is_some());
    }
}
