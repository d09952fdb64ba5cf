//! `scan_rows_by_index` on Postgres: a lookup value that many rows share
//! pages in row-id order from one range of its own index, without sorting
//! the rows that share it (a btree orders equal keys by heap position, so
//! non-unique declared indexes end with `_sync_row_id`). (That a database
//! whose indexes have the default shape keeps opening is C-352, on every
//! dialect.)

mod common;

use common::*;
use postgres::Client;
use sync_core::{IndexRowScanQuery, RowValue, ServerStorage};
use sync_postgres::hot_path_sql::index_lookup_sql;
use sync_postgres::PostgresStorage;

/// Rows of `tasks` in `acme`: every one whose number is not a multiple of
/// four has the title `shared`; the others a title of their own. Row
/// `t<i>` is in project `p<i>`.
const ROWS: usize = 4000;

fn shared_ids() -> Vec<String> {
    (0..ROWS)
        .filter(|i| i % 4 != 0)
        .map(|i| format!("t{i:05}"))
        .collect()
}

fn seeded(db: &TestDb) -> PostgresStorage {
    let storage = ensured(db);
    let schema = fix1();
    let mut tx = storage.begin("acme").unwrap();
    tx.lock_partition_for_push().unwrap();
    for i in 0..ROWS {
        let title = if i % 4 == 0 {
            format!("own {i}")
        } else {
            "shared".to_owned()
        };
        // (project_id, title) is unique: one project per row.
        let row = task_row(&schema, &format!("t{i:05}"), &format!("p{i}"), &title, 1);
        tx.upsert_row("tasks", &row, None).unwrap();
    }
    tx.commit().unwrap();
    storage
}

fn lookup(
    storage: &PostgresStorage,
    index: &str,
    values: Vec<RowValue>,
    after: Option<&str>,
    limit: i64,
) -> Vec<String> {
    storage
        .scan_rows_by_index(
            "acme",
            &IndexRowScanQuery {
                table: "tasks".into(),
                index: index.into(),
                values,
                after_row_id: after.map(str::to_owned),
                limit,
            },
        )
        .unwrap()
        .into_iter()
        .map(|r| r.row_id)
        .collect()
}

/// Every id of `title = 'shared'`, page by page.
fn page_through_shared(storage: &PostgresStorage) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let page = lookup(
            storage,
            "tasks_by_title",
            vec![RowValue::String("shared".into())],
            seen.last().map(String::as_str),
            500,
        );
        if page.is_empty() {
            return seen;
        }
        seen.extend(page);
    }
}

fn explain(raw: &mut Client, args: &str) -> String {
    raw.query(&format!("EXPLAIN EXECUTE by_title({args})"), &[])
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_shared_value_pages_in_row_id_order_from_one_range_of_its_index() {
    let db = TestDb::new();
    let storage = seeded(&db);
    assert_eq!(page_through_shared(&storage), shared_ids());

    let schema = fix1();
    let table = schema.table("tasks").unwrap();
    let index = table.index("tasks_by_title").unwrap();
    let mut raw = db.raw();
    raw.batch_execute(&format!(
        "PREPARE by_title(text, text, int8, text) AS {}",
        index_lookup_sql(table, index, &[false])
    ))
    .unwrap();
    let args = "'acme', 't00100', 500, 'shared'";
    for (statistics, mode) in [
        ("never analyzed", "force_custom_plan"),
        ("never analyzed", "force_generic_plan"),
        ("analyzed", "force_custom_plan"),
        ("analyzed", "force_generic_plan"),
    ] {
        if statistics == "analyzed" {
            raw.batch_execute("ANALYZE tasks").unwrap();
        }
        raw.batch_execute(&format!("SET plan_cache_mode = {mode}"))
            .unwrap();
        let plan = explain(&mut raw, args);
        assert!(
            plan.contains("sync_ix_tasks_by_title"),
            "{statistics}, {mode}: not through the declared index\n{plan}"
        );
        for bad in ["Sort", "Seq Scan", "Bitmap"] {
            assert!(
                !plan.contains(bad),
                "{statistics}, {mode}: {bad} in\n{plan}"
            );
        }
    }
}

#[test]
fn a_unique_lookup_honours_the_cursor() {
    let db = TestDb::new();
    let storage = seeded(&db);
    let values = || {
        vec![
            RowValue::String("p8".into()),
            RowValue::String("own 8".into()),
        ]
    };
    let index = "tasks_by_project_title";
    assert_eq!(lookup(&storage, index, values(), None, 10), ["t00008"]);
    assert_eq!(
        lookup(&storage, index, values(), Some("t00007"), 10),
        ["t00008"]
    );
    assert!(lookup(&storage, index, values(), Some("t00008"), 10).is_empty());
}
