//! Catalog introspection of application and internal tables
//! (`schema-and-migrations.md` §7.1, `dialects.md` §9): columns with their
//! `format_type`, nullability, primary-key position and collation; indexes
//! that are neither the primary key nor constraint-owned; other constraints.
//!
//! Tables are resolved with `to_regclass` of the quoted identifier, which
//! follows `search_path` exactly like unqualified queries.

use std::collections::BTreeMap;

use sync_core::Result;
use sync_schema::{
    ObservedColumn, ObservedConstraint, ObservedIndex, ObservedTable, ObservedTables,
};

use crate::pool::{col, Conn};

const EXISTS_SQL: &str = "SELECT t.name FROM unnest($1::text[]) AS t(name) \
    WHERE to_regclass(quote_ident(t.name)) IS NOT NULL";

const COLUMNS_SQL: &str = "SELECT t.name, a.attname::text, format_type(a.atttypid, a.atttypmod), \
      a.attnotnull, coalesce((SELECT k.ord FROM unnest(pk.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) \
        WHERE k.attnum = a.attnum), 0)::int4, \
      CASE WHEN a.attcollation IN (0, 100) THEN NULL \
           ELSE (SELECT c.collname::text FROM pg_collation c WHERE c.oid = a.attcollation) END \
    FROM unnest($1::text[]) AS t(name) \
    JOIN pg_attribute a ON a.attrelid = to_regclass(quote_ident(t.name)) \
      AND a.attnum > 0 AND NOT a.attisdropped \
    LEFT JOIN pg_index pk ON pk.indrelid = a.attrelid AND pk.indisprimary \
    ORDER BY t.name, a.attnum";

const INDEXES_SQL: &str = "SELECT t.name, ic.relname::text, ix.indisunique, \
      ARRAY(SELECT coalesce(a.attname::text, pg_get_indexdef(ix.indexrelid, k.ord::int4, true)) \
            FROM unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) \
            LEFT JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum \
              AND k.attnum > 0 \
            ORDER BY k.ord) \
    FROM unnest($1::text[]) AS t(name) \
    JOIN pg_index ix ON ix.indrelid = to_regclass(quote_ident(t.name)) \
    JOIN pg_class ic ON ic.oid = ix.indexrelid \
    WHERE NOT ix.indisprimary \
      AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = ix.indexrelid) \
    ORDER BY t.name, ic.relname";

const CONSTRAINTS_SQL: &str = "SELECT t.name, k.conname::text, \
      ARRAY(SELECT a.attname::text FROM unnest(k.conkey) AS n(attnum) \
            JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = n.attnum) \
    FROM unnest($1::text[]) AS t(name) \
    JOIN pg_constraint k ON k.conrelid = to_regclass(quote_ident(t.name)) AND k.contype <> 'p' \
    ORDER BY t.name, k.conname";

/// Observes `names` (absent tables are recorded as absent).
pub(crate) fn observe(conn: &mut Conn, names: &[String]) -> Result<ObservedTables> {
    let mut tables: BTreeMap<String, ObservedTable> = names
        .iter()
        .map(|n| (n.clone(), ObservedTable::absent(n.clone())))
        .collect();
    for row in conn.query(EXISTS_SQL, &[&names])? {
        let name: String = col(&row, 0)?;
        if let Some(table) = tables.get_mut(&name) {
            table.exists = true;
        }
    }
    for row in conn.query(COLUMNS_SQL, &[&names])? {
        let name: String = col(&row, 0)?;
        let position: i32 = col(&row, 4)?;
        let column = ObservedColumn {
            name: col(&row, 1)?,
            declared_type: col(&row, 2)?,
            not_null: col(&row, 3)?,
            primary_key_position: u32::try_from(position).unwrap_or(0),
            collation: col(&row, 5)?,
        };
        if let Some(table) = tables.get_mut(&name) {
            table.columns.push(column);
        }
    }
    for row in conn.query(INDEXES_SQL, &[&names])? {
        let name: String = col(&row, 0)?;
        let index = ObservedIndex {
            name: col(&row, 1)?,
            unique: col(&row, 2)?,
            columns: col(&row, 3)?,
        };
        if let Some(table) = tables.get_mut(&name) {
            table.indexes.push(index);
        }
    }
    for row in conn.query(CONSTRAINTS_SQL, &[&names])? {
        let name: String = col(&row, 0)?;
        let constraint = ObservedConstraint {
            name: col(&row, 1)?,
            columns: col(&row, 2)?,
        };
        if let Some(table) = tables.get_mut(&name) {
            table.constraints.push(constraint);
        }
    }
    Ok(names.iter().filter_map(|n| tables.remove(n)).collect())
}

/// The configured tables plus every internal table with key columns (whose
/// legacy default collations the upgrade converts).
pub(crate) fn names_with_internal(configured: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut names: Vec<String> = configured.into_iter().collect();
    for (table, _) in sync_schema::INTERNAL_KEY_COLUMNS {
        if !names.iter().any(|n| n == table) {
            names.push((*table).to_owned());
        }
    }
    names
}
