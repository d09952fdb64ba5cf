//! `sync-conformance`: the dialect-agnostic contract suite of the syncstore
//! storage layer (`conformance-checklist.md`).
//!
//! A dialect author implements [`Harness`] (fresh databases, storage
//! instances, raw access) and calls [`assert_suite_passes`] from one test.
//! Every checklist ID is one named check in the registry ([`registry`]);
//! checks of optional capability groups a storage does not advertise are
//! reported as skipped, never silently passed. The suite is not a benchmark
//! and contains no dialect code: dialect differences live behind
//! [`RawAccess`].
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

mod check;
mod checks;
mod context;
pub mod fixtures;
mod harness;
pub mod operator;
mod properties;
pub mod reference;
mod registry;
mod runner;

pub use check::{
    expect_code, expect_detail, expect_message_free_of, CheckDef, CheckFn, CheckResult, Failure,
};
pub use context::{Ctx, NOW};
pub use harness::{
    BarrierAttack, DbHandle, FenceTamper, GroupedStorage, Harness, HarnessEntry, HarnessEnv,
    HarnessFn, HotPath, OldWriter, PlanSummary, PoolLimits, RawAccess, RawColumn, RawFilter,
    RawIndex, WriterProbe,
};
pub use properties::{BooleanValues, Planner, Properties, Requires, WriteLocking};
pub use registry::registry;
pub use runner::{
    assert_suite_passes, filter_matches, filter_prefixes, run_check, run_suite, selected_checks,
    CheckOutcome, RunOptions, Status, SuiteReport, FILTER_ENV,
};
