//! The whole conformance suite against the live MariaDB server
//! (`SYNCSTORE_MARIADB_URL`, default `mysql://root@127.0.0.1:3306/test`).
//! An unreachable server fails the test with instructions; it is never a
//! skip.

use sync_mariadb::harness::MariadbHarness;

fn harness() -> MariadbHarness {
    MariadbHarness::from_env().unwrap_or_else(|unreachable| panic!("{unreachable}"))
}

#[test]
fn conformance_suite_passes_on_mariadb() {
    sync_conformance::assert_suite_passes(&harness());
}

#[test]
fn operator_reads_work_without_an_ensured_schema() {
    use sync_conformance::{operator, reference::assert_passes};
    let harness = harness();
    assert_passes(operator::check_read_commits(&harness));
    assert_passes(operator::check_inspect_table_rows(&harness));
}
