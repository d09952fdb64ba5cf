//! DDL text for application tables and their declared indexes
//! (`tables.md` §5 and §5.1). Every identifier is double-quoted with
//! embedded `"` doubled.

use sync_core::{CompiledColumn, CompiledTable, IndexDef};

use crate::dialect::{Dialect, INTERNAL_COLUMNS, PARTITION_COLUMN};
use crate::index_name::physical_index_name;

/// `"name"` with every embedded `"` doubled.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `CREATE TABLE IF NOT EXISTS "<t>" (<defs>, PRIMARY KEY ("_sync_partition", "_sync_row_id"))`.
///
/// Definitions: the two key columns, the application columns in schema order
/// when the table is materialized (`NOT NULL` iff not nullable), then
/// `_sync_server_version`, `_sync_scopes`, `_sync_payload`. On Postgres the
/// key columns read `TEXT COLLATE "C" NOT NULL`.
pub fn create_table_sql(table: &CompiledTable, dialect: Dialect) -> String {
    let internal = |position: usize| {
        let column = &INTERNAL_COLUMNS[position];
        let collate = if column.is_key() && dialect == Dialect::Postgres {
            " COLLATE \"C\""
        } else {
            ""
        };
        format!(
            "{} {}{collate} NOT NULL",
            quote_ident(column.name),
            column.sql_type(dialect)
        )
    };
    let mut defs = vec![internal(0), internal(1)];
    if table.materialize {
        defs.extend(table.columns.iter().map(|column| {
            let not_null = if column.nullable { "" } else { " NOT NULL" };
            format!(
                "{} {}{not_null}",
                quote_ident(&column.name),
                dialect.sql_type(column.column_type)
            )
        }));
    }
    defs.extend((2..INTERNAL_COLUMNS.len()).map(internal));
    format!(
        "CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY ({}, {}))",
        quote_ident(&table.name),
        defs.join(", "),
        quote_ident(INTERNAL_COLUMNS[0].name),
        quote_ident(INTERNAL_COLUMNS[1].name),
    )
}

/// `CREATE [UNIQUE ]INDEX IF NOT EXISTS "<physical>" ON "<t>" ("_sync_partition", "c1", …)`
/// (identical in both dialects).
pub fn create_index_sql(table: &str, index: &IndexDef) -> String {
    let columns: Vec<String> = std::iter::once(PARTITION_COLUMN)
        .chain(index.columns.iter().map(String::as_str))
        .map(quote_ident)
        .collect();
    format!(
        "CREATE {}INDEX IF NOT EXISTS {} ON {} ({})",
        if index.unique { "UNIQUE " } else { "" },
        quote_ident(&physical_index_name(&index.name)),
        quote_ident(table),
        columns.join(", ")
    )
}

/// `DROP INDEX IF EXISTS "<name>"` (a physical or legacy bare name).
pub fn drop_index_sql(name: &str) -> String {
    format!("DROP INDEX IF EXISTS {}", quote_ident(name))
}

/// `ALTER TABLE "<t>" ADD COLUMN "<c>" <type>` — never `NOT NULL`.
pub fn add_column_sql(table: &str, column: &CompiledColumn, dialect: Dialect) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN {} {}",
        quote_ident(table),
        quote_ident(&column.name),
        dialect.sql_type(column.column_type)
    )
}

/// `ALTER TABLE "<t>" DROP COLUMN "<c>"`.
pub fn drop_column_sql(table: &str, column: &str) -> String {
    format!(
        "ALTER TABLE {} DROP COLUMN {}",
        quote_ident(table),
        quote_ident(column)
    )
}

/// `DROP TABLE IF EXISTS "<t>"`.
pub fn drop_table_sql(table: &str) -> String {
    format!("DROP TABLE IF EXISTS {}", quote_ident(table))
}

/// Postgres only: `ALTER TABLE "<t>" ALTER COLUMN "<c>" TYPE text COLLATE "C"`
/// (data preserved; `schema-and-migrations.md` §13).
pub fn alter_key_collation_sql(table: &str, column: &str) -> String {
    format!(
        "ALTER TABLE {} ALTER COLUMN {} TYPE text COLLATE \"C\"",
        quote_ident(table),
        quote_ident(column)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_embedded_quotes() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_ident(""), "\"\"");
        assert_eq!(
            drop_table_sql("we\"ird"),
            "DROP TABLE IF EXISTS \"we\"\"ird\""
        );
    }
}
