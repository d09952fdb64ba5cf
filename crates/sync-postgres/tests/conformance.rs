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
