//! Fault injection at the database seam, swept over every statement
//! boundary of the operations that write (feature `fault-injection`).
//!
//! For each operation a dry run with a counting plan learns its statements;
//! then, for every position `k` and every fault kind, the `k`-th statement
//! fails (I/O error, busy, connection lost before it runs, or reply lost
//! after it ran). After each injected fault:
//!
//! - the operation returned a coded error — never a panic, never `Ok` with
//!   partial effects (`Ok` is accepted only when the state is exactly the
//!   fault-free after state, as when the runner retried a `busy`), and
//!   `connection_lost` (nothing was changed) only with nothing changed;
//! - the full observable snapshot (storage API + raw row counts, columns,
//!   indexes, triggers) equals the before state or the after state — for
//!   the multi-transaction backfill run, the state at the last transaction
//!   boundary before the fault;
//! - every invariant of the checker holds.
//!
//! Dialects: SQLite, Postgres and MariaDB. MariaDB has no transactional
//! DDL: its migration commits a fence transaction, then each DDL statement
//! with the journal's next step, then a finishing transaction. A fault
//! after the fence transaction committed leaves the migration open instead
//! of undone, and the sweep asserts that behaviour for MariaDB alone
//! (`roll_forward`): only an operation that migrates leaves one, towards
//! its own version, with an error other than `connection_lost`; a new
//! process at the stored version is refused (`schema_newer_than_code`); a
//! new process at the target version rolls it forward, after which the
//! database is exactly in the after state. Every migrating operation must
//! have left at least one open migration on MariaDB, so the branch is
//! proven to run.
//!
//! Budget: `SYNCSTORE_FAULT_ROUNDS` (default 1) full sweeps of every kind at
//! every position; the figures are printed per operation and dialect.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use sync_core::fault::{FaultKind, FaultPlan};
use sync_core::{
    CheckpointDeclaration, CommitPruneQuery, EnsureOptions, Error, ErrorCode, ServerStorage,
};
use sync_sqlite::{SqliteConfig, SqliteStorage};
use syncstore_tests::invariants::InvariantChecker;
use syncstore_tests::mariadb::MigrationState;
use syncstore_tests::scenario::{self, PushOptions, PARTITION, T0};
use syncstore_tests::snapshot::{self, Observed, Snapshot};
use syncstore_tests::{fixture, pg_url};

#[path = "fault_sweep/mariadb_db.rs"]
mod mariadb_db;

// ---- databases -----------------------------------------------------------

/// A fresh database with a fault-capable storage instance.
trait FaultDb {
    fn storage(&self) -> &dyn ServerStorage;
    /// Another process on the same database (no fault plan of its own).
    fn second(&self) -> Arc<dyn ServerStorage>;
    /// A new process on the same database, with nothing ensured yet.
    fn process(&self) -> Arc<dyn ServerStorage>;
    fn install(&self, plan: Option<Arc<FaultPlan>>);
    /// Reads the raw facts on a connection of its own.
    fn raw(&self) -> RawReader;
    /// Where the migration stands, read around the API once no migrator
    /// holds the migration lock, on a dialect whose migration is not one
    /// transaction (MariaDB: its DDL commits statement by statement); `None`
    /// where a migration is one transaction, and a fault inside it leaves
    /// nothing of it.
    fn migration_state(&self) -> Option<MigrationState> {
        None
    }
}

type RawReader = Arc<dyn Fn() -> Snapshot + Send + Sync>;

struct SqliteDb {
    _dir: tempfile::TempDir,
    path: PathBuf,
    storage: SqliteStorage,
}

impl SqliteDb {
    fn open(dir: tempfile::TempDir) -> Self {
        let path = dir.path().join("sync.db");
        let storage = SqliteStorage::open(&path, SqliteConfig::default())
            .unwrap_or_else(|e| panic!("open {}: {e:?}", path.display()));
        Self {
            _dir: dir,
            path,
            storage,
        }
    }
}

impl FaultDb for SqliteDb {
    fn storage(&self) -> &dyn ServerStorage {
        &self.storage
    }

    fn second(&self) -> Arc<dyn ServerStorage> {
        Arc::new(
            SqliteStorage::open(&self.path, SqliteConfig::default())
                .unwrap_or_else(|e| panic!("open {}: {e:?}", self.path.display())),
        )
    }

    fn process(&self) -> Arc<dyn ServerStorage> {
        self.second()
    }

    fn install(&self, plan: Option<Arc<FaultPlan>>) {
        self.storage
            .set_fault_plan(plan)
            .unwrap_or_else(|e| panic!("install fault plan: {e:?}"));
    }

    fn raw(&self) -> RawReader {
        let path = self.path.clone();
        Arc::new(move || snapshot::sqlite_raw(&path))
    }
}

/// A storage instance on a Postgres schema (owned by a [`Template`]).
struct PgDb {
    schema: String,
    storage: sync_postgres::PostgresStorage,
    observer: Arc<dyn ServerStorage>,
}

fn pg_storage(schema: &str, pool_size: u32) -> sync_postgres::PostgresStorage {
    let config = sync_postgres::PostgresConfig {
        schema: Some(schema.to_owned()),
        pool_size,
        ..sync_postgres::PostgresConfig::default()
    };
    sync_postgres::PostgresStorage::connect(&pg_url(), config)
        .unwrap_or_else(|e| panic!("connect: {e:?}"))
}

impl FaultDb for PgDb {
    fn storage(&self) -> &dyn ServerStorage {
        &self.storage
    }

    fn second(&self) -> Arc<dyn ServerStorage> {
        Arc::clone(&self.observer)
    }

    fn process(&self) -> Arc<dyn ServerStorage> {
        Arc::new(pg_storage(&self.schema, 2))
    }

    fn install(&self, plan: Option<Arc<FaultPlan>>) {
        self.storage.set_fault_plan(plan);
    }

    fn raw(&self) -> RawReader {
        let schema = self.schema.clone();
        Arc::new(move || snapshot::postgres_raw(&pg_url(), &schema))
    }
}

/// A client of the test server; a server that does not answer fails loudly.
fn admin() -> postgres::Client {
    let url = pg_url();
    postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| {
        panic!("PostgreSQL is not reachable at {url} ({e}); start it or set SYNCSTORE_PG_URL")
    })
}

fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// A database in a set-up state, restored for every fault. SQLite: the
/// file, copied. Postgres: the schema, whose rows are restored from a
/// backup schema (one transaction, triggers off); when the faulted
/// operation changed the schema's structure (a migration), it is rebuilt.
/// MariaDB: a fresh database, set up again ([`mariadb_db`]).
/// Only one copy is in use at a time.
enum Template {
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres {
        schema: String,
        backup: String,
        setup: Setup,
        /// The observing process, kept across copies (it only reads).
        observer: Arc<dyn ServerStorage>,
        /// Columns, indexes and triggers of the set-up schema.
        structure: String,
    },
    Mariadb(mariadb_db::MariadbTemplate),
}

/// Columns, indexes and triggers of a schema, as one text.
fn pg_structure(schema: &str) -> String {
    admin()
        .query_one(
            "SELECT coalesce(string_agg(item, '; ' ORDER BY item), '') FROM ( \
               SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) AS item \
               FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
               JOIN pg_namespace n ON n.oid = c.relnamespace \
               WHERE n.nspname = $1 AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped \
               UNION ALL SELECT 'index ' || indexname FROM pg_indexes WHERE schemaname = $1 \
               UNION ALL SELECT 'trigger ' || t.tgname FROM pg_trigger t \
               JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
               WHERE n.nspname = $1 AND NOT t.tgisinternal) s",
            &[&schema],
        )
        .unwrap_or_else(|e| panic!("structure of {schema}: {e}"))
        .get(0)
}

impl Template {
    /// Runs `setup` on a fresh database and closes it.
    fn new(dialect: &str, setup: Setup) -> (Self, Vec<(String, i64)>) {
        match dialect {
            "sqlite" => {
                let dir =
                    tempfile::tempdir().unwrap_or_else(|e| panic!("temporary directory: {e}"));
                let path = dir.path().join("sync.db");
                let acks = {
                    let storage = SqliteStorage::open(&path, SqliteConfig::default())
                        .unwrap_or_else(|e| panic!("open {}: {e:?}", path.display()));
                    setup(&storage).unwrap_or_else(|e| panic!("setup: {e:?}"))
                };
                checkpoint_whole(&path);
                (Template::Sqlite { _dir: dir, path }, acks)
            }
            "postgres" => {
                let schema = unique_name("fault");
                let backup = format!("{schema}_backup");
                let acks = build_pg(&schema, &backup, setup);
                let observer: Arc<dyn ServerStorage> = Arc::new(pg_storage(&schema, 2));
                let structure = pg_structure(&schema);
                let template = Template::Postgres {
                    schema,
                    backup,
                    setup,
                    observer,
                    structure,
                };
                (template, acks)
            }
            "mariadb" => {
                let (template, acks) = mariadb_db::MariadbTemplate::new(setup);
                (Template::Mariadb(template), acks)
            }
            other => panic!("unknown dialect {other}"),
        }
    }

    /// Whether the dialect's migrations are journaled steps rather than one
    /// transaction (MariaDB: no transactional DDL).
    fn journals_migrations(&self) -> bool {
        matches!(self, Template::Mariadb(_))
    }

    /// The set-up state, opened by a new storage instance.
    fn copy(&self) -> Box<dyn FaultDb> {
        match self {
            Template::Sqlite { path, .. } => {
                let dir =
                    tempfile::tempdir().unwrap_or_else(|e| panic!("temporary directory: {e}"));
                std::fs::copy(path, dir.path().join("sync.db"))
                    .unwrap_or_else(|e| panic!("copy template: {e}"));
                Box::new(SqliteDb::open(dir))
            }
            Template::Postgres {
                schema,
                backup,
                setup,
                observer,
                structure,
            } => {
                // A migration changed the tables: rebuild them.
                if pg_structure(schema) != *structure || restore_pg(schema, backup).is_err() {
                    build_pg(schema, backup, *setup);
                }
                Box::new(PgDb {
                    schema: schema.clone(),
                    storage: pg_storage(schema, 10),
                    observer: Arc::clone(observer),
                })
            }
            Template::Mariadb(template) => template.copy(),
        }
    }
}

/// Copies every page of the WAL into the database file and empties the
/// WAL, so that the file alone holds the set-up state. Closing the set-up
/// storage is not enough: a pooled connection whose opening was still in
/// flight on the pool's own thread can outlive the storage for a moment,
/// and only the last connection to close checkpoints — a copy of the file
/// taken before that lacked every commit still in the WAL.
fn checkpoint_whole(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path)
        .unwrap_or_else(|e| panic!("open {} to checkpoint: {e}", path.display()));
    let (busy, wal, copied): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .unwrap_or_else(|e| panic!("checkpoint {}: {e}", path.display()));
    assert!(
        busy == 0 && wal == copied,
        "checkpoint of the template {}: busy {busy}, {copied} of {wal} WAL pages copied",
        path.display()
    );
}

impl Drop for Template {
    fn drop(&mut self) {
        if let Template::Postgres { schema, backup, .. } = self {
            let _ = admin().batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE; DROP SCHEMA IF EXISTS \"{backup}\" CASCADE"
            ));
        }
    }
}

/// (Re)creates `schema` by running `setup` in it, then copies every table
/// into `backup`.
fn build_pg(schema: &str, backup: &str, setup: Setup) -> Vec<(String, i64)> {
    admin()
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE; DROP SCHEMA IF EXISTS \"{backup}\" CASCADE; \
             CREATE SCHEMA \"{schema}\"; CREATE SCHEMA \"{backup}\""
        ))
        .unwrap_or_else(|e| panic!("create schemas: {e}"));
    let acks = setup(&pg_storage(schema, 2)).unwrap_or_else(|e| panic!("setup: {e:?}"));
    let mut client = admin();
    let sql: String = tables_of(&mut client, schema)
        .iter()
        .map(|t| format!("CREATE TABLE \"{backup}\".\"{t}\" AS TABLE \"{schema}\".\"{t}\";"))
        .collect();
    client
        .batch_execute(&sql)
        .unwrap_or_else(|e| panic!("backup: {e}"));
    acks
}

/// Restores every row of `schema` from `backup` in one transaction.
fn restore_pg(schema: &str, backup: &str) -> Result<(), postgres::Error> {
    let mut client = admin();
    let tables = tables_of(&mut client, schema);
    // DELETE, not TRUNCATE: the tables are tiny, and TRUNCATE creates files.
    let mut sql = String::from("BEGIN; SET LOCAL session_replication_role = replica;");
    for t in &tables {
        sql.push_str(&format!(
            "DELETE FROM \"{schema}\".\"{t}\"; \
             INSERT INTO \"{schema}\".\"{t}\" SELECT * FROM \"{backup}\".\"{t}\";"
        ));
    }
    sql.push_str("COMMIT;");
    client.batch_execute(&sql)
}

fn tables_of(client: &mut postgres::Client, schema: &str) -> Vec<String> {
    client
        .query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 1",
            &[&schema],
        )
        .unwrap_or_else(|e| panic!("tables: {e}"))
        .iter()
        .map(|r| r.get(0))
        .collect()
}

// ---- the operations ------------------------------------------------------

type Setup = fn(&dyn ServerStorage) -> sync_core::Result<Vec<(String, i64)>>;
type Run = fn(&dyn ServerStorage) -> sync_core::Result<()>;

/// One operation under test: the state it starts from and the operation.
struct Operation {
    name: &'static str,
    setup: Setup,
    run: Run,
    /// Several transactions (the backfill run): states are checked against
    /// transaction boundaries, and a new runner must finish the job.
    multi: bool,
    /// The schema version the operation migrates to (`ensure_schema` that
    /// bumps), if it does.
    migrates_to: Option<i32>,
}

const T1: i64 = T0 + 60_000;

/// A database a server opened once (its `sync_` tables exist) but never
/// ensured a schema on.
fn empty(s: &dyn ServerStorage) -> sync_core::Result<Vec<(String, i64)>> {
    s.read_schema_marker()?;
    Ok(Vec::new())
}

fn base_v1(s: &dyn ServerStorage) -> sync_core::Result<Vec<(String, i64)>> {
    scenario::base(s, 1)
}

fn base_v2(s: &dyn ServerStorage) -> sync_core::Result<Vec<(String, i64)>> {
    scenario::base(s, 2)
}

fn declared(s: &dyn ServerStorage) -> sync_core::Result<Vec<(String, i64)>> {
    let acks = scenario::base(s, 2)?;
    s.declare_checkpoint(PARTITION, "cp", 2, T0 + 10_000)?;
    Ok(acks)
}

fn claimed(s: &dyn ServerStorage) -> sync_core::Result<Vec<(String, i64)>> {
    let acks = declared(s)?;
    s.claim_checkpoint(PARTITION, "cp", 2, T0 + 11_000)?;
    Ok(acks)
}

fn advanced(s: &dyn ServerStorage) -> sync_core::Result<Vec<(String, i64)>> {
    let acks = claimed(s)?;
    let max = s.get_max_commit_seq(PARTITION)?;
    s.advance_checkpoint(PARTITION, "cp", 1, max, 3, T0 + 12_000)?;
    Ok(acks)
}

fn more_commits(s: &dyn ServerStorage) -> sync_core::Result<Vec<(String, i64)>> {
    let mut acks = scenario::base(s, 1)?;
    for (i, id) in ["c3", "c4"].iter().enumerate() {
        let changes = [scenario::item(&format!("j{i}"), "g1", i as i64)];
        let now = T0 + 5_000 + i as i64;
        if let Some(seq) = scenario::push(s, id, &changes, &PushOptions::default(), now)? {
            acks.push(((*id).to_owned(), seq));
        }
    }
    Ok(acks)
}

fn op_push(s: &dyn ServerStorage) -> sync_core::Result<()> {
    let options = PushOptions {
        reaction: true,
        ..PushOptions::default()
    };
    scenario::push(s, "c9", &scenario::standard_changes(), &options, T1).map(drop)
}

fn op_push_rejected(s: &dyn ServerStorage) -> sync_core::Result<()> {
    let options = PushOptions {
        reject: true,
        ..PushOptions::default()
    };
    scenario::push(s, "c9", &scenario::standard_changes(), &options, T1).map(drop)
}

/// A push whose second note repeats the body of `n1`: the unique index
/// refuses it, the push is finalized as a rejection after the failed write.
fn op_push_constraint(s: &dyn ServerStorage) -> sync_core::Result<()> {
    constraint_push(s, &PushOptions::default())
}

/// [`op_push`] as the engine pushes: the prelude, the row writes deferred
/// (on Postgres the last travels with the `COMMIT`), `commit_push`.
fn op_push_prelude(s: &dyn ServerStorage) -> sync_core::Result<()> {
    let options = PushOptions {
        reaction: true,
        prelude: true,
        ..PushOptions::default()
    };
    scenario::push(s, "c9", &scenario::standard_changes(), &options, T1).map(drop)
}

/// [`op_push_constraint`] through the prelude: the colliding write is the
/// last, so on Postgres `commit_push` finds the violation and rejects.
fn op_push_constraint_prelude(s: &dyn ServerStorage) -> sync_core::Result<()> {
    let options = PushOptions {
        prelude: true,
        ..PushOptions::default()
    };
    constraint_push(s, &options)
}

/// The colliding push of [`op_push_constraint`]; applying it is an error.
fn constraint_push(s: &dyn ServerStorage, options: &PushOptions) -> sync_core::Result<()> {
    let changes = [
        scenario::item("i4", "g1", 12),
        scenario::note("n2", "g1", 4),
    ];
    match scenario::push(s, "c9", &changes, options, T1)? {
        None => Ok(()),
        Some(seq) => {
            Err(Error::new(ErrorCode::Backend).detail("test", format!("applied as {seq}")))
        }
    }
}

fn op_ensure_first(s: &dyn ServerStorage) -> sync_core::Result<()> {
    s.ensure_schema(&scenario::schema(1), &EnsureOptions::default())
}

fn op_migrate(s: &dyn ServerStorage) -> sync_core::Result<()> {
    let declaration = CheckpointDeclaration::new(PARTITION, scenario::MIGRATION_CHECKPOINT, 2);
    s.ensure_schema(
        &scenario::schema(2),
        &EnsureOptions::with_declarations(vec![declaration]),
    )
}

fn op_declare(s: &dyn ServerStorage) -> sync_core::Result<()> {
    s.declare_checkpoint(PARTITION, "cp", 2, T1).map(drop)
}

fn op_claim(s: &dyn ServerStorage) -> sync_core::Result<()> {
    s.claim_checkpoint(PARTITION, "cp", 2, T1).map(drop)
}

fn op_advance(s: &dyn ServerStorage) -> sync_core::Result<()> {
    let max = s.get_max_commit_seq(PARTITION)?;
    match s.advance_checkpoint(PARTITION, "cp", 1, max, 5, T1)? {
        true => Ok(()),
        false => Err(Error::new(ErrorCode::Backend).detail("test", "advance refused")),
    }
}

fn op_activate(s: &dyn ServerStorage) -> sync_core::Result<()> {
    let max = s.get_max_commit_seq(PARTITION)?;
    let sources = [fixture::ITEMS.to_owned()];
    match s.activate_checkpoint(PARTITION, "cp", 1, max, &sources, T1)? {
        sync_core::ActivationOutcome::Activated => Ok(()),
        other => Err(Error::new(ErrorCode::Backend).detail("test", format!("{other:?}"))),
    }
}

fn op_prune(s: &dyn ServerStorage) -> sync_core::Result<()> {
    let query = CommitPruneQuery {
        log_epoch: scenario::EPOCH.to_owned(),
        through_seq: 3,
    };
    s.prune_commits_through(PARTITION, &query).map(drop)
}

fn op_rotate(s: &dyn ServerStorage) -> sync_core::Result<()> {
    s.rotate_partition_log_epoch(PARTITION, "epoch-2", T1)
        .map(drop)
}

fn op_backfill(s: &dyn ServerStorage) -> sync_core::Result<()> {
    match scenario::backfill(s, 2, T1)? {
        sync_backfill::RunOutcome::Activated { .. } => Ok(()),
        other => Err(Error::new(ErrorCode::Backend).detail("test", format!("{other:?}"))),
    }
}

const OPERATIONS: &[Operation] = &[
    Operation {
        name: "push",
        setup: base_v1,
        run: op_push,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "push_rejected",
        setup: base_v1,
        run: op_push_rejected,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "push_constraint",
        setup: base_v1,
        run: op_push_constraint,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "push_prelude",
        setup: base_v1,
        run: op_push_prelude,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "push_constraint_prelude",
        setup: base_v1,
        run: op_push_constraint_prelude,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "ensure_first",
        setup: empty,
        run: op_ensure_first,
        multi: false,
        migrates_to: Some(1),
    },
    Operation {
        name: "migrate",
        setup: base_v1,
        run: op_migrate,
        multi: false,
        migrates_to: Some(2),
    },
    Operation {
        name: "declare",
        setup: base_v2,
        run: op_declare,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "claim",
        setup: declared,
        run: op_claim,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "advance",
        setup: claimed,
        run: op_advance,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "activate",
        setup: advanced,
        run: op_activate,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "prune",
        setup: more_commits,
        run: op_prune,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "rotate",
        setup: base_v1,
        run: op_rotate,
        multi: false,
        migrates_to: None,
    },
    Operation {
        name: "backfill",
        setup: base_v2,
        run: op_backfill,
        multi: true,
        migrates_to: None,
    },
];

// ---- the sweep -----------------------------------------------------------

fn observed() -> Observed {
    let mut push_keys: Vec<(String, String, String)> = ["c1", "c2", "c3", "c4", "c9"]
        .iter()
        .map(|c| {
            (
                PARTITION.to_owned(),
                scenario::CLIENT.to_owned(),
                (*c).to_owned(),
            )
        })
        .collect();
    push_keys.sort();
    Observed {
        partitions: vec![PARTITION.to_owned()],
        tables: fixture::TABLES.iter().map(|t| (*t).to_owned()).collect(),
        push_keys,
    }
}

/// A prepared database of one operation, with its checker.
struct Prepared {
    db: Box<dyn FaultDb>,
    checker: InvariantChecker,
    before: Snapshot,
    /// The observing process (snapshots and checks): it ensures the schema
    /// version stored in the database before each check (the faulted
    /// process may still run the old version after a migration whose reply
    /// was lost).
    observer: Arc<dyn ServerStorage>,
    raw: RawReader,
}

impl Prepared {
    fn snap(&self) -> Snapshot {
        snap(self.observer.as_ref(), &self.raw)
    }

    fn check(&mut self, what: &str) {
        let observer = self.observer.as_ref();
        if ensure_stored(observer, what) {
            self.checker.assert_consistent(observer, &[PARTITION], what);
        }
    }
}

/// A process starting on the database ensures its stored version (nothing
/// on a database no `ensure_schema` ever bumped).
fn ensure_stored(storage: &dyn ServerStorage, what: &str) -> bool {
    let marker = storage
        .read_schema_marker()
        .unwrap_or_else(|e| panic!("{what}: marker: {e:?}"));
    if marker.is_none() {
        return false;
    }
    scenario::ensure_stored(storage).unwrap_or_else(|e| panic!("{what}: ensure: {e:?}"));
    true
}

/// A copy of `template` with its checker (knowing the setup's acknowledged
/// pushes) and its before snapshot.
fn prepare(template: &Template, acks: &[(String, i64)]) -> Prepared {
    let db = template.copy();
    let stored = ensure_stored(db.storage(), "process start");
    // A setup that acknowledged pushes stored a schema: a copy without one
    // lost the set-up state, and every later check would run against it.
    assert!(
        stored || acks.is_empty(),
        "the copy of the template holds no schema marker, but its setup acknowledged {acks:?}"
    );
    let mut checker = InvariantChecker::new(scenario::schema_history(2));
    for (commit, seq) in acks {
        checker.acknowledge(PARTITION, scenario::CLIENT, commit, *seq);
    }
    let observer = db.second();
    let raw = db.raw();
    let before = snap(observer.as_ref(), &raw);
    let mut prepared = Prepared {
        db,
        checker,
        before,
        observer,
        raw,
    };
    prepared.check("after setup");
    prepared
}

/// Every copy of a template starts exactly in the template's state.
fn assert_restored(reference: &Snapshot, copy: &Snapshot) {
    assert!(
        reference == copy,
        "a copy of the template differs from it:\n{}",
        snapshot::diff(reference, copy)
    );
}

fn snap(observer: &dyn ServerStorage, raw: &RawReader) -> Snapshot {
    let mut s = snapshot::api(observer, &observed());
    s.extend(raw());
    s
}

/// Runs the operation with `plan` installed; a panic fails the test.
fn run_with(
    db: &dyn FaultDb,
    op: &Operation,
    plan: Arc<FaultPlan>,
    what: &str,
) -> sync_core::Result<()> {
    db.install(Some(plan));
    let outcome = catch_unwind(AssertUnwindSafe(|| (op.run)(db.storage())));
    db.install(None);
    outcome.unwrap_or_else(|_| panic!("{what}: the operation panicked"))
}

/// The codes an injected fault may surface as.
fn assert_coded(error: &Error, what: &str) {
    let allowed = [
        ErrorCode::Backend,
        ErrorCode::Busy,
        ErrorCode::TransactionAborted,
        ErrorCode::ConnectionLost,
        ErrorCode::OutcomeUnknown,
    ];
    assert!(
        allowed.contains(&error.code()),
        "{what}: unexpected code {} ({error:?})",
        error.code().as_str()
    );
    assert!(
        !error.to_string().contains("injected"),
        "{what}: the error message leaks driver text: {error}"
    );
}

/// Figures of one sweep.
#[derive(Debug, Default, Clone)]
struct Tally {
    statements: u64,
    faults: u64,
    before_states: u64,
    after_states: u64,
    absorbed: u64,
    /// Backfill faults after a stored watermark, followed by source writes
    /// before the takeover.
    writes_before_takeover: u64,
    /// Migrations a fault left open (no transactional DDL), rolled forward
    /// by a new process.
    rolled_forward: u64,
    codes: std::collections::BTreeMap<String, u64>,
}

impl Tally {
    /// Adds the fault counts of `other` (not its statement count).
    fn add(&mut self, other: &Tally) {
        self.faults += other.faults;
        self.before_states += other.before_states;
        self.after_states += other.after_states;
        self.absorbed += other.absorbed;
        self.writes_before_takeover += other.writes_before_takeover;
        self.rolled_forward += other.rolled_forward;
        for (code, n) in &other.codes {
            *self.codes.entry(code.clone()).or_default() += n;
        }
    }
}

/// The kinds injected at statement `k`: every kind with
/// `SYNCSTORE_FAULT_KINDS=all`; by default one kind per statement, rotating,
/// plus a lost reply at every `COMMIT` (the ambiguous commit).
fn kinds_at(k: u64, log: &[String]) -> Vec<FaultKind> {
    let all = std::env::var("SYNCSTORE_FAULT_KINDS").is_ok_and(|v| v.trim() == "all");
    if all {
        return FaultKind::ALL.to_vec();
    }
    let mut kinds = vec![FaultKind::ALL[(k as usize - 1) % FaultKind::ALL.len()]];
    let commit = log.get(k as usize - 1).is_some_and(|s| ends_transaction(s));
    if commit && !kinds.contains(&FaultKind::ReplyLost) {
        kinds.push(FaultKind::ReplyLost);
    }
    kinds
}

/// Whether a statement text ends with `COMMIT` (alone or at the end of a
/// batch, as the Postgres push sends its result and the commit together).
fn ends_transaction(sql: &str) -> bool {
    sql.trim_end()
        .trim_end_matches(';')
        .trim_end()
        .to_ascii_uppercase()
        .ends_with("COMMIT")
}

fn rounds() -> u64 {
    match std::env::var("SYNCSTORE_FAULT_ROUNDS") {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("SYNCSTORE_FAULT_ROUNDS must be a positive integer")),
        _ => 1,
    }
}

/// One single-transaction operation: every kind at every position, reusing
/// the database while it stays in its before state.
fn sweep_single(dialect: &str, op: &Operation) -> Tally {
    let mut tally = Tally::default();
    let (template, acks) = Template::new(dialect, op.setup);
    // Dry run: the statement count and the after state.
    let mut dry = prepare(&template, &acks);
    let counter = FaultPlan::count_only();
    run_with(dry.db.as_ref(), op, Arc::clone(&counter), "dry run")
        .unwrap_or_else(|e| panic!("{dialect}/{}: fault-free run failed: {e:?}", op.name));
    let after = dry.snap();
    assert_ne!(
        dry.before, after,
        "{dialect}/{}: the operation changed nothing",
        op.name
    );
    dry.check(&format!("{dialect}/{}: after the dry run", op.name));
    tally.statements = counter.statements();
    let statements = counter.statement_log();
    if std::env::var("SYNCSTORE_FAULT_LOG").is_ok() {
        for (i, sql) in statements.iter().enumerate() {
            println!("{dialect}/{} statement {}: {sql}", op.name, i + 1);
        }
    }
    let reference = dry.before.clone();
    drop(dry);

    let mut current: Option<Prepared> = None;
    for k in 1..=tally.statements {
        for kind in kinds_at(k, &statements) {
            let prepared = current.get_or_insert_with(|| {
                let prepared = prepare(&template, &acks);
                assert_restored(&reference, &prepared.before);
                prepared
            });
            let what = format!(
                "{dialect}/{} fault {} at statement {k}/{} ({:?})",
                op.name,
                kind.as_str(),
                tally.statements,
                statements.get(k as usize - 1)
            );
            let plan = FaultPlan::at(k, kind);
            let outcome = run_with(prepared.db.as_ref(), op, Arc::clone(&plan), &what);
            assert!(plan.fired(), "{what}: the statement was not reached");
            tally.faults += 1;
            let migration = prepared.db.migration_state();
            if let Some(open) = migration.filter(MigrationState::is_open) {
                roll_forward(prepared.db.as_ref(), op, &open, &outcome, &what);
                tally.rolled_forward += 1;
            }
            let state = prepared.snap();
            match &outcome {
                Err(error) => {
                    assert_coded(error, &what);
                    assert!(
                        error.code() != ErrorCode::ConnectionLost || state == prepared.before,
                        "{what}: `connection_lost` says nothing was changed, but the state is \
                         not the before state:\n{}",
                        snapshot::diff(&prepared.before, &state)
                    );
                    *tally
                        .codes
                        .entry(error.code().as_str().to_owned())
                        .or_default() += 1;
                }
                Ok(()) => {
                    assert!(
                        state == after,
                        "{what}: Ok with a state that is not the after state:\n{}",
                        snapshot::diff(&after, &state)
                    );
                    tally.absorbed += 1;
                }
            }
            prepared.check(&what);
            if state == prepared.before {
                tally.before_states += 1;
            } else if state == after {
                tally.after_states += 1;
                current = None;
            } else {
                panic!(
                    "{what}: neither the before nor the after state; differences from before:\n{}\n\
                     differences from after:\n{}",
                    snapshot::diff(&prepared.before, &state),
                    snapshot::diff(&after, &state)
                );
            }
        }
    }
    if template.journals_migrations() && op.migrates_to.is_some() {
        assert!(
            tally.rolled_forward > 0,
            "{dialect}/{}: no fault left the migration open to roll forward",
            op.name
        );
    }
    tally
}

/// A fault inside a migration on a dialect without transactional DDL
/// (MariaDB) leaves the migration open — the meta row's `migrating_to` and
/// a journal entry not `done` — instead of undoing it. What that must mean:
/// only an operation that migrates leaves one, towards its own version, and
/// it did not return `Ok`; while it is open a new process at the stored
/// version is refused (`schema_newer_than_code`), and a database never
/// ensured before still reads as such (no marker); a new process at the
/// migration's version rolls it forward (runs the operation again, fault
/// free), after which no migration is open and the stored version is the
/// target's. The caller then finds the fault-free after state.
fn roll_forward(
    db: &dyn FaultDb,
    op: &Operation,
    open: &MigrationState,
    outcome: &sync_core::Result<()>,
    what: &str,
) {
    let journal = open
        .open_journal
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: migrating_to without an open journal: {open:?}"));
    let target = op
        .migrates_to
        .unwrap_or_else(|| panic!("{what}: an operation that does not migrate left {open:?}"));
    assert_eq!(
        (open.migrating_to, journal.target_version),
        (Some(target), target),
        "{what}: {open:?}"
    );
    match outcome {
        Ok(()) => panic!("{what}: Ok with the migration left open: {open:?}"),
        // `connection_lost` says nothing was changed.
        Err(error) => assert!(
            error.code() != ErrorCode::ConnectionLost,
            "{what}: `connection_lost` with the migration left open: {open:?}"
        ),
    }
    let newcomer = db.process();
    if open.schema_version > 0 {
        match scenario::ensure_stored(newcomer.as_ref()) {
            Err(refused) => assert_eq!(
                refused.code(),
                ErrorCode::SchemaNewerThanCode,
                "{what}: {refused:?}"
            ),
            Ok(version) => panic!(
                "{what}: a process at the stored version {version} was let in while {open:?}"
            ),
        }
    } else {
        let marker = newcomer.read_schema_marker();
        assert!(
            matches!(marker, Ok(None)),
            "{what}: a first migration left open shows a marker: {marker:?}"
        );
    }
    drop(newcomer);
    (op.run)(db.process().as_ref())
        .unwrap_or_else(|e| panic!("{what}: rolling the open migration forward failed: {e:?}"));
    let closed = db
        .migration_state()
        .unwrap_or_else(|| panic!("{what}: no migration state"));
    assert!(
        !closed.is_open() && closed.schema_version == i64::from(target),
        "{what}: rolled forward: {closed:?}"
    );
}

/// The backfill run (several transactions): a fresh database per fault.
/// A dry run records the committed state right before each statement; after
/// a fault at statement `k` the database must be exactly in the state it
/// had before `k` (or after `k` for a lost reply), whatever transaction `k`
/// belonged to. A new runner (next owner epoch) must then activate with the
/// fault-free projection.
fn sweep_multi(dialect: &str, op: &Operation) -> Tally {
    let mut tally = Tally::default();
    let (template, acks) = Template::new(dialect, op.setup);
    let dry = prepare(&template, &acks);
    let states: Arc<std::sync::Mutex<Vec<Snapshot>>> = Arc::default();
    let counter = {
        let (observer, raw, states) = (
            Arc::clone(&dry.observer),
            Arc::clone(&dry.raw),
            Arc::clone(&states),
        );
        FaultPlan::observing(move |_| {
            let state = snap(observer.as_ref(), &raw);
            states
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(state);
        })
    };
    run_with(dry.db.as_ref(), op, Arc::clone(&counter), "dry run")
        .unwrap_or_else(|e| panic!("{dialect}/{}: fault-free run failed: {e:?}", op.name));
    let after = dry.snap();
    let projection =
        scenario::projection(dry.db.storage()).unwrap_or_else(|e| panic!("projection: {e:?}"));
    tally.statements = counter.statements();
    let log = counter.statement_log();
    // states[k - 1]: committed state right before statement k; then the end.
    let mut states = std::mem::take(
        &mut *states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    states.push(after.clone());
    assert_eq!(states.len() as u64, tally.statements + 1);
    assert_eq!(
        states[0], dry.before,
        "{dialect}/{}: observed start",
        op.name
    );
    drop(dry);
    let jobs: Vec<(u64, FaultKind)> = (1..=tally.statements)
        .flat_map(|k| kinds_at(k, &log).into_iter().map(move |kind| (k, kind)))
        .collect();
    let expected = Expected {
        dialect,
        op,
        log: &log,
        states: &states,
        after: &after,
        projection: &projection,
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let merged = std::sync::Mutex::new(tally);
    let mut template = Some((template, acks));
    std::thread::scope(|scope| {
        for _ in 0..threads() {
            // Each thread restores copies of a template of its own.
            let own = template.take();
            let (next, merged, jobs, expected) = (&next, &merged, &jobs, &expected);
            scope.spawn(move || {
                let (template, acks) = own.unwrap_or_else(|| Template::new(dialect, op.setup));
                let mut local = Tally::default();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(&(k, kind)) = jobs.get(i) else { break };
                    fault_multi(expected, &template, &acks, k, kind, &mut local);
                }
                let mut tally = merged
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                tally.add(&local);
            });
        }
    });
    merged
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the fault-free run of a multi-transaction operation showed.
struct Expected<'a> {
    dialect: &'a str,
    op: &'a Operation,
    log: &'a [String],
    /// `states[k - 1]`: the committed state right before statement `k`;
    /// the last one is the state at the end.
    states: &'a [Snapshot],
    after: &'a Snapshot,
    projection: &'a [(String, Option<String>)],
}

/// One fault of the backfill sweep, on a fresh copy of the template.
fn fault_multi(
    expected: &Expected<'_>,
    template: &Template,
    acks: &[(String, i64)],
    k: u64,
    kind: FaultKind,
    tally: &mut Tally,
) {
    let Expected {
        dialect,
        op,
        log,
        states,
        after,
        projection,
    } = expected;
    let what = format!(
        "{dialect}/{} fault {} at statement {k}/{} ({:?})",
        op.name,
        kind.as_str(),
        log.len(),
        log.get(k as usize - 1)
    );
    let mut prepared = prepare(template, acks);
    assert_restored(&states[0], &prepared.before);
    let plan = FaultPlan::at(k, kind);
    let outcome = run_with(prepared.db.as_ref(), op, Arc::clone(&plan), &what);
    assert!(plan.fired(), "{what}: the statement was not reached");
    tally.faults += 1;
    let state = prepared.snap();
    prepared.check(&what);
    match &outcome {
        Err(error) => {
            assert_coded(error, &what);
            *tally
                .codes
                .entry(error.code().as_str().to_owned())
                .or_default() += 1;
            // A lost reply leaves the statement done or not done.
            let before_k = &states[k as usize - 1];
            let after_k = &states[k as usize];
            assert!(
                *before_k == state || (kind.after_statement() && *after_k == state),
                "{what}: not the committed state before the statement:\n{}",
                snapshot::diff(before_k, &state)
            );
            assert!(
                error.code() != ErrorCode::ConnectionLost || *before_k == state,
                "{what}: `connection_lost` says nothing was changed, but the statement's \
                 effect is stored:\n{}",
                snapshot::diff(before_k, &state)
            );
            if state == prepared.before {
                tally.before_states += 1;
            } else if state == **after {
                tally.after_states += 1;
            }
        }
        Ok(()) => {
            // The runner retried (busy) and finished.
            assert_eq!(
                scenario::projection(prepared.db.storage()).ok().as_deref(),
                Some(*projection),
                "{what}: finished with another projection"
            );
            tally.absorbed += 1;
            return;
        }
    }
    // A run stopped after its full pass stored a watermark: source writes
    // land between the stop and the takeover, and must be projected too.
    let stopped = prepared
        .db
        .storage()
        .read_checkpoint(PARTITION, scenario::BACKFILL_CHECKPOINT)
        .unwrap_or_else(|e| panic!("{what}: checkpoint: {e:?}"))
        .filter(|cp| cp.watermark > 0 && cp.state != sync_core::CheckpointState::Activated);
    let expected_projection = match stopped {
        Some(_) => {
            scenario::writes_before_takeover(prepared.db.storage(), T1 + 1)
                .unwrap_or_else(|e| panic!("{what}: writes before the takeover: {e:?}"))
                .unwrap_or_else(|| panic!("{what}: writes before the takeover were not applied"));
            tally.writes_before_takeover += 1;
            scenario::projection_after_writes(projection)
        }
        None => projection.to_vec(),
    };
    // Resume: a new runner (next owner epoch) finishes the job.
    let resumed = scenario::backfill(prepared.db.storage(), 2, T1 + 2)
        .unwrap_or_else(|e| panic!("{what}: the resumed runner failed: {e:?}"));
    assert!(
        matches!(
            resumed,
            sync_backfill::RunOutcome::Activated { .. }
                | sync_backfill::RunOutcome::AlreadyActivated
        ),
        "{what}: resumed runner ended {resumed:?}"
    );
    prepared.check(&format!("{what}, resumed"));
    assert_eq!(
        scenario::projection(prepared.db.storage()).ok(),
        Some(expected_projection),
        "{what}: the resumed backfill produced another projection"
    );
}

/// Threads of a sweep (`SYNCSTORE_FAULT_THREADS`, default 2): operations
/// side by side, and the faults of the backfill sweep.
fn threads() -> usize {
    std::env::var("SYNCSTORE_FAULT_THREADS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(2)
}

/// `SYNCSTORE_FAULT_OPS` (comma-separated operation names) narrows a run.
fn selected(name: &str) -> bool {
    match std::env::var("SYNCSTORE_FAULT_OPS") {
        Ok(list) if !list.trim().is_empty() => list.split(',').any(|n| n.trim() == name),
        _ => true,
    }
}

/// Sweeps one operation; returns its figure line and tally.
fn sweep_op(dialect: &str, op: &Operation) -> (String, Tally) {
    let started = std::time::Instant::now();
    let tally = if op.multi {
        sweep_multi(dialect, op)
    } else {
        sweep_single(dialect, op)
    };
    let mut line = format!(
        "fault-sweep {dialect} {:<15} statements {:>3}  faults {:>4}  before {:>4}  after {:>3}  absorbed {:>3}  {:>5.1}s  codes {:?}",
        op.name,
        tally.statements,
        tally.faults,
        tally.before_states,
        tally.after_states,
        tally.absorbed,
        started.elapsed().as_secs_f64(),
        tally.codes
    );
    if op.multi {
        line.push_str(&format!(
            "  resumed after source writes above a stored watermark {}",
            tally.writes_before_takeover
        ));
    }
    if tally.rolled_forward > 0 {
        line.push_str(&format!(
            "  left open and rolled forward {}",
            tally.rolled_forward
        ));
    }
    (line, tally)
}

fn sweep_dialect(dialect: &str) {
    let ops: Vec<&Operation> = OPERATIONS.iter().filter(|op| selected(op.name)).collect();
    let mut lines = Vec::new();
    let mut total = Tally::default();
    for round in 0..rounds() {
        // Single-transaction operations run side by side (each restores its
        // own template); the backfill sweep is parallel inside.
        let single: Vec<&Operation> = ops.iter().copied().filter(|op| !op.multi).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..threads() {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(op) = single.get(i) else { break };
                    let result = sweep_op(dialect, op);
                    results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((i, result));
                });
            }
        });
        let mut results = results
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        results.sort_by_key(|(i, _)| *i);
        let mut results: Vec<(String, Tally)> = results.into_iter().map(|(_, r)| r).collect();
        for op in ops.iter().filter(|op| op.multi) {
            results.push(sweep_op(dialect, op));
        }
        for (line, tally) in results {
            if round == 0 {
                lines.push(line);
            }
            total.faults += tally.faults;
            total.statements += tally.statements;
            total.rolled_forward += tally.rolled_forward;
        }
    }
    for line in &lines {
        println!("{line}");
    }
    let rolled_forward = match total.rolled_forward {
        0 => String::new(),
        n => format!(" ({n} migrations left open, rolled forward to after)"),
    };
    println!(
        "fault-sweep {dialect} total: {} operations, {} statement boundaries, {} faults injected ({} round(s)), all coded, all before/after{rolled_forward}, invariants held",
        lines.len(),
        total.statements / rounds(),
        total.faults,
        rounds()
    );
}

#[test]
fn fault_sweep_sqlite() {
    sweep_dialect("sqlite");
}

#[test]
fn fault_sweep_postgres() {
    sweep_dialect("postgres");
}

#[test]
fn fault_sweep_mariadb() {
    sweep_dialect("mariadb");
}
