//! DDL text for application tables and their declared indexes
//! (`tables.md` §5 and §5.1): the entry points shared code calls (each
//! asks the [`Dialect`]) and the standard bodies a [`SqlDialect`] inherits.
//! Identifiers are quoted by [`SqlDialect::quote_ident`].

use sync_core::{CompiledColumn, CompiledTable, IndexDef};

use crate::dialect::{Dialect, SqlDialect, INTERNAL_COLUMNS, PARTITION_COLUMN};
use crate::index_name::physical_index_name;

/// `"name"` with every embedded `"` doubled.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `CREATE TABLE IF NOT EXISTS "<t>" (<defs>, PRIMARY KEY ("_sync_partition", "_sync_row_id"))`
/// through [`SqlDialect::create_table_sql`].
pub fn create_table_sql(table: &CompiledTable, dialect: Dialect) -> String {
    dialect.create_table_sql(table)
}

/// The default body of [`SqlDialect::create_table_sql`]:
/// `CREATE TABLE IF NOT EXISTS "<t>" (<defs>, PRIMARY KEY ("_sync_partition", "_sync_row_id"))`.
///
/// Definitions: the two key columns, the application columns in schema order
/// when the table is materialized (`NOT NULL` iff not nullable), then
/// `_sync_server_version`, `_sync_scopes`, `_sync_payload` and the nullable
/// `_sync_column_versions`. When the dialect
/// has a [`SqlDialect::key_collation`] the key columns read
/// `<type> COLLATE "<collation>" NOT NULL`.
pub fn standard_create_table_sql<D: SqlDialect + ?Sized>(d: &D, table: &CompiledTable) -> String {
    let internal = |position: usize| {
        let column = &INTERNAL_COLUMNS[position];
        let collate = match d.key_collation() {
            Some(collation) if column.is_key() => format!(" COLLATE {}", d.quote_ident(collation)),
            _ => String::new(),
        };
        let not_null = if column.nullable { "" } else { " NOT NULL" };
        format!(
            "{} {}{collate}{not_null}",
            d.quote_ident(column.name),
            d.internal_type(column.role)
        )
    };
    let mut defs = vec![internal(0), internal(1)];
    if table.materialize {
        defs.extend(table.columns.iter().map(|column| {
            let not_null = if column.nullable { "" } else { " NOT NULL" };
            format!(
                "{} {}{not_null}",
                d.quote_ident(&column.name),
                d.sql_type(column.column_type)
            )
        }));
    }
    defs.extend((2..INTERNAL_COLUMNS.len()).map(internal));
    format!(
        "CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY ({}, {}))",
        d.quote_ident(&table.name),
        defs.join(", "),
        d.quote_ident(INTERNAL_COLUMNS[0].name),
        d.quote_ident(INTERNAL_COLUMNS[1].name),
    )
}

/// `ALTER TABLE "<t>" ADD COLUMN "<column>" <type>` for a nullable internal
/// column a table written before it existed lacks (the legacy upgrade and
/// the bump add `_sync_column_versions` this way: no row is rewritten and
/// every row reads `NULL`).
pub fn add_internal_column_sql(
    table: &str,
    column: &crate::dialect::InternalColumn,
    dialect: Dialect,
) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN {} {}",
        dialect.quote_ident(table),
        dialect.quote_ident(column.name),
        dialect.internal_type(column.role)
    )
}

/// The declared index of `table` through [`SqlDialect::create_index_sql`].
pub fn create_index_sql(table: &str, index: &IndexDef, dialect: Dialect) -> String {
    dialect.create_index_sql(table, index)
}

/// Every statement creating the physical index(es) of declared index
/// `index` of `table`, through [`SqlDialect::create_index_statements`].
pub fn create_index_statements(
    table: &CompiledTable,
    index: &IndexDef,
    dialect: Dialect,
) -> Vec<String> {
    dialect.create_index_statements(table, index)
}

/// The default body of [`SqlDialect::declared_index_columns`]:
/// `_sync_partition`, then the declared columns.
pub fn standard_index_columns(index: &IndexDef) -> Vec<String> {
    std::iter::once(PARTITION_COLUMN.to_owned())
        .chain(index.columns.iter().cloned())
        .collect()
}

/// [`standard_index_columns`] with `_sync_row_id` appended to a non-unique
/// index: the shape for a database whose non-unique indexes do not order
/// equal keys by the row id (SQLite rowid tables order them by rowid,
/// Postgres by heap position), so that an index lookup reads one value's
/// rows in row-id order from one range ([`SqlDialect::declared_index_columns`]).
/// A unique index keeps the standard shape.
pub fn row_ordered_index_columns(index: &IndexDef) -> Vec<String> {
    let mut columns = standard_index_columns(index);
    if !index.unique {
        columns.push(crate::dialect::INTERNAL_COLUMNS[1].name.to_owned());
    }
    columns
}

/// The default body of [`SqlDialect::create_index_sql`]:
/// `CREATE [UNIQUE ]INDEX IF NOT EXISTS "<physical>" ON "<t>" (<columns>)`
/// with the columns of [`SqlDialect::declared_index_columns`].
pub fn standard_create_index_sql<D: SqlDialect + ?Sized>(
    d: &D,
    table: &str,
    index: &IndexDef,
) -> String {
    let columns: Vec<String> = d
        .declared_index_columns(index)
        .iter()
        .map(|c| d.quote_ident(c))
        .collect();
    format!(
        "CREATE {}INDEX IF NOT EXISTS {} ON {} ({})",
        if index.unique { "UNIQUE " } else { "" },
        d.quote_ident(&physical_index_name(&index.name)),
        d.quote_ident(table),
        columns.join(", ")
    )
}

/// Drops index `name` (a physical or legacy bare name) of `table` through
/// [`SqlDialect::drop_index_sql`].
pub fn drop_index_sql(table: &str, name: &str, dialect: Dialect) -> String {
    dialect.drop_index_sql(table, name)
}

/// Adds a nullable column through [`SqlDialect::add_column_sql`] — never `NOT NULL`.
pub fn add_column_sql(table: &str, column: &CompiledColumn, dialect: Dialect) -> String {
    dialect.add_column_sql(table, column)
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

/// Rebuilds a key column on the dialect's key collation through
/// [`SqlDialect::alter_key_collation_sql`] (data preserved;
/// `schema-and-migrations.md` §13).
pub fn alter_key_collation_sql(table: &str, column: &str, dialect: Dialect) -> String {
    dialect.alter_key_collation_sql(table, column)
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
