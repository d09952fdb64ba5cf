//! The standard push sequence of the contract (`storage-contract.md` §6.3),
//! as a server process runs it for one client commit:
//!
//! optimistic pool `get_push_result` → `begin` → `lock_partition_for_push` →
//! `tx.read_serve_gate` + check (refusal → rollback) → `tx.get_push_result`
//! (hit → rollback, replay) → `upsert_row` per row → `append_commit` →
//! `put_push_result` → `commit`. Any error rolls the transaction back; a
//! `writer_fence_rejected` is never persisted.
//!
//! An old binary that predates RFC 0007 has no serve gate: [`Gate::Skip`]
//! plays it, so the database-side writer fence is what stops it.

use sync_core::{
    check_serve_gate, codec, CompiledTable, Error, NewChange, NewCommit, Result, RowValue,
    ServeContext, ServerStorage, StorageTransaction, StoredPushResult, StoredRow, StoredScopes,
};

/// Whether the pushing process checks the serve gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Gate-aware code: read the gate inside the transaction, refuse on a refusal.
    Check,
    /// Code older than RFC 0007: no gate (the writer fence still applies).
    Skip,
}

/// What a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Applied as this commit.
    Applied(i64),
    /// Already applied earlier (idempotent replay).
    Replayed,
}

/// One server process pushing for clients.
pub struct Pusher<'a> {
    /// The process's storage instance.
    pub storage: &'a dyn ServerStorage,
    /// The table as this process's code knows it.
    pub table: &'a CompiledTable,
    /// The process's declarations.
    pub ctx: ServeContext,
    /// Gate-aware or not.
    pub gate: Gate,
}

/// One client commit.
#[derive(Debug, Clone)]
pub struct ClientCommit<'r> {
    /// Partition.
    pub partition: &'r str,
    /// Pushing client.
    pub client_id: &'r str,
    /// The client's commit id.
    pub commit_id: &'r str,
    /// Acting user.
    pub actor: &'r str,
    /// Creation time.
    pub created_at_ms: i64,
    /// Row values (in this process's column order).
    pub rows: &'r [Vec<RowValue>],
}

impl std::fmt::Debug for Pusher<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher")
            .field("table", &self.table.name)
            .field("gate", &self.gate)
            .finish_non_exhaustive()
    }
}

impl Pusher<'_> {
    /// Runs the push sequence for one commit.
    pub fn push(&self, commit: &ClientCommit<'_>) -> Result<Pushed> {
        if self
            .storage
            .get_push_result(commit.partition, commit.client_id, commit.commit_id)?
            .is_some()
        {
            return Ok(Pushed::Replayed);
        }
        let mut tx = self.storage.begin(commit.partition)?;
        match self.apply(tx.as_mut(), commit) {
            Ok(Some(seq)) => {
                tx.commit()?;
                Ok(Pushed::Applied(seq))
            }
            Ok(None) => {
                tx.rollback()?;
                Ok(Pushed::Replayed)
            }
            Err(error) => {
                // Rolling back a poisoned transaction never fails because of
                // the poison; the push's own error is the one to report.
                let _ = tx.rollback();
                Err(error)
            }
        }
    }

    /// Everything between `begin` and `commit`; `None` for a replay.
    fn apply(
        &self,
        tx: &mut dyn StorageTransaction,
        commit: &ClientCommit<'_>,
    ) -> Result<Option<i64>> {
        tx.lock_partition_for_push()?;
        if self.gate == Gate::Check {
            let running = tx.writer_version();
            let gate = tx.read_serve_gate(running)?;
            check_serve_gate(&gate, running, &self.ctx)?;
        }
        if tx
            .get_push_result(commit.client_id, commit.commit_id)?
            .is_some()
        {
            return Ok(None);
        }
        let mut changes = Vec::with_capacity(commit.rows.len());
        for (index, values) in commit.rows.iter().enumerate() {
            let (row_id, scopes) = self.identity(values)?;
            let payload = codec::encode_row(self.table, values)?;
            let version = tx
                .get_row(&self.table.name, &row_id)?
                .map_or(1, |row| row.server_version + 1);
            let row = StoredRow {
                row_id: row_id.clone(),
                server_version: version,
                scopes: scopes.clone(),
                payload: payload.clone(),
                column_versions: None,
            };
            tx.upsert_row(&self.table.name, &row, u32::try_from(index).ok())?;
            changes.push(NewChange::upsert(
                &self.table.name,
                row_id,
                version,
                scopes,
                payload,
            ));
        }
        let seq = tx.append_commit(&NewCommit {
            client_id: commit.client_id.to_owned(),
            client_commit_id: commit.commit_id.to_owned(),
            actor_id: commit.actor.to_owned(),
            created_at_ms: commit.created_at_ms,
            changes,
        })?;
        let mut result = StoredPushResult::applied(seq);
        result.recorded_at_ms = Some(commit.created_at_ms);
        tx.put_push_result(commit.client_id, commit.commit_id, &result)?;
        Ok(Some(seq))
    }

    /// Row id and stored scopes, derived from the values as the push layer does.
    fn identity(&self, values: &[RowValue]) -> Result<(String, StoredScopes)> {
        let render = |index: usize| {
            values
                .get(index)
                .and_then(RowValue::render_key)
                .ok_or_else(|| Error::new(sync_core::ErrorCode::InvalidRowId))
        };
        let row_id = render(self.table.primary_key_index)?;
        let scopes = self
            .table
            .scope_patterns
            .iter()
            .map(|p| Ok((p.variable.clone(), render(p.column_index)?)))
            .collect::<Result<StoredScopes>>()?;
        Ok((row_id, scopes))
    }
}
