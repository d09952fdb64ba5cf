//! Writing a response frame by frame, as the frames are produced (§1.4:
//! no full-response buffering).

use std::fmt;
use std::io::Write;

use crate::envelope::{self, MessageKind, WireVersion};
use crate::error::{EncodeError, WriteError};
use crate::grammar::ResponseGrammar;
use crate::response::ResponseFrame;

/// Streams one response message into a [`Write`] sink: the envelope header
/// at creation, each frame as it is handed over, `END` at [`finish`].
///
/// Every frame is checked against the response grammar and encoded in full
/// before any of its bytes reach the sink, so a refused frame
/// ([`WriteError::Encode`]) writes nothing and the writer can go on (for
/// instance with an `ERROR` frame). Memory held is one frame's payload.
/// After a [`WriteError::Io`] the sink holds a partial message; a reader
/// sees it as truncated.
///
/// ```
/// use sync_ssp2::{ResponseFrame, ResponseWriter, RespHeader, WireVersion};
///
/// # fn main() -> Result<(), sync_ssp2::WriteError> {
/// let mut writer = ResponseWriter::new(Vec::new(), WireVersion::V1)?;
/// writer.write_frame(&ResponseFrame::RespHeader(RespHeader::default()))?;
/// let bytes = writer.finish()?;
/// assert!(sync_ssp2::decode_response(&bytes).is_ok());
/// # Ok(())
/// # }
/// ```
///
/// [`finish`]: ResponseWriter::finish
pub struct ResponseWriter<W: Write> {
    sink: W,
    version: WireVersion,
    grammar: ResponseGrammar,
    payload: Vec<u8>,
    frame: Vec<u8>,
}

impl<W: Write> fmt::Debug for ResponseWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseWriter")
            .field("version", &self.version)
            .field("grammar", &self.grammar)
            .finish_non_exhaustive()
    }
}

impl<W: Write> ResponseWriter<W> {
    /// Writes the 8-byte envelope header of a response of `version`.
    pub fn new(mut sink: W, version: WireVersion) -> Result<Self, WriteError> {
        let mut header = Vec::with_capacity(envelope::HEADER_LEN);
        envelope::put_header(&mut header, version, MessageKind::Response);
        sink.write_all(&header)?;
        Ok(Self {
            sink,
            version,
            grammar: ResponseGrammar::default(),
            payload: Vec::new(),
            frame: Vec::new(),
        })
    }

    /// The wire version being written.
    pub fn wire_version(&self) -> WireVersion {
        self.version
    }

    /// Checks `frame` against the grammar, encodes it and writes it.
    pub fn write_frame(&mut self, frame: &ResponseFrame) -> Result<(), WriteError> {
        let mut grammar = self.grammar.clone();
        let checked = match frame {
            ResponseFrame::Unknown(_) => grammar.unknown(),
            known => grammar
                .frame(known.frame_type())
                .and_then(|()| grammar.contents(known)),
        };
        checked.map_err(|rule| EncodeError::Grammar { rule })?;
        self.payload.clear();
        frame.encode_payload(&mut self.payload, self.version)?;
        self.frame.clear();
        envelope::put_frame(&mut self.frame, frame.frame_type(), &self.payload)?;
        self.grammar = grammar;
        self.sink.write_all(&self.frame)?;
        Ok(())
    }

    /// Checks the message may end here, writes `END`, and gives the sink
    /// back.
    pub fn finish(mut self) -> Result<W, WriteError> {
        self.grammar
            .end()
            .map_err(|rule| EncodeError::Grammar { rule })?;
        let mut end = Vec::with_capacity(5);
        envelope::put_end(&mut end);
        self.sink.write_all(&end)?;
        self.sink.flush()?;
        Ok(self.sink)
    }
}
