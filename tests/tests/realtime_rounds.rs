//! Socket rounds back to back (SSP2 §8.7): a round is complete at its
//! response's `END`, so a client may send its next request the moment the
//! last chunk arrives. The server must take that request as a new round,
//! not as bytes pipelined into the one it is still finishing (which would
//! close the socket). A pull round re-reads the client's registrations
//! after its response is written, which is when a too-early "in flight"
//! would be seen; many rounds in a row make that window hard to miss. A
//! second request sent before the first one's response has ended is
//! pipelining, and closes the socket.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use sync_core::{EnsureOptions, ServerStorage};
use sync_engine::{Engine, EngineConfig, RequestContext, ResolveError, ScopeMap};
use sync_http::{HttpConfig, SyncState};
use sync_ssp2::{PullHeader, ReqHeader, Request, Subscription, WireVersion};
use sync_wire::realtime::{RealtimeConfig, RealtimeHub};
use sync_wire::{WireConfig, WireFailure, WireService};
use syncstore_tests::{Deployment, SqliteDeployment};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const SCHEMA: &str = r#"{"version": 1, "tables": [{"name": "todos", "primaryKey": "id",
  "columns": [{"name": "id", "type": "string"}, {"name": "list_id", "type": "string"}],
  "scopes": ["list:{list_id}"]}]}"#;
const ROUNDS: usize = 60;
/// How long a round's response may take.
const OWED: Duration = Duration::from_secs(30);

fn authenticate(parts: &http::request::Parts) -> Result<RequestContext, WireFailure> {
    let actor = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(WireFailure::auth_required)?;
    Ok(RequestContext::new("p", actor))
}

/// Serves `storage` with realtime on a free port; returns the address.
async fn serve(storage: Arc<dyn ServerStorage>) -> String {
    let schema = Arc::new(
        sync_schema::compile(&sync_schema::parse_schema_json(SCHEMA).expect("schema"))
            .expect("compile"),
    );
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let allow = |_: &str, _: &str, _: &str| -> Result<ScopeMap, ResolveError> {
        Ok(ScopeMap::from([(
            "list_id".to_owned(),
            vec!["l1".to_owned()],
        )]))
    };
    let engine = Engine::new(storage, schema, EngineConfig::new(Arc::new(allow))).expect("engine");
    let service = Arc::new(WireService::new(Arc::new(engine), WireConfig::default()));
    let hub = Arc::new(RealtimeHub::new(service.clone(), RealtimeConfig::default()));
    let state =
        SyncState::new(service, Arc::new(authenticate), HttpConfig::default()).with_realtime(hub);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let router = sync_http::router(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    address
}

/// A pull of `l1` by `bob-1` from `cursor` in `epoch`, tagged as a round
/// chunk.
fn pull(cursor: i64, epoch: Option<String>) -> Vec<u8> {
    let mut scopes = sync_ssp2::ScopeMap::new();
    scopes.insert("list_id", vec!["l1".to_owned()]);
    let request = Request::pull_only(
        WireVersion::V2,
        ReqHeader {
            client_id: "bob-1".into(),
            schema_version: 1,
            log_epoch: epoch,
        },
        PullHeader {
            limit_commits: 100,
            limit_snapshot_rows: 100,
            max_snapshot_pages: 1,
            accept: sync_ssp2::Accept::from_bits(1).expect("accept"),
        },
        vec![Subscription {
            id: "mine".into(),
            table: "todos".into(),
            scopes,
            params: None,
            cursor,
            bootstrap_state: None,
        }],
    );
    let mut framed = vec![1u8];
    framed.extend(sync_ssp2::encode_request(&request).expect("encode"));
    framed
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Bob's socket (client `bob-1`) at `address`.
async fn connect(address: &str) -> Socket {
    let mut request = format!("ws://{address}/realtime?clientId=bob-1")
        .into_client_request()
        .expect("request");
    request
        .headers_mut()
        .insert("authorization", "Bearer bob".parse().expect("header"));
    let (socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("connect");
    socket
}

/// Runs `test` on a two-thread runtime against a fresh server.
fn with_server<F: std::future::Future<Output = ()>>(test: impl FnOnce(String) -> F) {
    let deployment = SqliteDeployment::new();
    let storage = deployment.process();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let address = serve(storage).await;
        test(address).await;
    });
}

#[test]
fn a_request_sent_before_the_last_response_ended_closes_the_socket() {
    with_server(|address| async move {
        let mut socket = connect(&address).await;
        // Both requests go out in one write, before any response byte.
        socket
            .feed(Message::Binary(pull(-1, None).into()))
            .await
            .expect("feed");
        socket
            .feed(Message::Binary(pull(-1, None).into()))
            .await
            .expect("feed");
        socket.flush().await.expect("flush");
        let mut response = Vec::new();
        let mut responses = 0;
        loop {
            let message = tokio::time::timeout(OWED, socket.next())
                .await
                .unwrap_or_else(|_| panic!("the socket stayed open for {OWED:?}"));
            match message {
                Some(Ok(Message::Binary(bytes))) if bytes.first() == Some(&1) => {
                    response.extend_from_slice(&bytes[1..]);
                    if let Some(n) = sync_ssp2::message_length(&response).expect("framed") {
                        response.drain(..n);
                        responses += 1;
                    }
                }
                Some(Ok(Message::Text(_) | Message::Ping(_) | Message::Pong(_))) => {}
                _ => break,
            }
        }
        assert!(
            responses < 2,
            "the pipelined request was answered ({responses} responses)"
        );
    });
}

#[test]
fn the_next_round_may_follow_the_end_of_the_last_at_once() {
    with_server(|address| async move {
        let mut socket = connect(&address).await;
        let mut cursor = -1;
        let mut epoch = None;
        for round in 0..ROUNDS {
            socket
                .send(Message::Binary(pull(cursor, epoch.clone()).into()))
                .await
                .unwrap_or_else(|e| panic!("round {round}: the request was not sent: {e}"));
            let mut response = Vec::new();
            loop {
                let message = tokio::time::timeout(OWED, socket.next())
                    .await
                    .unwrap_or_else(|_| panic!("round {round}: no response within {OWED:?}"));
                match message {
                    Some(Ok(Message::Binary(bytes))) if bytes.first() == Some(&1) => {
                        response.extend_from_slice(&bytes[1..]);
                        let length = sync_ssp2::message_length(&response).expect("framed");
                        if length.is_some() {
                            break;
                        }
                    }
                    Some(Ok(Message::Text(_) | Message::Ping(_) | Message::Pong(_))) => {}
                    other => panic!(
                        "round {round}: the server ended the socket after the previous \
                         round's END: {other:?}"
                    ),
                }
            }
            let decoded = sync_ssp2::decode_response(&response).expect("a response");
            for frame in decoded.frames {
                match frame {
                    sync_ssp2::ResponseFrame::RespHeader(header) => {
                        epoch = header.epoch.map(|e| e.log_epoch);
                    }
                    sync_ssp2::ResponseFrame::SubEnd(end) => cursor = end.next_cursor,
                    _ => {}
                }
            }
        }
        assert!(cursor >= 0, "the rounds pulled nothing: {cursor}");
    });
}
