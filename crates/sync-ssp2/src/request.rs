//! Request messages (§1.5): decoding and one-shot encoding.

use crate::envelope::{self, MessageKind, WireVersion};
use crate::error::{DecodeError, EncodeError};
use crate::frames::{
    registered_kind, types, PullHeader, PushCommit, ReqHeader, Subscription, UnknownFrame,
};
use crate::grammar::RequestGrammar;
use crate::primitives::Reader;

/// One frame of a request, in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestFrame {
    /// `REQ_HEADER`, always first.
    ReqHeader(ReqHeader),
    /// `PUSH_COMMIT`, in client commit order.
    PushCommit(PushCommit),
    /// `PULL_HEADER`, at most once, after the commits.
    PullHeader(PullHeader),
    /// `SUBSCRIPTION`, after `PULL_HEADER`.
    Subscription(Subscription),
    /// A frame with no layout in this wire version, kept in place.
    Unknown(UnknownFrame),
}

impl RequestFrame {
    /// The frame type byte.
    pub fn frame_type(&self) -> u8 {
        match self {
            Self::ReqHeader(_) => types::REQ_HEADER,
            Self::PushCommit(_) => types::PUSH_COMMIT,
            Self::PullHeader(_) => types::PULL_HEADER,
            Self::Subscription(_) => types::SUBSCRIPTION,
            Self::Unknown(f) => f.frame_type,
        }
    }

    fn encode_payload(&self, out: &mut Vec<u8>, version: WireVersion) -> Result<(), EncodeError> {
        match self {
            Self::ReqHeader(f) => f.encode(out, version),
            Self::PushCommit(f) => f.encode(out),
            Self::PullHeader(f) => f.encode(out),
            Self::Subscription(f) => f.encode(out),
            Self::Unknown(f) => {
                f.check()?;
                out.extend_from_slice(&f.payload);
                Ok(())
            }
        }
    }
}

/// A whole request message: its wire version and its frames in order
/// (without `END`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The envelope's wire version.
    pub wire_version: WireVersion,
    /// The frames, `END` excluded.
    pub frames: Vec<RequestFrame>,
}

impl Request {
    /// A request with a pull and no push.
    pub fn pull_only(
        wire_version: WireVersion,
        header: ReqHeader,
        pull: PullHeader,
        subscriptions: Vec<Subscription>,
    ) -> Self {
        Self::from_parts(
            wire_version,
            header,
            Vec::new(),
            Some((pull, subscriptions)),
        )
    }

    /// A request from its parts, frames in grammar order.
    pub fn from_parts(
        wire_version: WireVersion,
        header: ReqHeader,
        commits: Vec<PushCommit>,
        pull: Option<(PullHeader, Vec<Subscription>)>,
    ) -> Self {
        let mut frames = vec![RequestFrame::ReqHeader(header)];
        frames.extend(commits.into_iter().map(RequestFrame::PushCommit));
        if let Some((pull, subscriptions)) = pull {
            frames.push(RequestFrame::PullHeader(pull));
            frames.extend(subscriptions.into_iter().map(RequestFrame::Subscription));
        }
        Self {
            wire_version,
            frames,
        }
    }

    /// The `REQ_HEADER` (present in every decoded request).
    pub fn header(&self) -> Option<&ReqHeader> {
        self.frames.iter().find_map(|f| match f {
            RequestFrame::ReqHeader(h) => Some(h),
            _ => None,
        })
    }

    /// The push commits, in order.
    pub fn push_commits(&self) -> impl Iterator<Item = &PushCommit> {
        self.frames.iter().filter_map(|f| match f {
            RequestFrame::PushCommit(c) => Some(c),
            _ => None,
        })
    }

    /// The `PULL_HEADER`, if the request pulls.
    pub fn pull(&self) -> Option<&PullHeader> {
        self.frames.iter().find_map(|f| match f {
            RequestFrame::PullHeader(p) => Some(p),
            _ => None,
        })
    }

    /// The subscriptions, in request order.
    pub fn subscriptions(&self) -> impl Iterator<Item = &Subscription> {
        self.frames.iter().filter_map(|f| match f {
            RequestFrame::Subscription(s) => Some(s),
            _ => None,
        })
    }
}

fn decode_frame(
    frame_type: u8,
    payload: &[u8],
    version: WireVersion,
    grammar: &mut RequestGrammar,
) -> Result<RequestFrame, DecodeError> {
    match registered_kind(frame_type) {
        None => {
            grammar
                .unknown()
                .map_err(|rule| DecodeError::Grammar { rule })?;
            return Ok(RequestFrame::Unknown(UnknownFrame {
                frame_type,
                payload: payload.to_vec(),
            }));
        }
        Some(Some(MessageKind::Request)) => {}
        Some(_) => return Err(DecodeError::ForeignFrame { frame_type }),
    }
    grammar
        .frame(frame_type)
        .map_err(|rule| DecodeError::Grammar { rule })?;
    let mut r = Reader::new(payload);
    let frame = match frame_type {
        types::REQ_HEADER => RequestFrame::ReqHeader(ReqHeader::decode(&mut r, version)?),
        types::PUSH_COMMIT => RequestFrame::PushCommit(PushCommit::decode(&mut r)?),
        types::PULL_HEADER => RequestFrame::PullHeader(PullHeader::decode(&mut r)?),
        _ => RequestFrame::Subscription(Subscription::decode(&mut r)?),
    };
    r.finish("a frame record")?;
    Ok(frame)
}

/// Decodes a whole request message: envelope first (an unserved wire
/// version is refused before any frame is read), then every frame, the
/// grammar, and `END` as the last bytes.
pub fn decode_request(bytes: &[u8]) -> Result<Request, DecodeError> {
    let (wire_version, mut r) = envelope::open(bytes, MessageKind::Request)?;
    let mut grammar = RequestGrammar::default();
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
    Ok(Request {
        wire_version,
        frames,
    })
}

/// Encodes a whole request message, `END` included; refuses frames out of
/// grammar order and values with no valid encoding.
pub fn encode_request(request: &Request) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    envelope::put_header(&mut out, request.wire_version, MessageKind::Request);
    let mut grammar = RequestGrammar::default();
    let mut payload = Vec::new();
    for frame in &request.frames {
        let checked = match frame {
            RequestFrame::Unknown(_) => grammar.unknown(),
            known => grammar.frame(known.frame_type()),
        };
        checked.map_err(|rule| EncodeError::Grammar { rule })?;
        payload.clear();
        frame.encode_payload(&mut payload, request.wire_version)?;
        envelope::put_frame(&mut out, frame.frame_type(), &payload)?;
    }
    grammar
        .end()
        .map_err(|rule| EncodeError::Grammar { rule })?;
    envelope::put_end(&mut out);
    Ok(out)
}
