//! Validation of planned reactions and their conversion into storage
//! records (`engine.md` §4.9).

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;
use sync_core::NewReaction;

use crate::hooks::reactions::ReactionPlan;

const MAX_REACTIONS: usize = 100;
const MAX_KEY_BYTES: usize = 256;
const MAX_TYPE_BYTES: usize = 128;
const MAX_ATTEMPTS: i32 = 100;
const DEFAULT_ATTEMPTS: i32 = 10;
const MAX_DEPTH: usize = 16;
const MAX_PAYLOAD_BYTES: usize = 65_536;

/// Why a plan is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InvalidPlan(pub &'static str);

impl fmt::Display for InvalidPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid reaction plan: {}", self.0)
    }
}

impl std::error::Error for InvalidPlan {}

/// Checks every rule of §4.9 item 2.
pub(crate) fn validate(plans: &[ReactionPlan]) -> Result<(), InvalidPlan> {
    if plans.len() > MAX_REACTIONS {
        return Err(InvalidPlan("too_many_reactions"));
    }
    let mut keys = BTreeSet::new();
    for plan in plans {
        if plan.key.is_empty() || plan.key.len() > MAX_KEY_BYTES {
            return Err(InvalidPlan("key_length"));
        }
        if !keys.insert(plan.key.as_str()) {
            return Err(InvalidPlan("duplicate_key"));
        }
        if !is_type(&plan.kind) {
            return Err(InvalidPlan("type_malformed"));
        }
        if plan.version < 1 {
            return Err(InvalidPlan("version_range"));
        }
        if plan
            .max_attempts
            .is_some_and(|n| !(1..=MAX_ATTEMPTS).contains(&n))
        {
            return Err(InvalidPlan("max_attempts_range"));
        }
        if !plain_json(&plan.payload, 1) {
            return Err(InvalidPlan("payload_shape"));
        }
        let text = plan.payload.to_string();
        if text.len() > MAX_PAYLOAD_BYTES {
            return Err(InvalidPlan("payload_too_large"));
        }
        // Every dialect must store it alike: a `\u0000` escape is valid
        // JSON that `jsonb` refuses.
        if !sync_core::codec::json_projection_is_representable_in_jsonb(&text) {
            return Err(InvalidPlan("payload_unstorable"));
        }
    }
    Ok(())
}

/// `^[A-Za-z][A-Za-z0-9._:-]*$`, at most 128 bytes.
fn is_type(kind: &str) -> bool {
    let mut bytes = kind.bytes();
    kind.len() <= MAX_TYPE_BYTES
        && bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Depth ≤ 16, finite numbers, object keys in sorted order.
fn plain_json(value: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match value {
        Value::Array(items) => items.iter().all(|v| plain_json(v, depth + 1)),
        Value::Object(map) => {
            let sorted = map.keys().zip(map.keys().skip(1)).all(|(a, b)| a < b);
            sorted && map.values().all(|v| plain_json(v, depth + 1))
        }
        _ => true,
    }
}

/// Identity of the commit the reactions belong to.
pub(crate) struct Source<'a> {
    pub(crate) partition: &'a str,
    pub(crate) client_id: &'a str,
    pub(crate) client_commit_id: &'a str,
    pub(crate) commit_seq: i64,
    pub(crate) now: i64,
}

/// Storage records for validated plans.
pub(crate) fn to_records(plans: &[ReactionPlan], source: &Source<'_>) -> Vec<NewReaction> {
    plans
        .iter()
        .map(|plan| NewReaction {
            idempotency_key: Value::from(vec![
                source.partition,
                source.client_id,
                source.client_commit_id,
                plan.key.as_str(),
            ])
            .to_string(),
            kind: plan.kind.clone(),
            version: plan.version,
            payload: plan.payload.clone(),
            source_client_id: source.client_id.to_owned(),
            source_client_commit_id: source.client_commit_id.to_owned(),
            source_commit_seq: source.commit_seq,
            created_at_ms: source.now,
            max_attempts: plan.max_attempts.unwrap_or(DEFAULT_ATTEMPTS),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(key: &str) -> ReactionPlan {
        ReactionPlan {
            key: key.into(),
            kind: "email.send".into(),
            version: 1,
            payload: json!({"a": 1, "b": [1, {"c": true}]}),
            max_attempts: None,
        }
    }

    #[test]
    fn valid_plans_pass_and_convert() {
        let plans = vec![plan("k1"), plan("k2")];
        assert_eq!(validate(&plans), Ok(()));
        let records = to_records(
            &plans,
            &Source {
                partition: "P",
                client_id: "c",
                client_commit_id: "x",
                commit_seq: 7,
                now: 5,
            },
        );
        assert_eq!(records[0].idempotency_key, r#"["P","c","x","k1"]"#);
        assert_eq!(
            (records[1].source_commit_seq, records[1].max_attempts),
            (7, 10)
        );
    }

    #[test]
    fn each_rule_is_enforced() {
        let many: Vec<_> = (0..101).map(|i| plan(&format!("k{i}"))).collect();
        assert_eq!(validate(&many), Err(InvalidPlan("too_many_reactions")));
        assert_eq!(
            validate(&[plan("k"), plan("k")]),
            Err(InvalidPlan("duplicate_key"))
        );
        assert_eq!(validate(&[plan("")]), Err(InvalidPlan("key_length")));
        let mut p = plan("k");
        p.kind = "1x".into();
        assert_eq!(validate(&[p]), Err(InvalidPlan("type_malformed")));
        let mut p = plan("k");
        p.version = 0;
        assert_eq!(validate(&[p]), Err(InvalidPlan("version_range")));
        let mut p = plan("k");
        p.max_attempts = Some(101);
        assert_eq!(validate(&[p]), Err(InvalidPlan("max_attempts_range")));
        let mut p = plan("k");
        p.payload = json!({"b": 1, "a": 2});
        assert_eq!(validate(&[p]), Err(InvalidPlan("payload_shape")));
        let mut deep = json!(1);
        for _ in 0..16 {
            deep = json!([deep]);
        }
        let mut p = plan("k");
        p.payload = deep;
        assert_eq!(validate(&[p]), Err(InvalidPlan("payload_shape")));
        let mut p = plan("k");
        p.payload = json!("x".repeat(65_536));
        assert_eq!(validate(&[p]), Err(InvalidPlan("payload_too_large")));
        let mut p = plan("k");
        p.payload = json!({"a": "x\u{0}"});
        assert_eq!(validate(&[p]), Err(InvalidPlan("payload_unstorable")));
    }

    /// `payload` nested `levels` deep: `wrap` applied `levels - 1` times
    /// around a number.
    fn nested(levels: usize, wrap: fn(Value) -> Value) -> ReactionPlan {
        let mut payload = json!(1);
        for _ in 1..levels {
            payload = wrap(payload);
        }
        let mut p = plan("k");
        p.payload = payload;
        p
    }

    #[test]
    fn every_limit_is_inclusive() {
        let most: Vec<_> = (0..100).map(|i| plan(&format!("k{i}"))).collect();
        assert_eq!(validate(&most), Ok(()), "100 reactions");
        assert_eq!(validate(&[plan(&"k".repeat(256))]), Ok(()), "256-byte key");
        assert_eq!(
            validate(&[plan(&"k".repeat(257))]),
            Err(InvalidPlan("key_length"))
        );
        let mut p = plan("k");
        p.kind = format!("e{}", "x".repeat(127));
        assert_eq!(validate(&[p.clone()]), Ok(()), "128-byte type");
        p.kind.push('x');
        assert_eq!(validate(&[p]), Err(InvalidPlan("type_malformed")));
        for attempts in [1, 100] {
            let mut p = plan("k");
            p.max_attempts = Some(attempts);
            assert_eq!(validate(&[p]), Ok(()), "max_attempts {attempts}");
        }
        let mut p = plan("k");
        p.max_attempts = Some(0);
        assert_eq!(validate(&[p]), Err(InvalidPlan("max_attempts_range")));
        let mut p = plan("k");
        p.payload = json!("x".repeat(65_534)); // 65 536 bytes with its quotes
        assert_eq!(validate(&[p]), Ok(()), "a payload of exactly 65 536 bytes");
    }

    #[test]
    fn payloads_nest_sixteen_levels_in_arrays_and_objects() {
        let array = |v| json!([v]);
        let object = |v| json!({ "a": v });
        assert_eq!(validate(&[nested(16, array)]), Ok(()));
        assert_eq!(
            validate(&[nested(17, array)]),
            Err(InvalidPlan("payload_shape"))
        );
        assert_eq!(validate(&[nested(16, object)]), Ok(()));
        assert_eq!(
            validate(&[nested(17, object)]),
            Err(InvalidPlan("payload_shape"))
        );
    }

    #[test]
    fn an_invalid_plan_displays_its_reason() {
        assert_eq!(
            InvalidPlan("duplicate_key").to_string(),
            "invalid reaction plan: duplicate_key"
        );
    }
}
