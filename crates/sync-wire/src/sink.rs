//! A [`Sink`] that writes the round's items as SSP2 frames, as they come.

use std::io::Write;

use sync_engine::{ResponseItem, Sink, SinkError, WireError};
use sync_ssp2::{ResponseFrame, ResponseWriter, WireVersion};

use crate::frames;
use crate::segments::{Delivery, SegmentFailure};

enum State<W: Write> {
    /// Nothing written yet: a failure can still be answered with a status.
    Idle(W),
    /// The envelope header and at least `RESP_HEADER` are out.
    Writing(ResponseWriter<W>),
    /// `END` is out, or the writer failed.
    Closed,
}

/// Writes a round's [`ResponseItem`]s into `W` as one SSP2 response: the
/// envelope header with the first item, each item's frames as it arrives,
/// `END` last. Bootstrap pages become rows segments, inline or by
/// reference (see [`crate::WireConfig`]).
///
/// Nothing reaches `W` before the first item, so a round refused before
/// its first item can still be answered with an HTTP status
/// ([`FrameSink::started`]). A segment the store cannot keep ends the
/// response with an in-band `ERROR` and `END`, and fails the sink so the
/// engine stops.
pub struct FrameSink<'a, W: Write> {
    state: State<W>,
    version: WireVersion,
    delivery: Delivery<'a>,
    scope_digest: String,
    ended_in_band: bool,
}

impl<W: Write> std::fmt::Debug for FrameSink<'_, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameSink")
            .field("version", &self.version)
            .field("started", &self.started())
            .finish_non_exhaustive()
    }
}

fn io_failure(error: &sync_ssp2::WriteError) -> SinkError {
    SinkError {
        reason: error.to_string(),
    }
}

impl<'a, W: Write> FrameSink<'a, W> {
    pub(crate) fn new(out: W, version: WireVersion, delivery: Delivery<'a>) -> Self {
        Self {
            state: State::Idle(out),
            version,
            delivery,
            scope_digest: String::new(),
            ended_in_band: false,
        }
    }

    /// Whether any byte has been written.
    pub fn started(&self) -> bool {
        !matches!(self.state, State::Idle(_))
    }

    /// Whether the response was closed by an in-band `ERROR` of this sink
    /// (a segment that could not be stored): complete, not truncated.
    pub fn ended_in_band(&self) -> bool {
        self.ended_in_band
    }

    fn writer(&mut self) -> Result<&mut ResponseWriter<W>, SinkError> {
        if matches!(self.state, State::Idle(_)) {
            if let State::Idle(out) = std::mem::replace(&mut self.state, State::Closed) {
                let writer = ResponseWriter::new(out, self.version).map_err(|e| io_failure(&e))?;
                self.state = State::Writing(writer);
            }
        }
        match &mut self.state {
            State::Writing(writer) => Ok(writer),
            _ => Err(SinkError {
                reason: "the response is already closed".to_owned(),
            }),
        }
    }

    fn write(&mut self, frame: &ResponseFrame) -> Result<(), SinkError> {
        let result = self.writer()?.write_frame(frame);
        result.map_err(|e| {
            self.state = State::Closed;
            io_failure(&e)
        })
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        self.writer()?;
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Writing(writer) => writer.finish().map(|_| ()).map_err(|e| io_failure(&e)),
            _ => Ok(()),
        }
    }

    /// Writes `error` in band and closes the response; used when the
    /// round fails after its first item.
    pub(crate) fn close_with_error(&mut self, error: &WireError) -> Result<(), SinkError> {
        self.write(&frames::error(error))?;
        self.finish()?;
        self.ended_in_band = true;
        Ok(())
    }

    fn segment_failed(&mut self, failure: SegmentFailure) -> SinkError {
        let (wire, reason) = match failure {
            SegmentFailure::Encode(reason) => (
                WireError::new("sync.internal", "internal server error"),
                reason,
            ),
            SegmentFailure::Store(error) => {
                let reason = error.code().as_str().to_owned();
                let mut wire = WireError::from_storage(&error);
                if error.retryable() {
                    wire.category = sync_engine::category::UNAVAILABLE.to_owned();
                    wire.retryable = true;
                    wire.recommended_action = "retryLater".to_owned();
                    wire.http_status = 503;
                }
                (wire, reason)
            }
        };
        match self.close_with_error(&wire) {
            Ok(()) => SinkError {
                reason: format!("segment: {reason}"),
            },
            Err(e) => e,
        }
    }
}

impl<W: Write> Sink for FrameSink<'_, W> {
    fn emit(&mut self, item: ResponseItem) -> Result<(), SinkError> {
        match &item {
            ResponseItem::Header(h) => {
                let frame = frames::header(h, self.version);
                self.write(&frame)
            }
            ResponseItem::PushResult(r) => {
                for frame in frames::push_result(r) {
                    self.write(&frame)?;
                }
                Ok(())
            }
            ResponseItem::SubStart(s) => {
                self.scope_digest =
                    sync_ssp2::digest::scope_digest(&frames::scope_map(&s.effective_scopes));
                self.write(&frames::sub_start(s))
            }
            ResponseItem::Commit(c) => self.write(&frames::commit(c)),
            ResponseItem::BootstrapPage(page) => {
                match self.delivery.frame(page, &self.scope_digest) {
                    Ok(frame) => self.write(&frame),
                    Err(failure) => Err(self.segment_failed(failure)),
                }
            }
            ResponseItem::SubEnd(s) => self.write(&frames::sub_end(s)),
            ResponseItem::Error(e) => self.write(&frames::error(e)),
            ResponseItem::End => self.finish(),
        }
    }
}
