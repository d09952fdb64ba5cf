//! One sync round (`engine.md` §3): the entry sequence E1–E19.

pub(crate) mod abort;
pub(crate) mod emitter;
pub(crate) mod entry;
pub(crate) mod invariants;
pub(crate) mod request_limits;

use sync_core::{
    ClientRecord, LogBounds, PartitionRegistryEntry, Result as StorageResult, ServeContext,
    ServeGate, StoredPushResult,
};

use crate::context::RequestContext;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::outcome::RoundOutcome;
use crate::scopes::Resolved;
use crate::sink::Sink;
use crate::wire::request::SyncRequest;
use crate::wire::response::{RespHeader, ResponseItem};

use abort::Abort;
use emitter::Emitter;

/// What the entry read for the pull of a round without pushes: the gate
/// (already checked at E3) serves as L1's, the log bounds as L2's.
pub(crate) struct PullStart {
    pub(crate) gate: ServeGate,
    pub(crate) log_bounds: Option<LogBounds>,
}

/// State of one round after the entry checks.
pub(crate) struct Round<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) ctx: &'a RequestContext,
    pub(crate) req: &'a SyncRequest,
    pub(crate) reg: PartitionRegistryEntry,
    pub(crate) record: Option<ClientRecord>,
    /// P1 of each pushed commit, read at entry: `(client_commit_id,
    /// stored result)`, taken by the first commit with that id.
    pub(crate) prefetched: Vec<(String, StorageResult<Option<StoredPushResult>>)>,
    /// Set for a round without pushes: the entry's reads that L1/L2 reuse.
    pub(crate) pull_start: Option<PullStart>,
    pub(crate) resolved: Resolved,
    pub(crate) outcome: RoundOutcome,
    /// Set while the round's last push runs in a round without a pull: its
    /// transaction may carry the §5.8 client record.
    pub(crate) stage_record: bool,
    /// The last push's transaction committed the client record.
    pub(crate) record_staged: bool,
    /// A stored result of another actor was asked for under this round's
    /// client id (`engine.md` §8 item 7): the round writes no client
    /// record, so the client id is not bound to this actor.
    pub(crate) foreign_replay: bool,
}

impl Round<'_> {
    /// The running schema version.
    pub(crate) fn running(&self) -> i32 {
        self.engine.schema.version
    }

    /// Takes the P1 read made at entry for this round's client and
    /// `client_commit_id`; `None` when none is left (the caller reads).
    pub(crate) fn take_prefetched(
        &mut self,
        client_id: &str,
        client_commit_id: &str,
    ) -> Option<StorageResult<Option<StoredPushResult>>> {
        if client_id != self.req.header.client_id {
            return None;
        }
        let index = self
            .prefetched
            .iter()
            .position(|(id, _)| id == client_commit_id)?;
        Some(self.prefetched.remove(index).1)
    }

    /// The serve context of every gate of this round: the configured
    /// declarations and the epoch read at entry.
    pub(crate) fn serve_context(&self) -> ServeContext {
        serve_context(self.engine, &self.reg)
    }
}

pub(crate) fn serve_context(engine: &Engine, reg: &PartitionRegistryEntry) -> ServeContext {
    ServeContext {
        declarations: engine.config.declarations.clone(),
        expected_log_epoch: Some(reg.log_epoch.clone()),
    }
}

/// Runs the round and maps its stop reason onto the error surfaces
/// (`engine.md` §1.6).
pub(crate) fn run(
    engine: &Engine,
    ctx: &RequestContext,
    req: &SyncRequest,
    sink: &mut dyn Sink,
) -> Result<RoundOutcome, EngineError> {
    let mut out = Emitter::new(sink);
    let mut outcome = RoundOutcome::default();
    match run_steps(engine, ctx, req, &mut out, &mut outcome) {
        Ok(()) => Ok(outcome),
        Err(Abort::Request(error)) if out.has_emitted() => {
            out.emit(ResponseItem::Error(error.clone()))?;
            out.emit(ResponseItem::End)?;
            outcome.error = Some(error);
            Ok(outcome)
        }
        Err(abort) => Err(abort.into_engine_error()),
    }
}

fn run_steps(
    engine: &Engine,
    ctx: &RequestContext,
    req: &SyncRequest,
    out: &mut Emitter<'_>,
    outcome: &mut RoundOutcome,
) -> Result<(), Abort> {
    let Some(mut round) = entry::enter(engine, ctx, req, out)? else {
        return Ok(());
    };
    out.emit(ResponseItem::Header(RespHeader {
        required_schema_version: None,
        latest_schema_version: Some(round.running()),
        log_epoch: (req.wire_version >= 2).then(|| round.reg.log_epoch.clone()),
        reset_required: false,
    }))?;
    let result = run_body(&mut round, out);
    *outcome = std::mem::take(&mut round.outcome);
    result
}

/// E16–E19: pushes, pull, client record, `End`.
fn run_body(round: &mut Round<'_>, out: &mut Emitter<'_>) -> Result<(), Abort> {
    let pushes = round.req.pushes.len();
    for (i, commit) in round.req.pushes.iter().enumerate() {
        round.stage_record = i + 1 == pushes && round.req.pull.is_none();
        let result = crate::push::push_commit(round, commit)?;
        out.emit(ResponseItem::PushResult(result))?;
    }
    let cursors = match &round.req.pull {
        Some(pull) => Some(crate::pull::run_pull(round, pull, out)?),
        None => None,
    };
    crate::pull::client_record::write(round, cursors.as_deref())?;
    out.emit(ResponseItem::End)?;
    Ok(())
}
