//! Per-row and whole-commit validators (`engine.md` §4.8).

use std::collections::BTreeMap;
use std::fmt;

use sync_core::RowValue;

use super::reader::CandidateReader;
use super::rejection::Rejection;
use crate::wire::request::OpKind;

/// A decoded row: column name → value.
pub type RowValues = BTreeMap<String, RowValue>;

/// The outcome of a validator that did not accept.
#[derive(Debug)]
pub enum ValidationFailure {
    /// A deliberate rejection with a host code.
    Reject(Rejection),
    /// The validator itself failed; the commit is rejected with
    /// `sync.constraint_violation` (the failure text never becomes a code).
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for ValidationFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValidationFailure::Reject(r) => write!(f, "rejected: {}", r.code()),
            ValidationFailure::Failed(e) => write!(f, "validator failed: {e}"),
        }
    }
}

impl From<Rejection> for ValidationFailure {
    fn from(r: Rejection) -> Self {
        ValidationFailure::Reject(r)
    }
}

/// What a row validator sees of one operation.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidateOperation {
    /// The operation kind.
    pub op: OpKind,
    /// The table.
    pub table: String,
    /// The row id.
    pub row_id: String,
    /// The row about to be written (after scope stripping and merging);
    /// `None` for deletes.
    pub row: Option<RowValues>,
    /// The stored row before this operation, if any.
    pub stored: Option<RowValues>,
}

/// Who is writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidateContext {
    /// The authenticated actor.
    pub actor_id: String,
    /// The partition.
    pub partition: String,
}

/// Validates single operations of one table, immediately before the write.
pub trait RowValidator: Send + Sync {
    /// `Ok` to continue; a failure terminates the commit.
    fn validate(
        &self,
        op: &ValidateOperation,
        ctx: &ValidateContext,
    ) -> Result<(), ValidationFailure>;
}

/// Evidence of one applied operation for whole-commit hooks.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationEvidence {
    /// The operation's index in the commit.
    pub op_index: u32,
    /// The operation kind.
    pub op: OpKind,
    /// The table.
    pub table: String,
    /// The row id.
    pub row_id: String,
    /// The row written (None for deletes).
    pub row: Option<RowValues>,
    /// The row before the operation (None when absent).
    pub stored: Option<RowValues>,
    /// The stored version before an update or delete.
    pub stored_server_version: Option<i64>,
    /// The version written by an upsert.
    pub next_server_version: Option<i64>,
}

/// The whole commit as applied so far, for whole-commit validators and
/// reaction planners.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitInput {
    /// The pushing client.
    pub client_id: String,
    /// The commit's `clientCommitId`.
    pub client_commit_id: String,
    /// The authenticated actor.
    pub actor_id: String,
    /// The partition.
    pub partition: String,
    /// One evidence entry per operation, in order.
    pub operations: Vec<OperationEvidence>,
}

/// Validates a whole commit after every operation applied, reading the
/// candidate state through the transaction.
pub trait CommitValidator: Send + Sync {
    /// `Ok` to continue; a failure terminates the commit.
    fn validate(
        &self,
        input: &CommitInput,
        read: &mut dyn CandidateReader,
    ) -> Result<(), ValidationFailure>;
}
