//! Bootstrap sections (`engine.md` §5.4).

use sync_core::{RowScanQuery, ScopeFilter};

use super::{budget, end_section, token, PullState, SectionEnd};
use crate::round::abort::Abort;
use crate::round::emitter::Emitter;
use crate::round::Round;
use crate::wire::request::Subscription;
use crate::wire::response::{
    BootstrapPage, BootstrapRow, ResponseItem, SectionStatus, SubEnd, SubStart,
};

pub(super) fn run(
    round: &Round<'_>,
    state: &PullState,
    sub: &Subscription,
    effective: ScopeFilter,
    out: &mut Emitter<'_>,
) -> Result<SectionEnd, Abort> {
    let resume = sub
        .bootstrap_state
        .as_deref()
        .and_then(|text| token::parse(text, &sub.table, state.max_seq))
        .filter(|t| t.as_of >= state.horizon);
    let (pin, mut row_cursor) = match resume {
        Some(t) => (t.as_of, t.row_cursor),
        None => (state.max_seq, None),
    }; // 1
    out.emit(ResponseItem::SubStart(SubStart {
        id: sub.id.clone(),
        status: SectionStatus::Active,
        reason_code: String::new(),
        effective_scopes: effective.clone(),
        bootstrap: true,
    }))?; // 2
    let page_rows = state.limits.page_rows;
    let mut complete = false;
    for _ in 0..state.limits.pages {
        if state.budget.exhausted() {
            break; // the round's byte budget: the token resumes here
        }
        let mut rows = round
            .engine
            .storage
            .scan_row_payloads(
                &round.ctx.partition,
                &RowScanQuery {
                    table: sub.table.clone(),
                    scope_filter: effective.clone(),
                    after_row_id: row_cursor.clone(),
                    limit: page_rows + 1,
                },
            )
            .map_err(Abort::storage)?;
        let mut has_more = rows.len() as i64 > page_rows;
        rows.truncate(usize::try_from(page_rows).unwrap_or(usize::MAX));
        let within = within_budget(state, &rows);
        if within < rows.len() {
            rows.truncate(within);
            has_more = true;
        }
        let next = if has_more {
            rows.last().map(|r| r.row_id.clone())
        } else {
            None
        };
        out.emit(ResponseItem::BootstrapPage(BootstrapPage {
            table: sub.table.clone(),
            schema_version: round.running(),
            as_of_commit_seq: pin,
            row_cursor: row_cursor.clone(),
            next_row_cursor: next.clone(),
            rows: rows
                .into_iter()
                .map(|r| BootstrapRow {
                    row_id: r.row_id,
                    row_version: r.server_version,
                    row: r.payload,
                })
                .collect(),
        }))?; // 3
        match next {
            Some(next) => row_cursor = Some(next),
            None => {
                complete = true;
                break;
            }
        }
    }
    let bootstrap_state =
        (!complete).then(|| token::render(pin, &sub.table, row_cursor.as_deref()));
    end_section(
        round,
        state,
        out,
        SubEnd {
            next_cursor: pin,
            bootstrap_state,
        },
    )?; // 4
    Ok(SectionEnd::Active(pin))
}

/// How many of `rows` the page carries: rows are charged in order and the
/// page ends before a row once the round's budget is used up (the first
/// row always goes, the budget having been checked before the page).
fn within_budget(state: &PullState, rows: &[sync_core::ScannedRow]) -> usize {
    let mut kept = 0;
    for row in rows {
        if kept > 0 && state.budget.exhausted() {
            break;
        }
        state.budget.charge(budget::row_bytes(row));
        kept += 1;
    }
    kept
}
