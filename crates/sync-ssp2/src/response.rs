//! Response messages (§1.6): decoding and one-shot encoding.

use crate::envelope::{self, MessageKind, WireVersion};
use crate::error::{DecodeError, EncodeError};
use crate::frames::{
    registered_kind, types, Commit, ErrorFrame, Lease, PushResult, PushResultDetails, RespHeader,
    SegmentInline, SegmentRef, SubEnd, SubStart, UnknownFrame,
};
use crate::grammar::ResponseGrammar;
use crate::primitives::Reader;
use crate::writer::ResponseWriter;

/// One frame of a response, in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseFrame {
    /// `RESP_HEADER`, always first.
    RespHeader(RespHeader),
    /// `LEASE`, at most once, right after the header.
    Lease(Lease),
    /// `PUSH_RESULT`, one per pushed commit.
    PushResult(PushResult),
    /// `PUSH_RESULT_DETAILS`, right after its `PUSH_RESULT`.
    PushResultDetails(PushResultDetails),
    /// `SUB_START`, opening a subscription section.
    SubStart(SubStart),
    /// `COMMIT`, inside a section.
    Commit(Commit),
    /// `SEGMENT_REF`, inside a section.
    SegmentRef(SegmentRef),
    /// `SEGMENT_INLINE`, inside a section.
    SegmentInline(SegmentInline),
    /// `SUB_END`, closing a section.
    SubEnd(SubEnd),
    /// `ERROR`; only `END` follows.
    Error(ErrorFrame),
    /// A frame with no layout in this wire version, kept in place.
    Unknown(UnknownFrame),
}

impl ResponseFrame {
    /// The frame type byte.
    pub fn frame_type(&self) -> u8 {
        match self {
            Self::RespHeader(_) => types::RESP_HEADER,
            Self::Lease(_) => types::LEASE,
            Self::PushResult(_) => types::PUSH_RESULT,
            Self::PushResultDetails(_) => types::PUSH_RESULT_DETAILS,
            Self::SubStart(_) => types::SUB_START,
            Self::Commit(_) => types::COMMIT,
            Self::SegmentRef(_) => types::SEGMENT_REF,
            Self::SegmentInline(_) => types::SEGMENT_INLINE,
            Self::SubEnd(_) => types::SUB_END,
            Self::Error(_) => types::ERROR,
            Self::Unknown(f) => f.frame_type,
        }
    }

    pub(crate) fn encode_payload(
        &self,
        out: &mut Vec<u8>,
        version: WireVersion,
    ) -> Result<(), EncodeError> {
        match self {
            Self::RespHeader(f) => f.encode(out, version),
            Self::Lease(f) => f.encode(out),
            Self::PushResult(f) => f.encode(out, version),
            Self::PushResultDetails(f) => f.encode(out),
            Self::SubStart(f) => f.encode(out),
            Self::Commit(f) => f.encode(out),
            Self::SegmentRef(f) => f.encode(out),
            Self::SegmentInline(f) => {
                out.extend_from_slice(f.as_bytes());
                Ok(())
            }
            Self::SubEnd(f) => f.encode(out),
            Self::Error(f) => f.encode(out),
            Self::Unknown(f) => {
                f.check()?;
                out.extend_from_slice(&f.payload);
                Ok(())
            }
        }
    }
}

/// A whole response message: its wire version and its frames in order
/// (without `END`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The envelope's wire version.
    pub wire_version: WireVersion,
    /// The frames, `END` excluded.
    pub frames: Vec<ResponseFrame>,
}

impl Response {
    /// The `RESP_HEADER` (present in every decoded response).
    pub fn header(&self) -> Option<&RespHeader> {
        self.frames.iter().find_map(|f| match f {
            ResponseFrame::RespHeader(h) => Some(h),
            _ => None,
        })
    }
}

fn decode_frame(
    frame_type: u8,
    payload: &[u8],
    version: WireVersion,
    grammar: &mut ResponseGrammar,
) -> Result<ResponseFrame, DecodeError> {
    match registered_kind(frame_type) {
        None => {
            grammar
                .unknown()
                .map_err(|rule| DecodeError::Grammar { rule })?;
            return Ok(ResponseFrame::Unknown(UnknownFrame {
                frame_type,
                payload: payload.to_vec(),
            }));
        }
        Some(Some(MessageKind::Response)) => {}
        Some(_) => return Err(DecodeError::ForeignFrame { frame_type }),
    }
    grammar
        .frame(frame_type)
        .map_err(|rule| DecodeError::Grammar { rule })?;
    if frame_type == types::SEGMENT_INLINE {
        return Ok(ResponseFrame::SegmentInline(SegmentInline::from_bytes(
            payload.to_vec(),
        )?));
    }
    let mut r = Reader::new(payload);
    let frame = match frame_type {
        types::RESP_HEADER => ResponseFrame::RespHeader(RespHeader::decode(&mut r, version)?),
        types::LEASE => ResponseFrame::Lease(Lease::decode(&mut r)?),
        types::PUSH_RESULT => ResponseFrame::PushResult(PushResult::decode(&mut r, version)?),
        types::PUSH_RESULT_DETAILS => {
            ResponseFrame::PushResultDetails(PushResultDetails::decode(&mut r)?)
        }
        types::SUB_START => ResponseFrame::SubStart(SubStart::decode(&mut r)?),
        types::COMMIT => ResponseFrame::Commit(Commit::decode(&mut r)?),
        types::SEGMENT_REF => ResponseFrame::SegmentRef(SegmentRef::decode(&mut r)?),
        types::SUB_END => ResponseFrame::SubEnd(SubEnd::decode(&mut r)?),
        _ => ResponseFrame::Error(ErrorFrame::decode(&mut r)?),
    };
    r.finish("a frame record")?;
    grammar
        .contents(&frame)
        .map_err(|rule| DecodeError::Grammar { rule })?;
    Ok(frame)
}

/// Decodes a whole response message: envelope first (an unserved wire
/// version is refused before any frame is read), then every frame, the
/// grammar, and `END` as the last bytes.
pub fn decode_response(bytes: &[u8]) -> Result<Response, DecodeError> {
    let (wire_version, mut r) = envelope::open(bytes, MessageKind::Response)?;
    let mut grammar = ResponseGrammar::default();
    let mut frames = Vec::new();
    while let Some((frame_type, payload)) = envelope::next_frame(&mut r)? {
        frames.push(decode_frame(
            frame_type,
            payload,
            wire_version,
            &mut grammar,
        )?);
    }
    grammar
        .end()
        .map_err(|rule| DecodeError::Grammar { rule })?;
    Ok(Response {
        wire_version,
        frames,
    })
}

/// Encodes a whole response message, `END` included; refuses frames out of
/// grammar order and values with no valid encoding.
pub fn encode_response(response: &Response) -> Result<Vec<u8>, EncodeError> {
    let mut writer = ResponseWriter::new(Vec::new(), response.wire_version).map_err(into_encode)?;
    for frame in &response.frames {
        writer.write_frame(frame).map_err(into_encode)?;
    }
    writer.finish().map_err(into_encode)
}

fn into_encode(e: crate::WriteError) -> EncodeError {
    match e {
        crate::WriteError::Encode(e) => e,
        // Writing into a Vec<u8> does not fail.
        crate::WriteError::Io(_) => EncodeError::TooLong {
            what: "the response",
        },
    }
}
