//! The whole conformance suite against the SQLite harness.

#[test]
fn sqlite_passes_the_conformance_suite() {
    sync_conformance::assert_suite_passes(&sync_sqlite::harness::SqliteHarness);
}

#[test]
fn operator_reads_work_without_an_ensured_schema() {
    use sync_conformance::{operator, reference::assert_passes};
    assert_passes(operator::check_read_commits(
        &sync_sqlite::harness::SqliteHarness,
    ));
    assert_passes(operator::check_inspect_table_rows(
        &sync_sqlite::harness::SqliteHarness,
    ));
}
