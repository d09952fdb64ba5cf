//! One module per command; each takes the opened database and its
//! arguments and returns a [`Report`] or a coded error.

mod backfill;
mod checkpoints;
mod commits;
mod distribute;
mod errors;
mod migrate;
mod prune;
mod rows;
pub mod serve;
pub mod ssp2;
mod status;
pub mod sync;

use crate::cli::{Cli, Command};
use crate::error::CliResult;
use crate::output::{Format, Report};
use crate::url::DatabaseUrl;

/// Runs the parsed command.
pub fn run(cli: &Cli, format: Format) -> CliResult<Report> {
    let open = || DatabaseUrl::resolve(cli.db.as_deref())?.open();
    // Inspection never writes: no bootstrap, no file created, read-only
    // transactions (works on a read-only file, replica or role).
    let inspect = || DatabaseUrl::resolve(cli.db.as_deref())?.open_read_only();
    match &cli.command {
        Command::Demo(args) => {
            let explicit = cli.db.clone().or_else(|| {
                std::env::var(crate::url::DATABASE_URL_ENV)
                    .ok()
                    .filter(|url| !url.is_empty())
            });
            crate::demo::run(explicit.as_deref(), args, format)
        }
        Command::Errors(args) => errors::run(args),
        // The schema file and the names are checked before the database is
        // opened: a bad argument never creates a file, a schema or a table.
        Command::Migrate(args) => {
            let prepared = migrate::prepare(args)?;
            migrate::run(&open()?, args, prepared)
        }
        Command::Status(args) => status::run(&inspect()?, args),
        Command::Checkpoints(args) => checkpoints::run(&inspect()?, args),
        Command::Backfill(args) => {
            let schema = crate::stored::load_schema_file(&args.schema)?;
            sync_core::validate::checkpoint_name(&args.name)?;
            backfill::run(&open()?, args, schema)
        }
        Command::Prune(args) => prune::run(&open()?, args),
        Command::Distribute(args) => distribute::run(&open()?, args),
        Command::Rows(args) => rows::run(&inspect()?, args),
        Command::Commits(args) => commits::run(&inspect()?, args),
        // Streams JSON lines and has its own exit statuses: `main` runs it.
        Command::Sync(_) => unreachable!("`sync` is dispatched by main"),
        Command::Ssp2(_) => unreachable!("`ssp2` is dispatched by main"),
        Command::Serve(_) => unreachable!("`serve` is dispatched by main"),
    }
}
