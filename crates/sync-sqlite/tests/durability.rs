//! `PRAGMA synchronous` of the writer connection: `FULL` unless `NORMAL` is
//! asked for (an acknowledged push must survive a power loss by default).

mod common;

use common::*;
use sync_sqlite::{SqliteConfig, Synchronous};

#[test]
fn the_writer_is_full_by_default() {
    let db = Db::new();
    assert_eq!(SqliteConfig::default().synchronous, Synchronous::Full);
    let storage = db.open_with(SqliteConfig::default());
    assert_eq!(storage.synchronous().unwrap(), Synchronous::Full);
}

#[test]
fn normal_is_applied_only_when_asked_for() {
    let db = Db::new();
    let normal = db.open_with(SqliteConfig {
        synchronous: Synchronous::Normal,
        ..SqliteConfig::default()
    });
    assert_eq!(normal.synchronous().unwrap(), Synchronous::Normal);
    drop(normal);
    // the setting belongs to the connection, not the file: a default open
    // of the same file is FULL again
    assert_eq!(db.open().synchronous().unwrap(), Synchronous::Full);
}
