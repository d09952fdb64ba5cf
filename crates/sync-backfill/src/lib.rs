//! `sync-backfill`: the RFC 0007 checkpoint runner.
//!
//! It backfills a derived projection (a column or a table computed from
//! source tables) for one partition in bounded batches under live traffic,
//! survives crashes and takeovers (owner epochs), keeps up with continuous
//! writes (catch-up over the source change log), and activates the
//! checkpoint in one locked transaction so the serve gate opens
//! (`rfc0007-migration-barrier.md` §8).
//!
//! It works over `&dyn ServerStorage` only; it contains no dialect code and
//! never loads a whole table: memory stays flat in the size of the table.
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]

mod config;
mod derived_column;
mod derived_table;
mod progress;
mod projector;
mod runner;

pub use config::{RunnerConfig, MAX_BACKOFF_MS};
pub use derived_column::{DeriveValue, DerivedColumn};
pub use derived_table::{DeriveRow, DerivedTable};
pub use progress::{NoProgress, Phase, Progress, ProgressObserver};
pub use projector::{project_delete, project_upsert, Projector, SourceRowRef};
pub use runner::{CheckpointRunner, Pause, RunOutcome, ThreadPause};
