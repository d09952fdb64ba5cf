//! The whole conformance suite against the SQLite harness.

#[test]
fn sqlite_passes_the_conformance_suite() {
    sync_conformance::assert_suite_passes(&sync_sqlite::harness::SqliteHarness);
}
