//! Whole databases on a live server: one is created, migrated and written
//! through the storage, copied into a second one the storage made at the
//! same schema, and both are dropped; the copy reads back every row,
//! commit and push result, and carries on where its source stood.

use std::sync::Arc;

use mysql::prelude::Queryable;
use sync_conformance::fixtures::{self, Op, PushOutcome};
use sync_core::{EnsureOptions, ServerStorage};
use sync_mariadb::databases::{copy_rows, create_database, drop_database};
use sync_mariadb::scratch::url_from_env;
use sync_mariadb::{MariadbConfig, MariadbStorage, MariadbUrl};

fn server() -> MariadbUrl {
    MariadbUrl::parse(&url_from_env()).expect("SYNCSTORE_MARIADB_URL parses")
}

/// A database name no other test or run uses.
fn fresh_name(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("sync_dbs_{tag}_{:x}_{:x}", nanos, std::process::id())
}

/// How many of `names` the server holds as databases.
fn databases_named(names: &[&str]) -> usize {
    let url = url_from_env().replacen("mariadb://", "mysql://", 1);
    let mut conn = mysql::Conn::new(mysql::Opts::from_url(&url).expect("the URL parses"))
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {url} ({e})"));
    names
        .iter()
        .map(|name| {
            conn.exec_first::<i64, _, _>(
                "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                (name,),
            )
            .expect("count")
            .unwrap_or(0) as usize
        })
        .sum()
}

fn open(url: &MariadbUrl) -> Arc<dyn ServerStorage> {
    Arc::new(MariadbStorage::connect_to(url.clone(), MariadbConfig::default()).expect("connect"))
}

fn upsert(row: sync_core::StoredRow) -> Op {
    Op::upsert("tasks", row)
}

#[test]
fn a_copy_holds_its_source_and_both_drop() {
    let server = server();
    let (source_name, target_name) = (fresh_name("src"), fresh_name("dst"));
    let source_url = create_database(&server, &source_name)
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()));
    let target_url = create_database(&server, &target_name).expect("create the target");
    assert_eq!(target_url.database(), target_name);
    // A second create of an existing database is no error.
    create_database(&server, &source_name).expect("create again");
    assert_eq!(databases_named(&[&source_name, &target_name]), 2);

    let schema = fixtures::fix1().expect("fix1");
    let source = open(&source_url);
    source
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure the source");
    source
        .touch_partition("p1", 1_000, "epoch-1")
        .expect("register p1");
    let t1 = fixtures::task(&schema, "t1", "proj-1", "first").expect("t1");
    let t2 = fixtures::task(&schema, "t2", "proj-2", "second").expect("t2");
    let pushed = fixtures::push(source.as_ref(), "p1", "c1", "cc1", &[upsert(t1.clone())]);
    assert_eq!(pushed.expect("push"), PushOutcome::Applied(1));
    let pushed = fixtures::push(source.as_ref(), "p1", "c1", "cc2", &[upsert(t2.clone())]);
    assert_eq!(pushed.expect("push"), PushOutcome::Applied(2));
    let deleted = fixtures::push(
        source.as_ref(),
        "p1",
        "c1",
        "cc3",
        &[Op::delete("tasks", "t2")],
    );
    assert_eq!(deleted.expect("push"), PushOutcome::Applied(3));

    // The target is made the storage's own way at the same schema (its
    // schema marker filled), then takes the source's rows.
    let target = open(&target_url);
    target
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure the target");
    drop(target);
    copy_rows(&server, &source_name, &target_name).expect("copy");

    let copy = open(&target_url);
    copy.ensure_schema(&schema, &EnsureOptions::default())
        .expect("the copy verifies at the same schema");
    assert_eq!(
        copy.read_schema_marker().expect("marker"),
        source.read_schema_marker().expect("marker")
    );
    assert_eq!(copy.get_max_commit_seq("p1").expect("max"), 3);
    assert_eq!(copy.get_row("p1", "tasks", "t1").expect("t1"), Some(t1));
    assert_eq!(copy.get_row("p1", "tasks", "t2").expect("t2"), None);
    assert_eq!(
        copy.get_partition_log_epoch("p1").expect("epoch"),
        Some("epoch-1".to_owned())
    );
    // A replay of a copied commit is answered from its stored result; a new
    // commit takes the next sequence number, in the copy only.
    let replayed = fixtures::push(copy.as_ref(), "p1", "c1", "cc2", &[]).expect("replay");
    assert!(
        matches!(replayed, PushOutcome::Replayed(ref r) if r.commit_seq == Some(2)),
        "{replayed:?}"
    );
    let t3 = fixtures::task(&schema, "t3", "proj-1", "third").expect("t3");
    let next = fixtures::push(copy.as_ref(), "p1", "c1", "cc4", &[upsert(t3)]).expect("push");
    assert_eq!(next, PushOutcome::Applied(4));
    assert_eq!(source.get_max_commit_seq("p1").expect("max"), 3);

    drop((source, copy));
    drop_database(&server, &source_name).expect("drop the source");
    drop_database(&server, &target_name).expect("drop the target");
    drop_database(&server, &target_name).expect("a second drop is no error");
    assert_eq!(databases_named(&[&source_name, &target_name]), 0);
}
