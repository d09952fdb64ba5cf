//! The storage half of realtime (SSP2 §8): what a connection registers
//! (the subscription list persisted with the client record at its last
//! pull, each with its effective scopes, §8.1) and the delta of a commit
//! range for those registrations (§8.2). Sockets, suppression and acks are
//! the transport's; this module only reads.

use sync_core::{CommitWindowQuery, ScopeFilter};

use crate::engine::Engine;
use crate::error::EngineError;
use crate::pull::incremental::commit_item;
use crate::round::abort::Abort;
use crate::round::entry::resolve;
use crate::wire::response::{RespHeader, ResponseItem, SectionStatus, SubEnd, SubStart};
use crate::{RequestContext, WireError};

/// One subscription a realtime connection receives deltas for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The subscription id, echoed in the delta's `SUB_START`.
    pub id: String,
    /// Its table.
    pub table: String,
    /// The effective scopes (requested ∩ allowed, `engine.md` §3.2 item 4a).
    pub effective: ScopeFilter,
}

/// What a connection starts from (§8.1 `hello`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealtimeStart {
    /// The registrations; empty when the client never pulled or every
    /// subscription is revoked.
    pub registrations: Vec<Registration>,
    /// The client record's cursor; `None` without a record.
    pub cursor: Option<i64>,
    /// The wire version of the client's last round (2 without a record).
    pub wire_version: i32,
    /// The partition's newest commit sequence.
    pub latest_seq: i64,
    /// The partition's log epoch (acks are fenced by it); a first contact
    /// registers the partition.
    pub log_epoch: String,
}

/// The delta of a commit range, or why there is none to send.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// No registration has a change in the range.
    Empty,
    /// A complete response: header, one section per affected registration
    /// (`SUB_START`, `COMMIT`s, `SUB_END` at the range's end), `End`.
    Items(Vec<ResponseItem>),
    /// More than `max_changes` changes: the client pulls instead.
    TooLarge,
}

impl Engine {
    /// The registrations of `client_id` for a connection of `ctx` (§8.1):
    /// the subscriptions of the client's last pull, each with its effective
    /// scopes resolved now; revoked ones are left out.
    ///
    /// `sync.invalid_client_id` when the record belongs to another actor.
    pub fn realtime_start(
        &self,
        ctx: &RequestContext,
        client_id: &str,
    ) -> Result<RealtimeStart, EngineError> {
        let storage = self.storage();
        let record = storage
            .get_client_record(&ctx.partition, client_id)
            .map_err(|e| Abort::storage(e).into_engine_error())?;
        if record.as_ref().is_some_and(|r| r.actor_id != ctx.actor_id) {
            return Err(EngineError::Request(WireError::new(
                "sync.invalid_client_id",
                "clientId is bound to another actor or reserved",
            )));
        }
        let latest_seq = storage
            .get_max_commit_seq(&ctx.partition)
            .map_err(|e| Abort::storage(e).into_engine_error())?;
        // A connection is an authenticated contact like a round: it
        // registers the partition, so every later message (an error stream
        // of a socket round included) carries the partition's epoch.
        let log_epoch = match storage
            .get_partition_log_epoch(&ctx.partition)
            .map_err(|e| Abort::storage(e).into_engine_error())?
        {
            Some(epoch) => epoch,
            None => {
                storage
                    .touch_partition(
                        &ctx.partition,
                        self.config.clock.now_ms(),
                        &self.config.ids.new_id(),
                    )
                    .map_err(|e| Abort::storage(e).into_engine_error())?
                    .log_epoch
            }
        };
        let Some(record) = record else {
            return Ok(RealtimeStart {
                registrations: Vec::new(),
                cursor: None,
                wire_version: 2,
                latest_seq,
                log_epoch,
            });
        };
        let registrations = if record.subscriptions.is_empty() {
            Vec::new()
        } else {
            let resolved = resolve(self, ctx, client_id).map_err(Abort::into_engine_error)?;
            record
                .subscriptions
                .iter()
                .filter_map(|sub| {
                    let table = self.schema().table(&sub.table)?;
                    let effective = crate::scopes::effective_scopes(table, &sub.scopes, &resolved)?;
                    Some(Registration {
                        id: sub.id.clone(),
                        table: sub.table.clone(),
                        effective,
                    })
                })
                .collect()
        };
        Ok(RealtimeStart {
            registrations,
            cursor: Some(record.cursor),
            wire_version: record.wire_version,
            latest_seq,
            log_epoch,
        })
    }

    /// The delta of commits `(after_seq, through_seq]` for `registrations`
    /// of `partition` (§8.2): every affected registration's section ends
    /// at `through_seq`. `log_epoch` goes in the header (wire version 2;
    /// `None` for version 1): the caller has it already, nothing is read
    /// twice. [`Delta::TooLarge`] past `max_changes` changes.
    pub fn realtime_delta(
        &self,
        partition: &str,
        registrations: &[Registration],
        after_seq: i64,
        through_seq: i64,
        log_epoch: Option<&str>,
        max_changes: i64,
    ) -> Result<Delta, EngineError> {
        let storage = self.storage();
        let mut items = Vec::new();
        let mut changes = 0i64;
        for reg in registrations {
            let commits = storage
                .read_commit_window(
                    partition,
                    &CommitWindowQuery {
                        table: reg.table.clone(),
                        scope_filter: reg.effective.clone(),
                        after_seq,
                        through_seq,
                        limit_changes: max_changes.saturating_add(1),
                    },
                )
                .map_err(|e| Abort::storage(e).into_engine_error())?;
            if commits.is_empty() {
                continue;
            }
            changes += commits.iter().map(|c| c.changes.len() as i64).sum::<i64>();
            if changes > max_changes {
                return Ok(Delta::TooLarge);
            }
            items.push(ResponseItem::SubStart(SubStart {
                id: reg.id.clone(),
                status: SectionStatus::Active,
                reason_code: String::new(),
                effective_scopes: reg.effective.clone(),
                bootstrap: false,
            }));
            for commit in commits {
                items.push(ResponseItem::Commit(commit_item(&reg.table, commit)));
            }
            items.push(ResponseItem::SubEnd(SubEnd {
                next_cursor: through_seq,
                bootstrap_state: None,
            }));
        }
        if items.is_empty() {
            return Ok(Delta::Empty);
        }
        items.insert(
            0,
            ResponseItem::Header(RespHeader {
                required_schema_version: None,
                latest_schema_version: Some(self.schema().version),
                log_epoch: log_epoch.map(str::to_owned),
                reset_required: false,
            }),
        );
        items.push(ResponseItem::End);
        Ok(Delta::Items(items))
    }
}
