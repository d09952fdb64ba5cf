//! Registered queries cannot reach `sync_` tables, other partitions or
//! anything outside the declared tables of their own partition — whatever
//! the SQL tries: quoted, bracketed or backticked names, case variants,
//! comments, schema qualification, subqueries, UNION, CTEs, `FROM (tasks)`,
//! comma joins, Unicode look-alikes, Postgres-only lexical forms (dollar
//! quotes, escape strings, Unicode-escaped identifiers, nested comments),
//! system catalogs and functions that run SQL text or read files, and
//! statements that write.
//!
//! Partition B's rows and partition A's commit-log entries carry the marker
//! `LEAK`; a query for partition A must either be refused with a coded error
//! or return rows none of whose cells mentions `LEAK` or `sync_`. The pool
//! path and the transaction path are both tried, on both dialects, and the
//! database census (every physical table and its row count) must be unchanged
//! afterwards.

use std::collections::BTreeMap;

use sync_core::{
    AuthoritativeQueryRequest, EnsureOptions, ErrorCode, ServeContext, ServerStorage, SqlValue,
};
use syncstore_tests::model::{self, ChangeSpec, Outcome};
use syncstore_tests::{deployment, fixture, DIALECTS};

const A: &str = "pA";
const B: &str = "pB-LEAK";

/// `(sql, declared tables, params)`.
type Case = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

/// Legitimate queries: they must run and see partition A only.
const LEGITIMATE: [Case; 7] = [
    ("SELECT id, grp FROM items ORDER BY id", &["items"], &[]),
    ("SELECT id FROM ITEMS WHERE grp = ?", &["items"], &["g0"]),
    (
        "SELECT id FROM items UNION ALL SELECT id FROM notes",
        &["items", "notes"],
        &[],
    ),
    (
        "WITH t AS (SELECT id FROM items) SELECT count(*) FROM t",
        &["items"],
        &[],
    ),
    (
        "SELECT items.id FROM items JOIN notes USING (id)",
        &["items", "notes"],
        &[],
    ),
    (
        "SELECT id FROM \"items\" WHERE id IN (SELECT id FROM notes)",
        &["items", "notes"],
        &[],
    ),
    (
        "SELECT count(*) FROM items WHERE id = ?1 OR grp = ?1",
        &["items"],
        &["' OR '1'='1"],
    ),
];

/// Evasion attempts: refused, or harmless.
const EVASIONS: [Case; 54] = [
    ("SELECT * FROM sync_commits", &[], &[]),
    ("SELECT i.id FROM (items) AS i", &["items"], &[]),
    ("SELECT * FROM \"sync_commits\"", &[], &[]),
    ("SELECT * FROM \"SYNC_COMMITS\"", &[], &[]),
    ("SELECT * FROM [sync_commits]", &[], &[]),
    ("SELECT * FROM `sync_changes`", &[], &[]),
    ("SELECT * FROM/**/sync_commits", &[], &[]),
    ("SELECT * FROM -- x\n sync_commits", &[], &[]),
    ("SELECT * FROM main.sync_commits", &[], &[]),
    ("SELECT * FROM public.sync_commits", &[], &[]),
    ("SELECT * FROM main.items", &["items"], &[]),
    ("SELECT * FROM \"main\".\"items\"", &["items"], &[]),
    ("SELECT * FROM public . items", &["items"], &[]),
    ("SELECT * FROM items, notes", &["items", "notes"], &[]),
    (
        "SELECT * FROM items WHERE _sync_partition <> 'pA'",
        &["items"],
        &[],
    ),
    (
        "SELECT * FROM items UNION SELECT * FROM sync_partitions",
        &["items"],
        &[],
    ),
    (
        "WITH items AS (SELECT * FROM notes) SELECT * FROM items",
        &["items", "notes"],
        &[],
    ),
    ("SELECT * FROM (SELECT * FROM sync_commits) x", &[], &[]),
    ("SELECT * FROM ONLY items", &["items"], &[]),
    ("TABLE items", &["items"], &[]),
    ("SELECT * FROM іtems", &[], &[]),
    ("SELECT * FROM ＩＴＥＭＳ", &[], &[]),
    (
        "SELECT * FROM items INDEXED BY sync_ix_items_by_n",
        &["items"],
        &[],
    ),
    (
        "SELECT id FROM items WHERE id = ?",
        &["items"],
        &["x' UNION SELECT client_id FROM sync_commits --"],
    ),
    // System catalogs and schema metadata.
    ("SELECT name, sql FROM sqlite_master", &[], &[]),
    ("SELECT * FROM sqlite_schema", &[], &[]),
    ("SELECT * FROM pragma_table_info('sync_commits')", &[], &[]),
    ("SELECT relname FROM pg_class", &[], &[]),
    ("SELECT table_name FROM information_schema.tables", &[], &[]),
    // Functions that run SQL text or read the server's files.
    (
        "SELECT query_to_xml('select client_id from sync_' || 'commits', true, false, '')",
        &[],
        &[],
    ),
    (
        "SELECT table_to_xml('sync_commits', true, false, '')",
        &[],
        &[],
    ),
    (
        "SELECT query_to_xml('select client_id from sync_' || 'commits', true, false, '')::text",
        &[],
        &[],
    ),
    ("SELECT pg_read_file('PG_VERSION')", &[], &[]),
    ("SELECT * FROM pg_ls_dir('.')", &[], &[]),
    (
        "SELECT * FROM items WHERE id = (SELECT min(client_id) FROM \"sync_commits\")",
        &["items"],
        &[],
    ),
    ("SELECT * FROM items AS sync_alias", &["items"], &[]),
    ("SELECT * FROM \"ｓync_commits\"", &[], &[]),
    ("SELECT current_setting('search_path')", &[], &[]),
    // Postgres lexical forms the SQLite-family mask does not know.
    (
        "SELECT $$'$$ AS a, c.client_id FROM sync_commits c --'",
        &[],
        &[],
    ),
    (
        "SELECT E'\\'' AS a, c.client_id FROM sync_commits c --'",
        &[],
        &[],
    ),
    (
        "SELECT 1 /* /* */ ' */ , c.client_id FROM sync_commits c --'",
        &[],
        &[],
    ),
    ("SELECT * FROM U&\"\\0073ync_commits\"", &[], &[]),
    ("SELECT * FROM U&\"!0073ync_commits\" UESCAPE '!'", &[], &[]),
    // Statements that write, or are not queries.
    ("DELETE FROM items", &["items"], &[]),
    (
        "DELETE FROM notes WHERE id IN (SELECT id FROM items)",
        &["items", "notes"],
        &[],
    ),
    ("UPDATE items SET n = 0", &["items"], &[]),
    ("INSERT INTO notes SELECT * FROM items", &["items"], &[]),
    (
        "CREATE TABLE stolen AS SELECT * FROM items",
        &["items"],
        &[],
    ),
    ("SELECT * INTO stolen FROM items", &["items"], &[]),
    (
        "WITH gone AS (DELETE FROM items RETURNING id) SELECT * FROM gone",
        &["items"],
        &[],
    ),
    ("ATTACH DATABASE ':memory:' AS other", &[], &[]),
    ("VACUUM INTO 'stolen.db'", &[], &[]),
    ("PRAGMA writable_schema = 1", &[], &[]),
    // Session state of a pooled connection (last: it poisons the pool when it runs).
    (
        "SELECT set_config('search_path', 'public', false)",
        &[],
        &[],
    ),
];

fn request(case: &Case) -> AuthoritativeQueryRequest {
    AuthoritativeQueryRequest {
        sql: case.0.to_owned(),
        params: case
            .2
            .iter()
            .map(|p| SqlValue::Text((*p).to_owned()))
            .collect(),
        tables: case.1.iter().map(|t| (*t).to_owned()).collect(),
    }
}

fn seed(storage: &dyn ServerStorage) {
    let spec = |table, row, group| ChangeSpec {
        table,
        row,
        delete: false,
        group,
        n: 7,
    };
    for (partition, client) in [(A, "LEAK-sync-client"), (B, "client-b")] {
        storage.touch_partition(partition, 1, "LEAK-epoch").unwrap();
        for i in 0..3 {
            let changes = [spec(0, i, 0), spec(1, i, 1)];
            let outcome = model::push(
                storage,
                Some(&ServeContext::default()),
                partition,
                client,
                &format!("LEAK-commit-{i}"),
                &changes,
                false,
                model::step_time(i),
            )
            .unwrap();
            assert!(matches!(outcome, Outcome::Pushed(_)), "{outcome:?}");
        }
    }
    // Partition B's rows carry the marker in their values too.
    let schema = storage.ensured_schema().unwrap();
    let mut tx = storage.begin(B).unwrap();
    let row = fixture::row(&schema, fixture::ITEMS, "LEAK-b-row", "LEAK-group", 1, 1);
    tx.upsert_row(fixture::ITEMS, &row, None).unwrap();
    tx.commit().unwrap();
}

fn leaked(result: &sync_core::AuthoritativeQueryResult) -> Option<String> {
    let texts = result
        .columns
        .iter()
        .cloned()
        .chain(result.rows.iter().flatten().filter_map(|v| match v {
            SqlValue::Text(t) => Some(t.clone()),
            SqlValue::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }));
    texts
        .into_iter()
        .find(|t| t.contains("LEAK") || t.to_ascii_lowercase().contains("sync_"))
}

/// Runs a query on both paths; returns the outcome labels.
fn attempt(
    storage: &dyn ServerStorage,
    case: &Case,
) -> [Result<sync_core::AuthoritativeQueryResult, String>; 2] {
    let req = request(case);
    let pool = storage
        .query_authoritative(A, &req, &ServeContext::default())
        .map_err(|e| model::code_of(&e));
    let mut tx = storage.begin(A).unwrap();
    let in_tx = tx.query_authoritative(&req).map_err(|e| model::code_of(&e));
    tx.rollback().unwrap();
    [pool, in_tx]
}

#[test]
fn registered_queries_stay_inside_their_partition_and_tables() {
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for dialect in DIALECTS {
        let deployment = deployment(dialect);
        let storage = deployment.process();
        storage
            .ensure_schema(&fixture::schema(1), &EnsureOptions::default())
            .unwrap();
        seed(storage.as_ref());

        for case in &LEGITIMATE {
            for (path, outcome) in ["pool", "tx"].iter().zip(attempt(storage.as_ref(), case)) {
                match outcome {
                    Ok(result) => {
                        if let Some(cell) = leaked(&result) {
                            failures
                                .push(format!("{dialect}/{path}: {:?} leaked {cell:?}", case.0));
                        }
                        if result.rows.is_empty() {
                            failures
                                .push(format!("{dialect}/{path}: {:?} returned nothing", case.0));
                        }
                        *tally.entry("legitimate: ran".into()).or_default() += 1;
                    }
                    Err(code) => failures.push(format!(
                        "{dialect}/{path}: legitimate {:?} refused: {code}",
                        case.0
                    )),
                }
            }
        }
        for case in &EVASIONS {
            let before = deployment.census();
            for (path, outcome) in ["pool", "tx"].iter().zip(attempt(storage.as_ref(), case)) {
                match outcome {
                    Ok(result) => {
                        if let Some(cell) = leaked(&result) {
                            failures
                                .push(format!("{dialect}/{path}: {:?} leaked {cell:?}", case.0));
                        }
                        *tally.entry("evasion: ran harmlessly".into()).or_default() += 1;
                    }
                    Err(code) => {
                        if !code.starts_with("sync.storage.") {
                            failures
                                .push(format!("{dialect}/{path}: {:?} failed with {code}", case.0));
                        }
                        if code == "sync.storage.backend" {
                            // The SQL reached the database: it must still
                            // have harmed nothing (census and health below).
                            *tally
                                .entry(format!("evasion: {code} (reached the database)"))
                                .or_default() += 1;
                            println!(
                                "{dialect}/{path}: reached the database and failed there: {:?}",
                                case.0
                            );
                        } else {
                            *tally.entry(format!("evasion: {code}")).or_default() += 1;
                        }
                    }
                }
            }
            let after = deployment.census();
            if after != before {
                failures.push(format!(
                    "{dialect}: {:?} changed the database: {before:?} -> {after:?}",
                    case.0
                ));
            }
            if let Err(e) = storage
                .get_max_commit_seq(A)
                .and_then(|_| storage.read_checkpoints(A))
            {
                failures.push(format!(
                    "{dialect}: after {:?} the storage fails: {e:?}",
                    case.0
                ));
            }
            let mut tx = storage.begin(A).unwrap();
            if let Err(e) = tx
                .lock_partition_for_push()
                .and_then(|()| tx.max_commit_seq())
            {
                failures.push(format!(
                    "{dialect}: after {:?} a transaction fails: {e:?}",
                    case.0
                ));
            }
            drop(tx);
        }
        // The storage still works, on every pooled connection.
        for i in 0..20 {
            let outcome = model::push(
                storage.as_ref(),
                None,
                A,
                "after",
                &format!("after-{i}"),
                &[],
                false,
                1,
            );
            if !matches!(outcome, Ok(Outcome::Pushed(_))) {
                failures.push(format!(
                    "{dialect}: a push after the queries failed: {outcome:?}"
                ));
                break;
            }
        }
    }
    println!(
        "isolation (registered queries): {} legitimate and {} evasion queries x 2 paths x {} dialects; {tally:?}",
        LEGITIMATE.len(),
        EVASIONS.len(),
        DIALECTS.len()
    );
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    let _ = ErrorCode::QueryRejected;
}
