//! Column versions: the version of each column of a stored row, for the
//! column-level conflict rules of wire version 3 (`docs/design/wire-v3.md`
//! §3.1–§3.2).
//!
//! A column's version is the row's `server_version` at the column's last
//! write. Storage keeps them in the row's `_sync_column_versions` bytes,
//! opaque to it: a sequence of `(ordinal, version)` pairs, each number an
//! unsigned LEB128 varint, ordinal = the column's 0-based position in
//! declaration order, for the columns whose version exceeds 1. No pairs is
//! SQL `NULL`.
//!
//! This module reads and writes those bytes and nothing else:
//!
//! - [`ColumnVersions::read`] turns stored bytes (or their absence) into a
//!   version per column, conservatively: whatever cannot be trusted reads
//!   as "every column at the row's version" (the legacy reading), which can
//!   only turn a write into a conflict, never lose one;
//! - [`ColumnVersions::updated`] moves the columns an applied write
//!   presents to the new version;
//! - [`ColumnVersions::encode`] gives the bytes to store, `None` whenever
//!   they would read the same as `NULL` (so inserts and full-row writes
//!   never encode anything).
//!
//! ```
//! use sync_core::column_versions::{ColumnVersions, Reading};
//!
//! // A row of three columns (key first) at version 5, stored without
//! // column versions: every column reads at 5.
//! let stored = ColumnVersions::read(None, 3, 0, 5);
//! assert_eq!(stored.reading(), Reading::Legacy);
//! assert_eq!(stored.version(2), 5);
//!
//! // A write at version 6 that presents the key and column 1 only.
//! let after = stored.updated(&[true, true, false], 0, 6);
//! assert_eq!((after.version(1), after.version(2)), (6, 5));
//! let bytes = after.encode(0, 6).expect("column 2 is older than the row");
//! assert_eq!(bytes, vec![1, 6, 2, 5]);
//!
//! // Read back, the same versions.
//! let again = ColumnVersions::read(Some(&bytes), 3, 0, 6);
//! assert_eq!(again.reading(), Reading::Pairs);
//! assert_eq!((again.version(1), again.version(2)), (6, 5));
//! ```

/// The highest version a pair may carry: the protocol's safe-integer bound.
pub const MAX_VERSION: i64 = (1 << 53) - 1;

/// The longest well-formed bytes for a table of `column_count` columns: two
/// varints of at most ten bytes per column. Anything longer is refused
/// before it is stored.
pub fn max_stored_len(column_count: usize) -> usize {
    column_count.saturating_mul(20)
}

/// Whether `stored` may be written as a row's column versions: absent, or
/// non-empty and at most [`max_stored_len`] bytes. (Storage never reads
/// the pairs; this only keeps a bug from being stored quietly.)
pub fn storable(stored: Option<&[u8]>, column_count: usize) -> bool {
    stored.is_none_or(|bytes| !bytes.is_empty() && bytes.len() <= max_stored_len(column_count))
}

/// How stored column versions were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reading {
    /// No bytes (SQL `NULL`): every column at the row's version.
    Legacy,
    /// Well-formed pairs: listed columns at their version, the others at 1.
    Pairs,
    /// Well-formed pairs whose newest non-key version is below the row's
    /// version: a writer that knows nothing of column versions rewrote the
    /// row and left the bytes behind. Read as [`Reading::Legacy`].
    Stale,
    /// Bytes that are not well-formed pairs for this row (a truncated
    /// varint, a number above [`MAX_VERSION`], a repeated ordinal, an
    /// ordinal past the last column, a version of 1 or less or above the
    /// row's). Read as [`Reading::Legacy`]; the caller counts it.
    Malformed,
}

/// The version of every column of one stored row, in declaration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnVersions {
    versions: Vec<i64>,
    reading: Reading,
}

/// Reads one unsigned LEB128 varint of at most [`MAX_VERSION`].
fn varint(bytes: &[u8], at: &mut usize) -> Option<i64> {
    let mut value: u64 = 0;
    for shift in (0..).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        if shift > 56 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << shift;
        if value > MAX_VERSION as u64 {
            return None;
        }
        if byte & 0x80 == 0 {
            return i64::try_from(value).ok();
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The listed versions, or `None` when the bytes are malformed for a row
/// of `column_count` columns at `server_version`.
fn pairs(bytes: &[u8], column_count: usize, server_version: i64) -> Option<Vec<i64>> {
    let mut versions = vec![1; column_count];
    let mut listed = vec![false; column_count];
    let mut at = 0;
    while at < bytes.len() {
        let ordinal = usize::try_from(varint(bytes, &mut at)?).ok()?;
        let version = varint(bytes, &mut at)?;
        if ordinal >= column_count || listed[ordinal] || version <= 1 || version > server_version {
            return None;
        }
        listed[ordinal] = true;
        versions[ordinal] = version;
    }
    Some(versions)
}

impl ColumnVersions {
    /// Reads the stored bytes of a row of `column_count` columns whose
    /// primary key is column `primary_key`, at `server_version`.
    ///
    /// `None` reads as every column at `server_version`
    /// ([`Reading::Legacy`]); so do stale and malformed bytes (see
    /// [`Reading`]). A pair for the key is accepted; the key's version is
    /// never compared and reads as `server_version`.
    pub fn read(
        stored: Option<&[u8]>,
        column_count: usize,
        primary_key: usize,
        server_version: i64,
    ) -> Self {
        let legacy = |reading| Self {
            versions: vec![server_version; column_count],
            reading,
        };
        let Some(bytes) = stored else {
            return legacy(Reading::Legacy);
        };
        let Some(mut versions) = pairs(bytes, column_count, server_version) else {
            return legacy(Reading::Malformed);
        };
        let newest = versions
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != primary_key)
            .map(|(_, v)| *v)
            .max();
        if newest.is_none_or(|v| v < server_version) {
            return legacy(Reading::Stale);
        }
        if let Some(key) = versions.get_mut(primary_key) {
            *key = server_version;
        }
        Self {
            versions,
            reading: Reading::Pairs,
        }
    }

    /// How the stored bytes were read.
    pub fn reading(&self) -> Reading {
        self.reading
    }

    /// The version of column `column` (0 past the last column, which no
    /// version is ever below).
    pub fn version(&self, column: usize) -> i64 {
        self.versions.get(column).copied().unwrap_or(0)
    }

    /// Every column's version, in declaration order.
    pub fn versions(&self) -> &[i64] {
        &self.versions
    }

    /// The versions after an applied write at `new_version` that presents
    /// the columns marked in `present` (one flag per column): each present
    /// column and the key move to `new_version`, the others keep theirs.
    pub fn updated(&self, present: &[bool], primary_key: usize, new_version: i64) -> Self {
        let versions = self
            .versions
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if i == primary_key || present.get(i).copied().unwrap_or(false) {
                    new_version
                } else {
                    *v
                }
            })
            .collect();
        Self {
            versions,
            reading: Reading::Pairs,
        }
    }

    /// The bytes to store for a row at `server_version`: `None` when every
    /// non-key column is at `server_version` (which `NULL` reads as) or no
    /// column is above 1; otherwise one pair per non-key column above 1,
    /// ascending, with no pair for the key.
    pub fn encode(&self, primary_key: usize, server_version: i64) -> Option<Vec<u8>> {
        let non_key = || {
            self.versions
                .iter()
                .enumerate()
                .filter(move |(i, _)| *i != primary_key)
        };
        if non_key().all(|(_, v)| *v == server_version) {
            return None;
        }
        let mut out = Vec::new();
        for (ordinal, version) in non_key().filter(|(_, v)| **v > 1) {
            put_varint(&mut out, ordinal as u64);
            put_varint(&mut out, version.unsigned_abs());
        }
        (!out.is_empty()).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{max_stored_len, put_varint, storable, ColumnVersions, Reading, MAX_VERSION};

    fn blob(pairs: &[(u64, u64)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (o, v) in pairs {
            put_varint(&mut out, *o);
            put_varint(&mut out, *v);
        }
        out
    }

    #[test]
    fn null_reads_every_column_at_the_rows_version() {
        let v = ColumnVersions::read(None, 4, 0, 9);
        assert_eq!(v.reading(), Reading::Legacy);
        assert_eq!(v.versions(), &[9, 9, 9, 9]);
    }

    #[test]
    fn pairs_read_listed_columns_at_their_version_and_the_rest_at_one() {
        let b = blob(&[(1, 9), (3, 4)]);
        let v = ColumnVersions::read(Some(&b), 4, 0, 9);
        assert_eq!(v.reading(), Reading::Pairs);
        assert_eq!(v.versions(), &[9, 9, 1, 4]);
        // A pair for the key is accepted; the key reads at the row's version.
        let b = blob(&[(0, 3), (1, 9)]);
        let v = ColumnVersions::read(Some(&b), 4, 0, 9);
        assert_eq!(v.reading(), Reading::Pairs);
        assert_eq!(v.versions(), &[9, 9, 1, 1]);
    }

    #[test]
    fn bytes_older_than_the_row_read_as_every_column_changed() {
        // Newest non-key pair at 7, row at 9: rewritten by a writer that
        // does not keep column versions.
        let b = blob(&[(1, 7), (2, 5)]);
        let v = ColumnVersions::read(Some(&b), 3, 0, 9);
        assert_eq!(v.reading(), Reading::Stale);
        assert_eq!(v.versions(), &[9, 9, 9]);
        // A pair only for the key counts for nothing.
        let b = blob(&[(0, 9)]);
        assert_eq!(
            ColumnVersions::read(Some(&b), 3, 0, 9).reading(),
            Reading::Stale
        );
    }

    #[test]
    fn malformed_bytes_read_as_legacy() {
        let cases: Vec<Vec<u8>> = vec![
            vec![0x81],              // truncated varint
            vec![1],                 // ordinal without version
            blob(&[(1, 5), (1, 6)]), // repeated ordinal
            blob(&[(3, 5)]),         // ordinal past the last column
            blob(&[(1, 1)]),         // version of 1
            blob(&[(1, 0)]),         // version of 0
            blob(&[(1, 10)]),        // above the row's version
            blob(&[(1, 1 << 53)]),   // above the safe-integer bound
            vec![
                1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ], // 64-bit
        ];
        for bytes in cases {
            let v = ColumnVersions::read(Some(&bytes), 3, 0, 9);
            assert_eq!(v.reading(), Reading::Malformed, "{bytes:?}");
            assert_eq!(v.versions(), &[9, 9, 9], "{bytes:?}");
        }
    }

    #[test]
    fn inserts_and_full_writes_encode_nothing() {
        // An insert: every column at 1, row at 1.
        let inserted = ColumnVersions::read(None, 3, 0, 1);
        assert_eq!(inserted.encode(0, 1), None);
        // A full-row write moves every column.
        let full = inserted.updated(&[true, true, true], 0, 2);
        assert_eq!(full.encode(0, 2), None);
        // A key-only write on a fresh row leaves no column above 1: no
        // pairs, stored as NULL (which reads, like the stale guard, as
        // every column at the row's version).
        let key_only = inserted.updated(&[true, false, false], 0, 2);
        assert_eq!(key_only.encode(0, 2), None);
    }

    #[test]
    fn stored_bytes_are_bounded() {
        assert!(storable(None, 3));
        assert!(!storable(Some(&[]), 3));
        assert!(storable(Some(&[0; 60]), 3));
        assert!(!storable(Some(&[0; 61]), 3));
        assert_eq!(max_stored_len(3), 60);
    }

    fn row_case() -> impl Strategy<Value = (usize, usize, Vec<i64>)> {
        (1usize..12).prop_flat_map(|n| {
            (
                Just(n),
                0..n,
                proptest::collection::vec(1i64..=MAX_VERSION, n),
            )
        })
    }

    proptest! {
        /// Whatever a row's versions are, what `encode` stores reads back
        /// as the same versions, or (for `None`) as the legacy reading
        /// when that is what the versions say, or as every column changed
        /// when no column is above 1 (the conservative side).
        #[test]
        fn encode_then_read_gives_the_same_versions((n, key, mut versions) in row_case()) {
            let row = *versions.iter().max().unwrap_or(&1);
            versions[key] = row;
            let v = ColumnVersions { versions: versions.clone(), reading: Reading::Pairs };
            let stored = v.encode(key, row);
            let back = ColumnVersions::read(stored.as_deref(), n, key, row);
            let non_key_at_row = versions.iter().enumerate().any(|(i, x)| i != key && *x == row);
            if non_key_at_row || n == 1 {
                prop_assert_eq!(back.versions(), versions.as_slice());
            } else {
                // Only the key is at the row's version: read as all changed.
                prop_assert!(back.versions().iter().all(|x| *x == row));
            }
            if let Some(bytes) = &stored {
                prop_assert!(storable(Some(bytes), n));
            }
        }

        /// No bytes make the reader panic, and every reading gives one
        /// version per column, none above the row's.
        #[test]
        fn any_bytes_read_safely(
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
            n in 1usize..10,
            key in 0usize..10,
            row in 1i64..1000,
        ) {
            let v = ColumnVersions::read(Some(&bytes), n, key, row);
            prop_assert_eq!(v.versions().len(), n);
            prop_assert!(v.versions().iter().all(|x| (1..=row).contains(x)));
        }

        /// An update moves exactly the present columns and the key.
        #[test]
        fn updates_move_only_what_they_present(
            (n, key, versions) in row_case(),
            present in proptest::collection::vec(any::<bool>(), 12),
        ) {
            let row = *versions.iter().max().unwrap_or(&1);
            let v = ColumnVersions { versions: versions.clone(), reading: Reading::Pairs };
            let next = v.updated(&present[..n], key, row + 1);
            for i in 0..n {
                let expected = if i == key || present[i] { row + 1 } else { versions[i] };
                prop_assert_eq!(next.version(i), expected);
            }
        }
    }
}
