//! Physical state of application tables through the introspection PRAGMAs
//! (`dialects.md` §9, `schema-and-migrations.md` §7.1).

use rusqlite::Connection;
use sync_core::{CompiledSchema, Result};
use sync_schema::{
    ObservedColumn, ObservedConstraint, ObservedIndex, ObservedTable, ObservedTables,
};

use crate::errors::DbResultExt;
use crate::seam;

/// Observed state of every configured table (absent ones included).
pub(crate) fn observe_schema(conn: &Connection, schema: &CompiledSchema) -> Result<ObservedTables> {
    schema
        .tables
        .iter()
        .map(|t| observe(conn, &t.name))
        .collect()
}

/// Observed state of one table: columns (`table_info`), indexes created by
/// `CREATE INDEX` (`index_list` origin `c`) and unique constraints (origin `u`).
pub(crate) fn observe(conn: &Connection, table: &str) -> Result<ObservedTable> {
    let columns = columns(conn, table)?;
    if columns.is_empty() {
        return Ok(ObservedTable::absent(table));
    }
    let mut indexes = Vec::new();
    let mut constraints = Vec::new();
    for (name, unique, origin) in index_list(conn, table)? {
        let index_columns = index_columns(conn, &name)?;
        match origin.as_str() {
            "c" => indexes.push(ObservedIndex {
                name,
                unique,
                columns: index_columns,
            }),
            "u" => constraints.push(ObservedConstraint {
                name,
                columns: index_columns,
            }),
            _ => {}
        }
    }
    Ok(ObservedTable {
        name: table.to_owned(),
        exists: true,
        columns,
        indexes,
        constraints,
    })
}

fn columns(conn: &Connection, table: &str) -> Result<Vec<ObservedColumn>> {
    let mut stmt = seam::cached(
        conn,
        "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1) ORDER BY cid",
    )
    .db()?;
    let rows = stmt
        .query_map([table], |r| {
            Ok(ObservedColumn {
                name: r.get(0)?,
                declared_type: r.get(1)?,
                not_null: r.get::<_, i64>(2)? != 0,
                primary_key_position: u32::try_from(r.get::<_, i64>(3)?).unwrap_or(0),
                collation: None,
            })
        })
        .db()?;
    rows.collect::<rusqlite::Result<_>>().db()
}

fn index_list(conn: &Connection, table: &str) -> Result<Vec<(String, bool, String)>> {
    let mut stmt = seam::cached(
        conn,
        "SELECT name, \"unique\", origin FROM pragma_index_list(?1) ORDER BY name",
    )
    .db()?;
    let rows = stmt
        .query_map([table], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? != 0, r.get(2)?))
        })
        .db()?;
    rows.collect::<rusqlite::Result<_>>().db()
}

fn index_columns(conn: &Connection, index: &str) -> Result<Vec<String>> {
    let mut stmt = seam::cached(
        conn,
        "SELECT name FROM pragma_index_info(?1) ORDER BY seqno",
    )
    .db()?;
    let rows = stmt
        .query_map([index], |r| {
            Ok(r.get::<_, Option<String>>(0)?.unwrap_or_default())
        })
        .db()?;
    rows.collect::<rusqlite::Result<_>>().db()
}
