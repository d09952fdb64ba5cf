//! The conflict matrix of non-crdt columns (`engine.md` §4.4), as a pure
//! decision. Authorization is checked before and takes precedence.

use crate::wire::request::OpKind;

/// What an operation does to a row, before authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Update the existing row to `stored + 1`.
    Update,
    /// Insert at version 1 (subject to the delete policy).
    Insert,
    /// Conflict: the stored version and row are returned.
    Conflict,
    /// `sync.row_missing` (after authorizing the payload).
    RowMissing,
    /// Delete the existing row (no version check).
    Delete,
    /// Delete of an absent row: applied, no change.
    Nothing,
}

/// The matrix row for `op` on a row stored at `stored` (None = absent)
/// with `base_version`.
pub(crate) fn decide(op: OpKind, stored: Option<i64>, base_version: Option<i64>) -> Decision {
    match (op, stored, base_version) {
        (OpKind::Delete, Some(_), _) => Decision::Delete,
        (OpKind::Delete, None, _) => Decision::Nothing,
        (OpKind::Upsert, Some(_), None) => Decision::Update,
        (OpKind::Upsert, Some(v), Some(b)) if b != 0 && b == v => Decision::Update,
        (OpKind::Upsert, Some(_), Some(_)) => Decision::Conflict,
        (OpKind::Upsert, None, None | Some(0)) => Decision::Insert,
        (OpKind::Upsert, None, Some(_)) => Decision::RowMissing,
    }
}

#[cfg(test)]
mod tests {
    use super::Decision::*;
    use super::*;

    #[test]
    fn matrix_rows() {
        let up = OpKind::Upsert;
        let del = OpKind::Delete;
        for (op, stored, base, expected) in [
            (up, Some(3), None, Update),
            (up, Some(3), Some(3), Update),
            (up, Some(3), Some(2), Conflict),
            (up, Some(3), Some(-3), Conflict),
            (up, Some(3), Some(0), Conflict),
            (up, None, None, Insert),
            (up, None, Some(0), Insert),
            (up, None, Some(5), RowMissing),
            (up, None, Some(-1), RowMissing),
            (del, Some(3), Some(99), Delete),
            (del, Some(3), None, Delete),
            (del, None, Some(1), Nothing),
            (del, None, None, Nothing),
        ] {
            assert_eq!(
                decide(op, stored, base),
                expected,
                "{op:?} {stored:?} {base:?}"
            );
        }
    }
}
