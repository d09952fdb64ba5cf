//! What the live-server test files share: a scratch database of the server
//! in `SYNCSTORE_MARIADB_URL` (a test fails loudly when it does not
//! answer), and a storage on it with `FIX1` ensured.

#![allow(dead_code)]

use sync_conformance::fixtures;
use sync_core::{EnsureOptions, ServerStorage};
use sync_mariadb::scratch::{url_from_env, ScratchDatabase};
use sync_mariadb::{MariadbConfig, MariadbStorage};

/// A fresh database of its own; panics with the URL when the server does
/// not answer.
pub fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()))
}

/// A fresh database and a storage on it at `FIX1`.
pub fn fix1_storage() -> (ScratchDatabase, MariadbStorage) {
    let db = scratch();
    let storage =
        MariadbStorage::connect_to(db.url().clone(), MariadbConfig::default()).expect("connect");
    storage
        .ensure_schema(&fixtures::fix1().expect("fix1"), &EnsureOptions::default())
        .expect("ensure");
    (db, storage)
}
