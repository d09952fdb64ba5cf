//! The realtime family of the soak: clients that follow SSP2 §8 — apply
//! deltas, pull on `hello.requiresSync` and on wake-ups, ack, resend their
//! unacknowledged pushes — against a server whose sockets are dropped
//! mid-round and mid-delta and which is stopped and started again (its
//! sockets cut, a new hub on the same database). At the end each client
//! runs one more round from its own cursor and must hold exactly the
//! server's rows: a delta applied over a gap, or a commit lost by a
//! dropped socket, would leave it short. Three runs per dialect by default
//! (`SYNCSTORE_REALTIME_ROUNDS`); a delta planted to be lost is caught in most
//! runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use sync_core::{EnsureOptions, RowScanQuery, RowValue, ServerStorage};
use sync_engine::{Engine, EngineConfig, RequestContext, ResolveError, ScopeMap};
use sync_http::{HttpConfig, SyncState};
use sync_ssp2::realtime::{parse_control_message, ControlMessage};
use sync_ssp2::{
    ChangeOp, PullHeader, PushCommit, PushOp, PushOperation, ReqHeader, Request, ResponseFrame,
    Subscription, WireVersion,
};
use sync_wire::realtime::{RealtimeConfig, RealtimeHub};
use sync_wire::{WireConfig, WireFailure, WireService};
use syncstore_tests::{budget, Deployment, PostgresDeployment, SqliteDeployment};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const SCHEMA: &str = r#"{"version": 1, "tables": [{"name": "todos", "primaryKey": "id",
  "columns": [{"name": "id", "type": "string"}, {"name": "list_id", "type": "string"},
              {"name": "title", "type": "string"}],
  "scopes": ["list:{list_id}"]}]}"#;
const PARTITION: &str = "p";
const LIST: &str = "l1";
const CLIENTS: usize = 4;
const STEPS: usize = 40;
/// How long a client waits for a frame it is owed (a round's response).
const OWED: Duration = Duration::from_secs(30);

fn schema() -> Arc<sync_core::CompiledSchema> {
    Arc::new(
        sync_schema::compile(&sync_schema::parse_schema_json(SCHEMA).expect("schema"))
            .expect("compile"),
    )
}

/// Small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

fn authenticate(parts: &http::request::Parts) -> Result<RequestContext, WireFailure> {
    let actor = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(WireFailure::auth_required)?;
    Ok(RequestContext::new(PARTITION, actor))
}

/// One server "process": a hub and a router over a storage of the
/// deployment, on its own port.
struct Server {
    address: String,
    task: tokio::task::JoinHandle<()>,
    hub: Arc<RealtimeHub>,
    /// Hears the other servers' commits (Postgres).
    _following: Option<sync_wire::realtime::Following>,
    _storage: Arc<dyn ServerStorage>,
}

/// A storage "process" of the deployment with the schema ensured; made
/// outside the runtime (a Postgres client may not be built inside it).
fn process(deployment: &dyn Deployment) -> Arc<dyn ServerStorage> {
    let storage = deployment.announcing_process();
    storage
        .ensure_schema(&schema(), &EnsureOptions::default())
        .expect("ensure");
    storage
}

async fn start(storage: Arc<dyn ServerStorage>, unacked: u32) -> Server {
    let allow = |_: &str, _: &str, _: &str| -> Result<ScopeMap, ResolveError> {
        Ok(ScopeMap::from([(
            "list_id".to_owned(),
            vec![LIST.to_owned()],
        )]))
    };
    let engine = Arc::new(
        Engine::new(
            storage.clone(),
            schema(),
            EngineConfig::new(Arc::new(allow)),
        )
        .expect("engine"),
    );
    let service = Arc::new(WireService::new(engine, WireConfig::default()));
    let hub = Arc::new(RealtimeHub::new(
        service.clone(),
        RealtimeConfig {
            max_unacked_deltas: unacked,
            send_queue_messages: 4,
            ..RealtimeConfig::default()
        },
    ));
    let state = SyncState::new(service, Arc::new(authenticate), HttpConfig::default())
        .with_realtime(hub.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let router = sync_http::router(state);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let following = storage
        .commit_feed()
        .map(|feed| hub.follow(feed).expect("the feed thread"));
    Server {
        address,
        task,
        hub,
        _following: following,
        _storage: storage,
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A client following the protocol, with a local copy of `l1`'s rows.
struct Client {
    id: String,
    actor: String,
    cursor: i64,
    epoch: Option<String>,
    rows: BTreeMap<String, i64>,
    /// Pushes not yet answered (resent with the same commit id).
    outbox: Vec<(String, String)>,
    next_row: u64,
    need_pull: bool,
    table: sync_core::CompiledTable,
}

enum Step {
    Ok,
    /// The socket is gone (dropped by a fault or the server).
    Gone,
}

impl Client {
    fn new(n: usize) -> Self {
        let schema = schema();
        Self {
            id: format!("client-{n}"),
            actor: format!("actor-{n}"),
            cursor: -1,
            epoch: None,
            rows: BTreeMap::new(),
            outbox: Vec::new(),
            next_row: 0,
            need_pull: true,
            table: schema.table("todos").expect("todos").clone(),
        }
    }

    async fn connect(&mut self, address: &str) -> Option<Socket> {
        let mut request = format!("ws://{address}/realtime?clientId={}", self.id)
            .into_client_request()
            .expect("request");
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {}", self.actor).parse().expect("header"),
        );
        let (socket, _) = tokio_tungstenite::connect_async(request).await.ok()?;
        Some(socket)
    }

    fn request(&self) -> Vec<u8> {
        let mut scopes = sync_ssp2::ScopeMap::new();
        scopes.insert("list_id", vec![LIST.to_owned()]);
        let commits = self
            .outbox
            .iter()
            .map(|(commit_id, row_id)| PushCommit {
                client_commit_id: commit_id.clone(),
                operations: vec![PushOperation {
                    table: "todos".into(),
                    row_id: row_id.clone(),
                    base_version: None,
                    op: PushOp::Upsert {
                        payload: sync_core::codec::encode_row(
                            &self.table,
                            &[
                                RowValue::String(row_id.clone()),
                                RowValue::String(LIST.into()),
                                RowValue::String(format!("by {}", self.id)),
                            ],
                        )
                        .expect("row"),
                    },
                }],
            })
            .collect();
        sync_ssp2::encode_request(&Request::from_parts(
            WireVersion::V2,
            ReqHeader {
                client_id: self.id.clone(),
                schema_version: 1,
                log_epoch: self.epoch.clone(),
            },
            commits,
            Some((
                PullHeader {
                    limit_commits: 10_000,
                    limit_snapshot_rows: 10_000,
                    max_snapshot_pages: 1,
                    accept: sync_ssp2::Accept::from_bits(1).expect("accept"),
                },
                vec![Subscription {
                    id: "mine".into(),
                    table: "todos".into(),
                    scopes,
                    params: None,
                    cursor: self.cursor,
                    bootstrap_state: None,
                }],
            )),
        ))
        .expect("encode")
    }

    /// Applies a response's sections (a delta or a round's); returns
    /// whether anything was applied.
    fn apply(&mut self, bytes: &[u8], round: bool) -> bool {
        let response = sync_ssp2::decode_response(bytes).expect("a response that decodes");
        let mut section = Vec::new();
        let mut applied = false;
        for frame in response.frames {
            match frame {
                ResponseFrame::RespHeader(header) => {
                    if let Some(epoch) = header.epoch {
                        let first_contact = self.epoch.is_none();
                        self.epoch = Some(epoch.log_epoch);
                        if epoch.reset_required {
                            // Only a first contact (no epoch yet) resets here.
                            assert!(first_contact, "{}: a reset mid-run", self.id);
                            self.rows.clear();
                            self.cursor = -1;
                            self.need_pull = true;
                            return applied;
                        }
                    }
                }
                ResponseFrame::PushResult(result) if round => {
                    self.outbox
                        .retain(|(commit_id, _)| *commit_id != result.client_commit_id);
                }
                ResponseFrame::SegmentInline(inline) => {
                    for row in inline.segment().expect("segment").blocks.concat() {
                        let id = match row.values.first() {
                            Some(sync_ssp2::ColumnValue::String(id)) => id.clone(),
                            other => panic!("a row without its id: {other:?}"),
                        };
                        self.rows.insert(id, row.server_version);
                    }
                }
                ResponseFrame::Commit(commit) => section.push(commit),
                ResponseFrame::SubEnd(end) => {
                    // A delta section at or below the cursor is a duplicate.
                    if round || end.next_cursor > self.cursor {
                        for commit in section.drain(..) {
                            for change in commit.changes {
                                match change.op {
                                    ChangeOp::Upsert { row_version, .. } => {
                                        self.rows.insert(change.row_id, row_version);
                                    }
                                    ChangeOp::Delete => {
                                        self.rows.remove(&change.row_id);
                                    }
                                }
                            }
                        }
                        self.cursor = self.cursor.max(end.next_cursor);
                        applied = true;
                    }
                    section.clear();
                }
                ResponseFrame::Error(error) => panic!("error frame: {}", error.code),
                _ => {}
            }
        }
        applied
    }

    async fn ack(&self, socket: &mut Socket) -> Step {
        if self.cursor < 0 {
            return Step::Ok;
        }
        let ack = format!(r#"{{"type":"ack","cursor":{}}}"#, self.cursor);
        match socket.send(Message::Text(ack.into())).await {
            Ok(()) => Step::Ok,
            Err(_) => Step::Gone,
        }
    }

    /// Handles one frame that is not a round's; `drop_delta` discards a
    /// delta (a host that could not apply it: a wake-up, §8.2).
    fn on_frame(&mut self, message: Message, drop_delta: bool) -> (Step, bool) {
        match message {
            Message::Text(text) => match parse_control_message(text.as_str()) {
                Ok(ControlMessage::Hello(hello)) if hello.requires_sync => {
                    self.need_pull = true;
                    (Step::Ok, false)
                }
                Ok(ControlMessage::Wake(_)) => {
                    self.need_pull = true;
                    (Step::Ok, false)
                }
                _ => (Step::Ok, false),
            },
            Message::Binary(bytes) if bytes.first() == Some(&0) => {
                if drop_delta {
                    self.need_pull = true;
                    return (Step::Gone, false);
                }
                let applied = self.apply(&bytes[1..], false);
                (Step::Ok, applied)
            }
            Message::Close(_) => (Step::Gone, false),
            _ => (Step::Ok, false),
        }
    }

    /// A round on the socket: push the outbox, pull from the cursor, ack.
    /// `cut` closes the socket right after sending the request.
    async fn round(&mut self, socket: &mut Socket, cut: bool) -> Step {
        self.need_pull = false;
        let mut framed = vec![1u8];
        framed.extend(self.request());
        if socket.send(Message::Binary(framed.into())).await.is_err() {
            self.need_pull = true;
            return Step::Gone;
        }
        if cut {
            self.need_pull = true;
            let _ = socket.close(None).await;
            return Step::Gone;
        }
        let mut response = Vec::new();
        loop {
            let message = match tokio::time::timeout(OWED, socket.next()).await {
                Ok(Some(Ok(message))) => message,
                Ok(_) => {
                    self.need_pull = true;
                    return Step::Gone;
                }
                Err(_) => panic!("{}: no round response within {OWED:?}", self.id),
            };
            match message {
                Message::Binary(bytes) if bytes.first() == Some(&1) => {
                    response.extend_from_slice(&bytes[1..]);
                    if sync_ssp2::message_length(&response)
                        .expect("a framed response")
                        .is_some()
                    {
                        break;
                    }
                }
                other => {
                    let (step, applied) = self.on_frame(other, false);
                    if applied {
                        let _ = self.ack(socket).await;
                    }
                    if matches!(step, Step::Gone) {
                        self.need_pull = true;
                        return Step::Gone;
                    }
                }
            }
        }
        self.apply(&response, true);
        self.ack(socket).await
    }

    /// Takes the frames that arrive within `wait` (none owed: a quiet
    /// socket simply ends the wait).
    async fn listen(&mut self, socket: &mut Socket, wait: Duration, drop_delta: bool) -> Step {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let message = match tokio::time::timeout_at(deadline, socket.next()).await {
                Err(_) => return Step::Ok,
                Ok(Some(Ok(message))) => message,
                Ok(_) => return Step::Gone,
            };
            let (step, applied) = self.on_frame(message, drop_delta);
            if matches!(step, Step::Gone) {
                let _ = socket.close(None).await;
                return Step::Gone;
            }
            if applied && matches!(self.ack(socket).await, Step::Gone) {
                return Step::Gone;
            }
        }
    }
}

/// What a client does in its life.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Pushes (half its steps), cuts a round now and then, listens.
    Writer,
    /// Never pushes: lives on deltas, drops one now and then, and is busy
    /// (reads nothing) at times, so deltas pile up unacked on the server.
    Reader,
}

async fn reconnect(client: &mut Client, servers: &mut watch::Receiver<String>) -> Option<Socket> {
    let address = servers.borrow_and_update().clone();
    let socket = client.connect(&address).await;
    if socket.is_none() {
        // The server is being replaced: wait for the next one.
        let _ = tokio::time::timeout(Duration::from_millis(100), servers.changed()).await;
    }
    socket
}

/// A client's life: a writer takes `STEPS` steps and then empties its
/// outbox; a reader lives until the writers are done.
async fn live(
    mut client: Client,
    role: Role,
    seed: u64,
    mut servers: watch::Receiver<String>,
    writers_done: watch::Receiver<bool>,
) -> Client {
    let mut rng = Rng(seed | 1);
    let mut socket: Option<Socket> = None;
    let mut steps = 0;
    loop {
        let more = match role {
            Role::Writer => steps < STEPS,
            Role::Reader => !*writers_done.borrow(),
        };
        if !more {
            break;
        }
        steps += 1;
        let Some(live_socket) = socket.as_mut() else {
            socket = reconnect(&mut client, &mut servers).await;
            continue;
        };
        if client.need_pull {
            if let Step::Gone = client.round(live_socket, false).await {
                socket = None;
            }
            continue;
        }
        let step = match (role, rng.below(10)) {
            (Role::Writer, 0..=4) | (Role::Writer, 5) => {
                client.next_row += 1;
                client.outbox.push((
                    format!("{}-c{}", client.id, client.next_row),
                    format!("{}-r{}", client.id, client.next_row),
                ));
                let cut = rng.below(5) == 0;
                client.round(live_socket, cut).await
            }
            (Role::Writer, _) => {
                client
                    .listen(live_socket, Duration::from_millis(20), false)
                    .await
            }
            (Role::Reader, 0) => {
                client
                    .listen(live_socket, Duration::from_millis(20), true)
                    .await
            }
            (Role::Reader, 1..=2) => {
                // A busy host: nothing is read from the socket meanwhile.
                tokio::time::sleep(Duration::from_millis(40)).await;
                Step::Ok
            }
            (Role::Reader, _) => {
                client
                    .listen(live_socket, Duration::from_millis(20), false)
                    .await
            }
        };
        if let Step::Gone = step {
            socket = None;
        }
    }
    // A writer's end: rounds until its outbox is empty, from its own
    // cursor (never from scratch).
    while !client.outbox.is_empty() {
        let Some(mut last) = reconnect(&mut client, &mut servers).await else {
            continue;
        };
        if let Step::Ok = client.round(&mut last, false).await {
            let _ = last.close(None).await;
        }
    }
    client
}

fn server_rows(storage: &dyn ServerStorage) -> BTreeMap<String, i64> {
    storage
        .scan_rows(
            PARTITION,
            &RowScanQuery {
                table: "todos".into(),
                scope_filter: sync_core::ScopeFilter::from([(
                    "list_id".to_owned(),
                    vec![LIST.to_owned()],
                )]),
                after_row_id: None,
                limit: 100_000,
            },
        )
        .expect("scan")
        .into_iter()
        .map(|row| (row.row_id, row.server_version))
        .collect()
}

fn run(deployment: &dyn Deployment, round: u64) {
    let setup = process(deployment);
    // Two servers at once where commits travel between processes
    // (Postgres): half the clients on each, so readers hear the writers'
    // pushes only through the other server's listener.
    let slots = if setup.commit_feed().is_some() { 2 } else { 1 };
    let mut processes: Vec<_> = (0..slots + 2).map(|_| process(deployment)).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut stopped = Vec::new();
    let clients = runtime.block_on(async {
        // Unacked deltas are capped at 2, so wake-ups happen too.
        let mut current = Vec::new();
        let mut announcers = Vec::new();
        let mut receivers = Vec::new();
        for _ in 0..slots {
            let server = start(processes.remove(0), 2).await;
            let (announce, servers) = watch::channel(server.address.clone());
            current.push(server);
            announcers.push(announce);
            receivers.push(servers);
        }
        let (finish, writers_done) = watch::channel(false);
        let mut writers = Vec::new();
        let mut readers = Vec::new();
        for n in 0..CLIENTS {
            let seed = 0x5EED_0000 + round * 100 + n as u64;
            let role = if n % 2 == 0 {
                Role::Writer
            } else {
                Role::Reader
            };
            let task = tokio::spawn(live(
                Client::new(n),
                role,
                seed,
                receivers[n % slots].clone(),
                writers_done.clone(),
            ));
            match role {
                Role::Writer => writers.push(task),
                Role::Reader => readers.push(task),
            }
        }
        // Two restarts while the clients live (every socket of the server
        // cut, a new server on the same database), and the commit-feed
        // listeners killed once in between.
        for restart in 0..2 {
            tokio::task::yield_now().await;
            let mut ticks = tokio::time::interval(Duration::from_millis(150));
            ticks.tick().await;
            ticks.tick().await;
            if restart == 1 {
                tokio::task::block_in_place(|| deployment.kill_listeners());
            }
            let slot = restart % slots;
            current[slot].task.abort();
            current[slot].hub.close_all();
            let next = start(processes.remove(0), 2).await;
            let _ = announcers[slot].send(next.address.clone());
            stopped.push(std::mem::replace(&mut current[slot], next));
        }
        let mut clients = Vec::new();
        for task in writers {
            clients.push(task.await.expect("writer task"));
        }
        let _ = finish.send(true);
        for task in readers {
            clients.push(task.await.expect("reader task"));
        }
        // Every push has landed: one more round each, from its own cursor.
        for client in &mut clients {
            let mut socket = client
                .connect(&current[0].address)
                .await
                .unwrap_or_else(|| panic!("{}: the last connect failed", client.id));
            assert!(matches!(client.round(&mut socket, false).await, Step::Ok));
            let _ = socket.close(None).await;
        }
        stopped.extend(current);
        clients
    });
    drop(runtime);
    let expected = server_rows(setup.as_ref());
    let pushed: usize = clients.iter().map(|c| c.next_row as usize).sum();
    assert_eq!(expected.len(), pushed, "every push landed once");
    for client in &clients {
        assert_eq!(
            client.rows,
            expected,
            "{} holds other rows than the server ({} dialect)",
            client.id,
            deployment.dialect()
        );
    }
    println!(
        "realtime [{}] round {round}: {CLIENTS} clients on {slots} server(s), {pushed} pushes, \
         2 server restarts{}, every client converged",
        deployment.dialect(),
        if slots > 1 {
            ", the listeners killed"
        } else {
            ""
        }
    );
    drop(stopped);
}

#[test]
fn realtime_faults_sqlite() {
    for round in 0..budget::realtime_rounds() {
        run(&SqliteDeployment::new(), round);
    }
}

#[test]
fn realtime_faults_postgres() {
    for round in 0..budget::realtime_rounds() {
        run(&PostgresDeployment::new(), round);
    }
}
