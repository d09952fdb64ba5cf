//! Presence (SSP2 §8.6): ephemeral documents per `(scope key, actor,
//! client)`, published only on scope keys the connection's registrations
//! hold and seen only by the other connections holding the same key.
//! In memory beside the connections; never stored.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};
use sync_ssp2::realtime::{
    to_json_text, ControlMessage, PresenceError, PresenceErrorCode, PresenceFanout, PresenceKind,
    PresencePublish,
};

use super::hub::{lock, Connection, Fanout, Outgoing, RealtimeHub};
use crate::WireFailure;

/// The documents of one partition, by scope key.
#[derive(Debug, Default)]
pub(super) struct Registry {
    keys: BTreeMap<String, Vec<Present>>,
}

#[derive(Debug)]
struct Present {
    connection: Arc<Connection>,
    doc: Map<String, Value>,
}

/// What a publish did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishOutcome {
    /// Stored and fanned out (or a leave of a key the connection was not
    /// present on: nothing to do).
    Accepted,
    /// Refused to the publisher: the document is over the size cap.
    TooLarge,
    /// Refused to the publisher: the key is not one it holds.
    Forbidden,
}

fn send(connection: &Connection, message: ControlMessage) {
    // A presence change is ephemeral: a socket too slow to take it misses
    // it (its queue is full, so it is already being caught up).
    let _ = connection
        .outbox
        .try_send(Outgoing::Text(to_json_text(&message)));
}

impl RealtimeHub {
    /// A client's presence publish or leave (§8.6.2) on `connection`.
    pub fn publish_presence(
        &self,
        connection: &Arc<Connection>,
        publish: PresencePublish,
    ) -> Result<PublishOutcome, WireFailure> {
        let now = self.now_ms();
        let refuse = |error| {
            send(
                connection,
                ControlMessage::PresenceError(PresenceError {
                    scope_key: publish.scope_key.clone(),
                    error,
                    timestamp: now,
                }),
            );
        };
        if let Some(doc) = &publish.doc {
            let size = serde_json::to_vec(doc).map_or(usize::MAX, |b| b.len());
            if size > self.config().max_presence_doc_bytes {
                refuse(PresenceErrorCode::TooLarge);
                return Ok(PublishOutcome::TooLarge);
            }
        }
        let fanout = self.fanout(&connection.ctx.partition)?;
        let mut state = lock(&fanout);
        if !self.scope_keys(connection).contains(&publish.scope_key) {
            refuse(PresenceErrorCode::Forbidden);
            return Ok(PublishOutcome::Forbidden);
        }
        match publish.doc {
            Some(doc) => self.present(&mut state, connection, &publish.scope_key, doc, now),
            None => self.leave(&mut state, connection, &publish.scope_key, now),
        }
        Ok(PublishOutcome::Accepted)
    }

    fn present(
        &self,
        state: &mut Fanout,
        connection: &Arc<Connection>,
        key: &str,
        doc: Map<String, Value>,
        now: i64,
    ) {
        let present = state.presence.keys.entry(key.to_owned()).or_default();
        let kind = match present
            .iter_mut()
            .find(|p| Arc::ptr_eq(&p.connection, connection))
        {
            Some(existing) => {
                existing.doc = doc.clone();
                PresenceKind::Update
            }
            None => {
                present.push(Present {
                    connection: connection.clone(),
                    doc: doc.clone(),
                });
                PresenceKind::Join
            }
        };
        self.fan(state, connection, key, kind, Some(doc), now);
    }

    fn leave(&self, state: &mut Fanout, connection: &Arc<Connection>, key: &str, now: i64) {
        let Some(present) = state.presence.keys.get_mut(key) else {
            return;
        };
        let before = present.len();
        present.retain(|p| !Arc::ptr_eq(&p.connection, connection));
        let left = present.len() < before;
        if present.is_empty() {
            state.presence.keys.remove(key);
        }
        if left {
            self.fan(state, connection, key, PresenceKind::Leave, None, now);
        }
    }

    /// Sends a change of `from` on `key` to every other connection of the
    /// partition that holds `key`.
    fn fan(
        &self,
        state: &Fanout,
        from: &Arc<Connection>,
        key: &str,
        kind: PresenceKind,
        doc: Option<Map<String, Value>>,
        now: i64,
    ) {
        for peer in &state.connections {
            if Arc::ptr_eq(peer, from) || !self.scope_keys(peer).iter().any(|k| k == key) {
                continue;
            }
            send(
                peer,
                ControlMessage::PresenceFanout(PresenceFanout {
                    scope_key: key.to_owned(),
                    kind,
                    actor_id: from.ctx.actor_id.clone(),
                    client_id: from.client_id.clone(),
                    doc: doc.clone(),
                    timestamp: now,
                }),
            );
        }
    }

    /// The connection's grant went from `before` to `after` (connect,
    /// re-registration, disconnect: §8.6.3): its documents on keys it lost
    /// leave, and it receives a join burst of who is present on keys it
    /// gained (§8.6.4 snapshot).
    pub(super) fn presence_regrant(
        &self,
        state: &mut Fanout,
        connection: &Arc<Connection>,
        before: &[String],
        after: &[String],
    ) {
        let now = self.now_ms();
        for lost in before.iter().filter(|k| !after.contains(k)) {
            self.leave(state, connection, lost, now);
        }
        for gained in after.iter().filter(|k| !before.contains(k)) {
            let Some(present) = state.presence.keys.get(gained) else {
                continue;
            };
            for peer in present
                .iter()
                .filter(|p| !Arc::ptr_eq(&p.connection, connection))
            {
                send(
                    connection,
                    ControlMessage::PresenceFanout(PresenceFanout {
                        scope_key: gained.clone(),
                        kind: PresenceKind::Join,
                        actor_id: peer.connection.ctx.actor_id.clone(),
                        client_id: peer.connection.client_id.clone(),
                        doc: Some(peer.doc.clone()),
                        timestamp: now,
                    }),
                );
            }
        }
    }
}
