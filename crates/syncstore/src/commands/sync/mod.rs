//! `sync`: one sync round of the engine from a JSON-lines request — the
//! operator's and tester's door to push and pull.
//!
//! The command plays a server process started with `--schema` (and any
//! `--declare`d checkpoints) for one authenticated `(partition, actor)`
//! whose allowed scopes are the `--allow` values. It never migrates: the
//! database must already be at the schema file's version.

mod render;
mod request;

use std::sync::Arc;

use sync_core::{CheckpointDeclaration, EnsureOptions};
use sync_engine::{
    Engine, EngineConfig, EngineError, RequestContext, ResolveError, ResponseItem, ScopeMap,
    ScopeResolver,
};

use crate::cli::SyncArgs;
use crate::error::{root_cause, CliCode, CliError};
use crate::stored::load_schema_file;
use crate::url::DatabaseUrl;

use render::JsonLinesSink;

/// How a `sync` run ended.
#[derive(Debug)]
pub enum SyncEnd {
    /// The round ran to `END` without an `ERROR` (exit 0).
    Completed,
    /// The request failed at request level; its `ERROR` frame is on stdout
    /// (exit 1).
    Refused,
    /// The round failed without a wire code (storage or output failure;
    /// exit 1, `error: …` on stderr).
    Failed(CliError),
    /// No round ran: database, schema file, request file, or the database
    /// is not at the schema's version (exit 2, `error: …`).
    NotStarted(CliError),
}

/// Runs `sync`.
pub fn run(db: Option<&str>, args: &SyncArgs) -> SyncEnd {
    let (engine, schema) = match start(db, args) {
        Ok(started) => started,
        Err(error) => return SyncEnd::NotStarted(error),
    };
    let text = match request::read_text(&args.request) {
        Ok(text) => text,
        Err(error) => return SyncEnd::NotStarted(error),
    };
    let stdout = std::io::stdout();
    let request = match request::parse(&text, &schema) {
        Ok(request) => request,
        Err(error) => {
            let wire = error
                .to_wire_error()
                .with_detail("line", error.line)
                .with_detail("problem", error.reason.clone());
            return write_refusal(ResponseItem::Error(wire));
        }
    };
    let ctx = RequestContext::new(&args.partition, &args.actor);
    let mut sink = JsonLinesSink::new(stdout.lock(), &schema, &request, args.raw_bytes);
    match engine.handle(&ctx, &request, &mut sink) {
        Ok(outcome) if outcome.error.is_some() => SyncEnd::Refused,
        Ok(_) => SyncEnd::Completed,
        Err(EngineError::Request(wire)) => {
            drop(sink);
            write_refusal(ResponseItem::Error(wire))
        }
        Err(error) => SyncEnd::Failed(internal(error)),
    }
}

/// Opens the database, checks the version, ensures the schema as a server
/// process would and builds the engine.
fn start(
    db: Option<&str>,
    args: &SyncArgs,
) -> Result<(Engine, Arc<sync_core::CompiledSchema>), CliError> {
    let resolver = Arc::new(AllowedScopes::from_args(args));
    let (engine, schema, _) = open_engine(db, &args.schema, &args.declare, resolver)?;
    Ok((engine, schema))
}

/// The engine of a server process, its schema and its storage.
pub(crate) type OpenedEngine = (
    Engine,
    Arc<sync_core::CompiledSchema>,
    Arc<dyn sync_core::ServerStorage>,
);

/// What a server process does at startup, shared by `sync` and `serve`:
/// opens the database, checks it is at the schema file's version
/// (`sync.cli.schema_mismatch` otherwise; nothing is migrated), ensures
/// the schema with the `--declare`d checkpoints and builds the engine
/// over `resolver`.
pub(crate) fn open_engine(
    db: Option<&str>,
    schema_file: &std::path::Path,
    declare: &[crate::cli::Declaration],
    resolver: Arc<dyn ScopeResolver>,
) -> Result<OpenedEngine, CliError> {
    let database = DatabaseUrl::resolve(db)?.open()?;
    let schema = Arc::new(load_schema_file(schema_file)?);
    let storage = database.shared_storage();
    let stored = storage.read_schema_marker()?.map(|m| m.schema_version);
    if stored != Some(i64::from(schema.version)) {
        return Err(CliError::new(CliCode::SchemaMismatch)
            .detail(
                "stored",
                stored.map_or_else(|| "none".to_owned(), |v| v.to_string()),
            )
            .detail("schema", schema.version));
    }
    let declarations: Vec<CheckpointDeclaration> = declare
        .iter()
        .map(|d| CheckpointDeclaration::new(&d.partition, &d.name, schema.version))
        .collect();
    storage.ensure_schema(
        &schema,
        &EnsureOptions::with_declarations(declarations.clone()),
    )?;
    let mut config = EngineConfig::new(resolver);
    config.declarations = declarations;
    let engine = Engine::new(storage.clone(), schema.clone(), config).map_err(internal)?;
    Ok((engine, schema, storage))
}

/// Prints a request-level refusal as its `ERROR` frame.
fn write_refusal(item: ResponseItem) -> SyncEnd {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out
        .write_all(item.to_json_lines().as_bytes())
        .and_then(|()| out.flush())
    {
        Ok(()) => SyncEnd::Refused,
        Err(error) => SyncEnd::Failed(output_failed(&error.kind().to_string())),
    }
}

/// An engine failure without a wire code, keeping the storage code when
/// there is one.
pub(crate) fn internal(error: EngineError) -> CliError {
    match error {
        EngineError::Internal { source } => match source.downcast::<sync_core::Error>() {
            Ok(storage) => CliError::from(*storage),
            Err(other) => CliError::from(
                sync_core::Error::backend(root_cause(other.as_ref())).detail("reason", "engine"),
            ),
        },
        EngineError::Sink(failure) => output_failed(&failure.reason),
        EngineError::Config { reason } => {
            CliError::from(sync_core::Error::invalid_argument("engine", reason))
        }
        EngineError::Request(wire) => {
            CliError::from(sync_core::Error::backend(wire.code.clone()).detail("reason", "request"))
        }
    }
}

fn output_failed(reason: &str) -> CliError {
    CliError::new(CliCode::Io)
        .detail("path", "-")
        .detail("reason", reason)
}

/// The resolver of `--allow`: the same allowed scopes for every request.
#[derive(Debug)]
struct AllowedScopes(ScopeMap);

impl AllowedScopes {
    fn from_args(args: &SyncArgs) -> Self {
        let mut allowed = ScopeMap::new();
        for scope in &args.allow {
            let values = allowed.entry(scope.key.clone()).or_default();
            for value in &scope.values {
                if !values.contains(value) {
                    values.push(value.clone());
                }
            }
        }
        Self(allowed)
    }
}

impl ScopeResolver for AllowedScopes {
    fn resolve(&self, _: &str, _: &str, _: &str) -> Result<ScopeMap, ResolveError> {
        Ok(self.0.clone())
    }
}
