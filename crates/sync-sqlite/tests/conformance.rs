//! The whole conformance suite against the SQLite harness.

#[test]
fn sqlite_passes_the_conformance_suite() {
    sync_conformance::assert_suite_passes(&sync_sqlite::harness::SqliteHarness::DEFAULT);
}

/// The smallest page SQLite offers (`SqliteConfig::page_size`): deeper
/// B-trees, more overflow pages for large rows and segments, the same
/// answers.
#[test]
fn sqlite_with_512_byte_pages_passes_the_conformance_suite() {
    sync_conformance::assert_suite_passes(&sync_sqlite::harness::SqliteHarness::with_page_size(
        512,
    ));
}

#[test]
fn operator_reads_work_without_an_ensured_schema() {
    use sync_conformance::{operator, reference::assert_passes};
    assert_passes(operator::check_read_commits(
        &sync_sqlite::harness::SqliteHarness::DEFAULT,
    ));
    assert_passes(operator::check_inspect_table_rows(
        &sync_sqlite::harness::SqliteHarness::DEFAULT,
    ));
}
