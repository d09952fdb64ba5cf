//! Physical state of application tables through `information_schema`
//! (`docs/design/mariadb.md` §16). A declared unique index over
//! variable-width columns is two physical indexes (`sync_ix_…` and
//! `sync_ux_…`); they are reported as one logical index, unique iff the
//! uniqueness index exists over the same columns.

use std::collections::BTreeMap;

use sync_core::{CompiledSchema, Result};
use sync_schema::{
    ObservedColumn, ObservedIndex, ObservedTable, ObservedTables, PHYSICAL_INDEX_PREFIX,
};

use crate::dialect::{quote_ident, uniqueness_index_name, UNIQUENESS_INDEX_PREFIX};
use crate::pool::Conn;

/// The configured tables' physical state.
pub(crate) fn observe_schema(conn: &mut Conn, schema: &CompiledSchema) -> Result<ObservedTables> {
    schema
        .tables
        .iter()
        .map(|t| observe(conn, &t.name))
        .collect()
}

/// One table's physical state (absent when it has no columns).
pub(crate) fn observe(conn: &mut Conn, table: &str) -> Result<ObservedTable> {
    type RawColumn = (String, String, String, Option<String>);
    let raw: Vec<RawColumn> = conn.rows(
        "SELECT CAST(COLUMN_NAME AS CHAR), CAST(COLUMN_TYPE AS CHAR), \
         CAST(IS_NULLABLE AS CHAR), CAST(COLLATION_NAME AS CHAR) \
         FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? \
         ORDER BY ORDINAL_POSITION",
        (table,),
    )?;
    if raw.is_empty() {
        return Ok(ObservedTable::absent(table));
    }
    type RawIndex = (String, i64, String);
    let stats: Vec<RawIndex> = conn.rows(
        "SELECT CAST(INDEX_NAME AS CHAR), NON_UNIQUE, CAST(COLUMN_NAME AS CHAR) \
         FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? \
         ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        (table,),
    )?;
    let mut primary: Vec<String> = Vec::new();
    let mut grouped: BTreeMap<String, ObservedIndex> = BTreeMap::new();
    for (name, non_unique, column) in stats {
        if name == "PRIMARY" {
            primary.push(column);
            continue;
        }
        grouped
            .entry(name.clone())
            .or_insert_with(|| ObservedIndex {
                name,
                unique: non_unique == 0,
                columns: Vec::new(),
            })
            .columns
            .push(column);
    }
    let columns = raw
        .into_iter()
        .map(|(name, column_type, nullable, collation)| ObservedColumn {
            primary_key_position: primary
                .iter()
                .position(|c| *c == name)
                .map_or(0, |p| p as u32 + 1),
            name,
            declared_type: column_type,
            not_null: nullable == "NO",
            collation,
        })
        .collect();
    Ok(ObservedTable {
        name: table.to_owned(),
        exists: true,
        columns,
        indexes: fold_pairs(grouped),
        constraints: Vec::new(),
    })
}

/// Folds each `sync_ux_…` into its `sync_ix_…` (the pair is one logical
/// index, unique iff both have the same columns).
fn fold_pairs(mut grouped: BTreeMap<String, ObservedIndex>) -> Vec<ObservedIndex> {
    let lookups: Vec<String> = grouped
        .keys()
        .filter(|name| name.starts_with(PHYSICAL_INDEX_PREFIX))
        .cloned()
        .collect();
    for lookup in lookups {
        let pair = uniqueness_index_name(&lookup);
        let same_columns = match (grouped.get(&lookup), grouped.get(&pair)) {
            (Some(ix), Some(ux)) => ux.unique && ux.columns == ix.columns,
            _ => continue,
        };
        if let Some(ix) = grouped.get_mut(&lookup) {
            ix.unique = same_columns;
        }
        if same_columns {
            grouped.remove(&pair);
        }
    }
    debug_assert!(UNIQUENESS_INDEX_PREFIX.len() == PHYSICAL_INDEX_PREFIX.len());
    grouped.into_values().collect()
}

impl sync_schema::ObserveTables for crate::MariadbStorage {
    /// Read-only introspection of the named application tables (absent
    /// ones recorded as absent), exactly as `ensure_schema` observes them,
    /// in one read-only snapshot. The internal tables need no observation
    /// here: MariaDB has no legacy shape that inspects them.
    fn observe_tables(&self, tables: &[String]) -> Result<ObservedTables> {
        self.with_read(|conn| tables.iter().map(|t| observe(conn, t)).collect())
    }

    /// `COUNT(*)` of the table when the catalog lists it in the storage's
    /// database, else 0. The name is bound to find the table and only then
    /// quoted into the count.
    fn count_table_rows(&self, table: &str) -> Result<Option<u64>> {
        self.with_read(|conn| {
            let found: Option<i64> = conn.first(
                "SELECT 1 FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
                (table,),
            )?;
            if found.is_none() {
                return Ok(Some(0));
            }
            let sql = format!("SELECT COUNT(*) FROM {}", quote_ident(table));
            let count: Option<i64> = conn.first(&sql, ())?;
            Ok(Some(count.map_or(0, |c| u64::try_from(c).unwrap_or(0))))
        })
    }
}
