//! Row rewrites of a bump (`docs/design/mariadb.md` §6.4, §10.2 step 11):
//! keyset pages over all partitions in the expanded form (MariaDB plans a
//! row-constructor comparison as a full index scan), each page one
//! transaction that also moves the journal's cursor, so a resumed
//! migration never re-encodes a row twice. The preflight's decode scan
//! reads the same pages without writing.

use mysql::Value;
use serde_json::json;
use sync_core::{codec, CompiledSchema, CompiledTable, Result, RewriteTally, RowValue};
use sync_schema::{RewritePlan, StoredLayouts, REWRITE_PAGE_SIZE};

use crate::dialect::quote_ident as q;
use crate::pool::Conn;
use crate::values::{corrupt, projection_value};

/// One table's rewrite as the journal keeps it (the old layout is read
/// back from the stored layouts, which change only when the bump finishes).
pub(crate) fn plan_entry(plan: &RewritePlan) -> serde_json::Value {
    json!({"table": plan.table, "migrate": plan.migrate, "backfill": plan.backfill})
}

/// Rebuilds the rewrite plans of a journal from its entries and the stored
/// (pre-bump) layouts.
pub(crate) fn plans_from_journal(
    entries: &[serde_json::Value],
    stored: &StoredLayouts,
) -> Result<Vec<RewritePlan>> {
    entries
        .iter()
        .map(|e| {
            let table = e["table"].as_str().ok_or_else(|| corrupt("journal_plan"))?;
            Ok(RewritePlan {
                table: table.to_owned(),
                migrate: e["migrate"].as_bool().unwrap_or(false),
                backfill: e["backfill"].as_bool().unwrap_or(false),
                old_layout: stored.get(table).map(<[_]>::to_vec),
            })
        })
        .collect()
}

fn page_sql(table: &str, after: bool) -> String {
    let bound = if after {
        " WHERE `_sync_partition` > ? OR (`_sync_partition` = ? AND `_sync_row_id` > ?)"
    } else {
        ""
    };
    format!(
        "SELECT `_sync_partition`, `_sync_row_id`, `_sync_payload` FROM {}{bound} \
         ORDER BY `_sync_partition`, `_sync_row_id` LIMIT {REWRITE_PAGE_SIZE}",
        q(table)
    )
}

type PageRow = (Vec<u8>, Vec<u8>, Vec<u8>);

fn read_page(
    conn: &mut Conn,
    table: &str,
    after: Option<&(Vec<u8>, Vec<u8>)>,
) -> Result<Vec<PageRow>> {
    match after {
        None => conn.rows(&page_sql(table, false), ()),
        Some((p, id)) => conn.rows(&page_sql(table, true), (p.clone(), p.clone(), id.clone())),
    }
}

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

/// The preflight's decode scan: every payload a rewrite will decode is
/// decoded now, before anything is written; the first failure is
/// `sync.codec.decode_failed` with `details.table`.
pub(crate) fn decode_scan(
    conn: &mut Conn,
    schema: &CompiledSchema,
    plan: &RewritePlan,
) -> Result<()> {
    let Some(table) = schema.table(&plan.table) else {
        return Ok(());
    };
    let mut after = None;
    loop {
        let page = read_page(conn, &plan.table, after.as_ref())?;
        for (_, _, payload) in &page {
            rewrite_payload(table, plan, payload).map_err(|e| e.detail("table", &table.name))?;
        }
        if page.len() < REWRITE_PAGE_SIZE {
            return Ok(());
        }
        after = page.into_iter().last().map(|(p, id, _)| (p, id));
    }
}

/// Rewrites every row of `plan.table` after the journal's cursor, one
/// transaction per page (rows and cursor together).
pub(crate) fn rewrite_table(
    conn: &mut Conn,
    table: &CompiledTable,
    plan: &RewritePlan,
    target_version: i32,
    mut after: Option<(Vec<u8>, Vec<u8>)>,
    now_ms: i64,
    tally: &mut RewriteTally<'_>,
) -> Result<()> {
    let update = RewritePlan::update_sql(table, crate::DIALECT);
    loop {
        let page = read_page(conn, &plan.table, after.as_ref())?;
        let short = page.len() < REWRITE_PAGE_SIZE;
        conn.run("START TRANSACTION")?;
        let written = (|| -> Result<()> {
            for (partition, row_id, payload) in &page {
                let (values, payload) = rewrite_payload(table, plan, payload)
                    .map_err(|e| e.detail("table", &table.name))?;
                let mut params: Vec<Value> = if table.materialize {
                    values.iter().map(projection_value).collect()
                } else {
                    Vec::new()
                };
                params.extend([
                    Value::Bytes(payload),
                    Value::Bytes(partition.clone()),
                    Value::Bytes(row_id.clone()),
                ]);
                conn.exec(&update, params)?;
            }
            let last = page.last().map(|(p, id, _)| (p.clone(), id.clone()));
            conn.exec(
                "UPDATE `sync_migration_journal` SET `state` = 'rewrite', `rewrite_table` = ?, \
                 `rewrite_after_partition` = ?, `rewrite_after_row_id` = ?, `updated_at_ms` = ? \
                 WHERE `target_version` = ?",
                (
                    &plan.table,
                    last.as_ref().map(|(p, _)| p.clone()),
                    last.as_ref().map(|(_, id)| id.clone()),
                    now_ms,
                    target_version,
                ),
            )?;
            Ok(())
        })();
        match written {
            Ok(()) => {
                conn.run("COMMIT")?;
                tally.advance(&table.name, page.len());
            }
            Err(error) => {
                conn.rollback();
                return Err(error);
            }
        }
        if short {
            return Ok(());
        }
        after = page.into_iter().last().map(|(p, id, _)| (p, id));
    }
}

/// Rows of `table` (for progress reports).
pub(crate) fn count_rows(conn: &mut Conn, table: &str) -> Result<u64> {
    let count: Option<i64> = conn.first(&format!("SELECT COUNT(*) FROM {}", q(table)), ())?;
    Ok(count.and_then(|c| u64::try_from(c).ok()).unwrap_or(0))
}
