//! Process kills: a real worker process (`syncstore-worker`) pushes, migrates
//! or backfills; the test reads its progress lines and sends it `SIGKILL`
//! after a number of them chosen by a seeded generator (no sleeps, no
//! timing), then reopens the database as a new process and checks:
//!
//! - every invariant of the checker;
//! - nothing acknowledged is lost: each `committed` line the worker printed
//!   (before or as it died) is a stored push result and a retained commit;
//! - a worker pushing from 8 threads at once (SQLite: with group commit on)
//!   killed while a commit group is open loses only pushes it had not
//!   acknowledged;
//! - a killed migration left the database at version 1 or 2, never between,
//!   and a new process completes it; killed while held inside its row
//!   rewrites, a migration that is one transaction (SQLite, Postgres) left
//!   version 1, and a MariaDB one (DDL commits statement by statement) left
//!   the migration open — its journal read around the API, every process
//!   at version 1 refused — and a new process at version 2 rolls it
//!   forward (once per dialect whatever the seed, from a rewrite cursor);
//! - a killed backfill resumes in a new worker (owner epoch + 1) and
//!   activates with the full projection;
//! - a backfill killed after its full pass stored a watermark above 0, with
//!   source writes before the takeover, activates with those writes
//!   projected too (once per dialect).
//!
//! Dialects: SQLite (a temporary file), Postgres (a schema on
//! `SYNCSTORE_PG_URL`), MariaDB (a scratch database on
//! `SYNCSTORE_MARIADB_URL`); a fresh database per scenario.
//!
//! Budget: `SYNCSTORE_KILL_ROUNDS` (default 3) rounds of every scenario per
//! dialect (7 kills a round); `SYNCSTORE_KILL_SEED` picks the kill points.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use sync_core::{CheckpointState, ErrorCode, ServerStorage};
use syncstore_tests::invariants::InvariantChecker;
use syncstore_tests::scenario::{self, Change, PushOptions, PARTITION, T0};
use syncstore_tests::{fixture, mariadb_url, pg_url};

#[path = "process_kills/kill_db.rs"]
mod kill_db;

use kill_db::KillDb;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high`.
    fn between(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low + 1) as u64) as usize
    }
}

fn env_count(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("{var} must be a positive integer, got {v:?}")),
        _ => default,
    }
}

fn rng(dialect: &str, scenario: u64) -> Rng {
    let seed = env_count("SYNCSTORE_KILL_SEED", 0x0007_C0DE);
    let salt = match dialect {
        "sqlite" => 1,
        "postgres" => 2,
        _ => 3,
    };
    Rng(seed ^ (salt << 32) ^ (scenario << 40))
}

// ---- the worker ----------------------------------------------------------

struct Worker {
    child: Child,
    lines: std::io::Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
    /// Kept open so that a holding worker waits until it is killed.
    _stdin: Option<ChildStdin>,
}

impl Worker {
    fn spawn(db: &KillDb, command: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_syncstore-worker"))
            .args(db.args())
            .args(command)
            .env("SYNCSTORE_PG_URL", pg_url())
            .env(sync_mariadb::scratch::URL_VARIABLE, mariadb_url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn syncstore-worker: {e}"));
        let stdout = child
            .stdout
            .take()
            .unwrap_or_else(|| panic!("worker stdout"));
        let stdin = child.stdin.take();
        Self {
            child,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
            _stdin: stdin,
        }
    }

    /// Reads lines until `count` of them satisfy `progress`, then sends
    /// SIGKILL, reaps the process and reads what it wrote before dying.
    /// Returns whether the kill happened before the worker ended by itself.
    fn kill_after(&mut self, count: usize, progress: impl Fn(&str) -> bool) -> bool {
        let mut matched = 0;
        while matched < count {
            match self.lines.next() {
                Some(Ok(line)) => {
                    if progress(&line) {
                        matched += 1;
                    }
                    self.seen.push(line);
                }
                _ => {
                    self.finish();
                    return false;
                }
            }
        }
        // Child::kill sends SIGKILL on Unix.
        self.child
            .kill()
            .unwrap_or_else(|e| panic!("kill worker: {e}"));
        self.finish();
        true
    }

    /// Waits for the worker to end by itself; panics unless it succeeded.
    fn complete(&mut self) {
        for line in self.lines.by_ref() {
            match line {
                Ok(line) => self.seen.push(line),
                Err(_) => break,
            }
        }
        let status = self
            .child
            .wait()
            .unwrap_or_else(|e| panic!("wait worker: {e}"));
        assert!(
            status.success(),
            "worker failed ({status}): {}",
            self.stderr()
        );
    }

    fn finish(&mut self) {
        let _ = self.child.wait();
        for line in self.lines.by_ref() {
            match line {
                Ok(line) => self.seen.push(line),
                Err(_) => break,
            }
        }
    }

    fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = err.read_to_string(&mut text);
        }
        text
    }

    /// `(commit_id, commit_seq)` of every `committed` line.
    fn acknowledged(&self) -> Vec<(String, i64)> {
        self.seen
            .iter()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("committed")).then_some(())?;
                let seq = words.next()?.parse().ok()?;
                Some((words.next()?.to_owned(), seq))
            })
            .collect()
    }
}

// ---- checks --------------------------------------------------------------

/// Reopens the database as a new process, ensures its stored version and
/// checks every invariant, with every acknowledged commit.
fn reopen_and_check(
    db: &KillDb,
    acknowledged: &[(String, i64)],
    what: &str,
) -> Box<dyn ServerStorage> {
    let storage = db.open();
    scenario::ensure_stored(storage.as_ref())
        .unwrap_or_else(|e| panic!("{what}: ensure after the kill: {e:?}"));
    let mut checker = InvariantChecker::new(scenario::schema_history(2))
        .with_sources(scenario::BACKFILL_CHECKPOINT, &[fixture::ITEMS]);
    for (commit, seq) in acknowledged {
        checker.acknowledge(PARTITION, scenario::CLIENT, commit, *seq);
    }
    let summary = checker.assert_consistent(storage.as_ref(), &[PARTITION], what);
    assert_eq!(
        summary.acknowledged,
        acknowledged.len(),
        "{what}: every acknowledged commit was checked"
    );
    storage
}

/// Adds `rows` items in one commit (rows for a migration to rewrite or a
/// backfill to batch over).
fn bulk(storage: &dyn ServerStorage, rows: usize) -> (String, i64) {
    let changes: Vec<Change> = (0..rows)
        .map(|i| scenario::item(&format!("b{i:04}"), ["g1", "g2"][i % 2], i as i64))
        .collect();
    let seq = scenario::push(
        storage,
        "bulk",
        &changes,
        &PushOptions::default(),
        T0 + 5_000,
    )
    .unwrap_or_else(|e| panic!("bulk push: {e:?}"))
    .unwrap_or_else(|| panic!("bulk push replayed"));
    ("bulk".to_owned(), seq)
}

#[derive(Debug, Default)]
struct Figures {
    killed: usize,
    acknowledged: usize,
    migrations_announced: usize,
    migrations_in_rewrite: usize,
    migrations_undone: usize,
    migrations_rolled_forward: usize,
    migrations_done: usize,
    backfills_resumed: usize,
    backfills_after_watermark: usize,
    grouped_kills: usize,
}

fn is_committed(line: &str) -> bool {
    line.starts_with("committed ")
}

// ---- scenarios -----------------------------------------------------------

/// Three push loops in a row on one database, each killed after a random
/// number of acknowledged commits; every acknowledgement accumulates.
fn push_loops(dialect: &str, round: u64, figures: &mut Figures) {
    let mut rng = rng(dialect, 100 + round);
    let db = KillDb::new(dialect);
    let mut acknowledged =
        scenario::base(db.open().as_ref(), 1).unwrap_or_else(|e| panic!("base: {e:?}"));
    let mut next = 1;
    for round in 0..3 {
        let target = rng.between(1, 25);
        let mut worker = Worker::spawn(&db, &["push-loop", &next.to_string(), "1000"]);
        assert!(
            worker.kill_after(target, is_committed),
            "{dialect} push-loop {round}: the worker ended before the kill: {}",
            worker.stderr()
        );
        figures.killed += 1;
        let acks = worker.acknowledged();
        assert!(
            acks.len() >= target,
            "{dialect}: fewer acknowledgements than read"
        );
        figures.acknowledged += acks.len();
        next += acks.len() as i64 + 1;
        acknowledged.extend(acks);
        reopen_and_check(
            &db,
            &acknowledged,
            &format!("{dialect} push-loop kill {round} after {target} commits"),
        );
    }
}

/// Eight threads pushing at once (SQLite: with group commit on), killed
/// after a random number of acknowledged commits — mostly while a commit
/// group is open, with pushes waiting inside it for its `COMMIT`: every
/// acknowledged push is present, whatever was not acknowledged may or may
/// not be, and the invariants hold.
fn grouped_push_threads(dialect: &str, round: u64, figures: &mut Figures) {
    let mut rng = rng(dialect, 400 + round);
    let db = KillDb::new(dialect);
    let mut acknowledged =
        scenario::base(db.open().as_ref(), 1).unwrap_or_else(|e| panic!("base: {e:?}"));
    let mut next = 1;
    for kill in 0..2 {
        let target = rng.between(1, 40);
        let mut worker = Worker::spawn(&db, &["push-threads", "8", &next.to_string(), "2000"]);
        assert!(
            worker.kill_after(target, is_committed),
            "{dialect} push-threads {kill}: the worker ended before the kill: {}",
            worker.stderr()
        );
        figures.killed += 1;
        let acks = worker.acknowledged();
        assert!(
            acks.len() >= target,
            "{dialect}: fewer acknowledgements than read"
        );
        figures.acknowledged += acks.len();
        figures.grouped_kills += 1;
        // The next worker's ids start past every id this one may have
        // pushed (acknowledged or not).
        next += 2000;
        acknowledged.extend(acks);
        reopen_and_check(
            &db,
            &acknowledged,
            &format!("{dialect} push-threads kill {kill} after {target} commits"),
        );
    }
}

/// Rows of the bulk commit a migration rewrites: more than one rewrite
/// page (500 rows), so that a kill can fall between two pages.
const MIGRATION_ROWS: usize = 600;

/// Where a migration is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MigrationKill {
    /// After the `n`-th of the three pushes before it.
    Push(usize),
    /// Right after it announced itself (`migrating`): inside it or just
    /// after it, wherever the kill lands.
    Announced,
    /// Held at its `k`-th report of the row rewrites (1: the first table's
    /// start, after the DDL; 2: after the first page) and killed there.
    Rewrite(usize),
}

impl MigrationKill {
    fn draw(rng: &mut Rng) -> Self {
        match rng.between(0, 3) {
            0 => Self::Push(rng.between(1, 3)),
            1 => Self::Announced,
            _ => Self::Rewrite(rng.between(1, 2)),
        }
    }
}

/// A migration (rewrites of [`MIGRATION_ROWS`] rows and a declaration)
/// killed during the pushes before it, right after it announced itself,
/// or held inside its row rewrites. A bump that is one transaction leaves
/// version 1 or 2; one held inside its rewrites, version 1. A MariaDB bump
/// killed after its fence transaction leaves the migration open: every
/// process at version 1 is refused, and a new process at version 2 rolls
/// it forward. Whatever happened, nothing acknowledged is lost and a new
/// process completes the migration.
fn migration(dialect: &str, kill: MigrationKill, figures: &mut Figures) {
    let db = KillDb::new(dialect);
    let mut acknowledged = {
        let storage = db.open();
        let mut acks =
            scenario::base(storage.as_ref(), 1).unwrap_or_else(|e| panic!("base: {e:?}"));
        acks.push(bulk(storage.as_ref(), MIGRATION_ROWS));
        acks
    };
    let hold;
    let mut args = vec!["migrate", "3"];
    let (count, progress): (usize, fn(&str) -> bool) = match kill {
        MigrationKill::Push(n) => (n, is_committed),
        MigrationKill::Announced => {
            figures.migrations_announced += 1;
            (1, |l| l == "migrating")
        }
        MigrationKill::Rewrite(k) => {
            figures.migrations_in_rewrite += 1;
            hold = k.to_string();
            args.extend(["hold", hold.as_str()]);
            (k, |l| l.starts_with("rewriting "))
        }
    };
    let mut worker = Worker::spawn(&db, &args);
    let killed = worker.kill_after(count, progress);
    assert!(
        killed,
        "{dialect} migrate: the worker ended before the kill ({kill:?}): {} {:?}",
        worker.stderr(),
        worker.seen
    );
    figures.killed += 1;
    let acks = worker.acknowledged();
    figures.acknowledged += acks.len();
    acknowledged.extend(acks);
    let what = format!("{dialect} migrate kill {kill:?}");
    if let Some(state) = db.migration_state() {
        if state.is_open() {
            roll_forward(&db, &acknowledged, kill, &state, &what);
            figures.migrations_rolled_forward += 1;
            return;
        }
        assert!(
            !matches!(kill, MigrationKill::Rewrite(_)),
            "{what}: a migration held inside its rewrites is open, found {state:?}"
        );
    }
    let storage = reopen_and_check(&db, &acknowledged, &what);
    let version = storage
        .read_schema_marker()
        .unwrap_or_else(|e| panic!("{what}: marker: {e:?}"))
        .map(|m| m.schema_version);
    match version {
        Some(1) => {
            figures.migrations_undone += 1;
            // A new process completes the migration.
            let mut again = Worker::spawn(&db, &["migrate", "0"]);
            again.complete();
            assert!(
                again.seen.iter().any(|l| l == "migrated"),
                "{what}: not migrated"
            );
            reopen_and_check(&db, &acknowledged, &format!("{what}, migrated again"));
        }
        Some(2) => {
            assert!(
                !(db.migrations_are_transactional() && matches!(kill, MigrationKill::Rewrite(_))),
                "{what}: a migration transaction killed inside its rewrites was kept"
            );
            figures.migrations_done += 1;
        }
        other => panic!("{what}: schema version {other:?}"),
    }
}

/// A killed MariaDB migration left open (`state`): every process at the
/// stored version is refused (`schema_newer_than_code`), and a new process
/// at version 2 rolls it forward from its journal; then the migration is
/// closed at version 2 and every invariant holds with every
/// acknowledgement.
fn roll_forward(
    db: &KillDb,
    acknowledged: &[(String, i64)],
    kill: MigrationKill,
    state: &syncstore_tests::mariadb::MigrationState,
    what: &str,
) {
    let journal = state
        .open_journal
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: migrating_to without an open journal: {state:?}"));
    assert_eq!(
        (
            state.schema_version,
            state.migrating_to,
            journal.target_version
        ),
        (1, Some(2), 2),
        "{what}: {state:?}"
    );
    match kill {
        // Held at the first table's start: every DDL statement ran.
        MigrationKill::Rewrite(1) => assert!(
            journal.state == "ddl" && journal.next_step > 0 && !journal.rewrite_cursor,
            "{what}: held after the DDL: {state:?}"
        ),
        // Held after the first page: its cursor committed with it.
        MigrationKill::Rewrite(_) => assert!(
            journal.state == "rewrite" && journal.rewrite_cursor,
            "{what}: held after a page: {state:?}"
        ),
        _ => {}
    }
    let storage = db.open();
    let refused = scenario::ensure_stored(storage.as_ref())
        .expect_err("a process at the stored version is refused while the migration is open");
    assert_eq!(
        refused.code(),
        ErrorCode::SchemaNewerThanCode,
        "{what}: {refused:?}"
    );
    drop(storage);
    let mut again = Worker::spawn(db, &["start", "2"]);
    again.complete();
    assert!(
        again.seen.iter().any(|l| l == "started 2"),
        "{what}: not started at 2: {:?}",
        again.seen
    );
    let after = db
        .migration_state()
        .unwrap_or_else(|| panic!("{what}: no migration state"));
    assert!(
        !after.is_open() && after.schema_version == 2,
        "{what}: rolled forward: {after:?}"
    );
    let storage = reopen_and_check(db, acknowledged, &format!("{what}, rolled forward"));
    let version = storage
        .read_schema_marker()
        .unwrap_or_else(|e| panic!("{what}: marker: {e:?}"))
        .map(|m| m.schema_version);
    assert_eq!(version, Some(2), "{what}: rolled forward to 2");
}

/// A backfill of 120 rows in batches of 10, killed after a random number of
/// committed batches, resumed by a new worker that must activate.
fn backfill(dialect: &str, round: u64, figures: &mut Figures) {
    let mut rng = rng(dialect, 300 + round);
    let db = KillDb::new(dialect);
    let acknowledged = {
        let storage = db.open();
        let mut acks =
            scenario::base(storage.as_ref(), 1).unwrap_or_else(|e| panic!("base: {e:?}"));
        acks.push(bulk(storage.as_ref(), 120));
        scenario::ensure_stored(storage.as_ref()).unwrap_or_else(|e| panic!("ensure: {e:?}"));
        storage
            .ensure_schema(&scenario::schema(2), &sync_core::EnsureOptions::default())
            .unwrap_or_else(|e| panic!("ensure v2: {e:?}"));
        acks
    };
    let target = rng.between(1, 9);
    let mut worker = Worker::spawn(&db, &["backfill", "10"]);
    let killed = worker.kill_after(target, |l| l.starts_with("batch "));
    assert!(
        killed,
        "{dialect} backfill: the worker ended before the kill: {}",
        worker.stderr()
    );
    figures.killed += 1;
    let what = format!("{dialect} backfill kill after batch {target}");
    let storage = reopen_and_check(&db, &acknowledged, &what);
    let killed_epoch = storage
        .read_checkpoint(PARTITION, scenario::BACKFILL_CHECKPOINT)
        .unwrap_or_else(|e| panic!("{what}: checkpoint: {e:?}"))
        .map_or(0, |c| c.owner_epoch);
    assert!(killed_epoch >= 1, "{what}: the killed run held no epoch");
    resume_backfill(&db, &acknowledged, killed_epoch, &what);
    figures.backfills_resumed += 1;
}

/// A new worker resumes the backfill killed at `killed_epoch`: it must
/// activate at epoch + 1 with every row projected; every invariant holds.
/// Returns the projection.
fn resume_backfill(
    db: &KillDb,
    acknowledged: &[(String, i64)],
    killed_epoch: i64,
    what: &str,
) -> Vec<(String, Option<String>)> {
    let mut resumed = Worker::spawn(db, &["backfill", "10"]);
    resumed.complete();
    assert!(
        resumed.seen.iter().any(|l| l == "outcome activated"),
        "{what}: the resumed worker did not activate: {:?}",
        resumed.seen
    );
    let storage = reopen_and_check(db, acknowledged, &format!("{what}, resumed"));
    let checkpoint = storage
        .read_checkpoint(PARTITION, scenario::BACKFILL_CHECKPOINT)
        .unwrap_or_else(|e| panic!("{what}: checkpoint: {e:?}"))
        .unwrap_or_else(|| panic!("{what}: no checkpoint"));
    assert_eq!(checkpoint.state, CheckpointState::Activated, "{what}");
    assert_eq!(
        checkpoint.owner_epoch,
        killed_epoch + 1,
        "{what}: resumed at epoch + 1"
    );
    let projection =
        scenario::projection(storage.as_ref()).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    assert!(!projection.is_empty());
    for (row_id, value) in &projection {
        assert!(
            value.as_deref().is_some_and(|v| v.starts_with('d')),
            "{what}: row {row_id} not backfilled ({value:?})"
        );
    }
    projection
}

/// The watermark of a `batch <n> watermark <w> epoch <e>` line.
fn batch_watermark(line: &str) -> Option<i64> {
    let mut words = line.split_whitespace();
    (words.next() == Some("batch")).then_some(())?;
    words.nth(1).filter(|w| *w == "watermark")?;
    words.next()?.parse().ok()
}

/// A backfill of 120 rows stopped after its full pass stored a watermark
/// above 0 (the worker holds there and is killed between transactions);
/// source writes land before a new worker takes over, which must activate
/// with every row — the written ones included — projected.
fn backfill_after_watermark(dialect: &str, figures: &mut Figures) {
    let db = KillDb::new(dialect);
    let mut acknowledged = {
        let storage = db.open();
        let mut acks =
            scenario::base(storage.as_ref(), 1).unwrap_or_else(|e| panic!("base: {e:?}"));
        acks.push(bulk(storage.as_ref(), 120));
        storage
            .ensure_schema(&scenario::schema(2), &sync_core::EnsureOptions::default())
            .unwrap_or_else(|e| panic!("ensure v2: {e:?}"));
        acks
    };
    let mut worker = Worker::spawn(&db, &["backfill", "10", "hold"]);
    let killed = worker.kill_after(1, |l| batch_watermark(l).is_some_and(|w| w > 0));
    assert!(
        killed,
        "{dialect} backfill hold: the worker ended before the kill: {}",
        worker.stderr()
    );
    figures.killed += 1;
    let watermark = worker
        .seen
        .iter()
        .filter_map(|l| batch_watermark(l))
        .max()
        .unwrap_or(0);
    let what = format!("{dialect} backfill kill after watermark {watermark}");
    let storage = reopen_and_check(&db, &acknowledged, &what);
    let stopped = storage
        .read_checkpoint(PARTITION, scenario::BACKFILL_CHECKPOINT)
        .unwrap_or_else(|e| panic!("{what}: checkpoint: {e:?}"))
        .unwrap_or_else(|| panic!("{what}: no checkpoint"));
    assert!(watermark > 0, "{what}: no watermark above 0 was stored");
    assert_eq!(
        (stopped.watermark, stopped.state),
        (watermark, CheckpointState::Backfilling),
        "{what}: the stored checkpoint"
    );
    let seq = scenario::writes_before_takeover(storage.as_ref(), T0 + 2_000_000)
        .unwrap_or_else(|e| panic!("{what}: writes before the takeover: {e:?}"))
        .unwrap_or_else(|| panic!("{what}: writes before the takeover were not applied"));
    assert!(seq > watermark, "{what}: the writes landed at {seq}");
    acknowledged.push(("takeover-writes".to_owned(), seq));
    drop(storage);
    let projection = resume_backfill(&db, &acknowledged, stopped.owner_epoch, &what);
    let by_id: std::collections::BTreeMap<&str, Option<&str>> = projection
        .iter()
        .map(|(id, value)| (id.as_str(), value.as_deref()))
        .collect();
    assert_eq!(by_id.get("i1"), Some(&Some("d901")), "{what}: i1 updated");
    assert_eq!(by_id.get("w1"), Some(&Some("d902")), "{what}: w1 written");
    assert_eq!(by_id.get("i2"), None, "{what}: i2 deleted");
    figures.backfills_after_watermark += 1;
}

fn kills(dialect: &str) {
    let rounds = env_count("SYNCSTORE_KILL_ROUNDS", 3);
    let mut figures = Figures::default();
    for round in 0..rounds {
        push_loops(dialect, round, &mut figures);
        grouped_push_threads(dialect, round, &mut figures);
        let kill = MigrationKill::draw(&mut rng(dialect, 200 + round));
        migration(dialect, kill, &mut figures);
        backfill(dialect, round, &mut figures);
    }
    // Whatever the seed drew: once held after a page of its rewrites
    // (on MariaDB: left open with a rewrite cursor, then rolled forward).
    migration(dialect, MigrationKill::Rewrite(2), &mut figures);
    backfill_after_watermark(dialect, &mut figures);
    println!(
        "process-kills {dialect}: {} processes killed, {} acknowledged commits all present, \
         migrations killed {} ({} after announcing the migration, {} inside its row rewrites; \
         found undone then redone {}, left open then rolled forward {}, done {}), \
         backfills resumed and activated {}, \
         killed after a stored watermark then resumed past source writes {}, \
         killed while pushing from 8 threads (SQLite: group commit) {}",
        figures.killed,
        figures.acknowledged,
        figures.migrations_undone + figures.migrations_rolled_forward + figures.migrations_done,
        figures.migrations_announced,
        figures.migrations_in_rewrite,
        figures.migrations_undone,
        figures.migrations_rolled_forward,
        figures.migrations_done,
        figures.backfills_resumed,
        figures.backfills_after_watermark,
        figures.grouped_kills
    );
}

#[test]
fn process_kills_sqlite() {
    kills("sqlite");
}

#[test]
fn process_kills_postgres() {
    kills("postgres");
}

#[test]
fn process_kills_mariadb() {
    kills("mariadb");
}
