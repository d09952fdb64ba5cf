//! Figures for group commit and background WAL checkpoints
//! (`docs/benchmarks.md`, "Group commit and background checkpoints").
//!
//! ```text
//! cargo run --release -p sync-sqlite --example group_commit_figures [PUSHES] [ROUNDS] [THREADS]
//! ```
//!
//! Each cell pushes single-row commits through the storage API (the W1
//! sequence: the idempotency read, `begin`, push lock, serve gate, the read
//! under the lock, one upsert, the append, the push result, `commit`) from
//! 1, 4 or 16 threads to one partition, on a fresh database file, and
//! reports commits/s and the p50/p99 latency of one push. Three modes run
//! in the same process, alternating cell by cell (A B C A B C …) for
//! `ROUNDS` rounds: `inline` (grouping off, SQLite's automatic checkpoint on
//! the committing connection — the storage before issue 17), `background`
//! (grouping off, background checkpoints — the new default) and `grouped`
//! (`GroupCommit::ON`, background checkpoints); each under
//! `synchronous = FULL` and `NORMAL`; `background-1000` is `background`
//! with a pass every 1 000 commits instead of 100. PUSHES (default 2 000)
//! is the number of pushes per cell, split between the threads; THREADS is
//! a comma-separated list (default `1,4,16`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use sync_core::{codec, EnsureOptions, NewChange, NewCommit, RowValue, ServerStorage, StoredRow};
use sync_sqlite::{GroupCommit, SqliteConfig, SqliteStorage, Synchronous, WalCheckpoints};

const SCHEMA: &str = r#"{"version": 1, "tables": [{"name": "todos", "primaryKey": "id",
    "columns": [{"name": "id", "type": "string"}, {"name": "list_id", "type": "string"},
                {"name": "title", "type": "string"}],
    "scopes": ["list:{list_id}"]}]}"#;

#[derive(Clone, Copy)]
struct Mode {
    name: &'static str,
    group: GroupCommit,
    wal: Option<WalCheckpoints>,
}

const MODES: [Mode; 4] = [
    Mode {
        name: "inline",
        group: GroupCommit::OFF,
        wal: None,
    },
    Mode {
        name: "background",
        group: GroupCommit::OFF,
        wal: Some(WalCheckpoints {
            every_commits: 100,
            truncate_above_pages: 4_000,
        }),
    },
    Mode {
        name: "background-1000",
        group: GroupCommit::OFF,
        wal: Some(WalCheckpoints {
            every_commits: 1_000,
            truncate_above_pages: 4_000,
        }),
    },
    Mode {
        name: "grouped",
        group: GroupCommit::ON,
        wal: Some(WalCheckpoints {
            every_commits: 100,
            truncate_above_pages: 4_000,
        }),
    },
];

struct Cell {
    commits_per_s: f64,
    latencies: Vec<Duration>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let pushes: usize = args.first().map_or(Ok(2_000), |a| a.parse())?;
    let rounds: usize = args.get(1).map_or(Ok(2), |a| a.parse())?;
    let thread_counts: Vec<usize> = args
        .get(2)
        .map_or("1,4,16", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let schema = sync_schema::compile(&sync_schema::parse_schema_json(SCHEMA)?)?;
    println!("| synchronous | threads | mode | commits/s (per round) | p50 µs | p99 µs |");
    println!("|---|---|---|---|---|---|");
    for synchronous in [Synchronous::Full, Synchronous::Normal] {
        for &threads in &thread_counts {
            let mut results: Vec<Vec<Cell>> = MODES.iter().map(|_| Vec::new()).collect();
            for _ in 0..rounds {
                for (i, mode) in MODES.iter().enumerate() {
                    results[i].push(run_cell(&schema, *mode, synchronous, threads, pushes)?);
                }
            }
            for (mode, cells) in MODES.iter().zip(results) {
                let rates: Vec<String> = cells
                    .iter()
                    .map(|c| format!("{:.0}", c.commits_per_s))
                    .collect();
                let mut all: Vec<Duration> = cells.into_iter().flat_map(|c| c.latencies).collect();
                all.sort_unstable();
                println!(
                    "| {} | {threads} | {} | {} | {} | {} |",
                    synchronous.as_pragma(),
                    mode.name,
                    rates.join(" / "),
                    percentile(&all, 50).as_micros(),
                    percentile(&all, 99).as_micros(),
                );
            }
        }
    }
    Ok(())
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn run_cell(
    schema: &sync_core::CompiledSchema,
    mode: Mode,
    synchronous: Synchronous,
    threads: usize,
    pushes: usize,
) -> Result<Cell, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let config = SqliteConfig {
        synchronous,
        group_commit: mode.group,
        wal_checkpoints: mode.wal,
        ..SqliteConfig::default()
    };
    let storage = Arc::new(SqliteStorage::open(dir.path().join("bench.db"), config)?);
    storage.ensure_schema(schema, &EnsureOptions::default())?;
    let per_thread = pushes / threads;
    let started = Instant::now();
    let latencies = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let storage = Arc::clone(&storage);
                scope.spawn(move || -> sync_core::Result<Vec<Duration>> {
                    let mut latencies = Vec::with_capacity(per_thread);
                    for i in 0..per_thread {
                        let begun = Instant::now();
                        push(storage.as_ref(), schema, &format!("c{t}"), i)?;
                        latencies.push(begun.elapsed());
                    }
                    Ok(latencies)
                })
            })
            .collect();
        let mut all = Vec::new();
        for handle in handles {
            match handle.join() {
                Ok(Ok(latencies)) => all.extend(latencies),
                Ok(Err(e)) => return Err(Box::new(e) as Box<dyn std::error::Error>),
                Err(_) => return Err("a push thread panicked".into()),
            }
        }
        Ok(all)
    })?;
    let elapsed = started.elapsed();
    Ok(Cell {
        commits_per_s: (per_thread * threads) as f64 / elapsed.as_secs_f64(),
        latencies,
    })
}

/// The W1 push sequence through the storage API, one row.
fn push(
    storage: &dyn ServerStorage,
    schema: &sync_core::CompiledSchema,
    client: &str,
    i: usize,
) -> sync_core::Result<i64> {
    let ccid = format!("k{i}");
    let id = format!("{client}-{i}");
    let list = format!("list-{}", i % 10);
    let table = schema
        .table("todos")
        .ok_or_else(|| sync_core::Error::unknown_table("todos"))?;
    let payload = codec::encode_row(
        table,
        &[
            RowValue::String(id.clone()),
            RowValue::String(list.clone()),
            RowValue::String(format!("title {i}")),
        ],
    )?;
    let row = StoredRow {
        row_id: id,
        server_version: 1,
        scopes: [("list_id".to_owned(), list)].into(),
        payload,
        column_versions: None,
    };
    let _ = storage.get_push_result("p", client, &ccid)?;
    let mut tx = storage.begin("p")?;
    tx.lock_partition_for_push()?;
    let _gate = tx.read_serve_gate(tx.writer_version())?;
    let _ = tx.get_push_result(client, &ccid)?;
    tx.upsert_row("todos", &row, Some(0))?;
    let seq = tx.append_commit(&NewCommit {
        client_id: client.to_owned(),
        client_commit_id: ccid.clone(),
        actor_id: "bench".to_owned(),
        created_at_ms: 1_700_000_000_000,
        changes: vec![NewChange::upsert(
            "todos",
            row.row_id.clone(),
            row.server_version,
            row.scopes.clone(),
            row.payload.clone(),
        )],
    })?;
    tx.put_push_result(client, &ccid, &sync_core::StoredPushResult::applied(seq))?;
    tx.commit()?;
    Ok(seq)
}
