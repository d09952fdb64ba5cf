//! The response byte budget of one round (`engine.md` §8 item 8).
//!
//! The measure is the data a pull emits: a bootstrap row counts its row id
//! and payload; a commit counts its actor and, per change, its row id,
//! scope variables and values, and payload. Frame overhead, headers and
//! push results are not counted (push results are bounded by the
//! operation cap and the payload limit). The budget is checked before each
//! bootstrap row and each commit, so a round emits at most the budget plus
//! one row or one (never split) commit.

use std::cell::Cell;

use sync_core::{ScannedRow, StoredCommit};

/// What the round's pull has emitted against its budget.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: usize,
    spent: Cell<usize>,
}

impl Budget {
    /// A fresh budget of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            spent: Cell::new(0),
        }
    }

    /// Whether the budget is used up: no further row or commit is emitted.
    pub(crate) fn exhausted(&self) -> bool {
        self.spent.get() >= self.limit
    }

    /// Counts `bytes` as emitted.
    pub(crate) fn charge(&self, bytes: usize) {
        self.spent.set(self.spent.get().saturating_add(bytes));
    }
}

/// The measure of one bootstrap row.
pub(crate) fn row_bytes(row: &ScannedRow) -> usize {
    row.row_id.len() + row.payload.len()
}

/// The measure of one commit.
pub(crate) fn commit_bytes(commit: &StoredCommit) -> usize {
    let changes: usize = commit
        .changes
        .iter()
        .map(|c| {
            let scopes: usize = c.scopes.iter().map(|(k, v)| k.len() + v.len()).sum();
            c.row_id.len() + scopes + c.payload.as_ref().map_or(0, Vec::len)
        })
        .sum();
    commit.actor_id.len() + changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_used_up_once_reached() {
        let budget = Budget::new(10);
        assert!(!budget.exhausted());
        budget.charge(9);
        assert!(!budget.exhausted());
        budget.charge(1);
        assert!(budget.exhausted());
        assert!(Budget::new(0).exhausted());
    }

    #[test]
    fn a_commit_measures_its_actor_row_ids_scopes_and_payloads() {
        use sync_core::{ChangeOp, StoredChange, StoredCommit, StoredScopes};
        let change =
            |row_id: &str, scopes: &[(&str, &str)], payload: Option<Vec<u8>>| StoredChange {
                table: "tasks".to_owned(),
                row_id: row_id.to_owned(),
                op: if payload.is_some() {
                    ChangeOp::Upsert
                } else {
                    ChangeOp::Delete
                },
                row_version: payload.as_ref().map(|_| 1),
                scopes: scopes
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<StoredScopes>(),
                payload,
            };
        let commit = StoredCommit {
            commit_seq: 7,
            created_at_ms: 0,
            actor_id: "alice".to_owned(),
            changes: vec![
                // 2 + (10 + 2) + (3 + 1) + 100
                change(
                    "t1",
                    &[("project_id", "p1"), ("org", "o")],
                    Some(vec![0; 100]),
                ),
                // 3 + (1 + 12)
                change("t22", &[("k", "a-long-value")], None),
            ],
        };
        assert_eq!(commit_bytes(&commit), 5 + 118 + 16);
        let row = ScannedRow {
            row_id: "t1".to_owned(),
            server_version: 3,
            payload: vec![0; 40],
        };
        assert_eq!(row_bytes(&row), 42);
    }
}
