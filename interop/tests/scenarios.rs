//! The reference's published Rust client (`syncular-client` 0.15.48)
//! against `syncstore serve` as a black box, over 127.0.0.1. Every scenario
//! runs once on SQLite, once on Postgres and once on MariaDB.

mod support;

use serde_json::json;
use support::http::{self, SSP2};
use support::schema::{todos, tokens};
use support::{Client, Dialect, Server};
use syncular_client::{ClientLimits, CommitOutcomeStatus, SyncOutcome};

const P: &str = "p1";

/// A writer allowed everywhere, and alice and bob on list `l1`.
fn team() -> serde_json::Value {
    tokens(&[
        ("admin-token", P, "admin", "*"),
        ("alice-token", P, "alice", "l1"),
        ("bob-token", P, "bob", "l1"),
    ])
}

fn outcome_status(client: &Client, commit: &str) -> CommitOutcomeStatus {
    client
        .sync
        .commit_outcome(commit)
        .unwrap_or_else(|e| panic!("commit_outcome: {e}"))
        .unwrap_or_else(|| panic!("no outcome recorded for {commit}"))
        .status
}

scenario!(two_clients_converge);
fn two_clients_converge(dialect: Dialect) {
    let server = Server::start(dialect, &todos(1), &team());
    let mut alice = Client::new(&server, "alice-phone", "alice-token", &todos(1));
    let mut bob = Client::new(&server, "bob-laptop", "bob-token", &todos(1));
    alice.subscribe("mine", &["l1"]);
    bob.subscribe("mine", &["l1"]);

    // Push, then a bootstrap.
    alice.upsert_many(&[("t1", "l1", "milk"), ("t2", "l1", "eggs")], None);
    let pushed = alice.sync_until_idle();
    assert_eq!(pushed.applied.len(), 1, "{pushed:?}");
    let boot = bob.sync_until_idle();
    assert!(boot.segment_rows_applied >= 2, "bob bootstraps: {boot:?}");
    assert_eq!(bob.todos(), alice.todos());
    assert_eq!(bob.todos()["t1"], (1, "l1".into(), "milk".into()));

    // Incremental: an update, a delete and an insert reach bob as commits.
    alice.upsert("t1", "l1", "oat milk", Some(1));
    alice.delete("t2");
    alice.upsert("t3", "l1", "bread", None);
    alice.sync_until_idle();
    let incremental = bob.sync_until_idle();
    assert!(incremental.commits_applied >= 3, "{incremental:?}");
    assert_eq!(incremental.segment_rows_applied, 0, "{incremental:?}");
    let held = bob.todos();
    assert_eq!(held["t1"], (2, "l1".into(), "oat milk".into()));
    assert!(!held.contains_key("t2"), "{held:?}");
    assert_eq!(held["t3"].2, "bread");

    // And back.
    bob.upsert("t4", "l1", "jam", None);
    bob.sync_until_idle();
    alice.sync_until_idle();
    assert_eq!(alice.todos(), bob.todos());
    assert_eq!(alice.todos().len(), 3);
}

scenario!(a_replay_after_a_lost_response_is_cached);
fn a_replay_after_a_lost_response_is_cached(dialect: Dialect) {
    let server = Server::start(dialect, &todos(1), &team());
    let mut alice = Client::new(&server, "alice-phone", "alice-token", &todos(1));
    let mut bob = Client::new(&server, "bob-laptop", "bob-token", &todos(1));
    alice.subscribe("mine", &["l1"]);
    bob.subscribe("mine", &["l1"]);
    // The first round acquires the log epoch (and pushes nothing).
    alice.sync_until_idle();
    let commit = alice.upsert("t1", "l1", "milk", None);

    alice.wire.drop_next_response = true;
    match alice.round() {
        SyncOutcome::Failed { .. } => {}
        SyncOutcome::Ok(report) => panic!("a lost response reads as a failure: {report:?}"),
    }
    let pending = alice.sync.pending_commit_ids();
    assert_eq!(pending, std::slice::from_ref(&commit));
    // The server applied it: bob sees it before alice replays.
    bob.sync_until_idle();
    assert_eq!(bob.todos()["t1"], (1, "l1".into(), "milk".into()));

    let report = alice.sync_until_idle();
    assert_eq!(report.applied, std::slice::from_ref(&commit), "{report:?}");
    assert_eq!(outcome_status(&alice, &commit), CommitOutcomeStatus::Cached);
    assert!(alice.sync.pending_commit_ids().is_empty());

    // Applied once: still version 1, and nothing new for bob.
    let again = bob.sync_until_idle();
    assert_eq!(again.commits_applied, 0, "{again:?}");
    assert_eq!(bob.todos()["t1"], (1, "l1".into(), "milk".into()));
    assert_eq!(alice.todos(), bob.todos());
}

scenario!(both_conflict_shapes_end_as_the_client_expects);
fn both_conflict_shapes_end_as_the_client_expects(dialect: Dialect) {
    let server = Server::start(dialect, &todos(1), &team());
    let mut alice = Client::new(&server, "alice-phone", "alice-token", &todos(1));
    let mut bob = Client::new(&server, "bob-laptop", "bob-token", &todos(1));
    alice.subscribe("mine", &["l1"]);
    bob.subscribe("mine", &["l1"]);
    alice.upsert("t1", "l1", "milk", None);
    alice.sync_until_idle();
    bob.sync_until_idle();

    // A stale base version: alice wins with v2, bob's update from v1 conflicts.
    alice.upsert("t1", "l1", "oat milk", Some(1));
    alice.sync_until_idle();
    let stale = bob.upsert("t1", "l1", "soy milk", Some(1));
    // A lost insert race: alice inserts t2 first; bob's insert (base 0) conflicts.
    alice.upsert("t2", "l1", "eggs", None);
    alice.sync_until_idle();
    let race = bob.upsert("t2", "l1", "quail eggs", Some(0));
    let report = bob.sync_until_idle();
    assert_eq!(report.conflicts, 2, "{report:?}");
    assert_eq!(report.rejected, [stale.clone(), race.clone()], "{report:?}");

    let conflicts = bob.sync.conflicts();
    assert_eq!(conflicts.len(), 2, "{conflicts:?}");
    let by_commit = |id: &str| {
        conflicts
            .iter()
            .find(|c| c.client_commit_id == id)
            .unwrap_or_else(|| panic!("no conflict for {id}: {conflicts:?}"))
    };
    let first = by_commit(&stale);
    assert_eq!(first.code, "sync.version_conflict");
    assert_eq!(
        (first.table.as_str(), first.row_id.as_str()),
        ("todos", "t1")
    );
    assert_eq!(first.server_version, 2);
    assert_eq!(first.server_row["title"], json!("oat milk"));
    let second = by_commit(&race);
    assert_eq!(second.code, "sync.version_conflict");
    assert_eq!(second.row_id, "t2");
    assert_eq!(second.server_version, 1);
    assert_eq!(second.server_row["title"], json!("eggs"));
    assert_eq!(outcome_status(&bob, &stale), CommitOutcomeStatus::Conflict);
    assert_eq!(outcome_status(&bob, &race), CommitOutcomeStatus::Conflict);

    // The optimistic writes are gone; bob holds the server's rows.
    assert!(bob.sync.pending_commit_ids().is_empty());
    assert_eq!(bob.todos()["t1"], (2, "l1".into(), "oat milk".into()));
    assert_eq!(bob.todos()["t2"], (1, "l1".into(), "eggs".into()));
    alice.sync_until_idle();
    assert_eq!(alice.todos(), bob.todos());
}

scenario!(scopes_intersect_and_revocation_purges);
fn scopes_intersect_and_revocation_purges(dialect: Dialect) {
    let mut server = Server::start(dialect, &todos(1), &team());
    let mut admin = Client::new(&server, "admin-desk", "admin-token", &todos(1));
    admin.subscribe("all", &["l1", "l2"]);
    admin.upsert_many(&[("a", "l1", "in l1"), ("b", "l2", "in l2")], None);
    admin.sync_until_idle();
    assert_eq!(admin.todos().len(), 2);

    // alice asks for l1 and l2 and is allowed l1: she gets the intersection.
    let mut alice = Client::new(&server, "alice-phone", "alice-token", &todos(1));
    alice.subscribe("lists", &["l1", "l2"]);
    alice.sync_until_idle();
    let held: Vec<String> = alice.todos().into_keys().collect();
    assert_eq!(held, ["a"]);

    // Her grant is withdrawn: the subscription is revoked and purged.
    server.restart(&tokens(&[
        ("admin-token", P, "admin", "*"),
        ("alice-token", P, "alice", ""),
    ]));
    admin.reconnect(&server, "admin-token");
    alice.reconnect(&server, "alice-token");
    let report = alice.sync_until_idle();
    assert_eq!(report.revoked, ["lists"], "{report:?}");
    assert!(alice.todos().is_empty(), "{:?}", alice.todos());

    // And stays shut out of new rows.
    admin.upsert("c", "l1", "later", None);
    admin.sync_until_idle();
    alice.sync_until_idle();
    assert!(alice.todos().is_empty(), "{:?}", alice.todos());
}

scenario!(a_large_bootstrap_goes_by_segment_ref_and_is_reauthorized);
fn a_large_bootstrap_goes_by_segment_ref_and_is_reauthorized(dialect: Dialect) {
    let server = Server::start(
        dialect,
        &todos(1),
        &tokens(&[
            ("admin-token", P, "admin", "*"),
            ("bob-token", P, "bob", "l1,l2"),
            ("mallory-token", P, "mallory", "l2"),
        ]),
    );
    // 300 rows of 1.5 KiB titles: about 450 KiB in one page.
    let mut admin = Client::new(&server, "admin-desk", "admin-token", &todos(1));
    let title = "x".repeat(1536);
    let ids: Vec<String> = (0..300).map(|i| format!("t{i:03}")).collect();
    for chunk in ids.chunks(50) {
        let rows: Vec<(&str, &str, &str)> = chunk
            .iter()
            .map(|id| (id.as_str(), "l1", title.as_str()))
            .collect();
        admin.upsert_many(&rows, None);
    }
    let pushed = admin.sync_until_idle();
    assert_eq!(pushed.applied.len(), 6, "{pushed:?}");

    let limits = ClientLimits {
        limit_snapshot_rows: Some(1000),
        ..ClientLimits::default()
    };
    let mut bob = Client::with_limits(&server, "bob-laptop", "bob-token", &todos(1), limits);
    bob.subscribe("mine", &["l1"]);
    let report = bob.sync_until_idle();
    assert_eq!(bob.todos().len(), 300, "{report:?}");
    assert_eq!(bob.wire.segments.len(), 1, "one page, by reference");
    let segment = bob.wire.segments[0].clone();
    assert_eq!(segment.table, "todos");

    // The same download again is served (and is above the inline limit)…
    let own = http::get_segment(
        &server.base_url,
        &segment.segment_id,
        "bob-token",
        &segment.requested_scopes_json,
    );
    assert_eq!(own.status, 200, "{}", String::from_utf8_lossy(&own.body));
    assert!(own.body.starts_with(b"SSG2"));
    assert!(own.body.len() > 256 * 1024, "{} bytes", own.body.len());
    // …but not to another actor with the same header…
    let other_actor = http::get_segment(
        &server.base_url,
        &segment.segment_id,
        "mallory-token",
        &segment.requested_scopes_json,
    );
    assert_eq!(other_actor.status, 403);
    other_actor.error("sync.forbidden");
    // …nor to bob asking with other scopes.
    let other_scopes = http::get_segment(
        &server.base_url,
        &segment.segment_id,
        "bob-token",
        r#"{"list_id":["l1","l2"]}"#,
    );
    assert_eq!(other_scopes.status, 403);
    other_scopes.error("sync.forbidden");
}

scenario!(a_prune_past_the_cursor_resets_and_rebootstraps);
fn a_prune_past_the_cursor_resets_and_rebootstraps(dialect: Dialect) {
    let server = Server::start(dialect, &todos(1), &team());
    let mut admin = Client::new(&server, "admin-desk", "admin-token", &todos(1));
    admin.subscribe("all", &["l1"]);
    let mut alice = Client::new(&server, "alice-phone", "alice-token", &todos(1));
    alice.subscribe("mine", &["l1"]);
    admin.upsert_many(
        &[("t1", "l1", "a"), ("t2", "l1", "b"), ("t3", "l1", "c")],
        None,
    );
    admin.sync_until_idle();
    alice.sync_until_idle();
    assert_eq!(alice.todos().len(), 3);

    // History alice has not seen, then pruned away.
    admin.upsert("t1", "l1", "a2", None);
    admin.delete("t2");
    admin.upsert("t4", "l1", "d", None);
    admin.sync_until_idle();
    let status = server.syncstore_json(&["status", "--partition", P]);
    let head = status["partitions"][0]["max_commit_seq"]
        .as_i64()
        .unwrap_or_else(|| panic!("no max_commit_seq in {status:#}"));
    let pruned =
        server.syncstore_json(&["prune", "--partition", P, "--through", &head.to_string()]);
    assert_eq!(pruned["horizon_seq"], json!(head), "{pruned:#}");

    let report = alice.sync_until_idle();
    assert_eq!(report.resets, ["mine"], "{report:?}");
    assert_eq!(alice.todos(), admin.todos());
    let held: Vec<String> = alice.todos().into_keys().collect();
    assert_eq!(held, ["t1", "t3", "t4"]);
    assert_eq!(alice.todos()["t1"].2, "a2");
}

scenario!(an_older_client_stops_at_the_schema_floor);
fn an_older_client_stops_at_the_schema_floor(dialect: Dialect) {
    let server = Server::start(dialect, &todos(2), &team());
    let mut old = Client::new(&server, "alice-phone", "alice-token", &todos(1));
    old.subscribe("mine", &["l1"]);
    let commit = old.upsert("t1", "l1", "milk", None);
    let report = old.sync_until_idle();
    let floor = report
        .schema_floor
        .clone()
        .unwrap_or_else(|| panic!("no schema floor reported: {report:?}"));
    assert_eq!(floor.required_schema_version, Some(2));
    assert_eq!(floor.latest_schema_version, Some(2));
    assert!(old.sync.schema_floor().is_some());
    // Nothing pushed: the commit waits in the outbox for the upgrade.
    assert_eq!(old.sync.pending_commit_ids(), [commit]);
    let mut current = Client::new(&server, "bob-laptop", "bob-token", &todos(2));
    current.subscribe("mine", &["l1"]);
    current.sync_until_idle();
    assert!(current.todos().is_empty(), "{:?}", current.todos());
}

scenario!(a_wrong_content_type_is_415);
fn a_wrong_content_type_is_415(dialect: Dialect) {
    let server = Server::start(dialect, &todos(1), &team());
    let body = http::pull_request("raw-client", 1);
    let reply = http::post_sync(
        &server.base_url,
        "application/json",
        Some("alice-token"),
        &body,
    );
    assert_eq!(reply.status, 415);
    reply.error("sync.invalid_request");
    // The same bytes with the SSP2 media type are served.
    let ok = http::post_sync(&server.base_url, SSP2, Some("alice-token"), &body);
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.body));
    assert_eq!(ok.content_type.as_deref(), Some(SSP2));
}

scenario!(an_unknown_token_is_401);
fn an_unknown_token_is_401(dialect: Dialect) {
    let server = Server::start(dialect, &todos(1), &team());
    let body = http::pull_request("raw-client", 1);
    for token in [Some("not-a-token"), None] {
        let reply = http::post_sync(&server.base_url, SSP2, token, &body);
        assert_eq!(reply.status, 401, "token {token:?}");
        reply.error("sync.auth_required");
    }
    // The reference client sees the refusal as a failed round.
    let mut stranger = Client::new(&server, "stranger", "not-a-token", &todos(1));
    stranger.subscribe("mine", &["l1"]);
    assert!(matches!(stranger.round(), SyncOutcome::Failed { .. }));
}

scenario!(a_wire_v4_envelope_is_400);
fn a_wire_v4_envelope_is_400(dialect: Dialect) {
    let server = Server::start(dialect, &todos(1), &team());
    let mut body = http::pull_request("raw-client", 1);
    body[4..6].copy_from_slice(&4u16.to_le_bytes());
    let reply = http::post_sync(&server.base_url, SSP2, Some("alice-token"), &body);
    assert_eq!(reply.status, 400);
    let error = reply.error("sync.invalid_request");
    let details = &error["details"];
    assert!(
        details.is_object(),
        "details name the versions served: {error:#}"
    );
    let names_versions = details
        .as_object()
        .into_iter()
        .flat_map(|d| d.values())
        .any(|v| v == &json!([1, 2, 3]));
    assert!(
        names_versions,
        "details name the versions [1, 2, 3]: {error:#}"
    );
}
