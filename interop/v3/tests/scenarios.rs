//! The reference's published clients of wire version 3 (`syncular-client`
//! 0.24.0 and 0.49.2) against `syncstore serve` as a black box, over
//! 127.0.0.1; beside them the version 2 client (0.15.48) in its driver
//! process. Every scenario runs on SQLite, on Postgres and on MariaDB, and the
//! version 3 ones with both version 3 releases.

mod support;

use serde_json::{json, Value};
use ssp2_v3::model::{OpResult, PushStatus};
use support::schema::{todos, tokens};
use support::v2::V2Client;
use support::{replay, Dialect, Server, V3Client};

const P: &str = "p1";

/// alice and bob on list `l1`.
fn team() -> Value {
    tokens(&[
        ("alice-token", P, "alice", "l1"),
        ("bob-token", P, "bob", "l1"),
    ])
}

fn todo(id: &str, title: &str, note: Option<&str>) -> Value {
    json!({"id": id, "list_id": "l1", "title": title, "done": false, "note": note})
}

/// A server on `todos(2)` and two version 3 clients holding `t1` at
/// version 1 (`milk`, no note).
fn two_holding_t1<C: V3Client>(dialect: Dialect) -> (Server, C, C) {
    let server = Server::start(dialect, &todos(2), &team());
    let mut alice = C::open(&server, "alice-phone", "alice-token", &todos(2));
    let mut bob = C::open(&server, "bob-laptop", "bob-token", &todos(2));
    alice.subscribe("mine", &["l1"]);
    bob.subscribe("mine", &["l1"]);
    let first = alice.upsert(todo("t1", "milk", None), None);
    assert_eq!(alice.sync(), (vec![first], vec![]), "{}", C::RELEASE);
    bob.sync();
    assert_eq!(bob.rows()["t1"].0, 1, "{}", C::RELEASE);
    (server, alice, bob)
}

scenario!(disjoint_columns_both_land);
fn disjoint_columns_both_land<C: V3Client>(dialect: Dialect) {
    let (_server, mut alice, mut bob) = two_holding_t1::<C>(dialect);

    // Both edit from version 1, each one column.
    let title = alice.patch("t1", json!({"title": "oat milk"}), Some(1));
    let note = bob.patch("t1", json!({"note": "2 litres"}), Some(1));
    assert_eq!(alice.sync(), (vec![title.clone()], vec![]));
    assert_eq!(
        bob.sync(),
        (vec![note.clone()], vec![]),
        "{:?}",
        bob.conflicts()
    );
    assert_eq!(alice.outcome(&title), "applied");
    assert_eq!(bob.outcome(&note), "applied");
    assert!(bob.conflicts().is_empty(), "{:?}", bob.conflicts());

    // Both converge on the merged row at version 3.
    alice.sync();
    let held = alice.rows();
    assert_eq!(held, bob.rows(), "{}", C::RELEASE);
    let (version, values) = &held["t1"];
    assert_eq!(*version, 3);
    assert_eq!(values["title"], "oat milk");
    assert_eq!(values["note"], "2 litres");
    assert_eq!(values["list_id"], "l1");
}

scenario!(a_same_column_edit_conflicts_on_that_column);
fn a_same_column_edit_conflicts_on_that_column<C: V3Client>(dialect: Dialect) {
    let (_server, mut alice, mut bob) = two_holding_t1::<C>(dialect);

    // alice rewrites the title; bob, still at version 1, rewrites the title
    // and the note: only the title is in conflict.
    let won = alice.patch("t1", json!({"title": "oat milk"}), Some(1));
    assert_eq!(alice.sync(), (vec![won], vec![]));
    let lost = bob.patch(
        "t1",
        json!({"title": "soy milk", "note": "organic"}),
        Some(1),
    );
    assert_eq!(bob.sync(), (vec![], vec![lost.clone()]));

    let conflicts = bob.conflicts();
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    let conflict = &conflicts[0];
    assert_eq!(conflict.commit, lost);
    assert_eq!(conflict.code, "sync.version_conflict");
    assert_eq!(conflict.row_id, "t1");
    assert_eq!(conflict.server_version, 2);
    assert_eq!(conflict.columns, ["title"], "{}: {conflict:?}", C::RELEASE);
    assert_eq!(conflict.server_row["title"], "oat milk");
    assert_eq!(conflict.server_row["note"], Value::Null);
    assert_eq!(bob.outcome(&lost), "conflict");

    // The optimistic write is gone: both hold the server's row.
    alice.sync();
    assert_eq!(bob.rows(), alice.rows());
    assert_eq!(bob.rows()["t1"].0, 2);
    assert_eq!(bob.rows()["t1"].1["title"], "oat milk");
}

scenario!(a_stale_unversioned_upsert_of_a_deleted_row_is_refused);
fn a_stale_unversioned_upsert_of_a_deleted_row_is_refused<C: V3Client>(dialect: Dialect) {
    let (_server, mut alice, mut bob) = two_holding_t1::<C>(dialect);

    let deleted = alice.delete("t1");
    assert_eq!(alice.sync(), (vec![deleted], vec![]));
    // bob has not seen the delete and writes the whole row, unversioned.
    let stale = bob.upsert(todo("t1", "milk", Some("again")), None);
    assert_eq!(bob.sync(), (vec![], vec![stale.clone()]));
    assert_eq!(
        bob.rejections(),
        [(stale.clone(), "sync.row_deleted".to_owned())],
        "{}",
        C::RELEASE
    );
    assert_eq!(bob.outcome(&stale), "rejected");

    // The row stays absent on both.
    alice.sync();
    bob.sync();
    assert!(!bob.rows().contains_key("t1"), "{:?}", bob.rows());
    assert!(!alice.rows().contains_key("t1"), "{:?}", alice.rows());
}

scenario!(a_v2_and_a_v3_client_converge_both_ways);
fn a_v2_and_a_v3_client_converge_both_ways<C: V3Client>(dialect: Dialect) {
    let server = Server::start(dialect, &todos(2), &team());
    let mut old = V2Client::open(&server, "alice-old-phone", "alice-token", &todos(2));
    let mut new = C::open(&server, "bob-laptop", "bob-token", &todos(2));
    old.subscribe("mine", &["l1"]);
    new.subscribe("mine", &["l1"]);

    // v2 → v3: a whole-row insert.
    old.upsert(todo("t1", "milk", None), None);
    old.sync();
    new.sync();
    assert_eq!(new.rows()["t1"].0, 1);
    assert_eq!(new.rows()["t1"].1["title"], "milk");

    // v3 → v2: a sparse edit reaches the v2 client as the merged row.
    new.patch("t1", json!({"note": "2 litres"}), Some(1));
    new.upsert(todo("t2", "eggs", None), None);
    new.sync();
    old.sync();
    assert_eq!(old.rows(), new.rows(), "{}", C::RELEASE);
    assert_eq!(old.rows()["t1"].0, 2);
    assert_eq!(old.rows()["t1"].1["note"], "2 litres");
    assert_eq!(old.rows()["t1"].1["title"], "milk");

    // v2 → v3 again: a versioned whole-row update and a delete.
    old.upsert(todo("t1", "oat milk", Some("2 litres")), Some(2));
    old.delete("t2");
    old.sync();
    new.sync();
    assert_eq!(old.rows(), new.rows(), "{}", C::RELEASE);
    assert_eq!(new.rows()["t1"].0, 3);
    assert_eq!(new.rows()["t1"].1["title"], "oat milk");
    assert!(!new.rows().contains_key("t2"));

    // A v2 write moved every column: a v3 edit from before it conflicts
    // on the column it presents (design §5.2).
    let stale = new.patch("t1", json!({"done": true}), Some(2));
    new.sync();
    let conflicts = new.conflicts();
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert_eq!(conflicts[0].commit, stale);
    assert_eq!(conflicts[0].columns, ["done"]);
    assert_eq!(new.rows(), old.rows());
}

scenario!(a_v2_outbox_replayed_at_v3);
fn a_v2_outbox_replayed_at_v3<C: V3Client>(dialect: Dialect) {
    let server = Server::start(dialect, &todos(2), &team());
    let mut alice = V2Client::open(&server, "alice-phone", "alice-token", &todos(2));
    let mut bob = V2Client::open(&server, "bob-laptop", "bob-token", &todos(2));
    let mut watcher = C::open(&server, "carol-tablet", "alice-token", &todos(2));
    alice.subscribe("mine", &["l1"]);
    bob.subscribe("mine", &["l1"]);
    watcher.subscribe("mine", &["l1"]);

    // An applied commit of version 2, re-sent at version 3 with the same
    // client and commit ids: cached, applied once.
    let applied = alice.upsert(todo("t1", "milk", None), None);
    alice.sync();
    assert_eq!(alice.outcome(&applied), "applied");
    let replayed = replay::push_upsert(
        &server.base_url,
        replay::Resend {
            token: "alice-token",
            client_id: "alice-phone",
            commit: &applied,
            row_id: "t1",
            base_version: None,
            payload: replay::full_todo("t1", "l1", "milk", false, None),
        },
    );
    assert_eq!(replayed.status, PushStatus::Cached, "{replayed:?}");
    assert!(replayed.commit_seq.is_some(), "{replayed:?}");
    assert!(
        matches!(replayed.results[..], [OpResult::Applied { op_index: 0 }]),
        "{replayed:?}"
    );

    // A conflict of version 2 (a stale whole-row update), re-sent at
    // version 3: the same record, with `conflictColumns` naming every
    // non-key column (D13) — well-formed for the version 3 codec.
    bob.sync();
    alice.upsert(todo("t1", "oat milk", None), Some(1));
    alice.sync();
    let stale = bob.upsert(todo("t1", "soy milk", None), Some(1));
    bob.sync();
    assert_eq!(bob.outcome(&stale), "conflict");
    let replayed = replay::push_upsert(
        &server.base_url,
        replay::Resend {
            token: "bob-token",
            client_id: "bob-laptop",
            commit: &stale,
            row_id: "t1",
            base_version: Some(1),
            payload: replay::full_todo("t1", "l1", "soy milk", false, None),
        },
    );
    assert_eq!(replayed.status, PushStatus::Rejected, "{replayed:?}");
    assert_eq!(replayed.commit_seq, None, "{replayed:?}");
    match &replayed.results[..] {
        [OpResult::Conflict {
            op_index: 0,
            code,
            server_version: 2,
            server_row,
            conflict_columns,
            ..
        }] => {
            assert_eq!(code, "sync.version_conflict");
            // id, list_id, title, done, note: every bit but the key's.
            assert_eq!(conflict_columns, &[0b1_1110]);
            let row = replay::decode_server_row(server_row);
            assert_eq!(row["title"], "oat milk");
        }
        other => panic!("expected one conflict record, got {other:?}"),
    }

    // Nothing moved: every client holds the row alice wrote.
    watcher.sync();
    bob.sync();
    assert_eq!(watcher.rows()["t1"].0, 2);
    assert_eq!(watcher.rows(), bob.rows(), "{}", C::RELEASE);
}

scenario!(a_whole_row_upsert_that_moves_a_row_is_refused);
fn a_whole_row_upsert_that_moves_a_row_is_refused<C: V3Client>(dialect: Dialect) {
    let server = Server::start(
        dialect,
        &todos(2),
        &tokens(&[("carol-token", P, "carol", "l1,l2")]),
    );
    let mut carol = C::open(&server, "carol-desk", "carol-token", &todos(2));
    carol.subscribe("both", &["l1", "l2"]);
    carol.upsert(todo("t1", "milk", None), None);
    carol.sync();

    // Scope columns are immutable at version 3: the whole-row update that
    // changes `list_id` is refused and the commit rolls back.
    let moved = carol.upsert(
        json!({"id": "t1", "list_id": "l2", "title": "milk", "done": false, "note": null}),
        Some(1),
    );
    assert_eq!(carol.sync(), (vec![], vec![moved.clone()]));
    assert_eq!(
        carol.rejections(),
        [(moved, "sync.invalid_request".to_owned())],
        "{}",
        C::RELEASE
    );
    let held = carol.rows();
    assert_eq!(held["t1"].0, 1, "{held:?}");
    assert_eq!(held["t1"].1["list_id"], "l1", "{held:?}");
}
