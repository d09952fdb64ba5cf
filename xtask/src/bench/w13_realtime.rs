//! W13 realtime fanout and W14 reconnect storm, through `sync-http` in
//! process over loopback WebSockets (the bench's sockets share the process
//! and its two cores with the server, so the figures are upper bounds).
//!
//! - **W13**: 1, 100 and 1 000 sockets registered on one list; single-row
//!   pushes into that list over `POST /sync`, one at a time; per socket the
//!   time from the push's acknowledgement (its response read whole) to the
//!   delta's arrival, p50 and p99 (0 when the delta came first). Every
//!   socket acks each delta. Also the resident memory per idle socket
//!   (`VmRSS` growth over the connections, both ends counted).
//! - **W14**: the same sockets dropped at once, commits pushed while they
//!   are away, then all reconnected at once; each runs a catch-up round on
//!   its socket (§8.7) after `hello` and acks. Time until every socket has
//!   caught up; errors (must be 0); the process's peak RSS.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sync_engine::{Operation, PushCommit, RequestContext, SyncRequest};
use sync_http::{HttpConfig, SyncState};
use sync_sqlite::Synchronous;
use sync_ssp2::{PullHeader, ReqHeader, Request, ResponseFrame, Subscription, WireVersion};
use sync_wire::realtime::{RealtimeConfig, RealtimeHub};
use sync_wire::{WireConfig, WireFailure, WireService};
use tokio::sync::{mpsc, Barrier};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use super::child::peak_rss_kb;
use super::db::Env;
use super::engine;
use super::fixture::{self, BenchRow, SCOPE_VAR, TABLE};
use super::report::{Better, Measure, Sample};
use super::w11_http_push::encode;
use super::w1_push::PARTITION;
use super::{progress, Scale};

/// The one list every socket is registered on.
fn list() -> String {
    fixture::list_id(0)
}

fn actor(i: usize) -> String {
    format!("w13-actor-{i}")
}

fn client(i: usize) -> String {
    format!("w13-client-{i}")
}

/// `Authorization: Bearer <actor>` in the bench partition.
fn authenticate(parts: &http::request::Parts) -> Result<RequestContext, WireFailure> {
    super::w11_http_push::authenticate(parts)
}

/// `VmRSS` of this process in KiB.
fn rss_kb() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS missing from /proc/self/status")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The SSP2 pull of `client` on the one list from `cursor`.
fn pull_bytes(client: &str, epoch: &str, cursor: i64) -> Result<Vec<u8>> {
    let mut scopes = sync_ssp2::ScopeMap::new();
    scopes.insert(SCOPE_VAR, vec![list()]);
    Ok(sync_ssp2::encode_request(&Request::pull_only(
        WireVersion::V2,
        ReqHeader {
            client_id: client.to_owned(),
            schema_version: fixture::VERSION,
            log_epoch: Some(epoch.to_owned()),
        },
        PullHeader {
            limit_commits: 1000,
            limit_snapshot_rows: 1000,
            max_snapshot_pages: 4,
            accept: sync_ssp2::Accept::from_bits(1).context("accept")?,
        },
        vec![Subscription {
            id: "one".to_owned(),
            table: TABLE.to_owned(),
            scopes,
            params: None,
            cursor,
            bootstrap_state: None,
        }],
    ))?)
}

/// The highest `SUB_END.nextCursor` of a response.
fn next_cursor(bytes: &[u8]) -> Result<Option<i64>> {
    let response = sync_ssp2::decode_response(bytes)?;
    let mut cursor = None;
    for frame in response.frames {
        match frame {
            ResponseFrame::SubEnd(end) => cursor = cursor.max(Some(end.next_cursor)),
            ResponseFrame::Error(error) => bail!("error frame {}", error.code),
            _ => {}
        }
    }
    Ok(cursor)
}

/// A server over a fresh database, in this process.
struct Served {
    /// The server pushes go to.
    base: String,
    /// The sockets' server (the same one, or the other process).
    ws: String,
    epoch: String,
    /// The sockets' hub.
    hub: Arc<RealtimeHub>,
    engine: Arc<sync_engine::Engine>,
    _pushing_hub: Arc<RealtimeHub>,
    _following: Option<sync_wire::realtime::Following>,
    _listening: Option<Arc<sync_engine::Engine>>,
    _db: super::db::Db,
}

/// The database, the engine and `count` registered clients, made outside
/// the runtime (a Postgres client may not be used inside it).
struct Prepared {
    db: super::db::Db,
    engine: Arc<sync_engine::Engine>,
    epoch: String,
    /// Two processes: the sockets' server over a storage of its own that
    /// hears the pushing server's commits through the commit feed.
    listening: Option<Arc<sync_engine::Engine>>,
}

fn prepare(env: &Env, count: usize, processes: usize) -> Result<Prepared> {
    let db = env.fresh(Synchronous::Normal)?;
    let (engine, listening) = if processes > 1 {
        (
            Arc::new(engine::engine(db.announcing_storage()?)?),
            Some(Arc::new(engine::engine(db.announcing_storage()?)?)),
        )
    } else {
        (Arc::new(engine::engine(db.storage(false)?)?), None)
    };
    let epoch = engine::acquire_epoch(&engine, &actor(0), "w13-setup")?;
    for i in 0..count {
        let mut request = engine::request(&client(i), Some(&epoch));
        request.pull = Some(sync_engine::PullHeader {
            limit_commits: 1000,
            limit_snapshot_rows: 1000,
            max_snapshot_pages: 4,
            accept: 1,
        });
        request.subscriptions.push(sync_engine::Subscription::new(
            "one",
            TABLE,
            fixture::filter(&[list()]),
            -1,
        ));
        engine::round(&engine, &actor(i), &request)?;
    }
    Ok(Prepared {
        db,
        engine,
        epoch,
        listening,
    })
}

/// One server of `engine` on 127.0.0.1: its address and hub.
async fn server(engine: Arc<sync_engine::Engine>) -> Result<(String, Arc<RealtimeHub>)> {
    let service = Arc::new(WireService::new(engine, WireConfig::default()));
    let hub = Arc::new(RealtimeHub::new(
        service.clone(),
        RealtimeConfig {
            max_unacked_deltas: 1_000_000,
            ..RealtimeConfig::default()
        },
    ));
    let state = SyncState::new(
        service,
        Arc::new(authenticate),
        HttpConfig {
            max_concurrent_rounds: 8,
            ..HttpConfig::default()
        },
    )
    .with_realtime(hub.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let router = sync_http::router(state);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok((address.to_string(), hub))
}

async fn serve(prepared: Prepared) -> Result<Served> {
    let Prepared {
        db,
        engine,
        epoch,
        listening,
    } = prepared;
    let (pushing, pushing_hub) = server(engine.clone()).await?;
    let (sockets, hub, following, listening) = match listening {
        Some(listening) => {
            let (address, hub) = server(listening.clone()).await?;
            let feed = listening
                .storage()
                .commit_feed()
                .context("the listening storage has no commit feed")?;
            let following = hub.follow(feed)?;
            (address, hub, Some(following), Some(listening))
        }
        None => (pushing.clone(), pushing_hub.clone(), None, None),
    };
    Ok(Served {
        base: format!("http://{pushing}"),
        ws: format!("ws://{sockets}/realtime"),
        epoch,
        hub,
        engine,
        _pushing_hub: pushing_hub,
        _following: following,
        _listening: listening,
        _db: db,
    })
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(served: &Served, i: usize) -> Result<(Socket, bool)> {
    let mut request = format!("{}?clientId={}", served.ws, client(i)).into_client_request()?;
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {}", actor(i)).parse()?);
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0);
    let (mut socket, _) =
        tokio_tungstenite::connect_async_with_config(request, Some(config), true).await?;
    let hello = match socket.next().await {
        Some(Ok(Message::Text(text))) => text,
        other => bail!("no hello: {other:?}"),
    };
    let requires_sync = hello.as_str().contains("\"requiresSync\":true");
    Ok((socket, requires_sync))
}

/// One socket of W13: acks every delta and reports its arrival time.
async fn listen(mut socket: Socket, arrivals: mpsc::UnboundedSender<Instant>) -> Result<()> {
    while let Some(message) = socket.next().await {
        match message? {
            Message::Binary(bytes) if bytes.first() == Some(&0) => {
                let at = Instant::now();
                let cursor = next_cursor(&bytes[1..])?.context("a delta without SUB_END")?;
                if arrivals.send(at).is_err() {
                    break;
                }
                let ack = format!(r#"{{"type":"ack","cursor":{cursor}}}"#);
                socket.send(Message::Text(ack.into())).await?;
            }
            Message::Close(_) => break,
            _ => {}
        }
    }
    Ok(())
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// Pushes row `k` into the one list over `POST /sync`; returns when the
/// response has been read whole.
async fn push(http: &HttpClient, served: &Served, k: usize) -> Result<()> {
    let table = fixture::schema(false)?;
    let table = table.require_table(TABLE)?;
    let row = BenchRow::new(table, "w13", (k as u64) * fixture::LISTS)?;
    let mut request: SyncRequest = engine::request("w13-pusher", Some(&served.epoch));
    request.pushes.push(PushCommit {
        client_commit_id: format!("w13-{k}"),
        operations: vec![Operation::upsert(TABLE, row.id, None, row.payload)],
    });
    let body = encode(&request)?;
    let post = http::Request::post(format!("{}/sync", served.base))
        .header("content-type", sync_wire::SYNC_CONTENT_TYPE)
        .header("authorization", format!("Bearer {}", actor(0)))
        .body(Full::new(Bytes::from(body)))?;
    let response = http.request(post).await?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes();
    if status != http::StatusCode::OK {
        bail!(
            "W13 push: HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
    }
    Ok(())
}

fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// W13 at `sockets`: fanout latencies in ms and the RSS per idle socket
/// in KiB.
async fn fanout(
    prepared: Prepared,
    sockets: usize,
    pushes: usize,
) -> Result<(Vec<f64>, f64, Served)> {
    let served = serve(prepared).await?;
    let before = rss_kb()?;
    let mut connected = Vec::with_capacity(sockets);
    for i in 0..sockets {
        connected.push(connect(&served, i).await?.0);
    }
    let per_socket_kb = (rss_kb()?.saturating_sub(before)) as f64 / sockets as f64;
    if served.hub.open_connections() != sockets {
        bail!(
            "W13: {} of {sockets} sockets open",
            served.hub.open_connections()
        );
    }
    let (tx, mut arrivals) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for socket in connected {
        tasks.push(tokio::spawn(listen(socket, tx.clone())));
    }
    drop(tx);
    let http = http_client();
    let mut latencies = Vec::with_capacity(sockets * pushes);
    for k in 0..pushes {
        push(&http, &served, k).await?;
        let acked = Instant::now();
        for _ in 0..sockets {
            let at = tokio::time::timeout(Duration::from_secs(60), arrivals.recv())
                .await
                .context("W13: a delta did not arrive within 60 s")?
                .context("W13: a socket closed")?;
            latencies.push(at.saturating_duration_since(acked).as_secs_f64() * 1e3);
        }
    }
    for task in tasks {
        task.abort();
    }
    Ok((latencies, per_socket_kb, served))
}

/// W14 at `sockets`: seconds until every socket caught up, errors.
async fn storm(
    prepared: Prepared,
    sockets: usize,
    missed: usize,
) -> Result<(f64, usize, Arc<Served>)> {
    let served = Arc::new(serve(prepared).await?);
    let mut connected = Vec::with_capacity(sockets);
    for i in 0..sockets {
        connected.push(connect(&served, i).await?.0);
    }
    // Every socket drops at once; commits land while they are away.
    for mut socket in connected {
        let _ = socket.close(None).await;
    }
    let http = http_client();
    for k in 0..missed {
        push(&http, &served, 10_000 + k).await?;
    }
    let engine = served.engine.clone();
    let latest =
        tokio::task::spawn_blocking(move || engine.storage().get_max_commit_seq(PARTITION))
            .await??;
    let errors = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(sockets));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..sockets {
        let (served, errors, barrier) = (served.clone(), errors.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            if catch_up(&served, i, latest).await.is_err() {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    Ok((
        started.elapsed().as_secs_f64(),
        errors.load(Ordering::Relaxed),
        served,
    ))
}

/// Reconnects socket `i`, runs a socket round from its old cursor and acks
/// once it reaches `latest`.
async fn catch_up(served: &Served, i: usize, latest: i64) -> Result<()> {
    let (mut socket, requires_sync) = connect(served, i).await?;
    if !requires_sync {
        bail!("a socket behind was not told to sync");
    }
    let mut round = vec![1u8];
    round.extend(pull_bytes(&client(i), &served.epoch, 0)?);
    socket.send(Message::Binary(round.into())).await?;
    let mut response = Vec::new();
    while let Some(message) = socket.next().await {
        if let Message::Binary(bytes) = message? {
            if bytes.first() == Some(&1) {
                response.extend_from_slice(&bytes[1..]);
                if sync_ssp2::message_length(&response)?.is_some() {
                    break;
                }
            }
        }
    }
    let cursor = next_cursor(&response)?.context("no SUB_END in the catch-up round")?;
    if cursor < latest {
        bail!("caught up to {cursor}, not {latest}");
    }
    let ack = format!(r#"{{"type":"ack","cursor":{cursor}}}"#);
    socket.send(Message::Text(ack.into())).await?;
    let _ = socket.close(None).await;
    Ok(())
}

/// W13 and W14 of one dialect.
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let counts: &[usize] = if scale.quick {
        &[1, 10, 100]
    } else {
        &[1, 100, 1000]
    };
    let pushes = if scale.quick { 5 } else { 20 };
    let mut out = Vec::new();
    let mut per_socket = Vec::new();
    // Each server's storage outlives the runtime: a Postgres client may
    // not be dropped inside it.
    let mut keep = Vec::new();
    for &sockets in counts {
        let (mut latencies, kb, served) = {
            let prepared = prepare(env, sockets, 1)?;
            runtime.block_on(fanout(prepared, sockets, pushes))?
        };
        keep.push(Arc::new(served));
        latencies.sort_by(f64::total_cmp);
        let (p50, p99) = (percentile(&latencies, 50.0), percentile(&latencies, 99.0));
        progress(
            env.dialect,
            &format!("W13 sockets={sockets}"),
            &format!("p50 {p50:.2} ms p99 {p99:.2} ms, {kb:.0} KiB per idle socket"),
        );
        for (what, value) in [("p50", p50), ("p99", p99)] {
            out.push(Measure::from_samples(
                "W13",
                format!("fanout {what},sockets={sockets}"),
                env.dialect,
                "ms",
                Better::Lower,
                vec![Sample {
                    ours: value,
                    raw: None,
                }],
            ));
        }
        per_socket.push(kb);
    }
    if env.dialect == super::db::Dialect::Postgres {
        // Two processes: pushes to one server, sockets on another that
        // hears of the commits through the commit feed.
        let sockets = counts[counts.len() - 1];
        let (mut latencies, _, served) = {
            let prepared = prepare(env, sockets, 2)?;
            runtime.block_on(fanout(prepared, sockets, pushes))?
        };
        keep.push(Arc::new(served));
        latencies.sort_by(f64::total_cmp);
        let (p50, p99) = (percentile(&latencies, 50.0), percentile(&latencies, 99.0));
        progress(
            env.dialect,
            &format!("W13 two processes, sockets={sockets}"),
            &format!("p50 {p50:.2} ms p99 {p99:.2} ms"),
        );
        for (what, value) in [("p50", p50), ("p99", p99)] {
            out.push(Measure::from_samples(
                "W13",
                format!("fanout {what} across processes,sockets={sockets}"),
                env.dialect,
                "ms",
                Better::Lower,
                vec![Sample {
                    ours: value,
                    raw: None,
                }],
            ));
        }
    }
    if let Some(&kb) = per_socket.last() {
        out.push(Measure::from_samples(
            "W13",
            format!("RSS per idle socket,sockets={}", counts[counts.len() - 1]),
            env.dialect,
            "KiB",
            Better::Lower,
            vec![Sample {
                ours: kb,
                raw: None,
            }],
        ));
    }
    let sockets = counts[counts.len() - 1];
    let (seconds, errors, served) = {
        let prepared = prepare(env, sockets, 1)?;
        runtime.block_on(storm(prepared, sockets, 10))?
    };
    keep.push(served);
    let peak_mb = peak_rss_kb()? as f64 / 1024.0;
    progress(
        env.dialect,
        &format!("W14 sockets={sockets}"),
        &format!("caught up in {seconds:.2} s, {errors} errors, peak RSS {peak_mb:.0} MiB"),
    );
    if errors > 0 {
        bail!("W14: {errors} sockets failed to catch up");
    }
    for (what, unit, value, better) in [
        ("storm catch-up", "s", seconds, Better::Lower),
        ("storm errors", "count", errors as f64, Better::Lower),
        ("peak RSS (process)", "MiB", peak_mb, Better::Lower),
    ] {
        out.push(Measure::from_samples(
            "W14",
            format!("{what},sockets={sockets}"),
            env.dialect,
            unit,
            better,
            vec![Sample {
                ours: value,
                raw: None,
            }],
        ));
    }
    drop(runtime);
    drop(keep);
    Ok(out)
}
