//! The whole conformance suite against the shadow dialect: every check its
//! properties allow runs and passes, none is skipped.

use sync_conformance::{assert_suite_passes, selected_checks, Harness};

#[test]
fn shadow_passes_the_conformance_suite() {
    assert_suite_passes(&dialect_shadow::ShadowHarness);
}

#[test]
fn shadow_runs_what_its_properties_allow() {
    let checks = selected_checks(&dialect_shadow::ShadowHarness.properties(), None);
    let ids: Vec<&str> = checks.iter().map(|c| c.id).collect();
    // The whole-database writer runs C-303 and the shape-fixed plans, not
    // the per-partition or statistics checks.
    for id in [
        "C-036", "C-240", "C-303", "C-326", "C-327", "C-074", "E-001",
    ] {
        assert!(ids.contains(&id), "{id} not selected");
    }
    for id in ["C-033", "C-302", "C-328", "C-330", "C-334"] {
        assert!(!ids.contains(&id), "{id} selected");
    }
}

#[test]
fn shadow_ddl_is_rendered_by_its_own_dialect_value() {
    let schema = sync_conformance::fixtures::fix1().expect("FIX1 compiles");
    let tasks = schema.table("tasks").expect("FIX1 has tasks");
    let shadow = sync_schema::create_table_sql(tasks, dialect_shadow::DIALECT);
    assert!(shadow.contains("\"done\" INTEGER NOT NULL"), "{shadow}");
    assert_eq!(dialect_shadow::DIALECT.to_string(), "shadow");
}
