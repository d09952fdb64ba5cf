//! The reference's published client against test instances of `syncstore
//! serve --test-control`: a control operation on the instance changes
//! what the unmodified client sees, and an instance serves realtime on
//! its own path. Every scenario runs once on SQLite, once on Postgres and
//! once on MariaDB scratch storages.

mod support;

use serde_json::json;
use support::control::{ControlServer, Instance};
use support::schema::todos;
use support::{Client, Dialect};
use syncular_client::{ClientLimits, SyncOutcome};

/// The instances' virtual start.
const NOW: i64 = 1_700_000_000_000;

/// A client of `instance` acting as `actor` (the bearer token names it).
fn client(instance: &Instance, client_id: &str, actor: &str) -> Client {
    Client::at(
        &instance.base_url,
        client_id,
        actor,
        &todos(1),
        ClientLimits::default(),
    )
}

fn ids(client: &Client) -> Vec<String> {
    client.todos().into_keys().collect()
}

/// Alice and bob of `instance`, both subscribed to `l1` and synced.
fn synced_pair(instance: &Instance) -> (Client, Client) {
    instance.allow("alice", &["l1"]);
    instance.allow("bob", &["l1"]);
    let mut alice = client(instance, "alice-phone", "alice");
    let mut bob = client(instance, "bob-laptop", "bob");
    alice.subscribe("mine", &["l1"]);
    bob.subscribe("mine", &["l1"]);
    alice.sync_until_idle();
    bob.sync_until_idle();
    (alice, bob)
}

/// Connects `client`'s socket at its instance and applies its `hello`.
fn connect(client: &mut Client) {
    client.connect_realtime();
    client.wait_inbound("hello");
    client.apply_inbound();
}

fn rounds(client: &Client) -> usize {
    client.wire.http_rounds + client.wire.socket_rounds
}

scenario!(a_prune_past_the_cursor_resets_and_rebootstraps);
fn a_prune_past_the_cursor_resets_and_rebootstraps(dialect: Dialect) {
    let server = ControlServer::start(dialect);
    let instance = server.instance(&todos(1), NOW);
    instance.allow("admin", &["*"]);
    instance.allow("alice", &["l1"]);
    let mut admin = client(&instance, "admin-desk", "admin");
    let mut alice = client(&instance, "alice-phone", "alice");
    alice.subscribe("mine", &["l1"]);
    admin.upsert_many(&[("t1", "l1", "milk"), ("t2", "l1", "eggs")], None);
    admin.sync_until_idle();
    alice.sync_until_idle();
    assert_eq!(ids(&alice), ["t1", "t2"]);

    // The log moves on while alice is away, then everything is pruned an
    // hour later on the instance's clock.
    admin.delete("t1");
    admin.upsert("t2", "l1", "oat eggs", Some(1));
    admin.upsert("t3", "l1", "bread", None);
    admin.sync_until_idle();
    let max = instance.max_commit_seq();
    instance.advance_clock(3_600_000);
    assert_eq!(instance.prune_everything(), max);

    match alice.round() {
        SyncOutcome::Ok(report) => {
            assert!(report.resets.contains(&"mine".to_owned()), "{report:?}")
        }
        SyncOutcome::Failed {
            error_code,
            message,
        } => panic!("{error_code}: {message}"),
    }
    alice.sync_until_idle();
    assert_eq!(ids(&alice), ["t2", "t3"], "stale t1 did not survive");
    assert_eq!(alice.todos()["t2"].2, "oat eggs");
}

scenario!(a_restore_resets_the_client_and_replays_its_outbox_once);
fn a_restore_resets_the_client_and_replays_its_outbox_once(dialect: Dialect) {
    let server = ControlServer::start(dialect);
    let instance = server.instance(&todos(1), NOW);
    instance.allow("admin", &["*"]);
    instance.allow("alice", &["l1"]);
    let mut admin = client(&instance, "admin-desk", "admin");
    let mut alice = client(&instance, "alice-phone", "alice");
    admin.upsert("before", "l1", "in backup", None);
    admin.sync_until_idle();
    alice.subscribe("mine", &["l1"]);
    alice.sync_until_idle();

    instance.capture_backup();
    admin.upsert("lost", "l1", "after backup", None);
    admin.sync_until_idle();
    alice.sync_until_idle();
    assert_eq!(ids(&alice), ["before", "lost"]);
    alice.upsert("offline", "l1", "preserved outbox", None);

    instance.restore_backup();
    match alice.round() {
        SyncOutcome::Ok(report) => {
            assert!(report.resets.contains(&"mine".to_owned()), "{report:?}")
        }
        SyncOutcome::Failed {
            error_code,
            message,
        } => panic!("{error_code}: {message}"),
    }
    alice.sync_until_idle();
    assert_eq!(ids(&alice), ["before", "offline"]);
    assert_eq!(instance.row_ids(), ["before", "offline"]);
}

scenario!(an_idempotency_cache_miss_keeps_the_commit_queued);
fn an_idempotency_cache_miss_keeps_the_commit_queued(dialect: Dialect) {
    let server = ControlServer::start(dialect);
    let instance = server.instance(&todos(1), NOW);
    instance.allow("alice", &["l1"]);
    let mut alice = client(&instance, "alice-phone", "alice");
    alice.subscribe("mine", &["l1"]);
    alice.sync_until_idle();
    let commit = alice.upsert("t1", "l1", "later", None);

    instance.fail_next_idempotency_lookup();
    match alice.round() {
        SyncOutcome::Ok(report) => assert_eq!(report.retryable, vec![commit.clone()], "{report:?}"),
        SyncOutcome::Failed {
            error_code,
            message,
        } => panic!("{error_code}: {message}"),
    }
    assert_eq!(instance.max_commit_seq(), 0, "nothing applied");

    let retry = alice.sync_until_idle();
    assert!(retry.applied.contains(&commit), "{retry:?}");
    assert_eq!(instance.row_ids(), ["t1"]);
    assert_eq!(ids(&alice), ["t1"]);
}

scenario!(an_instance_serves_realtime_on_its_own_path);
fn an_instance_serves_realtime_on_its_own_path(dialect: Dialect) {
    let server = ControlServer::start(dialect);
    let instance = server.instance(&todos(1), NOW);
    let (mut alice, mut bob) = synced_pair(&instance);
    connect(&mut bob);
    assert!(!bob.sync_needed(), "a caught-up client needs no round");

    alice.upsert("t1", "l1", "milk", None);
    alice.sync_until_idle();
    let before = rounds(&bob);
    bob.pump_until("alice's t1", |c| c.todos().contains_key("t1"));
    assert_eq!(rounds(&bob), before, "the delta arrived without a round");
    assert_eq!(bob.todos(), alice.todos());
}

scenario!(a_delta_over_the_instance_cap_arrives_as_a_wake_up);
fn a_delta_over_the_instance_cap_arrives_as_a_wake_up(dialect: Dialect) {
    // Every delta is larger than one byte; the hello and the wake-up are
    // control messages and still go out.
    let server = ControlServer::start(dialect);
    let instance = server.instance_with_limits(&todos(1), NOW, &json!({"maxDeltaBytes": 1}));
    let (mut alice, mut bob) = synced_pair(&instance);
    connect(&mut bob);
    assert!(!bob.sync_needed());

    alice.upsert("t1", "l1", "milk", None);
    alice.sync_until_idle();
    bob.pump_until("a wake-up", |c| c.sync_needed());
    assert!(ids(&bob).is_empty(), "t1 came as a wake-up, not a delta");
    bob.sync_until_idle();
    assert_eq!(bob.todos(), alice.todos());
    assert_eq!(ids(&bob), ["t1"]);
}
