//! The commit window of a scope filter (`storage-contract.md` §4.7,
//! `docs/design/mariadb.md` §13, `docs/decisions.md` "Many-value scope
//! reads on MariaDB").
//!
//! - One value, and more than [`MERGED_SCAN_VALUES`] values, read
//!   candidate commits from `sync_change_scopes` joined to their headers
//!   and changes: one statement a page.
//! - Two to [`MERGED_SCAN_VALUES`] values first **walk** the log by
//!   sequence from the cursor: the changes of the table whose scope value
//!   is one of the values, each joined to its commit's header. Where the filter is
//!   dense that reads the page's commits and little more, in one
//!   statement, where the candidates would collect and sort every entry of
//!   the values above the cursor. The walk is bounded by `LIMIT … ROWS
//!   EXAMINED` ([`WALK_ROWS_PER_CHANGE`] a change): where the filter is
//!   sparse it stops early (warning 1931), and the window goes on from the
//!   last whole commit by **merging** the values' ranges.
//! - The merge reads one primary-key range per value, each cut at the page
//!   size, then the commits of the first page of sequences: two statements
//!   a page whatever the filter's density.
//!
//! Window pages need no common snapshot (`storage-contract.md` §1 rule 3):
//! a commit at or below `through_seq` never changes.

use mysql::Value;
use sync_core::limits::MIN_CANDIDATE_PAGE;
use sync_core::{
    candidate_variable, ChangeOp, CommitWindowQuery, FilterMatcher, Result, StoredChange,
    StoredCommit,
};

use crate::pool::Conn;
use crate::scans::MERGED_SCAN_VALUES;
use crate::values::parse_scopes;

/// Rows a window walk may examine per change it is asked for: a matching
/// change costs two (itself and its commit's header) where every change
/// matches. A walk that runs out has found fewer than one matching change
/// in eight rows read, where the merge reads less.
pub(crate) const WALK_ROWS_PER_CHANGE: i64 = 8;

fn marks(count: usize) -> String {
    vec!["?"; count].join(", ")
}

/// The columns every window statement returns, in commit order: the
/// commit's sequence, time and actor, then one change of the table (all
/// `NULL` for a commit without one): row id, op, version, scopes, payload,
/// index.
const COLUMNS: &str = "m.`commit_seq`, m.`created_at_ms`, m.`actor_id`, ch.`row_id`, ch.`op`, \
    ch.`row_version`, ch.`scopes`, ch.`payload`, ch.`idx`";

/// One window page of candidate commits: the commits of one scope
/// variable's values in the window, joined to their headers and their
/// changes of the table. Parameters: partition, table, variable, the
/// values, after, through, the page size, table.
pub(crate) fn window_page_sql(values: usize) -> String {
    format!(
        "SELECT c.`commit_seq`, m.`created_at_ms`, m.`actor_id`, ch.`row_id`, ch.`op`, \
         ch.`row_version`, ch.`scopes`, ch.`payload`, ch.`idx` \
         FROM (SELECT DISTINCT `partition`, `commit_seq` FROM `sync_change_scopes` \
               WHERE `partition` = ? AND `tbl` = ? AND `var` = ? AND `value` IN ({}) \
               AND `commit_seq` > ? AND `commit_seq` <= ? ORDER BY `commit_seq` LIMIT ?) AS c \
         LEFT JOIN `sync_commits` AS m \
           ON m.`partition` = c.`partition` AND m.`commit_seq` = c.`commit_seq` \
         LEFT JOIN `sync_changes` AS ch \
           ON ch.`partition` = c.`partition` AND ch.`commit_seq` = c.`commit_seq` \
           AND ch.`tbl` = ? \
         ORDER BY c.`commit_seq`, ch.`idx`",
        marks(values)
    )
}

/// The walk of a window of `values` values: the log's changes read in
/// primary-key order from the cursor (`range`, no sort), each change of the
/// table whose value of the variable (the JSON path `$.variable`) is one of
/// the values joined to its commit's header; at most `limit` changes and
/// `budget` examined rows. Parameters: partition, after, through, table,
/// path, the values, limit, budget.
pub(crate) fn walk_sql(values: usize) -> String {
    format!(
        "SELECT {COLUMNS} FROM `sync_changes` AS ch FORCE INDEX (PRIMARY) \
         STRAIGHT_JOIN `sync_commits` AS m \
           ON m.`partition` = ch.`partition` AND m.`commit_seq` = ch.`commit_seq` \
         WHERE ch.`partition` = ? AND ch.`commit_seq` > ? AND ch.`commit_seq` <= ? \
           AND ch.`tbl` = ? AND JSON_VALUE(ch.`scopes`, ?) IN ({}) \
         ORDER BY ch.`commit_seq`, ch.`idx` LIMIT ? ROWS EXAMINED ?",
        marks(values)
    )
}

/// The candidates of a merged window page: one primary-key range per
/// value, each cut at the page size, as a `UNION ALL` the caller merges.
/// Parameters per value: partition, table, variable, value, after,
/// through, page size.
fn merged_candidates_sql(values: usize) -> String {
    let arm = "(SELECT `commit_seq` FROM `sync_change_scopes` \
               WHERE `partition` = ? AND `tbl` = ? AND `var` = ? AND `value` = ? \
               AND `commit_seq` > ? AND `commit_seq` <= ? ORDER BY `commit_seq` LIMIT ?)";
    vec![arm; values].join(" UNION ALL ")
}

/// The commits of `count` sequences with their changes of the table.
/// Parameters: table, partition, the sequences.
fn commits_by_seq_sql(count: usize) -> String {
    format!(
        "SELECT {COLUMNS} FROM `sync_commits` AS m \
         LEFT JOIN `sync_changes` AS ch \
           ON ch.`partition` = m.`partition` AND ch.`commit_seq` = m.`commit_seq` \
           AND ch.`tbl` = ? \
         WHERE m.`partition` = ? AND m.`commit_seq` IN ({}) \
         ORDER BY m.`commit_seq`, ch.`idx`",
        marks(count)
    )
}

/// The JSON path of a scope variable's value in a change's stored scopes,
/// for a variable that needs no quoting in a path (letters, digits and
/// `_`, not starting with a digit). Any other variable is not walked.
fn variable_path(variable: &str) -> Option<String> {
    let mut chars = variable.chars();
    let first = chars.next()?;
    let plain = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    plain.then(|| format!("$.{variable}"))
}

type WindowRow = (
    i64,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<Vec<u8>>,
    Option<i64>,
);

/// How a window reads its next commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Candidate commits of the values (one value, or a long list).
    Candidates,
    /// The walk of the log, bounded by examined rows.
    Walk,
    /// Per-value ranges merged, then the commits by sequence.
    Merge,
}

/// Where one page of a window left it.
enum Step {
    /// `limit_changes` reached, or nothing is left in the window.
    Done,
    /// Go on from the cursor in the same shape.
    More,
    /// The walk stopped on its budget: go on from the cursor by merging.
    Sparse,
}

/// Pages through the commits of the window whose changes of the table
/// match the filter, until `limit_changes` matching changes.
pub(crate) fn commit_window(
    conn: &mut Conn,
    partition: &str,
    query: &CommitWindowQuery,
) -> Result<Vec<StoredCommit>> {
    let Some(variable) = candidate_variable(&query.scope_filter) else {
        return Ok(Vec::new());
    };
    let values = query
        .scope_filter
        .get(variable)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let path = variable_path(variable);
    let mut shape = match (values.len(), &path) {
        (0, _) => return Ok(Vec::new()),
        (n, Some(_)) if (2..=MERGED_SCAN_VALUES).contains(&n) => Shape::Walk,
        (n, None) if (2..=MERGED_SCAN_VALUES).contains(&n) => Shape::Merge,
        _ => Shape::Candidates,
    };
    let mut window = Window {
        conn,
        partition,
        query,
        matcher: FilterMatcher::new(&query.scope_filter),
        variable,
        values,
        page: query.limit_changes.max(MIN_CANDIDATE_PAGE),
        cursor: query.after_seq,
        matched: 0,
        out: Vec::new(),
    };
    loop {
        let step = match (shape, &path) {
            (Shape::Walk, Some(path)) => window.walk(path)?,
            (Shape::Merge, _) | (Shape::Walk, None) => window.merge()?,
            (Shape::Candidates, _) => window.candidates()?,
        };
        match step {
            Step::Done => return Ok(window.out),
            Step::More => {}
            Step::Sparse => shape = Shape::Merge,
        }
    }
}

/// A window in progress: its query, cursor and commits so far.
struct Window<'a, 'c> {
    conn: &'c mut Conn,
    partition: &'a str,
    query: &'a CommitWindowQuery,
    /// The query's filter, prepared for verifying changes.
    matcher: FilterMatcher<'a>,
    variable: &'a str,
    values: &'a [String],
    page: i64,
    cursor: i64,
    matched: i64,
    out: Vec<StoredCommit>,
}

impl Window<'_, '_> {
    /// Takes one whole commit's rows; `true` once `limit_changes` matching
    /// changes are in.
    fn offer(&mut self, seq: i64, group: Vec<WindowRow>) -> Result<bool> {
        self.cursor = seq;
        if let Some(commit) = build_commit(&self.query.table, &self.matcher, group)? {
            self.matched += commit.changes.len() as i64;
            self.out.push(commit);
        }
        Ok(self.matched >= self.query.limit_changes)
    }

    fn more_if(&self, full: bool) -> Step {
        if full {
            Step::More
        } else {
            Step::Done
        }
    }

    /// One page of candidate commits (one value, or a long list).
    fn candidates(&mut self) -> Result<Step> {
        let mut params: Vec<Value> = vec![
            self.partition.into(),
            self.query.table.as_str().into(),
            self.variable.into(),
        ];
        params.extend(self.values.iter().map(|v| Value::from(v.as_str())));
        params.extend([
            Value::Int(self.cursor),
            Value::Int(self.query.through_seq),
            Value::Int(self.page),
            self.query.table.as_str().into(),
        ]);
        let rows: Vec<WindowRow> = self
            .conn
            .rows(&window_page_sql(self.values.len()), params)?;
        let groups = group_by_commit(rows);
        let full = groups.len() as i64 >= self.page;
        for (seq, group) in groups {
            if self.offer(seq, group)? {
                return Ok(Step::Done);
            }
        }
        Ok(self.more_if(full))
    }

    /// One walk of the log from the cursor.
    fn walk(&mut self, path: &str) -> Result<Step> {
        let limit = self.page;
        let mut params: Vec<Value> = vec![
            self.partition.into(),
            Value::Int(self.cursor),
            Value::Int(self.query.through_seq),
            self.query.table.as_str().into(),
            path.into(),
        ];
        params.extend(self.values.iter().map(|v| Value::from(v.as_str())));
        params.extend([
            Value::Int(limit),
            Value::Int(limit.saturating_mul(WALK_ROWS_PER_CHANGE)),
        ]);
        let (rows, warned): (Vec<WindowRow>, bool) = self
            .conn
            .rows_warned(&walk_sql(self.values.len()), params)?;
        let full = rows.len() as i64 >= limit;
        let stopped = warned && !full;
        let mut groups = group_by_commit(rows);
        if full || stopped {
            // The last commit may have been cut short: a later page reads
            // it whole.
            let last = groups.pop();
            if groups.is_empty() {
                match last {
                    // One commit filled the page: read it whole now.
                    Some((seq, _)) if full => {
                        let whole = self.commits(&[seq])?;
                        // Pruned meanwhile, the commit still moves the cursor.
                        self.cursor = self.cursor.max(seq);
                        groups.extend(whole);
                    }
                    _ => return Ok(Step::Sparse),
                }
            }
        }
        for (seq, group) in groups {
            if self.offer(seq, group)? {
                return Ok(Step::Done);
            }
        }
        if stopped {
            return Ok(Step::Sparse);
        }
        Ok(self.more_if(full))
    }

    /// One merged page: the first page of sequences of the values' ranges,
    /// then those commits.
    fn merge(&mut self) -> Result<Step> {
        let params: Vec<Value> = self
            .values
            .iter()
            .flat_map(|v| {
                [
                    Value::from(self.partition),
                    self.query.table.as_str().into(),
                    self.variable.into(),
                    v.as_str().into(),
                    Value::Int(self.cursor),
                    Value::Int(self.query.through_seq),
                    Value::Int(self.page),
                ]
            })
            .collect();
        let mut seqs: Vec<i64> = self
            .conn
            .rows(&merged_candidates_sql(self.values.len()), params)?;
        seqs.sort_unstable();
        seqs.dedup();
        seqs.truncate(usize::try_from(self.page).unwrap_or(usize::MAX));
        let Some(&last) = seqs.last() else {
            return Ok(Step::Done);
        };
        let full = seqs.len() as i64 >= self.page;
        for (seq, group) in self.commits(&seqs)? {
            if self.offer(seq, group)? {
                return Ok(Step::Done);
            }
        }
        // A candidate whose commit was pruned meanwhile still moves the
        // cursor.
        self.cursor = self.cursor.max(last);
        Ok(self.more_if(full))
    }

    /// The commits of `seqs` with every change of the table, by commit.
    fn commits(&mut self, seqs: &[i64]) -> Result<Vec<(i64, Vec<WindowRow>)>> {
        let mut params: Vec<Value> = vec![self.query.table.as_str().into(), self.partition.into()];
        params.extend(seqs.iter().map(|&seq| Value::Int(seq)));
        let rows: Vec<WindowRow> = self.conn.rows(&commits_by_seq_sql(seqs.len()), params)?;
        Ok(group_by_commit(rows))
    }
}

/// Consecutive rows of one commit, each commit's changes in index order.
fn group_by_commit(rows: Vec<WindowRow>) -> Vec<(i64, Vec<WindowRow>)> {
    let mut groups: Vec<(i64, Vec<WindowRow>)> = Vec::new();
    for row in rows {
        match groups.last_mut() {
            Some((seq, group)) if *seq == row.0 => group.push(row),
            _ => groups.push((row.0, vec![row])),
        }
    }
    for (_, group) in &mut groups {
        group.sort_by_key(|row| row.8);
    }
    groups
}

fn build_commit(
    table: &str,
    filter: &FilterMatcher<'_>,
    group: Vec<WindowRow>,
) -> Result<Option<StoredCommit>> {
    let Some(head) = group.first() else {
        return Ok(None);
    };
    let (commit_seq, Some(created_at_ms), Some(actor_id)) = (head.0, head.1, head.2.clone()) else {
        return Ok(None);
    };
    let mut changes = Vec::new();
    for (_, _, _, row_id, op, row_version, scopes, payload, _) in group {
        let (Some(row_id), Some(op), Some(scopes)) = (row_id, op, scopes) else {
            continue;
        };
        let scopes = parse_scopes(&scopes)?;
        if !filter.matches(&scopes) {
            continue;
        }
        changes.push(StoredChange {
            table: table.to_owned(),
            row_id,
            op: ChangeOp::from_stored(op),
            row_version,
            scopes,
            payload,
        });
    }
    if changes.is_empty() {
        return Ok(None);
    }
    Ok(Some(StoredCommit {
        commit_seq,
        created_at_ms,
        actor_id,
        changes,
    }))
}

#[cfg(test)]
mod tests {
    use super::variable_path;

    #[test]
    fn only_plain_variables_are_walked() {
        assert_eq!(variable_path("list_id").as_deref(), Some("$.list_id"));
        assert_eq!(variable_path("_x9").as_deref(), Some("$._x9"));
        assert_eq!(variable_path("9x"), None);
        assert_eq!(variable_path("a.b"), None);
        assert_eq!(variable_path("a\"b"), None);
        assert_eq!(variable_path(""), None);
    }
}
