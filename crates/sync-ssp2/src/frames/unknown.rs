//! Frames with no layout in this wire version, kept byte for byte.

use crate::error::EncodeError;

/// A frame whose type has no layout in wire versions 1 and 2 (reserved
/// types such as `0x17`, or anything unregistered). It is skipped when
/// decoding, never interpreted, and written back unchanged at its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFrame {
    /// The frame type byte.
    pub frame_type: u8,
    /// The payload, as received.
    pub payload: Vec<u8>,
}

impl UnknownFrame {
    /// Refuses a frame type the registry gives a layout (§1.2 rule 2: an
    /// encoder never emits an unknown frame under a registered type).
    pub(crate) fn check(&self) -> Result<(), EncodeError> {
        if super::registered_kind(self.frame_type).is_some() {
            Err(EncodeError::RegisteredFrameType {
                frame_type: self.frame_type,
            })
        } else {
            Ok(())
        }
    }
}
