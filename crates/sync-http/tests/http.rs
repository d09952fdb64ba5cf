//! The router over real HTTP on 127.0.0.1, with our codec as the client:
//! 415, 401, a push and pull round, gzip both ways, the body limit, a
//! segment download, and a client that stops reading (or goes away)
//! mid-response releasing its round slot.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sync_core::{EnsureOptions, RowValue, ServerStorage};
use sync_engine::{Engine, EngineConfig, RequestContext, ResolveError, ScopeMap};
use sync_http::{HttpConfig, SyncState};
use sync_sqlite::{SqliteConfig, SqliteStorage};
use sync_ssp2::{
    Accept, PullHeader, PushCommit, PushOp, PushOperation, ReqHeader, Request, ResponseFrame,
    Subscription, WireVersion,
};
use sync_wire::{WireConfig, WireFailure, WireService};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SCHEMA: &str = r#"{"version": 1, "tables": [
  {"name": "todos", "primaryKey": "id",
   "columns": [{"name": "id", "type": "string"}, {"name": "list_id", "type": "string"},
               {"name": "title", "type": "string"}],
   "scopes": ["list:{list_id}"]}]}"#;

const SSP2: &str = "application/vnd.syncular.sync.v2";

struct Server {
    address: String,
    state: SyncState,
    schema: Arc<sync_core::CompiledSchema>,
    _dir: tempfile::TempDir,
}

/// `Authorization: Bearer <actor>` for the actors alice and bob.
fn authenticate(parts: &http::request::Parts) -> Result<RequestContext, WireFailure> {
    let actor = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|a| ["alice", "bob"].contains(a))
        .ok_or_else(WireFailure::auth_required)?;
    Ok(RequestContext::new("acme", actor))
}

async fn start(config: HttpConfig, inline_limit: usize) -> Server {
    let schema =
        Arc::new(sync_schema::compile(&sync_schema::parse_schema_json(SCHEMA).unwrap()).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let storage =
        Arc::new(SqliteStorage::open(dir.path().join("http.db"), SqliteConfig::default()).unwrap());
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .unwrap();
    let resolver = |_: &str, actor: &str, _: &str| -> Result<ScopeMap, ResolveError> {
        let lists = if actor == "alice" { "*" } else { "l2" };
        Ok(ScopeMap::from([(
            "list_id".to_owned(),
            vec![lists.to_owned()],
        )]))
    };
    let engine = Engine::new(
        storage,
        schema.clone(),
        EngineConfig::new(Arc::new(resolver)),
    )
    .unwrap();
    let wire = WireConfig {
        inline_limit,
        ..WireConfig::default()
    };
    let service = Arc::new(WireService::new(Arc::new(engine), wire));
    let state = SyncState::new(service, Arc::new(authenticate), config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let router = sync_http::router(state.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    Server {
        address,
        state,
        schema,
        _dir: dir,
    }
}

impl Server {
    fn row(&self, id: &str, list: &str, title: &str) -> Vec<u8> {
        let table = self.schema.table("todos").unwrap();
        sync_core::codec::encode_row(
            table,
            &[
                RowValue::String(id.into()),
                RowValue::String(list.into()),
                RowValue::String(title.into()),
            ],
        )
        .unwrap()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    fn frames(&self) -> Vec<ResponseFrame> {
        assert_eq!(self.status, 200, "{}", String::from_utf8_lossy(&self.body));
        sync_ssp2::decode_response(&self.body).unwrap().frames
    }
}

async fn send(request: http::Request<Full<Bytes>>) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let response = client.request(request).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Answer {
        status,
        headers,
        body,
    }
}

fn post(server: &Server, actor: Option<&str>, content_type: &str) -> http::request::Builder {
    let mut builder = http::Request::post(server.url("/sync")).header("content-type", content_type);
    if let Some(actor) = actor {
        builder = builder.header("authorization", format!("Bearer {actor}"));
    }
    builder
}

fn pull(list: &str, accept: u8) -> Vec<u8> {
    let mut scopes = sync_ssp2::ScopeMap::new();
    scopes.insert("list_id", vec![list.to_owned()]);
    sync_ssp2::encode_request(&Request::pull_only(
        WireVersion::V1,
        ReqHeader {
            client_id: "phone-a".into(),
            schema_version: 1,
            log_epoch: None,
        },
        PullHeader {
            limit_commits: 0,
            limit_snapshot_rows: 1000,
            max_snapshot_pages: 100,
            accept: Accept::from_bits(accept).unwrap(),
        },
        vec![Subscription {
            id: "todos".into(),
            table: "todos".into(),
            scopes,
            params: None,
            cursor: -1,
            bootstrap_state: None,
        }],
    ))
    .unwrap()
}

fn push(
    server: &Server,
    commit: &str,
    list: &str,
    rows: std::ops::Range<usize>,
    title_len: usize,
) -> Vec<u8> {
    let operations = rows
        .map(|i| {
            let id = format!("{list}-{i:05}");
            PushOperation {
                table: "todos".into(),
                row_id: id.clone(),
                base_version: None,
                op: PushOp::Upsert {
                    payload: server.row(&id, list, &"t".repeat(title_len)),
                },
            }
        })
        .collect();
    sync_ssp2::encode_request(&Request::from_parts(
        WireVersion::V1,
        ReqHeader {
            client_id: "pusher".into(),
            schema_version: 1,
            log_epoch: None,
        },
        vec![PushCommit {
            client_commit_id: commit.into(),
            operations,
        }],
        None,
    ))
    .unwrap()
}

async fn round(server: &Server, actor: &str, body: Vec<u8>) -> Answer {
    send(
        post(server, Some(actor), SSP2)
            .body(Full::from(body))
            .unwrap(),
    )
    .await
}

fn inline_row_count(frames: &[ResponseFrame]) -> usize {
    frames
        .iter()
        .filter_map(|f| match f {
            ResponseFrame::SegmentInline(s) => Some(s.segment().unwrap().blocks.concat().len()),
            _ => None,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_content_type_is_415_and_no_token_is_401() {
    let server = start(HttpConfig::default(), 256 * 1024).await;
    let answer = send(
        post(&server, Some("alice"), "application/octet-stream")
            .body(Full::from(pull("l1", 1)))
            .unwrap(),
    )
    .await;
    assert_eq!(answer.status, 415);
    assert_eq!(answer.headers["content-type"], "application/json");
    assert_eq!(answer.json()["code"], "sync.invalid_request");

    for actor in [None, Some("mallory")] {
        let answer = send(
            post(&server, actor, SSP2)
                .body(Full::from(pull("l1", 1)))
                .unwrap(),
        )
        .await;
        assert_eq!(answer.status, 401);
        assert_eq!(answer.json()["code"], "sync.auth_required");
    }
    // A content type with parameters is still ours.
    let answer = send(
        post(
            &server,
            Some("alice"),
            "application/vnd.syncular.sync.v2; charset=binary",
        )
        .body(Full::from(pull("l1", 1)))
        .unwrap(),
    )
    .await;
    assert_eq!(answer.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_then_a_pull_round_over_http() {
    let server = start(HttpConfig::default(), 256 * 1024).await;
    let answer = round(&server, "alice", push(&server, "c1", "l1", 0..3, 10)).await;
    assert_eq!(answer.headers["content-type"], SSP2);
    let frames = answer.frames();
    assert!(frames
        .iter()
        .any(|f| matches!(f, ResponseFrame::PushResult(r)
        if matches!(r.status, sync_ssp2::PushStatus::Applied { commit_seq: 1 }))));
    // A response of one chunk goes out whole, with its length.
    assert_eq!(
        answer.headers["content-length"].to_str().unwrap(),
        answer.body.len().to_string()
    );
    let frames = round(&server, "alice", pull("l1", 1)).await.frames();
    assert_eq!(inline_row_count(&frames), 3);
    // A decode error answers 400 with the §10.1 body before any frame.
    let answer = round(&server, "alice", b"SSP1garbage".to_vec()).await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["code"], "sync.invalid_request");
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_request_bodies_and_gzip_responses() {
    let server = start(HttpConfig::default(), 256 * 1024).await;
    let body = gzip(&push(&server, "c1", "l1", 0..50, 50));
    let answer = send(
        post(&server, Some("alice"), SSP2)
            .header("content-encoding", "gzip")
            .body(Full::from(body))
            .unwrap(),
    )
    .await;
    assert!(answer
        .frames()
        .iter()
        .any(|f| matches!(f, ResponseFrame::PushResult(_))));

    let answer = send(
        post(&server, Some("alice"), SSP2)
            .header("accept-encoding", "gzip")
            .body(Full::from(pull("l1", 1)))
            .unwrap(),
    )
    .await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.headers["content-encoding"], "gzip");
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(answer.body.as_slice())
        .read_to_end(&mut plain)
        .unwrap();
    let frames = sync_ssp2::decode_response(&plain).unwrap().frames;
    assert_eq!(inline_row_count(&frames), 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_above_the_limit_is_413_counted_after_gzip() {
    let config = HttpConfig {
        max_body_bytes: 4096,
        ..HttpConfig::default()
    };
    let server = start(config, 256 * 1024).await;
    let large = push(&server, "c1", "l1", 0..20, 500);
    assert!(large.len() > 4096);
    let answer = round(&server, "alice", large.clone()).await;
    assert_eq!(answer.status, 413);
    assert_eq!(answer.json()["code"], "sync.invalid_request");
    let compressed = gzip(&large);
    assert!(compressed.len() < 4096);
    let answer = send(
        post(&server, Some("alice"), SSP2)
            .header("content-encoding", "gzip")
            .body(Full::from(compressed))
            .unwrap(),
    )
    .await;
    assert_eq!(answer.status, 413);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_referenced_segment_is_downloaded_and_reauthorized() {
    let server = start(HttpConfig::default(), 1024).await;
    round(&server, "alice", push(&server, "c1", "l2", 0..40, 100))
        .await
        .frames();
    let frames = round(&server, "alice", pull("l2", 0b11)).await.frames();
    let reference = frames
        .iter()
        .find_map(|f| match f {
            ResponseFrame::SegmentRef(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a SEGMENT_REF");
    let get = |actor: &str, scopes: &str| {
        http::Request::get(server.url(&format!("/segments/{}", reference.segment_id)))
            .header("authorization", format!("Bearer {actor}"))
            .header("x-syncular-scopes", scopes)
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    let answer = send(get("alice", r#"{"list_id":["l2"]}"#)).await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        sync_ssp2::sha256::segment_id(&answer.body),
        reference.segment_id
    );
    assert_eq!(
        answer.headers["etag"],
        format!("\"{}\"", reference.segment_id)
    );
    assert_eq!(answer.headers["cache-control"], "private, max-age=0");
    // bob may read l2 too: the same effective scopes, the same segment.
    assert_eq!(send(get("bob", r#"{"list_id":["l2"]}"#)).await.status, 200);
    // Other requested scopes: another digest.
    let answer = send(get("alice", r#"{"list_id":["l1","l2"]}"#)).await;
    assert_eq!(answer.status, 403);
    assert_eq!(answer.json()["code"], "sync.forbidden");
    let mut conditional = get("alice", r#"{"list_id":["l2"]}"#);
    conditional.headers_mut().insert(
        "if-none-match",
        format!("\"{}\"", reference.segment_id).parse().unwrap(),
    );
    assert_eq!(send(conditional).await.status, 304);
}

/// A response far larger than the socket buffers and the channel: 4 000
/// rows of 2 000 characters, about 8 MB of inline segments.
async fn seeded_for_a_large_response(config: HttpConfig) -> Server {
    let server = start(config, 256 * 1024).await;
    for commit in 0..20 {
        let rows = commit * 200..(commit + 1) * 200;
        round(
            &server,
            "alice",
            push(&server, &format!("c{commit}"), "l1", rows, 2000),
        )
        .await
        .frames();
    }
    server
}

async fn raw_request(server: &Server, body: &[u8]) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(&server.address)
        .await
        .unwrap();
    let head = format!(
        "POST /sync HTTP/1.1\r\nHost: {}\r\nContent-Type: {SSP2}\r\nAuthorization: Bearer alice\r\nContent-Length: {}\r\n\r\n",
        server.address,
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    // The status line: the round is running and streaming.
    let mut first = [0u8; 12];
    stream.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    stream
}

fn short_timeout() -> HttpConfig {
    HttpConfig {
        send_timeout: Duration::from_millis(300),
        channel_chunks: 1,
        chunk_bytes: 4096,
        max_concurrent_rounds: 2,
        ..HttpConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_releases_its_round() {
    let server = seeded_for_a_large_response(short_timeout()).await;
    let stalled = raw_request(&server, &pull("l1", 1)).await;
    assert!(server.state.free_slots() < 2, "the round holds a slot");
    // The client keeps the connection open and reads nothing more: the
    // round's send times out, the engine stops, the slot comes back.
    tokio::time::timeout(Duration::from_secs(30), server.state.idle())
        .await
        .expect("the stalled round released its slot");
    assert_eq!(server.state.free_slots(), 2);
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_releases_its_round() {
    let config = HttpConfig {
        send_timeout: Duration::from_secs(3600),
        ..short_timeout()
    };
    let server = seeded_for_a_large_response(config).await;
    let gone = raw_request(&server, &pull("l1", 1)).await;
    drop(gone);
    tokio::time::timeout(Duration::from_secs(30), server.state.idle())
        .await
        .expect("the abandoned round released its slot");
    assert_eq!(server.state.free_slots(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_of_many_chunks_streams_without_a_length() {
    let server = seeded_for_a_large_response(HttpConfig::default()).await;
    let answer = round(&server, "alice", pull("l1", 1)).await;
    assert!(answer.headers.get("content-length").is_none());
    assert!(answer.body.len() > 4 * 64 * 1024);
    assert_eq!(inline_row_count(&answer.frames()), 4000);
}

/// A response of one chunk and one of two (the round's last bytes handed
/// over with the end of the response) both go out whole, with their
/// length; the two-chunk body is the chunks in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_of_one_and_two_chunks_go_out_whole_with_a_length() {
    let config = HttpConfig {
        chunk_bytes: 4096,
        ..HttpConfig::default()
    };
    let server = start(config, 256 * 1024).await;
    let pushed = round(&server, "alice", push(&server, "c1", "l1", 0..3, 2000)).await;
    assert_eq!(pushed.status, 200);
    let small = pushed.headers.get("content-length").expect("a length");
    assert_eq!(small.to_str().unwrap(), pushed.body.len().to_string());
    assert!(pushed.body.len() < 4096, "one chunk: {}", pushed.body.len());

    let pulled = round(&server, "alice", pull("l1", 1)).await;
    assert_eq!(pulled.status, 200);
    assert!(
        (4096..2 * 4096).contains(&pulled.body.len()),
        "two chunks: {}",
        pulled.body.len()
    );
    let length = pulled.headers.get("content-length").expect("a length");
    assert_eq!(length.to_str().unwrap(), pulled.body.len().to_string());
    assert_eq!(inline_row_count(&pulled.frames()), 3);
}
