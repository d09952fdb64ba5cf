//! `PUSH_COMMIT` (§6.1), `PUSH_RESULT` (§6.3) and `PUSH_RESULT_DETAILS`
//! (§6.3.1).

use super::enum_byte;
use crate::envelope::WireVersion;
use crate::error::{DecodeError, EncodeError};
use crate::primitives::{
    put_bool, put_bytes, put_i32, put_i64, put_len, put_opt, put_str, put_u8, Reader,
};

/// One client commit of a push, in outbox order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushCommit {
    /// The idempotency key; never empty.
    pub client_commit_id: String,
    /// The operations; at least one (`sync.empty_commit` otherwise).
    pub operations: Vec<PushOperation>,
}

/// One row write of a push commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushOperation {
    /// The table written.
    pub table: String,
    /// The row's id.
    pub row_id: String,
    /// The optimistic-concurrency token; `None` is last-write-wins. A
    /// delete may carry one (kept, ignored by the server).
    pub base_version: Option<i64>,
    /// Upsert (with its row payload) or delete.
    pub op: PushOp,
}

/// What a push operation does; the payload travels with an upsert only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOp {
    /// Write the whole row (`op` 1).
    Upsert {
        /// The row in the generated row codec, opaque to this crate.
        payload: Vec<u8>,
    },
    /// Delete the row (`op` 2).
    Delete,
}

impl PushOp {
    /// The §11 rendering name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Upsert { .. } => "upsert",
            Self::Delete => "delete",
        }
    }
}

const EMPTY_COMMIT_ID: &str = "PUSH_COMMIT.clientCommitId must not be empty";
// Smallest operation record: two empty strings, op, two absent options.
const MIN_OPERATION: u64 = 4 + 4 + 1 + 1 + 1;

impl PushCommit {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let client_commit_id = r.str("PUSH_COMMIT.clientCommitId")?;
        if client_commit_id.is_empty() {
            return Err(DecodeError::Constraint {
                rule: EMPTY_COMMIT_ID,
            });
        }
        let operations = r.list(
            "PUSH_COMMIT.operations",
            MIN_OPERATION,
            PushOperation::decode,
        )?;
        if operations.is_empty() {
            return Err(DecodeError::EmptyCommit);
        }
        Ok(Self {
            client_commit_id,
            operations,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.client_commit_id.is_empty() {
            return Err(EncodeError::Constraint {
                rule: EMPTY_COMMIT_ID,
            });
        }
        if self.operations.is_empty() {
            return Err(EncodeError::EmptyCommit);
        }
        put_str(out, &self.client_commit_id, "PUSH_COMMIT.clientCommitId")?;
        put_len(out, self.operations.len(), "PUSH_COMMIT.operations")?;
        self.operations.iter().try_for_each(|op| op.encode(out))
    }
}

impl PushOperation {
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let table = r.str("operation.table")?;
        let row_id = r.str("operation.rowId")?;
        let op = enum_byte(r, "operation.op", 2)?;
        let base_version = r.opt("operation.baseVersion", |r| r.i64("operation.baseVersion"))?;
        let payload = r.opt("operation.payload", |r| r.bytes("operation.payload"))?;
        let op = match (op, payload) {
            (1, Some(payload)) => PushOp::Upsert { payload },
            (2, None) => PushOp::Delete,
            (1, None) => {
                return Err(DecodeError::Constraint {
                    rule: "an upsert operation must carry a payload",
                })
            }
            _ => {
                return Err(DecodeError::Constraint {
                    rule: "a delete operation must not carry a payload",
                })
            }
        };
        Ok(Self {
            table,
            row_id,
            base_version,
            op,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_str(out, &self.table, "operation.table")?;
        put_str(out, &self.row_id, "operation.rowId")?;
        put_u8(
            out,
            if matches!(self.op, PushOp::Upsert { .. }) {
                1
            } else {
                2
            },
        );
        put_opt(out, self.base_version.as_ref(), |o, v| {
            put_i64(o, *v, "operation.baseVersion")
        })?;
        let payload = match &self.op {
            PushOp::Upsert { payload } => Some(payload),
            PushOp::Delete => None,
        };
        put_opt(out, payload, |o, p| put_bytes(o, p, "operation.payload"))
    }
}

/// The outcome of one pushed commit, in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushResult {
    /// Echo of the commit's idempotency key.
    pub client_commit_id: String,
    /// Applied, cached (with the commit sequence) or rejected.
    pub status: PushStatus,
    /// Per-operation results.
    pub results: Vec<OpResult>,
}

/// A push commit's status; the commit sequence exists only when it applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushStatus {
    /// Every operation applied (`status` 1).
    Applied {
        /// The commit's sequence number.
        commit_seq: i64,
    },
    /// Idempotent replay of an applied commit (`status` 2).
    Cached {
        /// The original commit's sequence number.
        commit_seq: i64,
    },
    /// The commit was rejected (`status` 3).
    Rejected,
}

impl PushStatus {
    /// The §11 rendering name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Applied { .. } => "applied",
            Self::Cached { .. } => "cached",
            Self::Rejected => "rejected",
        }
    }

    /// The commit sequence, for applied and cached commits.
    pub fn commit_seq(&self) -> Option<i64> {
        match self {
            Self::Applied { commit_seq } | Self::Cached { commit_seq } => Some(*commit_seq),
            Self::Rejected => None,
        }
    }
}

/// One operation's result record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpResult {
    /// Index into the commit's operations.
    pub op_index: i32,
    /// Applied, conflict or error.
    pub kind: OpResultKind,
}

/// The tagged union of a result record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResultKind {
    /// The operation applied (`status` 1).
    Applied,
    /// A version conflict (`status` 2), with the server's current row.
    Conflict {
        /// The error code, e.g. `sync.version_conflict`.
        code: String,
        /// Human-readable text.
        message: String,
        /// The server's current row version.
        server_version: i64,
        /// The server's current row in the generated row codec.
        server_row: Vec<u8>,
        /// Wire version 3 only (and then required): which columns
        /// conflict, as a presence bitmap (bit `i` = column `i` in
        /// declaration order, least significant bit first). The envelope
        /// codec does not know the column count, so any length decodes.
        conflict_columns: Option<Vec<u8>>,
    },
    /// An error (`status` 3).
    Error {
        /// The error code.
        code: String,
        /// Human-readable text.
        message: String,
        /// Whether retrying may succeed.
        retryable: bool,
    },
}

impl OpResultKind {
    /// The §11 rendering name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Conflict { .. } => "conflict",
            Self::Error { .. } => "error",
        }
    }
}

impl PushResult {
    pub(crate) fn decode(r: &mut Reader<'_>, version: WireVersion) -> Result<Self, DecodeError> {
        let client_commit_id = r.str("PUSH_RESULT.clientCommitId")?;
        let status = enum_byte(r, "PUSH_RESULT.status", 3)?;
        let commit_seq = r.opt("PUSH_RESULT.commitSeq", |r| r.i64("PUSH_RESULT.commitSeq"))?;
        let status = match (status, commit_seq) {
            (1, Some(commit_seq)) => PushStatus::Applied { commit_seq },
            (2, Some(commit_seq)) => PushStatus::Cached { commit_seq },
            (3, None) => PushStatus::Rejected,
            _ => {
                return Err(DecodeError::Constraint {
                    rule: "PUSH_RESULT.commitSeq is present iff the status is applied or cached",
                })
            }
        };
        let results = r.list("PUSH_RESULT.results", 5, |r| OpResult::decode(r, version))?;
        Ok(Self {
            client_commit_id,
            status,
            results,
        })
    }

    pub(crate) fn encode(
        &self,
        out: &mut Vec<u8>,
        version: WireVersion,
    ) -> Result<(), EncodeError> {
        put_str(out, &self.client_commit_id, "PUSH_RESULT.clientCommitId")?;
        put_u8(
            out,
            match self.status {
                PushStatus::Applied { .. } => 1,
                PushStatus::Cached { .. } => 2,
                PushStatus::Rejected => 3,
            },
        );
        put_opt(out, self.status.commit_seq().as_ref(), |o, v| {
            put_i64(o, *v, "PUSH_RESULT.commitSeq")
        })?;
        put_len(out, self.results.len(), "PUSH_RESULT.results")?;
        self.results
            .iter()
            .try_for_each(|res| res.encode(out, version))
    }
}

impl OpResult {
    fn decode(r: &mut Reader<'_>, version: WireVersion) -> Result<Self, DecodeError> {
        let op_index = r.i32("result.opIndex")?;
        let kind = match enum_byte(r, "result.status", 3)? {
            1 => OpResultKind::Applied,
            2 => OpResultKind::Conflict {
                code: r.str("result.code")?,
                message: r.str("result.message")?,
                server_version: r.i64("result.serverVersion")?,
                server_row: r.bytes("result.serverRow")?,
                conflict_columns: if version.has_sparse_rows() {
                    Some(r.bytes("result.conflictColumns")?)
                } else {
                    None
                },
            },
            _ => OpResultKind::Error {
                code: r.str("result.code")?,
                message: r.str("result.message")?,
                retryable: r.bool("result.retryable")?,
            },
        };
        Ok(Self { op_index, kind })
    }

    fn encode(&self, out: &mut Vec<u8>, version: WireVersion) -> Result<(), EncodeError> {
        put_i32(out, self.op_index);
        match &self.kind {
            OpResultKind::Applied => {
                put_u8(out, 1);
                Ok(())
            }
            OpResultKind::Conflict {
                code,
                message,
                server_version,
                server_row,
                conflict_columns,
            } => {
                if conflict_columns.is_some() != version.has_sparse_rows() {
                    return Err(EncodeError::VersionMismatch {
                        what: "result.conflictColumns",
                    });
                }
                put_u8(out, 2);
                put_str(out, code, "result.code")?;
                put_str(out, message, "result.message")?;
                put_i64(out, *server_version, "result.serverVersion")?;
                put_bytes(out, server_row, "result.serverRow")?;
                match conflict_columns {
                    Some(columns) => put_bytes(out, columns, "result.conflictColumns"),
                    None => Ok(()),
                }
            }
            OpResultKind::Error {
                code,
                message,
                retryable,
            } => {
                put_u8(out, 3);
                put_str(out, code, "result.code")?;
                put_str(out, message, "result.message")?;
                put_bool(out, *retryable);
                Ok(())
            }
        }
    }
}

/// Recovery metadata for a rejected push result (§6.3.1); it immediately
/// follows the rejected `PUSH_RESULT` it completes, names the same commit,
/// and has entries for that result's `error` records only (checked on
/// decode and on encode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushResultDetails {
    /// The id of the rejected commit it completes; never empty.
    pub client_commit_id: String,
    /// At least one entry, one per error operation at most.
    pub entries: Vec<DetailEntry>,
}

/// Details of one error operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetailEntry {
    /// The operation index of an `error` record; non-negative, unique in
    /// the frame.
    pub op_index: i32,
    /// The bounded details object (§6.3.1), as JSON text.
    pub details_json: String,
}

impl PushResultDetails {
    fn check(&self) -> Result<(), &'static str> {
        if self.client_commit_id.is_empty() {
            return Err("PUSH_RESULT_DETAILS.clientCommitId must not be empty");
        }
        if self.entries.is_empty() {
            return Err("PUSH_RESULT_DETAILS.entries must not be empty");
        }
        // Uniqueness by sort and compare: a crafted frame of many entries
        // costs O(n log n), never O(n²).
        let mut seen: Vec<i32> = Vec::with_capacity(self.entries.len());
        for entry in &self.entries {
            if entry.op_index < 0 {
                return Err("PUSH_RESULT_DETAILS opIndex must not be negative");
            }
            seen.push(entry.op_index);
        }
        seen.sort_unstable();
        if seen.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err("PUSH_RESULT_DETAILS opIndex values must be unique");
        }
        for entry in &self.entries {
            super::details::check_details_json(&entry.details_json)?;
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let client_commit_id = r.str("PUSH_RESULT_DETAILS.clientCommitId")?;
        let entries = r.list("PUSH_RESULT_DETAILS.entries", 8, |r| {
            Ok(DetailEntry {
                op_index: r.i32("PUSH_RESULT_DETAILS.opIndex")?,
                details_json: r.str("PUSH_RESULT_DETAILS.detailsJson")?,
            })
        })?;
        let frame = Self {
            client_commit_id,
            entries,
        };
        frame
            .check()
            .map_err(|rule| DecodeError::Constraint { rule })?;
        Ok(frame)
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.check()
            .map_err(|rule| EncodeError::Constraint { rule })?;
        put_str(
            out,
            &self.client_commit_id,
            "PUSH_RESULT_DETAILS.clientCommitId",
        )?;
        put_len(out, self.entries.len(), "PUSH_RESULT_DETAILS.entries")?;
        for entry in &self.entries {
            put_i32(out, entry.op_index);
            put_str(out, &entry.details_json, "PUSH_RESULT_DETAILS.detailsJson")?;
        }
        Ok(())
    }
}
