//! Realtime control messages (§8): the JSON text frames of the realtime
//! channel, parsed into typed values and rendered back.
//!
//! Server-to-client events carry an `event` name and a `data` object; the
//! one client-to-server control message, the ack, carries `type: "ack"`
//! (presence publishes, also client-to-server, use `event: "presence"`).
//! An event or type name this crate does not define is tolerated and kept
//! whole ([`ControlMessage::Unknown`]); a known event with missing or
//! wrong-shaped data is malformed. Every number of a known event is an
//! integer within ±(2^53−1). Fields a known event does not define are
//! ignored.

use std::fmt;

use serde_json::{json, Map, Value};

use crate::primitives::is_safe_integer;

/// A control message that is not well-formed; answered as
/// `sync.invalid_request`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedControlMessage {
    /// The rule broken.
    pub reason: &'static str,
}

impl MalformedControlMessage {
    /// The stable wire code: `sync.invalid_request`.
    pub fn code(&self) -> &'static str {
        "sync.invalid_request"
    }
}

impl fmt::Display for MalformedControlMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed control message: {}", self.reason)
    }
}

impl std::error::Error for MalformedControlMessage {}

/// One realtime control message.
#[derive(Debug, Clone, PartialEq)]
pub enum ControlMessage {
    /// `hello`, sent by the server on connect (§8.1).
    Hello(Hello),
    /// `sync`, the wake-up (§8.3).
    Wake(Wake),
    /// `heartbeat` (§8.5).
    Heartbeat {
        /// Server clock, epoch milliseconds.
        timestamp: i64,
    },
    /// A client's presence publish or leave (§8.6.2).
    PresencePublish(PresencePublish),
    /// A peer's presence change fanned out by the server (§8.6.2).
    PresenceFanout(PresenceFanout),
    /// A refused presence publish, answered to the publisher (§8.6.2).
    PresenceError(PresenceError),
    /// The client's ack of applied deltas (§8.2).
    Ack {
        /// Highest contiguously applied commit sequence.
        cursor: i64,
    },
    /// An event (or client message type) this crate does not define: the
    /// whole message, tolerated and kept.
    Unknown(Value),
}

/// The connect handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The realtime protocol version.
    pub protocol_version: i64,
    /// The session id.
    pub session_id: String,
    /// The authenticated actor.
    pub actor_id: String,
    /// The connecting client.
    pub client_id: String,
    /// The client's last acked cursor.
    pub cursor: i64,
    /// The server's latest commit sequence.
    pub latest_cursor: i64,
    /// Whether the client must sync before trusting the socket.
    pub requires_sync: bool,
    /// Server clock, epoch milliseconds.
    pub timestamp: i64,
}

/// A wake-up: run a pull soon. `requiresPull` is always the literal
/// `true` and is not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    /// The server's latest commit sequence.
    pub cursor: i64,
    /// Why the delta could not be sent.
    pub reason: WakeReason,
    /// Server clock, epoch milliseconds.
    pub timestamp: i64,
}

/// The closed set of wake-up reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WakeReason {
    /// `delta-too-large`.
    DeltaTooLarge,
    /// `catchup-required`.
    CatchupRequired,
    /// `reset-required`.
    ResetRequired,
}

impl WakeReason {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeltaTooLarge => "delta-too-large",
            Self::CatchupRequired => "catchup-required",
            Self::ResetRequired => "reset-required",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            Self::DeltaTooLarge,
            Self::CatchupRequired,
            Self::ResetRequired,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// A client's presence document for a scope key; `doc: None` leaves.
#[derive(Debug, Clone, PartialEq)]
pub struct PresencePublish {
    /// The scope key, non-empty.
    pub scope_key: String,
    /// The document (a JSON object), or `None` to leave.
    pub doc: Option<Map<String, Value>>,
}

/// The closed set of presence change kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PresenceKind {
    /// `join`: the peer's first document on the key.
    Join,
    /// `update`: a later document.
    Update,
    /// `leave`: the peer left; no document.
    Leave,
}

impl PresenceKind {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Join => "join",
            Self::Update => "update",
            Self::Leave => "leave",
        }
    }
}

/// A peer's presence change. `doc` is `Some` for join and update and
/// `None` for leave.
#[derive(Debug, Clone, PartialEq)]
pub struct PresenceFanout {
    /// The scope key.
    pub scope_key: String,
    /// Join, update or leave.
    pub kind: PresenceKind,
    /// The peer's actor.
    pub actor_id: String,
    /// The peer's client.
    pub client_id: String,
    /// The peer's document.
    pub doc: Option<Map<String, Value>>,
    /// Server clock when fanned out, epoch milliseconds.
    pub timestamp: i64,
}

/// The closed set of presence refusal codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PresenceErrorCode {
    /// `presence.too_large`.
    TooLarge,
    /// `presence.forbidden`.
    Forbidden,
}

impl PresenceErrorCode {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooLarge => "presence.too_large",
            Self::Forbidden => "presence.forbidden",
        }
    }
}

/// A refused presence publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceError {
    /// The scope key published to.
    pub scope_key: String,
    /// Why it was refused.
    pub error: PresenceErrorCode,
    /// Server clock, epoch milliseconds.
    pub timestamp: i64,
}

type R<T> = Result<T, MalformedControlMessage>;

fn bad<T>(reason: &'static str) -> R<T> {
    Err(MalformedControlMessage { reason })
}

struct Data<'a>(&'a Map<String, Value>);

impl Data<'_> {
    fn int(&self, key: &str, reason: &'static str) -> R<i64> {
        let Some(Value::Number(n)) = self.0.get(key) else {
            return bad(reason);
        };
        let v = if let Some(i) = n.as_i64() {
            i
        } else {
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_991.0 => f as i64,
                _ => return bad(reason),
            }
        };
        if is_safe_integer(v) {
            Ok(v)
        } else {
            bad(reason)
        }
    }

    fn string(&self, key: &str, reason: &'static str) -> R<String> {
        match self.0.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => bad(reason),
        }
    }

    fn bool(&self, key: &str, reason: &'static str) -> R<bool> {
        match self.0.get(key) {
            Some(Value::Bool(b)) => Ok(*b),
            _ => bad(reason),
        }
    }

    /// `doc`: a JSON object, or `null`; anything else (or absence) is
    /// malformed.
    fn doc(&self) -> R<Option<Map<String, Value>>> {
        match self.0.get("doc") {
            Some(Value::Object(m)) => Ok(Some(m.clone())),
            Some(Value::Null) => Ok(None),
            _ => bad("presence doc must be a JSON object or null"),
        }
    }

    fn scope_key(&self) -> R<String> {
        let key = self.string("scopeKey", "presence scopeKey must be a string")?;
        if key.is_empty() {
            return bad("presence scopeKey must not be empty");
        }
        Ok(key)
    }
}

const NUMBER: &str = "a numeric field is missing or not a safe integer";
const STRING: &str = "a string field is missing or not a string";

fn hello(d: &Data<'_>) -> R<ControlMessage> {
    Ok(ControlMessage::Hello(Hello {
        protocol_version: d.int("protocolVersion", NUMBER)?,
        session_id: d.string("sessionId", STRING)?,
        actor_id: d.string("actorId", STRING)?,
        client_id: d.string("clientId", STRING)?,
        cursor: d.int("cursor", NUMBER)?,
        latest_cursor: d.int("latestCursor", NUMBER)?,
        requires_sync: d.bool("requiresSync", "hello requiresSync must be a boolean")?,
        timestamp: d.int("timestamp", NUMBER)?,
    }))
}

fn wake(d: &Data<'_>) -> R<ControlMessage> {
    if d.0.get("requiresPull") != Some(&Value::Bool(true)) {
        return bad("sync requiresPull must be the literal true");
    }
    let reason = d.string("reason", "sync reason must be a string")?;
    let reason = WakeReason::parse(&reason).ok_or(MalformedControlMessage {
        reason: "sync reason is outside the closed set",
    })?;
    Ok(ControlMessage::Wake(Wake {
        cursor: d.int("cursor", NUMBER)?,
        reason,
        timestamp: d.int("timestamp", NUMBER)?,
    }))
}

fn presence(d: &Data<'_>) -> R<ControlMessage> {
    let scope_key = d.scope_key()?;
    if let Some(kind) = d.0.get("kind") {
        let kind = match kind.as_str() {
            Some("join") => PresenceKind::Join,
            Some("update") => PresenceKind::Update,
            Some("leave") => PresenceKind::Leave,
            _ => return bad("presence kind is outside the closed set"),
        };
        let doc = d.doc()?;
        if (kind == PresenceKind::Leave) != doc.is_none() {
            return bad("presence doc is null for leave and an object for join and update");
        }
        return Ok(ControlMessage::PresenceFanout(PresenceFanout {
            scope_key,
            kind,
            actor_id: d.string("actorId", STRING)?,
            client_id: d.string("clientId", STRING)?,
            doc,
            timestamp: d.int("timestamp", NUMBER)?,
        }));
    }
    if let Some(error) = d.0.get("error") {
        let error = match error.as_str() {
            Some("presence.too_large") => PresenceErrorCode::TooLarge,
            Some("presence.forbidden") => PresenceErrorCode::Forbidden,
            _ => return bad("presence error is outside the closed set"),
        };
        return Ok(ControlMessage::PresenceError(PresenceError {
            scope_key,
            error,
            timestamp: d.int("timestamp", NUMBER)?,
        }));
    }
    Ok(ControlMessage::PresencePublish(PresencePublish {
        scope_key,
        doc: d.doc()?,
    }))
}

fn data<'a>(message: &'a Map<String, Value>) -> R<Data<'a>> {
    match message.get("data") {
        Some(Value::Object(m)) => Ok(Data(m)),
        _ => bad("a known event needs a data object"),
    }
}

/// Parses one control message from its JSON text.
pub fn parse_control_message(text: &str) -> Result<ControlMessage, MalformedControlMessage> {
    let value: Value = serde_json::from_str(text).map_err(|_| MalformedControlMessage {
        reason: "the text is not JSON",
    })?;
    parse_control_value(value)
}

/// Parses one control message already parsed as JSON.
pub fn parse_control_value(value: Value) -> Result<ControlMessage, MalformedControlMessage> {
    let Some(message) = value.as_object() else {
        return bad("a control message is a JSON object");
    };
    if let Some(event) = message.get("event") {
        let Some(event) = event.as_str() else {
            return bad("event must be a string");
        };
        return match event {
            "hello" => hello(&data(message)?),
            "sync" => wake(&data(message)?),
            "heartbeat" => Ok(ControlMessage::Heartbeat {
                timestamp: data(message)?.int("timestamp", NUMBER)?,
            }),
            "presence" => presence(&data(message)?),
            _ => Ok(ControlMessage::Unknown(value)),
        };
    }
    match message.get("type").map(Value::as_str) {
        Some(Some("ack")) => Ok(ControlMessage::Ack {
            cursor: Data(message).int("cursor", NUMBER)?,
        }),
        Some(Some(_)) => Ok(ControlMessage::Unknown(value)),
        _ => bad("a control message carries an event or a type"),
    }
}

fn doc(d: &Option<Map<String, Value>>) -> Value {
    d.clone().map(Value::Object).unwrap_or(Value::Null)
}

/// The message as a JSON value, in its wire shape.
pub fn render_control_message(message: &ControlMessage) -> Value {
    match message {
        ControlMessage::Hello(h) => json!({"event": "hello", "data": {
            "protocolVersion": h.protocol_version,
            "sessionId": h.session_id,
            "actorId": h.actor_id,
            "clientId": h.client_id,
            "cursor": h.cursor,
            "latestCursor": h.latest_cursor,
            "requiresSync": h.requires_sync,
            "timestamp": h.timestamp,
        }}),
        ControlMessage::Wake(w) => json!({"event": "sync", "data": {
            "cursor": w.cursor,
            "requiresPull": true,
            "reason": w.reason.as_str(),
            "timestamp": w.timestamp,
        }}),
        ControlMessage::Heartbeat { timestamp } => {
            json!({"event": "heartbeat", "data": {"timestamp": timestamp}})
        }
        ControlMessage::PresencePublish(p) => json!({"event": "presence", "data": {
            "scopeKey": p.scope_key,
            "doc": doc(&p.doc),
        }}),
        ControlMessage::PresenceFanout(p) => json!({"event": "presence", "data": {
            "scopeKey": p.scope_key,
            "kind": p.kind.as_str(),
            "actorId": p.actor_id,
            "clientId": p.client_id,
            "doc": doc(&p.doc),
            "timestamp": p.timestamp,
        }}),
        ControlMessage::PresenceError(p) => json!({"event": "presence", "data": {
            "scopeKey": p.scope_key,
            "error": p.error.as_str(),
            "timestamp": p.timestamp,
        }}),
        ControlMessage::Ack { cursor } => json!({"type": "ack", "cursor": cursor}),
        ControlMessage::Unknown(v) => v.clone(),
    }
}

/// The message as the JSON text sent on the channel.
pub fn to_json_text(message: &ControlMessage) -> String {
    render_control_message(message).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_events_are_tolerated_and_kept() {
        let text = r#"{"event":"future-thing","data":{"x":1.5}}"#;
        let parsed = parse_control_message(text).unwrap();
        assert_eq!(
            parsed,
            ControlMessage::Unknown(serde_json::from_str(text).unwrap())
        );
        assert_eq!(to_json_text(&parsed), text);
    }

    #[test]
    fn known_events_with_bad_data_are_malformed() {
        for bad in [
            r#"{"event":"hello"}"#,
            r#"{"event":"heartbeat","data":{"timestamp":"now"}}"#,
            r#"{"event":"sync","data":{"cursor":1,"requiresPull":true,"reason":"whim","timestamp":1}}"#,
            r#"{"event":"presence","data":{"scopeKey":"","doc":null}}"#,
            r#"{"event":"presence","data":{"scopeKey":"k","kind":"leave","actorId":"a","clientId":"c","doc":{},"timestamp":1}}"#,
            r#"{"type":"ack","cursor":9007199254740992}"#,
            r#"[1]"#,
            r#"{"nothing":1}"#,
        ] {
            let err = parse_control_message(bad).unwrap_err();
            assert_eq!(err.code(), "sync.invalid_request", "{bad}");
        }
    }

    #[test]
    fn ack_and_heartbeat_round_trip() {
        for text in [
            r#"{"type":"ack","cursor":12}"#,
            r#"{"event":"heartbeat","data":{"timestamp":5}}"#,
        ] {
            let parsed = parse_control_message(text).unwrap();
            assert_eq!(to_json_text(&parsed), text);
        }
    }
}
