//! The pull frames: `PULL_HEADER` (§4.2), `SUBSCRIPTION` (§4.3),
//! `SUB_START` / `SUB_END` (§4.4) and `COMMIT` (§4.5).

use super::enum_byte;
use crate::error::{DecodeError, EncodeError};
use crate::primitives::{
    put_bool, put_bytes, put_i32, put_i64, put_json, put_len, put_map, put_opt, put_str,
    put_str_list, put_u16, put_u8, Reader,
};
use crate::values::{RawJson, ScopeMap, StoredScopes};

/// The segment delivery capabilities of a pull (`accept`, bits 0–3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Accept(u8);

impl Accept {
    /// Bit 0: rows segments inline.
    pub const INLINE_ROWS: u8 = 0b0001;
    /// Bit 1: rows segments by reference.
    pub const EXTERNAL_ROWS: u8 = 0b0010;
    /// Bit 2: sqlite segments.
    pub const SQLITE: u8 = 0b0100;
    /// Bit 3: signed URLs.
    pub const SIGNED_URLS: u8 = 0b1000;

    /// The mask from its byte; `None` when a bit 4–7 is set (a decode
    /// error on the wire).
    pub fn from_bits(bits: u8) -> Option<Self> {
        (bits & 0xF0 == 0).then_some(Self(bits))
    }

    /// The byte on the wire.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// Whether every bit of `flags` is set.
    pub fn contains(self, flags: u8) -> bool {
        self.0 & flags == flags
    }
}

impl Default for Accept {
    /// The client baseline: inline and external rows segments.
    fn default() -> Self {
        Self(Self::INLINE_ROWS | Self::EXTERNAL_ROWS)
    }
}

/// The pull half of a request; its limits are clamped by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PullHeader {
    /// Max changes per subscription; `0` = server default.
    pub limit_commits: i32,
    /// Bootstrap page size in rows; `0` = server default.
    pub limit_snapshot_rows: i32,
    /// Max bootstrap pages per pull; `0` = server default.
    pub max_snapshot_pages: i32,
    /// Segment delivery capabilities.
    pub accept: Accept,
}

impl PullHeader {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let limit_commits = r.i32("PULL_HEADER.limitCommits")?;
        let limit_snapshot_rows = r.i32("PULL_HEADER.limitSnapshotRows")?;
        let max_snapshot_pages = r.i32("PULL_HEADER.maxSnapshotPages")?;
        let accept =
            Accept::from_bits(r.u8("PULL_HEADER.accept")?).ok_or(DecodeError::Constraint {
                rule: "PULL_HEADER.accept bits 4-7 must be zero",
            })?;
        Ok(Self {
            limit_commits,
            limit_snapshot_rows,
            max_snapshot_pages,
            accept,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_i32(out, self.limit_commits);
        put_i32(out, self.limit_snapshot_rows);
        put_i32(out, self.max_snapshot_pages);
        put_u8(out, self.accept.bits());
        Ok(())
    }
}

/// One subscription of a pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// Client-chosen id, echoed by the server.
    pub id: String,
    /// The table subscribed to.
    pub table: String,
    /// Requested scopes.
    pub scopes: ScopeMap,
    /// Host-opaque snapshot parameters.
    pub params: Option<RawJson>,
    /// Last fully applied commit sequence; `-1` = never synced.
    pub cursor: i64,
    /// The resume token of an unfinished bootstrap, round-tripped unchanged.
    pub bootstrap_state: Option<RawJson>,
}

pub(crate) fn read_scope_map(
    r: &mut Reader<'_>,
    what: &'static str,
) -> Result<ScopeMap, DecodeError> {
    r.map(what, 4, |r| r.str_list(what))
}

pub(crate) fn put_scope_map(
    out: &mut Vec<u8>,
    map: &ScopeMap,
    what: &'static str,
) -> Result<(), EncodeError> {
    put_map(out, map, what, |o, list| put_str_list(o, list, what))
}

impl Subscription {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            id: r.str("SUBSCRIPTION.id")?,
            table: r.str("SUBSCRIPTION.table")?,
            scopes: read_scope_map(r, "SUBSCRIPTION.scopes")?,
            params: r.opt("SUBSCRIPTION.params", |r| r.json("SUBSCRIPTION.params"))?,
            cursor: r.i64("SUBSCRIPTION.cursor")?,
            bootstrap_state: r.opt("SUBSCRIPTION.bootstrapState", |r| {
                r.json("SUBSCRIPTION.bootstrapState")
            })?,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_str(out, &self.id, "SUBSCRIPTION.id")?;
        put_str(out, &self.table, "SUBSCRIPTION.table")?;
        put_scope_map(out, &self.scopes, "SUBSCRIPTION.scopes")?;
        put_opt(out, self.params.as_ref(), |o, v| {
            put_json(o, v, "SUBSCRIPTION.params")
        })?;
        put_i64(out, self.cursor, "SUBSCRIPTION.cursor")?;
        put_opt(out, self.bootstrap_state.as_ref(), |o, v| {
            put_json(o, v, "SUBSCRIPTION.bootstrapState")
        })
    }
}

/// A subscription's status in the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubStatus {
    /// Served (`status` 1).
    Active,
    /// Revoked (`status` 2, §3.3).
    Revoked,
    /// Cursor behind the pruning horizon (`status` 3, §4.6).
    Reset,
}

impl SubStatus {
    /// The §11 rendering name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Revoked => "revoked",
            Self::Reset => "reset",
        }
    }

    fn byte(self) -> u8 {
        match self {
            Self::Active => 1,
            Self::Revoked => 2,
            Self::Reset => 3,
        }
    }
}

/// Opens a subscription's section of the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubStart {
    /// Echo of the subscription id.
    pub id: String,
    /// Active, revoked or reset.
    pub status: SubStatus,
    /// Empty for active; a §10 code otherwise.
    pub reason_code: String,
    /// The effective scopes (empty when not active).
    pub effective_scopes: ScopeMap,
    /// Whether this response delivers bootstrap segments.
    pub bootstrap: bool,
}

impl SubStart {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let id = r.str("SUB_START.id")?;
        let status = match enum_byte(r, "SUB_START.status", 3)? {
            1 => SubStatus::Active,
            2 => SubStatus::Revoked,
            _ => SubStatus::Reset,
        };
        Ok(Self {
            id,
            status,
            reason_code: r.str("SUB_START.reasonCode")?,
            effective_scopes: read_scope_map(r, "SUB_START.effectiveScopes")?,
            bootstrap: r.bool("SUB_START.bootstrap")?,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_str(out, &self.id, "SUB_START.id")?;
        put_u8(out, self.status.byte());
        put_str(out, &self.reason_code, "SUB_START.reasonCode")?;
        put_scope_map(out, &self.effective_scopes, "SUB_START.effectiveScopes")?;
        put_bool(out, self.bootstrap);
        Ok(())
    }
}

/// Closes a subscription's section: what the client persists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubEnd {
    /// The cursor to persist and send next time.
    pub next_cursor: i64,
    /// Present iff a bootstrap is unfinished: the resume token.
    pub bootstrap_state: Option<RawJson>,
}

impl SubEnd {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            next_cursor: r.i64("SUB_END.nextCursor")?,
            bootstrap_state: r.opt("SUB_END.bootstrapState", |r| {
                r.json("SUB_END.bootstrapState")
            })?,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_i64(out, self.next_cursor, "SUB_END.nextCursor")?;
        put_opt(out, self.bootstrap_state.as_ref(), |o, v| {
            put_json(o, v, "SUB_END.bootstrapState")
        })
    }
}

/// One commit of the log, filtered to a subscription's effective scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The commit's sequence number.
    pub commit_seq: i64,
    /// Server commit time, epoch milliseconds.
    pub created_at_ms: i64,
    /// The pushing actor.
    pub actor_id: String,
    /// The frame-local table dictionary that changes index into.
    pub tables: Vec<String>,
    /// The changes.
    pub changes: Vec<Change>,
}

/// One row change of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Index into the commit's `tables`.
    pub table_index: u16,
    /// The row's id.
    pub row_id: String,
    /// The row's stored scopes.
    pub scopes: StoredScopes,
    /// Upsert (with version and row) or delete.
    pub op: ChangeOp,
}

/// What a change does; version and row travel with an upsert only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeOp {
    /// The row was written (`op` 1).
    Upsert {
        /// The row's server version after the write.
        row_version: i64,
        /// The row in the generated row codec, opaque to this crate.
        row: Vec<u8>,
    },
    /// The row was deleted (`op` 2).
    Delete,
}

impl ChangeOp {
    /// The §11 rendering name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Upsert { .. } => "upsert",
            Self::Delete => "delete",
        }
    }
}

const TABLE_INDEX_RANGE: &str = "change.tableIndex is outside the commit's table dictionary";
// Smallest change record: index, empty id, op, absent version, empty map,
// absent row.
const MIN_CHANGE: u64 = 2 + 4 + 1 + 1 + 4 + 1;

impl Commit {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let commit_seq = r.i64("COMMIT.commitSeq")?;
        let created_at_ms = r.i64("COMMIT.createdAtMs")?;
        let actor_id = r.str("COMMIT.actorId")?;
        let tables = r.str_list("COMMIT.tables")?;
        let changes = r.list("COMMIT.changes", MIN_CHANGE, |r| {
            Change::decode(r, tables.len())
        })?;
        Ok(Self {
            commit_seq,
            created_at_ms,
            actor_id,
            tables,
            changes,
        })
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_i64(out, self.commit_seq, "COMMIT.commitSeq")?;
        put_i64(out, self.created_at_ms, "COMMIT.createdAtMs")?;
        put_str(out, &self.actor_id, "COMMIT.actorId")?;
        put_str_list(out, &self.tables, "COMMIT.tables")?;
        put_len(out, self.changes.len(), "COMMIT.changes")?;
        for change in &self.changes {
            if usize::from(change.table_index) >= self.tables.len() {
                return Err(EncodeError::Constraint {
                    rule: TABLE_INDEX_RANGE,
                });
            }
            change.encode(out)?;
        }
        Ok(())
    }
}

impl Change {
    fn decode(r: &mut Reader<'_>, tables: usize) -> Result<Self, DecodeError> {
        let table_index = r.u16("change.tableIndex")?;
        if usize::from(table_index) >= tables {
            return Err(DecodeError::Constraint {
                rule: TABLE_INDEX_RANGE,
            });
        }
        let row_id = r.str("change.rowId")?;
        let op = enum_byte(r, "change.op", 2)?;
        let row_version = r.opt("change.rowVersion", |r| r.i64("change.rowVersion"))?;
        let scopes = r.map("change.scopes", 4, |r| r.str("change.scopes"))?;
        let row = r.opt("change.row", |r| r.bytes("change.row"))?;
        let op = match (op, row_version, row) {
            (1, Some(row_version), Some(row)) => ChangeOp::Upsert { row_version, row },
            (2, None, None) => ChangeOp::Delete,
            _ => {
                return Err(DecodeError::Constraint {
                    rule: "change.rowVersion and change.row are present iff op is upsert",
                })
            }
        };
        Ok(Self {
            table_index,
            row_id,
            scopes,
            op,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_u16(out, self.table_index);
        put_str(out, &self.row_id, "change.rowId")?;
        let (byte, version, row) = match &self.op {
            ChangeOp::Upsert { row_version, row } => (1, Some(row_version), Some(row)),
            ChangeOp::Delete => (2, None, None),
        };
        put_u8(out, byte);
        put_opt(out, version, |o, v| put_i64(o, *v, "change.rowVersion"))?;
        put_map(out, &self.scopes, "change.scopes", |o, v| {
            put_str(o, v, "change.scopes")
        })?;
        put_opt(out, row, |o, v| put_bytes(o, v, "change.row"))
    }
}
