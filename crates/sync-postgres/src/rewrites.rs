//! Row rewrites of a bump (`schema-and-migrations.md` §11): keyset pages of
//! 500 rows over `(_sync_partition, _sync_row_id)`, every partition; each
//! row's payload re-encoded (when columns were appended) and its projection
//! refreshed from it.

use postgres::types::ToSql;
use sync_core::{codec, CompiledTable, Result, RewriteTally};
use sync_schema::{RewritePlan, REWRITE_PAGE_SIZE};

use crate::pool::{col, Conn};
use crate::sql::quote_ident;
use crate::values::{column_param, column_value, param_refs, Param};

/// `UPDATE` of one row: projection columns (materialized tables), then the
/// payload, keyed by partition and row id (parameters in that order).
fn update_sql(table: &CompiledTable) -> String {
    let mut assignments = Vec::new();
    let mut n = 1;
    if table.materialize {
        for column in &table.columns {
            assignments.push(format!(
                "{} = {}",
                quote_ident(&column.name),
                column_param(column.column_type, n)
            ));
            n += 1;
        }
    }
    assignments.push(format!("\"_sync_payload\" = ${n}::bytea"));
    format!(
        "UPDATE {} SET {} WHERE \"_sync_partition\" = ${}::text AND \"_sync_row_id\" = ${}::text",
        quote_ident(&table.name),
        assignments.join(", "),
        n + 1,
        n + 2
    )
}

/// The rows a rewrite of `plan`'s table will visit.
pub(crate) fn count_rows(conn: &mut Conn, plan: &RewritePlan) -> Result<u64> {
    let row = conn.query_one(&plan.count_sql(crate::DIALECT), &[])?;
    let count: i64 = col(&row, 0)?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// Rewrites every row of `table` according to `plan`.
pub(crate) fn rewrite_table(
    conn: &mut Conn,
    table: &CompiledTable,
    plan: &RewritePlan,
    tally: &mut RewriteTally<'_>,
) -> Result<()> {
    let first = plan.page_sql(crate::DIALECT, false);
    let next = plan.page_sql(crate::DIALECT, true);
    let update = update_sql(table);
    let mut after: Option<(String, String)> = None;
    loop {
        let rows = match &after {
            None => conn.query(&first, &[])?,
            Some((partition, row_id)) => conn.query(&next, &[partition, row_id])?,
        };
        for row in &rows {
            let partition: String = col(row, 0)?;
            let row_id: String = col(row, 1)?;
            let payload: Vec<u8> = col(row, 2)?;
            rewrite_row(conn, table, plan, &update, &partition, &row_id, &payload)?;
            after = Some((partition, row_id));
        }
        tally.advance(&table.name, rows.len());
        if rows.len() < REWRITE_PAGE_SIZE {
            return Ok(());
        }
    }
}

fn rewrite_row(
    conn: &mut Conn,
    table: &CompiledTable,
    plan: &RewritePlan,
    update: &str,
    partition: &str,
    row_id: &str,
    payload: &[u8],
) -> Result<()> {
    let with_table = |e: sync_core::Error| e.detail("table", &table.name);
    let payload = match (&plan.old_layout, plan.migrate) {
        (Some(old), true) => codec::reencode(old, &table.columns, payload).map_err(with_table)?,
        _ => payload.to_vec(),
    };
    let mut params: Vec<Param> = Vec::new();
    if table.materialize {
        let values = codec::decode(&table.columns, &payload).map_err(with_table)?;
        for (column, value) in table.columns.iter().zip(values) {
            params.push(column_value(column.column_type, value)?);
        }
    }
    let mut refs: Vec<&(dyn ToSql + Sync)> = param_refs(&params);
    refs.push(&payload);
    refs.push(&partition);
    refs.push(&row_id);
    conn.execute(update, &refs).map(|_| ())
}
