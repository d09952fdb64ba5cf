//! `migrate --schema FILE [--declare PARTITION:NAME]... [--new-partition]
//! [--carry PARTITION:NAME]... [--abandon PARTITION:NAME]... [--retire TABLE]...
//! [--dry-run]`.
//!
//! Checks the arguments (a declaration names a known partition unless
//! `--new-partition`; names are valid), previews the plan (with the refusals
//! `ensure_schema` would raise, finish-or-refuse included), then (unless
//! `--dry-run`) runs `ensure_schema` with the declarations and resolutions.
//! The preview refuses a bump that would retire a table holding rows not
//! named by `--retire`, or change the identity of existing rows
//! ([`crate::plan`]).
//!
//! The command is exact under concurrency: whatever another `migrate` did
//! meanwhile, afterwards every requested declaration exists at the target
//! version — installed by the bump, already there, or declared online now —
//! or the command fails with a coded error. It reports what *it* did:
//! `applied` is true only when this run migrated the database (another
//! process that got there first makes it false), and `declared_online` lists
//! the declarations this run added after the migration.
//!
//! Resolutions are exact too: after the run every `--carry` and `--abandon`
//! is checked against the stored checkpoint, and one another process
//! resolved the other way fails the command with
//! `sync.cli.resolution_not_applied` (see [`verify`]).

use serde_json::{json, Value};
use sync_core::{
    CheckpointDeclaration, Clock, CompiledSchema, EnsureOptions, Error, ErrorCode, Resolution,
    ServerStorage, StoredCheckpoint, SystemClock, UnfinishedResolution,
};

use crate::cli::MigrateArgs;
use crate::error::{CliCode, CliError, CliResult};
use crate::escape::{field, pair};
use crate::output::Report;
use crate::plan;
use crate::progress::RewriteMeter;
use crate::stored::{load_schema_file, partition_is_known, stored_schema};
use crate::url::Database;

mod verify;

use verify::{verify_declared, verify_resolved};

/// How often `migrate` verifies again after a concurrent migration changed
/// the pending checkpoints under it.
const RACE_RETRIES: u32 = 8;

/// What `migrate` checks before opening the database: the schema file and
/// the declarations (valid partition and checkpoint names), so a bad
/// argument never creates a file, a schema or a table.
#[derive(Debug)]
pub struct Prepared {
    schema: CompiledSchema,
    declarations: Vec<CheckpointDeclaration>,
}

/// Loads the schema file and validates every named checkpoint.
pub fn prepare(args: &MigrateArgs) -> CliResult<Prepared> {
    let schema = load_schema_file(&args.schema)?;
    let declarations: Vec<CheckpointDeclaration> = args
        .declare
        .iter()
        .map(|d| CheckpointDeclaration::new(&d.partition, &d.name, schema.version))
        .collect();
    for d in args.declare.iter().chain(&args.carry).chain(&args.abandon) {
        sync_core::validate::partition(&d.partition)?;
        sync_core::validate::checkpoint_name(&d.name)?;
    }
    Ok(Prepared {
        schema,
        declarations,
    })
}

/// Runs `migrate` with what [`prepare`] checked.
pub fn run(db: &Database, args: &MigrateArgs, prepared: Prepared) -> CliResult<Report> {
    let Prepared {
        schema,
        declarations,
    } = prepared;
    let storage = db.storage();
    let (marker, layouts) = stored_schema(storage)?;
    let from = marker.as_ref().map(|m| m.schema_version);
    check_declarations(storage, &declarations, args.new_partition)?;
    let resolutions = resolutions(args);
    let before = existing(storage, &declarations)?;
    let before_resolved = verify::before_resolutions(storage, &resolutions)?;
    // The preview runs the startup check too: a declaration another
    // `migrate` adds between listing the pending checkpoints and that check
    // is a lost race, not a refusal — list again and preview again (bounded).
    let mut retries = 0;
    let (effective, preview) = loop {
        let effective = with_raced_pending(storage, &declarations, schema.version)?;
        match plan::preview(
            db,
            &schema,
            marker.as_ref(),
            &layouts,
            &effective,
            &resolutions,
            &args.retire,
        ) {
            Ok(preview) => break (effective, preview),
            Err(error)
                if retries < RACE_RETRIES
                    && error.code() == ErrorCode::CheckpointIncomplete.as_str()
                    && target_reached(storage, schema.version)? =>
            {
                tracing::info!("another migration declared a checkpoint; previewing again");
                retries += 1;
            }
            Err(error) => return Err(error),
        }
    };
    let mut declared_online = Vec::new();
    let applied = if args.dry_run {
        false
    } else {
        tracing::info!(from = ?from, to = schema.version, action = preview.action(), "migrating");
        // Other `migrate`s may install or declare checkpoints at the target
        // meanwhile: re-read the pending ones and verify again (bounded).
        let mut effective = effective;
        let mut retries = 0;
        let rewrites = RewriteMeter::new(&format!("migrate v{} rewrites", schema.version));
        let outcome = loop {
            let opts = EnsureOptions {
                unfinished: resolutions.clone(),
                refuse_unfinished: true,
                ..EnsureOptions::with_declarations(effective.clone())
            }
            .with_rewrite_progress(rewrites.clone());
            let result = storage.ensure_schema_outcome(&schema, &opts);
            rewrites.finish();
            match result {
                Ok(outcome) => break outcome,
                Err(error)
                    if retries < RACE_RETRIES
                        && lost_bump_race(storage, &error, None, schema.version)? =>
                {
                    tracing::info!(
                        "another migration changed the pending checkpoints; verifying again"
                    );
                    retries += 1;
                    effective = with_raced_pending(storage, &declarations, schema.version)?;
                }
                Err(error) => return Err(error.into()),
            }
        };
        declared_online = declare_missing(storage, &declarations)?;
        verify_declared(storage, &declarations)?;
        verify_resolved(
            storage,
            &resolutions,
            &before_resolved,
            schema.version,
            outcome.applied(),
        )?;
        outcome.applied()
    };
    let declared_json: Vec<Value> = declared_online
        .iter()
        .map(|d| json!({"partition": d.partition, "name": d.name, "schemaVersion": d.schema_version}))
        .collect();
    let json = json!({
        "from_version": from,
        "to_version": schema.version,
        "applied": applied,
        "declared_online": declared_json,
        "plan": preview.to_json(&schema, &declarations),
    });
    let from_text = from.map_or_else(|| "none (fresh database)".to_owned(), |v| v.to_string());
    let mut text = format!(
        "schema version {from_text} → {} ({}): {}\n",
        schema.version,
        preview.action(),
        match (args.dry_run, applied) {
            (true, _) => "dry run, nothing changed",
            (false, true) => "applied",
            (false, false) => "already there, nothing migrated by this run",
        }
    );
    text.push_str(&preview.to_text());
    for d in &declarations {
        let state = declaration_text(d, &before, &declared_online, args.dry_run, applied);
        text.push_str(&format!(
            "checkpoint {} at version {}: {state}\n",
            pair(&d.partition, &d.name),
            d.schema_version
        ));
    }
    Ok(Report::new(json, text))
}

/// Names are valid checkpoint names (the message blames the name) and
/// every partition is known to the database unless `--new-partition`.
fn check_declarations(
    storage: &dyn ServerStorage,
    declarations: &[CheckpointDeclaration],
    new_partition: bool,
) -> CliResult<()> {
    for d in declarations {
        sync_core::validate::partition(&d.partition)?;
        sync_core::validate::checkpoint_name(&d.name)?;
        if !new_partition && !partition_is_known(storage, &d.partition)? {
            return Err(CliError::new(CliCode::UnknownPartition)
                .detail("partition", &d.partition)
                .detail("hint", "check the name, or pass --new-partition"));
        }
    }
    Ok(())
}

/// `migrate` is an operator command, not a serving process: it runs
/// declaring every checkpoint already pending at the target version besides
/// the requested ones. So a run that lost the bump to another `migrate`
/// (before or after reading the marker) never fails the startup check for
/// checkpoints it never meant to refuse; it adds its own online instead.
fn with_raced_pending(
    storage: &dyn ServerStorage,
    requested: &[CheckpointDeclaration],
    version: i32,
) -> CliResult<Vec<CheckpointDeclaration>> {
    let mut all = requested.to_vec();
    for key in storage.list_pending_checkpoints(version)? {
        let own = CheckpointDeclaration::new(key.partition, key.name, version);
        if !all.contains(&own) {
            all.push(own);
        }
    }
    Ok(all)
}

/// `--carry` and `--abandon` as library resolutions.
fn resolutions(args: &MigrateArgs) -> Vec<UnfinishedResolution> {
    let carry = args
        .carry
        .iter()
        .map(|d| UnfinishedResolution::new(&d.partition, &d.name, Resolution::Carry));
    let abandon = args
        .abandon
        .iter()
        .map(|d| UnfinishedResolution::new(&d.partition, &d.name, Resolution::Abandon));
    carry.chain(abandon).collect()
}

/// The declared checkpoints that already exist, before this run.
fn existing(
    storage: &dyn ServerStorage,
    declarations: &[CheckpointDeclaration],
) -> CliResult<Vec<StoredCheckpoint>> {
    let mut found = Vec::new();
    for d in declarations {
        if let Some(checkpoint) = storage.read_checkpoint(&d.partition, &d.name)? {
            found.push(checkpoint);
        }
    }
    Ok(found)
}

/// `checkpoint_incomplete` while the marker is at the target: another
/// process bumped or declared concurrently (`from`, when given, must be
/// below the target).
fn lost_bump_race(
    storage: &dyn ServerStorage,
    error: &Error,
    from: Option<i64>,
    version: i32,
) -> CliResult<bool> {
    if error.code() != ErrorCode::CheckpointIncomplete
        || from.is_some_and(|v| v >= i64::from(version))
    {
        return Ok(false);
    }
    target_reached(storage, version)
}

/// The stored marker is at `version` (another process may have bumped it).
fn target_reached(storage: &dyn ServerStorage, version: i32) -> CliResult<bool> {
    let now = storage.read_schema_marker()?.map(|m| m.schema_version);
    Ok(now == Some(i64::from(version)))
}

/// Declares online every requested checkpoint that does not exist yet
/// (the marker is at the target version now); returns those it declared.
fn declare_missing(
    storage: &dyn ServerStorage,
    declarations: &[CheckpointDeclaration],
) -> CliResult<Vec<CheckpointDeclaration>> {
    let mut declared = Vec::new();
    for d in declarations {
        if storage.read_checkpoint(&d.partition, &d.name)?.is_none() {
            storage.declare_checkpoint(
                &d.partition,
                &d.name,
                d.schema_version,
                SystemClock.now_ms(),
            )?;
            tracing::info!(partition = %field(&d.partition), name = %field(&d.name), "declared online");
            declared.push(d.clone());
        }
    }
    Ok(declared)
}

/// What happened (or, in a dry run, would happen) to one declaration.
fn declaration_text(
    d: &CheckpointDeclaration,
    before: &[StoredCheckpoint],
    declared_online: &[CheckpointDeclaration],
    dry_run: bool,
    applied: bool,
) -> String {
    let existing = before
        .iter()
        .find(|c| c.partition == d.partition && c.name == d.name);
    match existing {
        Some(c) if c.schema_version != d.schema_version => format!(
            "taken at version {} ({}): refused",
            c.schema_version,
            c.state.as_str()
        ),
        Some(c) => format!("already declared ({})", c.state.as_str()),
        None if dry_run => "would be declared".to_owned(),
        None if declared_online.contains(d) => "declared online".to_owned(),
        None if applied => "declared by the migration".to_owned(),
        None => "declared by the concurrent migration".to_owned(),
    }
}
