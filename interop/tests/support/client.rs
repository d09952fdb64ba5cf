//! The reference's published client (`syncular-client`) on its own HTTP
//! transport, behind a thin wrapper that can drop one response after the
//! request went through and records the segment downloads it makes.

use std::collections::BTreeMap;

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use syncular_client::native_transport::{HostTransport, Inbound};
use syncular_client::{
    ClientLimits, Mutation, SegmentRequest, SyncClient, SyncOutcome, SyncReport, Transport,
    TransportError,
};

use super::server::Server;

/// How long a realtime frame may take to arrive.
const REALTIME_WAIT: Duration = Duration::from_secs(20);

/// The client's HTTP transport, with a fault switch and a segment log.
pub struct Wire {
    inner: HostTransport,
    /// When set, the next `/sync` round is performed and its response
    /// dropped (the client sees a transport failure).
    pub drop_next_response: bool,
    /// Every segment download the client asked for, in order.
    pub segments: Vec<SegmentRequest>,
    /// Rounds sent over `POST /sync`.
    pub http_rounds: usize,
    /// Rounds sent over the realtime socket (§8.7).
    pub socket_rounds: usize,
}

impl Transport for Wire {
    fn sync(&mut self, request: &[u8]) -> Result<Vec<u8>, TransportError> {
        self.http_rounds += 1;
        let response = self.inner.sync(request);
        if std::mem::take(&mut self.drop_next_response) {
            return Err(TransportError::new(
                "transport.failed",
                "the response was lost on the way back",
            ));
        }
        response
    }

    fn realtime_sync(&mut self, request: &[u8]) -> Result<Vec<u8>, TransportError> {
        self.socket_rounds += 1;
        self.inner.realtime_sync(request)
    }

    fn download_segment(&mut self, request: &SegmentRequest) -> Result<Vec<u8>, TransportError> {
        self.segments.push(request.clone());
        self.inner.download_segment(request)
    }

    fn realtime_connect(&mut self) -> Result<(), TransportError> {
        self.inner.realtime_connect()
    }

    fn realtime_connect_for_client(&mut self, client_id: &str) -> Result<(), TransportError> {
        self.inner.realtime_connect_for_client(client_id)
    }

    fn realtime_send(&mut self, text: &str) -> Result<(), TransportError> {
        self.inner.realtime_send(text)
    }

    fn realtime_close(&mut self) -> Result<(), TransportError> {
        self.inner.realtime_close()
    }
}

/// The reference's HTTP transport for the server at `base_url` with a
/// bearer token; its realtime reader signals `inbound` after each frame it
/// buffers.
fn transport(base_url: &str, token: &str, inbound: mpsc::Sender<()>) -> HostTransport {
    let inbound = Mutex::new(inbound);
    HostTransport::from_config_with_notify(
        &json!({
            "baseUrl": base_url,
            "headers": {"Authorization": format!("Bearer {token}")},
        }),
        Some(Arc::new(move || {
            if let Ok(tx) = inbound.lock() {
                let _ = tx.send(());
            }
        })),
    )
    .unwrap_or_else(|e| panic!("the reference transport refused its config: {e}"))
}

/// One client device of the scenarios.
pub struct Client {
    /// The reference client.
    pub sync: SyncClient,
    /// Its transport.
    pub wire: Wire,
    /// Signalled by the transport's realtime reader after each frame.
    inbound: mpsc::Receiver<()>,
    inbound_tx: mpsc::Sender<()>,
}

/// A row as the client holds it: `(version, list_id, title)`.
pub type Held = (i64, String, String);

impl Client {
    /// A client with `client_id` and the schema `schema`, talking to
    /// `server` with `Authorization: Bearer <token>`.
    pub fn new(server: &Server, client_id: &str, token: &str, schema: &Value) -> Self {
        Self::with_limits(server, client_id, token, schema, ClientLimits::default())
    }

    /// As [`Client::new`], with request limits.
    pub fn with_limits(
        server: &Server,
        client_id: &str,
        token: &str,
        schema: &Value,
        limits: ClientLimits,
    ) -> Self {
        Self::at(&server.base_url, client_id, token, schema, limits)
    }

    /// A client of the server at `base_url` (a test instance's, say).
    pub fn at(
        base_url: &str,
        client_id: &str,
        token: &str,
        schema: &Value,
        limits: ClientLimits,
    ) -> Self {
        let sync = SyncClient::new(client_id.to_owned(), schema, limits)
            .unwrap_or_else(|e| panic!("the reference client refused to start: {e}"));
        let (inbound_tx, inbound) = mpsc::channel();
        Self {
            sync,
            wire: Wire {
                inner: transport(base_url, token, inbound_tx.clone()),
                drop_next_response: false,
                segments: Vec::new(),
                http_rounds: 0,
                socket_rounds: 0,
            },
            inbound,
            inbound_tx,
        }
    }

    /// Points the client at `server` (restarted on another port) with `token`.
    pub fn reconnect(&mut self, server: &Server, token: &str) {
        self.wire.inner = transport(&server.base_url, token, self.inbound_tx.clone());
    }

    /// Points the client at the server at `base_url` with `token`.
    pub fn reconnect_to(&mut self, base_url: &str, token: &str) {
        self.wire.inner = transport(base_url, token, self.inbound_tx.clone());
    }

    /// Connects the realtime socket (`GET /realtime?clientId=…`); later
    /// rounds of [`Client::round`] ride it (§8.7).
    pub fn connect_realtime(&mut self) {
        self.sync
            .connect_realtime(&mut self.wire)
            .unwrap_or_else(|e| panic!("connect_realtime: {e}"));
    }

    /// Lets go of the realtime socket (its server may be gone).
    pub fn disconnect(&mut self) {
        self.sync.disconnect_realtime(&mut self.wire);
        self.discard_inbound();
    }

    /// Hands every buffered realtime frame to the client, as a host's event
    /// loop does; returns how many there were.
    pub fn apply_inbound(&mut self) -> usize {
        let frames = self.wire.inner.take_inbound();
        let count = frames.len();
        for frame in frames {
            match frame {
                Inbound::Text(text) => self.sync.on_realtime_text(&text),
                Inbound::Binary(bytes) => self.sync.on_realtime_binary(&mut self.wire, &bytes),
            }
        }
        count
    }

    /// Applies realtime frames as they arrive until `done` holds; fails the
    /// test when it does not within `REALTIME_WAIT`.
    pub fn pump_until(&mut self, what: &str, done: impl Fn(&Client) -> bool) {
        let deadline = Instant::now() + REALTIME_WAIT;
        loop {
            self.apply_inbound();
            if done(self) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.inbound.recv_timeout(left) {
                Ok(()) => {}
                Err(_) => panic!("no realtime frame brought {what} within {REALTIME_WAIT:?}"),
            }
        }
    }

    /// Discards the realtime frames buffered so far (a host that never got
    /// them); returns how many.
    pub fn discard_inbound(&mut self) -> usize {
        self.wire.inner.take_inbound().len()
    }

    /// Waits for the next realtime frame (without applying it).
    pub fn wait_inbound(&mut self, what: &str) {
        if self.inbound.recv_timeout(REALTIME_WAIT).is_err() {
            panic!("no realtime frame ({what}) within {REALTIME_WAIT:?}");
        }
    }

    /// Whether the client wants a round (a wake-up, `hello.requiresSync`).
    pub fn sync_needed(&self) -> bool {
        self.sync.sync_needed()
    }

    /// Subscribes `id` to the todos of `lists`.
    pub fn subscribe(&mut self, id: &str, lists: &[&str]) {
        let lists = lists.iter().map(|l| (*l).to_owned()).collect();
        self.sync
            .subscribe(
                id.to_owned(),
                "todos".to_owned(),
                vec![("list_id".to_owned(), lists)],
                None,
            )
            .unwrap_or_else(|e| panic!("subscribe {id}: {e}"));
    }

    /// Queues one commit upserting a todo; returns its commit id.
    pub fn upsert(
        &mut self,
        id: &str,
        list: &str,
        title: &str,
        base_version: Option<i64>,
    ) -> String {
        self.upsert_many(&[(id, list, title)], base_version)
    }

    /// Queues one commit upserting several todos; returns its commit id.
    pub fn upsert_many(
        &mut self,
        rows: &[(&str, &str, &str)],
        base_version: Option<i64>,
    ) -> String {
        let mutations = rows
            .iter()
            .map(|(id, list, title)| {
                let mut values = Map::new();
                values.insert("id".into(), json!(id));
                values.insert("list_id".into(), json!(list));
                values.insert("title".into(), json!(title));
                values.insert("done".into(), json!(false));
                Mutation::Upsert {
                    table: "todos".into(),
                    values,
                    base_version,
                }
            })
            .collect();
        self.sync
            .mutate(mutations)
            .unwrap_or_else(|e| panic!("mutate: {e}"))
    }

    /// Queues one commit deleting a todo; returns its commit id.
    pub fn delete(&mut self, id: &str) -> String {
        self.sync
            .mutate(vec![Mutation::Delete {
                table: "todos".into(),
                row_id: id.to_owned(),
                base_version: None,
            }])
            .unwrap_or_else(|e| panic!("mutate: {e}"))
    }

    /// One round; the outcome as the client reports it.
    pub fn round(&mut self) -> SyncOutcome {
        self.sync.sync(&mut self.wire)
    }

    /// Rounds until the client is idle; fails the test on a failed round.
    pub fn sync_until_idle(&mut self) -> SyncReport {
        match self.sync.sync_until_idle(&mut self.wire, Some(64)) {
            SyncOutcome::Ok(report) => report,
            SyncOutcome::Failed {
                error_code,
                message,
            } => panic!("the round failed: {error_code}: {message}"),
        }
    }

    /// The todos the client holds, by id.
    pub fn todos(&self) -> BTreeMap<String, Held> {
        self.sync
            .read_rows("todos")
            .unwrap_or_else(|e| panic!("read_rows: {e}"))
            .into_iter()
            .map(|row| {
                let text = |c: &str| {
                    row.values
                        .get(c)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                (
                    row.row_id.clone(),
                    (row.version, text("list_id"), text("title")),
                )
            })
            .collect()
    }
}
