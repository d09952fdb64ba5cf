//! Connection faults under load on Postgres: four threads push
//! continuously while the server restarts (`server-restart`) or every
//! backend of the storage is terminated (`killed-backends`); each pusher
//! retries a retryable error under the same commit id, as a client
//! would. Afterwards every acknowledged push has its stored result and
//! its commit, sequences are dense, and the figures are printed.
//!
//! `killed-backends` runs on the test server in a schema of its own
//! (`SYNCSTORE_KILL_BACKEND_ROUNDS`, default 3). `server-restart` needs a
//! cluster it may restart: it creates a throwaway local cluster with
//! `pg_createcluster` (so the shared server is never restarted), which
//! requires root and the Debian cluster tools, and runs only when
//! `SYNCSTORE_RESTART_ROUNDS` is set (`cargo xtask soak` sets it);
//! otherwise it prints why it was skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;

use sync_core::{EnsureOptions, ErrorCode, ServerStorage};
use sync_postgres::{PostgresConfig, PostgresStorage};
use syncstore_tests::scenario::{self, PushOptions, CLIENT, PARTITION, T0};

const PUSHERS: usize = 4;
/// Acknowledged pushes between two faults (and after the last).
const ACKS_BETWEEN: usize = 40;

fn rounds(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// What the pushers saw.
#[derive(Debug, Default)]
struct Figures {
    acknowledged: BTreeSet<String>,
    errors: BTreeMap<String, u64>,
    /// Commit ids whose push ended `outcome_unknown` at least once.
    unknown: BTreeSet<String>,
    /// Of those, the ones whose retry found the stored result (committed).
    unknown_committed: u64,
}

/// Pushes until `stop`, retrying each retryable failure under the same
/// commit id; reports each acknowledgement on `acks`.
fn pusher(
    storage: &PostgresStorage,
    thread: usize,
    stop: &AtomicBool,
    acks: &mpsc::Sender<()>,
    figures: &Mutex<Figures>,
) {
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let id = format!("t{thread}-{n}");
        let changes = [scenario::item(&format!("i-{id}"), "g1", n as i64)];
        let mut was_unknown = false;
        loop {
            match scenario::push(storage, &id, &changes, &PushOptions::default(), T0) {
                Ok(seq) => {
                    let mut f = figures.lock().unwrap_or_else(|p| p.into_inner());
                    if was_unknown && seq.is_none() {
                        f.unknown_committed += 1;
                    }
                    f.acknowledged.insert(id.clone());
                    drop(f);
                    let _ = acks.send(());
                    break;
                }
                Err(error) => {
                    assert!(
                        error.retryable(),
                        "push {id}: a connection fault surfaced as a non-retryable error: {error:?}"
                    );
                    let mut f = figures.lock().unwrap_or_else(|p| p.into_inner());
                    *f.errors
                        .entry(error.code().as_str().to_owned())
                        .or_default() += 1;
                    if error.is(ErrorCode::OutcomeUnknown) {
                        was_unknown = true;
                        f.unknown.insert(id.clone());
                    }
                }
            }
        }
    }
}

/// Runs the pushers, calling `fault` `rounds` times, each after
/// `ACKS_BETWEEN` acknowledgements; then checks that nothing acknowledged
/// was lost and prints the figure line.
fn run_family(family: &str, storage: &PostgresStorage, rounds: u64, fault: &dyn Fn()) {
    storage
        .ensure_schema(&scenario::schema(1), &EnsureOptions::default())
        .expect("ensure");
    let stop = AtomicBool::new(false);
    let figures = Mutex::new(Figures::default());
    let (tx, rx) = mpsc::channel();
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        for thread in 0..PUSHERS {
            let (stop, figures, tx) = (&stop, &figures, tx.clone());
            scope.spawn(move || pusher(storage, thread, stop, &tx, figures));
        }
        drop(tx);
        for _ in 0..rounds {
            for _ in 0..ACKS_BETWEEN {
                rx.recv().expect("a pusher ended early");
            }
            fault();
        }
        for _ in 0..ACKS_BETWEEN {
            rx.recv().expect("a pusher ended early");
        }
        stop.store(true, Ordering::SeqCst);
        // Drain so no pusher blocks on a full channel (it is unbounded).
        while rx.try_recv().is_ok() {}
    });
    let figures = figures.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut lost = Vec::new();
    let mut seqs = BTreeSet::new();
    for id in &figures.acknowledged {
        match storage
            .get_push_result(PARTITION, CLIENT, id)
            .expect("read result")
        {
            Some(result) => {
                let seq = result.commit_seq.expect("an applied push has a sequence");
                assert!(
                    seqs.insert(seq),
                    "{family}: sequence {seq} acknowledged twice"
                );
            }
            None => lost.push(id.clone()),
        }
    }
    let max = storage.get_max_commit_seq(PARTITION).expect("max seq");
    println!(
        "{family} postgres: {rounds} fault(s), {} pushes acknowledged, {} lost, errors {:?}, \
         outcome_unknown on {} commit(s) of which {} had committed, max_commit_seq {max}, {:.1}s",
        figures.acknowledged.len(),
        lost.len(),
        figures.errors,
        figures.unknown.len(),
        figures.unknown_committed,
        started.elapsed().as_secs_f64()
    );
    assert!(
        lost.is_empty(),
        "{family}: acknowledged pushes lost: {lost:?}"
    );
    // Every push was retried until acknowledged, under its own commit id:
    // exactly one commit each, none twice.
    assert_eq!(
        max,
        figures.acknowledged.len() as i64,
        "{family}: commits and acknowledged pushes differ"
    );
}

fn pg_url() -> String {
    std::env::var("SYNCSTORE_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

fn config(schema: Option<String>) -> PostgresConfig {
    PostgresConfig {
        schema,
        pool_size: PUSHERS as u32,
        pool_wait_ms: 2_000,
        ..PostgresConfig::default()
    }
}

#[test]
fn pushes_survive_killed_backends() {
    let rounds = rounds("SYNCSTORE_KILL_BACKEND_ROUNDS", 3);
    let url = pg_url();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).expect("admin connection");
    let name = format!("kb_{:x}_{}", std::process::id(), T0 % 1000);
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"
        ))
        .expect("schema");
    let storage = PostgresStorage::connect(
        &with_param(&url, &format!("application_name={name}")),
        config(Some(name.clone())),
    )
    .expect("connect");
    let admin = Mutex::new(admin);
    run_family("killed-backends", &storage, rounds, &|| {
        admin
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .query(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity \
                 WHERE application_name = $1",
                &[&name],
            )
            .expect("terminate");
    });
    drop(storage);
    let _ = admin
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"));
}

/// A throwaway local cluster, dropped at the end.
struct Cluster {
    version: String,
    name: String,
    port: u16,
}

impl Cluster {
    /// Creates and starts the cluster, or says why it cannot.
    fn create() -> Result<Self, String> {
        let uid = run("id", &["-u"])?;
        if uid.trim() != "0" {
            return Err("not running as root (pg_createcluster / pg_ctlcluster need it)".into());
        }
        let clusters = run("pg_lsclusters", &["--no-header"])?;
        let version = clusters
            .split_whitespace()
            .next()
            .ok_or("pg_lsclusters lists no cluster to take the version from")?
            .to_owned();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let name = format!("syncstore_restart_{}", std::process::id());
        let port_text = port.to_string();
        run(
            "pg_createcluster",
            &[
                &version,
                &name,
                "--port",
                &port_text,
                "--start",
                "--",
                "--auth=trust",
            ],
        )?;
        Ok(Self {
            version,
            name,
            port,
        })
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn restart(&self) {
        if let Err(e) = run("pg_ctlcluster", &[&self.version, &self.name, "restart"]) {
            panic!("restarting the cluster: {e}");
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = run("pg_dropcluster", &["--stop", &self.version, &self.name]);
    }
}

/// Runs a command; its stdout, or why it failed.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program} is not available ({e})"))?;
    if !output.status.success() {
        return Err(format!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn pushes_survive_server_restarts() {
    let rounds = rounds("SYNCSTORE_RESTART_ROUNDS", 0);
    if rounds == 0 {
        println!("server-restart: skipped: SYNCSTORE_RESTART_ROUNDS is not set (cargo xtask soak sets it)");
        return;
    }
    let cluster = match Cluster::create() {
        Ok(cluster) => cluster,
        Err(reason) => {
            println!("server-restart: skipped: {reason}");
            return;
        }
    };
    let storage = PostgresStorage::connect(&cluster.url(), config(None)).expect("connect");
    run_family("server-restart", &storage, rounds, &|| cluster.restart());
}
