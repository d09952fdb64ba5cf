//! The `--tokens` file: bearer tokens → partition, actor and allowed
//! scopes.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use sync_engine::{ResolveError, ScopeMap, ScopeResolver};

use crate::error::{CliCode, CliError};

/// Who a token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The partition.
    pub partition: String,
    /// The actor.
    pub actor: String,
    /// Allowed scope values per variable (`*` = any), as `sync --allow`.
    pub allow: ScopeMap,
}

/// Every token of the file.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    by_token: BTreeMap<String, Grant>,
}

fn malformed(path: &Path, reason: &str) -> CliError {
    CliError::new(CliCode::TokensFile)
        .detail("path", path.display())
        .detail("reason", reason)
}

fn text(value: &Value, key: &str) -> Option<String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn allow_map(value: Option<&Value>) -> Option<ScopeMap> {
    let Some(value) = value else {
        return Some(ScopeMap::new());
    };
    let mut allow = ScopeMap::new();
    for (key, values) in value.as_object()? {
        let mut list: Vec<String> = Vec::new();
        for v in values.as_array()? {
            let v = v.as_str()?.to_owned();
            if !list.contains(&v) {
                list.push(v);
            }
        }
        allow.insert(key.clone(), list);
    }
    Some(allow)
}

impl Tokens {
    /// Reads and checks the file.
    pub fn load(path: &Path) -> Result<Self, CliError> {
        let text_of =
            std::fs::read_to_string(path).map_err(|e| malformed(path, &e.kind().to_string()))?;
        Self::parse(&text_of).map_err(|reason| malformed(path, reason))
    }

    /// Parses the JSON text of a tokens file.
    pub fn parse(json: &str) -> Result<Self, &'static str> {
        let value: Value = serde_json::from_str(json).map_err(|_| "not_json")?;
        let object = value.as_object().ok_or("not_an_object")?;
        let mut by_token = BTreeMap::new();
        for (token, entry) in object {
            if token.is_empty() {
                return Err("empty_token");
            }
            let partition = text(entry, "partition").ok_or("partition")?;
            let actor = text(entry, "actor").ok_or("actor")?;
            let allow = allow_map(entry.get("allow")).ok_or("allow")?;
            by_token.insert(
                token.clone(),
                Grant {
                    partition,
                    actor,
                    allow,
                },
            );
        }
        Ok(Self { by_token })
    }

    /// The grant of a bearer token.
    pub fn grant(&self, token: &str) -> Option<&Grant> {
        self.by_token.get(token)
    }

    /// The scopes `actor` of `partition` may use: the union of the `allow`
    /// of every token for them (nothing when there is none).
    pub fn allowed(&self, partition: &str, actor: &str) -> ScopeMap {
        let mut allowed = ScopeMap::new();
        for grant in self
            .by_token
            .values()
            .filter(|g| g.partition == partition && g.actor == actor)
        {
            for (key, values) in &grant.allow {
                let list = allowed.entry(key.clone()).or_default();
                for v in values {
                    if !list.contains(v) {
                        list.push(v.clone());
                    }
                }
            }
        }
        allowed
    }
}

impl ScopeResolver for Tokens {
    fn resolve(&self, partition: &str, actor: &str, _: &str) -> Result<ScopeMap, ResolveError> {
        Ok(self.allowed(partition, actor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_and_allowed_scopes_are_read() {
        let tokens = Tokens::parse(
            r#"{"t1": {"partition": "p", "actor": "a", "allow": {"list_id": ["l1", "l2"]}},
                "t2": {"partition": "p", "actor": "a", "allow": {"list_id": ["l3"], "org": ["*"]}},
                "t3": {"partition": "p", "actor": "b"}}"#,
        )
        .unwrap();
        assert_eq!(tokens.grant("t1").map(|g| g.actor.as_str()), Some("a"));
        assert!(tokens.grant("nope").is_none());
        let allowed = tokens.allowed("p", "a");
        assert_eq!(allowed["list_id"], vec!["l1", "l2", "l3"]);
        assert_eq!(allowed["org"], vec!["*"]);
        assert!(tokens.allowed("p", "b").is_empty());
    }

    #[test]
    fn malformed_files_are_refused() {
        for (text, reason) in [
            ("[]", "not_an_object"),
            ("{", "not_json"),
            (r#"{"t": {"actor": "a"}}"#, "partition"),
            (r#"{"t": {"partition": "p"}}"#, "actor"),
            (
                r#"{"t": {"partition": "p", "actor": "a", "allow": {"k": "v"}}}"#,
                "allow",
            ),
        ] {
            assert_eq!(Tokens::parse(text).unwrap_err(), reason, "{text}");
        }
    }
}
