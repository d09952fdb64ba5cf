//! Every frame of the SSP2 registry (§1.2) as a typed value, with its
//! payload layout.
//!
//! | type | frame | message |
//! |---|---|---|
//! | `0x00` | `END` | both |
//! | `0x01` | [`ReqHeader`] | request |
//! | `0x02` | [`PushCommit`] | request |
//! | `0x03` | [`PullHeader`] | request |
//! | `0x04` | [`Subscription`] | request |
//! | `0x10` | [`RespHeader`] | response |
//! | `0x11` | [`PushResult`] | response |
//! | `0x12` | [`SubStart`] | response |
//! | `0x13` | [`Commit`] | response |
//! | `0x14` | [`SegmentRef`] | response |
//! | `0x15` | [`SegmentInline`] | response |
//! | `0x16` | [`SubEnd`] | response |
//! | `0x19` | [`Lease`] | response |
//! | `0x1B` | [`PushResultDetails`] | response |
//! | `0x1F` | [`ErrorFrame`] | response |
//!
//! Any other type byte has no layout in wire versions 1 and 2: it is kept as
//! an [`UnknownFrame`].

mod details;
mod error_frame;
mod header;
mod lease;
mod pull;
mod push;
mod segment_ref;
mod unknown;

pub use error_frame::ErrorFrame;
pub use header::{ReqHeader, RespHeader, ResponseEpoch};
pub use lease::Lease;
pub use pull::{
    Accept, Change, ChangeOp, Commit, PullHeader, SubEnd, SubStart, SubStatus, Subscription,
};
pub use push::{
    DetailEntry, OpResult, OpResultKind, PushCommit, PushOp, PushOperation, PushResult,
    PushResultDetails, PushStatus,
};
pub use segment_ref::{MediaType, SegmentInline, SegmentRef, SignedUrl};
pub use unknown::UnknownFrame;

use crate::envelope::MessageKind;

/// The frame type bytes of the registry.
pub mod types {
    /// `END`, closing every message.
    pub const END: u8 = 0x00;
    /// `REQ_HEADER`.
    pub const REQ_HEADER: u8 = 0x01;
    /// `PUSH_COMMIT`.
    pub const PUSH_COMMIT: u8 = 0x02;
    /// `PULL_HEADER`.
    pub const PULL_HEADER: u8 = 0x03;
    /// `SUBSCRIPTION`.
    pub const SUBSCRIPTION: u8 = 0x04;
    /// `RESP_HEADER`.
    pub const RESP_HEADER: u8 = 0x10;
    /// `PUSH_RESULT`.
    pub const PUSH_RESULT: u8 = 0x11;
    /// `SUB_START`.
    pub const SUB_START: u8 = 0x12;
    /// `COMMIT`.
    pub const COMMIT: u8 = 0x13;
    /// `SEGMENT_REF`.
    pub const SEGMENT_REF: u8 = 0x14;
    /// `SEGMENT_INLINE`.
    pub const SEGMENT_INLINE: u8 = 0x15;
    /// `SUB_END`.
    pub const SUB_END: u8 = 0x16;
    /// `LEASE`.
    pub const LEASE: u8 = 0x19;
    /// `PUSH_RESULT_DETAILS`.
    pub const PUSH_RESULT_DETAILS: u8 = 0x1B;
    /// `ERROR`.
    pub const ERROR: u8 = 0x1F;
}

/// The message kind a frame type is registered for: `Some(Some(kind))` for
/// a frame of one kind, `Some(None)` for `END`, `None` for a type with no
/// layout (unknown, skipped and kept).
pub fn registered_kind(frame_type: u8) -> Option<Option<MessageKind>> {
    use types::*;
    match frame_type {
        END => Some(None),
        REQ_HEADER | PUSH_COMMIT | PULL_HEADER | SUBSCRIPTION => Some(Some(MessageKind::Request)),
        RESP_HEADER | PUSH_RESULT | SUB_START | COMMIT | SEGMENT_REF | SEGMENT_INLINE | SUB_END
        | LEASE | PUSH_RESULT_DETAILS | ERROR => Some(Some(MessageKind::Response)),
        _ => None,
    }
}

/// The §11 rendering name of a registered frame type.
pub fn frame_name(frame_type: u8) -> Option<&'static str> {
    use types::*;
    Some(match frame_type {
        END => "END",
        REQ_HEADER => "REQ_HEADER",
        PUSH_COMMIT => "PUSH_COMMIT",
        PULL_HEADER => "PULL_HEADER",
        SUBSCRIPTION => "SUBSCRIPTION",
        RESP_HEADER => "RESP_HEADER",
        PUSH_RESULT => "PUSH_RESULT",
        SUB_START => "SUB_START",
        COMMIT => "COMMIT",
        SEGMENT_REF => "SEGMENT_REF",
        SEGMENT_INLINE => "SEGMENT_INLINE",
        SUB_END => "SUB_END",
        LEASE => "LEASE",
        PUSH_RESULT_DETAILS => "PUSH_RESULT_DETAILS",
        ERROR => "ERROR",
        _ => return None,
    })
}

/// Reads an enum byte admitting `1..=max`.
pub(crate) fn enum_byte(
    r: &mut crate::primitives::Reader<'_>,
    what: &'static str,
    max: u8,
) -> Result<u8, crate::DecodeError> {
    let value = r.u8(what)?;
    if (1..=max).contains(&value) {
        Ok(value)
    } else {
        Err(crate::DecodeError::InvalidEnum { what, value })
    }
}
