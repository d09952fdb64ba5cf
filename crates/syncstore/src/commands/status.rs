//! `status [--partition P]`: the schema marker and fences, the stored
//! tables, and per partition its log counters, effective writer fence, serve
//! gate and checkpoints.
//!
//! The gate is evaluated for a process running the stored version with no
//! declarations (what an undeclared, up-to-date server would be told).
//!
//! A fence number is only reported when the database enforces it: the
//! state of the fence trigger is read first, before anything else touches
//! the database, and a trigger that is missing, disabled, runs something
//! else or is defined otherwise (timing, events, level, a `WHEN`
//! condition) is the error `sync.cli.fence_not_enforced` with its `cause`
//! (and, for `trigger_tampered`, the `difference`).

use serde_json::{json, Value};
use sync_core::{serve_gate_refusal, FenceTriggerState, ServeContext, ServerStorage};
use sync_postgres::CitusPlacement;

use crate::cli::PartitionFilter;
use crate::error::{CliCode, CliError, CliResult};
use crate::escape::{field, safe};
use crate::output::Report;
use crate::stored::{
    checkpoint_json, checkpoint_text, layout_json, listed_partitions, require_known_partition,
    stored_schema, stored_version,
};
use crate::url::Database;

/// Runs `status`.
pub fn run(db: &Database, args: &PartitionFilter) -> CliResult<Report> {
    let storage = db.storage();
    let trigger = storage.writer_fence_trigger()?;
    let (marker, layouts) = stored_schema(storage)?;
    let fence_raised = marker
        .as_ref()
        .and_then(|m| m.required_writer_version)
        .is_some_and(|fence| fence > 0);
    require_enforced_fence(trigger, fence_raised)?;
    let running = stored_version(marker.as_ref());
    let names: Vec<String> = layouts.iter().map(|(name, _)| name.to_owned()).collect();
    let observed = db.observe_tables(&names)?;

    let synchronous = db.sqlite_synchronous()?.map(|s| s.as_pragma());
    let mut text = format!("database: {}\n", safe(&db.url().describe()));
    if let Some(level) = synchronous {
        text.push_str(&format!("durability: synchronous={level}\n"));
    }
    let page_size = db.sqlite_page_size()?;
    if let Some(size) = page_size {
        text.push_str(&format!("file: page_size={size}\n"));
    }
    let citus = db.citus_placement()?;
    if let Some(placement) = citus {
        text.push_str(citus_line(placement));
    }
    match &marker {
        Some(m) => text.push_str(&format!(
            "schema version {}, database-wide writer fence {}\n",
            m.schema_version,
            m.required_writer_version
                .map_or_else(|| "none".to_owned(), |f| f.to_string())
        )),
        None => text.push_str("no schema yet (run `syncstore migrate --schema FILE`)\n"),
    }
    if trigger == FenceTriggerState::Missing {
        text.push_str(
            "writer-fence trigger not installed: no fence raised yet \
             (`syncstore migrate` installs it)\n",
        );
    }

    let mut tables = Vec::new();
    for (name, layout) in layouts.iter() {
        let materialized = observed
            .get(name)
            .is_some_and(|t| t.exists && layout.iter().all(|c| t.column(&c.name).is_some()));
        text.push_str(&format!(
            "table {}: {} columns, {}\n",
            field(name),
            layout.len(),
            if materialized {
                "materialized"
            } else {
                "payload only"
            }
        ));
        tables.push(
            json!({"name": name, "columns": layout_json(layout), "materialized": materialized}),
        );
    }

    let partitions = match &args.partition {
        Some(partition) => {
            require_known_partition(storage, partition)?;
            vec![partition.clone()]
        }
        None => listed_partitions(storage, running)?,
    };
    let mut listed = Vec::new();
    for partition in &partitions {
        let (json, lines) = partition_status(storage, partition, running)?;
        listed.push(json);
        text.push_str(&lines);
    }
    if partitions.is_empty() {
        text.push_str("no partitions\n");
    }

    let mut json = json!({
        "schema_version": marker.as_ref().map(|m| m.schema_version),
        "required_writer_version": marker.as_ref().and_then(|m| m.required_writer_version),
        "tables": tables,
        "partitions": listed,
        "synchronous": synchronous,
        "page_size": page_size,
    });
    // Only on a Citus coordinator: everywhere else the document keeps its
    // pinned shape.
    if let (Some(placement), Some(object)) = (citus, json.as_object_mut()) {
        object.insert(
            "citus".to_owned(),
            json!({
                "placement": placement.as_str(),
                "distributed": placement != CitusPlacement::Coordinator,
            }),
        );
    }
    Ok(Report::new(json, text))
}

/// The text line of a storage on a Citus coordinator. Tables left local
/// to the coordinator are worth a warning: a database without schema-based
/// sharding keeps a schema-based setup there without a word
/// (`docs/scale-out.md`).
fn citus_line(placement: CitusPlacement) -> &'static str {
    match placement {
        CitusPlacement::ByPartition => "citus: distributed by partition\n",
        CitusPlacement::DistributedSchema => "citus: distributed schema (one node holds it)\n",
        CitusPlacement::Coordinator => {
            "citus: warning: the storage's tables are local to the coordinator, nothing is \
             distributed (run `syncstore distribute`, or create the schema with schema-based \
             sharding on; docs/scale-out.md)\n"
        }
    }
}

/// Fails with `sync.cli.fence_not_enforced` unless the fence trigger
/// enforces the stored fences (or there is no commit table yet). A database
/// no syncstore process has set up yet (one the reference wrote before the
/// migration barrier) has neither the trigger nor a database-wide fence:
/// there is no fence to misreport, so a missing trigger is only an error
/// once a fence is raised (`docs/decisions.md`).
fn require_enforced_fence(trigger: FenceTriggerState, fence_raised: bool) -> CliResult<()> {
    match trigger.cause() {
        None => Ok(()),
        Some(_) if trigger == FenceTriggerState::Missing && !fence_raised => Ok(()),
        Some(cause) => {
            let error = CliError::new(CliCode::FenceNotEnforced).detail("cause", cause);
            Err(match trigger.difference() {
                Some(difference) => error.detail("difference", difference.as_str()),
                None => error,
            })
        }
    }
}

fn partition_status(
    storage: &dyn ServerStorage,
    partition: &str,
    running: i32,
) -> CliResult<(Value, String)> {
    let max_commit_seq = storage.get_max_commit_seq(partition)?;
    let horizon_seq = storage.get_horizon_seq(partition)?;
    let log_epoch = storage.get_partition_log_epoch(partition)?;
    let writer_fence = storage.required_writer_version(partition)?;
    let gate = storage.read_serve_gate(partition, running)?;
    let refusal = serve_gate_refusal(&gate, running, &ServeContext::default());
    let checkpoints = storage.read_checkpoints(partition)?;

    let reason = refusal.as_ref().map(|r| r.reason());
    let mut text = format!(
        "partition {}: max_commit_seq {max_commit_seq}, horizon {horizon_seq}, log epoch {}, writer fence {}, gate {}\n",
        field(partition),
        field(log_epoch.as_deref().unwrap_or("none")),
        writer_fence.map_or_else(|| "none".to_owned(), |f| f.to_string()),
        match reason {
            None => "serves".to_owned(),
            Some(reason) => format!("refuses ({reason})"),
        }
    );
    for checkpoint in &checkpoints {
        text.push_str(&format!("  checkpoint {}\n", checkpoint_text(checkpoint)));
    }
    let json = json!({
        "partition": partition,
        "max_commit_seq": max_commit_seq,
        "horizon_seq": horizon_seq,
        "log_epoch": log_epoch,
        "writer_fence": writer_fence,
        "gate": {"serve": refusal.is_none(), "reason": reason},
        "checkpoints": checkpoints.iter().map(checkpoint_json).collect::<Vec<_>>(),
    });
    Ok((json, text))
}
