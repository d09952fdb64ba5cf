//! The typed wire model (`engine.md` §2) and its JSON-lines rendering.

pub(crate) mod json_fields;
pub(crate) mod json_request;
pub(crate) mod json_response;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod wire_error;
