//! One module per command; each takes the opened database and its
//! arguments and returns a [`Report`] or a coded error.

mod backfill;
mod checkpoints;
mod commits;
mod migrate;
mod prune;
mod rows;
mod status;
pub mod sync;

use crate::cli::{Cli, Command};
use crate::error::CliResult;
use crate::output::{Format, Report};
use crate::url::DatabaseUrl;

/// Runs the parsed command.
pub fn run(cli: &Cli, format: Format) -> CliResult<Report> {
    let open = || DatabaseUrl::resolve(cli.db.as_deref())?.open();
    match &cli.command {
        Command::Demo(args) => crate::demo::run(cli.db.as_deref(), args, format),
        Command::Migrate(args) => migrate::run(&open()?, args),
        Command::Status(args) => status::run(&open()?, args),
        Command::Checkpoints(args) => checkpoints::run(&open()?, args),
        Command::Backfill(args) => backfill::run(&open()?, args),
        Command::Prune(args) => prune::run(&open()?, args),
        Command::Rows(args) => rows::run(&open()?, args),
        Command::Commits(args) => commits::run(&open()?, args),
        // Streams JSON lines and has its own exit statuses: `main` runs it.
        Command::Sync(_) => unreachable!("`sync` is dispatched by main"),
    }
}
