//! The push prelude: every read a push makes right after taking the
//! partition lock, asked for at once so that a dialect whose statements
//! cross a network can serve them in one round trip
//! ([`StorageTransaction::begin_push`](crate::StorageTransaction::begin_push)).

use crate::error::Result;
use crate::gate::ServeGate;
use crate::push_result::StoredPushResult;
use crate::rows::StoredRow;

/// The push prelude made of the single calls, in the order of
/// [`StorageTransaction::begin_push`](crate::StorageTransaction::begin_push):
/// its default body, and what the validating front does for a backend
/// that does not batch it.
pub(crate) fn single_calls<T: crate::StorageTransaction + ?Sized>(
    tx: &mut T,
    request: &PushPreludeRequest,
) -> Result<PushPrelude> {
    tx.lock_partition_for_push()?;
    let gate = tx.read_serve_gate(request.running_schema_version)?;
    let push_result = tx.get_push_result(&request.client_id, &request.client_commit_id);
    let rows = match push_result {
        Ok(None) => Some(
            request
                .rows
                .iter()
                .map(|(table, ids)| tx.get_rows(table, ids))
                .collect::<Result<Vec<_>>>()?,
        ),
        // A replay or a failed read: the push reads no row.
        _ => None,
    };
    Ok(PushPrelude {
        gate,
        push_result,
        rows,
    })
}

/// What a push reads under the lock, before its first write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushPreludeRequest {
    /// The writer's schema version whose serve gate is read.
    pub running_schema_version: i32,
    /// Idempotency key: the pushing client.
    pub client_id: String,
    /// Idempotency key: the client's commit id.
    pub client_commit_id: String,
    /// The rows the push will read first, grouped by table: `(table, row
    /// ids)`. Only a hint: a dialect may leave them unread (see
    /// [`PushPrelude::rows`]).
    pub rows: Vec<(String, Vec<String>)>,
    /// The caller accepts a row write's `constraint_violation` (with its
    /// `op_index`) from a later call of the transaction instead of from
    /// `upsert_row` itself, and finishes an applied push with
    /// [`commit_push`](crate::StorageTransaction::commit_push). A dialect
    /// may then send a write with the statements that follow it (Postgres:
    /// the last row write travels in the `COMMIT` message). `false`: every
    /// write reports its own violation, as without a prelude.
    pub deferred_violations: bool,
}

/// How [`commit_push`](crate::StorageTransaction::commit_push) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushCommitOutcome {
    /// Every staged write committed.
    Committed,
    /// A row write sent with the commit violated a constraint: none of the
    /// push's writes persisted, and the rejection built for `op_index` was
    /// stored (first writer wins) and committed instead.
    Rejected {
        /// The operation whose write violated the constraint.
        op_index: u32,
    },
}

/// What [`begin_push`](crate::StorageTransaction::begin_push) read, in the
/// order the lock-gate-idempotency sequence reads it.
#[derive(Debug)]
pub struct PushPrelude {
    /// The serve gate of `running_schema_version`, read under the lock.
    pub gate: ServeGate,
    /// The stored push result of the key, read under the lock; an error
    /// here (`idempotency_cache_miss` included) is the error
    /// `get_push_result` would have returned, left for the caller to weigh
    /// after the gate.
    pub push_result: Result<Option<StoredPushResult>>,
    /// The candidate rows of each requested table, in the request's order
    /// (`None` = absent), as `get_rows` returns them before any write of
    /// this transaction; `None` when the dialect did not read them (the
    /// caller then reads each row itself).
    pub rows: Option<Vec<Vec<Option<StoredRow>>>>,
}

impl PushPrelude {
    /// The prefetched candidate row `row_id` of `table`, looked up by the
    /// request that produced this prelude: `Some(found)` when it was read,
    /// `None` when it was not asked for or the dialect did not read rows.
    pub fn row<'p>(
        &'p self,
        request: &PushPreludeRequest,
        table: &str,
        row_id: &str,
    ) -> Option<Option<&'p StoredRow>> {
        let rows = self.rows.as_ref()?;
        request
            .rows
            .iter()
            .zip(rows)
            .filter(|((t, _), _)| t == table)
            .find_map(|((_, ids), found)| {
                let i = ids.iter().position(|id| id == row_id)?;
                found.get(i).map(Option::as_ref)
            })
    }
}
