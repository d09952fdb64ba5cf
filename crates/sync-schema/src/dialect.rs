//! The two SQL dialects and their type mapping
//! (`schema-and-migrations.md` §3.3, `tables.md` §5).

use std::fmt;
use std::str::FromStr;

use sync_core::ColumnType;

/// A storage dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dialect {
    /// SQLite (`sync-sqlite`).
    Sqlite,
    /// PostgreSQL 13+ (`sync-postgres`).
    Postgres,
}

impl Dialect {
    /// Both dialects.
    pub const ALL: [Self; 2] = [Self::Sqlite, Self::Postgres];

    /// `sqlite` / `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }

    /// The SQL type used in DDL for an application column of this type.
    pub fn sql_type(self, column_type: ColumnType) -> &'static str {
        use ColumnType as T;
        match (self, column_type) {
            (_, T::String | T::BlobRef) => "TEXT",
            (Self::Sqlite, T::Integer | T::Boolean) => "INTEGER",
            (Self::Sqlite, T::Float) => "REAL",
            (Self::Sqlite, T::Json) => "TEXT",
            (Self::Sqlite, T::Bytes | T::Crdt) => "BLOB",
            (Self::Postgres, T::Integer) => "BIGINT",
            (Self::Postgres, T::Float) => "DOUBLE PRECISION",
            (Self::Postgres, T::Boolean) => "BOOLEAN",
            (Self::Postgres, T::Json) => "JSONB",
            (Self::Postgres, T::Bytes | T::Crdt) => "BYTEA",
        }
    }

    /// Whether an introspected type name (SQLite declared type, Postgres
    /// `format_type`) is the expected SQL type. Compared ASCII
    /// case-insensitively, which is exactly the SQLite rule and equivalent to
    /// the lower-case Postgres `format_type` comparison.
    pub fn type_matches(self, expected_sql_type: &str, observed: &str) -> bool {
        expected_sql_type.eq_ignore_ascii_case(observed.trim())
    }

    /// The positional placeholder for the `n`-th (1-based) parameter:
    /// `?` on SQLite, `$n` on Postgres.
    pub fn placeholder(self, n: usize) -> String {
        match self {
            Self::Sqlite => "?".to_owned(),
            Self::Postgres => format!("${n}"),
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Dialect {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|d| d.as_str() == s).ok_or(())
    }
}

/// One internal column of every application table (`tables.md` §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InternalColumn {
    /// Column name.
    pub name: &'static str,
    /// SQLite type.
    pub sqlite_type: &'static str,
    /// Postgres type (without collation).
    pub postgres_type: &'static str,
    /// Position in the primary key (1-based), 0 when not a key column.
    pub primary_key_position: u32,
}

impl InternalColumn {
    /// The SQL type in `dialect`.
    pub fn sql_type(&self, dialect: Dialect) -> &'static str {
        match dialect {
            Dialect::Sqlite => self.sqlite_type,
            Dialect::Postgres => self.postgres_type,
        }
    }

    /// Whether this is one of the two key columns (`COLLATE "C"` on Postgres).
    pub fn is_key(&self) -> bool {
        self.primary_key_position > 0
    }
}

/// `_sync_partition`.
pub(crate) const PARTITION_COLUMN: &str = "_sync_partition";

/// The five internal columns: the two key columns first, the three trailing
/// columns after the projection (`tables.md` §5).
pub const INTERNAL_COLUMNS: [InternalColumn; 5] = [
    InternalColumn {
        name: PARTITION_COLUMN,
        sqlite_type: "TEXT",
        postgres_type: "TEXT",
        primary_key_position: 1,
    },
    InternalColumn {
        name: "_sync_row_id",
        sqlite_type: "TEXT",
        postgres_type: "TEXT",
        primary_key_position: 2,
    },
    InternalColumn {
        name: "_sync_server_version",
        sqlite_type: "INTEGER",
        postgres_type: "BIGINT",
        primary_key_position: 0,
    },
    InternalColumn {
        name: "_sync_scopes",
        sqlite_type: "TEXT",
        postgres_type: "JSONB",
        primary_key_position: 0,
    },
    InternalColumn {
        name: "_sync_payload",
        sqlite_type: "BLOB",
        postgres_type: "BYTEA",
        primary_key_position: 0,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for dialect in Dialect::ALL {
            assert_eq!(dialect.as_str().parse::<Dialect>(), Ok(dialect));
        }
        assert!("mysql".parse::<Dialect>().is_err());
    }

    #[test]
    fn postgres_format_type_names_match() {
        let pg = Dialect::Postgres;
        assert!(pg.type_matches(pg.sql_type(ColumnType::Float), "double precision"));
        assert!(pg.type_matches(pg.sql_type(ColumnType::Json), "jsonb"));
        assert!(!pg.type_matches(pg.sql_type(ColumnType::Json), "json"));
        assert!(Dialect::Sqlite.type_matches("INTEGER", "integer"));
    }
}
