//! `serve`: the sync protocol (SSP2) over HTTP, the operator's and the
//! tester's door for real clients.
//!
//! `POST /sync` and `GET /segments/{id}` at the root of `--listen`;
//! callers are identified by `Authorization: Bearer <token>` from the
//! `--tokens` file, whose `allow` is each actor's allowed scopes. The
//! database must already be at the schema file's version. Prints one line
//! `listening on http://HOST:PORT` once connections are accepted; SIGTERM
//! or SIGINT stops accepting, lets the rounds in flight finish, and exits 0.
//!
//! `--test-control` adds the test control routes under `/test/instances`
//! ([`control`]); `--schema` and `--tokens` are then optional (without
//! them the database itself is not served). It is refused unless the bound
//! address is a loopback address.

mod control;
mod tokens;

use std::io::Write;
use std::sync::Arc;

use http::request::Parts;
use sync_engine::RequestContext;
use sync_http::{HttpConfig, SyncState};
use sync_wire::realtime::{Following, RealtimeConfig, RealtimeHub};
use sync_wire::{StorageSegmentStore, WireConfig, WireFailure, WireService};

use crate::cli::ServeArgs;
use crate::error::{CliCode, CliError};

pub use tokens::Tokens;

/// `Authorization: Bearer <token>` looked up in the tokens file.
struct BearerTokens(Arc<Tokens>);

impl sync_http::Authenticator for BearerTokens {
    fn authenticate(&self, parts: &Parts) -> Result<RequestContext, WireFailure> {
        let token = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let grant = token
            .and_then(|t| self.0.grant(t))
            .ok_or_else(WireFailure::auth_required)?;
        Ok(RequestContext::new(&grant.partition, &grant.actor))
    }
}

fn io_error(what: &str, error: &std::io::Error) -> CliError {
    CliError::new(CliCode::Io)
        .detail("path", what)
        .detail("reason", error.kind().to_string())
}

/// Runs `serve` until a stop signal; `Ok` after a graceful stop.
pub fn run(db: Option<&str>, args: &ServeArgs) -> Result<(), CliError> {
    let (state, following) = match (&args.schema, &args.tokens) {
        (Some(schema), Some(tokens)) => {
            let (state, following) = served_state(db, args, schema, tokens)?;
            (Some(state), following)
        }
        _ => (None, None),
    };
    let control = if args.test_control {
        Some(Arc::new(control::Control::new(
            db,
            usize::from(args.max_instances),
        )?))
    } else {
        None
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| io_error("runtime", &e))?;
    // The storages are dropped outside the runtime: a dialect's synchronous
    // client may own a runtime of its own, which cannot be dropped from
    // inside another.
    let result = runtime.block_on(serve(args, state.clone(), control.clone()));
    drop(runtime);
    drop(following);
    drop(state);
    if let Some(control) = control {
        control.close_all();
    }
    result
}

/// The served database's routes, and the thread following the commits of
/// other processes when the storage announces them (Postgres).
fn served_state(
    db: Option<&str>,
    args: &ServeArgs,
    schema: &std::path::Path,
    tokens: &std::path::Path,
) -> Result<(SyncState, Option<Following>), CliError> {
    let tokens = Arc::new(Tokens::load(tokens)?);
    let (engine, _, storage) = crate::commands::sync::open_engine(
        db,
        schema,
        &args.declare,
        tokens.clone() as Arc<dyn sync_engine::ScopeResolver>,
    )?;
    let feed = storage.commit_feed();
    let wire = WireConfig {
        segment_store: StorageSegmentStore::of(storage)
            .map(|s| Arc::new(s) as Arc<dyn sync_core::segments::SegmentStore>),
        ..WireConfig::default()
    };
    let service = Arc::new(WireService::new(Arc::new(engine), wire));
    let http_config = HttpConfig {
        max_concurrent_rounds: usize::from(args.max_rounds),
        ..HttpConfig::default()
    };
    let realtime = RealtimeConfig {
        max_connections: args.realtime_max_sockets as usize,
        max_connections_per_actor: args.realtime_max_sockets_per_actor as usize,
        max_unacked_deltas: args.realtime_max_unacked,
        heartbeat_interval: std::time::Duration::from_secs(args.realtime_heartbeat_secs),
        ..RealtimeConfig::default()
    };
    let hub = Arc::new(RealtimeHub::new(service.clone(), realtime));
    let following = match feed {
        Some(feed) => Some(
            hub.follow(feed)
                .map_err(|e| io_error("realtime-commit-feed", &e))?,
        ),
        None => None,
    };
    let state =
        SyncState::new(service, Arc::new(BearerTokens(tokens)), http_config).with_realtime(hub);
    Ok((state, following))
}

async fn serve(
    args: &ServeArgs,
    state: Option<SyncState>,
    control: Option<Arc<control::Control>>,
) -> Result<(), CliError> {
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| io_error(&args.listen, &e))?;
    let address = listener
        .local_addr()
        .map_err(|e| io_error(&args.listen, &e))?;
    if control.is_some() {
        control::require_loopback(address)?;
    }
    let mut router = axum::Router::new();
    let mut pruner = None;
    let hub = state.as_ref().and_then(|s| s.realtime().cloned());
    if let Some(state) = state {
        pruner = Some(tokio::spawn(prune_segments(state.service().clone())));
        router = router.merge(sync_http::router(state));
    }
    if let Some(control) = control {
        router = router.merge(control::router(control));
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{address}")
        .and_then(|()| stdout.flush())
        .map_err(|e| io_error("-", &e))?;
    drop(stdout);
    tracing::info!(%address, "serving");
    // Responses go out as they are written: without TCP_NODELAY a small
    // response waits for the client's delayed acknowledgement.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY not set");
        }
    });
    // On a stop signal the realtime sockets are closed too (an upgraded
    // connection is not one the graceful shutdown waits for): their clients
    // reconnect, to this server's successor, and catch up.
    let stopping = async move {
        stop_signal().await;
        if let Some(hub) = hub {
            hub.close_all();
        }
    };
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(stopping)
        .await
        .map_err(|e| io_error(&args.listen, &e));
    if let Some(pruner) = pruner {
        pruner.abort();
    }
    served
}

/// How often expired bootstrap segments are deleted, and how many at most
/// in one call.
const SEGMENT_PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(600);
const SEGMENT_PRUNE_LIMIT: u32 = 1_000;

/// Deletes expired segments every ten minutes for as long as it runs, on
/// the blocking pool (the store is synchronous); a failure is logged and
/// retried at the next tick.
async fn prune_segments(service: Arc<WireService>) {
    let mut ticks = tokio::time::interval(SEGMENT_PRUNE_EVERY);
    loop {
        ticks.tick().await;
        let service = service.clone();
        match tokio::task::spawn_blocking(move || {
            service.prune_expired_segments(SEGMENT_PRUNE_LIMIT)
        })
        .await
        {
            Ok(Ok(0)) => {}
            Ok(Ok(deleted)) => tracing::info!(deleted, "expired segments deleted"),
            Ok(Err(error)) => tracing::warn!(%error, "deleting expired segments failed"),
            Err(error) => tracing::warn!(%error, "the segment prune task failed"),
        }
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn stop_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = interrupt => {}
            () = terminate => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
    tracing::info!("stopping: finishing the rounds in flight");
}
