//! The front of the pool-level methods: every [`StorageBackend`] is a
//! [`ServerStorage`] whose methods check their arguments in the order of
//! `storage-contract.md` §4, answer what the checks alone decide, and then
//! call the backend with the checked values.

use std::sync::Arc;

use crate::authoritative::{AuthoritativeQueryRequest, AuthoritativeQueryResult};
use crate::capabilities::{Capabilities, Capability};
use crate::checkpoints::{ActivationOutcome, CheckpointKey, Coverage, StoredCheckpoint};
use crate::clients::{ClientCursorInfo, ClientRecord, PartitionRegistryEntry};
use crate::error::{Error, ErrorCode, Result};
use crate::fence::FenceTriggerState;
use crate::gate::{ServeContext, ServeGate};
use crate::push_result::StoredPushResult;
use crate::queries::{
    BlobReferencingRow, CommitMetadataQuery, CommitPruneQuery, CommitPruneResult,
    CommitWindowQuery, IndexRowScanQuery, RowScanQuery, ScopeActivityQuery, ScopeCommitActivity,
};
use crate::reactions::{
    PrunedReactionCounts, ReactionClaimQuery, ReactionFailureUpdate, ReactionListQuery,
    ReactionPruneQuery, StoredReaction,
};
use crate::round_entry::{RoundEntry, RoundEntryRequest};
use crate::rows::{
    CommitMetadata, CommitRecord, ScannedRow, SourceChange, StoredCommit, StoredRow,
};
use crate::schema::CompiledSchema;
use crate::scope::{ScopeFilter, StoredScopes};
use crate::segments::SegmentStore;
use crate::storage::{EnsureOptions, EnsureOutcome, SchemaMarker, ServerStorage};
use crate::transaction::StorageTransaction;
use crate::validate;

use super::backend::StorageBackend;
use super::checked::{Checked, Request};
use super::checks::{self, partition};
use super::ensured::EnsuredSchema;
use super::transaction::FrontTransaction;

/// The backend's implementation of an optional group, or
/// `capability_unsupported` when it has none: a storage without the group
/// answers so whatever its arguments.
fn require<T: ?Sized>(group: Option<&T>, capability: Capability) -> Result<&T> {
    group.ok_or_else(|| capability.unsupported())
}

impl<B: StorageBackend> ServerStorage for B {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reactions: self.reactions().is_some(),
            blob_refs: self.blob_refs().is_some(),
            admin: self.admin().is_some(),
            authoritative_query: self.authoritative_query().is_some(),
            index_scan: self.index_scan().is_some(),
        }
    }

    fn ensure_schema(&self, schema: &CompiledSchema, opts: &EnsureOptions) -> Result<()> {
        self.ensure_schema_outcome(schema, opts).map(|_| ())
    }

    fn ensure_schema_outcome(
        &self,
        schema: &CompiledSchema,
        opts: &EnsureOptions,
    ) -> Result<EnsureOutcome> {
        for declaration in &opts.declarations {
            validate::declaration(declaration, schema.version)?;
        }
        StorageBackend::ensure_schema(self, schema, Request::new(opts))
    }

    fn ensured_version(&self) -> Option<i32> {
        self.ensured().map(|e| e.schema().version)
    }

    fn ensured_schema(&self) -> Option<Arc<CompiledSchema>> {
        self.ensured().map(|e| Arc::clone(e.schema()))
    }

    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>> {
        StorageBackend::read_schema_marker(self)
    }

    fn touch_partition(
        &self,
        p: &str,
        authenticated_at_ms: i64,
        initial_log_epoch: &str,
    ) -> Result<PartitionRegistryEntry> {
        let p = partition(p)?;
        let epoch = checks::log_epoch(initial_log_epoch)?;
        StorageBackend::touch_partition(self, p, authenticated_at_ms, epoch)
    }

    fn enter_round(&self, request: &RoundEntryRequest) -> Result<RoundEntry> {
        partition(&request.partition)?;
        checks::log_epoch(&request.initial_log_epoch)?;
        checks::running_version(request.running_schema_version)?;
        StorageBackend::enter_round(self, Request::new(request))
    }

    fn rotate_partition_log_epoch(
        &self,
        p: &str,
        log_epoch: &str,
        authenticated_at_ms: i64,
    ) -> Result<PartitionRegistryEntry> {
        let p = partition(p)?;
        let epoch = checks::log_epoch(log_epoch)?;
        StorageBackend::rotate_partition_log_epoch(self, p, epoch, authenticated_at_ms)
    }

    fn get_partition_log_epoch(&self, p: &str) -> Result<Option<String>> {
        StorageBackend::get_partition_log_epoch(self, partition(p)?)
    }

    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>> {
        StorageBackend::list_partition_registry(self)
    }

    fn list_partitions(&self) -> Result<Vec<String>> {
        StorageBackend::list_partitions(self)
    }

    fn begin(&self, p: &str) -> Result<Box<dyn StorageTransaction + '_>> {
        let p = partition(p)?;
        let ensured = self.ensured();
        let inner = StorageBackend::begin(self, p, ensured.clone())?;
        Ok(Box::new(FrontTransaction::new(inner, ensured)))
    }

    fn get_max_commit_seq(&self, p: &str) -> Result<i64> {
        StorageBackend::get_max_commit_seq(self, partition(p)?)
    }

    fn get_horizon_seq(&self, p: &str) -> Result<i64> {
        StorageBackend::get_horizon_seq(self, partition(p)?)
    }

    fn set_horizon_seq(&self, p: &str, seq: i64) -> Result<()> {
        let p = partition(p)?;
        validate::safe_non_negative("seq", seq)?;
        StorageBackend::set_horizon_seq(self, p, Checked::new(seq))
    }

    fn prune_commits_through(
        &self,
        p: &str,
        query: &CommitPruneQuery,
    ) -> Result<CommitPruneResult> {
        let p = partition(p)?;
        validate::prune_query(query)?;
        StorageBackend::prune_commits_through(self, p, Request::new(query))
    }

    fn get_commit_seq_before(&self, p: &str, created_before_ms: i64) -> Result<i64> {
        StorageBackend::get_commit_seq_before(self, partition(p)?, created_before_ms)
    }

    fn get_row(&self, p: &str, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        let p = partition(p)?;
        let ensured = self.ensured();
        let table = checks::table(ensured.as_deref(), table)?;
        StorageBackend::get_row(self, p, table, row_id)
    }

    fn get_push_result(
        &self,
        p: &str,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        StorageBackend::get_push_result(self, partition(p)?, client_id, client_commit_id)
    }

    fn read_commit_window(&self, p: &str, query: &CommitWindowQuery) -> Result<Vec<StoredCommit>> {
        let p = partition(p)?;
        let ensured = self.ensured();
        let table = checks::table(ensured.as_deref(), &query.table)?;
        if checks::candidate_values(&query.scope_filter).is_none()
            || query.limit_changes <= 0
            || query.through_seq <= query.after_seq
        {
            return Ok(Vec::new());
        }
        StorageBackend::read_commit_window(self, p, table, Request::new(query))
    }

    fn latest_scoped_change_seq(&self, p: &str, table: &str, filter: &ScopeFilter) -> Result<i64> {
        let p = partition(p)?;
        let ensured = self.ensured();
        let table = checks::table(ensured.as_deref(), table)?;
        if checks::candidate_values(filter).is_none() {
            return Ok(0);
        }
        StorageBackend::latest_scoped_change_seq(self, p, table, Request::new(filter))
    }

    fn scan_rows(&self, p: &str, query: &RowScanQuery) -> Result<Vec<StoredRow>> {
        scan_checked(self, p, query, |p, table| {
            StorageBackend::scan_rows(self, p, table, Request::new(query))
        })
    }

    fn scan_row_payloads(&self, p: &str, query: &RowScanQuery) -> Result<Vec<ScannedRow>> {
        scan_checked(self, p, query, |p, table| {
            StorageBackend::scan_row_payloads(self, p, table, Request::new(query))
        })
    }

    fn scan_rows_by_index(&self, p: &str, query: &IndexRowScanQuery) -> Result<Vec<StoredRow>> {
        let group = require(self.index_scan(), Capability::IndexScan)?;
        let p = partition(p)?;
        let ensured = self.ensured();
        let lookup = checks::index_lookup(ensured.as_deref(), query)?;
        group.scan_rows_by_index(p, lookup)
    }

    fn scan_partition_rows(
        &self,
        p: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        let p = partition(p)?;
        let ensured = self.ensured();
        let table = checks::table(ensured.as_deref(), table)?;
        let limit = checks::limit(limit)?;
        StorageBackend::scan_partition_rows(self, p, table, after_row_id, limit)
    }

    fn get_client_record(&self, p: &str, client_id: &str) -> Result<Option<ClientRecord>> {
        StorageBackend::get_client_record(self, partition(p)?, client_id)
    }

    fn put_client_record(&self, p: &str, record: &ClientRecord) -> Result<()> {
        let p = partition(p)?;
        if record.client_id.is_empty() {
            return Err(Error::invalid_argument("client_id", "empty"));
        }
        StorageBackend::put_client_record(self, p, Request::new(record))
    }

    fn list_client_cursors(&self, p: &str) -> Result<Vec<ClientCursorInfo>> {
        StorageBackend::list_client_cursors(self, partition(p)?)
    }

    fn advance_client_cursor(
        &self,
        p: &str,
        client_id: &str,
        actor_id: &str,
        log_epoch: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool> {
        let p = partition(p)?;
        let epoch = checks::log_epoch(log_epoch)?;
        StorageBackend::advance_client_cursor(
            self,
            p,
            client_id,
            actor_id,
            epoch,
            cursor,
            updated_at_ms,
        )
    }

    fn update_client_cursor(
        &self,
        p: &str,
        client_id: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool> {
        StorageBackend::update_client_cursor(self, partition(p)?, client_id, cursor, updated_at_ms)
    }

    fn get_active_client_cursor_floor(&self, p: &str, cutoff_ms: i64) -> Result<Option<i64>> {
        StorageBackend::get_active_client_cursor_floor(self, partition(p)?, cutoff_ms)
    }

    fn claim_reactions(&self, p: &str, query: &ReactionClaimQuery) -> Result<Vec<StoredReaction>> {
        let group = require(self.reactions(), Capability::Reactions)?;
        let p = partition(p)?;
        if query.kinds.is_empty() || query.limit <= 0 {
            return Ok(Vec::new());
        }
        group.claim_reactions(p, Request::new(query))
    }

    fn complete_reaction(
        &self,
        p: &str,
        key: &str,
        lease_owner: &str,
        completed_at_ms: i64,
    ) -> Result<bool> {
        let group = require(self.reactions(), Capability::Reactions)?;
        let p = partition(p)?;
        group.complete_reaction(p, key, lease_owner, completed_at_ms)
    }

    fn extend_reaction_lease(
        &self,
        p: &str,
        key: &str,
        lease_owner: &str,
        lease_expires_at_ms: i64,
    ) -> Result<bool> {
        let group = require(self.reactions(), Capability::Reactions)?;
        let p = partition(p)?;
        group.extend_reaction_lease(p, key, lease_owner, lease_expires_at_ms)
    }

    fn fail_reaction(&self, p: &str, key: &str, update: &ReactionFailureUpdate) -> Result<bool> {
        let group = require(self.reactions(), Capability::Reactions)?;
        group.fail_reaction(partition(p)?, key, update)
    }

    fn retry_reaction(&self, p: &str, key: &str, now_ms: i64) -> Result<bool> {
        let group = require(self.reactions(), Capability::Reactions)?;
        group.retry_reaction(partition(p)?, key, now_ms)
    }

    fn get_reaction(&self, p: &str, key: &str) -> Result<Option<StoredReaction>> {
        let group = require(self.reactions(), Capability::Reactions)?;
        group.get_reaction(partition(p)?, key)
    }

    fn list_reactions(&self, p: &str, query: &ReactionListQuery) -> Result<Vec<StoredReaction>> {
        let group = require(self.reactions(), Capability::Reactions)?;
        group.list_reactions(partition(p)?, query)
    }

    fn prune_reactions(&self, p: &str, query: &ReactionPruneQuery) -> Result<PrunedReactionCounts> {
        let group = require(self.reactions(), Capability::Reactions)?;
        let p = partition(p)?;
        if query.limit <= 0 {
            return Ok(PrunedReactionCounts::default());
        }
        group.prune_reactions(p, Request::new(query))
    }

    fn list_rows_referencing_blob(
        &self,
        p: &str,
        blob_id: &str,
    ) -> Result<Vec<BlobReferencingRow>> {
        let group = require(self.blob_refs(), Capability::BlobRefs)?;
        group.list_rows_referencing_blob(partition(p)?, blob_id)
    }

    fn list_referenced_blob_ids(&self, p: &str) -> Result<Vec<String>> {
        let group = require(self.blob_refs(), Capability::BlobRefs)?;
        group.list_referenced_blob_ids(partition(p)?)
    }

    fn list_client_records(&self, p: &str) -> Result<Vec<ClientRecord>> {
        let group = require(self.admin(), Capability::Admin)?;
        group.list_client_records(partition(p)?)
    }

    fn list_commit_metadata(
        &self,
        p: &str,
        query: &CommitMetadataQuery,
    ) -> Result<Vec<CommitMetadata>> {
        let group = require(self.admin(), Capability::Admin)?;
        group.list_commit_metadata(partition(p)?, query)
    }

    fn scope_activity(
        &self,
        p: &str,
        query: &ScopeActivityQuery,
    ) -> Result<Vec<ScopeCommitActivity>> {
        let group = require(self.admin(), Capability::Admin)?;
        group.scope_activity(partition(p)?, query)
    }

    fn get_row_scopes(
        &self,
        p: &str,
        table: &str,
        row_id: &str,
    ) -> Result<Option<(i64, StoredScopes)>> {
        let group = require(self.admin(), Capability::Admin)?;
        let p = partition(p)?;
        let ensured = self.ensured();
        let table = checks::table(ensured.as_deref(), table)?;
        group.get_row_scopes(p, table, row_id)
    }

    fn read_commits(&self, p: &str, after_seq: i64, limit: i64) -> Result<Vec<CommitRecord>> {
        let group = require(self.admin(), Capability::Admin)?;
        let p = partition(p)?;
        let after_seq = checks::non_negative("after_seq", after_seq)?;
        let limit = checks::limit(limit)?;
        group.read_commits(p, after_seq, limit)
    }

    fn inspect_table_rows(
        &self,
        p: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        let group = require(self.admin(), Capability::Admin)?;
        let p = partition(p)?;
        let limit = checks::limit(limit)?;
        group.inspect_table_rows(p, table, after_row_id, limit)
    }

    fn query_authoritative(
        &self,
        p: &str,
        request: &AuthoritativeQueryRequest,
        ctx: &ServeContext,
    ) -> Result<AuthoritativeQueryResult> {
        let group = require(self.authoritative_query(), Capability::AuthoritativeQuery)?;
        let p = partition(p)?;
        let Some(ensured) = self.ensured() else {
            return Err(Error::new(ErrorCode::SchemaNotEnsured));
        };
        group.query_authoritative(p, &ensured, request, ctx)
    }

    fn read_checkpoints(&self, p: &str) -> Result<Vec<StoredCheckpoint>> {
        StorageBackend::read_checkpoints(self, partition(p)?)
    }

    fn read_checkpoint(&self, p: &str, name: &str) -> Result<Option<StoredCheckpoint>> {
        let p = partition(p)?;
        StorageBackend::read_checkpoint(self, p, checks::name(name)?)
    }

    fn list_pending_checkpoints(&self, schema_version: i32) -> Result<Vec<CheckpointKey>> {
        StorageBackend::list_pending_checkpoints(self, checks::schema_version(schema_version)?)
    }

    fn list_unfinished_checkpoints(&self, schema_version: i32) -> Result<Vec<StoredCheckpoint>> {
        StorageBackend::list_unfinished_checkpoints(self, checks::schema_version(schema_version)?)
    }

    fn read_serve_gate(&self, p: &str, running_schema_version: i32) -> Result<ServeGate> {
        let p = partition(p)?;
        let running = checks::running_version(running_schema_version)?;
        StorageBackend::read_serve_gate(self, p, running)
    }

    fn declare_checkpoint(
        &self,
        p: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        let p = partition(p)?;
        let name = checks::name(name)?;
        let version = checks::schema_version(schema_version)?;
        StorageBackend::declare_checkpoint(self, p, name, version, now_ms)
    }

    fn claim_checkpoint(
        &self,
        p: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        let p = partition(p)?;
        let name = checks::name(name)?;
        let version = checks::schema_version(schema_version)?;
        StorageBackend::claim_checkpoint(self, p, name, version, now_ms)
    }

    fn advance_checkpoint(
        &self,
        p: &str,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        observed_rows: i64,
        now_ms: i64,
    ) -> Result<bool> {
        let p = partition(p)?;
        let name = checks::name(name)?;
        let watermark = checks::watermark(watermark)?;
        let observed = checks::non_negative("observed_rows", observed_rows)?;
        StorageBackend::advance_checkpoint(self, p, name, owner_epoch, watermark, observed, now_ms)
    }

    fn activate_checkpoint(
        &self,
        p: &str,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        sources: &[String],
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        let p = partition(p)?;
        let name = checks::name(name)?;
        let watermark = checks::watermark(watermark)?;
        let sources = checks::tables(self.ensured().as_deref(), sources)?;
        StorageBackend::activate_checkpoint(self, p, name, owner_epoch, watermark, &sources, now_ms)
    }

    fn source_coverage_seq(&self, p: &str, tables: &[String]) -> Result<i64> {
        let p = partition(p)?;
        let tables = checks::tables(self.ensured().as_deref(), tables)?;
        StorageBackend::source_coverage_seq(self, p, &tables)
    }

    fn has_source_changes_above(&self, p: &str, tables: &[String], seq: i64) -> Result<Coverage> {
        let p = partition(p)?;
        let seq = checks::non_negative("seq", seq)?;
        let tables = checks::tables(self.ensured().as_deref(), tables)?;
        StorageBackend::has_source_changes_above(self, p, &tables, seq)
    }

    fn list_source_changes(
        &self,
        p: &str,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>> {
        let p = partition(p)?;
        let after_seq = checks::non_negative("after_seq", after_seq)?;
        let tables = checks::tables(self.ensured().as_deref(), tables)?;
        let limit = checks::limit(limit)?;
        StorageBackend::list_source_changes(self, p, &tables, after_seq, limit)
    }

    fn required_writer_version(&self, p: &str) -> Result<Option<i32>> {
        StorageBackend::required_writer_version(self, partition(p)?)
    }

    fn writer_fence_trigger(&self) -> Result<FenceTriggerState> {
        StorageBackend::writer_fence_trigger(self)
    }

    fn segment_store(&self) -> Option<&dyn SegmentStore> {
        StorageBackend::segment_store(self)
    }

    fn commit_feed(&self) -> Option<std::sync::Arc<dyn crate::CommitFeed>> {
        StorageBackend::commit_feed(self)
    }
}

/// The checks of a scope scan in the order of `storage-contract.md` §4.7
/// (partition; an empty filter refused; an empty value list answered `[]`
/// before the table is resolved; the table; a limit ≤ 0 answered `[]`),
/// then `scan` with the checked partition and table.
fn scan_checked<B: StorageBackend, R>(
    backend: &B,
    p: &str,
    query: &RowScanQuery,
    scan: impl FnOnce(
        super::checked::Partition<'_>,
        super::checked::Table<'_, super::backend::Handle<B>>,
    ) -> Result<Vec<R>>,
) -> Result<Vec<R>> {
    let p = partition(p)?;
    if query.scope_filter.is_empty() {
        return Err(Error::new(ErrorCode::ScanRequiresScope));
    }
    if checks::candidate_values(&query.scope_filter).is_none() {
        return Ok(Vec::new());
    }
    let ensured = backend.ensured();
    let table = checks::table(ensured.as_deref(), &query.table)?;
    if query.limit <= 0 {
        return Ok(Vec::new());
    }
    scan(p, table)
}
