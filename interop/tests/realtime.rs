//! Realtime (SSP2 §8) with the reference's published client against
//! `syncstore serve`: deltas to other sockets, rounds over the socket, and
//! a delta the server could not send caught up by a round with nothing
//! skipped. Every scenario runs on SQLite, on Postgres and on MariaDB; the
//! one across two processes runs on Postgres only.

mod support;

use support::schema::{todos, tokens};
use support::{Client, Dialect, Server};

const P: &str = "p1";

fn team() -> serde_json::Value {
    tokens(&[
        ("alice-token", P, "alice", "l1"),
        ("bob-token", P, "bob", "l1"),
    ])
}

fn rounds(client: &Client) -> usize {
    client.wire.http_rounds + client.wire.socket_rounds
}

/// Both synced over HTTP and subscribed to `l1`, holding `t1`.
fn synced_pair(server: &Server) -> (Client, Client) {
    let mut alice = Client::new(server, "alice-phone", "alice-token", &todos(1));
    let mut bob = Client::new(server, "bob-laptop", "bob-token", &todos(1));
    alice.subscribe("mine", &["l1"]);
    bob.subscribe("mine", &["l1"]);
    alice.upsert("t1", "l1", "milk", None);
    alice.sync_until_idle();
    bob.sync_until_idle();
    assert_eq!(bob.todos(), alice.todos());
    (alice, bob)
}

/// Connects `client` and applies its `hello`.
fn connect(client: &mut Client) {
    client.connect_realtime();
    client.wait_inbound("hello");
    client.apply_inbound();
}

scenario!(pushes_reach_other_sockets_and_rounds_ride_the_socket);
fn pushes_reach_other_sockets_and_rounds_ride_the_socket(dialect: Dialect) {
    let server = Server::start(dialect, &todos(1), &team());
    let (mut alice, mut bob) = synced_pair(&server);
    connect(&mut bob);
    assert!(
        !bob.sync_needed(),
        "a client at the latest cursor needs no round"
    );

    // Alice pushes over HTTP; bob's socket gets it as a delta, no round.
    alice.upsert("t2", "l1", "eggs", None);
    alice.sync_until_idle();
    let before = rounds(&bob);
    bob.pump_until("alice's t2", |c| c.todos().contains_key("t2"));
    assert_eq!(rounds(&bob), before, "the delta arrived without a round");
    assert_eq!(bob.todos(), alice.todos());

    // Once connected, bob's rounds ride the socket (§8.7) and alice's
    // socket gets his commit as a delta.
    connect(&mut alice);
    let http_before = bob.wire.http_rounds;
    bob.upsert("t3", "l1", "bread", None);
    bob.sync_until_idle();
    assert!(bob.wire.socket_rounds > 0, "no socket round");
    assert_eq!(bob.wire.http_rounds, http_before, "a round went over HTTP");
    let before = rounds(&alice);
    alice.pump_until("bob's t3", |c| c.todos().contains_key("t3"));
    assert_eq!(rounds(&alice), before);
    assert_eq!(alice.todos(), bob.todos());
    assert_eq!(alice.todos().len(), 3);
}

scenario!(a_delta_not_sent_is_caught_up_with_nothing_skipped);
fn a_delta_not_sent_is_caught_up_with_nothing_skipped(dialect: Dialect) {
    // One unacked delta at most: the second commit finds bob's first
    // delta unacked and becomes a `catchup-required` wake-up.
    let server = Server::start_with(
        dialect,
        &todos(1),
        &team(),
        &["--realtime-max-unacked", "1"],
    );
    let (mut alice, mut bob) = synced_pair(&server);
    connect(&mut bob);

    alice.upsert("t2", "l1", "eggs", None);
    alice.sync_until_idle();
    bob.wait_inbound("the delta of t2");
    alice.upsert("t3", "l1", "jam", None);
    alice.sync_until_idle();
    bob.pump_until("a wake-up", |c| c.sync_needed());
    let held = bob.todos();
    assert!(held.contains_key("t2"), "the first delta applied: {held:?}");
    assert!(
        !held.contains_key("t3"),
        "t3 came as a wake-up, not a delta: {held:?}"
    );

    // The wake-up's round catches up; its ack lifts the suppression and
    // deltas resume.
    bob.sync_until_idle();
    assert_eq!(bob.todos(), alice.todos());
    alice.upsert("t4", "l1", "tea", None);
    alice.sync_until_idle();
    bob.pump_until("t4", |c| c.todos().contains_key("t4") || c.sync_needed());
    if !bob.todos().contains_key("t4") {
        // The ack raced the commit: a host answers the wake-up with a round.
        bob.sync_until_idle();
    }
    assert_eq!(bob.todos(), alice.todos());
    assert_eq!(bob.todos().len(), 4);
}

scenario!(presence_joins_updates_and_leaves_between_two_clients);
fn presence_joins_updates_and_leaves_between_two_clients(dialect: Dialect) {
    let server = Server::start(dialect, &todos(1), &team());
    let (mut alice, mut bob) = synced_pair(&server);
    connect(&mut alice);
    connect(&mut bob);

    let doc = serde_json::json!({"editing": "t1"});
    alice
        .sync
        .set_presence(&mut alice.wire, "list:l1", Some(&doc))
        .unwrap_or_else(|e| panic!("set_presence: {e}"));
    bob.pump_until("alice's join", |c| !c.sync.presence("list:l1").is_empty());
    let peers = bob.sync.presence("list:l1");
    assert_eq!(peers.len(), 1, "{peers:?}");
    assert_eq!(
        (peers[0].actor_id.as_str(), peers[0].client_id.as_str()),
        ("alice", "alice-phone")
    );
    assert_eq!(peers[0].doc, doc);

    let moved = serde_json::json!({"editing": "t2"});
    alice
        .sync
        .set_presence(&mut alice.wire, "list:l1", Some(&moved))
        .unwrap_or_else(|e| panic!("set_presence: {e}"));
    bob.pump_until("alice's update", |c| {
        c.sync.presence("list:l1").first().map(|p| &p.doc) == Some(&moved)
    });

    // A dropped socket is a leave to the others (§8.6.1).
    alice.sync.disconnect_realtime(&mut alice.wire);
    bob.pump_until("alice's leave", |c| c.sync.presence("list:l1").is_empty());
}

/// Two `serve` processes on one Postgres database: alice pushes through
/// one, bob's socket is held by the other and still gets the delta (the
/// commit is announced with `NOTIFY` and heard by the other process's
/// listener); then bob's process is killed, and what was pushed meanwhile
/// reaches him through the survivor, nothing lost.
///
/// Postgres only: a commit reaches the sockets of another process through
/// the storage's commit feed, which only Postgres offers (`LISTEN`/`NOTIFY`).
/// SQLite is one process's file, and MariaDB has no notification channel,
/// so on them a socket hears only the commits of its own process.
#[test]
fn a_push_to_one_process_reaches_a_socket_of_another_and_survives_its_kill_on_postgres() {
    let server = Server::start(Dialect::Postgres, &todos(1), &team());
    let peer = server.peer();
    let (mut alice, _) = synced_pair(&server);
    let mut bob = Client::new(&server, "bob-laptop", "bob-token", &todos(1));
    bob.subscribe("mine", &["l1"]);
    bob.reconnect_to(&peer.base_url, "bob-token");
    bob.sync_until_idle();
    connect(&mut bob);

    alice.upsert("t2", "l1", "eggs", None);
    alice.sync_until_idle();
    let before = rounds(&bob);
    bob.pump_until("alice's t2 through the other process", |c| {
        c.todos().contains_key("t2")
    });
    assert_eq!(rounds(&bob), before, "the delta arrived without a round");
    assert_eq!(bob.todos(), alice.todos());

    // The process holding bob's socket is killed; what is pushed meanwhile
    // reaches bob once he reconnects to the surviving process.
    drop(peer);
    alice.upsert("t3", "l1", "jam", None);
    alice.sync_until_idle();
    bob.disconnect();
    bob.reconnect_to(&server.base_url, "bob-token");
    connect(&mut bob);
    bob.sync_until_idle();
    assert_eq!(bob.todos(), alice.todos());
    assert_eq!(bob.todos().len(), 3);
}
