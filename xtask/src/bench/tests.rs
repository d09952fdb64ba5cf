//! Smoke tests of the benchmark itself at a tiny scale, on SQLite and (W1–W4)
//! on MariaDB: every workload runs and yields well-formed result rows, and
//! the raw baseline leaves exactly the database state the storage API
//! leaves. No timing is asserted. The MariaDB cases need the server of
//! `SYNCSTORE_MARIADB_URL` (default: the local one) and fail when it does
//! not answer.

use rusqlite::types::Value;
use sync_sqlite::Synchronous;

use super::child::{backfill, Implementation};
use super::db::{Db, Dialect, Env, Location};
use super::pushes::{run_ours, run_raw, Prepared};
use super::report::Measure;
use super::w1_push::PARTITION;
use super::*;

fn tiny() -> Scale {
    Scale {
        quick: true,
        rounds: 1,
        w1_commits: 40,
        w1_normal_commits: 10,
        normal_rounds: 1,
        w2_commits: 10,
        fixture_w1: 40,
        fixture_w2: 10,
        page: 500,
        w5_rows: 1_200,
        w5_big_rows: None,
        w5_batch: 500,
        w6_commits: 20,
        w7_small: 150,
        w7_large: 600,
        w3g_small: 300,
        w3g_large: 1_200,
        w7_rows: 50,
        w7_push: 10,
        w7_pull: 100,
        conc_commits: 8,
        conc_rounds: 1,
        rt_pushes: 5,
        w10_commits: 8,
        w10_rounds: 1,
        min_read: std::time::Duration::ZERO,
    }
}

fn check(results: &[Measure], workload: &str, min_rows: usize) {
    check_on(Dialect::Sqlite, results, workload, min_rows);
}

fn check_on(dialect: Dialect, results: &[Measure], workload: &str, min_rows: usize) {
    let rows: Vec<&Measure> = results.iter().filter(|m| m.workload == workload).collect();
    assert!(
        rows.len() >= min_rows,
        "{workload}: {} result rows",
        rows.len()
    );
    for m in rows {
        assert_eq!(m.dialect, dialect);
        assert!(!m.variant.is_empty() && !m.unit.is_empty());
        assert!(
            m.ours.is_finite(),
            "{workload} {}: ours {}",
            m.variant,
            m.ours
        );
        assert!(!m.samples.is_empty());
        if let Some(raw) = m.raw {
            assert!(raw.is_finite());
        }
        if let Some(ratio) = m.ratio {
            assert!(ratio.is_finite() && ratio > 0.0);
        }
        let json = m.to_json();
        assert_eq!(json["dialect"], dialect.name());
        assert!(json["samples"].is_array());
    }
}

/// Every row of a table, sorted (order-independent comparison).
fn dump(db: &Db, table: &str) -> Vec<Vec<Value>> {
    let Location::Sqlite(path) = &db.location else {
        panic!("sqlite only");
    };
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn.prepare(&format!("SELECT * FROM {table}")).unwrap();
    let columns = stmt.column_count();
    let mut rows: Vec<Vec<Value>> = stmt
        .query_map([], |r| (0..columns).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    rows.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    rows
}

/// The tables a push writes.
const PUSHED_TABLES: [&str; 7] = [
    "todos",
    "sync_row_scopes",
    "sync_partitions",
    "sync_commits",
    "sync_changes",
    "sync_change_scopes",
    "sync_push_results",
];

/// Every row of a MariaDB table, sorted.
fn dump_mariadb(db: &Db, table: &str) -> Vec<Vec<mysql::Value>> {
    use mysql::prelude::Queryable;
    let Location::Mariadb { url, database } = &db.location else {
        panic!("mariadb only");
    };
    let opts = mariadb_server::opts(url, Some(database)).unwrap();
    let mut conn = mysql::Conn::new(opts).unwrap();
    let rows: Vec<mysql::Row> = conn.query(format!("SELECT * FROM `{table}`")).unwrap();
    let mut rows: Vec<Vec<mysql::Value>> = rows.into_iter().map(mysql::Row::unwrap).collect();
    rows.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    rows
}

/// The MariaDB server of the tests; a missing one fails the test.
fn mariadb_env() -> Env {
    let url = mariadb_server::url(None);
    if let Err(error) = mariadb_server::require(&url) {
        panic!("{error:#}");
    }
    Env::mariadb(&url)
}

#[test]
fn a_page_size_applies_to_the_files_both_clients_write() {
    let env = Env::sqlite(None).unwrap().with_page_size(Some(1_024));
    let commits = Prepared::new(w1_push::commits(5, "ps").unwrap());
    let ours = env.fresh(Synchronous::default()).unwrap();
    run_ours(
        ours.storage(false).unwrap().as_ref(),
        PARTITION,
        &commits,
        true,
    )
    .unwrap();
    let raw = env.fresh(Synchronous::default()).unwrap();
    let mut client = raw.raw().unwrap();
    drop(raw.storage(false).unwrap());
    run_raw(client.as_mut(), PARTITION, &commits, true).unwrap();
    for db in [&ours, &raw] {
        assert_eq!(db.count("PRAGMA page_size").unwrap(), 1_024);
    }
    let default_env = Env::sqlite(None).unwrap();
    let default = default_env.fresh(Synchronous::default()).unwrap();
    drop(default.storage(false).unwrap());
    assert_eq!(default.count("PRAGMA page_size").unwrap(), 4_096);
}

#[test]
fn raw_w1_leaves_the_same_database_state_as_ours() {
    let env = Env::sqlite(None).unwrap();
    let commits = Prepared::new(w1_push::commits(30, "w1").unwrap());
    let w2 = Prepared::new(w2_push10::commits(5).unwrap());

    let ours = env.fresh(Synchronous::default()).unwrap();
    let storage = ours.storage(false).unwrap();
    run_ours(storage.as_ref(), PARTITION, &commits, true).unwrap();
    run_ours(storage.as_ref(), PARTITION, &w2, true).unwrap();
    drop(storage);

    let raw = env.fresh(Synchronous::default()).unwrap();
    drop(raw.storage(false).unwrap());
    let mut client = raw.raw().unwrap();
    run_raw(client.as_mut(), PARTITION, &commits, true).unwrap();
    run_raw(client.as_mut(), PARTITION, &w2, true).unwrap();
    drop(client);

    for table in PUSHED_TABLES {
        assert_eq!(dump(&ours, table), dump(&raw, table), "table {table}");
    }
    let max = "SELECT max(commit_seq) FROM sync_commits";
    assert_eq!(ours.count(max).unwrap(), 35);
    assert_eq!(raw.count(max).unwrap(), 35);
    assert_eq!(raw.count("SELECT count(*) FROM todos").unwrap(), 80);
}

#[test]
fn raw_w1_and_w2_leave_the_same_database_state_as_ours_on_mariadb() {
    let env = mariadb_env();
    let commits = Prepared::new(w1_push::commits(30, "w1").unwrap());
    let w2 = Prepared::new(w2_push10::commits(5).unwrap());

    let ours = env.fresh(Synchronous::default()).unwrap();
    let storage = ours.storage(false).unwrap();
    run_ours(storage.as_ref(), PARTITION, &commits, true).unwrap();
    run_ours(storage.as_ref(), PARTITION, &w2, true).unwrap();
    drop(storage);

    let raw = env.fresh(Synchronous::default()).unwrap();
    drop(raw.storage(false).unwrap());
    let mut client = raw.raw().unwrap();
    run_raw(client.as_mut(), PARTITION, &commits, true).unwrap();
    run_raw(client.as_mut(), PARTITION, &w2, true).unwrap();
    // A commit pushed again is refused by the idempotency read.
    assert!(client.push(PARTITION, &w2.bench[0], true).is_err());
    drop(client);

    for table in PUSHED_TABLES {
        let (ours, raw) = (dump_mariadb(&ours, table), dump_mariadb(&raw, table));
        assert!(!ours.is_empty(), "table {table} is empty");
        assert_eq!(ours, raw, "table {table}");
    }
    let max = "SELECT max(commit_seq) FROM sync_commits";
    assert_eq!(ours.count(max).unwrap(), 35);
    assert_eq!(raw.count(max).unwrap(), 35);
    assert_eq!(raw.count("SELECT count(*) FROM todos").unwrap(), 80);
    assert_eq!(
        raw.count("SELECT count(*) FROM sync_row_scopes").unwrap(),
        80
    );
}

#[test]
fn w1_to_w4_run_at_tiny_scale_on_mariadb() {
    let env = mariadb_env();
    let d = Dialect::Mariadb;
    // Pages far smaller than the fixture, so that scans and windows page.
    let scale = Scale {
        page: 7,
        ..tiny().for_dialect(d)
    };
    let (results, fixture) = w1_push::run(&env, &scale).unwrap();
    check_on(d, &results, "W1", 3);
    check_on(d, &results, "W2", 2);
    let rebuilt = w1_push::build_fixture(&env, &scale).unwrap();
    assert_eq!(rebuilt.count("SELECT count(*) FROM todos").unwrap(), 140);
    let max = "SELECT max(commit_seq) FROM sync_commits";
    assert_eq!(rebuilt.count(max).unwrap(), fixture.count(max).unwrap());
    // W3 and W4 fail unless ours and raw read every row and commit.
    check_on(d, &w3_scan::run(&fixture, &scale, false).unwrap(), "W3", 2);
    check_on(d, &w4_pull::run(&fixture, &scale).unwrap(), "W4", 1);
    let analyzed = w3_scan::run(&fixture, &scale, true).unwrap();
    check_on(d, &analyzed, "W3", 2);
    assert!(analyzed.iter().all(|m| m.variant.ends_with(" analyzed")));
}

/// Statements per push on MariaDB: the single calls, the prelude and the
/// engine round are counted, each a push's worth.
#[test]
fn mariadb_statements_per_push_are_counted() {
    let env = mariadb_env();
    let d = Dialect::Mariadb;
    let results = mariadb_statements::run(&env, &tiny().for_dialect(d)).unwrap();
    let variants: Vec<&str> = results.iter().map(|m| m.variant.as_str()).collect();
    assert_eq!(
        variants,
        [
            "statements",
            "statements,sequence=prelude",
            "statements,sequence=engine"
        ]
    );
    for m in &results {
        assert!((5.0..=30.0).contains(&m.ours), "{m:?}");
        assert_eq!(m.raw, None);
    }
}

/// The raw MariaDB client's reads of several values (walks in key order)
/// return what the storage's per-value shapes return, dense or sparse.
#[test]
fn raw_mariadb_scans_and_windows_read_what_ours_reads() {
    let env = mariadb_env();
    let scale = tiny();
    let db = w1_push::build_fixture(&env, &scale).unwrap();
    let storage = db.storage(false).unwrap();
    let mut raw = db.raw().unwrap();
    let all = fixture::all_lists();
    let mut many = all.clone();
    many.extend((0..40).map(|n| format!("absent-{n:03}")));
    let few = vec![all[3].clone(), all[50].clone(), "absent".to_owned()];
    let through = storage.get_max_commit_seq(PARTITION).unwrap();
    for lists in [&all[..1], &few[..], &all[..], &many[..]] {
        for page in [7, 500] {
            let ours = w3_scan::scan_ours(storage.as_ref(), lists, page, u64::MAX).unwrap();
            let theirs = raw.scan(PARTITION, lists, page, u64::MAX).unwrap();
            assert_eq!(
                theirs,
                ours,
                "scan of {} lists, pages of {page}",
                lists.len()
            );
            let window = (0, through);
            let ours =
                w4_pull::pull_ours(storage.as_ref(), PARTITION, lists, window, page, u64::MAX);
            let theirs = w4_pull::pull_raw(raw.as_mut(), PARTITION, lists, window, page, u64::MAX);
            assert_eq!(
                theirs.unwrap(),
                ours.unwrap(),
                "window of {} lists, {page} changes a call",
                lists.len()
            );
        }
    }
    // Every row once for every list, a list's share for a few.
    assert_eq!(
        raw.scan(PARTITION, &many, 7, u64::MAX).unwrap(),
        scale.fixture_rows()
    );
    assert!(raw.scan(PARTITION, &few, 7, u64::MAX).unwrap() < scale.fixture_rows() / 10);
}

#[test]
fn mariadb_runs_w1_to_w4_and_w10_and_refuses_the_rest() {
    let only = |names: &[&str]| Selection(names.iter().map(|n| (*n).to_owned()).collect());
    let all = only(&[]).for_dialect(Dialect::Mariadb).unwrap();
    for name in ["W1", "W2", "W3", "W4", "W10"] {
        assert!(all.has(name), "{name}");
    }
    for name in [
        "W5", "W8", "W13", "W16", "CONC", "RT", "W1P", "NORMAL", "W3G",
    ] {
        assert!(!all.has(name), "{name}");
    }
    let picked = only(&["w1", "W10"]).for_dialect(Dialect::Mariadb).unwrap();
    assert!(picked.has("W1") && picked.has("W10") && !picked.has("W3"));
    let refused = only(&["W1", "W8", "RT"])
        .for_dialect(Dialect::Mariadb)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("W8, RT"), "{refused}");
    // Other dialects keep every workload.
    assert!(only(&[]).for_dialect(Dialect::Postgres).unwrap().has("W8"));
}

#[test]
fn every_workload_runs_at_tiny_scale_on_sqlite() {
    let env = Env::sqlite(None).unwrap();
    let scale = tiny();
    let (results, fixture) = w1_push::run(&env, &scale).unwrap();
    check(&results, "W1", 3);
    check(&results, "W2", 2);
    let rebuilt = w1_push::build_fixture(&env, &scale).unwrap();
    assert_eq!(rebuilt.count("SELECT count(*) FROM todos").unwrap(), 140);
    assert_eq!(
        rebuilt
            .count("SELECT max(commit_seq) FROM sync_commits")
            .unwrap(),
        fixture
            .count("SELECT max(commit_seq) FROM sync_commits")
            .unwrap()
    );
    let scans = w3_scan::run(&fixture, &scale, false).unwrap();
    // Each variant against raw and against the reference's page shape,
    // which reads every row too (or the run fails).
    // and on a copy in the reference's own layout.
    check(&scans, "W3", 6);
    let variants: Vec<&str> = scans.iter().map(|m| m.variant.as_str()).collect();
    assert_eq!(
        variants,
        [
            "lists=1",
            "lists=1 reference-in",
            "lists=1 reference-in own-layout",
            "lists=100",
            "lists=100 reference-in",
            "lists=100 reference-in own-layout"
        ]
    );
    let pulls = w4_pull::run(&fixture, &scale).unwrap();
    check(&pulls, "W4", 1);
    let analyzed = w3_scan::run(&fixture, &scale, true).unwrap();
    check(&analyzed, "W3", 6);
    assert!(analyzed.iter().all(|m| m.variant.ends_with(" analyzed")));
    check(&w1_push::run_normal(&env, &scale).unwrap(), "W1", 3);
    check(&w1_push::run_prelude(&env, &scale).unwrap(), "W1", 3);
    check(&w6_fence_gate::run(&env, &scale).unwrap(), "W6", 4);
    check(&w7_growth::run(&env, &scale).unwrap(), "W7", 9);
    check(&w3_growth::run(&env, &scale).unwrap(), "W3", 6);
    check(&w15_sparse::run(&env, &scale).unwrap(), "W15", 2);
}

#[test]
fn w10_measures_every_cell_of_every_sqlite_variant() {
    let env = Env::sqlite(None).unwrap();
    let results = w10_concurrent::run(&env, &tiny()).unwrap();
    // 4 variants (FULL, NORMAL, each with and without group commit) × 7
    // cells (1 thread once, 4/16/64 threads on one and on distinct
    // partitions) × 2 paths × (rate, p50, p99).
    check(&results, "W10", 168);
    assert_eq!(results.len(), 168);
    for variant in ["synchronous=NORMAL", "synchronous=FULL,group_commit"] {
        for threads in w10_concurrent::THREADS {
            let label = format!("{variant},path=engine,threads={threads},partitions={threads}");
            assert!(results.iter().any(|m| m.variant == label), "no row {label}");
        }
    }
}

#[test]
fn both_backfills_derive_every_row() {
    let env = Env::sqlite(None).unwrap();
    let rows = 1_200;
    for implementation in [Implementation::Ours, Implementation::Raw] {
        let db = env.fresh(Synchronous::default()).unwrap();
        w5_backfill::seed(&db, rows).unwrap();
        let (done, _seconds) = backfill(&db, implementation, 500).unwrap();
        assert_eq!(done, rows as u64, "{implementation:?}");
        let derived = db
            .count("SELECT count(*) FROM todos WHERE title_lower = lower(title)")
            .unwrap();
        assert_eq!(derived, rows as i64, "{implementation:?}");
        let activated = db
            .count("SELECT count(*) FROM sync_backfill_checkpoints WHERE state = 'activated'")
            .unwrap();
        assert_eq!(activated, 1, "{implementation:?}");
    }
}

#[test]
fn peak_memory_is_read_from_proc() {
    assert!(child::peak_rss_kb().unwrap() > 0);
}

/// The reference's paging loop: batches of `max(64, page)`, a cursor past
/// every candidate (found or not), pages ending at `page` rows or after a
/// short batch.
#[test]
fn the_reference_paging_loop_passes_missing_rows_and_fills_pages() {
    // 150 candidates, every tenth without a row: 135 rows.
    let ids: Vec<String> = (0..150).map(|i| format!("r{i:03}")).collect();
    let mut calls = Vec::new();
    let total = super::raw::reference_scan_pages(100, u64::MAX, |after, size| {
        calls.push((after.to_owned(), size));
        Ok(ids
            .iter()
            .enumerate()
            .filter(|(_, id)| id.as_str() > after)
            .take(usize::try_from(size).unwrap_or(0))
            .map(|(i, id)| (id.clone(), i % 10 != 9))
            .collect())
    })
    .unwrap();
    assert_eq!(total, 135);
    // Page 1: 100 candidates (90 rows), then the next batch fills it at
    // r110; page 2: the 39 candidates after r110, short.
    let afters: Vec<&str> = calls.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(afters, ["", "r099", "r110"]);
    assert!(calls.iter().all(|(_, size)| *size == 100));
    // A page smaller than 64 still reads batches of 64.
    let mut sizes = Vec::new();
    let total = super::raw::reference_scan_pages(7, 1, |_, size| {
        sizes.push(size);
        Ok(ids.iter().take(64).map(|id| (id.clone(), true)).collect())
    })
    .unwrap();
    assert_eq!((total, sizes), (7, vec![64]));
}

/// W3 on Postgres reads every row through ours, the raw client and both
/// of the reference's page shapes, pages far smaller than the fixture.
#[test]
fn w3_reads_every_row_in_each_shape_on_postgres() {
    let url = crate::postgres_server::url(None);
    if let Err(error) = crate::postgres_server::require(&url) {
        panic!("{error:#}");
    }
    let env = Env::postgres(&url, None);
    let d = Dialect::Postgres;
    let scale = Scale {
        page: 7,
        ..tiny().for_dialect(d)
    };
    let fixture = w1_push::build_fixture(&env, &scale).unwrap();
    let scans = w3_scan::run(&fixture, &scale, false).unwrap();
    let variants: Vec<&str> = scans.iter().map(|m| m.variant.as_str()).collect();
    assert_eq!(
        variants,
        [
            "lists=1",
            "lists=1 reference-in",
            "lists=1 reference-any",
            "lists=1 reference-in own-layout",
            "lists=100",
            "lists=100 reference-in",
            "lists=100 reference-any",
            "lists=100 reference-in own-layout"
        ]
    );
    check_on(d, &scans, "W3", 8);
    // The copy is analyzed with the rest and read again; it is dropped
    // with its run.
    let analyzed = w3_scan::run(&fixture, &scale, true).unwrap();
    check_on(d, &analyzed, "W3", 8);
    let Location::Postgres { schema, .. } = &fixture.location else {
        panic!("a Postgres fixture");
    };
    let copies = fixture
        .count(&format!(
            "SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}_ref'"
        ))
        .unwrap();
    assert_eq!(copies, 0, "the copy in the reference's layout is dropped");
}

/// The copy W3 reads the reference's `IN` list on holds every row of both
/// tables, in the reference's 0.15.48 layout: on Postgres without the
/// by-row scope index and with default-collation keys, on SQLite with a
/// rowid scope table; it is removed with its handle.
#[test]
fn the_reference_layout_copy_holds_every_row_in_the_reference_layout() {
    let url = crate::postgres_server::url(None);
    if let Err(error) = crate::postgres_server::require(&url) {
        panic!("{error:#}");
    }
    let sqlite = Env::sqlite(None).unwrap();
    let postgres = Env::postgres(&url, None);
    for env in [&sqlite, &postgres] {
        let d = env.dialect;
        let scale = tiny().for_dialect(d);
        let fixture = w1_push::build_fixture(env, &scale).unwrap();
        let copy = fixture.reference_layout_copy().unwrap().unwrap();
        for table in ["todos", "sync_row_scopes"] {
            let count = format!("SELECT count(*) FROM {table}");
            assert!(fixture.count(&count).unwrap() > 0, "{d:?} {table}");
            assert_eq!(
                copy.count(&count).unwrap(),
                fixture.count(&count).unwrap(),
                "{d:?} {table}"
            );
        }
        let location = copy.location.clone();
        match &location {
            Location::Sqlite(path) => {
                let ddl = "SELECT count(*) FROM sqlite_schema WHERE name = 'sync_row_scopes' \
                           AND sql LIKE '%WITHOUT ROWID%'";
                assert_eq!(fixture.count(ddl).unwrap(), 1, "ours is WITHOUT ROWID");
                assert_eq!(
                    copy.count(ddl).unwrap(),
                    0,
                    "the reference's is a rowid table"
                );
                drop(copy);
                assert!(!path.exists(), "the copy's file is removed");
            }
            Location::Postgres { schema, .. } => {
                let by_row = "SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() \
                              AND indexname = 'sync_row_scopes_by_row'";
                assert_eq!(
                    fixture.count(by_row).unwrap(),
                    1,
                    "ours has the by-row index"
                );
                assert_eq!(copy.count(by_row).unwrap(), 0, "0.15.48 has none");
                let c_keys = "SELECT count(*) FROM information_schema.columns \
                              WHERE table_schema = current_schema() AND table_name = 'todos' \
                              AND column_name = '_sync_row_id' AND collation_name = 'C'";
                assert_eq!(fixture.count(c_keys).unwrap(), 1, "ours keys in \"C\"");
                assert_eq!(
                    copy.count(c_keys).unwrap(),
                    0,
                    "the reference's in the default"
                );
                drop(copy);
                let gone = format!("SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'");
                assert_eq!(
                    fixture.count(&gone).unwrap(),
                    0,
                    "the copy's schema is dropped"
                );
            }
            Location::Mariadb { .. } => unreachable!("no MariaDB env here"),
        }
    }
}
