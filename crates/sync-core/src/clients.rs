//! Client records and the partition registry (`storage-contract.md` §2.4).

use crate::scope::ScopeFilter;

/// One subscription of a client's last pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSubscription {
    /// Subscription id.
    pub id: String,
    /// Table.
    pub table: String,
    /// Requested scopes.
    pub scopes: ScopeFilter,
}

/// A client record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRecord {
    /// Client id; non-empty.
    pub client_id: String,
    /// Actor.
    pub actor_id: String,
    /// Wire protocol version (1 for records written before it existed).
    pub wire_version: i32,
    /// Minimum next cursor of the last pull; may be negative (−1 while bootstrapping).
    pub cursor: i64,
    /// Last update time.
    pub updated_at_ms: i64,
    /// Subscriptions of the last pull.
    pub subscriptions: Vec<ClientSubscription>,
}

/// Cursor summary of one client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCursorInfo {
    /// Client id.
    pub client_id: String,
    /// Cursor.
    pub cursor: i64,
    /// Last update time.
    pub updated_at_ms: i64,
}

/// One partition registry entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRegistryEntry {
    /// Partition.
    pub partition: String,
    /// Log epoch.
    pub log_epoch: String,
    /// True after a rotation.
    pub epoch_required: bool,
    /// Last authentication time.
    pub last_authenticated_at_ms: i64,
}
