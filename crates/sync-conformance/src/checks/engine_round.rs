//! The engine checks' environment (storage with `EFIX` ensured, the hook
//! doubles, an engine built from them), request builders, and one round
//! run into a collected list of response items with accessors.

use std::sync::Arc;

use sync_core::{
    CompiledSchema, ManualClock, PushOperationResult, RejectionDetails, ScopeFilter, ServerStorage,
};
use sync_engine::{
    BootstrapPage, CommitItem, Engine, EngineConfig, EngineError, Operation, PullHeader,
    PushCommit, PushResult, PushResultStatus, ReqHeader, RequestContext, RespHeader, ResponseItem,
    RoundOutcome, SubEnd, SubStart, Subscription, SyncRequest, WireError,
};

use super::engine_doubles::{Blobs, FixtureResolver, ResolverMode, SeqIds, Union};
use super::engine_fixture::{efix, P};
use crate::check::{CheckResult, Failure};
use crate::context::{Ctx, NOW};

/// The log epoch partition `P` is registered with before any round.
pub(crate) const EPOCH: &str = "epoch-P";

/// Storage, schema and hook doubles of one engine check.
pub(crate) struct Env {
    /// Storage with `EFIX` v1 ensured; `P` registered with [`EPOCH`].
    pub storage: Arc<dyn ServerStorage>,
    /// `EFIX` v1.
    pub schema: Arc<CompiledSchema>,
    /// The fixture resolver.
    pub resolver: Arc<FixtureResolver>,
    /// Sequential ids.
    pub ids: Arc<SeqIds>,
    /// The blob store holding `b1`.
    pub blobs: Arc<Blobs>,
    /// The `union` merger.
    pub union: Arc<Union>,
    /// The check's virtual clock (fixed at `NOW`).
    pub clock: Arc<ManualClock>,
}

/// A fresh environment.
pub(crate) fn env(ctx: &mut Ctx<'_>) -> CheckResult<Env> {
    let schema = efix()?;
    let storage = ctx.ensured(&schema)?;
    storage.touch_partition(P, NOW, EPOCH)?;
    Ok(Env {
        storage,
        schema: Arc::new(schema),
        resolver: Arc::new(FixtureResolver::new(ResolverMode::Fixture)),
        ids: Arc::new(SeqIds::default()),
        blobs: Arc::new(Blobs::default()),
        union: Arc::new(Union::default()),
        clock: ctx.clock.clone(),
    })
}

impl Env {
    /// The default configuration: every double wired in, no validators.
    pub(crate) fn config(&self) -> EngineConfig {
        let mut config = EngineConfig::new(self.resolver.clone());
        config.mergers.register("union", self.union.clone());
        config.blobs = Some(self.blobs.clone());
        config.clock = self.clock.clone();
        config.ids = self.ids.clone();
        config
    }

    /// An engine with the default configuration.
    pub(crate) fn engine(&self) -> CheckResult<Engine> {
        self.engine_with(|_| {})
    }

    /// An engine with the default configuration changed by `edit`.
    pub(crate) fn engine_with(&self, edit: impl FnOnce(&mut EngineConfig)) -> CheckResult<Engine> {
        let mut config = self.config();
        edit(&mut config);
        build(self.storage.clone(), self.schema.clone(), config)
    }

    /// `max_commit_seq` of `P`.
    pub(crate) fn max_seq(&self) -> CheckResult<i64> {
        Ok(self.storage.get_max_commit_seq(P)?)
    }

    /// A request of `client` pushing one commit `ccid` that upserts
    /// `tasks/id` in `project` without `baseVersion`.
    pub(crate) fn insert_req(
        &self,
        client: &str,
        ccid: &str,
        id: &str,
        project: &str,
    ) -> CheckResult<SyncRequest> {
        Ok(push_req(
            client,
            vec![commit(
                ccid,
                vec![up("tasks", id, None, self.task(id, project)?)],
            )],
        ))
    }

    /// A `tasks` payload.
    pub(crate) fn task(&self, id: &str, project: &str) -> CheckResult<Vec<u8>> {
        super::engine_fixture::task_payload(&self.schema, id, project, &format!("title {id}"))
    }
}

/// `Engine::new`, failing the check on a configuration error.
pub(crate) fn build(
    storage: Arc<dyn ServerStorage>,
    schema: Arc<CompiledSchema>,
    config: EngineConfig,
) -> CheckResult<Engine> {
    Engine::new(storage, schema, config)
        .map_err(|e| Failure::new(format!("Engine::new failed: {e:?}")))
}

/// A wire-2 request of `client` at schema v1 with `epoch`, no frames.
pub(crate) fn request(client: &str, epoch: Option<&str>) -> SyncRequest {
    SyncRequest {
        wire_version: 2,
        header: ReqHeader {
            client_id: client.to_owned(),
            schema_version: 1,
            log_epoch: epoch.map(str::to_owned),
        },
        pushes: Vec::new(),
        pull: None,
        subscriptions: Vec::new(),
    }
}

/// A push request of `client` (epoch [`EPOCH`]).
pub(crate) fn push_req(client: &str, commits: Vec<PushCommit>) -> SyncRequest {
    let mut req = request(client, Some(EPOCH));
    req.pushes = commits;
    req
}

/// A pull request of `client` (epoch [`EPOCH`], default limits).
pub(crate) fn pull_req(client: &str, subs: Vec<Subscription>) -> SyncRequest {
    let mut req = request(client, Some(EPOCH));
    req.pull = Some(PullHeader::default());
    req.subscriptions = subs;
    req
}

/// One push commit.
pub(crate) fn commit(ccid: &str, operations: Vec<Operation>) -> PushCommit {
    PushCommit {
        client_commit_id: ccid.to_owned(),
        operations,
    }
}

/// An upsert of `payload` into `table`.
pub(crate) fn up(table: &str, row_id: &str, base: Option<i64>, payload: Vec<u8>) -> Operation {
    Operation::upsert(table, row_id, base, payload)
}

/// A delete.
pub(crate) fn del(table: &str, row_id: &str) -> Operation {
    Operation::delete(table, row_id)
}

/// A scope filter from pairs.
pub(crate) fn scopes(pairs: &[(&str, &[&str])]) -> ScopeFilter {
    pairs
        .iter()
        .map(|(k, vs)| {
            (
                (*k).to_owned(),
                vs.iter().map(|v| (*v).to_owned()).collect(),
            )
        })
        .collect()
}

/// A subscription.
pub(crate) fn sub(id: &str, table: &str, pairs: &[(&str, &[&str])], cursor: i64) -> Subscription {
    Subscription::new(id, table, scopes(pairs), cursor)
}

/// A subscription to `tasks` in `p1`.
pub(crate) fn sub_p1(id: &str, cursor: i64) -> Subscription {
    sub(id, "tasks", &[("project_id", &["p1"])], cursor)
}

/// One round's outcome and items.
#[derive(Debug)]
pub(crate) struct Round {
    /// What `handle` returned.
    pub result: Result<RoundOutcome, EngineError>,
    /// Every item handed to the sink.
    pub items: Vec<ResponseItem>,
}

/// Runs one round of `actor` in `P`.
pub(crate) fn run(engine: &Engine, actor: &str, req: SyncRequest) -> Round {
    run_in(engine, P, actor, req)
}

/// Runs one round of `actor` in `partition`.
pub(crate) fn run_in(engine: &Engine, partition: &str, actor: &str, req: SyncRequest) -> Round {
    let mut items: Vec<ResponseItem> = Vec::new();
    let result = engine.handle(&RequestContext::new(partition, actor), &req, &mut items);
    Round { result, items }
}

/// Runs every job on its own thread at once and collects the results in
/// job order (a panicking job fails the check).
pub(crate) fn concurrently<T: Send>(
    jobs: Vec<Box<dyn FnOnce() -> CheckResult<T> + Send + '_>>,
) -> CheckResult<Vec<T>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = jobs.into_iter().map(|job| s.spawn(job)).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Failure::new("a concurrent job panicked")))
            })
            .collect()
    })
}

/// A bootstrap or incremental section as emitted.
#[derive(Debug)]
pub(crate) struct Section<'a> {
    /// Its `SubStart`.
    pub start: &'a SubStart,
    /// Its `Commit`s.
    pub commits: Vec<&'a CommitItem>,
    /// Its bootstrap pages.
    pub pages: Vec<&'a BootstrapPage>,
    /// Its `SubEnd`, if emitted.
    pub end: Option<&'a SubEnd>,
}

impl Section<'_> {
    /// The `SubEnd`, failing the check when missing.
    pub(crate) fn end(&self) -> CheckResult<&SubEnd> {
        self.end
            .ok_or_else(|| Failure::new(format!("section {} has no SubEnd", self.start.id)))
    }

    /// `(commit_seq, row ids)` of every delivered commit.
    pub(crate) fn commit_rows(&self) -> Vec<(i64, Vec<String>)> {
        self.commits
            .iter()
            .map(|c| {
                (
                    c.commit_seq,
                    c.changes.iter().map(|ch| ch.row_id.clone()).collect(),
                )
            })
            .collect()
    }

    /// Seqs of every delivered commit.
    pub(crate) fn seqs(&self) -> Vec<i64> {
        self.commits.iter().map(|c| c.commit_seq).collect()
    }
}

impl Round {
    /// The round completed: `Ok`, no `Error` item, `End` last.
    pub(crate) fn ok(&self) -> CheckResult<&Self> {
        if let Err(e) = &self.result {
            return Err(Failure::new(format!("round failed: {e:?}")));
        }
        if let Some(e) = self.error_item() {
            return Err(Failure::new(format!("round emitted Error {e:?}")));
        }
        if self.items.last() != Some(&ResponseItem::End) {
            return Err(Failure::new(format!(
                "round did not end with End: {:?}",
                self.items
            )));
        }
        Ok(self)
    }

    fn error_item(&self) -> Option<&WireError> {
        self.items.iter().find_map(|i| match i {
            ResponseItem::Error(e) => Some(e),
            _ => None,
        })
    }

    /// The request-level error: `Err(Request)` or an `Error` item.
    pub(crate) fn request_error(&self) -> CheckResult<&WireError> {
        match &self.result {
            Err(EngineError::Request(e)) => {
                if self.items.is_empty() {
                    Ok(e)
                } else {
                    Err(Failure::new(format!(
                        "Err(Request) after items were emitted: {:?}",
                        self.items
                    )))
                }
            }
            Err(other) => Err(Failure::new(format!(
                "expected a request-level error, got {other:?}"
            ))),
            Ok(_) => self.error_item().ok_or_else(|| {
                Failure::new(format!(
                    "expected a request-level error, got items {:?}",
                    self.items
                ))
            }),
        }
    }

    /// Fails unless the round failed request-level with `code`.
    pub(crate) fn expect_error(&self, code: &str) -> CheckResult<&WireError> {
        let error = self.request_error()?;
        if error.code != code {
            return Err(Failure::new(format!(
                "expected request-level {code}, got {error:?}"
            )));
        }
        Ok(error)
    }

    /// Fails unless `handle` returned an internal error (no wire code).
    pub(crate) fn expect_internal(&self) -> CheckResult {
        match &self.result {
            Err(EngineError::Internal { .. }) => Ok(()),
            other => Err(Failure::new(format!(
                "expected an internal failure, got {other:?} with items {:?}",
                self.items
            ))),
        }
    }

    /// The `Header`.
    pub(crate) fn header(&self) -> CheckResult<&RespHeader> {
        match self.items.first() {
            Some(ResponseItem::Header(h)) => Ok(h),
            other => Err(Failure::new(format!(
                "expected a Header first, got {other:?} (result {:?})",
                self.result
            ))),
        }
    }

    /// Every `PushResult` in order.
    pub(crate) fn results(&self) -> Vec<&PushResult> {
        self.items
            .iter()
            .filter_map(|i| match i {
                ResponseItem::PushResult(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    /// The `i`-th `PushResult`.
    pub(crate) fn result(&self, i: usize) -> CheckResult<&PushResult> {
        self.results().get(i).copied().ok_or_else(|| {
            Failure::new(format!(
                "push result {i} missing; items {:?}, result {:?}",
                self.items, self.result
            ))
        })
    }

    /// The sections in order.
    pub(crate) fn sections(&self) -> Vec<Section<'_>> {
        let mut out: Vec<Section<'_>> = Vec::new();
        for item in &self.items {
            match item {
                ResponseItem::SubStart(start) => out.push(Section {
                    start,
                    commits: Vec::new(),
                    pages: Vec::new(),
                    end: None,
                }),
                ResponseItem::Commit(c) => {
                    if let Some(s) = out.last_mut() {
                        s.commits.push(c);
                    }
                }
                ResponseItem::BootstrapPage(p) => {
                    if let Some(s) = out.last_mut() {
                        s.pages.push(p);
                    }
                }
                ResponseItem::SubEnd(e) => {
                    if let Some(s) = out.last_mut() {
                        s.end = Some(e);
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The only section.
    pub(crate) fn section(&self) -> CheckResult<Section<'_>> {
        let mut sections = self.sections();
        if sections.len() != 1 {
            return Err(Failure::new(format!(
                "expected one section, got {}: {:?}",
                sections.len(),
                self.items
            )));
        }
        sections
            .pop()
            .ok_or_else(|| Failure::new("section missing"))
    }

    /// Frame names of the items, for shape assertions.
    pub(crate) fn frames(&self) -> Vec<&'static str> {
        self.items.iter().map(ResponseItem::frame_type).collect()
    }
}

/// Fails unless `r` is `status` with this `commit_seq` and one `applied`
/// record per operation.
pub(crate) fn expect_applied(
    r: &PushResult,
    status: PushResultStatus,
    ops: usize,
) -> CheckResult<i64> {
    let expected: Vec<PushOperationResult> = (0..ops)
        .map(|i| PushOperationResult::Applied {
            op_index: u32::try_from(i).unwrap_or(u32::MAX),
        })
        .collect();
    if r.status != status || r.results != expected {
        return Err(Failure::new(format!(
            "expected {} with {ops} applied records, got {r:?}",
            status.as_str()
        )));
    }
    r.commit_seq
        .ok_or_else(|| Failure::new(format!("{} result without commitSeq", status.as_str())))
}

/// The single record of a rejected result.
pub(crate) fn rejected_record(r: &PushResult) -> CheckResult<&PushOperationResult> {
    match (r.status, r.commit_seq, r.results.as_slice()) {
        (PushResultStatus::Rejected, None, [only]) => Ok(only),
        _ => Err(Failure::new(format!(
            "expected rejected with exactly one record and no commitSeq, got {r:?}"
        ))),
    }
}

/// Fails unless `r` is rejected with one error record `{op_index, code}`;
/// returns `(retryable, details)`.
pub(crate) fn expect_rejected(
    r: &PushResult,
    op_index: u32,
    code: &str,
) -> CheckResult<(bool, Option<RejectionDetails>)> {
    match rejected_record(r)? {
        PushOperationResult::Error {
            op_index: i,
            code: c,
            retryable,
            details,
            ..
        } if *i == op_index && c == code => Ok((*retryable, details.clone())),
        other => Err(Failure::new(format!(
            "expected error {{opIndex {op_index}, {code}}}, got {other:?}"
        ))),
    }
}

/// Fails unless `r` is rejected with one conflict record at `op_index`;
/// returns `(server_version, server_row)`.
pub(crate) fn expect_conflict(r: &PushResult, op_index: u32) -> CheckResult<(i64, Vec<u8>)> {
    match rejected_record(r)? {
        PushOperationResult::Conflict {
            op_index: i,
            code,
            server_version,
            server_row,
            ..
        } if *i == op_index && code == "sync.version_conflict" => {
            Ok((*server_version, server_row.clone()))
        }
        other => Err(Failure::new(format!(
            "expected conflict at opIndex {op_index}, got {other:?}"
        ))),
    }
}
