//! `observe_tables`, the dialect's read-only physical view used by the
//! operator tool. The operator reads shared by every dialect
//! (`read_commits`, `inspect_table_rows`) are checked in `tests/conformance.rs`
//! through `sync_conformance::operator`.

mod common;

use common::*;
use sync_schema::ObserveTables;

#[test]
fn observe_tables_reports_the_physical_state_read_only() {
    let db = Db::new();
    let storage = db.ready();
    let names = vec!["tasks".to_owned(), "absent".to_owned()];
    let observed = storage.observe_tables(&names).unwrap();
    let tasks = observed.get("tasks").unwrap();
    assert!(tasks.exists);
    assert!(tasks.column("title").is_some());
    assert!(tasks.index("sync_ix_tasks_by_title").is_some());
    assert!(
        observed.get("absent").is_none(),
        "absent tables read as absent"
    );
}
