//! A worker process for the process-kill tests (`tests/process_kills.rs`):
//! it opens a database as a server process would (ensuring the stored
//! schema version) and does one kind of work, printing one line on stdout
//! after each thing that is durable, so the parent can choose the moment to
//! `SIGKILL` it without sleeping:
//!
//! ```text
//! syncstore-worker DB push-loop FIRST COUNT
//!     committed <commit_seq> <commit_id>     after each acknowledged push
//! syncstore-worker DB push-threads THREADS FIRST COUNT
//!     committed <commit_seq> <commit_id>     the same, THREADS threads
//!     pushing at once (SQLite: with group commit on, so the pushes queued
//!     behind one another share a COMMIT; a line is printed only after its
//!     push's `commit` returned)
//! syncstore-worker DB migrate PUSHES [hold K]
//!     committed …  (PUSHES pushes), then `migrating`, then
//!     `rewriting <table> <rows done> <rows total>` at the start of each
//!     rewritten table and after each page of rows, then `migrated`
//! syncstore-worker DB start VERSION
//!     `started <version>`: a process configured at VERSION
//!     starting on the database (declaring the migration's checkpoint at
//!     2), without ensuring the stored version first
//! syncstore-worker DB backfill BATCH [hold]
//!     batch <n> watermark <w> epoch <e>    after each committed batch
//!     outcome <activated|…>
//!
//! DB: --sqlite PATH | --postgres SCHEMA | --mariadb DATABASE
//! ```
//!
//! With `hold`, the backfill stops after the first line whose watermark is
//! above 0 (its full pass is stored), and the migration after its `K`-th
//! `rewriting` line (inside the rewrite: on SQLite and Postgres inside the
//! migration transaction, on MariaDB with the journal open), and waits for
//! its standard input to close — the parent kills it there.
//!
//! Postgres is reached at `SYNCSTORE_PG_URL`, MariaDB at
//! `SYNCSTORE_MARIADB_URL` (or the local defaults). Every loop is bounded;
//! a worker whose parent went away stops at its next line.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use sync_backfill::{Progress, ProgressObserver};
use sync_core::{
    CheckpointDeclaration, EnsureOptions, RewriteObserver, RewriteProgress, ServerStorage,
};
use syncstore_tests::scenario::{self, Change, PushOptions, PARTITION, T0};
use syncstore_tests::{fixture, mariadb_url, pg_url};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("syncstore-worker: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let [backend, location, command, rest @ ..] = args else {
        return Err(
            "usage: (--sqlite PATH | --postgres SCHEMA | --mariadb DATABASE) COMMAND ARGS".into(),
        );
    };
    let storage = open(backend, location, command == "push-threads")?;
    let number = |i: usize| -> Result<i64, String> {
        rest.get(i)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("{command}: argument {} must be a number", i + 1))
    };
    if command == "start" {
        // An open migration refuses every process below its version: this
        // one starts at its own.
        let version = i32::try_from(number(0)?).map_err(|e| format!("start: {e}"))?;
        storage
            .ensure_schema(&scenario::schema(version), &migration_options(version))
            .map_err(|e| format!("start at {version}: {e:?}"))?;
        return say(&format!("started {version}"));
    }
    scenario::ensure_stored(storage.as_ref()).map_err(|e| format!("ensure: {e:?}"))?;
    match command.as_str() {
        "push-loop" => push_loop(storage.as_ref(), number(0)?, number(1)?),
        "push-threads" => push_threads(storage.as_ref(), number(0)?, number(1)?, number(2)?),
        "migrate" => {
            let hold_at = match rest.get(1).map(String::as_str) {
                Some("hold") => Some(number(2)?),
                _ => None,
            };
            push_loop(storage.as_ref(), 1, number(0)?)?;
            say("migrating")?;
            let printer = Arc::new(RewritePrinter {
                hold_at: hold_at.and_then(|k| u64::try_from(k).ok()),
                ..RewritePrinter::default()
            });
            storage
                .ensure_schema(
                    &scenario::schema(2),
                    &migration_options(2).with_rewrite_progress(printer),
                )
                .map_err(|e| format!("migrate: {e:?}"))?;
            say("migrated")
        }
        "backfill" => {
            let printer = Arc::new(BatchPrinter {
                hold: rest.get(1).is_some_and(|a| a == "hold"),
                ..BatchPrinter::default()
            });
            let outcome =
                scenario::backfill_observed(storage.as_ref(), number(0)?, T0 + 1_000_000, printer)
                    .map_err(|e| format!("backfill: {e:?}"))?;
            say(&format!("outcome {}", outcome.as_str()))
        }
        other => Err(format!("unknown command {other}")),
    }
}

fn open(backend: &str, location: &str, grouped: bool) -> Result<Box<dyn ServerStorage>, String> {
    match backend {
        "--sqlite" => {
            let config = sync_sqlite::SqliteConfig {
                group_commit: if grouped {
                    sync_sqlite::GroupCommit::ON
                } else {
                    sync_sqlite::GroupCommit::OFF
                },
                ..sync_sqlite::SqliteConfig::default()
            };
            sync_sqlite::SqliteStorage::open(location, config)
                .map(|s| Box::new(s) as Box<dyn ServerStorage>)
                .map_err(|e| format!("open {location}: {e:?}"))
        }
        "--postgres" => {
            let config = sync_postgres::PostgresConfig {
                schema: Some(location.to_owned()),
                pool_size: 2,
                ..sync_postgres::PostgresConfig::default()
            };
            sync_postgres::PostgresStorage::connect(&pg_url(), config)
                .map(|s| Box::new(s) as Box<dyn ServerStorage>)
                .map_err(|e| format!("connect: {e:?}"))
        }
        "--mariadb" => {
            let url = sync_mariadb::MariadbUrl::parse(&mariadb_url())
                .map_err(|e| format!("SYNCSTORE_MARIADB_URL: {e:?}"))?
                .with_database(location);
            let config = sync_mariadb::MariadbConfig {
                // Pushing threads wait for the partition lock inside the
                // server, not for a pooled connection.
                pool_size: if grouped { 8 } else { 2 },
                ..sync_mariadb::MariadbConfig::default()
            };
            sync_mariadb::MariadbStorage::connect_to(url, config)
                .map(|s| Box::new(s) as Box<dyn ServerStorage>)
                .map_err(|e| format!("connect: {e:?}"))
        }
        other => Err(format!("unknown backend {other}")),
    }
}

/// The `ensure_schema` options of a process configured at `version`: at 2
/// it declares the migration's checkpoint.
fn migration_options(version: i32) -> EnsureOptions {
    let declarations = if version >= 2 {
        vec![CheckpointDeclaration::new(
            PARTITION,
            scenario::MIGRATION_CHECKPOINT,
            version,
        )]
    } else {
        Vec::new()
    };
    EnsureOptions::with_declarations(declarations)
}

/// One line on stdout, flushed; an error (the parent is gone) ends the worker.
fn say(line: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

/// Pushes commits `k<first>` … `k<first + count - 1>`: each upserts one of
/// 40 items (moving it between groups), every third also deletes another
/// and updates a note. Prints each acknowledged commit.
fn push_loop(storage: &dyn ServerStorage, first: i64, count: i64) -> Result<(), String> {
    (first..first + count).try_for_each(|i| push_one(storage, i))
}

/// `threads` threads push commits `k<first>` … `k<first + count - 1>`
/// between them (thread `t` takes every `threads`-th one), as
/// [`push_loop`] does one after another.
fn push_threads(
    storage: &dyn ServerStorage,
    threads: i64,
    first: i64,
    count: i64,
) -> Result<(), String> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> Result<(), String> {
                    let mut i = first + t;
                    while i < first + count {
                        push_one(storage, i)?;
                        i += threads;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map_err(|_| "a push thread panicked".to_owned())?)
    })
}

/// Push `k<i>` of the push loops; prints its acknowledgement.
fn push_one(storage: &dyn ServerStorage, i: i64) -> Result<(), String> {
    let id = format!("k{i}");
    let group = ["g1", "g2", "g3"][(i % 3) as usize];
    let mut changes = vec![scenario::item(&format!("r{}", i % 40), group, i)];
    if i % 3 == 0 {
        changes.push(Change::Delete(fixture::ITEMS, format!("r{}", (i + 7) % 40)));
        changes.push(scenario::note("n1", group, i));
    }
    let now = T0 + 10_000 + i;
    match scenario::push(storage, &id, &changes, &PushOptions::default(), now) {
        Ok(Some(seq)) => say(&format!("committed {seq} {id}")),
        Ok(None) => say(&format!("replayed {id}")),
        Err(e) => Err(format!("push {id}: {e:?}")),
    }
}

/// Prints a line after each committed batch of the runner; with `hold`,
/// stops after the first batch line with a watermark above 0 until
/// standard input closes, then exits.
#[derive(Debug, Default)]
struct BatchPrinter {
    last: std::sync::Mutex<u64>,
    hold: bool,
}

impl ProgressObserver for BatchPrinter {
    fn on_progress(&self, progress: &Progress) {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if progress.batches > *last {
            *last = progress.batches;
            if say(&format!(
                "batch {} watermark {} epoch {}",
                progress.batches, progress.watermark, progress.owner_epoch
            ))
            .is_err()
            {
                std::process::exit(3);
            }
            if self.hold && progress.watermark > 0 {
                let mut sink = Vec::new();
                let _ = std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut sink);
                std::process::exit(3);
            }
        }
    }
}

/// Prints a line at each report of the migration's row rewrites; with
/// `hold_at = Some(k)`, stops at the `k`-th until standard input closes,
/// then exits.
#[derive(Debug, Default)]
struct RewritePrinter {
    reports: std::sync::Mutex<u64>,
    hold_at: Option<u64>,
}

impl RewriteObserver for RewritePrinter {
    fn on_rewrite(&self, progress: &RewriteProgress) {
        let mut reports = self
            .reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *reports += 1;
        if say(&format!(
            "rewriting {} {} {}",
            progress.table, progress.rows_done, progress.rows_total
        ))
        .is_err()
        {
            std::process::exit(3);
        }
        if self.hold_at == Some(*reports) {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut sink);
            std::process::exit(3);
        }
    }
}
