//! Host rejections with a checked constructor (`engine.md` §1.4, SSP2
//! §6.3.1): an invalid code or details object is a programming error
//! reported when the rejection is built, never at push time.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use sync_core::RejectionDetails;

/// Code prefixes reserved for the protocol; host codes may not use them.
pub const RESERVED_CODE_PREFIXES: [&str; 5] =
    ["sync.", "blob.", "operation.", "presence.", "client."];

const MAX_FIELD_PATHS: usize = 32;
const MAX_FIELD_PATH_CHARS: usize = 160;
const MAX_TOKEN_CHARS: usize = 96;
const MAX_REFERENCES: usize = 16;
const MAX_REFERENCE_KEY_CHARS: usize = 64;
const MAX_REFERENCE_VALUE_BYTES: usize = 256;
const MAX_DETAILS_BYTES: usize = 4096;

/// A deliberate host rejection of a push commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    code: String,
    message: String,
    details: Option<Box<RejectionDetails>>,
    op_index: Option<u32>,
}

/// Why a [`Rejection`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectionError {
    /// What is wrong (`code_empty`, `code_reserved`, `too_many_field_paths`, …).
    pub reason: &'static str,
}

impl fmt::Display for RejectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid rejection: {}", self.reason)
    }
}

impl std::error::Error for RejectionError {}

/// The message with every U+0000 replaced by U+FFFD: the result is stored
/// as JSON and a `\u0000` escape is one text Postgres `jsonb` refuses
/// (the message is a diagnostic, so it is repaired rather than refused).
fn storable_message(message: String) -> String {
    if message.contains('\0') {
        message.replace('\0', "\u{FFFD}")
    } else {
        message
    }
}

fn invalid(reason: &'static str) -> RejectionError {
    RejectionError { reason }
}

impl Rejection {
    /// Builds a rejection. `code` must be non-empty and outside the reserved
    /// prefixes; `details` are normalized (field paths de-duplicated in
    /// order, reference values trimmed) and must fit the SSP2 §6.3.1
    /// bounds. `op_index` is only read from whole-commit validators.
    pub fn new(
        code: impl Into<String>,
        message: impl Into<String>,
        details: Option<RejectionDetails>,
        op_index: Option<u32>,
    ) -> Result<Self, RejectionError> {
        let code = code.into();
        if code.trim().is_empty() {
            return Err(invalid("code_empty"));
        }
        if RESERVED_CODE_PREFIXES.iter().any(|p| code.starts_with(p)) {
            return Err(invalid("code_reserved"));
        }
        if code.chars().any(char::is_control) {
            return Err(invalid("code_control_character"));
        }
        let details = details.map(normalize_details).transpose()?.map(Box::new);
        Ok(Self {
            code,
            message: storable_message(message.into()),
            details,
            op_index,
        })
    }

    /// The host code.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The diagnostic message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The normalized details.
    pub fn details(&self) -> Option<&RejectionDetails> {
        self.details.as_deref()
    }

    /// The operation index named by a whole-commit validator.
    pub fn op_index(&self) -> Option<u32> {
        self.op_index
    }
}

/// Normalizes and checks a details object (SSP2 §6.3.1).
pub fn normalize_details(details: RejectionDetails) -> Result<RejectionDetails, RejectionError> {
    let field_paths = match details.field_paths {
        None => None,
        Some(paths) => {
            let mut seen = BTreeSet::new();
            let unique: Vec<String> = paths
                .into_iter()
                .filter(|p| seen.insert(p.clone()))
                .collect();
            if unique.is_empty() {
                return Err(invalid("field_paths_empty"));
            }
            if unique.len() > MAX_FIELD_PATHS {
                return Err(invalid("too_many_field_paths"));
            }
            if !unique.iter().all(|p| is_field_path(p)) {
                return Err(invalid("field_path_malformed"));
            }
            Some(unique)
        }
    };
    check_token(details.reason.as_deref(), "reason_malformed")?;
    check_token(
        details.required_action.as_deref(),
        "required_action_malformed",
    )?;
    let references = match details.references {
        None => None,
        Some(map) => Some(normalize_references(map)?),
    };
    let normalized = RejectionDetails {
        field_paths,
        reason: details.reason,
        required_action: details.required_action,
        references,
    };
    if normalized == RejectionDetails::default() {
        return Err(invalid("details_empty"));
    }
    let encoded = crate::wire::json_response::details_json(&normalized).to_string();
    if encoded.len() > MAX_DETAILS_BYTES {
        return Err(invalid("details_too_large"));
    }
    Ok(normalized)
}

fn normalize_references(
    map: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, RejectionError> {
    if map.is_empty() {
        return Err(invalid("references_empty"));
    }
    if map.len() > MAX_REFERENCES {
        return Err(invalid("too_many_references"));
    }
    let mut out = BTreeMap::new();
    for (key, value) in map {
        if key.chars().count() > MAX_REFERENCE_KEY_CHARS || !is_token(&key) {
            return Err(invalid("reference_key_malformed"));
        }
        let value = value.trim().to_owned();
        if value.is_empty()
            || value.len() > MAX_REFERENCE_VALUE_BYTES
            || value.chars().any(char::is_control)
        {
            return Err(invalid("reference_value_malformed"));
        }
        out.insert(key, value);
    }
    Ok(out)
}

fn check_token(token: Option<&str>, reason: &'static str) -> Result<(), RejectionError> {
    match token {
        Some(t) if t.chars().count() > MAX_TOKEN_CHARS || !is_token(t) => Err(invalid(reason)),
        _ => Ok(()),
    }
}

/// `[a-z][a-z0-9]*([._-][a-z0-9]+)*`.
fn is_token(text: &str) -> bool {
    let bytes = text.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_lowercase) {
        return false;
    }
    let mut after_separator = false;
    for &b in &bytes[1..] {
        match b {
            b'a'..=b'z' | b'0'..=b'9' => after_separator = false,
            b'.' | b'_' | b'-' if !after_separator => after_separator = true,
            _ => return false,
        }
    }
    !after_separator
}

/// `identifier(.identifier)*`, at most 160 characters; an identifier is
/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_field_path(path: &str) -> bool {
    path.chars().count() <= MAX_FIELD_PATH_CHARS
        && path.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(n: usize) -> RejectionDetails {
        RejectionDetails {
            field_paths: Some((0..n).map(|i| format!("f{i}")).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn codes_are_checked() {
        assert!(Rejection::new("task.too_long", "m", None, None).is_ok());
        for bad in [
            "",
            "sync.x",
            "blob.y",
            "operation.z",
            "presence.a",
            "client.b",
            "task.\0",
            "task.\n",
        ] {
            assert!(Rejection::new(bad, "m", None, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_message_never_holds_u0000() -> Result<(), RejectionError> {
        let r = Rejection::new("task.x", "a\0b\0", None, None)?;
        assert_eq!(r.message(), "a\u{FFFD}b\u{FFFD}");
        assert_eq!(
            Rejection::new("task.x", "a b", None, None)?.message(),
            "a b"
        );
        Ok(())
    }

    #[test]
    fn field_paths_are_bounded_and_deduplicated() {
        assert!(Rejection::new("a.b", "m", Some(paths(32)), None).is_ok());
        assert_eq!(
            Rejection::new("a.b", "m", Some(paths(33)), None)
                .unwrap_err()
                .reason,
            "too_many_field_paths"
        );
        let dup = RejectionDetails {
            field_paths: Some(vec!["title".into(), "a.b".into(), "title".into()]),
            ..Default::default()
        };
        let r = Rejection::new("a.b", "m", Some(dup), None).unwrap();
        assert_eq!(
            r.details().unwrap().field_paths.as_deref(),
            Some(&["title".to_owned(), "a.b".to_owned()][..])
        );
        for bad in ["", "1a", "a..b", "a-b", &"x".repeat(161)] {
            let d = RejectionDetails {
                field_paths: Some(vec![bad.to_owned()]),
                ..Default::default()
            };
            assert!(Rejection::new("a", "m", Some(d), None).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_and_references_are_checked() {
        for (token, ok) in [
            ("too_long", true),
            ("a.b-c_d9", true),
            ("Too", false),
            ("a__b", false),
            ("a.", false),
            ("9a", false),
        ] {
            let d = RejectionDetails {
                reason: Some(token.into()),
                ..Default::default()
            };
            assert_eq!(
                Rejection::new("a", "m", Some(d), None).is_ok(),
                ok,
                "{token}"
            );
        }
        let refs = |n: usize| RejectionDetails {
            references: Some((0..n).map(|i| (format!("k{i}"), " v ".into())).collect()),
            ..Default::default()
        };
        let r = Rejection::new("a", "m", Some(refs(16)), None).unwrap();
        assert_eq!(r.details().unwrap().references.as_ref().unwrap()["k0"], "v");
        assert!(Rejection::new("a", "m", Some(refs(17)), None).is_err());
        assert!(Rejection::new("a", "m", Some(RejectionDetails::default()), None).is_err());
    }

    /// Each rule of a token and of a reference refuses on its own, and
    /// every length limit is inclusive.
    #[test]
    fn each_token_and_reference_rule_refuses_alone_at_its_inclusive_limit() {
        let token = |t: String| RejectionDetails {
            reason: Some(t),
            ..Default::default()
        };
        let build = |d: RejectionDetails| Rejection::new("a", "m", Some(d), None).map(|_| ());
        assert_eq!(build(token("a".repeat(MAX_TOKEN_CHARS))), Ok(()));
        assert_eq!(
            build(token("a".repeat(MAX_TOKEN_CHARS + 1)))
                .unwrap_err()
                .reason,
            "reason_malformed"
        );
        let reference = |key: String, value: String| RejectionDetails {
            references: Some(BTreeMap::from([(key, value)])),
            ..Default::default()
        };
        let key_ok = "k".repeat(MAX_REFERENCE_KEY_CHARS);
        let value_ok = "v".repeat(MAX_REFERENCE_VALUE_BYTES);
        assert_eq!(build(reference(key_ok.clone(), value_ok.clone())), Ok(()));
        for (key, value, reason) in [
            (
                "k".repeat(MAX_REFERENCE_KEY_CHARS + 1),
                "v".to_owned(),
                "reference_key_malformed",
            ),
            ("Key".to_owned(), "v".to_owned(), "reference_key_malformed"),
            (
                key_ok.clone(),
                "   ".to_owned(),
                "reference_value_malformed",
            ),
            (
                key_ok.clone(),
                "v".repeat(MAX_REFERENCE_VALUE_BYTES + 1),
                "reference_value_malformed",
            ),
            (
                key_ok.clone(),
                "a\u{7}b".to_owned(),
                "reference_value_malformed",
            ),
        ] {
            assert_eq!(
                build(reference(key.clone(), value.clone()))
                    .unwrap_err()
                    .reason,
                reason,
                "{key:?} = {value:?}"
            );
        }
    }

    #[test]
    fn details_of_exactly_the_size_limit_pass() {
        // 26 distinct field paths: 25 of 154 characters and one of `last`.
        let details = |last: usize| {
            let mut paths: Vec<String> = (0..25)
                .map(|i| format!("{}{i:02}", "p".repeat(152)))
                .collect();
            paths.push("q".repeat(last));
            RejectionDetails {
                field_paths: Some(paths),
                ..Default::default()
            }
        };
        let size = |last| {
            crate::wire::json_response::details_json(&details(last))
                .to_string()
                .len()
        };
        assert_eq!(size(152), MAX_DETAILS_BYTES);
        assert!(Rejection::new("a", "m", Some(details(152)), None).is_ok());
        assert_eq!(
            Rejection::new("a", "m", Some(details(153)), None)
                .unwrap_err()
                .reason,
            "details_too_large"
        );
    }

    #[test]
    fn encoded_size_is_bounded() {
        let d = RejectionDetails {
            field_paths: Some((0..32).map(|i| format!("{}{i}", "p".repeat(150))).collect()),
            ..Default::default()
        };
        assert_eq!(
            Rejection::new("a", "m", Some(d), None).unwrap_err().reason,
            "details_too_large"
        );
    }
}
