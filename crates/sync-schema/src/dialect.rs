//! The dialect extension point: everything dialect-specific the shared
//! crates need to write SQL text for a database (`schema-and-migrations.md`
//! §3.3, `tables.md` §5, `dialects.md`).
//!
//! A dialect crate implements [`SqlDialect`] on a unit struct and exposes a
//! [`Dialect`] value built from it with [`Dialect::new`]. Shared code only
//! ever calls the trait; it never asks which dialect it holds.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use sync_core::{ColumnType, CompiledColumn, CompiledTable, IndexDef};

use crate::ddl;
use crate::query::{QueryRules, PORTABLE_QUERY_RULES};

/// What a dialect tells the shared crates about its SQL.
///
/// Four methods are required (name, the two type mappings, placeholders);
/// every other method has a default body that writes the SQL-standard text
/// the shared crates always wrote (double-quoted identifiers, `TEXT` keys,
/// `IF [NOT] EXISTS` DDL, introspected types compared ASCII
/// case-insensitively, no key collation). Override only what your database
/// reads differently.
pub trait SqlDialect: Send + Sync + 'static {
    /// The registry name (`--dialect`, `details.dialect`, plan headers):
    /// lower-case ASCII, unique among registered dialects.
    fn name(&self) -> &'static str;

    /// The SQL type used in DDL for an application column of this type.
    fn sql_type(&self, column_type: ColumnType) -> &'static str;

    /// The SQL type (without collation) of an internal column.
    fn internal_type(&self, role: InternalRole) -> &'static str;

    /// The positional placeholder for the `n`-th (1-based) parameter.
    fn placeholder(&self, n: usize) -> String;

    /// A quoted identifier. Default: `"name"` with every embedded `"` doubled.
    fn quote_ident(&self, name: &str) -> String {
        ddl::quote_ident(name)
    }

    /// The collation the two key columns (`_sync_partition`, `_sync_row_id`)
    /// of every table must carry explicitly so that keys compare by bytes,
    /// or `None` when the column type already compares by bytes. When
    /// `Some`, DDL writes `COLLATE "<name>"`, the physical check compares
    /// the introspected collation (reason `collation`) and the legacy
    /// upgrade rebuilds key columns still on the database default.
    /// Default `None`.
    fn key_collation(&self) -> Option<&'static str> {
        None
    }

    /// The type name introspection reports for a column created with
    /// `sql_type` (used by [`crate::ObservedTable::as_created`]). Default:
    /// the text as written.
    fn observed_type(&self, sql_type: &str) -> String {
        sql_type.to_owned()
    }

    /// Whether an introspected type name is the expected SQL type. Default:
    /// ASCII case-insensitive equality after trimming.
    fn type_matches(&self, expected_sql_type: &str, observed: &str) -> bool {
        expected_sql_type.eq_ignore_ascii_case(observed.trim())
    }

    /// `CREATE TABLE` for an application table (`tables.md` §5). Default:
    /// [`ddl::standard_create_table_sql`].
    fn create_table_sql(&self, table: &CompiledTable) -> String {
        ddl::standard_create_table_sql(self, table)
    }

    /// The key columns, in order, of the physical index of a declared
    /// index (`tables.md` §5.1). Default: `_sync_partition`, then the
    /// declared columns.
    ///
    /// `scan_rows_by_index` reads one index value in row-id order. A
    /// database whose non-unique indexes do not order equal keys by the row
    /// id (Postgres orders them by physical position, SQLite rowid tables by
    /// rowid) would sort every row
    /// sharing the value on each page; such a dialect returns
    /// [`crate::row_ordered_index_columns`] here, which appends
    /// `_sync_row_id` to non-unique indexes. The physical check
    /// accepts an index in either this shape or the default one, so
    /// databases created in the default shape keep opening; a bump rebuilds
    /// their indexes in this one. A unique index must keep the default
    /// shape (a trailing row id would make every key unique).
    fn declared_index_columns(&self, index: &IndexDef) -> Vec<String> {
        ddl::standard_index_columns(index)
    }

    /// `CREATE [UNIQUE] INDEX` for a declared index of `table` (§5.1), on
    /// [`SqlDialect::declared_index_columns`].
    fn create_index_sql(&self, table: &str, index: &IndexDef) -> String {
        ddl::standard_create_index_sql(self, table, index)
    }

    /// Every statement that creates the physical index (or indexes) of a
    /// declared index of `table`: what migration and upgrade plans run.
    /// Default: the one statement of [`SqlDialect::create_index_sql`].
    ///
    /// Override it when the statement depends on the declared columns'
    /// types, or when one declared index needs more than one physical
    /// index (for example a database that can only index a prefix of long
    /// text, and enforces uniqueness of the full values in a second,
    /// non-searchable index).
    fn create_index_statements(&self, table: &CompiledTable, index: &IndexDef) -> Vec<String> {
        vec![self.create_index_sql(&table.name, index)]
    }

    /// Drops index `name` of `table` if it exists. Default:
    /// `DROP INDEX IF EXISTS "<name>"` (index names are schema-wide there).
    fn drop_index_sql(&self, table: &str, name: &str) -> String {
        let _ = table;
        format!("DROP INDEX IF EXISTS {}", self.quote_ident(name))
    }

    /// Adds a nullable application column. Default:
    /// `ALTER TABLE "<t>" ADD COLUMN "<c>" <type>`.
    fn add_column_sql(&self, table: &str, column: &CompiledColumn) -> String {
        format!(
            "ALTER TABLE {} ADD COLUMN {} {}",
            self.quote_ident(table),
            self.quote_ident(&column.name),
            self.sql_type(column.column_type)
        )
    }

    /// Rebuilds a key column on [`SqlDialect::key_collation`] keeping its
    /// data. Only called when `key_collation` is `Some`. Default:
    /// `ALTER TABLE "<t>" ALTER COLUMN "<c>" TYPE text COLLATE "<collation>"`.
    fn alter_key_collation_sql(&self, table: &str, column: &str) -> String {
        format!(
            "ALTER TABLE {} ALTER COLUMN {} TYPE text COLLATE {}",
            self.quote_ident(table),
            self.quote_ident(column),
            self.quote_ident(self.key_collation().unwrap_or("default"))
        )
    }

    /// What the registered-query mask rejects (lexical constructs the
    /// database reads differently from the mask, system names). Default:
    /// [`PORTABLE_QUERY_RULES`], the rules every built-in dialect applies so
    /// that a registered query is accepted or refused alike everywhere. A
    /// dialect that reads more constructs specially returns a superset.
    fn query_rules(&self) -> &'static QueryRules {
        &PORTABLE_QUERY_RULES
    }
}

/// A dialect value: a cheap, copyable handle on a `'static` [`SqlDialect`].
/// Compared, hashed and printed by [`SqlDialect::name`].
#[derive(Clone, Copy)]
pub struct Dialect(&'static dyn SqlDialect);

impl Dialect {
    /// Wraps a dialect implementation (usable in `const`/`static` items).
    pub const fn new(dialect: &'static dyn SqlDialect) -> Self {
        Self(dialect)
    }

    /// The registry name ([`SqlDialect::name`]).
    pub fn as_str(self) -> &'static str {
        self.0.name()
    }

    /// The implementation.
    pub fn sql(self) -> &'static dyn SqlDialect {
        self.0
    }
}

impl Deref for Dialect {
    type Target = dyn SqlDialect;
    fn deref(&self) -> &Self::Target {
        self.0
    }
}

impl fmt::Debug for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dialect({})", self.as_str())
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Dialect {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Dialect {}

impl Hash for Dialect {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

/// What an internal column holds; a dialect maps it to a type with
/// [`SqlDialect::internal_type`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InternalRole {
    /// `_sync_partition`: text key, byte-ordered.
    Partition,
    /// `_sync_row_id`: text key, byte-ordered.
    RowId,
    /// `_sync_server_version`: 64-bit integer.
    ServerVersion,
    /// `_sync_scopes`: JSON object text.
    Scopes,
    /// `_sync_payload`: bytes.
    Payload,
    /// `_sync_column_versions`: bytes, nullable (the per-column versions of
    /// wire version 3, `sync_core::column_versions`).
    ColumnVersions,
}

/// One internal column of every application table (`tables.md` §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InternalColumn {
    /// Column name.
    pub name: &'static str,
    /// What it holds.
    pub role: InternalRole,
    /// Position in the primary key (1-based), 0 when not a key column.
    pub primary_key_position: u32,
    /// Whether the column is declared without `NOT NULL`.
    pub nullable: bool,
}

impl InternalColumn {
    /// The SQL type in `dialect`.
    pub fn sql_type(&self, dialect: Dialect) -> &'static str {
        dialect.internal_type(self.role)
    }

    /// Whether this is one of the two key columns (they carry
    /// [`SqlDialect::key_collation`] when the dialect has one).
    pub fn is_key(&self) -> bool {
        self.primary_key_position > 0
    }
}

/// `_sync_partition`.
pub(crate) const PARTITION_COLUMN: &str = "_sync_partition";

/// `_sync_column_versions`.
pub const COLUMN_VERSIONS_COLUMN: &str = "_sync_column_versions";

/// The six internal columns: the two key columns first, the four trailing
/// columns after the projection (`tables.md` §5), the last of them
/// `_sync_column_versions`, the only nullable one (`docs/design/wire-v3.md`
/// §3.1).
pub const INTERNAL_COLUMNS: [InternalColumn; 6] = [
    InternalColumn {
        name: PARTITION_COLUMN,
        role: InternalRole::Partition,
        primary_key_position: 1,
        nullable: false,
    },
    InternalColumn {
        name: "_sync_row_id",
        role: InternalRole::RowId,
        primary_key_position: 2,
        nullable: false,
    },
    InternalColumn {
        name: "_sync_server_version",
        role: InternalRole::ServerVersion,
        primary_key_position: 0,
        nullable: false,
    },
    InternalColumn {
        name: "_sync_scopes",
        role: InternalRole::Scopes,
        primary_key_position: 0,
        nullable: false,
    },
    InternalColumn {
        name: "_sync_payload",
        role: InternalRole::Payload,
        primary_key_position: 0,
        nullable: false,
    },
    InternalColumn {
        name: COLUMN_VERSIONS_COLUMN,
        role: InternalRole::ColumnVersions,
        primary_key_position: 0,
        nullable: true,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    struct Toy;
    impl SqlDialect for Toy {
        fn name(&self) -> &'static str {
            "toy"
        }
        fn sql_type(&self, _: ColumnType) -> &'static str {
            "ANY"
        }
        fn internal_type(&self, _: InternalRole) -> &'static str {
            "ANY"
        }
        fn placeholder(&self, n: usize) -> String {
            format!(":{n}")
        }
    }
    const TOY: Dialect = Dialect::new(&Toy);

    #[test]
    fn handles_compare_and_print_by_name() {
        assert_eq!(TOY, Dialect::new(&Toy));
        assert_eq!(TOY.to_string(), "toy");
        assert_eq!(format!("{TOY:?}"), "Dialect(toy)");
        assert_eq!(TOY.placeholder(2), ":2");
    }

    #[test]
    fn default_type_match_is_case_insensitive_and_trimmed() {
        assert!(TOY.type_matches("DOUBLE PRECISION", " double precision "));
        assert!(!TOY.type_matches("JSONB", "json"));
    }

    #[test]
    fn default_drop_index_and_collation_text() {
        assert_eq!(
            TOY.drop_index_sql("t", "i\"x"),
            "DROP INDEX IF EXISTS \"i\"\"x\""
        );
        assert_eq!(TOY.key_collation(), None);
    }

    #[test]
    fn a_declared_index_defaults_to_the_partition_then_its_columns() {
        let index = sync_core::IndexDef {
            name: "by_owner".into(),
            columns: vec!["owner".into(), "title".into()],
            unique: false,
        };
        assert_eq!(
            Toy.declared_index_columns(&index),
            ["_sync_partition", "owner", "title"]
        );
        let sql = Toy.create_index_sql("tasks", &index);
        assert!(
            sql.ends_with(r#"ON "tasks" ("_sync_partition", "owner", "title")"#),
            "{sql}"
        );
    }
}
