//! Registered (authoritative) queries (`storage-contract.md` §4.13): prepared
//! by `sync-schema`, run in one `REPEATABLE READ READ ONLY` snapshot whose
//! first statement reads the serve gate and the partition counter.

use std::sync::LazyLock;

use postgres::types::ToSql;
use sync_core::front::{Partition, QueryBackend};
use sync_core::{
    check_serve_gate, AuthoritativeQueryRequest, AuthoritativeQueryResult, Error, ErrorCode,
    Result, ServeContext, SqlValue,
};
use sync_schema::{prepare_request, PreparedQuery};

use crate::errors::db;
use crate::gate::{gate_from_text, gate_sql};
use crate::instance::{Finish, PostgresStorage};
use crate::pool::{col, Conn};
use crate::query_values::{param, result_value, supported_result};
use crate::session::Isolation;
use crate::state::Ensured;
use crate::values::param_refs;

/// The gate and the partition counter from the snapshot's first statement.
static GATE_AND_MAX_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}, (SELECT max_commit_seq FROM sync_partitions WHERE partition = $1::text)",
        gate_sql("$1::text", "$2::int4")
    )
});

/// Prepares the request against the ensured schema (`query_rejected`).
pub(crate) fn prepare(
    ensured: &Ensured,
    partition: &str,
    request: &AuthoritativeQueryRequest,
) -> Result<PreparedQuery> {
    prepare_request(&ensured.schema, crate::DIALECT, partition, request)
}

/// Runs a prepared query on `conn`: columns and rows.
pub(crate) fn run(
    conn: &mut Conn,
    prepared: &PreparedQuery,
) -> Result<(Vec<String>, Vec<Vec<SqlValue>>)> {
    let statement = conn.prepare_uncached(&prepared.sql).map_err(db)?;
    if let Some(column) = statement
        .columns()
        .iter()
        .find(|c| !supported_result(c.type_()))
    {
        return Err(Error::new(ErrorCode::QueryRejected)
            .detail("reason", "unsupported_result_type")
            .detail("column", column.name())
            .detail("type", column.type_().name()));
    }
    if statement.params().len() != prepared.params.len() {
        return Err(Error::new(ErrorCode::QueryRejected).detail("reason", "bind_mismatch"));
    }
    let params = prepared
        .params
        .iter()
        .zip(statement.params())
        .enumerate()
        .map(|(i, (value, ty))| param(value, ty, i))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&(dyn ToSql + Sync)> = param_refs(&params);
    let rows = conn.query_prepared(&statement, &refs).map_err(db)?;
    let columns: Vec<String> = statement
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    let rows = rows
        .iter()
        .map(|row| {
            statement
                .columns()
                .iter()
                .enumerate()
                .map(|(i, c)| result_value(row, i, c.type_()))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((columns, rows))
}

/// The pool path: snapshot, gate first, query, counter from the same snapshot.
pub(crate) fn query_pool(
    storage: &PostgresStorage,
    ensured: &Ensured,
    partition: &str,
    request: &AuthoritativeQueryRequest,
    ctx: &ServeContext,
) -> Result<AuthoritativeQueryResult> {
    let prepared = prepare(ensured, partition, request)?;
    let running = ensured.version;
    storage.in_transaction(Isolation::RepeatableReadOnly, |conn| {
        let row = conn.query_one(&GATE_AND_MAX_SQL, &[&partition, &running])?;
        let stored: Option<String> = col(&row, 0)?;
        let epoch: Option<String> = col(&row, 1)?;
        let pending: Option<String> = col(&row, 2)?;
        let max: Option<i64> = col(&row, 3)?;
        let gate = gate_from_text(
            partition,
            stored.as_deref(),
            epoch.as_deref(),
            pending.as_deref(),
        )?;
        check_serve_gate(&gate, running, ctx)?;
        let (columns, rows) = run(conn, &prepared)?;
        Ok(Finish::Commit(AuthoritativeQueryResult {
            columns,
            rows,
            max_commit_seq: max.unwrap_or(0),
        }))
    })
}

impl QueryBackend<Ensured> for PostgresStorage {
    fn query_authoritative(
        &self,
        p: Partition<'_>,
        ensured: &Ensured,
        request: &AuthoritativeQueryRequest,
        ctx: &ServeContext,
    ) -> Result<AuthoritativeQueryResult> {
        query_pool(self, ensured, &p, request, ctx)
    }
}
