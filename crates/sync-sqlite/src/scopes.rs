//! The inverted scope index of current rows (`tables.md` §3.7,
//! `dialects.md` §6.3): exact primary-key deletes of a row's old entries,
//! inserts of its new ones.

use rusqlite::Connection;
use sync_core::Result;

use crate::errors::DbResultExt;
use crate::seam;

/// Deletes exactly the entries of the old scope map (bound as its JSON
/// text): one primary-key `SEARCH` per old variable, no range scan.
pub const DELETE_ROW_SCOPES_EXACT: &str = "DELETE FROM sync_row_scopes \
WHERE partition = ?1 AND tbl = ?2 AND row_id = ?3 \
AND (var, value) IN (SELECT key, value FROM json_each(?4))";

/// Inserts one entry per variable of the new scope map (bound as JSON text).
const INSERT_ROW_SCOPES: &str =
    "INSERT OR IGNORE INTO sync_row_scopes (partition, tbl, var, value, row_id) \
SELECT ?1, ?2, key, value, ?3 FROM json_each(?4)";

/// Removes the index entries of the old scopes JSON of one row.
pub(crate) fn delete_entries(
    conn: &Connection,
    partition: &str,
    table: &str,
    row_id: &str,
    old_scopes_json: &str,
) -> Result<()> {
    if old_scopes_json.is_empty() || old_scopes_json == "{}" {
        return Ok(());
    }
    seam::cached(conn, DELETE_ROW_SCOPES_EXACT)
        .db()?
        .execute((partition, table, row_id, old_scopes_json))
        .db()?;
    Ok(())
}

/// Adds the index entries of the new scopes JSON of one row.
pub(crate) fn insert_entries(
    conn: &Connection,
    partition: &str,
    table: &str,
    row_id: &str,
    new_scopes_json: &str,
) -> Result<()> {
    if new_scopes_json == "{}" {
        return Ok(());
    }
    seam::cached(conn, INSERT_ROW_SCOPES)
        .db()?
        .execute((partition, table, row_id, new_scopes_json))
        .db()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_with_one_entry() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        crate::bootstrap::run(&conn).unwrap();
        insert_entries(&conn, "p", "t", "r1", r#"{"project_id":"p1"}"#).unwrap();
        conn
    }

    fn entries(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM sync_row_scopes", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn old_scopes_that_are_empty_or_blank_delete_nothing_and_do_not_fail() {
        let conn = index_with_one_entry();
        // A blank text (written by another writer) is not JSON: it is
        // skipped, not handed to `json_each`.
        delete_entries(&conn, "p", "t", "r1", "").unwrap();
        delete_entries(&conn, "p", "t", "r1", "{}").unwrap();
        assert_eq!(entries(&conn), 1);
        delete_entries(&conn, "p", "t", "r1", r#"{"project_id":"p1"}"#).unwrap();
        assert_eq!(entries(&conn), 0);
    }
}
