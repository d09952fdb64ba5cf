//! Registered (authoritative) queries (`storage-contract.md` §4.13): the
//! SQL is prepared by `sync-schema` against the ensured schema and run with
//! its expanded parameters; the pool variant reads the serve gate first in
//! the same snapshot.

use rusqlite::{Connection, ToSql};
use sync_core::front::{Partition, QueryBackend};
use sync_core::{
    check_serve_gate, AuthoritativeQueryRequest, AuthoritativeQueryResult, Result, ServeContext,
};
use sync_schema::{prepare_request, PreparedQuery};

use crate::commit_log::max_commit_seq;
use crate::errors::DbResultExt;
use crate::gate;
use crate::seam;
use crate::state::Ensured;
use crate::values::{sql_value, BindSql};
use crate::SqliteStorage;

/// Preparation against the ensured schema (no database access).
pub(crate) fn prepare(
    ensured: &Ensured,
    partition: &str,
    request: &AuthoritativeQueryRequest,
) -> Result<PreparedQuery> {
    prepare_request(&ensured.schema, crate::DIALECT, partition, request)
}

/// Runs a prepared query and reads `max_commit_seq` on the same connection.
pub(crate) fn run(
    conn: &Connection,
    partition: &str,
    prepared: &PreparedQuery,
) -> Result<AuthoritativeQueryResult> {
    let mut stmt = seam::cached(conn, &prepared.sql).db()?;
    let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let binds: Vec<BindSql<'_>> = prepared.params.iter().map(BindSql).collect();
    let params: Vec<&dyn ToSql> = binds.iter().map(|b| b as &dyn ToSql).collect();
    let mut rows = stmt.query(params.as_slice()).db()?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().db()? {
        let mut values = Vec::with_capacity(columns.len());
        for i in 0..columns.len() {
            values.push(sql_value(row.get_ref(i).db()?));
        }
        out.push(values);
    }
    drop(rows);
    drop(stmt);
    Ok(AuthoritativeQueryResult {
        columns,
        rows: out,
        max_commit_seq: max_commit_seq(conn, partition)?,
    })
}

/// Pool variant body, inside one read snapshot: the gate is the first read.
pub(crate) fn run_gated(
    conn: &Connection,
    partition: &str,
    running: i32,
    prepared: &PreparedQuery,
    ctx: &ServeContext,
) -> Result<AuthoritativeQueryResult> {
    let token = gate::read(conn, partition, running)?;
    check_serve_gate(&token, running, ctx)?;
    run(conn, partition, prepared)
}

impl QueryBackend<Ensured> for SqliteStorage {
    fn query_authoritative(
        &self,
        p: Partition<'_>,
        ensured: &Ensured,
        request: &AuthoritativeQueryRequest,
        ctx: &ServeContext,
    ) -> Result<AuthoritativeQueryResult> {
        let prepared = prepare(ensured, &p, request)?;
        let running = ensured.version();
        self.pools()
            .read_snapshot(|conn| run_gated(conn, &p, running, &prepared, ctx))
    }
}
