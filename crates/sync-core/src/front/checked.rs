//! Arguments that passed the front's checks ("parse, don't validate").
//!
//! Every type here is built only by the front ([`super`]), after the check
//! that gives it its meaning; a backend receives them and cannot build
//! them itself, so it cannot receive an argument that skipped its check.
//! They borrow the caller's values: passing one past the front copies a
//! pointer, never the value.

use std::ops::Deref;

use crate::schema::{CompiledTable, IndexDef};
use crate::value::RowValue;

/// A non-empty partition (`sync.storage.invalid_partition` otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition<'a>(&'a str);

impl<'a> Partition<'a> {
    pub(crate) fn new(partition: &'a str) -> Self {
        Self(partition)
    }

    /// The partition text.
    pub fn as_str(self) -> &'a str {
        self.0
    }
}

impl Deref for Partition<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

/// A non-empty log epoch (`sync.storage.invalid_log_epoch` otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEpoch<'a>(&'a str);

impl<'a> LogEpoch<'a> {
    pub(crate) fn new(epoch: &'a str) -> Self {
        Self(epoch)
    }

    /// The epoch text.
    pub fn as_str(self) -> &'a str {
        self.0
    }
}

impl Deref for LogEpoch<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

/// A non-empty row id of a write (`sync.storage.invalid_row_id` otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowId<'a>(&'a str);

impl<'a> RowId<'a> {
    pub(crate) fn new(row_id: &'a str) -> Self {
        Self(row_id)
    }

    /// The row id text.
    pub fn as_str(self) -> &'a str {
        self.0
    }
}

impl Deref for RowId<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

/// A checkpoint name: 1..=128 bytes without NUL (`invalid_argument`,
/// `argument = name`, otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointName<'a>(&'a str);

impl<'a> CheckpointName<'a> {
    pub(crate) fn new(name: &'a str) -> Self {
        Self(name)
    }

    /// The name text.
    pub fn as_str(self) -> &'a str {
        self.0
    }
}

impl Deref for CheckpointName<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

/// A number that passed its range check; which range depends on where the
/// front built it (a schema version ≥ 1, a running version ≥ 0, a lookup
/// limit in 1..=1000, a sequence or watermark ≥ 0, a horizon in
/// `0..=2^53−1`), as the backend method's signature says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Checked<N>(N);

impl<N: Copy> Checked<N> {
    pub(crate) fn new(value: N) -> Self {
        Self(value)
    }

    /// The value.
    pub fn get(self) -> N {
        self.0
    }
}

/// A request whose every field passed the checks its method makes, in the
/// specification's order; the method's docs say which.
#[derive(Debug)]
pub struct Request<'a, Q>(&'a Q);

impl<Q> Clone for Request<'_, Q> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Q> Copy for Request<'_, Q> {}

impl<'a, Q> Request<'a, Q> {
    pub(crate) fn new(request: &'a Q) -> Self {
        Self(request)
    }

    /// The request.
    pub fn get(self) -> &'a Q {
        self.0
    }
}

impl<Q> Deref for Request<'_, Q> {
    type Target = Q;
    fn deref(&self) -> &Q {
        self.0
    }
}

/// A table of the ensured schema (`sync.storage.unknown_table` otherwise):
/// the compiled table and the backend's own handle of it (its statements).
#[derive(Debug)]
pub struct Table<'e, T> {
    compiled: &'e CompiledTable,
    handle: &'e T,
}

impl<T> Clone for Table<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Table<'_, T> {}

impl<'e, T> Table<'e, T> {
    pub(crate) fn new(compiled: &'e CompiledTable, handle: &'e T) -> Self {
        Self { compiled, handle }
    }

    /// The compiled table.
    pub fn compiled(self) -> &'e CompiledTable {
        self.compiled
    }

    /// The backend's handle of the table.
    pub fn handle(self) -> &'e T {
        self.handle
    }

    /// The table name.
    pub fn name(self) -> &'e str {
        &self.compiled.name
    }
}

impl<T> Deref for Table<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.handle
    }
}

/// A table list whose every table is known to the ensured schema,
/// duplicates removed (first occurrences in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables(Vec<String>);

impl Tables {
    pub(crate) fn new(tables: Vec<String>) -> Self {
        Self(tables)
    }

    /// The tables.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }
}

impl Deref for Tables {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.0
    }
}

/// A `scan_rows_by_index` lookup that passed every check of
/// `storage-contract.md` §4.8 in order: table known, limit in 1..=1000,
/// table materialized, index declared, one value per index column, each
/// `Null` or of its column's type.
#[derive(Debug)]
pub struct IndexLookup<'a, T> {
    table: Table<'a, T>,
    index: &'a IndexDef,
    values: &'a [RowValue],
    after_row_id: Option<&'a str>,
    limit: i64,
}

impl<T> Clone for IndexLookup<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for IndexLookup<'_, T> {}

impl<'a, T> IndexLookup<'a, T> {
    pub(crate) fn new(
        table: Table<'a, T>,
        index: &'a IndexDef,
        values: &'a [RowValue],
        after_row_id: Option<&'a str>,
        limit: i64,
    ) -> Self {
        Self {
            table,
            index,
            values,
            after_row_id,
            limit,
        }
    }

    /// The materialized table.
    pub fn table(self) -> Table<'a, T> {
        self.table
    }

    /// The declared index.
    pub fn index(self) -> &'a IndexDef {
        self.index
    }

    /// One value per index column, in column order.
    pub fn values(self) -> &'a [RowValue] {
        self.values
    }

    /// The keyset cursor (`None`: from the start).
    pub fn after_row_id(self) -> Option<&'a str> {
        self.after_row_id
    }

    /// The limit, in 1..=1000.
    pub fn limit(self) -> i64 {
        self.limit
    }
}

/// A row to write whose id is non-empty and whose payload decodes under its
/// table's columns; for a materialized table, with the decoded projection.
#[derive(Debug)]
pub struct CheckedRow<'a> {
    row: &'a crate::rows::StoredRow,
    projection: Option<Vec<RowValue>>,
}

impl<'a> CheckedRow<'a> {
    pub(crate) fn new(row: &'a crate::rows::StoredRow, projection: Option<Vec<RowValue>>) -> Self {
        Self { row, projection }
    }

    /// The row.
    pub fn row(&self) -> &'a crate::rows::StoredRow {
        self.row
    }

    /// The decoded projection values of a materialized table, else `None`.
    pub fn projection(&self) -> Option<&[RowValue]> {
        self.projection.as_deref()
    }

    /// The decoded projection values, taken.
    pub fn into_projection(self) -> Option<Vec<RowValue>> {
        self.projection
    }
}

impl Deref for CheckedRow<'_> {
    type Target = crate::rows::StoredRow;
    fn deref(&self) -> &crate::rows::StoredRow {
        self.row
    }
}
