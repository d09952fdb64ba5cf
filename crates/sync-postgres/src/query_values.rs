//! Registered-query values: parameters adapted to the types the server
//! inferred for each placeholder, and result cells mapped to [`SqlValue`]
//! (`storage-contract.md` §4.13 "Results").

use std::error::Error as StdError;

use postgres::types::{FromSql, Type};
use postgres::Row;
use sync_core::{Error, ErrorCode, Result, SqlValue};

use crate::values::Param;

type BoxError = Box<dyn StdError + Sync + Send>;

fn is_text(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    )
}

/// Whether a result column of this type can be returned.
pub(crate) fn supported_result(ty: &Type) -> bool {
    is_text(ty)
        || matches!(
            *ty,
            Type::INT2
                | Type::INT4
                | Type::INT8
                | Type::FLOAT4
                | Type::FLOAT8
                | Type::BOOL
                | Type::BYTEA
                | Type::JSON
                | Type::JSONB
                | Type::NUMERIC
        )
}

fn param_error(position: usize) -> Error {
    Error::new(ErrorCode::Backend)
        .detail("reason", "param_type")
        .detail("position", position)
}

/// Converts one parameter to the type the server inferred for it.
pub(crate) fn param(value: &SqlValue, ty: &Type, position: usize) -> Result<Param> {
    let bad = || param_error(position);
    let param: Param = match value {
        SqlValue::Null => typed_null(ty).ok_or_else(bad)?,
        SqlValue::Integer(i) => match *ty {
            Type::INT8 => Box::new(*i),
            Type::INT4 => Box::new(i32::try_from(*i).map_err(|_| bad())?),
            Type::INT2 => Box::new(i16::try_from(*i).map_err(|_| bad())?),
            Type::FLOAT8 => Box::new(*i as f64),
            Type::FLOAT4 => Box::new(*i as f32),
            Type::BOOL if *i == 0 || *i == 1 => Box::new(*i == 1),
            _ if is_text(ty) => Box::new(i.to_string()),
            _ => return Err(bad()),
        },
        SqlValue::Float(f) => match *ty {
            Type::FLOAT8 => Box::new(*f),
            Type::FLOAT4 => Box::new(*f as f32),
            _ if is_text(ty) => Box::new(f.to_string()),
            _ => return Err(bad()),
        },
        SqlValue::Bool(b) => match *ty {
            Type::BOOL => Box::new(*b),
            Type::INT8 => Box::new(i64::from(*b)),
            Type::INT4 => Box::new(i32::from(*b)),
            Type::INT2 => Box::new(i16::from(*b)),
            _ if is_text(ty) => Box::new(b.to_string()),
            _ => return Err(bad()),
        },
        SqlValue::Bytes(b) => match *ty {
            Type::BYTEA => Box::new(b.clone()),
            _ => return Err(bad()),
        },
        SqlValue::Text(s) => match *ty {
            Type::INT8 => Box::new(s.parse::<i64>().map_err(|_| bad())?),
            Type::INT4 => Box::new(s.parse::<i32>().map_err(|_| bad())?),
            Type::INT2 => Box::new(s.parse::<i16>().map_err(|_| bad())?),
            Type::FLOAT8 => Box::new(s.parse::<f64>().map_err(|_| bad())?),
            Type::FLOAT4 => Box::new(s.parse::<f32>().map_err(|_| bad())?),
            Type::BOOL => Box::new(s.parse::<bool>().map_err(|_| bad())?),
            Type::BYTEA => Box::new(s.as_bytes().to_vec()),
            _ if is_text(ty) => Box::new(s.clone()),
            _ => return Err(bad()),
        },
    };
    Ok(param)
}

fn typed_null(ty: &Type) -> Option<Param> {
    Some(match *ty {
        Type::INT8 => Box::new(None::<i64>),
        Type::INT4 => Box::new(None::<i32>),
        Type::INT2 => Box::new(None::<i16>),
        Type::FLOAT8 => Box::new(None::<f64>),
        Type::FLOAT4 => Box::new(None::<f32>),
        Type::BOOL => Box::new(None::<bool>),
        Type::BYTEA => Box::new(None::<Vec<u8>>),
        _ if is_text(ty) => Box::new(None::<String>),
        _ => return None,
    })
}

/// Text of `json`, `jsonb` and `numeric` result cells.
struct AnyText(String);

impl<'a> FromSql<'a> for AnyText {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> std::result::Result<Self, BoxError> {
        let text = match *ty {
            Type::JSONB => match raw.split_first() {
                Some((1, rest)) => std::str::from_utf8(rest)?.to_owned(),
                _ => return Err("unsupported jsonb version".into()),
            },
            Type::JSON => std::str::from_utf8(raw)?.to_owned(),
            Type::NUMERIC => numeric_text(raw)?,
            _ => return Err("unsupported type".into()),
        };
        Ok(Self(text))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::JSON | Type::JSONB | Type::NUMERIC)
    }
}

fn be_u16(raw: &[u8], at: usize) -> std::result::Result<u16, BoxError> {
    match raw.get(at..at + 2) {
        Some(b) => Ok(u16::from_be_bytes([b[0], b[1]])),
        None => Err("truncated numeric".into()),
    }
}

/// Decimal text of a binary `numeric` (base-10000 digits, weight, sign, scale).
fn numeric_text(raw: &[u8]) -> std::result::Result<String, BoxError> {
    let ndigits = usize::from(be_u16(raw, 0)?);
    let weight = i64::from(be_u16(raw, 2)? as i16);
    let sign = be_u16(raw, 4)?;
    let dscale = usize::from(be_u16(raw, 6)?);
    match sign {
        0xC000 => return Ok("NaN".to_owned()),
        0xD000 => return Ok("Infinity".to_owned()),
        0xF000 => return Ok("-Infinity".to_owned()),
        _ => {}
    }
    let digits = (0..ndigits)
        .map(|i| be_u16(raw, 8 + 2 * i))
        .collect::<std::result::Result<Vec<u16>, BoxError>>()?;
    let digit = |k: i64| {
        usize::try_from(k)
            .ok()
            .and_then(|k| digits.get(k))
            .copied()
            .unwrap_or(0)
    };
    let mut text = String::new();
    if sign == 0x4000 {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        for k in 0..=weight {
            if k == 0 {
                text.push_str(&digit(k).to_string());
            } else {
                text.push_str(&format!("{:04}", digit(k)));
            }
        }
    }
    if dscale > 0 {
        let mut fraction = String::new();
        let mut k = weight + 1;
        while fraction.len() < dscale {
            fraction.push_str(&format!("{:04}", digit(k)));
            k += 1;
        }
        fraction.truncate(dscale);
        text.push('.');
        text.push_str(&fraction);
    }
    Ok(text)
}

fn cell<'a, T: FromSql<'a>>(row: &'a Row, idx: usize) -> Result<Option<T>> {
    row.try_get(idx).map_err(Error::backend)
}

/// One result cell as a [`SqlValue`].
pub(crate) fn result_value(row: &Row, idx: usize, ty: &Type) -> Result<SqlValue> {
    let value = match *ty {
        Type::INT2 => cell::<i16>(row, idx)?.map(|v| SqlValue::Integer(i64::from(v))),
        Type::INT4 => cell::<i32>(row, idx)?.map(|v| SqlValue::Integer(i64::from(v))),
        Type::INT8 => cell::<i64>(row, idx)?.map(SqlValue::Integer),
        Type::FLOAT4 => cell::<f32>(row, idx)?.map(|v| SqlValue::Float(f64::from(v))),
        Type::FLOAT8 => cell::<f64>(row, idx)?.map(SqlValue::Float),
        Type::BOOL => cell::<bool>(row, idx)?.map(SqlValue::Bool),
        Type::BYTEA => cell::<Vec<u8>>(row, idx)?.map(SqlValue::Bytes),
        Type::JSON | Type::JSONB | Type::NUMERIC => {
            cell::<AnyText>(row, idx)?.map(|t| SqlValue::Text(t.0))
        }
        _ => cell::<String>(row, idx)?.map(SqlValue::Text),
    };
    Ok(value.unwrap_or(SqlValue::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(ndigits: u16, weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut raw = Vec::new();
        for v in [ndigits, weight as u16, sign, dscale] {
            raw.extend_from_slice(&v.to_be_bytes());
        }
        for d in digits {
            raw.extend_from_slice(&d.to_be_bytes());
        }
        raw
    }

    #[test]
    fn numeric_binary_renders_as_decimal_text() {
        // 12345.678 = [1, 2345, 6780] weight 1 scale 3
        assert_eq!(
            numeric_text(&numeric(3, 1, 0, 3, &[1, 2345, 6780])).unwrap(),
            "12345.678"
        );
        // -0.0005 = [5] weight -1 scale 4
        assert_eq!(
            numeric_text(&numeric(1, -1, 0x4000, 4, &[5])).unwrap(),
            "-0.0005"
        );
        // 0.00000001 = [1] weight -2 scale 8
        assert_eq!(
            numeric_text(&numeric(1, -2, 0, 8, &[1])).unwrap(),
            "0.00000001"
        );
        // 10000 = [1] weight 1 scale 0
        assert_eq!(numeric_text(&numeric(1, 1, 0, 0, &[1])).unwrap(), "10000");
        assert_eq!(numeric_text(&numeric(0, 0, 0, 0, &[])).unwrap(), "0");
        assert_eq!(numeric_text(&numeric(0, 0, 0xC000, 0, &[])).unwrap(), "NaN");
    }
}
