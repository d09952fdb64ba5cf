//! The Postgres [`SqlDialect`]: type names, `$n` placeholders, `format_type`
//! introspection (lower case) and the byte-ordered `"C"` key collation.

use sync_core::{ColumnType, IndexDef};
use sync_schema::{row_ordered_index_columns, Dialect, InternalRole, SqlDialect};

/// Postgres' SQL text rules for the shared crates.
#[derive(Debug, Clone, Copy, Default)]
pub struct PostgresSql;

impl SqlDialect for PostgresSql {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn sql_type(&self, column_type: ColumnType) -> &'static str {
        use ColumnType as T;
        match column_type {
            T::String | T::BlobRef => "TEXT",
            T::Integer => "BIGINT",
            T::Float => "DOUBLE PRECISION",
            T::Boolean => "BOOLEAN",
            T::Json => "JSONB",
            T::Bytes | T::Crdt => "BYTEA",
        }
    }

    fn internal_type(&self, role: InternalRole) -> &'static str {
        match role {
            InternalRole::Partition | InternalRole::RowId => "TEXT",
            InternalRole::ServerVersion => "BIGINT",
            InternalRole::Scopes => "JSONB",
            InternalRole::Payload | InternalRole::ColumnVersions => "BYTEA",
        }
    }

    fn placeholder(&self, n: usize) -> String {
        format!("${n}")
    }

    /// Key columns compare by bytes only under `COLLATE "C"`.
    fn key_collation(&self) -> Option<&'static str> {
        Some("C")
    }

    /// A non-unique index ends with `_sync_row_id`: a btree orders equal
    /// keys by their heap position, so without it an index lookup sorts
    /// every row sharing the value on each page (`docs/decisions.md`,
    /// "Index lookups in row-id order").
    fn declared_index_columns(&self, index: &IndexDef) -> Vec<String> {
        row_ordered_index_columns(index)
    }

    /// `format_type` reports lower-case names.
    fn observed_type(&self, sql_type: &str) -> String {
        sql_type.to_ascii_lowercase()
    }
}

/// URL schemes of Postgres databases.
pub const URL_SCHEMES: &[&str] = &["postgres", "postgresql"];

/// The Postgres dialect value.
pub const DIALECT: Dialect = Dialect::new(&PostgresSql);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_type_names_match() {
        assert!(DIALECT.type_matches(DIALECT.sql_type(ColumnType::Float), "double precision"));
        assert!(DIALECT.type_matches(DIALECT.sql_type(ColumnType::Json), "jsonb"));
        assert!(!DIALECT.type_matches(DIALECT.sql_type(ColumnType::Json), "json"));
    }
}
