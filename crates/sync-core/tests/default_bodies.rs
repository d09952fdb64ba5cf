//! The default bodies of `ServerStorage`: a dialect that leaves an optional
//! capability out keeps them, and each answers `capability_unsupported`
//! naming its capability (`storage-contract.md` §2) — never an empty result
//! a caller could take for "nothing there".

#![allow(unused_variables)]

mod common;

use std::sync::Arc;

use common::PreludeTx;
use sync_core::*;

/// A storage that implements only the required methods (none of which this
/// test calls) and keeps every default body.
struct RequiredOnly;

fn outside_this_test() -> Error {
    Error::new(ErrorCode::Backend).detail("reason", "not called by this test")
}

impl ServerStorage for RequiredOnly {
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
    fn ensure_schema(&self, schema: &CompiledSchema, opts: &EnsureOptions) -> Result<()> {
        Err(outside_this_test())
    }
    fn ensure_schema_outcome(
        &self,
        schema: &CompiledSchema,
        opts: &EnsureOptions,
    ) -> Result<EnsureOutcome> {
        Err(outside_this_test())
    }
    fn ensured_version(&self) -> Option<i32> {
        None
    }
    fn ensured_schema(&self) -> Option<Arc<CompiledSchema>> {
        None
    }
    fn read_schema_marker(&self) -> Result<Option<SchemaMarker>> {
        Err(outside_this_test())
    }
    fn touch_partition(
        &self,
        partition: &str,
        authenticated_at_ms: i64,
        initial_log_epoch: &str,
    ) -> Result<PartitionRegistryEntry> {
        Err(outside_this_test())
    }
    fn rotate_partition_log_epoch(
        &self,
        partition: &str,
        log_epoch: &str,
        authenticated_at_ms: i64,
    ) -> Result<PartitionRegistryEntry> {
        Err(outside_this_test())
    }
    fn get_partition_log_epoch(&self, partition: &str) -> Result<Option<String>> {
        Err(outside_this_test())
    }
    fn list_partition_registry(&self) -> Result<Vec<PartitionRegistryEntry>> {
        Err(outside_this_test())
    }
    fn list_partitions(&self) -> Result<Vec<String>> {
        Err(outside_this_test())
    }
    fn begin(&self, partition: &str) -> Result<Box<dyn StorageTransaction + '_>> {
        Err(outside_this_test())
    }
    fn get_max_commit_seq(&self, partition: &str) -> Result<i64> {
        Err(outside_this_test())
    }
    fn get_horizon_seq(&self, partition: &str) -> Result<i64> {
        Err(outside_this_test())
    }
    fn set_horizon_seq(&self, partition: &str, seq: i64) -> Result<()> {
        Err(outside_this_test())
    }
    fn prune_commits_through(
        &self,
        partition: &str,
        query: &CommitPruneQuery,
    ) -> Result<CommitPruneResult> {
        Err(outside_this_test())
    }
    fn get_commit_seq_before(&self, partition: &str, created_before_ms: i64) -> Result<i64> {
        Err(outside_this_test())
    }
    fn get_row(&self, partition: &str, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        Err(outside_this_test())
    }
    fn get_push_result(
        &self,
        partition: &str,
        client_id: &str,
        client_commit_id: &str,
    ) -> Result<Option<StoredPushResult>> {
        Err(outside_this_test())
    }
    fn read_commit_window(
        &self,
        partition: &str,
        query: &CommitWindowQuery,
    ) -> Result<Vec<StoredCommit>> {
        Err(outside_this_test())
    }
    fn latest_scoped_change_seq(
        &self,
        partition: &str,
        table: &str,
        filter: &ScopeFilter,
    ) -> Result<i64> {
        Err(outside_this_test())
    }
    fn scan_rows(&self, partition: &str, query: &RowScanQuery) -> Result<Vec<StoredRow>> {
        // The one scan this test reads: the payload scan's default body.
        if partition == "scanned" {
            return Ok(vec![StoredRow {
                row_id: "r1".to_owned(),
                server_version: 2,
                scopes: [("project_id".to_owned(), "p1".to_owned())].into(),
                payload: vec![1, 2, 3],
                column_versions: Some(vec![9]),
            }]);
        }
        Err(outside_this_test())
    }
    fn scan_partition_rows(
        &self,
        partition: &str,
        table: &str,
        after_row_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredRow>> {
        Err(outside_this_test())
    }
    fn get_client_record(&self, partition: &str, client_id: &str) -> Result<Option<ClientRecord>> {
        Err(outside_this_test())
    }
    fn put_client_record(&self, partition: &str, record: &ClientRecord) -> Result<()> {
        Err(outside_this_test())
    }
    fn list_client_cursors(&self, partition: &str) -> Result<Vec<ClientCursorInfo>> {
        Err(outside_this_test())
    }
    fn advance_client_cursor(
        &self,
        partition: &str,
        client_id: &str,
        actor_id: &str,
        log_epoch: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool> {
        Err(outside_this_test())
    }
    fn update_client_cursor(
        &self,
        partition: &str,
        client_id: &str,
        cursor: i64,
        updated_at_ms: i64,
    ) -> Result<bool> {
        Err(outside_this_test())
    }
    fn get_active_client_cursor_floor(
        &self,
        partition: &str,
        cutoff_ms: i64,
    ) -> Result<Option<i64>> {
        Err(outside_this_test())
    }
    fn read_checkpoints(&self, partition: &str) -> Result<Vec<StoredCheckpoint>> {
        Err(outside_this_test())
    }
    fn read_checkpoint(&self, partition: &str, name: &str) -> Result<Option<StoredCheckpoint>> {
        Err(outside_this_test())
    }
    fn list_pending_checkpoints(&self, schema_version: i32) -> Result<Vec<CheckpointKey>> {
        Err(outside_this_test())
    }
    fn list_unfinished_checkpoints(&self, schema_version: i32) -> Result<Vec<StoredCheckpoint>> {
        Err(outside_this_test())
    }
    fn read_serve_gate(&self, partition: &str, running_schema_version: i32) -> Result<ServeGate> {
        Err(outside_this_test())
    }
    fn declare_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        Err(outside_this_test())
    }
    fn claim_checkpoint(
        &self,
        partition: &str,
        name: &str,
        schema_version: i32,
        now_ms: i64,
    ) -> Result<StoredCheckpoint> {
        Err(outside_this_test())
    }
    fn advance_checkpoint(
        &self,
        partition: &str,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        observed_rows: i64,
        now_ms: i64,
    ) -> Result<bool> {
        Err(outside_this_test())
    }
    fn activate_checkpoint(
        &self,
        partition: &str,
        name: &str,
        owner_epoch: i64,
        watermark: i64,
        sources: &[String],
        now_ms: i64,
    ) -> Result<ActivationOutcome> {
        Err(outside_this_test())
    }
    fn source_coverage_seq(&self, partition: &str, tables: &[String]) -> Result<i64> {
        Err(outside_this_test())
    }
    fn has_source_changes_above(
        &self,
        partition: &str,
        tables: &[String],
        seq: i64,
    ) -> Result<Coverage> {
        Err(outside_this_test())
    }
    fn list_source_changes(
        &self,
        partition: &str,
        tables: &[String],
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<SourceChange>> {
        Err(outside_this_test())
    }
    fn required_writer_version(&self, partition: &str) -> Result<Option<i32>> {
        Err(outside_this_test())
    }
}

/// Asserts `capability_unsupported` naming `capability`.
#[track_caller]
fn unsupported<T: std::fmt::Debug>(result: Result<T>, capability: &str) {
    match result {
        Err(err) => {
            assert_eq!(err.code(), ErrorCode::CapabilityUnsupported, "{err}");
            assert_eq!(err.get_detail("capability"), Some(capability), "{err}");
        }
        Ok(value) => panic!("expected capability_unsupported ({capability}), got Ok({value:?})"),
    }
}

/// A lookup of one title through `tasks.by_title`.
fn title_lookup() -> IndexRowScanQuery {
    IndexRowScanQuery {
        table: "tasks".to_owned(),
        index: "by_title".to_owned(),
        values: vec![RowValue::String("a".to_owned())],
        after_row_id: None,
        limit: 10,
    }
}

#[test]
fn index_scans_are_unsupported_by_default() {
    let query = title_lookup();
    unsupported(RequiredOnly.scan_rows_by_index("p1", &query), "IndexScan");
}

#[test]
fn blob_references_are_unsupported_by_default() {
    unsupported(RequiredOnly.list_referenced_blob_ids("p1"), "BlobRefs");
    unsupported(
        RequiredOnly.list_rows_referencing_blob("p1", "blob-1"),
        "BlobRefs",
    );
}

#[test]
fn reactions_are_unsupported_by_default() {
    unsupported(RequiredOnly.get_reaction("p1", "k"), "Reactions");
    unsupported(RequiredOnly.retry_reaction("p1", "k", 0), "Reactions");
    unsupported(
        RequiredOnly.complete_reaction("p1", "k", "o", 0),
        "Reactions",
    );
    unsupported(
        RequiredOnly.extend_reaction_lease("p1", "k", "o", 0),
        "Reactions",
    );
    let claim = ReactionClaimQuery {
        lease_owner: "o".to_owned(),
        kinds: vec!["mail".to_owned()],
        now_ms: 0,
        lease_duration_ms: 1_000,
        limit: 10,
    };
    unsupported(RequiredOnly.claim_reactions("p1", &claim), "Reactions");
    let failure = ReactionFailureUpdate {
        lease_owner: "o".to_owned(),
        failure: ReactionFailure {
            code: "app.failed".to_owned(),
            at_ms: 0,
            details: None,
        },
        retry_at_ms: None,
    };
    unsupported(RequiredOnly.fail_reaction("p1", "k", &failure), "Reactions");
    let list = ReactionListQuery {
        statuses: Vec::new(),
        kinds: Vec::new(),
        limit: 10,
    };
    unsupported(RequiredOnly.list_reactions("p1", &list), "Reactions");
    let prune = ReactionPruneQuery {
        completed_before_ms: 0,
        dead_letter_before_ms: 0,
        limit: 10,
    };
    unsupported(RequiredOnly.prune_reactions("p1", &prune), "Reactions");
}

#[test]
fn admin_reads_are_unsupported_by_default() {
    unsupported(RequiredOnly.list_client_records("p1"), "Admin");
    unsupported(RequiredOnly.read_commits("p1", 0, 10), "Admin");
    unsupported(
        RequiredOnly.inspect_table_rows("p1", "tasks", None, 10),
        "Admin",
    );
    unsupported(RequiredOnly.get_row_scopes("p1", "tasks", "r1"), "Admin");
    let metadata = CommitMetadataQuery {
        after_seq: 0,
        before_seq: None,
        limit: 10,
        table: None,
    };
    unsupported(RequiredOnly.list_commit_metadata("p1", &metadata), "Admin");
    let activity = ScopeActivityQuery {
        variable: "org".to_owned(),
        value: "o1".to_owned(),
        limit: 10,
    };
    unsupported(RequiredOnly.scope_activity("p1", &activity), "Admin");
}

#[test]
fn registered_queries_are_unsupported_by_default() {
    let request = AuthoritativeQueryRequest {
        sql: "SELECT 1".to_owned(),
        params: Vec::new(),
        tables: Vec::new(),
    };
    unsupported(
        RequiredOnly.query_authoritative("p1", &request, &ServeContext::default()),
        "AuthoritativeQuery",
    );
}

#[test]
fn the_fence_trigger_is_unsupported_by_default() {
    unsupported(RequiredOnly.writer_fence_trigger(), "writer_fence_trigger");
}

#[test]
fn a_transaction_answers_index_scans_and_registered_queries_unsupported_by_default() {
    let query = title_lookup();
    unsupported(PreludeTx::new(None).scan_rows_by_index(&query), "IndexScan");
    let request = AuthoritativeQueryRequest {
        sql: "SELECT 1".to_owned(),
        params: Vec::new(),
        tables: Vec::new(),
    };
    unsupported(
        PreludeTx::new(None).query_authoritative(&request),
        "AuthoritativeQuery",
    );
}

#[test]
fn a_transaction_answers_blob_references_and_reactions_unsupported_by_default() {
    unsupported(
        PreludeTx::new(None).set_blob_refs("tasks", "r1", &["blob-1".to_owned()]),
        "BlobRefs",
    );
    unsupported(PreludeTx::new(None).enqueue_reactions(&[]), "Reactions");
}

#[test]
fn a_storage_keeps_no_segment_store_by_default() {
    assert!(RequiredOnly.segment_store().is_none());
}

#[test]
fn the_payload_scan_projects_scan_rows_by_default() {
    let query = RowScanQuery {
        table: "tasks".to_owned(),
        scope_filter: [("project_id".to_owned(), vec!["p1".to_owned()])].into(),
        after_row_id: None,
        limit: 10,
    };
    let rows = RequiredOnly.scan_row_payloads("scanned", &query).unwrap();
    assert_eq!(
        rows,
        [ScannedRow {
            row_id: "r1".to_owned(),
            server_version: 2,
            payload: vec![1, 2, 3],
        }]
    );
    // scan_rows' error is the payload scan's.
    let err = RequiredOnly.scan_row_payloads("p", &query).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Backend);
}
