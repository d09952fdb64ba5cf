//! The SQLite [`SqlDialect`]: type names, placeholders, and non-unique
//! declared indexes that end with the row id; every other DDL text is the
//! standard body the trait provides.

use sync_core::{ColumnType, IndexDef};
use sync_schema::{row_ordered_index_columns, Dialect, InternalRole, SqlDialect};

/// SQLite's SQL text rules for the shared crates.
#[derive(Debug, Clone, Copy, Default)]
pub struct SqliteSql;

impl SqlDialect for SqliteSql {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn sql_type(&self, column_type: ColumnType) -> &'static str {
        use ColumnType as T;
        match column_type {
            T::String | T::BlobRef | T::Json => "TEXT",
            T::Integer | T::Boolean => "INTEGER",
            T::Float => "REAL",
            T::Bytes | T::Crdt => "BLOB",
        }
    }

    fn internal_type(&self, role: InternalRole) -> &'static str {
        match role {
            InternalRole::Partition | InternalRole::RowId | InternalRole::Scopes => "TEXT",
            InternalRole::ServerVersion => "INTEGER",
            InternalRole::Payload | InternalRole::ColumnVersions => "BLOB",
        }
    }

    /// `?` (parameters are bound in order).
    fn placeholder(&self, _n: usize) -> String {
        "?".to_owned()
    }

    /// A non-unique index ends with `_sync_row_id`: application tables are
    /// rowid tables, whose indexes order equal keys by rowid, so without it
    /// an index lookup either sorts the value's rows or walks the primary
    /// key past every row of other values (`docs/decisions.md`, "Index
    /// lookups in row-id order").
    fn declared_index_columns(&self, index: &IndexDef) -> Vec<String> {
        row_ordered_index_columns(index)
    }
}

/// URL schemes of SQLite databases (`sqlite:PATH`).
pub const URL_SCHEMES: &[&str] = &["sqlite"];

/// The SQLite dialect value.
pub const DIALECT: Dialect = Dialect::new(&SqliteSql);
