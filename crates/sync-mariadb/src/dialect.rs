//! The MariaDB [`SqlDialect`]: type names (`docs/design/mariadb.md` §3),
//! `?` placeholders, backtick quoting, `COLUMN_TYPE` introspection and
//! InnoDB table options.

use sync_core::{ColumnType, CompiledTable};
use sync_schema::{standard_create_table_sql, Dialect, InternalRole, SqlDialect};

/// Table options every table of the dialect carries: InnoDB and the exact
/// (no-pad, binary) `utf8mb4` collation, never the database's default.
pub(crate) const TABLE_OPTIONS: &str =
    "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin";

/// MariaDB's SQL text rules for the shared crates.
#[derive(Debug, Clone, Copy, Default)]
pub struct MariadbSql;

impl SqlDialect for MariadbSql {
    fn name(&self) -> &'static str {
        "mariadb"
    }

    fn sql_type(&self, column_type: ColumnType) -> &'static str {
        use ColumnType as T;
        match column_type {
            T::String | T::BlobRef | T::Json => "LONGTEXT",
            T::Integer => "BIGINT",
            T::Float => "DOUBLE",
            T::Boolean => "BOOLEAN",
            T::Bytes | T::Crdt => "LONGBLOB",
        }
    }

    fn internal_type(&self, role: InternalRole) -> &'static str {
        match role {
            InternalRole::Partition => "VARBINARY(255)",
            InternalRole::RowId => "VARBINARY(1024)",
            InternalRole::ServerVersion => "BIGINT",
            InternalRole::Scopes => "LONGTEXT",
            InternalRole::Payload => "LONGBLOB",
        }
    }

    fn placeholder(&self, _n: usize) -> String {
        "?".to_owned()
    }

    /// `` `name` `` with every embedded backtick doubled (valid under every
    /// `sql_mode`).
    fn quote_ident(&self, name: &str) -> String {
        quote_ident(name)
    }

    /// `information_schema.COLUMNS.COLUMN_TYPE` spells `BIGINT` as
    /// `bigint(20)` and `BOOLEAN` as `tinyint(1)`, every name in lower case.
    fn observed_type(&self, sql_type: &str) -> String {
        let lower = sql_type.trim().to_ascii_lowercase();
        match lower.as_str() {
            "bigint" => "bigint(20)".to_owned(),
            "boolean" | "bool" => "tinyint(1)".to_owned(),
            _ => lower,
        }
    }

    fn type_matches(&self, expected_sql_type: &str, observed: &str) -> bool {
        self.observed_type(expected_sql_type) == self.observed_type(observed)
    }

    /// The standard definitions with the InnoDB / `utf8mb4_nopad_bin`
    /// table options.
    fn create_table_sql(&self, table: &CompiledTable) -> String {
        format!("{} {TABLE_OPTIONS}", standard_create_table_sql(self, table))
    }
}

/// `` `name` `` with every embedded backtick doubled.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// URL schemes of MariaDB databases. `mysql://` is accepted because it is
/// the protocol's customary scheme; the server must still be MariaDB.
pub const URL_SCHEMES: &[&str] = &["mariadb", "mysql"];

/// The MariaDB dialect value.
pub const DIALECT: Dialect = Dialect::new(&MariadbSql);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_type_names_match_what_information_schema_reports() {
        let cases = [
            (ColumnType::Integer, "bigint(20)"),
            (ColumnType::Boolean, "tinyint(1)"),
            (ColumnType::Float, "double"),
            (ColumnType::String, "longtext"),
            (ColumnType::Json, "longtext"),
            (ColumnType::Bytes, "longblob"),
        ];
        for (column_type, observed) in cases {
            assert!(
                DIALECT.type_matches(DIALECT.sql_type(column_type), observed),
                "{column_type:?} vs {observed}"
            );
        }
        assert!(!DIALECT.type_matches("BIGINT", "int(11)"));
        assert!(!DIALECT.type_matches("LONGTEXT", "varchar(255)"));
    }

    #[test]
    fn identifiers_are_backtick_quoted() {
        assert_eq!(DIALECT.quote_ident("partition"), "`partition`");
        assert_eq!(DIALECT.quote_ident("a`b"), "`a``b`");
        assert_eq!(DIALECT.placeholder(3), "?");
    }
}
