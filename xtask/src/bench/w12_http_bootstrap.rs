//! W12 http-bootstrap: W3's all-lists bootstrap (the fixture's 70 000 rows,
//! pages of 500, four pages a round as the reference clients ask) through
//! `sync-http` in a server process of its own (`bench-serve`: the stack
//! of `syncstore serve`, segments kept by the storage) over loopback,
//! against the same bootstrap through `Engine::handle` in process (W9's
//! `pages=4`). Same database, A B A B; rows/s, the ratio is http / engine.
//!
//! Two deliveries: `inline` (the client accepts inline and referenced rows
//! segments, as the reference clients do; pages under 256 KiB go inline)
//! and `refs` (references only: every page is stored, referenced and then
//! downloaded with `GET /segments/{id}`). The HTTP side decodes every
//! response and segment, as a client must. The server's peak resident
//! memory (`VmHWM`) is reported as its own row.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use sync_ssp2::{
    Accept, PullHeader, ReqHeader, Request, ResponseFrame, ScopeMap, Subscription, WireVersion,
};

use super::db::{Db, Location};
use super::engine;
use super::fixture::{self, SCOPE_VAR, TABLE};
use super::report::{Better, Measure, Sample};
use super::w9_engine_pull::bootstrap_engine;
use super::{progress, repeat_for, Scale};

const ACTOR: &str = "bench-reader";
const CLIENT: &str = "w12-client";
const PAGES: i32 = 4;

/// A `bench-serve` child and its address.
struct Server {
    child: Child,
    stdout: BufReader<ChildStdout>,
    base: String,
}

impl Server {
    fn spawn(db: &Db) -> Result<Self> {
        let exe = std::env::current_exe().context("locating the xtask binary")?;
        let mut command = Command::new(exe);
        command
            .arg("bench-serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        match &db.location {
            Location::Sqlite(path) => {
                command.arg("--sqlite").arg(path);
            }
            Location::Postgres { url, schema } => {
                command.args(["--pg-url", url, "--schema", schema]);
            }
            Location::Mariadb { .. } => bail!("W12 is not built on MariaDB"),
        }
        let mut child = command.spawn().context("starting bench-serve")?;
        let mut stdout = BufReader::new(child.stdout.take().context("bench-serve stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let Some(base) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            bail!("bench-serve did not start: {line:?}");
        };
        Ok(Self {
            base: base.to_owned(),
            child,
            stdout,
        })
    }

    /// Closes the server's standard input and returns its peak RSS in MiB.
    fn finish(mut self) -> Result<f64> {
        drop(self.child.stdin.take());
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let status = self.child.wait()?;
        if !status.success() {
            bail!("bench-serve failed ({status})");
        }
        let value: Value = serde_json::from_str(line.trim())
            .with_context(|| format!("bench-serve printed {line:?}"))?;
        let peak = value
            .get("peak_kb")
            .and_then(Value::as_f64)
            .context("bench-serve: no peak_kb")?;
        Ok(peak / 1024.0)
    }
}

/// The requested scopes: every list.
fn scopes() -> ScopeMap {
    let mut map = ScopeMap::new();
    map.insert(SCOPE_VAR, fixture::all_lists());
    map
}

fn request(
    epoch: &str,
    state: Option<sync_ssp2::RawJson>,
    page: i32,
    accept: u8,
) -> Result<Vec<u8>> {
    let request = Request::pull_only(
        WireVersion::V2,
        ReqHeader {
            client_id: CLIENT.to_owned(),
            schema_version: fixture::VERSION,
            log_epoch: Some(epoch.to_owned()),
        },
        PullHeader {
            limit_commits: page,
            limit_snapshot_rows: page,
            max_snapshot_pages: PAGES,
            accept: Accept::from_bits(accept).context("accept bits")?,
        },
        vec![Subscription {
            id: "all".to_owned(),
            table: TABLE.to_owned(),
            scopes: scopes(),
            params: None,
            cursor: -1,
            bootstrap_state: state,
        }],
    );
    Ok(sync_ssp2::encode_request(&request)?)
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

async fn fetch(client: &HttpClient, request: http::Request<Full<Bytes>>) -> Result<Bytes> {
    let response = client.request(request).await?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes();
    if status != http::StatusCode::OK {
        bail!("W12: HTTP {status}: {}", String::from_utf8_lossy(&bytes));
    }
    Ok(bytes)
}

fn segment_rows(segment: &sync_ssp2::RowsSegment) -> u64 {
    segment.blocks.iter().map(|b| b.len() as u64).sum()
}

/// Bootstrap rounds over HTTP until the bootstrap state is gone; the rows
/// read (every segment decoded).
async fn bootstrap_http(
    client: &HttpClient,
    base: &str,
    epoch: &str,
    page: i32,
    accept: u8,
) -> Result<u64> {
    let scopes_header =
        serde_json::to_string(&serde_json::json!({ SCOPE_VAR: fixture::all_lists() }))?;
    let mut rows = 0;
    let mut state = None;
    loop {
        let body = request(epoch, state.take(), page, accept)?;
        let post = http::Request::post(format!("{base}/sync"))
            .header("content-type", sync_wire::SYNC_CONTENT_TYPE)
            .header("authorization", format!("Bearer {ACTOR}"))
            .body(Full::new(Bytes::from(body)))?;
        let response = sync_ssp2::decode_response(&fetch(client, post).await?)?;
        let mut ended = false;
        for frame in response.frames {
            match frame {
                // Decoded (and checked) whole by `decode_response` already.
                ResponseFrame::SegmentInline(inline) => rows += inline.row_count() as u64,
                ResponseFrame::SegmentRef(reference) => {
                    let get =
                        http::Request::get(format!("{base}/segments/{}", reference.segment_id))
                            .header("authorization", format!("Bearer {ACTOR}"))
                            .header("x-syncular-scopes", &scopes_header)
                            .body(Full::new(Bytes::new()))?;
                    let bytes = fetch(client, get).await?;
                    rows += segment_rows(&sync_ssp2::decode_segment(&bytes)?);
                }
                ResponseFrame::SubEnd(end) => {
                    state = end.bootstrap_state;
                    ended = true;
                }
                ResponseFrame::Error(error) => bail!("W12: error frame {error:?}"),
                _ => {}
            }
        }
        if !ended {
            bail!("W12: a bootstrap round without SUB_END");
        }
        if state.is_none() {
            return Ok(rows);
        }
    }
}

fn rate(count: u64, runs: u32, elapsed: Duration) -> f64 {
    f64::from(runs) * count as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// Interleaved rounds on the W3/W4 fixture.
pub fn run(db: &Db, scale: &Scale) -> Result<Vec<Measure>> {
    let engine = engine::engine(db.storage(false)?)?;
    let epoch = engine::acquire_epoch(&engine, ACTOR, CLIENT)?;
    let page = i32::try_from(scale.page)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: HttpClient = Client::builder(TokioExecutor::new()).build(connector);
    let deliveries = [
        ("inline", Accept::INLINE_ROWS | Accept::EXTERNAL_ROWS),
        ("refs", Accept::EXTERNAL_ROWS),
    ];
    let mut samples = vec![Vec::new(); deliveries.len()];
    let mut peak_mb: f64 = 0.0;
    for round in 0..scale.rounds {
        let server = Server::spawn(db)?;
        let (direct, runs, elapsed) = repeat_for(scale.min_read, || {
            bootstrap_engine(&engine, &epoch, page, PAGES)
        })?;
        let engine_rate = rate(direct.rows, runs, elapsed);
        let mut line = format!("engine {engine_rate:.0}");
        for (i, (name, accept)) in deliveries.iter().enumerate() {
            let (rows, runs, elapsed) = repeat_for(scale.min_read, || {
                runtime.block_on(bootstrap_http(&client, &server.base, &epoch, page, *accept))
            })?;
            if rows != direct.rows {
                bail!(
                    "W12 {name}: {rows} rows over HTTP, {} through the engine",
                    direct.rows
                );
            }
            let http_rate = rate(rows, runs, elapsed);
            line.push_str(&format!(" {name} {http_rate:.0}"));
            samples[i].push(Sample {
                ours: http_rate,
                raw: Some(engine_rate),
            });
        }
        let peak = server.finish()?;
        peak_mb = peak_mb.max(peak);
        progress(
            db.dialect,
            &format!("W12 round {}/{}", round + 1, scale.rounds),
            &format!("{line} rows/s; server peak RSS {peak:.0} MiB"),
        );
    }
    let mut measures: Vec<Measure> = deliveries
        .iter()
        .zip(samples)
        .map(|((name, _), samples)| {
            Measure::from_samples(
                "W12",
                format!("http/engine,{name}"),
                db.dialect,
                "rows/s",
                Better::Higher,
                samples,
            )
        })
        .collect();
    measures.push(Measure::from_samples(
        "W12",
        "server peak RSS",
        db.dialect,
        "MiB",
        Better::Lower,
        vec![Sample {
            ours: peak_mb,
            raw: None,
        }],
    ));
    Ok(measures)
}
