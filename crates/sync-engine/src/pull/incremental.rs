//! Incremental sections over commit windows (`engine.md` §5.5).

use sync_core::{CommitWindowQuery, ScopeFilter, StoredCommit};

use super::{budget, end_section, inactive, PullState, SectionEnd};
use crate::round::abort::Abort;
use crate::round::emitter::Emitter;
use crate::round::Round;
use crate::wire::request::{OpKind, Subscription};
use crate::wire::response::{
    CommitItem, ResponseItem, SectionStatus, SubEnd, SubStart, WireChange,
};

pub(super) fn run(
    round: &Round<'_>,
    state: &PullState,
    sub: &Subscription,
    effective: ScopeFilter,
    out: &mut Emitter<'_>,
) -> Result<SectionEnd, Abort> {
    if state.budget.exhausted() {
        return unread(round, state, sub, effective, out);
    }
    let storage = round.engine.storage.as_ref();
    let limit = state.limits.changes;
    let commits = storage
        .read_commit_window(
            &round.ctx.partition,
            &CommitWindowQuery {
                table: sub.table.clone(),
                scope_filter: effective.clone(),
                after_seq: sub.cursor,
                through_seq: state.max_seq,
                limit_changes: limit + 1,
            },
        )
        .map_err(Abort::storage)?; // 1
    let horizon = storage
        .get_horizon_seq(&round.ctx.partition)
        .map_err(Abort::storage)?;
    if sub.cursor < horizon {
        return inactive(round, state, sub, SectionStatus::Reset, out); // 2
    }
    out.emit(ResponseItem::SubStart(SubStart {
        id: sub.id.clone(),
        status: SectionStatus::Active,
        reason_code: String::new(),
        effective_scopes: effective,
        bootstrap: false,
    }))?; // 3
    let returned: usize = commits.iter().map(|c| c.changes.len()).sum();
    let total = commits.len();
    let mut delivered = 0i64;
    let mut delivered_commits = 0usize;
    let mut last_seq = None;
    for commit in commits {
        let size = commit.changes.len() as i64;
        if delivered > 0 && delivered + size > limit {
            break;
        }
        if state.budget.exhausted() {
            break; // the round's byte budget: continue from here next pull
        }
        state.budget.charge(budget::commit_bytes(&commit));
        last_seq = Some(commit.commit_seq);
        delivered += size;
        delivered_commits += 1;
        out.emit(ResponseItem::Commit(commit_item(&sub.table, commit)))?; // 4
        if delivered >= limit {
            break;
        }
    }
    let exhausted = returned as i64 <= limit && delivered_commits == total;
    let next_cursor = if exhausted {
        sub.cursor.max(state.max_seq)
    } else {
        sub.cursor.max(last_seq.unwrap_or(sub.cursor))
    }; // 5
    end_section(
        round,
        state,
        out,
        SubEnd {
            next_cursor,
            bootstrap_state: None,
        },
    )?; // 6
    Ok(SectionEnd::Active(next_cursor))
}

/// A section reached after the round's byte budget is used up: active,
/// nothing read, the cursor kept for the next pull.
fn unread(
    round: &Round<'_>,
    state: &PullState,
    sub: &Subscription,
    effective: ScopeFilter,
    out: &mut Emitter<'_>,
) -> Result<SectionEnd, Abort> {
    out.emit(ResponseItem::SubStart(SubStart {
        id: sub.id.clone(),
        status: SectionStatus::Active,
        reason_code: String::new(),
        effective_scopes: effective,
        bootstrap: false,
    }))?;
    end_section(
        round,
        state,
        out,
        SubEnd {
            next_cursor: sub.cursor,
            bootstrap_state: None,
        },
    )?;
    Ok(SectionEnd::Active(sub.cursor))
}

/// A stored commit of one table as a `COMMIT` item (pull windows and
/// realtime deltas).
pub(crate) fn commit_item(table: &str, commit: StoredCommit) -> CommitItem {
    CommitItem {
        commit_seq: commit.commit_seq,
        created_at_ms: commit.created_at_ms,
        actor_id: commit.actor_id,
        tables: vec![table.to_owned()],
        changes: commit
            .changes
            .into_iter()
            .map(|c| WireChange {
                table_index: 0,
                row_id: c.row_id,
                op: OpKind::of_change(c.op),
                row_version: c.row_version,
                scopes: c.scopes,
                row: c.payload,
            })
            .collect(),
    }
}
