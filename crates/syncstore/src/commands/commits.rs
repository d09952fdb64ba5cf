//! `commits --partition P [--after SEQ] [--limit N]`: retained commits,
//! oldest first, each with every change of every table, decoded with the
//! stored layouts: `{"commits": [{"commit_seq", "client_id",
//! "client_commit_id", "actor_id", "created_at_ms", "writer_version",
//! "changes": [{"table", "row_id", "op", "row_version", "scopes",
//! "values"}]}], "next"}`.
//!
//! Deletes carry `row_version` and `values` null. History written before a
//! bump that appended columns decodes under the layout prefix it was written
//! with (only those columns appear). A change whose table has no stored
//! layout (a retired table) or whose payload does not decode shows
//! `"values": null` plus `"payload_hex"`. `next` is the last commit's
//! sequence number when more commits follow, else null.

use serde_json::{json, Value};
use sync_core::{ChangeOp, CommitRecord, StoredChange};
use sync_schema::StoredLayouts;

use crate::cli::CommitsArgs;
use crate::error::CliResult;
use crate::escape::field;
use crate::output::Report;
use crate::stored::{require_known_partition, stored_schema};
use crate::url::Database;
use crate::values::{decode_payload, scopes_to_json};

/// Runs `commits`.
pub fn run(db: &Database, args: &CommitsArgs) -> CliResult<Report> {
    let storage = db.storage();
    require_known_partition(storage, &args.partition)?;
    let commits = storage.read_commits(&args.partition, args.after, args.limit)?;
    let (_, layouts) = stored_schema(storage)?;
    let next = match commits.last() {
        Some(last) if commits.len() as i64 >= args.limit => {
            let more = storage.read_commits(&args.partition, last.commit_seq, 1)?;
            (!more.is_empty()).then_some(last.commit_seq)
        }
        _ => None,
    };
    let mut text = String::new();
    let listed: Vec<Value> = commits
        .iter()
        .map(|commit| {
            text.push_str(&commit_text(commit));
            commit_json(&layouts, commit)
        })
        .collect();
    text.push_str(&format!(
        "{} commits{}\n",
        listed.len(),
        next.map_or_else(String::new, |n| format!("; more after {n} (--after {n})"))
    ));
    Ok(Report::new(json!({"commits": listed, "next": next}), text))
}

fn commit_json(layouts: &StoredLayouts, commit: &CommitRecord) -> Value {
    json!({
        "commit_seq": commit.commit_seq,
        "client_id": commit.client_id,
        "client_commit_id": commit.client_commit_id,
        "actor_id": commit.actor_id,
        "created_at_ms": commit.created_at_ms,
        "writer_version": commit.writer_version,
        "changes": commit.changes.iter().map(|c| change_json(layouts, c)).collect::<Vec<_>>(),
    })
}

fn change_json(layouts: &StoredLayouts, change: &StoredChange) -> Value {
    let values = match (&change.op, &change.payload) {
        (ChangeOp::Upsert, Some(payload)) => layouts
            .get(&change.table)
            .and_then(|layout| decode_payload(layout, payload))
            .map(Value::Object),
        _ => None,
    };
    let undecoded = if values.is_none() {
        change.payload.as_ref()
    } else {
        None
    };
    let mut json = json!({
        "table": change.table,
        "row_id": change.row_id,
        "op": change.op.as_str(),
        "row_version": change.row_version,
        "scopes": scopes_to_json(&change.scopes),
        "values": values,
    });
    if let Some(payload) = undecoded {
        json["payload_hex"] = Value::String(hex::encode(payload));
    }
    json
}

fn commit_text(commit: &CommitRecord) -> String {
    let mut text = format!(
        "#{} {} {} by {} at {} ({}): {} changes\n",
        commit.commit_seq,
        field(&commit.client_id),
        field(&commit.client_commit_id),
        field(&commit.actor_id),
        commit.created_at_ms,
        commit.writer_version.map_or_else(
            || "no writer version".to_owned(),
            |v| format!("writer v{v}")
        ),
        commit.changes.len()
    );
    for change in &commit.changes {
        text.push_str(&format!(
            "  {} {} {}{}\n",
            change.op.as_str(),
            field(&change.table),
            field(&change.row_id),
            change
                .row_version
                .map_or_else(String::new, |v| format!(" v{v}"))
        ));
    }
    text
}
