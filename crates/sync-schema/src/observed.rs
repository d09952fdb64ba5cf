//! The observed physical state of tables, filled by a dialect through
//! introspection inside the migration transaction
//! (`schema-and-migrations.md` §7.1, `dialects.md` §9).

use sync_core::CompiledTable;

use crate::dialect::{Dialect, INTERNAL_COLUMNS};
use crate::index_name::physical_index_name;

/// One physical column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedColumn {
    /// Column name.
    pub name: String,
    /// Declared type: SQLite `PRAGMA table_info.type`, Postgres `format_type`.
    pub declared_type: String,
    /// Whether the column is `NOT NULL`.
    pub not_null: bool,
    /// 1-based position in the primary key, 0 when not a key column.
    pub primary_key_position: u32,
    /// Postgres: `None` for the database default collation (or a
    /// non-collatable type), else the collation name (`C`, `POSIX`, …).
    /// SQLite: always `None` (not checked).
    pub collation: Option<String>,
}

impl ObservedColumn {
    /// A nullable, non-key column of the given type without collation.
    pub fn new(name: impl Into<String>, declared_type: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            declared_type: declared_type.into(),
            not_null: false,
            primary_key_position: 0,
            collation: None,
        }
    }
}

/// One physical index that is neither the primary key nor owned by a
/// constraint (SQLite `origin = 'c'`; Postgres not `indisprimary` and no
/// `pg_constraint.conindid`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedIndex {
    /// Index name.
    pub name: String,
    /// Whether it is unique.
    pub unique: bool,
    /// Key columns in order.
    pub columns: Vec<String>,
}

/// One table constraint other than the primary key (unique, check, foreign
/// key, exclusion), with the columns it depends on. Used by the §7.2 check
/// that refuses to drop a projection column another object depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedConstraint {
    /// Constraint name.
    pub name: String,
    /// Columns the constraint references.
    pub columns: Vec<String>,
}

/// The observed state of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedTable {
    /// Table name.
    pub name: String,
    /// Whether the table exists; when false the other fields are empty.
    pub exists: bool,
    /// Columns in physical order.
    pub columns: Vec<ObservedColumn>,
    /// Non-primary-key, non-constraint indexes.
    pub indexes: Vec<ObservedIndex>,
    /// Constraints other than the primary key.
    pub constraints: Vec<ObservedConstraint>,
}

impl ObservedTable {
    /// A table that does not exist.
    pub fn absent(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            exists: false,
            columns: Vec::new(),
            indexes: Vec::new(),
            constraints: Vec::new(),
        }
    }

    /// An existing table with the given columns and no indexes.
    pub fn with_columns(name: impl Into<String>, columns: Vec<ObservedColumn>) -> Self {
        Self {
            exists: true,
            columns,
            ..Self::absent(name)
        }
    }

    /// The state a table has right after the DDL of [`crate::create_table_sql`]
    /// and [`crate::create_index_sql`] ran on `dialect` (introspected the way
    /// §7.1 describes). Useful as a baseline in tests and tooling.
    pub fn as_created(table: &CompiledTable, dialect: Dialect) -> Self {
        let internal = |i: usize| {
            let column = &INTERNAL_COLUMNS[i];
            ObservedColumn {
                name: column.name.to_owned(),
                declared_type: dialect.observed_type(column.sql_type(dialect)),
                not_null: !column.nullable,
                primary_key_position: column.primary_key_position,
                collation: dialect
                    .key_collation()
                    .filter(|_| column.is_key())
                    .map(str::to_owned),
            }
        };
        let mut columns = vec![internal(0), internal(1)];
        if table.materialize {
            columns.extend(table.columns.iter().map(|c| ObservedColumn {
                name: c.name.clone(),
                declared_type: dialect.observed_type(dialect.sql_type(c.column_type)),
                not_null: !c.nullable,
                primary_key_position: 0,
                collation: None,
            }));
        }
        columns.extend((2..INTERNAL_COLUMNS.len()).map(internal));
        let indexes = if table.materialize {
            table
                .indexes
                .iter()
                .map(|ix| ObservedIndex {
                    name: physical_index_name(&ix.name),
                    unique: ix.unique,
                    columns: std::iter::once(INTERNAL_COLUMNS[0].name.to_owned())
                        .chain(ix.columns.iter().cloned())
                        .collect(),
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            indexes,
            ..Self::with_columns(table.name.clone(), columns)
        }
    }

    /// The column with this exact name.
    pub fn column(&self, name: &str) -> Option<&ObservedColumn> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The index with this exact name.
    pub fn index(&self, name: &str) -> Option<&ObservedIndex> {
        self.indexes.iter().find(|i| i.name == name)
    }
}

/// The observed state of every introspected table: the configured
/// application tables and, on Postgres, the internal `sync_*` tables whose key
/// collations the legacy upgrade inspects. A table missing from the set is
/// treated as absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedTables {
    tables: Vec<ObservedTable>,
}

impl ObservedTables {
    /// An empty set (every table absent: a fresh database).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a table's observed state.
    pub fn insert(&mut self, table: ObservedTable) {
        match self.tables.iter_mut().find(|t| t.name == table.name) {
            Some(existing) => *existing = table,
            None => self.tables.push(table),
        }
    }

    /// The observed state of an existing table with this exact name.
    pub fn get(&self, name: &str) -> Option<&ObservedTable> {
        self.tables.iter().find(|t| t.name == name && t.exists)
    }

    /// Every observed table, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &ObservedTable> + '_ {
        self.tables.iter()
    }
}

impl FromIterator<ObservedTable> for ObservedTables {
    fn from_iter<I: IntoIterator<Item = ObservedTable>>(iter: I) -> Self {
        let mut tables = Self::new();
        for table in iter {
            tables.insert(table);
        }
        tables
    }
}

/// Read-only introspection a dialect's storage offers to operator tools
/// (`syncstore plan`, `syncstore status`): the named application tables
/// (absent ones recorded as absent) plus whatever internal tables the
/// dialect's legacy upgrade inspects, exactly as `ensure_schema` observes
/// them (`schema-and-migrations.md` §7.1), in one read snapshot.
pub trait ObserveTables {
    /// Observes `tables`; nothing is created or altered.
    fn observe_tables(&self, tables: &[String]) -> sync_core::Result<ObservedTables>;

    /// Rows physically in the application table `table`, all partitions
    /// (0 when the table does not exist), in one read snapshot: what a bump
    /// that retires it would drop (§12). `None` when the dialect cannot
    /// count (the default): callers treat it as "may hold rows".
    fn count_table_rows(&self, table: &str) -> sync_core::Result<Option<u64>> {
        let _ = table;
        Ok(None)
    }
}
