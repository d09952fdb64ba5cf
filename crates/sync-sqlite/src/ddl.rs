//! Applying `sync-schema` plans: DDL statements and keyset row rewrites
//! (`schema-and-migrations.md` §9.1 steps 9–10, §11).

use rusqlite::{params_from_iter, Connection, ToSql};
use sync_core::{codec, CompiledTable, Result, RewriteTally, RowValue};
use sync_schema::{RewritePlan, Statement, REWRITE_PAGE_SIZE};

use crate::errors::DbResultExt;
use crate::seam;
use crate::values::BindRow;

/// Executes one planned statement with its text parameters.
pub(crate) fn execute(conn: &Connection, statement: &Statement) -> Result<()> {
    if statement.params.is_empty() {
        return seam::batch(conn, &statement.sql).db();
    }
    seam::uncached(conn, &statement.sql)
        .db()?
        .execute(params_from_iter(statement.params.iter()))
        .db()?;
    Ok(())
}

/// The rows a rewrite of `plan`'s table will visit.
pub(crate) fn count_rows(conn: &Connection, plan: &RewritePlan) -> Result<u64> {
    let count: i64 = seam::uncached(conn, &plan.count_sql(crate::DIALECT))
        .db()?
        .query_row([], |r| r.get(0))
        .db()?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// Rewrites every row of a table (all partitions) in keyset pages of 500:
/// re-encodes payloads when `migrate`, refreshes projections when
/// materialized. Undecodable payloads abort with `sync.codec.decode_failed`
/// carrying `details.table`.
pub(crate) fn rewrite_rows(
    conn: &Connection,
    table: &CompiledTable,
    plan: &RewritePlan,
    tally: &mut RewriteTally<'_>,
) -> Result<()> {
    let first_page = plan.page_sql(crate::DIALECT, false);
    let next_page = plan.page_sql(crate::DIALECT, true);
    let update = RewritePlan::update_sql(table, crate::DIALECT);
    let mut after: Option<(String, String)> = None;
    loop {
        let page: Vec<(String, String, Vec<u8>)> = {
            let mut stmt = match &after {
                None => seam::cached(conn, &first_page).db()?,
                Some(_) => seam::cached(conn, &next_page).db()?,
            };
            let map = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?, r.get(2)?));
            let rows = match &after {
                None => stmt.query_map([], map).db()?,
                Some((p, id)) => stmt.query_map((p, id), map).db()?,
            };
            rows.collect::<rusqlite::Result<_>>().db()?
        };
        let short = page.len() < REWRITE_PAGE_SIZE;
        let mut stmt = conn.prepare_cached(&update).db()?;
        for (partition, row_id, payload) in &page {
            seam::check(conn, &update).db()?;
            let (values, payload) = rewrite_payload(table, plan, payload)
                .map_err(|e| e.detail("table", &table.name))?;
            let projection: Vec<BindRow<'_>> = if table.materialize {
                values.iter().map(BindRow).collect()
            } else {
                Vec::new()
            };
            let mut params: Vec<&dyn ToSql> = projection.iter().map(|b| b as &dyn ToSql).collect();
            params.push(&payload);
            params.push(partition);
            params.push(row_id);
            stmt.execute(params.as_slice()).db()?;
        }
        drop(stmt);
        tally.advance(&table.name, page.len());
        match page.into_iter().last() {
            Some((p, id, _)) if !short => after = Some((p, id)),
            _ => return Ok(()),
        }
    }
}

/// The rewritten payload and its values under the current columns.
fn rewrite_payload(
    table: &CompiledTable,
    plan: &RewritePlan,
    payload: &[u8],
) -> Result<(Vec<RowValue>, Vec<u8>)> {
    match (&plan.old_layout, plan.migrate) {
        (Some(old), true) => {
            let mut values = codec::decode(old, payload)?;
            values.resize(table.columns.len(), RowValue::Null);
            let payload = codec::encode(&table.columns, &values)?;
            Ok((values, payload))
        }
        _ => Ok((codec::decode(&table.columns, payload)?, payload.to_vec())),
    }
}
