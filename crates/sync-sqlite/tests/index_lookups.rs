//! `scan_rows_by_index` on SQLite: application tables are rowid tables, so a
//! declared index orders equal keys by rowid; non-unique declared indexes
//! end with `_sync_row_id`, and a lookup value that many rows share pages in
//! row-id order from one range of its own index — no temporary B-tree, no
//! walk of the primary key past other values' rows. (That a database whose
//! indexes have the default shape keeps opening is C-352, on every dialect.)

mod common;

use common::*;
use sync_core::{IndexRowScanQuery, RowValue, ServerStorage};
use sync_sqlite::hot_path_sql as hot;
use sync_sqlite::SqliteStorage;

/// Rows of `tasks` in `p1`; every one whose number is not a multiple of
/// four has the title `shared`, the others a title of their own. Row
/// `t<i>` is in project `proj<i>` (`(project_id, title)` is unique).
const ROWS: usize = 2000;

fn shared_ids() -> Vec<String> {
    (0..ROWS)
        .filter(|i| i % 4 != 0)
        .map(|i| format!("t{i:05}"))
        .collect()
}

fn seeded(db: &Db) -> SqliteStorage {
    let storage = db.ready();
    let mut tx = storage.begin("p1").unwrap();
    for i in 0..ROWS {
        let title = if i % 4 == 0 {
            format!("own {i}")
        } else {
            "shared".to_owned()
        };
        let row = task_row(&format!("t{i:05}"), &format!("proj{i}"), &title);
        tx.upsert_row("tasks", &row, None).unwrap();
    }
    tx.commit().unwrap();
    storage
}

/// Every id of `title = 'shared'`, page by page.
fn page_through_shared(storage: &SqliteStorage) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    loop {
        let page = storage
            .scan_rows_by_index(
                "p1",
                &IndexRowScanQuery {
                    table: "tasks".into(),
                    index: "tasks_by_title".into(),
                    values: vec![RowValue::String("shared".into())],
                    after_row_id: seen.last().cloned(),
                    limit: 300,
                },
            )
            .unwrap();
        if page.is_empty() {
            return seen;
        }
        seen.extend(page.into_iter().map(|r| r.row_id));
    }
}

#[test]
fn a_shared_value_pages_in_row_id_order_from_one_range_of_its_index() {
    let db = Db::new();
    let storage = seeded(&db);
    assert_eq!(page_through_shared(&storage), shared_ids());

    let conn = db.raw();
    let sql = hot::index_lookup_sql("\"tasks\"", &["title".to_owned()], &[false]);
    for statistics in ["never analyzed", "analyzed"] {
        if statistics == "analyzed" {
            conn.execute_batch("ANALYZE").unwrap();
        }
        let lines = plan(&conn, &sql);
        assert!(
            lines.iter().any(|l| l.starts_with(
                "SEARCH tasks USING INDEX sync_ix_tasks_by_title (_sync_partition=? AND title=? AND _sync_row_id>?)"
            )),
            "{statistics}: not one range of the declared index: {lines:?}"
        );
        assert!(
            !lines.iter().any(|l| l.contains("TEMP B-TREE")),
            "{statistics}: sorts: {lines:?}"
        );
    }
}
