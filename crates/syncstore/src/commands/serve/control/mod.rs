//! `serve --test-control`: isolated test instances for black-box
//! harnesses (`docs/ssp2.md`, "The test control surface").
//!
//! `POST /test/instances` creates an instance — a fresh scratch storage of
//! `--db`'s dialect at a given schema, one partition, a virtual clock —
//! whose sync routes are `/test/instances/{id}/sync` and
//! `/test/instances/{id}/segments/{segment}` (an unmodified client points
//! its base URL at `/test/instances/{id}` and names its actor with
//! `Authorization: Bearer <actorId>`). The routes under
//! `/test/instances/{id}/control/` set scopes, switch faults, move the
//! clock, prune, read the log bounds and rows, install validators, and
//! capture and restore backups; `DELETE /test/instances/{id}` frees it.
//! Served only on a loopback address.

mod actor_auth;
mod create;
mod driver_values;
mod fields;
mod idempotency_fault;
mod instance;
mod loopback;
mod registry;
mod resolver;
mod routes;
mod validators;

pub use loopback::require_loopback;
pub use registry::Control;
pub use routes::router;
