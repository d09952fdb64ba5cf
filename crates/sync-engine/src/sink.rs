//! Where response items go as they are produced (`engine.md` §3.3).

use std::fmt;

use crate::wire::response::ResponseItem;

/// The receiver is gone (client disconnected); the engine stops before the
/// next unit of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkError {
    /// Why the item could not be delivered.
    pub reason: String,
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "response sink failed: {}", self.reason)
    }
}

impl std::error::Error for SinkError {}

/// Receives response items in order.
pub trait Sink {
    /// Delivers one item.
    fn emit(&mut self, item: ResponseItem) -> Result<(), SinkError>;
}

/// Collects every item.
impl Sink for Vec<ResponseItem> {
    fn emit(&mut self, item: ResponseItem) -> Result<(), SinkError> {
        self.push(item);
        Ok(())
    }
}
