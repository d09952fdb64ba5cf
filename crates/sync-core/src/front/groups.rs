//! The optional groups of the storage contract (`storage-contract.md`
//! §4.8, §4.10–§4.13), one trait each. A backend implements a group by
//! implementing its trait and returning itself from the matching accessor
//! of [`StorageBackend`](super::StorageBackend); the front derives
//! [`Capabilities`](crate::Capabilities) from those accessors, so a
//! storage advertises exactly the groups it implements, and answers
//! `sync.storage.capability_unsupported` for the others whatever their
//! arguments.

use crate::authoritative::{AuthoritativeQueryRequest, AuthoritativeQueryResult};
use crate::clients::ClientRecord;
use crate::error::Result;
use crate::gate::ServeContext;
use crate::queries::{
    BlobReferencingRow, CommitMetadataQuery, ScopeActivityQuery, ScopeCommitActivity,
};
use crate::reactions::{
    PrunedReactionCounts, ReactionClaimQuery, ReactionFailureUpdate, ReactionListQuery,
    ReactionPruneQuery, StoredReaction,
};
use crate::rows::{CommitMetadata, CommitRecord, StoredRow};
use crate::scope::StoredScopes;

use super::checked::{Checked, IndexLookup, Partition, Request, Table};
use super::ensured::EnsuredSchema;

/// §4.10 durable reactions (capability `Reactions`).
pub trait ReactionsBackend: Send + Sync {
    /// Leases due reactions; the front answered `[]` already for no kinds
    /// or `limit ≤ 0`.
    fn claim_reactions(
        &self,
        partition: Partition<'_>,
        query: Request<'_, ReactionClaimQuery>,
    ) -> Result<Vec<StoredReaction>>;
    /// Owner-guarded completion.
    fn complete_reaction(
        &self,
        partition: Partition<'_>,
        key: &str,
        lease_owner: &str,
        completed_at_ms: i64,
    ) -> Result<bool>;
    /// Owner-guarded lease extension.
    fn extend_reaction_lease(
        &self,
        partition: Partition<'_>,
        key: &str,
        lease_owner: &str,
        lease_expires_at_ms: i64,
    ) -> Result<bool>;
    /// Owner-guarded failure.
    fn fail_reaction(
        &self,
        partition: Partition<'_>,
        key: &str,
        update: &ReactionFailureUpdate,
    ) -> Result<bool>;
    /// Re-queues a dead-letter reaction.
    fn retry_reaction(&self, partition: Partition<'_>, key: &str, now_ms: i64) -> Result<bool>;
    /// One reaction.
    fn get_reaction(&self, partition: Partition<'_>, key: &str) -> Result<Option<StoredReaction>>;
    /// Reactions newest first.
    fn list_reactions(
        &self,
        partition: Partition<'_>,
        query: &ReactionListQuery,
    ) -> Result<Vec<StoredReaction>>;
    /// Deletes aged reactions; the front answered zeros already for
    /// `limit ≤ 0`.
    fn prune_reactions(
        &self,
        partition: Partition<'_>,
        query: Request<'_, ReactionPruneQuery>,
    ) -> Result<PrunedReactionCounts>;
}

/// §4.11 the blob reference index (capability `BlobRefs`).
pub trait BlobRefsBackend: Send + Sync {
    /// Rows whose reference set contains the blob.
    fn list_rows_referencing_blob(
        &self,
        partition: Partition<'_>,
        blob_id: &str,
    ) -> Result<Vec<BlobReferencingRow>>;
    /// Distinct referenced blob ids.
    fn list_referenced_blob_ids(&self, partition: Partition<'_>) -> Result<Vec<String>>;
}

/// §4.12 the admin read surface (capability `Admin`), over the tables of
/// the ensured schema `S`.
pub trait AdminBackend<S: EnsuredSchema>: Send + Sync {
    /// Client records, newest update first.
    fn list_client_records(&self, partition: Partition<'_>) -> Result<Vec<ClientRecord>>;
    /// Commit metadata, newest first.
    fn list_commit_metadata(
        &self,
        partition: Partition<'_>,
        query: &CommitMetadataQuery,
    ) -> Result<Vec<CommitMetadata>>;
    /// Commits touching one scope value, newest first.
    fn scope_activity(
        &self,
        partition: Partition<'_>,
        query: &ScopeActivityQuery,
    ) -> Result<Vec<ScopeCommitActivity>>;
    /// `(server_version, scopes)` of a row.
    fn get_row_scopes(
        &self,
        partition: Partition<'_>,
        table: Table<'_, S::Handle>,
        row_id: &str,
    ) -> Result<Option<(i64, StoredScopes)>>;
    /// Operator read of retained commits; `after_seq ≥ 0`, `limit` in 1..=1000.
    fn read_commits(
        &self,
        partition: Partition<'_>,
        after_seq: Checked<i64>,
        limit: Checked<i64>,
    ) -> Result<Vec<CommitRecord>>;
    /// Operator keyset scan of a table of the **stored** layouts (the
    /// backend checks `table` against them); `limit` in 1..=1000.
    fn inspect_table_rows(
        &self,
        partition: Partition<'_>,
        table: &str,
        after_row_id: Option<&str>,
        limit: Checked<i64>,
    ) -> Result<Vec<StoredRow>>;
}

/// §4.8 trusted lookups through a declared index (capability `IndexScan`).
pub trait IndexScanBackend<S: EnsuredSchema>: Send + Sync {
    /// Exact lookup through a declared index.
    fn scan_rows_by_index(
        &self,
        partition: Partition<'_>,
        lookup: IndexLookup<'_, S::Handle>,
    ) -> Result<Vec<StoredRow>>;
}

/// §4.13 registered queries (capability `AuthoritativeQuery`).
pub trait QueryBackend<S: EnsuredSchema>: Send + Sync {
    /// A registered query against the ensured `schema` (the front refused
    /// `schema_not_ensured`); preparing it is the backend's.
    fn query_authoritative(
        &self,
        partition: Partition<'_>,
        schema: &S,
        request: &AuthoritativeQueryRequest,
        ctx: &ServeContext,
    ) -> Result<AuthoritativeQueryResult>;
}
