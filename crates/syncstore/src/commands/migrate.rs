//! `migrate --schema FILE [--declare PARTITION:NAME]... [--dry-run]`.
//!
//! Previews the plan, then (unless `--dry-run`) runs `ensure_schema` with the
//! declarations. On a bump or a fresh database the declarations are
//! installed in the migration transaction; at the same version, where
//! `ensure_schema` does not install them, each is then declared online with
//! `declare_checkpoint` (idempotent), so after `migrate` every declared
//! checkpoint exists either way.

use serde_json::json;
use sync_core::{CheckpointDeclaration, Clock, EnsureOptions, SystemClock};

use crate::cli::MigrateArgs;
use crate::error::CliResult;
use crate::output::Report;
use crate::plan;
use crate::stored::{load_schema_file, stored_schema};
use crate::url::Database;

/// Runs `migrate`.
pub fn run(db: &Database, args: &MigrateArgs) -> CliResult<Report> {
    let schema = load_schema_file(&args.schema)?;
    let storage = db.storage();
    let (marker, layouts) = stored_schema(storage)?;
    let from = marker.as_ref().map(|m| m.schema_version);
    let declarations: Vec<CheckpointDeclaration> = args
        .declare
        .iter()
        .map(|d| CheckpointDeclaration::new(&d.partition, &d.name, schema.version))
        .collect();
    let preview = plan::preview(db, &schema, marker.as_ref(), &layouts, &declarations)?;
    if !args.dry_run {
        tracing::info!(from = ?from, to = schema.version, action = preview.action(), "migrating");
        storage.ensure_schema(
            &schema,
            &EnsureOptions::with_declarations(declarations.clone()),
        )?;
        if from == Some(i64::from(schema.version)) {
            let now = SystemClock.now_ms();
            for d in &declarations {
                storage.declare_checkpoint(&d.partition, &d.name, d.schema_version, now)?;
            }
        }
    }
    let applied = !args.dry_run;
    let json = json!({
        "from_version": from,
        "to_version": schema.version,
        "applied": applied,
        "plan": preview.to_json(&schema, &declarations),
    });
    let from_text = from.map_or_else(|| "none (fresh database)".to_owned(), |v| v.to_string());
    let mut text = format!(
        "schema version {from_text} → {} ({}): {}\n",
        schema.version,
        preview.action(),
        if applied {
            "applied"
        } else {
            "dry run, nothing changed"
        }
    );
    text.push_str(&preview.to_text());
    for d in &declarations {
        text.push_str(&format!(
            "checkpoint {}:{} declared at version {}\n",
            d.partition, d.name, d.schema_version
        ));
    }
    Ok(Report::new(json, text))
}
