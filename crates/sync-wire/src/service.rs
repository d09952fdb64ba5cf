//! One engine behind the wire: a sync round from request bytes to
//! response bytes, and segment downloads.

use std::fmt;
use std::io::Write;
use std::sync::Arc;

use sync_core::segments::{MemoryLimits, MemorySegmentStore, SegmentStore};
use sync_engine::{Engine, EngineError, RequestContext, RoundOutcome, WireError};
use sync_ssp2::{Accept, WireVersion};

use crate::config::WireConfig;
use crate::download::{self, Download, DownloadRequest};
use crate::failure::WireFailure;
use crate::request::decode_sync_request;
use crate::round_error::round_failure;
use crate::segments::Delivery;
use crate::sink::FrameSink;

/// How a round that did not complete normally ended.
#[derive(Debug)]
pub enum RoundError {
    /// Refused before any byte was written: answer with this status and
    /// body instead of a response stream.
    Refused(WireFailure),
    /// The response had started and could not be finished (the writer
    /// failed: the client is gone or too slow); what was written is a
    /// truncated message. Work already committed stays committed.
    Aborted {
        /// Why, for logs.
        reason: String,
    },
}

impl fmt::Display for RoundError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoundError::Refused(failure) => write!(f, "round refused: {failure}"),
            RoundError::Aborted { reason } => write!(f, "response aborted: {reason}"),
        }
    }
}

impl std::error::Error for RoundError {}

/// The engine and the segment settings a transport serves: `Send + Sync`,
/// share it behind `Arc`.
pub struct WireService {
    engine: Arc<Engine>,
    config: WireConfig,
    store: Arc<dyn SegmentStore>,
}

impl fmt::Debug for WireService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireService")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl WireService {
    /// A service over `engine`; without a configured segment store,
    /// referenced segments are kept in a bounded memory store of this
    /// process ([`MemoryLimits::default`]).
    pub fn new(engine: Arc<Engine>, config: WireConfig) -> Self {
        let store = config.segment_store.clone().unwrap_or_else(|| {
            Arc::new(MemorySegmentStore::new(MemoryLimits::default())) as Arc<dyn SegmentStore>
        });
        Self {
            engine,
            config,
            store,
        }
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The segment store referenced segments go to.
    pub fn segment_store(&self) -> &Arc<dyn SegmentStore> {
        &self.store
    }

    /// The configuration.
    pub fn config(&self) -> &WireConfig {
        &self.config
    }

    /// Runs one sync round for `ctx` on the SSP2 request `body`, writing
    /// the response into `out` frame by frame as the engine produces it.
    ///
    /// `Ok` with the round's outcome (its applied commits, for realtime
    /// fanout) when the response was written whole; a failure after the
    /// first item is written in band (`ERROR`, `END`) and also returns `Ok`
    /// (with an empty outcome). `Err(Refused)` when nothing was written (a
    /// decode error, a request-level error of the round, an internal
    /// failure before the first item); when `out` itself fails,
    /// `Err(Aborted)`.
    pub fn sync<W: Write>(
        &self,
        ctx: &RequestContext,
        body: &[u8],
        out: W,
    ) -> Result<RoundOutcome, RoundError> {
        let request = decode_sync_request(body).map_err(RoundError::Refused)?;
        self.run(ctx, &request, out)
    }

    /// One decoded round, as [`WireService::sync`] runs it.
    pub(crate) fn run<W: Write>(
        &self,
        ctx: &RequestContext,
        request: &sync_engine::SyncRequest,
        out: W,
    ) -> Result<RoundOutcome, RoundError> {
        // The response is written in the request's version (decoding
        // admitted only served ones).
        let version = WireVersion::from_number(request.wire_version).unwrap_or(WireVersion::V2);
        let accept = request
            .pull
            .and_then(|p| Accept::from_bits(p.accept))
            .unwrap_or_default();
        let delivery = Delivery {
            schema: self.engine.schema(),
            store: &self.store,
            partition: &ctx.partition,
            accept,
            inline_limit: self.config.inline_limit,
            ttl_ms: self.config.segment_ttl_ms,
            now_ms: self.config.clock.now_ms(),
        };
        let mut sink = FrameSink::new(out, version, delivery);
        let result = self.engine.handle(ctx, request, &mut sink);
        match result {
            Ok(outcome) => Ok(outcome),
            Err(error) if !sink.started() => Err(RoundError::Refused(round_failure(&error))),
            Err(EngineError::Sink(_)) if sink.ended_in_band() => Ok(RoundOutcome::default()),
            Err(EngineError::Sink(failure)) => Err(RoundError::Aborted {
                reason: failure.reason,
            }),
            Err(error) => {
                let failure = round_failure(&error);
                let wire = in_band(&failure);
                sink.close_with_error(&wire)
                    .map(|()| RoundOutcome::default())
                    .map_err(|e| RoundError::Aborted { reason: e.reason })
            }
        }
    }

    /// Serves `GET …/segments/{id}` for `ctx` (SSP2 §5.5); see
    /// [`DownloadRequest`].
    pub fn download(
        &self,
        ctx: &RequestContext,
        request: &DownloadRequest<'_>,
    ) -> Result<Download, WireFailure> {
        download::serve(
            &self.engine,
            self.store.as_ref(),
            ctx,
            request,
            self.config.clock.now_ms(),
        )
    }
}

impl WireService {
    /// Deletes segments whose expiry has passed by this service's clock, at
    /// most `limit` (1..=10 000) in one call; returns how many went. A
    /// host calls it periodically (`syncstore serve` every ten minutes), so
    /// that expired segments do not accumulate in the store.
    pub fn prune_expired_segments(&self, limit: u32) -> Result<u64, sync_core::Error> {
        self.store
            .delete_expired_segments(self.config.clock.now_ms(), limit)
    }
}

/// The in-band `ERROR` of a failure answered after the stream started.
fn in_band(failure: &WireFailure) -> WireError {
    let text = |key: &str| {
        failure
            .body
            .get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut wire = WireError::new(&text("code"), text("message"));
    wire.category = text("category");
    wire.recommended_action = text("recommendedAction");
    wire.retryable = failure
        .body
        .get("retryable")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    wire.http_status = failure.status;
    if let Some(serde_json::Value::Object(details)) = failure.body.get("details") {
        wire.details = Some(Box::new(details.clone()));
    }
    wire
}
