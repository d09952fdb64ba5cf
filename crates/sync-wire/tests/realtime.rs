//! The realtime hub (SSP2 §8.1–§8.3, §8.7) without a socket: registration
//! from the client record, deltas only for matching commits and effective
//! scopes, suppression and wake-ups, acks, queue and size limits, and the
//! socket round's client-id binding and re-registration.

mod fixture;

use std::sync::{Arc, Mutex};

use fixture::{bootstrap, header, Fixture};
use sync_engine::RequestContext;
use sync_ssp2::realtime::{parse_control_message, ControlMessage, WakeReason};
use sync_ssp2::{PushCommit, PushOp, PushOperation, Request, ResponseFrame, WireVersion};
use sync_wire::realtime::{Outbox, Outgoing, RealtimeConfig, RealtimeHub};
use sync_wire::RoundError;

/// A queue of `capacity` messages that records what it was handed.
struct Queue {
    capacity: usize,
    sent: Mutex<Vec<Outgoing>>,
    owed: Mutex<u32>,
    arrived: std::sync::Condvar,
}

impl Queue {
    fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            capacity,
            sent: Mutex::new(Vec::new()),
            owed: Mutex::new(0),
            arrived: std::sync::Condvar::new(),
        })
    }

    fn take(&self) -> Vec<Outgoing> {
        std::mem::take(&mut self.sent.lock().unwrap())
    }

    fn owed(&self) -> u32 {
        *self.owed.lock().unwrap()
    }

    /// Waits (at most 10 s) until a message is queued, then takes all.
    fn wait(&self) -> Vec<Outgoing> {
        let sent = self.sent.lock().unwrap();
        let (mut sent, _) = self
            .arrived
            .wait_timeout_while(sent, std::time::Duration::from_secs(10), |s| s.is_empty())
            .unwrap();
        assert!(!sent.is_empty(), "nothing arrived within 10 s");
        std::mem::take(&mut *sent)
    }
}

impl Outbox for Queue {
    fn try_send(&self, message: Outgoing) -> bool {
        let mut sent = self.sent.lock().unwrap();
        if sent.len() >= self.capacity {
            return false;
        }
        sent.push(message);
        self.arrived.notify_all();
        true
    }

    fn owe_wake(&self) {
        *self.owed.lock().unwrap() += 1;
    }

    fn close(&self) {
        self.sent.lock().unwrap().clear();
    }
}

fn ctx(actor: &str) -> RequestContext {
    RequestContext::new("acme", actor)
}

/// Pushes one todo as `actor` (client `pusher`) in its own commit.
fn push(f: &Fixture, actor: &str, id: &str, list: &str) -> i64 {
    let response = f.ok(
        actor,
        Request::from_parts(
            WireVersion::V1,
            header("pusher"),
            vec![PushCommit {
                client_commit_id: format!("c-{id}"),
                operations: vec![PushOperation {
                    table: "todos".into(),
                    row_id: id.into(),
                    base_version: None,
                    op: PushOp::Upsert {
                        payload: f.todo(id, list, "x"),
                    },
                }],
            }],
            None,
        ),
    );
    response
        .frames
        .iter()
        .find_map(|frame| match frame {
            ResponseFrame::PushResult(r) => match r.status {
                sync_ssp2::PushStatus::Applied { commit_seq } => Some(commit_seq),
                _ => None,
            },
            _ => None,
        })
        .unwrap_or_else(|| panic!("not applied: {:?}", response.frames))
}

fn hub(f: &Fixture, config: RealtimeConfig) -> RealtimeHub {
    RealtimeHub::new(f.service.clone(), config)
}

/// The writer allowed everywhere, bob on `l1`; bob's client `bob-1` has
/// pulled `todos` of `l1`.
fn setup() -> Fixture {
    let f = Fixture::new(256 * 1024);
    f.allow("writer", "list_id", &["*"]);
    f.allow("bob", "list_id", &["l1"]);
    push(&f, "writer", "t0", "l1");
    f.ok("bob", bootstrap("bob-1", "l1", 1));
    f
}

fn hello(message: &Outgoing) -> sync_ssp2::realtime::Hello {
    match message {
        Outgoing::Text(text) => match parse_control_message(text).unwrap() {
            ControlMessage::Hello(hello) => hello,
            other => panic!("not a hello: {other:?}"),
        },
        other => panic!("not text: {other:?}"),
    }
}

fn wake(message: &Outgoing) -> WakeReason {
    match message {
        Outgoing::Text(text) => match parse_control_message(text).unwrap() {
            ControlMessage::Wake(wake) => wake.reason,
            other => panic!("not a wake-up: {other:?}"),
        },
        other => panic!("not text: {other:?}"),
    }
}

/// The commit seqs and section ends of a delta.
fn delta(message: &Outgoing) -> (Vec<i64>, Vec<i64>) {
    let Outgoing::Delta(bytes) = message else {
        panic!("not a delta: {message:?}");
    };
    let response = sync_ssp2::decode_response(bytes).unwrap();
    let mut commits = Vec::new();
    let mut ends = Vec::new();
    for frame in response.frames {
        match frame {
            ResponseFrame::Commit(c) => commits.push(c.commit_seq),
            ResponseFrame::SubEnd(e) => ends.push(e.next_cursor),
            _ => {}
        }
    }
    (commits, ends)
}

#[test]
fn a_client_that_never_pulled_gets_requires_sync_and_no_deltas() {
    let f = setup();
    let hub = hub(&f, RealtimeConfig::default());
    let queue = Queue::new(16);
    let (connection, hello) = hub.connect(&ctx("bob"), "bob-new", queue.clone()).unwrap();
    assert!(hello.requires_sync);
    assert!(connection.registered().is_empty());
    let seq = push(&f, "writer", "t1", "l1");
    hub.notify("acme", seq).unwrap();
    let sent = queue.take();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(self::hello(&sent[0]).requires_sync);
}

#[test]
fn matching_commits_become_deltas_and_others_are_not_sent() {
    let f = setup();
    let hub = hub(&f, RealtimeConfig::default());
    let queue = Queue::new(16);
    let (connection, hello) = hub.connect(&ctx("bob"), "bob-1", queue.clone()).unwrap();
    assert!(!hello.requires_sync, "{hello:?}");
    assert_eq!(connection.registered(), vec!["todos".to_owned()]);
    assert_eq!(self::hello(&queue.take()[0]).cursor, hello.latest_cursor);

    let other = push(&f, "writer", "t-other", "l2");
    hub.notify("acme", other).unwrap();
    assert!(queue.take().is_empty(), "a commit of l2 reached bob");

    let seq = push(&f, "writer", "t1", "l1");
    let report = hub.notify("acme", seq).unwrap();
    assert_eq!(report.deltas, 1);
    let sent = queue.take();
    assert_eq!(delta(&sent[0]), (vec![seq], vec![seq]));
    // Notifying the same seq again sends nothing.
    hub.notify("acme", seq).unwrap();
    assert!(queue.take().is_empty());
}

#[test]
fn a_client_behind_at_connect_gets_wake_ups_until_its_ack_covers_them() {
    let f = setup();
    let behind = push(&f, "writer", "t1", "l1");
    let hub = hub(&f, RealtimeConfig::default());
    let queue = Queue::new(16);
    let (connection, hello) = hub.connect(&ctx("bob"), "bob-1", queue.clone()).unwrap();
    assert!(hello.requires_sync);
    assert_eq!(hello.latest_cursor, behind);
    queue.take();

    let seq = push(&f, "writer", "t2", "l1");
    hub.notify("acme", seq).unwrap();
    let sent = queue.take();
    assert_eq!(wake(&sent[0]), WakeReason::CatchupRequired);
    assert!(connection.suppressed());

    // An ack below what was observed keeps the suppression.
    hub.ack(&connection, behind).unwrap();
    assert!(connection.suppressed());
    hub.ack(&connection, seq).unwrap();
    assert!(!connection.suppressed());
    let next = push(&f, "writer", "t3", "l1");
    hub.notify("acme", next).unwrap();
    assert_eq!(delta(&queue.take()[0]), (vec![next], vec![next]));
    hub.ack(&connection, next).unwrap();
    assert!(
        hub.ack(&connection, -2).is_err(),
        "a cursor below -1 is refused"
    );

    // The ack writer persists the newest cursor (all of it by the time the
    // hub is gone).
    drop(connection);
    drop(hub);
    let record = f
        .service
        .engine()
        .storage()
        .get_client_record("acme", "bob-1")
        .unwrap()
        .unwrap();
    assert_eq!(record.cursor, next);
}

#[test]
fn unacked_deltas_a_full_queue_and_large_deltas_fall_back_to_wake_ups() {
    let f = setup();
    let config = RealtimeConfig {
        max_unacked_deltas: 1,
        ..RealtimeConfig::default()
    };
    let hub = hub(&f, config);
    let queue = Queue::new(16);
    let (connection, _) = hub.connect(&ctx("bob"), "bob-1", queue.clone()).unwrap();
    queue.take();
    let first = push(&f, "writer", "t1", "l1");
    hub.notify("acme", first).unwrap();
    let second = push(&f, "writer", "t2", "l1");
    hub.notify("acme", second).unwrap();
    let sent = queue.take();
    assert_eq!(delta(&sent[0]).0, vec![first]);
    assert_eq!(wake(&sent[1]), WakeReason::CatchupRequired);
    hub.ack(&connection, second).unwrap();

    // A full queue: the wake-up is owed, and deltas wait for an ack.
    let full = Queue::new(1);
    let (slow, _) = hub.connect(&ctx("bob"), "bob-1", full.clone()).unwrap();
    let third = push(&f, "writer", "t3", "l1");
    hub.notify("acme", third).unwrap();
    assert_eq!(full.owed(), 1);
    assert!(slow.suppressed());

    // Too many changes for one delta: delta-too-large.
    let small = hub_with_max_changes(&f, 0);
    let queue = bob_listening(&small);
    let fourth = push(&f, "writer", "t4", "l1");
    small.notify("acme", fourth).unwrap();
    assert_eq!(wake(&queue.take()[0]), WakeReason::DeltaTooLarge);
}

#[test]
fn a_delta_of_exactly_the_change_limit_is_sent() {
    let f = setup();
    let hub = hub_with_max_changes(&f, 1);
    let queue = bob_listening(&hub);
    let seq = push(&f, "writer", "t1", "l1");
    hub.notify("acme", seq).unwrap();
    assert_eq!(delta(&queue.take()[0]), (vec![seq], vec![seq]));
}

/// `bob-1` connected to `hub`, its hello already taken off the queue.
fn bob_listening(hub: &RealtimeHub) -> Arc<Queue> {
    let queue = Queue::new(16);
    hub.connect(&ctx("bob"), "bob-1", queue.clone()).unwrap();
    queue.take();
    queue
}

fn hub_with_max_changes(f: &Fixture, max: i64) -> RealtimeHub {
    hub(
        f,
        RealtimeConfig {
            max_delta_changes: max,
            ..RealtimeConfig::default()
        },
    )
}

#[test]
fn another_actors_client_id_is_refused() {
    let f = setup();
    f.allow("mallory", "list_id", &["l1"]);
    let hub = hub(&f, RealtimeConfig::default());
    let refusal = hub
        .connect(&ctx("mallory"), "bob-1", Queue::new(4))
        .unwrap_err();
    assert_eq!(refusal.code(), "sync.invalid_client_id");
    assert_eq!(hub.open_connections(), 0);
}

#[test]
fn a_socket_round_is_bound_to_the_connections_client_and_re_registers() {
    let f = setup();
    let hub = hub(&f, RealtimeConfig::default());
    let queue = Queue::new(16);
    let (connection, hello) = hub.connect(&ctx("bob"), "bob-2", queue.clone()).unwrap();
    assert!(hello.requires_sync);

    let foreign = sync_ssp2::encode_request(&bootstrap("bob-1", "l1", 1)).unwrap();
    let refused = f
        .service
        .socket_round(&ctx("bob"), "bob-2", &foreign, Vec::new())
        .unwrap_err();
    let RoundError::Refused(refusal) = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(refusal.code(), "sync.invalid_client_id");
    let stream =
        sync_wire::realtime::refusal_stream(&refusal, 2, &connection.epoch_and_version().0);
    let response = sync_ssp2::decode_response(&stream).unwrap();
    assert!(
        matches!(&response.frames[1], ResponseFrame::Error(e) if e.code == "sync.invalid_client_id")
    );

    // The connection's own round registers its subscriptions at round end.
    hub.round_started(&connection);
    let own = sync_ssp2::encode_request(&bootstrap("bob-2", "l1", 1)).unwrap();
    let round = f
        .service
        .socket_round(&ctx("bob"), "bob-2", &own, Vec::new())
        .unwrap();
    assert_eq!(round.pulled, Some(1));
    hub.round_finished(&connection, round.pulled).unwrap();
    assert_eq!(connection.registered(), vec!["todos".to_owned()]);
    // Deltas wait for the post-round ack.
    let latest = f
        .service
        .engine()
        .storage()
        .get_max_commit_seq("acme")
        .unwrap();
    hub.ack(&connection, latest).unwrap();
    queue.take();
    let seq = push(&f, "writer", "t9", "l1");
    hub.notify("acme", seq).unwrap();
    assert_eq!(delta(&queue.take()[0]).0, vec![seq]);
}

/// Runs `request` as a socket round of `connection` (client `bob-1`),
/// with `between` run after the round's pull and before its end.
fn socket_round(
    f: &Fixture,
    hub: &RealtimeHub,
    connection: &Arc<sync_wire::realtime::Connection>,
    request: &Request,
    between: impl FnOnce(),
) {
    hub.round_started(connection);
    let bytes = sync_ssp2::encode_request(request).unwrap();
    let round = f
        .service
        .socket_round(&ctx("bob"), "bob-1", &bytes, Vec::new())
        .unwrap();
    between();
    hub.round_finished(connection, round.pulled).unwrap();
}

#[test]
fn after_a_clean_socket_round_deltas_continue_without_waiting_for_an_ack() {
    let f = setup();
    let hub = hub(&f, RealtimeConfig::default());
    let queue = Queue::new(16);
    let (connection, hello) = hub.connect(&ctx("bob"), "bob-1", queue.clone()).unwrap();
    assert!(!hello.requires_sync);
    socket_round(&f, &hub, &connection, &bootstrap("bob-1", "l1", 1), || {});
    assert!(!connection.suppressed());
    queue.take();

    // The client's post-round ack has not arrived: the delta goes anyway,
    // starting at the cursor the round persisted.
    let seq = push(&f, "writer", "t1", "l1");
    hub.notify("acme", seq).unwrap();
    assert_eq!(delta(&queue.take()[0]), (vec![seq], vec![seq]));
}

#[test]
fn a_commit_fanned_out_before_the_round_registered_it_is_a_wake_up() {
    let f = setup();
    f.allow("bob", "list_id", &["l1", "l2"]);
    let hub = hub(&f, RealtimeConfig::default());
    let queue = Queue::new(16);
    let (connection, _) = hub.connect(&ctx("bob"), "bob-1", queue.clone()).unwrap();
    queue.take();

    // The round moves bob to l2; a commit of l2 lands after its pull and is
    // fanned out while the connection still holds l1 only.
    let mut missed = 0;
    socket_round(&f, &hub, &connection, &bootstrap("bob-1", "l2", 1), || {
        missed = push(&f, "writer", "t-l2", "l2");
        hub.notify("acme", missed).unwrap();
    });
    let sent = queue.take();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(wake(&sent[0]), WakeReason::CatchupRequired);
    assert!(connection.suppressed());
    hub.ack(&connection, missed).unwrap();
    assert!(!connection.suppressed());
}

fn presence(message: &Outgoing) -> ControlMessage {
    match message {
        Outgoing::Text(text) => parse_control_message(text).unwrap(),
        other => panic!("not text: {other:?}"),
    }
}

fn publish(key: &str, doc: Option<serde_json::Value>) -> sync_ssp2::realtime::PresencePublish {
    sync_ssp2::realtime::PresencePublish {
        scope_key: key.into(),
        doc: doc.map(|d| d.as_object().unwrap().clone()),
    }
}

#[test]
fn presence_reaches_scope_mates_only_and_leaves_on_disconnect() {
    use sync_ssp2::realtime::{PresenceErrorCode, PresenceKind};
    use sync_wire::realtime::PublishOutcome;
    let f = setup();
    f.allow("carol", "list_id", &["l2"]);
    f.ok("bob", bootstrap("bob-2", "l1", 1));
    f.ok("carol", bootstrap("carol-1", "l2", 1));
    let hub = hub(&f, RealtimeConfig::default());
    let (a, b, c) = (Queue::new(16), Queue::new(16), Queue::new(16));
    let (bob1, _) = hub.connect(&ctx("bob"), "bob-1", a.clone()).unwrap();
    let (bob2, _) = hub.connect(&ctx("bob"), "bob-2", b.clone()).unwrap();
    let (carol, _) = hub.connect(&ctx("carol"), "carol-1", c.clone()).unwrap();
    for q in [&a, &b, &c] {
        q.take();
    }

    let doc = serde_json::json!({"cursor": 3});
    assert_eq!(
        hub.publish_presence(&bob1, publish("list:l1", Some(doc.clone())))
            .unwrap(),
        PublishOutcome::Accepted
    );
    let seen = b.take();
    match presence(&seen[0]) {
        ControlMessage::PresenceFanout(p) => {
            assert_eq!(
                (p.kind, p.client_id.as_str()),
                (PresenceKind::Join, "bob-1")
            );
            assert_eq!(serde_json::Value::Object(p.doc.unwrap()), doc);
        }
        other => panic!("{other:?}"),
    }
    assert!(a.take().is_empty(), "the publisher gets no echo");
    assert!(c.take().is_empty(), "a connection without list:l1 saw it");

    hub.publish_presence(
        &bob1,
        publish("list:l1", Some(serde_json::json!({"cursor": 4}))),
    )
    .unwrap();
    assert!(
        matches!(presence(&b.take()[0]), ControlMessage::PresenceFanout(p) if p.kind == PresenceKind::Update)
    );

    // Carol may not publish on list:l1, nor bob on list:l2.
    assert_eq!(
        hub.publish_presence(&carol, publish("list:l1", Some(doc.clone())))
            .unwrap(),
        PublishOutcome::Forbidden
    );
    assert!(
        matches!(presence(&c.take()[0]), ControlMessage::PresenceError(e) if e.error == PresenceErrorCode::Forbidden)
    );
    assert!(b.take().is_empty());

    // Over the size cap: refused to the publisher, nothing fanned out.
    let big = serde_json::json!({"x": "y".repeat(20_000)});
    assert_eq!(
        hub.publish_presence(&bob2, publish("list:l1", Some(big)))
            .unwrap(),
        PublishOutcome::TooLarge
    );
    assert!(
        matches!(presence(&b.take()[0]), ControlMessage::PresenceError(e) if e.error == PresenceErrorCode::TooLarge)
    );
    assert!(a.take().is_empty());

    // A late joiner gets the snapshot; a disconnect is a leave.
    let late = Queue::new(16);
    hub.connect(&ctx("bob"), "bob-1", late.clone()).unwrap();
    let burst = late.take();
    assert!(
        matches!(presence(&burst[1]), ControlMessage::PresenceFanout(p) if p.kind == PresenceKind::Join && p.client_id == "bob-1")
    );
    hub.disconnect(&bob1);
    assert!(
        matches!(presence(&b.take()[0]), ControlMessage::PresenceFanout(p) if p.kind == PresenceKind::Leave && p.doc.is_none())
    );
}

/// A commit feed the test drives: each listener takes the events sent
/// after it was opened.
struct Feed {
    events: Mutex<Option<std::sync::mpsc::Receiver<sync_core::FeedEvent>>>,
}

struct Listener(std::sync::mpsc::Receiver<sync_core::FeedEvent>);

impl sync_core::CommitListener for Listener {
    fn next(&mut self, wait: std::time::Duration) -> sync_core::FeedEvent {
        self.0
            .recv_timeout(wait)
            .unwrap_or(sync_core::FeedEvent::Idle)
    }
}

impl sync_core::CommitFeed for Feed {
    fn listen(&self) -> sync_core::Result<Box<dyn sync_core::CommitListener>> {
        match self.events.lock().unwrap().take() {
            Some(rx) => Ok(Box::new(Listener(rx))),
            None => Err(sync_core::Error::invalid_argument(
                "feed",
                "no more listeners",
            )),
        }
    }
}

#[test]
fn commits_announced_by_another_process_reach_this_ones_sockets_and_a_lost_feed_wakes_them() {
    let f = setup();
    // This process's hub hears of commits only through the feed.
    let hub = Arc::new(hub(&f, RealtimeConfig::default()));
    let (tx, rx) = std::sync::mpsc::channel();
    let feed = Arc::new(Feed {
        events: Mutex::new(Some(rx)),
    });
    let queue = Queue::new(16);
    let (connection, _) = hub.connect(&ctx("bob"), "bob-1", queue.clone()).unwrap();
    queue.take();
    let following = hub.follow(feed.clone()).unwrap();

    // "Another process" commits (the same database, no notify of ours).
    let seq = push(&f, "writer", "t1", "l1");
    tx.send(sync_core::FeedEvent::Commit(sync_core::CommitNotice {
        partition: "acme".into(),
        commit_seq: seq,
    }))
    .unwrap();
    assert_eq!(delta(&queue.wait()[0]).0, vec![seq]);
    hub.ack(&connection, seq).unwrap();

    // The listener is lost: every socket is woken, deltas wait for an ack.
    tx.send(sync_core::FeedEvent::Lost).unwrap();
    assert_eq!(wake(&queue.wait()[0]), WakeReason::CatchupRequired);
    assert!(connection.suppressed());
    drop(following);
}

#[test]
fn a_rotated_epoch_or_a_prune_past_the_cursor_is_a_reset_wake_up() {
    let f = setup();
    let hub = hub(&f, RealtimeConfig::default());
    let queue = Queue::new(16);
    let (connection, _) = hub.connect(&ctx("bob"), "bob-1", queue.clone()).unwrap();
    queue.take();
    // A commit, then a restore rotates the partition's epoch before the
    // commit is fanned out.
    let seq = push(&f, "writer", "t1", "l1");
    f.service
        .engine()
        .storage()
        .rotate_partition_log_epoch("acme", "restored-1", 1_700_000_000_000)
        .unwrap();
    hub.notify("acme", seq).unwrap();
    assert_eq!(wake(&queue.take()[0]), WakeReason::ResetRequired);
    assert!(connection.suppressed());

    // Past the horizon: a connection whose cursor the log no longer holds.
    let f = setup();
    let pruned = self::hub(&f, RealtimeConfig::default());
    let queue = Queue::new(16);
    pruned.connect(&ctx("bob"), "bob-1", queue.clone()).unwrap();
    queue.take();
    let first = push(&f, "writer", "t1", "l1");
    f.service
        .engine()
        .storage()
        .set_horizon_seq("acme", first)
        .unwrap();
    let second = push(&f, "writer", "t2", "l1");
    pruned.notify("acme", second).unwrap();
    assert_eq!(wake(&queue.take()[0]), WakeReason::ResetRequired);
}

/// The envelope version and the `(commit_seq, row)` of each upsert of a
/// delta.
fn delta_rows(message: &Outgoing) -> (WireVersion, Vec<(i64, Vec<u8>)>) {
    let Outgoing::Delta(bytes) = message else {
        panic!("not a delta: {message:?}");
    };
    let response = sync_ssp2::decode_response(bytes).unwrap();
    let mut rows = Vec::new();
    for frame in response.frames {
        if let ResponseFrame::Commit(c) = frame {
            for change in c.changes {
                if let sync_ssp2::ChangeOp::Upsert { row, .. } = change.op {
                    rows.push((c.commit_seq, row));
                }
            }
        }
    }
    (response.wire_version, rows)
}

/// E-119 (`docs/design/wire-v3.md` §5.1, §8.3): a change pushed at version
/// 3 as a sparse row reaches a version-2 and a version-3 connection, each
/// in its own envelope version, with the same full row.
#[test]
fn each_connection_receives_a_delta_in_its_own_wire_version() {
    let f = setup();
    // Each client acquires the log epoch, then bootstraps with it.
    let mut epoch = None;
    for (client, version) in [("bob-2", WireVersion::V2), ("bob-3", WireVersion::V3)] {
        for _ in 0..2 {
            let mut pull = bootstrap(client, "l1", 1);
            pull.wire_version = version;
            for frame in &mut pull.frames {
                if let sync_ssp2::RequestFrame::ReqHeader(h) = frame {
                    h.log_epoch.clone_from(&epoch);
                }
            }
            for frame in f.ok("bob", pull).frames {
                if let ResponseFrame::RespHeader(h) = frame {
                    epoch = h.epoch.map(|e| e.log_epoch);
                }
            }
        }
    }
    let hub = hub(&f, RealtimeConfig::default());
    let (v2, v3) = (Queue::new(16), Queue::new(16));
    hub.connect(&ctx("bob"), "bob-2", v2.clone()).unwrap();
    hub.connect(&ctx("bob"), "bob-3", v3.clone()).unwrap();
    v2.take();
    v3.take();

    // A full sparse row pushed at version 3: the presence bitmap of the
    // three columns, then the full-row encoding.
    let full = f.todo("t1", "l1", "sparse");
    let mut sparse = vec![0b111];
    sparse.extend_from_slice(&full);
    let response = f.ok(
        "writer",
        Request::from_parts(
            WireVersion::V3,
            sync_ssp2::ReqHeader {
                log_epoch: epoch,
                ..header("pusher-3")
            },
            vec![PushCommit {
                client_commit_id: "c-v3".into(),
                operations: vec![PushOperation {
                    table: "todos".into(),
                    row_id: "t1".into(),
                    base_version: None,
                    op: PushOp::Upsert { payload: sparse },
                }],
            }],
            None,
        ),
    );
    assert_eq!(response.wire_version, WireVersion::V3);
    let seq = response
        .frames
        .iter()
        .find_map(|frame| match frame {
            ResponseFrame::PushResult(r) => match r.status {
                sync_ssp2::PushStatus::Applied { commit_seq } => Some(commit_seq),
                _ => None,
            },
            _ => None,
        })
        .unwrap_or_else(|| panic!("not applied: {:?}", response.frames));
    hub.notify("acme", seq).unwrap();
    let (from_v2, from_v3) = (v2.take(), v3.take());
    assert_eq!(
        delta_rows(&from_v2[0]),
        (WireVersion::V2, vec![(seq, full.clone())])
    );
    assert_eq!(
        delta_rows(&from_v3[0]),
        (WireVersion::V3, vec![(seq, full)])
    );
}
