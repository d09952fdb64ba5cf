//! The compiled-schema data model (`schema-and-migrations.md` §3.2).
//!
//! Plain data only: values of these types are produced by
//! `sync_schema::compile`, which enforces every validation rule. Storage
//! dialects read them; nothing in this crate validates them again.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The column types of the schema input format (`schema-and-migrations.md` §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ColumnType {
    /// UTF-8 text.
    String,
    /// 64-bit integer within ±(2^53 − 1).
    Integer,
    /// IEEE-754 binary64.
    Float,
    /// true / false.
    Boolean,
    /// A JSON document, kept verbatim.
    Json,
    /// Raw bytes.
    Bytes,
    /// A BlobRef JSON document.
    BlobRef,
    /// Opaque CRDT state.
    Crdt,
}

impl ColumnType {
    /// Every type, in the order of the specification table.
    pub const ALL: [ColumnType; 8] = [
        ColumnType::String,
        ColumnType::Integer,
        ColumnType::Float,
        ColumnType::Boolean,
        ColumnType::Json,
        ColumnType::Bytes,
        ColumnType::BlobRef,
        ColumnType::Crdt,
    ];

    /// The name used in schema input and layouts.
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnType::String => "string",
            ColumnType::Integer => "integer",
            ColumnType::Float => "float",
            ColumnType::Boolean => "boolean",
            ColumnType::Json => "json",
            ColumnType::Bytes => "bytes",
            ColumnType::BlobRef => "blob_ref",
            ColumnType::Crdt => "crdt",
        }
    }

    /// Whether a column of this type may be a primary key.
    pub fn can_be_primary_key(self) -> bool {
        matches!(
            self,
            ColumnType::String | ColumnType::Integer | ColumnType::Boolean | ColumnType::Json
        )
    }

    /// Whether a column of this type may be a scope column.
    pub fn can_be_scope(self) -> bool {
        matches!(
            self,
            ColumnType::String | ColumnType::Integer | ColumnType::Boolean
        )
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ColumnType {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ColumnType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or(())
    }
}

/// One application column in codec order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledColumn {
    /// Column name (validated identifier).
    pub name: String,
    /// Column type.
    pub column_type: ColumnType,
    /// Whether NULL is allowed.
    pub nullable: bool,
    /// CRDT type name, present iff `column_type` is `Crdt`.
    pub crdt_type: Option<String>,
    /// Client-side encrypted column (type `bytes`).
    pub encrypted: bool,
    /// Declared plaintext type of an encrypted column (metadata only).
    pub declared_type: Option<ColumnType>,
}

/// One scope pattern `prefix:{variable}` bound to a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopePattern {
    /// The scope variable (stored scope key).
    pub variable: String,
    /// The pattern prefix (may contain `:`).
    pub prefix: String,
    /// The scope column name.
    pub column: String,
    /// Position of the scope column.
    pub column_index: usize,
}

/// One declared secondary index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDef {
    /// Declared name (the physical name is derived by `sync_schema::physical_index_name`).
    pub name: String,
    /// Indexed application columns, in declaration order.
    pub columns: Vec<String>,
    /// Whether the index is unique (within a partition).
    pub unique: bool,
}

/// One compiled table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledTable {
    /// Table name.
    pub name: String,
    /// Application columns in codec order.
    pub columns: Vec<CompiledColumn>,
    /// Position of the primary-key column.
    pub primary_key_index: usize,
    /// Scope patterns in declaration order.
    pub scope_patterns: Vec<ScopePattern>,
    /// Declared indexes in declaration order.
    pub indexes: Vec<IndexDef>,
    /// Whether typed projection columns are stored.
    pub materialize: bool,
    /// Column name → position.
    pub column_index: BTreeMap<String, usize>,
    /// This table's scope variables.
    pub declared_variables: Vec<String>,
    /// Positions of `blob_ref` columns.
    pub blob_ref_column_indices: Vec<usize>,
    /// `(position, crdt type)` of `crdt` columns.
    pub crdt_columns: Vec<(usize, String)>,
    /// Positions of encrypted columns.
    pub encrypted_column_indices: Vec<usize>,
}

impl CompiledTable {
    /// The column with this name.
    pub fn column(&self, name: &str) -> Option<&CompiledColumn> {
        self.column_index.get(name).map(|&i| &self.columns[i])
    }

    /// The declared index with this name.
    pub fn index(&self, name: &str) -> Option<&IndexDef> {
        self.indexes.iter().find(|i| i.name == name)
    }

    /// The primary-key column.
    pub fn primary_key(&self) -> &CompiledColumn {
        &self.columns[self.primary_key_index]
    }

    /// The layout of this table: what the row codec needs to decode a payload.
    pub fn layout(&self) -> Vec<LayoutColumn> {
        self.columns
            .iter()
            .map(|c| LayoutColumn {
                name: c.name.clone(),
                column_type: c.column_type.as_str().to_owned(),
                nullable: c.nullable,
            })
            .collect()
    }
}

/// A compiled schema: version, tables in declaration order, declared variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledSchema {
    /// Schema version, 1..=2^31 − 1.
    pub version: i32,
    /// Tables in declaration (bootstrap) order.
    pub tables: Vec<CompiledTable>,
    /// Union of every table's scope variables, byte-ordered.
    pub declared_variables: Vec<String>,
    /// Table name → position in `tables`.
    pub table_index: BTreeMap<String, usize>,
}

impl CompiledSchema {
    /// The table with this exact name.
    pub fn table(&self, name: &str) -> Option<&CompiledTable> {
        self.table_index.get(name).map(|&i| &self.tables[i])
    }

    /// The table with this exact name, or `sync.storage.unknown_table`.
    pub fn require_table(&self, name: &str) -> crate::Result<&CompiledTable> {
        self.table(name)
            .ok_or_else(|| crate::Error::unknown_table(name))
    }
}

/// One column of a stored or computed layout (`schema-and-migrations.md` §6).
///
/// `column_type` is a string so that unknown stored types are kept verbatim
/// (and never equal a configured type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutColumn {
    /// Column name.
    pub name: String,
    /// Type name as stored.
    pub column_type: String,
    /// Whether NULL is allowed.
    pub nullable: bool,
}

impl LayoutColumn {
    /// The known column type, `None` for an unknown stored type string.
    pub fn known_type(&self) -> Option<ColumnType> {
        self.column_type.parse().ok()
    }
}
