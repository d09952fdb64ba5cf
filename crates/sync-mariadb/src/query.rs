//! Registered (authoritative) queries (`storage-contract.md` §4.13,
//! `docs/design/mariadb.md` §11): prepared by `sync-schema` with the
//! MariaDB rules, run with their expanded parameters; the pool variant
//! reads the serve gate first in the same read-only snapshot. Result
//! values are typed from the binary protocol's column metadata.

use mysql::consts::ColumnType;
use mysql::Value;
use sync_core::front::{Partition, QueryBackend};
use sync_core::{
    check_serve_gate, AuthoritativeQueryRequest, AuthoritativeQueryResult, Error, ErrorCode,
    Result, ServeContext, SqlValue,
};
use sync_schema::{prepare_request, PreparedQuery};

use crate::ensured::Ensured;
use crate::pool::Conn;
use crate::MariadbStorage;

/// The character set number of binary strings.
const BINARY_CHARSET: u16 = 63;

/// Prepares a request against the ensured schema.
pub(crate) fn prepare(
    ensured: &Ensured,
    partition: &str,
    request: &AuthoritativeQueryRequest,
) -> Result<PreparedQuery> {
    let schema = sync_core::front::EnsuredSchema::schema(ensured);
    prepare_request(schema, crate::DIALECT, partition, request)
}

fn bind(value: &SqlValue) -> Value {
    match value {
        SqlValue::Null => Value::NULL,
        SqlValue::Integer(i) => Value::Int(*i),
        SqlValue::Float(f) => Value::Double(*f),
        SqlValue::Text(s) => Value::Bytes(s.as_bytes().to_vec()),
        SqlValue::Bytes(b) => Value::Bytes(b.clone()),
        SqlValue::Bool(b) => Value::Int(i64::from(*b)),
    }
}

fn unsupported(column: &str) -> Error {
    Error::new(ErrorCode::QueryRejected)
        .detail("reason", "unsupported_result_type")
        .detail("column", column)
}

fn cell(value: Value, column: &mysql::Column) -> Result<SqlValue> {
    let name = column.name_str();
    Ok(match value {
        Value::NULL => SqlValue::Null,
        Value::Int(i) => SqlValue::Integer(i),
        Value::UInt(u) => SqlValue::Integer(i64::try_from(u).map_err(|_| unsupported(&name))?),
        Value::Float(f) => SqlValue::Float(f64::from(f)),
        Value::Double(f) => SqlValue::Float(f),
        Value::Bytes(bytes) => match column.column_type() {
            ColumnType::MYSQL_TYPE_TINY
            | ColumnType::MYSQL_TYPE_SHORT
            | ColumnType::MYSQL_TYPE_INT24
            | ColumnType::MYSQL_TYPE_LONG
            | ColumnType::MYSQL_TYPE_LONGLONG
            | ColumnType::MYSQL_TYPE_YEAR => {
                let text = String::from_utf8(bytes).map_err(|_| unsupported(&name))?;
                SqlValue::Integer(text.parse().map_err(|_| unsupported(&name))?)
            }
            ColumnType::MYSQL_TYPE_FLOAT | ColumnType::MYSQL_TYPE_DOUBLE => {
                let text = String::from_utf8(bytes).map_err(|_| unsupported(&name))?;
                SqlValue::Float(text.parse().map_err(|_| unsupported(&name))?)
            }
            ColumnType::MYSQL_TYPE_DECIMAL | ColumnType::MYSQL_TYPE_NEWDECIMAL => {
                SqlValue::Text(String::from_utf8(bytes).map_err(|_| unsupported(&name))?)
            }
            ColumnType::MYSQL_TYPE_VARCHAR
            | ColumnType::MYSQL_TYPE_VAR_STRING
            | ColumnType::MYSQL_TYPE_STRING
            | ColumnType::MYSQL_TYPE_TINY_BLOB
            | ColumnType::MYSQL_TYPE_MEDIUM_BLOB
            | ColumnType::MYSQL_TYPE_LONG_BLOB
            | ColumnType::MYSQL_TYPE_BLOB
            | ColumnType::MYSQL_TYPE_JSON => {
                if column.character_set() == BINARY_CHARSET {
                    SqlValue::Bytes(bytes)
                } else {
                    SqlValue::Text(String::from_utf8(bytes).map_err(|_| unsupported(&name))?)
                }
            }
            _ => return Err(unsupported(&name)),
        },
        Value::Date(..) | Value::Time(..) => return Err(unsupported(&name)),
    })
}

/// Runs a prepared query on `conn` (inside the caller's transaction).
pub(crate) fn run(
    conn: &mut Conn,
    partition: &str,
    prepared: &PreparedQuery,
) -> Result<AuthoritativeQueryResult> {
    let params: Vec<Value> = prepared.params.iter().map(bind).collect();
    let (columns, raw) = conn.rows_with_columns(&prepared.sql, params)?;
    let names: Vec<String> = columns.iter().map(|c| c.name_str().into_owned()).collect();
    let mut rows = Vec::with_capacity(raw.len());
    for row in raw {
        let values = row.unwrap();
        let mut out = Vec::with_capacity(values.len());
        for (value, column) in values.into_iter().zip(columns.iter()) {
            out.push(cell(value, column)?);
        }
        rows.push(out);
    }
    Ok(AuthoritativeQueryResult {
        columns: names,
        rows,
        max_commit_seq: crate::commit_log::max_commit_seq(conn, partition)?,
    })
}

/// The gate read first, then the query, in the caller's snapshot.
pub(crate) fn run_gated(
    conn: &mut Conn,
    partition: &str,
    running: i32,
    prepared: &PreparedQuery,
    ctx: &ServeContext,
) -> Result<AuthoritativeQueryResult> {
    let token = crate::reads::serve_gate(conn, partition, running)?;
    check_serve_gate(&token, running, ctx)?;
    run(conn, partition, prepared)
}

impl QueryBackend<Ensured> for MariadbStorage {
    fn query_authoritative(
        &self,
        p: Partition<'_>,
        ensured: &Ensured,
        request: &sync_core::AuthoritativeQueryRequest,
        ctx: &sync_core::ServeContext,
    ) -> Result<sync_core::AuthoritativeQueryResult> {
        let prepared = prepare(ensured, p.as_str(), request)?;
        self.with_read(|c| run_gated(c, p.as_str(), ensured.version(), &prepared, ctx))
    }
}
