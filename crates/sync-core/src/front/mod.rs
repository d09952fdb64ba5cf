//! The validating front: every argument of [`ServerStorage`](crate::ServerStorage)
//! checked once, in the specification's order, in front of a backend that
//! only does its database's I/O.
//!
//! A dialect implements [`StorageBackend`] and [`TransactionBackend`] (and names what
//! `ensure_schema` records through [`EnsuredSchema`]), and each optional
//! group it supports through its trait in [`groups`]; every
//! `StorageBackend` is a `ServerStorage` through the front, a blanket
//! implementation in this module. The front checks the partition, names,
//! limits, table lists and the ensured schema as `storage-contract.md` §4
//! orders them, answers what the checks alone decide (an empty scan, a
//! capability the backend lacks), and passes the backend the
//! [`checked`] values: types only the front can build, so a backend cannot
//! receive an argument that skipped its check.
//!
//! The checks are the ones of [`crate::validate`] and cost what they cost
//! when each dialect made them: no statement, no allocation beyond the
//! deduplicated table lists the backends read anyway.

pub mod backend;
pub mod checked;
mod checks;
pub mod ensured;
pub mod groups;
mod storage;
mod transaction;
pub mod transaction_backend;

pub use backend::{Handle, StorageBackend};
pub use checked::{
    Checked, CheckedRow, CheckpointName, IndexLookup, LogEpoch, Partition, Request, RowId, Table,
    Tables,
};
pub use ensured::EnsuredSchema;
pub use groups::{AdminBackend, BlobRefsBackend, IndexScanBackend, QueryBackend, ReactionsBackend};
pub use transaction::FrontTransaction;
pub use transaction_backend::{TransactionBackend, TxHandle};
