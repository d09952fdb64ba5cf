//! Idempotency records and their stored JSON format
//! (`storage-contract.md` §2.3 and §9.1).
//!
//! Serialization writes the members in a fixed order without whitespace.
//! Parsing is strict about what matters (statuses, member types, base64) and
//! lenient about absent optional members; any failure is
//! `sync.idempotency_cache_miss`, which is retryable.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{Map, Value};

use crate::error::{Error, ErrorCode, Result};

/// Structured details of an error result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RejectionDetails {
    /// JSON paths of offending fields.
    pub field_paths: Option<Vec<String>>,
    /// Machine-readable reason.
    pub reason: Option<String>,
    /// What the client should do.
    pub required_action: Option<String>,
    /// Related identifiers.
    pub references: Option<BTreeMap<String, String>>,
}

/// The result of one operation of a pushed commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOperationResult {
    /// Applied.
    Applied {
        /// Position of the operation in the commit.
        op_index: u32,
    },
    /// Version conflict, with the server's row.
    Conflict {
        /// Position of the operation.
        op_index: u32,
        /// Conflict code.
        code: String,
        /// Conflict message.
        message: String,
        /// Server version of the row.
        server_version: i64,
        /// Server row payload.
        server_row: Vec<u8>,
        /// The conflicting columns of a wire-version-3 conflict (a bitmap
        /// of `ceil(columnCount / 8)` bytes, bit `i` = column `i`), stored
        /// as `conflictColumns`; `None` for a whole-row conflict of wire
        /// versions 1 and 2.
        conflict_columns: Option<Vec<u8>>,
    },
    /// Rejected with an error.
    Error {
        /// Position of the operation.
        op_index: u32,
        /// Error code.
        code: String,
        /// Error message.
        message: String,
        /// Whether the client may retry.
        retryable: bool,
        /// Structured details.
        details: Option<RejectionDetails>,
    },
}

/// Terminal status of a pushed commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushStatus {
    /// Applied (has a `commit_seq`).
    Applied,
    /// Rejected (no commit).
    Rejected,
}

/// The stored outcome of one pushed commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPushResult {
    /// Status.
    pub status: PushStatus,
    /// Present iff applied.
    pub commit_seq: Option<i64>,
    /// When the result was recorded.
    pub recorded_at_ms: Option<i64>,
    /// Cache identity of the response.
    pub cache_identity: Option<String>,
    /// Per-operation results.
    pub results: Vec<PushOperationResult>,
    /// The actor that pushed the commit (stored as `actorId`): the engine
    /// answers a replay only to this actor (`engine.md` §8 item 7). `None`
    /// in records written before it was stored.
    pub actor_id: Option<String>,
}

impl StoredPushResult {
    /// An applied result with no operation results.
    pub fn applied(commit_seq: i64) -> Self {
        Self {
            status: PushStatus::Applied,
            commit_seq: Some(commit_seq),
            recorded_at_ms: None,
            cache_identity: None,
            results: Vec::new(),
            actor_id: None,
        }
    }

    /// Serializes to the stored JSON text (§9.1: fixed member order, no whitespace).
    pub fn to_json(&self) -> String {
        let mut root = Map::new();
        let status = match self.status {
            PushStatus::Applied => "applied",
            PushStatus::Rejected => "rejected",
        };
        root.insert("status".into(), status.into());
        if let (PushStatus::Applied, Some(seq)) = (self.status, self.commit_seq) {
            root.insert("commitSeq".into(), seq.into());
        }
        if let Some(at) = self.recorded_at_ms {
            root.insert("recordedAtMs".into(), at.into());
        }
        if let Some(identity) = &self.cache_identity {
            root.insert("cacheIdentity".into(), identity.clone().into());
        }
        if let Some(actor) = &self.actor_id {
            root.insert("actorId".into(), actor.clone().into());
        }
        let results = self.results.iter().map(operation_to_json).collect();
        root.insert("results".into(), Value::Array(results));
        Value::Object(root).to_string()
    }

    /// Parses stored JSON text; failures are `sync.idempotency_cache_miss`.
    pub fn from_json(text: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(text).map_err(|_| cache_miss("not_json"))?;
        Self::from_value(&value)
    }

    /// Parses an already-decoded JSON value. A JSON string whose content is
    /// the document (double encoding by some drivers) is parsed once more.
    pub fn from_value(value: &Value) -> Result<Self> {
        if let Value::String(inner) = value {
            let value: Value = serde_json::from_str(inner).map_err(|_| cache_miss("not_json"))?;
            return match value {
                Value::Object(_) => Self::from_value(&value),
                _ => Err(cache_miss("not_object")),
            };
        }
        let root = value.as_object().ok_or_else(|| cache_miss("not_object"))?;
        let status = match root.get("status").and_then(Value::as_str) {
            Some("applied") => PushStatus::Applied,
            Some("rejected") => PushStatus::Rejected,
            _ => return Err(cache_miss("unknown_status")),
        };
        let commit_seq = optional_i64(root, "commitSeq")?;
        if status == PushStatus::Applied && commit_seq.is_none() {
            return Err(cache_miss("applied_without_commit_seq"));
        }
        let commit_seq = if status == PushStatus::Applied {
            commit_seq
        } else {
            None
        };
        let recorded_at_ms = optional_i64(root, "recordedAtMs")?;
        let cache_identity = optional_string(root, "cacheIdentity")?;
        let actor_id = optional_string(root, "actorId")?;
        let results = match root.get("results") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(operation_from_json)
                .collect::<Result<_>>()?,
            Some(_) => return Err(cache_miss("bad_member")),
        };
        Ok(Self {
            status,
            commit_seq,
            recorded_at_ms,
            cache_identity,
            results,
            actor_id,
        })
    }
}

impl PushOperationResult {
    /// The record as a JSON object in the stored member order (`details`
    /// included for error records). The wire rendering of the engine uses
    /// the same members.
    pub fn to_json_value(&self) -> Value {
        operation_to_json(self)
    }

    /// Parses one record; any failure is `sync.idempotency_cache_miss`.
    pub fn from_json_value(value: &Value) -> Result<Self> {
        operation_from_json(value)
    }
}

impl RejectionDetails {
    /// The details object (`fieldPaths`, `reason`, `requiredAction`,
    /// `references`, in this order, absent members omitted).
    pub fn to_json_value(&self) -> Value {
        details_to_json(self)
    }

    /// Parses a details object; any failure is `sync.idempotency_cache_miss`.
    pub fn from_json_value(value: &Value) -> Result<Self> {
        match value {
            Value::Object(d) => details_from_json(d),
            _ => Err(cache_miss("bad_member")),
        }
    }
}

fn cache_miss(reason: &str) -> Error {
    Error::new(ErrorCode::IdempotencyCacheMiss).detail("reason", reason)
}

fn operation_to_json(result: &PushOperationResult) -> Value {
    let mut out = Map::new();
    match result {
        PushOperationResult::Applied { op_index } => {
            out.insert("opIndex".into(), (*op_index).into());
            out.insert("status".into(), "applied".into());
        }
        PushOperationResult::Conflict {
            op_index,
            code,
            message,
            server_version,
            server_row,
            conflict_columns,
        } => {
            out.insert("opIndex".into(), (*op_index).into());
            out.insert("status".into(), "conflict".into());
            out.insert("code".into(), code.clone().into());
            out.insert("message".into(), message.clone().into());
            out.insert("serverVersion".into(), (*server_version).into());
            out.insert("serverRow".into(), BASE64.encode(server_row).into());
            if let Some(columns) = conflict_columns {
                out.insert("conflictColumns".into(), BASE64.encode(columns).into());
            }
        }
        PushOperationResult::Error {
            op_index,
            code,
            message,
            retryable,
            details,
        } => {
            out.insert("opIndex".into(), (*op_index).into());
            out.insert("status".into(), "error".into());
            out.insert("code".into(), code.clone().into());
            out.insert("message".into(), message.clone().into());
            out.insert("retryable".into(), (*retryable).into());
            if let Some(details) = details {
                out.insert("details".into(), details_to_json(details));
            }
        }
    }
    Value::Object(out)
}

fn details_to_json(details: &RejectionDetails) -> Value {
    let mut out = Map::new();
    if let Some(paths) = &details.field_paths {
        out.insert(
            "fieldPaths".into(),
            Value::Array(paths.iter().cloned().map(Value::from).collect()),
        );
    }
    if let Some(reason) = &details.reason {
        out.insert("reason".into(), reason.clone().into());
    }
    if let Some(action) = &details.required_action {
        out.insert("requiredAction".into(), action.clone().into());
    }
    if let Some(references) = &details.references {
        let map = references
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        out.insert("references".into(), Value::Object(map));
    }
    Value::Object(out)
}

fn operation_from_json(value: &Value) -> Result<PushOperationResult> {
    let item = value.as_object().ok_or_else(|| cache_miss("bad_member"))?;
    let op_index = match item.get("opIndex") {
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| cache_miss("bad_member"))?,
        None => return Err(cache_miss("bad_member")),
    };
    let code = || optional_string(item, "code").map(Option::unwrap_or_default);
    let message = || optional_string(item, "message").map(Option::unwrap_or_default);
    match item.get("status").and_then(Value::as_str) {
        Some("applied") => Ok(PushOperationResult::Applied { op_index }),
        Some("conflict") => {
            let server_row = match optional_string(item, "serverRow")? {
                Some(text) => BASE64
                    .decode(text.as_bytes())
                    .map_err(|_| cache_miss("invalid_base64"))?,
                None => Vec::new(),
            };
            let conflict_columns = optional_string(item, "conflictColumns")?
                .map(|text| BASE64.decode(text.as_bytes()))
                .transpose()
                .map_err(|_| cache_miss("invalid_base64"))?;
            Ok(PushOperationResult::Conflict {
                op_index,
                code: code()?,
                message: message()?,
                server_version: optional_i64(item, "serverVersion")?.unwrap_or(0),
                server_row,
                conflict_columns,
            })
        }
        Some("error") => {
            let retryable = match item.get("retryable") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(cache_miss("bad_member")),
            };
            let details = match item.get("details") {
                None | Some(Value::Null) => None,
                Some(Value::Object(d)) => Some(details_from_json(d)?),
                Some(_) => return Err(cache_miss("bad_member")),
            };
            Ok(PushOperationResult::Error {
                op_index,
                code: code()?,
                message: message()?,
                retryable,
                details,
            })
        }
        _ => Err(cache_miss("unknown_status")),
    }
}

fn details_from_json(d: &Map<String, Value>) -> Result<RejectionDetails> {
    let field_paths = match d.get("fieldPaths") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| cache_miss("bad_member"))
                })
                .collect::<Result<_>>()?,
        ),
        Some(_) => return Err(cache_miss("bad_member")),
    };
    let references = match d.get("references") {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(
            map.iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_owned()))
                        .ok_or_else(|| cache_miss("bad_member"))
                })
                .collect::<Result<_>>()?,
        ),
        Some(_) => return Err(cache_miss("bad_member")),
    };
    Ok(RejectionDetails {
        field_paths,
        reason: optional_string(d, "reason")?,
        required_action: optional_string(d, "requiredAction")?,
        references,
    })
}

fn optional_i64(map: &Map<String, Value>, key: &str) -> Result<Option<i64>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| {
                // Integral floats such as 5.0 (JSONB may normalise numbers).
                v.as_f64()
                    .filter(|f| {
                        f.fract() == 0.0 && f.abs() <= crate::limits::MAX_SAFE_INTEGER as f64
                    })
                    .map(|f| f as i64)
            })
            .map(Some)
            .ok_or_else(|| cache_miss("bad_member")),
    }
}

fn optional_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(cache_miss("bad_member")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StoredPushResult {
        StoredPushResult {
            status: PushStatus::Rejected,
            commit_seq: None,
            recorded_at_ms: Some(1_700_000_000_000),
            cache_identity: Some("5f0c".into()),
            results: vec![
                PushOperationResult::Conflict {
                    op_index: 0,
                    code: "sync.version_conflict".into(),
                    message: "stale".into(),
                    server_version: 3,
                    server_row: vec![0, 1, 2],
                    conflict_columns: None,
                },
                PushOperationResult::Error {
                    op_index: 1,
                    code: "sync.forbidden".into(),
                    message: "no".into(),
                    retryable: false,
                    details: Some(RejectionDetails {
                        reason: Some("x".into()),
                        ..Default::default()
                    }),
                },
            ],
            actor_id: None,
        }
    }

    #[test]
    fn serializes_the_spec_example_exactly() {
        assert_eq!(
            sample().to_json(),
            r#"{"status":"rejected","recordedAtMs":1700000000000,"cacheIdentity":"5f0c","results":[{"opIndex":0,"status":"conflict","code":"sync.version_conflict","message":"stale","serverVersion":3,"serverRow":"AAEC"},{"opIndex":1,"status":"error","code":"sync.forbidden","message":"no","retryable":false,"details":{"reason":"x"}}]}"#
        );
    }

    #[test]
    fn round_trips() {
        let r = sample();
        assert_eq!(StoredPushResult::from_json(&r.to_json()).unwrap(), r);
        let applied = StoredPushResult::applied(5);
        assert_eq!(
            applied.to_json(),
            r#"{"status":"applied","commitSeq":5,"results":[]}"#
        );
        assert_eq!(
            StoredPushResult::from_json(&applied.to_json()).unwrap(),
            applied
        );
    }

    #[test]
    fn the_actor_is_stored_after_the_cache_identity() {
        let r = StoredPushResult {
            actor_id: Some("alice".into()),
            ..StoredPushResult::applied(5)
        };
        assert_eq!(
            r.to_json(),
            r#"{"status":"applied","commitSeq":5,"actorId":"alice","results":[]}"#
        );
        assert_eq!(StoredPushResult::from_json(&r.to_json()).unwrap(), r);
        let wrong =
            StoredPushResult::from_json(r#"{"status":"applied","commitSeq":5,"actorId":7}"#);
        assert!(wrong.is_err_and(|e| e.is(ErrorCode::IdempotencyCacheMiss)));
    }

    #[test]
    fn absent_fields_take_defaults() {
        let r = StoredPushResult::from_json(
            r#"{"status":"rejected","results":[{"opIndex":0,"status":"conflict"},{"opIndex":1,"status":"error"}]}"#,
        )
        .unwrap();
        assert_eq!(
            r.results[0],
            PushOperationResult::Conflict {
                op_index: 0,
                code: String::new(),
                message: String::new(),
                server_version: 0,
                server_row: vec![],
                conflict_columns: None,
            }
        );
    }

    #[test]
    fn conflict_columns_are_stored_after_the_server_row() {
        let record = PushOperationResult::Conflict {
            op_index: 0,
            code: "sync.version_conflict".into(),
            message: "stale".into(),
            server_version: 3,
            server_row: vec![0, 1, 2],
            conflict_columns: Some(vec![0b0000_0110]),
        };
        let value = record.to_json_value();
        assert_eq!(
            value.to_string(),
            r#"{"opIndex":0,"status":"conflict","code":"sync.version_conflict","message":"stale","serverVersion":3,"serverRow":"AAEC","conflictColumns":"Bg=="}"#
        );
        assert_eq!(
            PushOperationResult::from_json_value(&value).unwrap(),
            record
        );
        let bad = serde_json::json!({"opIndex": 0, "status": "conflict", "conflictColumns": "!"});
        assert!(PushOperationResult::from_json_value(&bad)
            .is_err_and(|e| e.is(ErrorCode::IdempotencyCacheMiss)));
    }

    #[test]
    fn double_encoded_documents_are_read() {
        let text = serde_json::to_string(&StoredPushResult::applied(2).to_json()).unwrap();
        assert_eq!(
            StoredPushResult::from_json(&text).unwrap().commit_seq,
            Some(2)
        );
    }

    #[test]
    fn one_record_and_its_details_render_and_parse_on_their_own() {
        let records = sample().results;
        for record in &records {
            let value = record.to_json_value();
            assert!(value.is_object(), "{value}");
            assert_eq!(
                PushOperationResult::from_json_value(&value).unwrap(),
                *record
            );
        }
        assert_eq!(
            records[1].to_json_value().to_string(),
            r#"{"opIndex":1,"status":"error","code":"sync.forbidden","message":"no","retryable":false,"details":{"reason":"x"}}"#
        );
        let details = RejectionDetails {
            field_paths: Some(vec!["$.title".into()]),
            reason: Some("too_long".into()),
            required_action: None,
            references: Some(BTreeMap::from([("row".into(), "t1".into())])),
        };
        let value = details.to_json_value();
        assert_eq!(
            value.to_string(),
            r#"{"fieldPaths":["$.title"],"reason":"too_long","references":{"row":"t1"}}"#
        );
        assert_eq!(RejectionDetails::from_json_value(&value).unwrap(), details);
        for bad in [Value::Null, Value::from("reason"), Value::from(vec![1])] {
            let e = RejectionDetails::from_json_value(&bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::IdempotencyCacheMiss, "{bad}");
        }
    }

    #[test]
    fn integral_floats_are_read_as_integers_and_others_are_not() {
        // JSONB may store 5 as 5.0; a fraction or a float beyond 2^53 is
        // not an integer the record could have held.
        let r = StoredPushResult::from_json(
            r#"{"status":"applied","commitSeq":5.0,"recordedAtMs":-7.0,"results":[]}"#,
        )
        .unwrap();
        assert_eq!((r.commit_seq, r.recorded_at_ms), (Some(5), Some(-7)));
        let large =
            StoredPushResult::from_json(r#"{"status":"applied","commitSeq":1e15,"results":[]}"#)
                .unwrap();
        assert_eq!(large.commit_seq, Some(1_000_000_000_000_000));
        for bad in [
            r#"{"status":"applied","commitSeq":5.5,"results":[]}"#.to_owned(),
            r#"{"status":"applied","commitSeq":0.5,"results":[]}"#.to_owned(),
            // Beyond 2^53 - 1.
            r#"{"status":"applied","commitSeq":1e16,"results":[]}"#.to_owned(),
            r#"{"status":"applied","commitSeq":1e300,"results":[]}"#.to_owned(),
        ] {
            let e = StoredPushResult::from_json(&bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::IdempotencyCacheMiss, "{bad}");
        }
    }

    #[test]
    fn unreadable_documents_are_cache_misses() {
        for bad in [
            "not json",
            "[1]",
            r#"{"status":"maybe","results":[]}"#,
            r#"{"status":"applied","results":[]}"#,
            r#"{"status":"rejected","results":[{"opIndex":0,"status":"weird"}]}"#,
            r#"{"status":"rejected","results":[{"opIndex":0,"status":"conflict","serverRow":"!!"}]}"#,
            r#"{"status":"rejected","results":[{"opIndex":"0","status":"applied"}]}"#,
            r#"{"status":"rejected","results":{}}"#,
        ] {
            let e = StoredPushResult::from_json(bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::IdempotencyCacheMiss, "{bad}");
            assert!(e.retryable());
        }
    }
}
