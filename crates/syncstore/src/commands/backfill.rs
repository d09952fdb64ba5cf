//! `backfill --partition P --name N --schema FILE --projector KIND [options]`:
//! runs the RFC 0007 checkpoint runner for one partition until the
//! checkpoint activates.
//!
//! The command acts as the declaring process: the schema file must be at the
//! database's stored version (`sync.cli.schema_mismatch` otherwise — run
//! `migrate` first; a backfill never migrates), and it ensures that schema
//! declaring every checkpoint pending at that version plus `(P, N)`, so the
//! startup check passes and its batches pass the serve gate.
//!
//! `(P, N)` must already exist (declared by `migrate --declare`, at any
//! state). An undeclared name is refused with `sync.cli.checkpoint_undeclared`
//! naming the partition's declared checkpoints, unless `--declare-new`: then
//! the runner declares it (raising P's writer fence). A typo would otherwise
//! declare a bogus checkpoint that closes the partition to every process
//! that does not declare it.
//!
//! Outcomes `activated` and `already_activated` succeed; `superseded` (another
//! runner took the checkpoint over) and `gave_up` (attempts exhausted) fail
//! with `sync.cli.backfill_incomplete`, `details.outcome` naming which.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use sync_backfill::{CheckpointRunner, Projector, RunOutcome, RunnerConfig};
use sync_core::{
    CheckpointDeclaration, CompiledSchema, EnsureOptions, Error, ErrorCode, ServeContext,
};

use crate::cli::{BackfillArgs, ProjectorKind};
use crate::error::{CliCode, CliError, CliResult};
use crate::escape::{field, pair};
use crate::output::Report;
use crate::progress::BackfillProgress;
use crate::projectors;
use crate::stored::{count_rows, require_known_partition};
use crate::url::Database;

/// Runs `backfill`.
/// `schema` is the loaded `--schema` file (loaded before the database is
/// opened, so a bad file changes nothing).
pub fn run(db: &Database, args: &BackfillArgs, schema: CompiledSchema) -> CliResult<Report> {
    let storage = db.storage();
    let version = schema.version;
    let stored = storage.read_schema_marker()?.map(|m| m.schema_version);
    if stored != Some(i64::from(version)) {
        return Err(CliError::new(CliCode::SchemaMismatch)
            .detail(
                "stored",
                stored.map_or_else(|| "none".to_owned(), |v| v.to_string()),
            )
            .detail("schema", version));
    }
    require_known_partition(storage, &args.partition)?;
    sync_core::validate::checkpoint_name(&args.name)?;
    require_declared(storage, args)?;

    let declarations = declarations(db, &schema, args)?;
    storage.ensure_schema(
        &schema,
        &EnsureOptions::with_declarations(declarations.clone()),
    )?;
    let ensured = storage
        .ensured_schema()
        .ok_or_else(|| Error::new(ErrorCode::SchemaNotEnsured))?;
    let projector = build_projector(ensured, args)?;

    let counted = count_source_rows(storage, &args.partition, projector.sources())?;
    let progress = BackfillProgress::new(
        &format!("backfill {}", pair(&args.partition, &args.name)),
        Some(counted),
    );
    let config = RunnerConfig {
        batch_size: args.batch_size,
        max_attempts: args.max_attempts,
        ..RunnerConfig::default()
    };
    let started = Instant::now();
    tracing::info!(partition = %field(&args.partition), name = %field(&args.name), version, "backfill starting");
    let outcome = CheckpointRunner::new(
        storage,
        &args.partition,
        &args.name,
        version,
        projector.as_ref(),
    )
    .with_config(config)
    .with_serve_context(ServeContext {
        declarations,
        expected_log_epoch: None,
    })
    .with_progress(progress.clone())
    .run();
    progress.finish();
    let outcome = outcome?;
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(outcome = outcome.as_str(), elapsed_ms, "backfill finished");
    report(args, version, &outcome, elapsed_ms)
}

/// `(P, N)` exists, or `--declare-new` says the backfill may declare it;
/// else `sync.cli.checkpoint_undeclared` with the partition's declared
/// checkpoints (`details.declared`, `name@version`, comma-separated).
fn require_declared(storage: &dyn sync_core::ServerStorage, args: &BackfillArgs) -> CliResult<()> {
    if args.declare_new
        || storage
            .read_checkpoint(&args.partition, &args.name)?
            .is_some()
    {
        return Ok(());
    }
    let declared: Vec<String> = storage
        .read_checkpoints(&args.partition)?
        .iter()
        .map(|c| format!("{}@{}", c.name, c.schema_version))
        .collect();
    Err(CliError::new(CliCode::CheckpointUndeclared)
        .detail("partition", &args.partition)
        .detail("name", &args.name)
        .detail("declared", declared.join(","))
        .detail("hint", "check the name, or pass --declare-new"))
}

/// Rows of the projector's source tables in the partition now: the total
/// the progress display counts towards (a full pass reads each once).
fn count_source_rows(
    storage: &dyn sync_core::ServerStorage,
    partition: &str,
    sources: &[String],
) -> CliResult<u64> {
    let mut total = 0;
    for table in sources {
        total += count_rows(storage, partition, table)?;
    }
    Ok(total)
}

/// Every checkpoint pending at the version, plus `(P, N)`.
fn declarations(
    db: &Database,
    schema: &CompiledSchema,
    args: &BackfillArgs,
) -> CliResult<Vec<CheckpointDeclaration>> {
    let mut declarations: Vec<CheckpointDeclaration> = db
        .storage()
        .list_pending_checkpoints(schema.version)?
        .into_iter()
        .map(|key| CheckpointDeclaration::new(key.partition, key.name, schema.version))
        .collect();
    let own = CheckpointDeclaration::new(&args.partition, &args.name, schema.version);
    if !declarations.contains(&own) {
        declarations.push(own);
    }
    Ok(declarations)
}

fn build_projector(
    schema: Arc<CompiledSchema>,
    args: &BackfillArgs,
) -> CliResult<Box<dyn Projector>> {
    let missing = |option: &str| {
        CliError::new(CliCode::InvalidProjector)
            .detail("option", option)
            .detail("reason", "missing")
    };
    Ok(match args.projector {
        ProjectorKind::DerivedColumn => Box::new(projectors::derived_column(
            schema,
            args.table.as_deref().ok_or_else(|| missing("--table"))?,
            args.column.as_deref().ok_or_else(|| missing("--column"))?,
            args.from.as_deref().ok_or_else(|| missing("--from"))?,
            args.transform,
        )?),
        ProjectorKind::DerivedTable => Box::new(projectors::derived_table(
            schema,
            args.source.as_deref().ok_or_else(|| missing("--source"))?,
            args.target.as_deref().ok_or_else(|| missing("--target"))?,
            &args.map,
        )?),
    })
}

fn report(
    args: &BackfillArgs,
    version: i32,
    outcome: &RunOutcome,
    elapsed_ms: u64,
) -> CliResult<Report> {
    let (owner_epoch, watermark, observed_rows) = match outcome {
        RunOutcome::Activated {
            owner_epoch,
            watermark,
            observed_rows,
        } => (Some(*owner_epoch), Some(*watermark), Some(*observed_rows)),
        RunOutcome::Superseded { owner_epoch } => (Some(*owner_epoch), None, None),
        RunOutcome::AlreadyActivated | RunOutcome::GaveUp { .. } => (None, None, None),
    };
    match outcome {
        RunOutcome::Superseded { owner_epoch } => {
            return Err(CliError::new(CliCode::BackfillIncomplete)
                .detail("outcome", outcome.as_str())
                .detail("owner_epoch", owner_epoch))
        }
        RunOutcome::GaveUp { attempts } => {
            return Err(CliError::new(CliCode::BackfillIncomplete)
                .detail("outcome", outcome.as_str())
                .detail("attempts", attempts))
        }
        RunOutcome::Activated { .. } | RunOutcome::AlreadyActivated => {}
    }
    let json = json!({
        "partition": args.partition,
        "name": args.name,
        "schema_version": version,
        "outcome": outcome.as_str(),
        "owner_epoch": owner_epoch,
        "watermark": watermark,
        "observed_rows": observed_rows,
        "elapsed_ms": elapsed_ms,
    });
    let detail = match (owner_epoch, watermark, observed_rows) {
        (Some(epoch), Some(mark), Some(rows)) => {
            format!(" (owner epoch {epoch}, watermark {mark}, {rows} rows observed)")
        }
        _ => String::new(),
    };
    let text = format!(
        "backfill {} at schema version {version}: {}{detail} in {elapsed_ms} ms\n",
        pair(&args.partition, &args.name),
        outcome.as_str()
    );
    Ok(Report::new(json, text))
}
