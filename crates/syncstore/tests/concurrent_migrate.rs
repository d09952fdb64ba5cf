//! `migrate` is exact under concurrency: two and three `migrate` processes
//! started together (a barrier, no sleeps) with different declaration sets
//! bump the same database from v1 to v2, many times on both dialects.
//! Every run: every process exits 0, exactly one reports `"applied": true`,
//! and afterwards every requested declaration exists at version 2 (so no
//! partition is served un-backfilled by undeclared v2 code).
//!
//! A `--carry` and an `--abandon` of the same checkpoint racing to bump
//! v2 to v3: exactly one exits 0 (the one that applied the bump) and the
//! other fails with `sync.cli.resolution_not_applied` saying what the
//! database holds, which always is the winner's resolution.
//!
//! Runs per configuration: `SYNCSTORE_MIGRATE_RACE_RUNS` (default 40).

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::thread;

use common::{seed_todos, syncstore, todos_schema, write_file, Db, Run};
use serde_json::{json, Value};

const PARTITIONS: [&str; 3] = ["acme", "globex", "initech"];

fn runs() -> usize {
    std::env::var("SYNCSTORE_MIGRATE_RACE_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(40)
}

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                super::$name(super::Db::sqlite);
            }
            #[test]
            fn postgres() {
                super::$name(super::Db::postgres);
            }
        }
    )*};
}

on_both!(
    two_concurrent_migrates_install_every_declaration,
    three_concurrent_migrates_install_every_declaration,
    a_carry_and_an_abandon_racing_report_the_truth,
);

fn two_concurrent_migrates_install_every_declaration(fresh: fn() -> Db) {
    for run in 0..runs() {
        race(fresh(), &[&["acme:x"], &["acme:x", "globex:x"]], run);
    }
}

fn three_concurrent_migrates_install_every_declaration(fresh: fn() -> Db) {
    for run in 0..runs() {
        race(
            fresh(),
            &[&["acme:x"], &["globex:x"], &["initech:x", "acme:x"]],
            run,
        );
    }
}

/// One race: a v1 database with three partitions, then one `migrate` process
/// per declaration set, released together.
fn race(db: Db, sets: &[&[&str]], run: usize) {
    let app = seed_todos(&db, PARTITIONS[0], 3, 3);
    for partition in &PARTITIONS[1..] {
        app.storage
            .touch_partition(partition, 1_700_000_000_000, &format!("{partition}-epoch"))
            .expect("touch_partition");
    }
    drop(app);
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    let url = db.url();
    let barrier = Arc::new(Barrier::new(sets.len()));
    let handles: Vec<_> = sets
        .iter()
        .map(|set| {
            let mut args: Vec<String> = vec![
                "--db".into(),
                url.clone(),
                "migrate".into(),
                "--schema".into(),
                v2.clone(),
                "--json".into(),
            ];
            for declaration in *set {
                args.push("--declare".into());
                args.push((*declaration).to_owned());
            }
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                barrier.wait();
                syncstore(&args)
            })
        })
        .collect();
    let results: Vec<Run> = handles
        .into_iter()
        .map(|h| h.join().expect("a migrate thread"))
        .collect();

    let mut applied = 0;
    for (set, result) in sets.iter().zip(&results) {
        let doc = result.ok_json();
        assert_eq!(doc["to_version"], 2, "run {run}, {set:?}: {doc:#}");
        if doc["applied"] == Value::Bool(true) {
            applied += 1;
        }
    }
    assert_eq!(
        applied, 1,
        "run {run}: exactly one migrate applied the bump: {results:#?}"
    );

    let wanted: BTreeSet<(String, String)> = sets
        .iter()
        .flat_map(|set| set.iter())
        .map(|d| {
            let (partition, name) = d.rsplit_once(':').expect("PARTITION:NAME");
            (partition.to_owned(), name.to_owned())
        })
        .collect();
    let listed = db.json(&["checkpoints"]);
    let installed: BTreeSet<(String, String)> = listed["checkpoints"]
        .as_array()
        .expect("checkpoints")
        .iter()
        .filter(|c| c["schema_version"] == 2)
        .map(|c| {
            (
                c["partition"].as_str().unwrap_or_default().to_owned(),
                c["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(installed, wanted, "run {run}: {listed:#}");
    let status = db.json(&["status"]);
    for partition in status["partitions"].as_array().expect("partitions") {
        let name = partition["partition"].as_str().unwrap_or_default();
        let declared = wanted.iter().any(|(p, _)| p == name);
        assert_eq!(
            partition["gate"]["serve"],
            Value::Bool(!declared),
            "run {run}: the gate of {name}: {status:#}"
        );
    }
}

fn a_carry_and_an_abandon_racing_report_the_truth(fresh: fn() -> Db) {
    let mut outcomes = BTreeSet::new();
    for run in 0..runs() {
        outcomes.insert(resolution_race(fresh(), run));
    }
    eprintln!("observed (winner, loser's `applied`): {outcomes:?}");
}

/// One race: `acme:search_v2` pending at v2, then `migrate v3 --carry` and
/// `migrate v3 --abandon` of it released together. Returns the winner's
/// resolution and what the loser reported as applied.
fn resolution_race(db: Db, run: usize) -> (String, String) {
    drop(seed_todos(&db, PARTITIONS[0], 3, 3));
    let dir = db.scratch();
    let v2 = write_file(&dir, "v2.json", &todos_schema(2, true, ""));
    let v3 = write_file(&dir, "v3.json", &todos_schema(3, true, ""));
    db.json(&["migrate", "--schema", &v2, "--declare", "acme:search_v2"]);
    let url = db.url();
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = ["--carry", "--abandon"]
        .into_iter()
        .map(|flag| {
            let args: Vec<String> = [
                "--db",
                &url,
                "migrate",
                "--schema",
                &v3,
                flag,
                "acme:search_v2",
                "--json",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                barrier.wait();
                syncstore(&args)
            })
        })
        .collect();
    let results: Vec<Run> = handles
        .into_iter()
        .map(|h| h.join().expect("a migrate thread"))
        .collect();
    let asked = ["carry", "abandon"];
    let winners: Vec<usize> = (0..2).filter(|&i| results[i].code == 0).collect();
    assert_eq!(
        winners.len(),
        1,
        "run {run}: exactly one of carry and abandon succeeds: {results:#?}"
    );
    let (winner, loser) = (winners[0], 1 - winners[0]);
    assert_eq!(
        results[winner].json()["applied"],
        true,
        "run {run}: the one that succeeds applied the bump: {results:#?}"
    );
    let details = results[loser].json_error("sync.cli.resolution_not_applied");
    assert_eq!(details["partition"], "acme", "run {run}: {details:#}");
    assert_eq!(details["name"], "search_v2", "run {run}: {details:#}");
    assert_eq!(details["requested"], asked[loser], "run {run}: {details:#}");
    let reported = details["applied"].as_str().unwrap_or_default().to_owned();
    assert!(
        reported == asked[winner] || reported == "unknown",
        "run {run}: the loser names the winner's resolution (or says it cannot tell): {details:#}"
    );
    if reported == asked[winner] {
        assert_eq!(
            details["applied_by"], "another process",
            "run {run}: {details:#}"
        );
    }
    let checkpoints = db.json(&["checkpoints"])["checkpoints"].clone();
    if asked[winner] == "carry" {
        assert_eq!(
            details["stored"], "declared at version 3",
            "run {run}: {details:#}"
        );
        assert_eq!(
            checkpoints[0]["schema_version"], 3,
            "run {run}: {checkpoints:#}"
        );
        assert_eq!(checkpoints.as_array().map(Vec::len), Some(1));
    } else {
        assert_eq!(details["stored"], "absent", "run {run}: {details:#}");
        assert_eq!(checkpoints, json!([]), "run {run}");
    }
    (asked[winner].to_owned(), reported)
}
