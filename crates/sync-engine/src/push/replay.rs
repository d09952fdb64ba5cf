//! Whom a stored push result is answered to (`engine.md` §8 item 7).
//!
//! A stored result is answered only to the actor that pushed it. Another
//! actor replaying the same `(clientId, clientCommitId)` — possible while
//! no client record binds the client id (a round that ended before its
//! record, or a rotation that deleted it) — gets `sync.invalid_client_id`
//! for that commit: no status, sequence, row or details of the stored
//! outcome, and its round writes no client record.

use sync_core::StoredPushResult;

use super::{records, CommitKey};
use crate::round::entry::COMMAND_CLIENT_PREFIX;
use crate::round::Round;
use crate::wire::request::Operation;
use crate::wire::response::PushResult;

/// The answer to one replayed key.
pub(super) struct Replay {
    result: PushResult,
    foreign: bool,
}

impl Replay {
    /// An answer that discloses nothing of another actor.
    pub(super) fn own(result: PushResult) -> Self {
        Self {
            result,
            foreign: false,
        }
    }

    /// The result to emit; a foreign replay marks the round so that it
    /// binds the client id to nobody.
    pub(super) fn answer(self, round: &mut Round<'_>) -> PushResult {
        round.foreign_replay |= self.foreign;
        self.result
    }
}

/// The answer to `stored` found for `key` in this round; `operations` are
/// the replayed commit's (a conflict record is answered in the round's
/// wire version, `docs/design/wire-v3.md` §5.3).
pub(super) fn judge(
    round: &Round<'_>,
    key: &CommitKey<'_>,
    mut stored: StoredPushResult,
    operations: Option<&[Operation]>,
) -> Replay {
    if pushed_by_this_actor(round, key, &stored) {
        super::semantics(round).answer_records(
            &mut stored.results,
            operations,
            &round.engine.schema,
        );
        return Replay::own(records::from_stored(key.client_commit_id, stored, false));
    }
    Replay {
        result: records::foreign(key.client_commit_id),
        foreign: true,
    }
}

/// Whether the round's actor pushed `stored`. A record written before
/// results carried their actor is answered only where the client id is
/// already bound to this actor: by its client record (checked at E10) or
/// by the command namespace, which embeds the actor (decisions.md).
fn pushed_by_this_actor(round: &Round<'_>, key: &CommitKey<'_>, stored: &StoredPushResult) -> bool {
    match &stored.actor_id {
        Some(actor) => *actor == round.ctx.actor_id,
        None => round.record.is_some() || key.client_id.starts_with(COMMAND_CLIENT_PREFIX),
    }
}
