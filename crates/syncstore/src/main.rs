//! `syncstore`: the operator command line of the syncstore storage layer —
//! migrate, inspect, backfill and prune a sync database, and `demo`, which
//! tells and shows the whole RFC 0007 story on a fresh database.
//!
//! The interface (commands, flags, JSON shapes, exit codes, error format) is
//! pinned by issue 6 and documented in `docs/operations.md`. This file only
//! parses the command line and dispatches.
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations, clippy::use_self)]

mod cli;
mod commands;
mod demo;
mod error;
mod escape;
mod output;
mod plan;
mod progress;
mod projectors;
mod retiring;
mod row_identity;
mod scratch;
mod secrets;
mod stored;
mod url;
mod values;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::cli::{Cli, Command};
use crate::output::Format;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Backfill(args) = &cli.command {
        if let Err(message) = args.check_kind_options() {
            Cli::command()
                .error(clap::error::ErrorKind::ArgumentConflict, message)
                .exit();
        }
    }
    secrets::remember(&url::resolved_text(cli.db.as_deref()));
    output::init_logs(cli.verbose);
    let format = if cli.json { Format::Json } else { Format::Text };
    if let Command::Ssp2(command) = &cli.command {
        return ssp2_exit(commands::ssp2::run(command), format);
    }
    if let Command::Serve(args) = &cli.command {
        return match commands::serve::run(cli.db.as_deref(), args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                output::print_error(&error, format);
                ExitCode::from(2)
            }
        };
    }
    if let Command::Sync(args) = &cli.command {
        return sync_exit(commands::sync::run(cli.db.as_deref(), args), format);
    }
    match commands::run(&cli, format) {
        Ok(report) => {
            output::print_report(&report, format);
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::debug!(code = error.code(), "command failed");
            output::log_chain(&error);
            output::print_error(&error, format);
            ExitCode::from(1)
        }
    }
}

/// `sync` exit statuses: 0 the round ended with `END` and no `ERROR`; 1 a
/// request-level `ERROR` (on stdout) or a failure without a wire code (on
/// stderr); 2 no round ran (usage, database, files, schema version).
fn sync_exit(end: commands::sync::SyncEnd, format: Format) -> ExitCode {
    use commands::sync::SyncEnd;
    match end {
        SyncEnd::Completed => ExitCode::SUCCESS,
        SyncEnd::Refused => ExitCode::from(1),
        SyncEnd::Failed(error) => {
            output::print_error(&error, format);
            ExitCode::from(1)
        }
        SyncEnd::NotStarted(error) => {
            output::print_error(&error, format);
            ExitCode::from(2)
        }
    }
}

/// `ssp2` exit statuses: 0 the file decoded (its rendering or encoding on
/// stdout); 1 it did not (`{"error": {...}}` on stdout); 2 it could not be
/// read.
fn ssp2_exit(end: commands::ssp2::Ssp2End, format: Format) -> ExitCode {
    use commands::ssp2::Ssp2End;
    use std::io::Write as _;
    match end {
        Ssp2End::Output(bytes) => {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Ssp2End::Refused(document) => {
            println!("{document}");
            ExitCode::from(1)
        }
        Ssp2End::NotStarted(error) => {
            output::print_error(&error, format);
            ExitCode::from(2)
        }
    }
}
