//! `rows --partition P --table T [--after ROW_ID] [--limit N]`: current rows
//! of a table named in the stored layouts (no schema file needed), in row-id
//! byte order, decoded with the stored layout:
//! `{"rows": [{"row_id", "server_version", "scopes", "values"}], "next"}`.
//!
//! `next` is the last row id when more rows follow, else null. A payload the
//! layout cannot decode (never written by this code) is shown as
//! `"values": null` plus `"payload_hex"`.

use serde_json::{json, Value};
use sync_core::StoredRow;

use crate::cli::RowsArgs;
use crate::error::CliResult;
use crate::escape::{field, json_text};
use crate::output::Report;
use crate::stored::{require_known_partition, stored_layout, stored_schema};
use crate::url::Database;
use crate::values::{decode_payload, scopes_to_json};

/// Runs `rows`.
pub fn run(db: &Database, args: &RowsArgs) -> CliResult<Report> {
    let storage = db.storage();
    require_known_partition(storage, &args.partition)?;
    let rows = storage.inspect_table_rows(
        &args.partition,
        &args.table,
        args.after.as_deref(),
        args.limit,
    )?;
    let (_, layouts) = stored_schema(storage)?;
    let layout = stored_layout(&layouts, &args.table)?;
    let next = match rows.last() {
        Some(last) if rows.len() as i64 >= args.limit => {
            let more =
                storage.inspect_table_rows(&args.partition, &args.table, Some(&last.row_id), 1)?;
            (!more.is_empty()).then(|| last.row_id.clone())
        }
        _ => None,
    };
    let listed: Vec<Value> = rows.iter().map(|row| row_json(layout, row)).collect();
    let mut text = String::new();
    for row in &listed {
        text.push_str(&json_text(row, false));
        text.push('\n');
    }
    text.push_str(&format!(
        "{} rows{}\n",
        listed.len(),
        next.as_ref().map_or_else(String::new, |n| {
            let n = field(n);
            format!("; more after {n} (--after {n})")
        })
    ));
    Ok(Report::new(json!({"rows": listed, "next": next}), text))
}

fn row_json(layout: &[sync_core::LayoutColumn], row: &StoredRow) -> Value {
    let mut json = json!({
        "row_id": row.row_id,
        "server_version": row.server_version,
        "scopes": scopes_to_json(&row.scopes),
        "values": decode_payload(layout, &row.payload).map(Value::Object),
    });
    if json["values"].is_null() {
        json["payload_hex"] = Value::String(hex::encode(&row.payload));
    }
    json
}
