//! The engine over a bench database, shared by W8 and W9: every actor may
//! use every list, the partition's epoch is acquired once (untimed), and
//! requests are built before the clock starts.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use sync_core::ServerStorage;
use sync_engine::{
    Engine, EngineConfig, PullHeader, RequestContext, ResolveError, ResponseItem, ScopeMap,
    Subscription, SyncRequest,
};

use super::fixture::{self, SCOPE_VAR, TABLE};
use super::w1_push::PARTITION;

/// Every list of the fixture.
fn allow_all(_: &str, _: &str, _: &str) -> Result<ScopeMap, ResolveError> {
    Ok(ScopeMap::from([(
        SCOPE_VAR.to_owned(),
        vec!["*".to_owned()],
    )]))
}

/// An engine with default hooks over an ensured bench storage.
pub fn engine(storage: Arc<dyn ServerStorage>) -> Result<Engine> {
    let schema = Arc::new(fixture::schema(false)?);
    Ok(Engine::new(
        storage,
        schema,
        EngineConfig::new(Arc::new(allow_all)),
    )?)
}

/// A request header for `client`.
pub fn request(client: &str, epoch: Option<&str>) -> SyncRequest {
    SyncRequest {
        wire_version: 2,
        header: sync_engine::ReqHeader {
            client_id: client.to_owned(),
            schema_version: fixture::VERSION,
            log_epoch: epoch.map(str::to_owned),
        },
        pushes: Vec::new(),
        pull: None,
        subscriptions: Vec::new(),
    }
}

/// A pull of every list of the todos table from `cursor` (resuming a
/// bootstrap with `state`), `page` changes or rows per section.
pub fn pull(
    client: &str,
    epoch: &str,
    cursor: i64,
    state: Option<String>,
    page: i32,
) -> SyncRequest {
    pull_pages(client, epoch, cursor, state, page, 1)
}

/// [`pull`] with up to `pages` bootstrap pages per round (the protocol's
/// default `maxSnapshotPages` is 4).
pub fn pull_pages(
    client: &str,
    epoch: &str,
    cursor: i64,
    state: Option<String>,
    page: i32,
    pages: i32,
) -> SyncRequest {
    let mut req = request(client, Some(epoch));
    req.pull = Some(PullHeader {
        limit_commits: page,
        limit_snapshot_rows: page,
        max_snapshot_pages: pages,
        accept: 1,
    });
    let mut sub = Subscription::new("all", TABLE, fixture::filter(&fixture::all_lists()), cursor);
    sub.bootstrap_state = state;
    req.subscriptions.push(sub);
    req
}

/// Runs a round and returns its items; a request-level error fails the bench.
pub fn round(engine: &Engine, actor: &str, request: &SyncRequest) -> Result<Vec<ResponseItem>> {
    round_in(engine, &RequestContext::new(PARTITION, actor), request)
}

/// [`round`] in any partition.
pub fn round_in(
    engine: &Engine,
    ctx: &RequestContext,
    request: &SyncRequest,
) -> Result<Vec<ResponseItem>> {
    let mut items = Vec::new();
    let outcome = engine
        .handle(ctx, request, &mut items)
        .context("engine round")?;
    if let Some(error) = outcome.error {
        bail!("engine round failed: {error}");
    }
    Ok(items)
}

/// First contact: the partition's log epoch.
pub fn acquire_epoch(engine: &Engine, actor: &str, client: &str) -> Result<String> {
    acquire_epoch_in(engine, &RequestContext::new(PARTITION, actor), client)
}

/// [`acquire_epoch`] in any partition.
pub fn acquire_epoch_in(engine: &Engine, ctx: &RequestContext, client: &str) -> Result<String> {
    let mut req = request(client, None);
    req.pull = Some(PullHeader::default());
    let items = round_in(engine, ctx, &req)?;
    match items.first() {
        Some(ResponseItem::Header(h)) => match &h.log_epoch {
            Some(epoch) => Ok(epoch.clone()),
            None => bail!("no log epoch in the first response"),
        },
        _ => bail!("the first response has no header"),
    }
}
