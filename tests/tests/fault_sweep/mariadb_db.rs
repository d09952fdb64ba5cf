//! The MariaDB databases of the fault sweep: every copy of a template is a
//! fresh scratch database on `SYNCSTORE_MARIADB_URL` (default
//! `mysql://root@127.0.0.1:3306/test`) on which the operation's set-up ran
//! — the set-up is deterministic, and the sweep checks that every copy
//! reads exactly as the first. A copy is dropped (with its database) once
//! a fault moved it out of its before state.
//!
//! Setting a database up is DDL (the base tables, the fixture's tables, a
//! migration), the slow part of a MariaDB sweep: a builder thread of the
//! template sets the next copy up while the current one is in use.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use sync_core::ServerStorage;
use sync_mariadb::scratch::ScratchDatabase;
use sync_mariadb::{MariadbConfig, MariadbStorage, MariadbUrl};
use syncstore_tests::mariadb::{settled_migration_state, MigrationState};
use syncstore_tests::{mariadb_url, snapshot};

use crate::{FaultDb, RawReader, Setup};

/// The acknowledged pushes of a set-up: `(client_commit_id, commit_seq)`.
type Acks = Vec<(String, i64)>;

/// A set-up database, or why the builder could not make one.
type Built = Result<ScratchDatabase, String>;

/// Databases in an operation's set-up state, one always being made ahead.
pub struct MariadbTemplate {
    /// Copies made ahead (`None` once dropping).
    ready: Option<Mutex<Receiver<Built>>>,
    builder: Option<JoinHandle<()>>,
}

impl MariadbTemplate {
    /// Runs `setup` on a fresh database (the first copy), then starts the
    /// builder of the next copies.
    pub fn new(setup: Setup) -> (Self, Acks) {
        let (first, acks) = set_up(setup).unwrap_or_else(|reason| panic!("{reason}"));
        let (sender, receiver) = sync_channel(1);
        if sender.send(Ok(first)).is_err() {
            unreachable!("the receiver is alive");
        }
        let expected = acks.clone();
        let builder = std::thread::spawn(move || build_ahead(setup, &expected, &sender));
        let template = Self {
            ready: Some(Mutex::new(receiver)),
            builder: Some(builder),
        };
        (template, acks)
    }

    /// A database in the set-up state, opened by a new storage instance.
    pub fn copy(&self) -> Box<dyn FaultDb> {
        let built = self
            .ready
            .as_ref()
            .map(|ready| ready.lock().unwrap_or_else(PoisonError::into_inner).recv());
        match built {
            Some(Ok(Ok(scratch))) => Box::new(MariadbDb::open(scratch)),
            Some(Ok(Err(reason))) => panic!("{reason}"),
            Some(Err(_)) | None => panic!("the builder of set-up databases stopped"),
        }
    }
}

impl Drop for MariadbTemplate {
    fn drop(&mut self) {
        // The builder's next send fails: it drops what it made and ends.
        drop(self.ready.take());
        if let Some(builder) = self.builder.take() {
            let _ = builder.join();
        }
    }
}

/// Sets databases up until the template is dropped (or one fails, which
/// is sent as the reason).
fn build_ahead(setup: Setup, expected: &Acks, ready: &SyncSender<Built>) {
    loop {
        let built = set_up(setup).and_then(|(scratch, acks)| match acks == *expected {
            true => Ok(scratch),
            false => Err(format!(
                "the set-up acknowledged {acks:?} on another database, {expected:?} on the first"
            )),
        });
        let failed = built.is_err();
        if ready.send(built).is_err() || failed {
            return;
        }
    }
}

/// A fresh database with `setup` run on it by a storage that is closed
/// afterwards.
fn set_up(setup: Setup) -> Result<(ScratchDatabase, Acks), String> {
    let url = mariadb_url();
    let base = MariadbUrl::parse(&url).map_err(|e| format!("{url}: {e:?}"))?;
    let scratch = ScratchDatabase::create(&base).map_err(|e| {
        format!("MariaDB is not reachable at {url} ({e:?}); start it or set SYNCSTORE_MARIADB_URL")
    })?;
    let storage = MariadbStorage::connect_to(scratch.url().clone(), MariadbConfig::default())
        .map_err(|e| format!("connect to {}: {e:?}", scratch.url().database()))?;
    let acks = setup(&storage).map_err(|e| format!("setup: {e:?}"))?;
    drop(storage);
    Ok((scratch, acks))
}

fn storage(scratch: &ScratchDatabase) -> MariadbStorage {
    MariadbStorage::connect_to(scratch.url().clone(), MariadbConfig::default())
        .unwrap_or_else(|e| panic!("connect to {}: {e:?}", scratch.url().database()))
}

/// A storage instance on a scratch database, with an observing process.
struct MariadbDb {
    storage: MariadbStorage,
    observer: Arc<dyn ServerStorage>,
    /// Declared last: the database is dropped after this value's pools.
    scratch: ScratchDatabase,
}

impl MariadbDb {
    fn open(scratch: ScratchDatabase) -> Self {
        Self {
            storage: storage(&scratch),
            observer: Arc::new(storage(&scratch)),
            scratch,
        }
    }

    fn raw_connection(&self) -> mysql::Conn {
        self.scratch
            .raw()
            .unwrap_or_else(|e| panic!("raw connection: {e:?}"))
    }
}

impl FaultDb for MariadbDb {
    fn storage(&self) -> &dyn ServerStorage {
        &self.storage
    }

    fn second(&self) -> Arc<dyn ServerStorage> {
        Arc::clone(&self.observer)
    }

    fn process(&self) -> Arc<dyn ServerStorage> {
        Arc::new(storage(&self.scratch))
    }

    fn install(&self, plan: Option<Arc<sync_core::fault::FaultPlan>>) {
        self.storage.set_fault_plan(plan);
    }

    fn raw(&self) -> RawReader {
        let conn = Mutex::new(self.raw_connection());
        Arc::new(move || {
            let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            snapshot::mariadb_raw(&mut conn)
        })
    }

    fn migration_state(&self) -> Option<MigrationState> {
        Some(settled_migration_state(&mut self.raw_connection()))
    }
}
