//! One module per checklist group (`conformance-checklist.md` §1–§22).

pub(crate) mod bad_input;
pub(crate) mod blobs_admin;
pub(crate) mod clients;
pub(crate) mod codec;
pub(crate) mod commit_log;
pub(crate) mod concurrency;
pub(crate) mod idempotency;
pub(crate) mod lookups;
pub(crate) mod plans;
pub(crate) mod pruning;
pub(crate) mod reactions;
pub(crate) mod registered_queries;
pub(crate) mod rfc0007_activation;
pub(crate) mod rfc0007_checkpoints;
pub(crate) mod rfc0007_ensure;
pub(crate) mod rfc0007_fence;
pub(crate) mod rfc0007_runner;
pub(crate) mod rfc0007_serve_gate;
pub(crate) mod rows;
pub(crate) mod schema_compile;
pub(crate) mod schema_lifecycle;
pub(crate) mod scope_reads;
pub(crate) mod support_barrier;
pub(crate) mod support_lifecycle;
pub(crate) mod support_pdata;
pub(crate) mod support_rows;
