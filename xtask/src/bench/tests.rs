//! Smoke tests of the benchmark itself on SQLite at a tiny scale: every
//! workload runs and yields well-formed result rows, and the raw baseline
//! leaves exactly the database state the storage API leaves. No timing is
//! asserted.

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
    let rows: Vec<&Measure> = results.iter().filter(|m| m.workload == workload).collect();
    assert!(
        rows.len() >= min_rows,
        "{workload}: {} result rows",
        rows.len()
    );
    for m in rows {
        assert_eq!(m.dialect, Dialect::Sqlite);
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
        assert_eq!(json["dialect"], "sqlite");
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

    for table in [
        "todos",
        "sync_row_scopes",
        "sync_partitions",
        "sync_commits",
        "sync_changes",
        "sync_change_scopes",
        "sync_push_results",
    ] {
        assert_eq!(dump(&ours, table), dump(&raw, table), "table {table}");
    }
    let max = "SELECT max(commit_seq) FROM sync_commits";
    assert_eq!(ours.count(max).unwrap(), 35);
    assert_eq!(raw.count(max).unwrap(), 35);
    assert_eq!(raw.count("SELECT count(*) FROM todos").unwrap(), 80);
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
    check(&scans, "W3", 2);
    let pulls = w4_pull::run(&fixture, &scale).unwrap();
    check(&pulls, "W4", 1);
    let analyzed = w3_scan::run(&fixture, &scale, true).unwrap();
    check(&analyzed, "W3", 2);
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
