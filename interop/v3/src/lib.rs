//! Nothing but the tests under `tests/`.
