//! Durable after-commit reactions (`storage-contract.md` §2.6).

use std::collections::BTreeMap;

/// Lifecycle state of a reaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReactionStatus {
    /// Waiting to be claimed.
    Pending,
    /// Leased by a worker.
    Leased,
    /// Done.
    Completed,
    /// Failed for good.
    DeadLetter,
}

impl ReactionStatus {
    /// Stored text form.
    pub fn as_str(self) -> &'static str {
        match self {
            ReactionStatus::Pending => "pending",
            ReactionStatus::Leased => "leased",
            ReactionStatus::Completed => "completed",
            ReactionStatus::DeadLetter => "dead-letter",
        }
    }

    /// Parses the stored text form.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => ReactionStatus::Pending,
            "leased" => ReactionStatus::Leased,
            "completed" => ReactionStatus::Completed,
            "dead-letter" => ReactionStatus::DeadLetter,
            _ => return None,
        })
    }
}

/// The last failure of a reaction.
#[derive(Debug, Clone, PartialEq)]
pub struct ReactionFailure {
    /// Failure code.
    pub code: String,
    /// When it failed.
    pub at_ms: i64,
    /// Structured details.
    pub details: Option<BTreeMap<String, serde_json::Value>>,
}

impl ReactionFailure {
    /// Stored JSON form `{"code":…,"atMs":…,"details":{…}?}`.
    pub fn to_json(&self) -> String {
        let mut map = serde_json::Map::new();
        map.insert("code".into(), self.code.clone().into());
        map.insert("atMs".into(), self.at_ms.into());
        if let Some(details) = &self.details {
            let d = details
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            map.insert("details".into(), serde_json::Value::Object(d));
        }
        serde_json::Value::Object(map).to_string()
    }

    /// Parses the stored JSON form (a double-encoded string is parsed once more).
    pub fn from_value(value: &serde_json::Value) -> Option<Self> {
        if let serde_json::Value::String(inner) = value {
            return serde_json::from_str(inner)
                .ok()
                .and_then(|v| Self::from_value(&v));
        }
        let map = value.as_object()?;
        let details = match map.get("details") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Object(d)) => {
                Some(d.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            }
            Some(_) => return None,
        };
        Some(Self {
            code: map.get("code")?.as_str()?.to_owned(),
            at_ms: map.get("atMs")?.as_i64()?,
            details,
        })
    }
}

/// A reaction to enqueue inside a push transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct NewReaction {
    /// Unique key within the partition.
    pub idempotency_key: String,
    /// Reaction type (stored column `type`).
    pub kind: String,
    /// Payload version.
    pub version: i32,
    /// Arbitrary JSON payload.
    pub payload: serde_json::Value,
    /// Source client.
    pub source_client_id: String,
    /// Source client commit id.
    pub source_client_commit_id: String,
    /// Source commit.
    pub source_commit_seq: i64,
    /// Creation time (also the initial `available_at_ms`).
    pub created_at_ms: i64,
    /// Attempt budget (not consulted by storage).
    pub max_attempts: i32,
}

/// A stored reaction.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReaction {
    /// Unique key within the partition.
    pub idempotency_key: String,
    /// Reaction type.
    pub kind: String,
    /// Payload version.
    pub version: i32,
    /// Payload.
    pub payload: serde_json::Value,
    /// Source client.
    pub source_client_id: String,
    /// Source client commit id.
    pub source_client_commit_id: String,
    /// Source commit.
    pub source_commit_seq: i64,
    /// Creation time.
    pub created_at_ms: i64,
    /// Attempt budget.
    pub max_attempts: i32,
    /// Status.
    pub status: ReactionStatus,
    /// Claims so far.
    pub attempts: i32,
    /// When a pending reaction becomes due.
    pub available_at_ms: i64,
    /// Current lease owner.
    pub lease_owner: Option<String>,
    /// Lease expiry.
    pub lease_expires_at_ms: Option<i64>,
    /// Completion time.
    pub completed_at_ms: Option<i64>,
    /// Last failure.
    pub last_failure: Option<ReactionFailure>,
}

/// Claim due reactions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReactionClaimQuery {
    /// The claiming worker.
    pub lease_owner: String,
    /// Reaction types to claim (empty → nothing).
    pub kinds: Vec<String>,
    /// Current time.
    pub now_ms: i64,
    /// Lease duration.
    pub lease_duration_ms: i64,
    /// Maximum claims.
    pub limit: i64,
}

/// List reactions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReactionListQuery {
    /// Statuses (empty = all).
    pub statuses: Vec<ReactionStatus>,
    /// Types (empty = all).
    pub kinds: Vec<String>,
    /// Maximum rows.
    pub limit: i64,
}

/// A failure report by the lease owner.
#[derive(Debug, Clone, PartialEq)]
pub struct ReactionFailureUpdate {
    /// The reporting owner.
    pub lease_owner: String,
    /// What failed.
    pub failure: ReactionFailure,
    /// Some ⇒ retry at this time; None ⇒ dead-letter.
    pub retry_at_ms: Option<i64>,
}

/// Prune aged completed and dead-letter reactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReactionPruneQuery {
    /// Delete completed rows completed strictly before this time.
    pub completed_before_ms: i64,
    /// Delete dead-letter rows available strictly before this time.
    pub dead_letter_before_ms: i64,
    /// Maximum deletions.
    pub limit: i64,
}

/// Deletions per status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrunedReactionCounts {
    /// Completed rows deleted.
    pub completed: i64,
    /// Dead-letter rows deleted.
    pub dead_letter: i64,
}
