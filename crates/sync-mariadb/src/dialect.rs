//! The MariaDB [`SqlDialect`]: type names (`docs/design/mariadb.md` §3),
//! `?` placeholders, backtick quoting, `COLUMN_TYPE` introspection and
//! InnoDB table options.

use sync_core::{ColumnType, CompiledTable, IndexDef};
use sync_schema::{
    physical_index_name, standard_create_table_sql, Construct, Dialect, InternalRole, QueryRules,
    SqlDialect, PHYSICAL_INDEX_PREFIX, PORTABLE_QUERY_RULES,
};

/// Table options every table of the dialect carries: InnoDB and the exact
/// (no-pad, binary) `utf8mb4` collation, never the database's default.
pub(crate) const TABLE_OPTIONS: &str =
    "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin";

/// InnoDB's limit on the declared key parts of one index, in bytes.
const KEY_BUDGET: usize = 3072;
/// Bytes of `_sync_partition` in every index.
const PARTITION_KEY_BYTES: usize = 255;
/// Bytes charged per fixed-width key part (a `BIGINT` or `DOUBLE`, rounded up).
const FIXED_KEY_BYTES: usize = 9;
/// Most bytes one variable-width key part's prefix takes.
const PREFIX_CAP_BYTES: usize = 1020;
/// Bytes per character of a `utf8mb4` prefix.
const UTF8MB4_BYTES: usize = 4;
/// The name prefix of the uniqueness index of a declared unique index
/// over variable-width columns (same length as [`PHYSICAL_INDEX_PREFIX`]).
pub(crate) const UNIQUENESS_INDEX_PREFIX: &str = "sync_ux_";

/// Constructs MariaDB reads differently from the registered-query mask, on
/// top of the portable ones (`docs/design/mariadb.md` §11.2).
const CONSTRUCTS: &[Construct] = &[
    Construct::DollarQuote,
    Construct::EscapeString,
    Construct::UnicodeEscape,
    Construct::NestedComment,
    Construct::BackslashInLiteral,
    Construct::ExecutableComment,
    Construct::HashComment,
    Construct::DashDashWithoutSpace,
    Construct::SessionVariable,
];

/// MariaDB's schemas and the functions that take session locks, read
/// server files, stall a pooled connection or run commands.
const SYSTEM_NAMES: &[&str] = &[
    "mysql",
    "performance_schema",
    "sys",
    "load_file",
    "get_lock",
    "release_lock",
    "release_all_locks",
    "is_free_lock",
    "is_used_lock",
    "sleep",
    "benchmark",
    "master_pos_wait",
    "master_gtid_wait",
    "sys_exec",
    "sys_eval",
];

/// The portable rules plus MariaDB's constructs and names. Built once
/// (the portable lists are extended, never shrunk).
fn rules() -> &'static QueryRules {
    static RULES: std::sync::OnceLock<QueryRules> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        let names: Vec<&'static str> = PORTABLE_QUERY_RULES
            .system_names
            .iter()
            .chain(SYSTEM_NAMES)
            .copied()
            .collect();
        QueryRules {
            constructs: CONSTRUCTS,
            system_prefixes: PORTABLE_QUERY_RULES.system_prefixes,
            system_names: Vec::leak(names),
        }
    })
}

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
            InternalRole::Payload | InternalRole::ColumnVersions => "LONGBLOB",
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

    /// A declared index over fixed-width columns only is one index. One
    /// with a variable-width column (text, JSON, bytes) is a lookup index
    /// over prefixes of those columns (`sync_ix_…`, never unique: a unique
    /// prefix would refuse values that only share the prefix) and, when
    /// declared unique, a uniqueness index over the full values
    /// (`sync_ux_…`, a long unique key the optimizer never searches)
    /// (`docs/design/mariadb.md` §6.2).
    fn create_index_statements(&self, table: &CompiledTable, index: &IndexDef) -> Vec<String> {
        let types: Vec<Option<ColumnType>> = index
            .columns
            .iter()
            .map(|name| table.column(name).map(|c| c.column_type))
            .collect();
        let variable = types
            .iter()
            .filter(|t| t.is_some_and(is_variable_width))
            .count();
        let physical = physical_index_name(&index.name);
        let quoted_table = quote_ident(&table.name);
        let partition = quote_ident("_sync_partition");
        if variable == 0 {
            let columns: Vec<String> = index.columns.iter().map(|c| quote_ident(c)).collect();
            return vec![format!(
                "CREATE {}INDEX IF NOT EXISTS {} ON {quoted_table} ({partition}, {})",
                if index.unique { "UNIQUE " } else { "" },
                quote_ident(&physical),
                columns.join(", ")
            )];
        }
        let fixed = index.columns.len() - variable;
        let share = ((KEY_BUDGET - PARTITION_KEY_BYTES - FIXED_KEY_BYTES * fixed) / variable)
            .min(PREFIX_CAP_BYTES);
        let parts: Vec<String> = index
            .columns
            .iter()
            .zip(&types)
            .map(|(name, column_type)| match column_type {
                Some(t) if is_variable_width(*t) => {
                    let prefix = if is_text(*t) {
                        share / UTF8MB4_BYTES
                    } else {
                        share
                    };
                    format!("{}({prefix})", quote_ident(name))
                }
                _ => quote_ident(name),
            })
            .collect();
        let mut statements = vec![format!(
            "CREATE INDEX IF NOT EXISTS {} ON {quoted_table} ({partition}, {})",
            quote_ident(&physical),
            parts.join(", ")
        )];
        if index.unique {
            let full: Vec<String> = index.columns.iter().map(|c| quote_ident(c)).collect();
            statements.push(format!(
                "CREATE UNIQUE INDEX IF NOT EXISTS {} ON {quoted_table} ({partition}, {})",
                quote_ident(&uniqueness_index_name(&physical)),
                full.join(", ")
            ));
        }
        statements
    }

    fn query_rules(&self) -> &'static QueryRules {
        rules()
    }

    /// Index names are per table in MariaDB. Dropping a declared index's
    /// physical name drops its uniqueness index too, in one statement.
    fn drop_index_sql(&self, table: &str, name: &str) -> String {
        let mut sql = format!(
            "ALTER TABLE {} DROP INDEX IF EXISTS {}",
            quote_ident(table),
            quote_ident(name)
        );
        if name.starts_with(PHYSICAL_INDEX_PREFIX) {
            sql.push_str(&format!(
                ", DROP INDEX IF EXISTS {}",
                quote_ident(&uniqueness_index_name(name))
            ));
        }
        sql
    }

    /// `ALTER TABLE … ADD COLUMN IF NOT EXISTS` (idempotent: a migration
    /// resumed after a crash runs it again).
    fn add_column_sql(&self, table: &str, column: &sync_core::CompiledColumn) -> String {
        format!(
            "ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {} NULL",
            quote_ident(table),
            quote_ident(&column.name),
            self.sql_type(column.column_type)
        )
    }
}

/// Whether a column of this type is stored variable-width (an index needs
/// a prefix of it).
fn is_variable_width(column_type: ColumnType) -> bool {
    !matches!(
        column_type,
        ColumnType::Integer | ColumnType::Float | ColumnType::Boolean
    )
}

/// Whether a variable-width column is text (its prefix counts characters).
fn is_text(column_type: ColumnType) -> bool {
    matches!(
        column_type,
        ColumnType::String | ColumnType::Json | ColumnType::BlobRef
    )
}

/// `sync_ux_…` for the physical name `sync_ix_…` (same length, same hash
/// fallback).
pub(crate) fn uniqueness_index_name(physical: &str) -> String {
    match physical.strip_prefix(PHYSICAL_INDEX_PREFIX) {
        Some(rest) => format!("{UNIQUENESS_INDEX_PREFIX}{rest}"),
        None => format!("{UNIQUENESS_INDEX_PREFIX}{physical}"),
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
