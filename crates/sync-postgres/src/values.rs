//! Application column values ↔ Postgres parameters (`schema-and-migrations.md`
//! §3.3, §5.5).
//!
//! Projection and lookup parameters carry an explicit cast in the SQL text
//! ([`column_param`]), so each parameter's type is fixed by the statement and
//! a NULL is bound with the matching Rust type.

use postgres::types::ToSql;
use sync_core::codec::json_projection_is_representable_in_jsonb;
use sync_core::{ColumnType, Error, Result, RowValue};

/// One owned statement parameter.
pub(crate) type Param = Box<dyn ToSql + Sync + Send>;

/// The placeholder of parameter `n` for a column of this type, with the cast
/// that fixes its type (`json` is bound as text and converted to `jsonb`).
pub(crate) fn column_param(column_type: ColumnType, n: usize) -> String {
    match column_type {
        ColumnType::String | ColumnType::BlobRef => format!("${n}::text"),
        ColumnType::Integer => format!("${n}::int8"),
        ColumnType::Float => format!("${n}::float8"),
        ColumnType::Boolean => format!("${n}::bool"),
        ColumnType::Json => format!("(${n}::text)::jsonb"),
        ColumnType::Bytes | ColumnType::Crdt => format!("${n}::bytea"),
    }
}

/// The parameter for one decoded value of a column of `column_type`.
///
/// A `json` value that `jsonb` cannot store (`\u0000`, huge number literals)
/// projects as NULL; the payload keeps the value.
pub(crate) fn column_value(column_type: ColumnType, value: RowValue) -> Result<Param> {
    typed_value(column_type, value).map(Typed::into_param)
}

/// One projected value, its Rust type fixed by the column type (the shared
/// conversion of [`column_value`] and [`ColumnArray::push`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Typed {
    /// `string`, `blob_ref`, `json` (bound as text).
    Text(Option<String>),
    /// `integer`.
    Int(Option<i64>),
    /// `float`.
    Float(Option<f64>),
    /// `boolean`.
    Bool(Option<bool>),
    /// `bytes`, `crdt`.
    Bytes(Option<Vec<u8>>),
}

impl Typed {
    /// The owned statement parameter.
    pub(crate) fn into_param(self) -> Param {
        match self {
            Typed::Text(v) => Box::new(v),
            Typed::Int(v) => Box::new(v),
            Typed::Float(v) => Box::new(v),
            Typed::Bool(v) => Box::new(v),
            Typed::Bytes(v) => Box::new(v),
        }
    }
}

/// The typed value for one decoded value of a column of `column_type`
/// (see [`column_value`]).
pub(crate) fn typed_value(column_type: ColumnType, value: RowValue) -> Result<Typed> {
    Ok(match (column_type, value) {
        (ColumnType::String, RowValue::String(s)) | (ColumnType::BlobRef, RowValue::BlobRef(s)) => {
            Typed::Text(Some(s))
        }
        (ColumnType::Integer, RowValue::Integer(i)) => Typed::Int(Some(i)),
        (ColumnType::Float, RowValue::Float(f)) => Typed::Float(Some(f)),
        (ColumnType::Boolean, RowValue::Boolean(b)) => Typed::Bool(Some(b)),
        (ColumnType::Json, RowValue::Json(text)) => {
            let representable = json_projection_is_representable_in_jsonb(&text);
            Typed::Text(representable.then_some(text))
        }
        (ColumnType::Bytes, RowValue::Bytes(b)) | (ColumnType::Crdt, RowValue::Crdt(b)) => {
            Typed::Bytes(Some(b))
        }
        (ColumnType::String | ColumnType::BlobRef | ColumnType::Json, RowValue::Null) => {
            Typed::Text(None)
        }
        (ColumnType::Integer, RowValue::Null) => Typed::Int(None),
        (ColumnType::Float, RowValue::Null) => Typed::Float(None),
        (ColumnType::Boolean, RowValue::Null) => Typed::Bool(None),
        (ColumnType::Bytes | ColumnType::Crdt, RowValue::Null) => Typed::Bytes(None),
        _ => {
            return Err(
                Error::new(sync_core::ErrorCode::Backend).detail("reason", "value_type_mismatch")
            )
        }
    })
}

/// The array parameter of one projection column in a set-based statement
/// (`unnest`): one element per row.
#[derive(Debug)]
pub(crate) enum ColumnArray {
    /// `text[]`.
    Text(Vec<Option<String>>),
    /// `int8[]`.
    Int(Vec<Option<i64>>),
    /// `float8[]`.
    Float(Vec<Option<f64>>),
    /// `bool[]`.
    Bool(Vec<Option<bool>>),
    /// `bytea[]`.
    Bytes(Vec<Option<Vec<u8>>>),
}

impl ColumnArray {
    /// An empty array for a column of `column_type`.
    pub(crate) fn new(column_type: ColumnType, capacity: usize) -> Self {
        match column_type {
            ColumnType::String | ColumnType::BlobRef | ColumnType::Json => {
                ColumnArray::Text(Vec::with_capacity(capacity))
            }
            ColumnType::Integer => ColumnArray::Int(Vec::with_capacity(capacity)),
            ColumnType::Float => ColumnArray::Float(Vec::with_capacity(capacity)),
            ColumnType::Boolean => ColumnArray::Bool(Vec::with_capacity(capacity)),
            ColumnType::Bytes | ColumnType::Crdt => {
                ColumnArray::Bytes(Vec::with_capacity(capacity))
            }
        }
    }

    /// Appends one value (a type that does not match the array is `backend`).
    pub(crate) fn push(&mut self, value: Typed) -> Result<()> {
        match (self, value) {
            (ColumnArray::Text(a), Typed::Text(v)) => a.push(v),
            (ColumnArray::Int(a), Typed::Int(v)) => a.push(v),
            (ColumnArray::Float(a), Typed::Float(v)) => a.push(v),
            (ColumnArray::Bool(a), Typed::Bool(v)) => a.push(v),
            (ColumnArray::Bytes(a), Typed::Bytes(v)) => a.push(v),
            _ => {
                return Err(Error::new(sync_core::ErrorCode::Backend)
                    .detail("reason", "value_type_mismatch"))
            }
        }
        Ok(())
    }

    /// The owned statement parameter.
    pub(crate) fn into_param(self) -> Param {
        match self {
            ColumnArray::Text(a) => Box::new(a),
            ColumnArray::Int(a) => Box::new(a),
            ColumnArray::Float(a) => Box::new(a),
            ColumnArray::Bool(a) => Box::new(a),
            ColumnArray::Bytes(a) => Box::new(a),
        }
    }
}

/// The array placeholder of parameter `n` for a column of this type in an
/// `unnest(…)` (`json` travels as `text[]`; see [`column_element`]).
pub(crate) fn column_array_param(column_type: ColumnType, n: usize) -> String {
    match column_type {
        ColumnType::String | ColumnType::BlobRef | ColumnType::Json => format!("${n}::text[]"),
        ColumnType::Integer => format!("${n}::int8[]"),
        ColumnType::Float => format!("${n}::float8[]"),
        ColumnType::Boolean => format!("${n}::bool[]"),
        ColumnType::Bytes | ColumnType::Crdt => format!("${n}::bytea[]"),
    }
}

/// The stored expression of one `unnest` element `expr` of a column of this type.
pub(crate) fn column_element(column_type: ColumnType, expr: &str) -> String {
    match column_type {
        ColumnType::Json => format!("({expr})::jsonb"),
        _ => expr.to_owned(),
    }
}

/// Borrowed view of owned parameters, as the driver wants them.
pub(crate) fn param_refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}
