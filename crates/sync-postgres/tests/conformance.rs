//! The whole conformance suite against the live Postgres server.

use sync_postgres::harness::PostgresHarness;

#[test]
fn conformance_suite_passes_on_postgres() {
    let harness = PostgresHarness::new();
    if let Err(unreachable) = harness.check_reachable() {
        panic!("{unreachable}");
    }
    sync_conformance::assert_suite_passes(&harness);
}

#[test]
fn operator_reads_work_without_an_ensured_schema() {
    use sync_conformance::{operator, reference::assert_passes};
    let harness = PostgresHarness::new();
    if let Err(unreachable) = harness.check_reachable() {
        panic!("{unreachable}");
    }
    assert_passes(operator::check_read_commits(&harness));
    assert_passes(operator::check_inspect_table_rows(&harness));
}
