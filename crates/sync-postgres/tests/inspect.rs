//! `observe_tables`, the dialect's read-only physical view used by the
//! operator tool. The operator reads shared by every dialect
//! (`read_commits`, `inspect_table_rows`) are checked in `tests/conformance.rs`
//! through `sync_conformance::operator`.

mod common;

use common::*;
use sync_schema::ObserveTables;

#[test]
fn observe_tables_reports_the_physical_state_read_only() {
    let db = TestDb::new();
    let storage = ensured(&db);
    let names = vec!["tasks".to_owned(), "absent".to_owned()];
    let observed = storage.observe_tables(&names).unwrap();
    let tasks = observed.get("tasks").unwrap();
    assert!(tasks.column("title").is_some());
    assert!(tasks.index("sync_ix_tasks_by_title").is_some());
    assert_eq!(
        tasks.column("_sync_row_id").unwrap().collation.as_deref(),
        Some("C")
    );
    assert!(
        observed.get("sync_commits").is_some(),
        "internal key tables are observed too"
    );
    assert!(
        observed.get("absent").is_none(),
        "absent tables read as absent"
    );
}
