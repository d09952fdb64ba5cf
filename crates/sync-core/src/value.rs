//! Row values shared by the row codec and trusted index lookups
//! (`storage-contract.md` §2.5, `schema-and-migrations.md` §5), and SQL values
//! of registered queries (§2.7).

/// One decoded application column value.
///
/// `Json` and `BlobRef` hold the verbatim document text; `Bytes` and `Crdt`
/// hold raw bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum RowValue {
    /// SQL NULL / null bit set.
    Null,
    /// A `string` column value.
    String(String),
    /// An `integer` column value, within ±(2^53 − 1).
    Integer(i64),
    /// A `float` column value; every bit pattern is preserved.
    Float(f64),
    /// A `boolean` column value.
    Boolean(bool),
    /// A `json` column value: the verbatim JSON text.
    Json(String),
    /// A `bytes` column value.
    Bytes(Vec<u8>),
    /// A `blob_ref` column value: the verbatim BlobRef JSON text.
    BlobRef(String),
    /// A `crdt` column value: opaque bytes.
    Crdt(Vec<u8>),
}

impl RowValue {
    /// True for [`RowValue::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, RowValue::Null)
    }

    /// The column type this value belongs to, `None` for `Null`.
    pub fn column_type(&self) -> Option<crate::ColumnType> {
        use crate::ColumnType as T;
        Some(match self {
            RowValue::Null => return None,
            RowValue::String(_) => T::String,
            RowValue::Integer(_) => T::Integer,
            RowValue::Float(_) => T::Float,
            RowValue::Boolean(_) => T::Boolean,
            RowValue::Json(_) => T::Json,
            RowValue::Bytes(_) => T::Bytes,
            RowValue::BlobRef(_) => T::BlobRef,
            RowValue::Crdt(_) => T::Crdt,
        })
    }

    /// Renders a primary-key or scope value the way row ids and stored scopes
    /// are derived (`schema-and-migrations.md` §3.4): strings as-is, integers
    /// in decimal, booleans `true`/`false`, json as its raw text. Other
    /// variants and empty renderings yield `None`.
    pub fn render_key(&self) -> Option<String> {
        let text = match self {
            RowValue::String(s) | RowValue::Json(s) => s.clone(),
            RowValue::Integer(i) => i.to_string(),
            RowValue::Boolean(b) => b.to_string(),
            _ => return None,
        };
        (!text.is_empty()).then_some(text)
    }
}

/// A value bound to or returned from a registered (authoritative) query.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// SQL NULL.
    Null,
    /// An integer.
    Integer(i64),
    /// A double.
    Float(f64),
    /// Text (also JSON and numeric results on Postgres).
    Text(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A boolean (Postgres; SQLite booleans read as integers).
    Bool(bool),
}
