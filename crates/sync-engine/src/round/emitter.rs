//! The sink wrapper that remembers whether anything was emitted.

use crate::sink::{Sink, SinkError};
use crate::wire::response::ResponseItem;

pub(crate) struct Emitter<'s> {
    sink: &'s mut dyn Sink,
    emitted: bool,
}

impl<'s> Emitter<'s> {
    pub(crate) fn new(sink: &'s mut dyn Sink) -> Self {
        Self {
            sink,
            emitted: false,
        }
    }

    pub(crate) fn emit(&mut self, item: ResponseItem) -> Result<(), SinkError> {
        self.emitted = true;
        self.sink.emit(item)
    }

    pub(crate) fn has_emitted(&self) -> bool {
        self.emitted
    }
}
