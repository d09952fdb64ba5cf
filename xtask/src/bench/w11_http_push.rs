//! W11 http-push: W8's single-row push rounds through the HTTP adapter
//! (`sync-http` over `sync-wire`, in process, over loopback keep-alive
//! connections) with 1 and 16 concurrent clients, against the same rounds
//! through `Engine::handle` directly (W8's engine side) — A B A B in the
//! same run, each on a fresh database. Commits/s; the ratio is
//! http / engine.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sync_engine::{OpKind, RequestContext, SyncRequest};
use sync_http::{HttpConfig, SyncState};
use sync_sqlite::Synchronous;
use sync_ssp2::{PushCommit, PushOp, PushOperation, ReqHeader, Request, WireVersion};
use sync_wire::{WireConfig, WireFailure, WireService};

use super::db::Env;
use super::engine;
use super::pushes::{Prepared, PushRun};
use super::report::{Better, Measure, Sample};
use super::w1_push::{self, PARTITION};
use super::w8_engine_push;
use super::{progress, Scale};

/// The SSP2 bytes of a push-only request.
pub(super) fn encode(request: &SyncRequest) -> Result<Vec<u8>> {
    let commits = request
        .pushes
        .iter()
        .map(|c| PushCommit {
            client_commit_id: c.client_commit_id.clone(),
            operations: c
                .operations
                .iter()
                .map(|o| PushOperation {
                    table: o.table.clone(),
                    row_id: o.row_id.clone(),
                    base_version: o.base_version,
                    op: match (o.op, &o.payload) {
                        (OpKind::Upsert, Some(payload)) => PushOp::Upsert {
                            payload: payload.clone(),
                        },
                        _ => PushOp::Delete,
                    },
                })
                .collect(),
        })
        .collect();
    let header = ReqHeader {
        client_id: request.header.client_id.clone(),
        schema_version: request.header.schema_version,
        log_epoch: request.header.log_epoch.clone(),
    };
    Ok(sync_ssp2::encode_request(&Request::from_parts(
        WireVersion::V2,
        header,
        commits,
        None,
    ))?)
}

/// `Authorization: Bearer <actor>` in the bench partition.
pub(super) fn authenticate(parts: &http::request::Parts) -> Result<RequestContext, WireFailure> {
    let actor = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(WireFailure::auth_required)?;
    Ok(RequestContext::new(PARTITION, actor))
}

fn http_round(env: &Env, commits: &Prepared, clients: usize) -> Result<PushRun> {
    let db = env.fresh(Synchronous::Normal)?;
    let engine = Arc::new(engine::engine(db.storage(false)?)?);
    let actor = commits
        .bench
        .first()
        .map_or("bench-user", |c| c.actor_id.as_str())
        .to_owned();
    let epoch = engine::acquire_epoch(&engine, &actor, "w11-setup")?;
    let bodies: Vec<(String, Bytes)> = w8_engine_push::requests(&commits.bench, &epoch)
        .iter()
        .zip(&commits.bench)
        .map(|(r, c)| Ok((c.actor_id.clone(), Bytes::from(encode(r)?))))
        .collect::<Result<_>>()?;
    let rows = commits.bench.iter().map(|c| c.rows.len()).sum();
    let service = Arc::new(WireService::new(engine, WireConfig::default()));
    let state = SyncState::new(
        service,
        Arc::new(authenticate),
        HttpConfig {
            max_concurrent_rounds: clients.max(8),
            ..HttpConfig::default()
        },
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // The clients run on a runtime of their own, as they would in a
    // process of their own: the server's worker threads serve the server.
    let clients_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(clients.min(2))
        .enable_all()
        .build()?;
    // The storage outlives the runtime: the server's tasks are dropped on
    // its worker threads, where a Postgres client may not be dropped.
    let router = sync_http::router(state.clone());
    let (server, url) = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/sync", listener.local_addr()?);
        // As `syncstore serve` does: TCP_NODELAY on both ends.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let server = tokio::spawn(async move { axum::serve(listener, router).await });
        Ok::<_, anyhow::Error>((server, url))
    })?;
    let result = clients_runtime.block_on(async move {
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new()).build::<_, Full<Bytes>>(connector);
        let bodies = Arc::new(bodies);
        let start = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..clients {
            let (client, bodies, url) = (client.clone(), bodies.clone(), url.clone());
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                for (actor, body) in bodies.iter().skip(c).step_by(clients) {
                    let t = Instant::now();
                    let request = http::Request::post(&url)
                        .header("content-type", sync_wire::SYNC_CONTENT_TYPE)
                        .header("authorization", format!("Bearer {actor}"))
                        .body(Full::new(body.clone()))?;
                    let response = client.request(request).await?;
                    let status = response.status();
                    let bytes = response.into_body().collect().await?.to_bytes();
                    if status != http::StatusCode::OK {
                        bail!("W11: HTTP {status}: {}", String::from_utf8_lossy(&bytes));
                    }
                    latencies.push(t.elapsed().as_secs_f64() * 1e6);
                }
                Ok::<_, anyhow::Error>(latencies)
            }));
        }
        let mut latencies_us = Vec::new();
        for task in tasks {
            latencies_us.extend(task.await.context("W11 client task")??);
        }
        let elapsed = start.elapsed();
        Ok::<_, anyhow::Error>(PushRun {
            elapsed,
            commits: latencies_us.len(),
            rows,
            latencies_us,
        })
    });
    server.abort();
    drop(clients_runtime);
    drop(runtime);
    drop(state);
    result
}

/// Interleaved rounds, 1 and 16 clients.
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let commits = Prepared::new(w1_push::commits(scale.w1_commits, "w11")?);
    let mut out = Vec::new();
    for clients in [1, 16] {
        let mut rate = Vec::new();
        for round in 0..scale.rounds {
            let http = http_round(env, &commits, clients)?;
            let direct = w8_engine_push::engine_round(env, &commits)?;
            progress(
                env.dialect,
                &format!("W11 clients={clients} round {}/{}", round + 1, scale.rounds),
                &format!(
                    "http {:.0} engine {:.0} commits/s",
                    http.commits_per_s(),
                    direct.commits_per_s()
                ),
            );
            rate.push(Sample {
                ours: http.commits_per_s(),
                raw: Some(direct.commits_per_s()),
            });
        }
        out.push(Measure::from_samples(
            "W11",
            format!("http/engine,clients={clients}"),
            env.dialect,
            "commits/s",
            Better::Higher,
            rate,
        ));
    }
    Ok(out)
}
