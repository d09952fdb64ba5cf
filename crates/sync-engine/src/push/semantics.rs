//! Which write rules a push follows, chosen once from the request's wire
//! version (`docs/design/wire-v3.md` §5.1), and how a stored conflict
//! record is answered at another version than the one it was written at
//! (§5.3).
//!
//! Versions 1 and 2 push full rows and conflict on the whole row
//! (`engine.md` §4.2, with the configured [`DeletePolicy`]); version 3
//! pushes sparse rows, conflicts per column and refuses an unversioned
//! re-creation of a deleted row (design §4). Nothing else in the push path
//! asks for the version.

use sync_core::{CompiledSchema, PushOperationResult};

use crate::config::DeletePolicy;
use crate::wire::request::Operation;

/// The write rules of one round's pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteSemantics {
    /// Wire versions 1 and 2: full-row payloads, whole-row conflicts.
    FullRow {
        /// What an unversioned upsert of a deleted row does.
        delete_policy: DeletePolicy,
    },
    /// Wire version 3: sparse payloads, per-column conflicts with
    /// `conflictColumns`, `sync.row_deleted`, immutable scope columns.
    Sparse,
}

impl WriteSemantics {
    /// The rules of a request at `wire_version`.
    pub(crate) fn of(wire_version: u16, delete_policy: DeletePolicy) -> Self {
        if wire_version >= 3 {
            WriteSemantics::Sparse
        } else {
            WriteSemantics::FullRow { delete_policy }
        }
    }

    /// A stored result's records as this version answers them: version 3
    /// gives every conflict record a `conflictColumns` bitmap (one stored
    /// at version 2 has none: every non-key, non-crdt column of the
    /// operation's table is marked, decision D13); versions 1 and 2 drop
    /// it. `operations` are the replayed commit's.
    pub(crate) fn answer_records(
        self,
        records: &mut [PushOperationResult],
        operations: Option<&[Operation]>,
        schema: &CompiledSchema,
    ) {
        for record in records {
            let PushOperationResult::Conflict {
                op_index,
                conflict_columns,
                ..
            } = record
            else {
                continue;
            };
            match self {
                WriteSemantics::FullRow { .. } => *conflict_columns = None,
                WriteSemantics::Sparse if conflict_columns.is_none() => {
                    let table = operations
                        .and_then(|ops| ops.get(*op_index as usize))
                        .and_then(|op| schema.table(&op.table));
                    *conflict_columns = Some(match table {
                        Some(table) => whole_row_bitmap(table),
                        None => Vec::new(),
                    });
                }
                WriteSemantics::Sparse => {}
            }
        }
    }
}

/// A bitmap of `ceil(n / 8)` bytes with the bits of `marked` set (bit `i`
/// = column `i`, least significant bit first; padding bits zero).
pub(crate) fn column_bitmap(
    column_count: usize,
    marked: impl IntoIterator<Item = usize>,
) -> Vec<u8> {
    let mut out = vec![0u8; column_count.div_ceil(8)];
    for i in marked.into_iter().filter(|&i| i < column_count) {
        out[i / 8] |= 1 << (i % 8);
    }
    out
}

/// Whether column `i` of `table` can conflict: neither the key nor a crdt
/// column (decision D6; crdt columns merge).
pub(crate) fn comparable(table: &sync_core::CompiledTable, i: usize) -> bool {
    i != table.primary_key_index && !table.crdt_columns.iter().any(|(c, _)| *c == i)
}

/// Every non-key, non-crdt column of `table`: what a whole-row conflict
/// means.
fn whole_row_bitmap(table: &sync_core::CompiledTable) -> Vec<u8> {
    let n = table.columns.len();
    column_bitmap(n, (0..n).filter(|&i| comparable(table, i)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_choose_their_rules() {
        let policy = DeletePolicy::DeleteWins;
        assert_eq!(
            WriteSemantics::of(1, policy),
            WriteSemantics::FullRow {
                delete_policy: policy
            }
        );
        assert_eq!(
            WriteSemantics::of(2, policy),
            WriteSemantics::FullRow {
                delete_policy: policy
            }
        );
        assert_eq!(WriteSemantics::of(3, policy), WriteSemantics::Sparse);
    }

    #[test]
    fn bitmaps_are_sized_and_padded() {
        assert_eq!(column_bitmap(3, [1, 2]), vec![0b110]);
        assert_eq!(column_bitmap(9, [0, 8]), vec![1, 1]);
        assert_eq!(column_bitmap(8, []), vec![0]);
        // A column past the last is ignored, never a padding bit: the
        // first index past the end too.
        assert_eq!(column_bitmap(3, [5, 9]), vec![0]);
        assert_eq!(column_bitmap(3, [3]), vec![0]);
        assert_eq!(column_bitmap(9, [0, 9]), vec![1, 0]);
    }
}
