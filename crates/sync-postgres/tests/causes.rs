//! `details.cause` of `sync.storage.backend`, classified from the driver
//! error, for every cause this server can produce: an unreachable port, a
//! missing database, a missing schema, a role that may not log in, a
//! read-only session and an index entry too large for its index.

mod common;

use common::*;
use sync_core::{Error, ErrorCode, ServerStorage};
use sync_postgres::{PostgresConfig, PostgresStorage};

fn assert_cause<T: std::fmt::Debug>(result: Result<T, Error>, cause: &str, what: &str) {
    let error = result.expect_err(what);
    assert_eq!(error.code(), ErrorCode::Backend, "{what}: {error:?}");
    assert_eq!(error.get_detail("cause"), Some(cause), "{what}: {error:?}");
    assert!(
        error.source_first_line().is_some(),
        "{what}: driver text kept"
    );
}

/// The test server's URL with the database path replaced.
fn with_database(database: &str) -> String {
    let url = pg_url();
    let (base, query) = url
        .split_once('?')
        .map_or((url.as_str(), None), |(b, q)| (b, Some(q)));
    let authority_end = base
        .find("://")
        .and_then(|i| base[i + 3..].find('/').map(|j| i + 3 + j))
        .unwrap_or(base.len());
    let mut out = format!("{}/{database}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

fn connect(url: &str, config: PostgresConfig) -> sync_core::Result<PostgresStorage> {
    PostgresStorage::connect(url, config)
}

#[test]
fn an_unreachable_port_is_unreachable() {
    // Port 1 on the loopback: nothing listens there.
    assert_cause(
        connect(
            "postgres://postgres@127.0.0.1:1/test?connect_timeout=5",
            PostgresConfig::default(),
        ),
        "unreachable",
        "connect to a closed port",
    );
}

#[test]
fn a_missing_database_is_database_missing() {
    assert_cause(
        connect(
            &with_database("syncstore_no_such_database"),
            PostgresConfig::default(),
        ),
        "database_missing",
        "connect to a missing database",
    );
}

#[test]
fn a_missing_schema_is_schema_missing() {
    let config = PostgresConfig {
        schema: Some("syncstore_no_such_schema".into()),
        ..PostgresConfig::default()
    };
    let storage = connect(&pg_url(), config).expect("the connection itself works");
    assert_cause(
        storage.ensure_schema(&fix1(), &Default::default()),
        "schema_missing",
        "ensure in a missing schema",
    );
}

#[test]
fn a_role_without_login_is_auth_failed() {
    let role = "syncstore_test_nologin";
    client()
        .batch_execute(&format!(
            "DO $$ BEGIN CREATE ROLE {role} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        ))
        .expect("create role");
    let url = pg_url();
    let url = url.replacen("postgres@", &format!("{role}@"), 1);
    assert!(url.contains(role), "the test URL names its user: {url}");
    assert_cause(
        connect(&url, PostgresConfig::default()),
        "auth_failed",
        "connect as a role that may not log in",
    );
}

#[test]
fn a_read_only_session_is_read_only() {
    let db = TestDb::new();
    let url = with_param(&pg_url(), "options=-c%20default_transaction_read_only%3Don");
    let storage = connect(&url, db.config()).expect("connect read-only");
    assert_cause(
        storage.ensure_schema(&fix1(), &Default::default()),
        "read_only",
        "ensure in a read-only session",
    );
}

#[test]
fn an_index_entry_too_large_for_its_index_is_too_large() {
    let db = TestDb::new();
    let storage = ensured(&db);
    // Incompressible text well above a btree entry's limit (~2.7 kB).
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let title: String = (0..40_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'!' + (state % 90) as u8)
        })
        .collect();
    let row = task_row(&fix1(), "huge", "p1", &title, 1);
    assert_cause(
        push(&storage, "acme", "c1", "cc1", &[row]),
        "too_large",
        "a title too large for its index",
    );
}

#[test]
fn read_only_connections_say_why_they_failed() {
    let read_only = |url: &str| PostgresStorage::connect_read_only(url, PostgresConfig::default());
    assert_cause(
        read_only("postgres://postgres@127.0.0.1:1/test?connect_timeout=5"),
        "unreachable",
        "read-only connect to a closed port",
    );
    assert_cause(
        read_only(&with_database("syncstore_no_such_database")),
        "database_missing",
        "read-only connect to a missing database",
    );
    let role = "syncstore_test_nologin_ro";
    client()
        .batch_execute(&format!(
            "DO $$ BEGIN CREATE ROLE {role} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        ))
        .expect("create role");
    let url = pg_url().replacen("postgres@", &format!("{role}@"), 1);
    assert!(url.contains(role), "the test URL names its user: {url}");
    assert_cause(
        read_only(&url),
        "auth_failed",
        "read-only connect as a role that may not log in",
    );
}
