//! RFC 0007 source coverage (`rfc0007-migration-barrier.md` §3.5) and the
//! catch-up listing, over `sync_changes_by_table`.

use sync_core::{ChangeOp, Coverage, Result, SourceChange};

use crate::pool::{col, Conn};

/// The coverage probe, horizon and probe in one snapshot: `$1` partition,
/// `$2` tables, `$3` seq.
pub(crate) const COVERAGE_PROBE_SQL: &str = "SELECT \
    coalesce((SELECT horizon_seq FROM sync_partitions WHERE partition = $1), 0), \
    EXISTS (SELECT 1 FROM sync_changes WHERE partition = $1 AND tbl = ANY($2::text[]) \
            AND commit_seq > $3)";
/// Highest retained change of the tables: `$1` partition, `$2` tables.
pub(crate) const COVERAGE_SEQ_SQL: &str = "SELECT coalesce(max(commit_seq), 0) FROM sync_changes \
    WHERE partition = $1 AND tbl = ANY($2::text[])";
const SOURCE_CHANGES_SQL: &str = "SELECT ch.commit_seq, ch.idx, c.client_id, ch.tbl, ch.row_id, ch.op \
    FROM sync_changes ch JOIN sync_commits c ON c.partition = ch.partition AND c.commit_seq = ch.commit_seq \
    WHERE ch.partition = $1 AND ch.tbl = ANY($2::text[]) AND ch.commit_seq > $3 \
    ORDER BY ch.commit_seq, ch.idx LIMIT $4";

/// `Clean` / `Changed` / `Unverifiable` for changes of `tables` above `seq`.
pub(crate) fn changes_above(
    conn: &mut Conn,
    partition: &str,
    tables: &[String],
    seq: i64,
) -> Result<Coverage> {
    if tables.is_empty() {
        return Ok(Coverage::Clean);
    }
    let row = conn.query_one(COVERAGE_PROBE_SQL, &[&partition, &tables, &seq])?;
    let horizon: i64 = col(&row, 0)?;
    let changed: bool = col(&row, 1)?;
    Ok(if changed {
        Coverage::Changed
    } else if horizon > seq {
        Coverage::Unverifiable
    } else {
        Coverage::Clean
    })
}

/// Highest retained `commit_seq` among changes of `tables`; 0 when none.
pub(crate) fn coverage_seq(conn: &mut Conn, partition: &str, tables: &[String]) -> Result<i64> {
    if tables.is_empty() {
        return Ok(0);
    }
    let row = conn.query_one(COVERAGE_SEQ_SQL, &[&partition, &tables])?;
    col(&row, 0)
}

/// Retained changes of `tables` above `after_seq`, `(commit_seq, idx)` order.
pub(crate) fn source_changes(
    conn: &mut Conn,
    partition: &str,
    tables: &[String],
    after_seq: i64,
    limit: i64,
) -> Result<Vec<SourceChange>> {
    if tables.is_empty() {
        return Ok(Vec::new());
    }
    let rows = conn.query(
        SOURCE_CHANGES_SQL,
        &[&partition, &tables, &after_seq, &limit],
    )?;
    rows.iter()
        .map(|row| {
            let idx: i32 = col(row, 1)?;
            let op: i16 = col(row, 5)?;
            Ok(SourceChange {
                commit_seq: col(row, 0)?,
                idx: i64::from(idx),
                client_id: col(row, 2)?,
                table: col(row, 3)?,
                row_id: col(row, 4)?,
                op: ChangeOp::from_stored(i64::from(op)),
            })
        })
        .collect()
}
