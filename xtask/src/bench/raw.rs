//! The raw baseline: what a minimal hand-written client does to get the same
//! database effect as the storage API — prepared statements, one
//! transaction per commit, no abstraction. One implementation per dialect
//! (`raw_sqlite.rs`, `raw_postgres.rs`); they live in the xtask only.

use anyhow::Result;
use sync_core::CompiledTable;

use super::fixture::{BenchCommit, BenchRow};

/// One commit of a window page as the raw client reads it: sequence and
/// number of changes of the table.
pub type RawCommit = (i64, usize);

/// Client name of the raw backfill's commits.
pub const RAW_BACKFILL_CLIENT: &str = "raw.backfill";

/// The raw baseline of one dialect.
pub trait RawClient: Send {
    /// The push of one commit with the same effect as the storage's push
    /// sequence: partition lock, idempotency read, `[gate]` read, per row
    /// the exact scope delete + row upsert + scope inserts, `commit_seq`
    /// allocation, commit, changes, change scopes, push result, `COMMIT`.
    /// Returns the allocated `commit_seq`.
    fn push(&mut self, partition: &str, commit: &BenchCommit, gate: bool) -> Result<i64>;

    /// Setup: pushes `commits` (gate off) in one transaction per chunk of
    /// 1 000 — the same database state as one transaction per commit.
    fn push_batch(&mut self, partition: &str, commits: &[BenchCommit]) -> Result<()>;

    /// A scope scan of `lists` in pages of `page` rows (the fastest
    /// hand-written shape), from the start, stopping at the end or after
    /// `max_pages` pages; returns the rows read.
    fn scan(&mut self, partition: &str, lists: &[String], page: i64, max_pages: u64)
        -> Result<u64>;

    /// One commit-window read with the semantics of `read_commit_window`
    /// (candidate pages of `max(64, limit_changes)`, stop once the matched
    /// changes reach the limit).
    fn window(
        &mut self,
        partition: &str,
        lists: &[String],
        after: i64,
        through: i64,
        limit_changes: i64,
    ) -> Result<Vec<RawCommit>>;

    /// The whole derived-column backfill of `title_lower = lower(title)`:
    /// keyset batches of `batch` rows, one transaction each (rows rewritten
    /// with the payload re-encoded and the version bumped, the batch logged
    /// as one commit, checkpoint progress), then the activation. Returns
    /// the rows rewritten.
    fn backfill(&mut self, partition: &str, table: &CompiledTable, batch: i64) -> Result<u64>;

    /// Setup: inserts rows (version 1) and their scope entries.
    fn seed_rows(&mut self, partition: &str, rows: &[BenchRow]) -> Result<()>;

    /// Setup: a log of `commits` single-row commits (with changes, change
    /// scopes and push results) over `rows.len()` rows updated round-robin;
    /// the rows end with their final versions.
    fn seed_log(&mut self, partition: &str, commits: u64, rows: &[BenchRow]) -> Result<()>;

    /// Setup: with `present`, a database-wide fence and a partition fence
    /// at version 1 (both pass writer version 1); without, neither.
    fn set_fence(&mut self, partition: &str, present: bool) -> Result<()>;

    /// Gathers the planner's statistics of every table (`ANALYZE`), as an
    /// operator or a maintenance job eventually does after a bulk load.
    fn analyze(&mut self) -> Result<()>;

    /// The same scan in one of the reference server's page shapes (W3's
    /// `reference-in` and `reference-any` rows; `docs/benchmarks.md`):
    /// batches of `max(64, page)` distinct row ids of the scope index whose
    /// value is one of `lists`, after the cursor, in row-id order, each
    /// joined to its row; rows without a payload skipped; a page ends at
    /// `page` rows or after a short batch ([`reference_scan_pages`]).
    /// `None` where the reference has no such form for this dialect (it
    /// has no MariaDB dialect at all).
    fn scan_reference_shape(
        &mut self,
        shape: ReferenceShape,
        partition: &str,
        lists: &[String],
        page: i64,
        max_pages: u64,
    ) -> Result<Option<u64>> {
        let _ = (shape, partition, lists, page, max_pages);
        Ok(None)
    }
}

/// How the reference server writes the values of one scan page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceShape {
    /// Release 0.15.48, both dialects: an `IN` list of one placeholder per
    /// value (one value is then a plain equality).
    InList,
    /// Its later Postgres form: every value in one array parameter,
    /// `value = ANY($n)`.
    AnyArray,
}

impl ReferenceShape {
    /// Every shape, in report order.
    pub const ALL: [ReferenceShape; 2] = [ReferenceShape::InList, ReferenceShape::AnyArray];

    /// The suffix of W3's rows for this shape.
    pub fn label(self) -> &'static str {
        match self {
            ReferenceShape::InList => "reference-in",
            ReferenceShape::AnyArray => "reference-any",
        }
    }
}

/// The paging loop of the reference's scan: `batch(after, size)` reads one
/// batch of at most `size` candidates after the row id `after` and answers
/// each candidate's row id and whether its row was found. A page takes
/// batches of `max(64, page)` until it holds `page` rows or a batch comes
/// back short; the cursor passes every candidate, found or not. Pages are
/// read until one comes back short or `max_pages` were read. Returns the
/// rows read.
pub fn reference_scan_pages(
    page: i64,
    max_pages: u64,
    mut batch: impl FnMut(&str, i64) -> Result<Vec<(String, bool)>>,
) -> Result<u64> {
    let size = page.max(64);
    let mut after = String::new();
    let mut total = 0u64;
    for _ in 0..max_pages {
        let mut got = 0i64;
        let mut cursor = after.clone();
        let mut last: Option<String> = None;
        'page: loop {
            let candidates = batch(&cursor, size)?;
            let short = (candidates.len() as i64) < size;
            for (id, found) in candidates {
                cursor.clone_from(&id);
                if found {
                    got += 1;
                    last = Some(id);
                    if got == page {
                        break 'page;
                    }
                }
            }
            if short {
                break;
            }
        }
        total += got as u64;
        match last {
            Some(id) if got == page => after = id,
            _ => return Ok(total),
        }
    }
    Ok(total)
}

/// The keyset paging of a raw scan: `next(after)` reads one page after the
/// row id `after` (the empty string first) and answers its row count and
/// last row id; pages are read until one comes back short or `max_pages`
/// were read. Returns the rows read.
pub fn scan_pages(
    page: i64,
    max_pages: u64,
    mut next: impl FnMut(&str) -> Result<(u64, Option<String>)>,
) -> Result<u64> {
    let mut after = String::new();
    let mut total = 0u64;
    for _ in 0..max_pages {
        let (got, last) = next(&after)?;
        total += got;
        match last {
            Some(id) if got as i64 == page => after = id,
            _ => return Ok(total),
        }
    }
    Ok(total)
}
