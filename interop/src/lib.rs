//! Interoperability tests of syncstore against the protocol's reference
//! client and codec, as published. The crate holds no code: everything is
//! under `tests/`.
