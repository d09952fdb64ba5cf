//! Application hooks (`engine.md` §1.4).

pub(crate) mod blobs;
pub(crate) mod crdt;
pub(crate) mod ids;
pub(crate) mod reactions;
pub(crate) mod reader;
pub(crate) mod rejection;
pub(crate) mod scope_resolver;
pub(crate) mod validators;
