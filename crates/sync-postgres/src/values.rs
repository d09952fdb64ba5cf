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
    let param: Param =
        match (column_type, value) {
            (ColumnType::String, RowValue::String(s))
            | (ColumnType::BlobRef, RowValue::BlobRef(s)) => Box::new(Some(s)),
            (ColumnType::Integer, RowValue::Integer(i)) => Box::new(Some(i)),
            (ColumnType::Float, RowValue::Float(f)) => Box::new(Some(f)),
            (ColumnType::Boolean, RowValue::Boolean(b)) => Box::new(Some(b)),
            (ColumnType::Json, RowValue::Json(text)) => {
                let representable = json_projection_is_representable_in_jsonb(&text);
                Box::new(representable.then_some(text))
            }
            (ColumnType::Bytes, RowValue::Bytes(b)) | (ColumnType::Crdt, RowValue::Crdt(b)) => {
                Box::new(Some(b))
            }
            (column_type, RowValue::Null) => null_of(column_type),
            _ => {
                return Err(Error::new(sync_core::ErrorCode::Backend)
                    .detail("reason", "value_type_mismatch"))
            }
        };
    Ok(param)
}

/// A typed NULL for a column of `column_type`.
pub(crate) fn null_of(column_type: ColumnType) -> Param {
    match column_type {
        ColumnType::String | ColumnType::BlobRef | ColumnType::Json => Box::new(None::<String>),
        ColumnType::Integer => Box::new(None::<i64>),
        ColumnType::Float => Box::new(None::<f64>),
        ColumnType::Boolean => Box::new(None::<bool>),
        ColumnType::Bytes | ColumnType::Crdt => Box::new(None::<Vec<u8>>),
    }
}

/// Borrowed view of owned parameters, as the driver wants them.
pub(crate) fn param_refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}
