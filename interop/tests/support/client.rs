//! The reference's published client (`syncular-client`) on its own HTTP
//! transport, behind a thin wrapper that can drop one response after the
//! request went through and records the segment downloads it makes.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use syncular_client::native_transport::HostTransport;
use syncular_client::{
    ClientLimits, Mutation, SegmentRequest, SyncClient, SyncOutcome, SyncReport, Transport,
    TransportError,
};

use super::server::Server;

/// The client's HTTP transport, with a fault switch and a segment log.
pub struct Wire {
    inner: HostTransport,
    /// When set, the next `/sync` round is performed and its response
    /// dropped (the client sees a transport failure).
    pub drop_next_response: bool,
    /// Every segment download the client asked for, in order.
    pub segments: Vec<SegmentRequest>,
}

impl Transport for Wire {
    fn sync(&mut self, request: &[u8]) -> Result<Vec<u8>, TransportError> {
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
        self.inner.realtime_sync(request)
    }

    fn download_segment(&mut self, request: &SegmentRequest) -> Result<Vec<u8>, TransportError> {
        self.segments.push(request.clone());
        self.inner.download_segment(request)
    }

    fn realtime_connect(&mut self) -> Result<(), TransportError> {
        self.inner.realtime_connect()
    }

    fn realtime_send(&mut self, text: &str) -> Result<(), TransportError> {
        self.inner.realtime_send(text)
    }

    fn realtime_close(&mut self) -> Result<(), TransportError> {
        self.inner.realtime_close()
    }
}

/// The reference's HTTP transport for the server at `base_url` with a
/// bearer token.
fn transport(base_url: &str, token: &str) -> HostTransport {
    HostTransport::from_config(&json!({
        "baseUrl": base_url,
        "headers": {"Authorization": format!("Bearer {token}")},
    }))
    .unwrap_or_else(|e| panic!("the reference transport refused its config: {e}"))
}

/// One client device of the scenarios.
pub struct Client {
    /// The reference client.
    pub sync: SyncClient,
    /// Its transport.
    pub wire: Wire,
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
        Self {
            sync,
            wire: Wire {
                inner: transport(base_url, token),
                drop_next_response: false,
                segments: Vec::new(),
            },
        }
    }

    /// Points the client at `server` (restarted on another port) with `token`.
    pub fn reconnect(&mut self, server: &Server, token: &str) {
        self.wire.inner = transport(&server.base_url, token);
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
