//! Partition isolation: no API call for partition A returns or changes
//! anything of partition B. Both partitions hold the same identifiers —
//! row ids, scope values, client and commit ids, reaction keys, blob ids,
//! checkpoint names — so that a query missing its partition predicate would
//! find B's data. Every B value that can carry a marker does
//! (`B-ONLY`: its partition name, actors, an extra scope, reaction payloads,
//! push-result identities, client actors).
//!
//! Every `ServerStorage` and `StorageTransaction` method is called for A —
//! reads, writes, prunes, rotations, checkpoint transitions, reaction
//! transitions — and after each call B's full observable state is compared
//! with its state before, and the call's result is searched for the marker.
//! On both dialects.

use std::collections::BTreeMap;

use serde_json::json;
use sync_core::{
    AuthoritativeQueryRequest, ClientRecord, CommitMetadataQuery, CommitPruneQuery,
    CommitWindowQuery, EnsureOptions, IndexRowScanQuery, NewChange, NewCommit, NewReaction,
    ReactionClaimQuery, ReactionFailure, ReactionFailureUpdate, ReactionListQuery,
    ReactionPruneQuery, RetentionPolicy, RowScanQuery, RowValue, ScopeActivityQuery, ServeContext,
    ServerStorage, SqlValue, StoredPushResult,
};
use syncstore_tests::model::{self, ChangeSpec, Outcome};
use syncstore_tests::{deployment, fixture, DIALECTS};

const A: &str = "pA";
const B: &str = "pB-ONLY";
const MARK: &str = "B-ONLY";
const ROWS: [&str; 4] = ["r0", "r1", "r2", "r3"];
const GROUPS: [&str; 2] = ["g0", "g1"];
const KEYS: [&str; 4] = ["rx0", "rx1", "rx2", "rx3"];

fn is_b(p: &str) -> bool {
    p == B
}

/// The same history in both partitions; B's values carry the marker.
fn seed(storage: &dyn ServerStorage) {
    let schema = storage.ensured_schema().unwrap();
    for p in [A, B] {
        let actor = if is_b(p) { "actor-B-ONLY" } else { "actor-A" };
        storage
            .touch_partition(p, 1, &format!("epoch-{p}"))
            .unwrap();
        for k in 0..6 {
            let mut tx = storage.begin(p).unwrap();
            tx.lock_partition_for_push().unwrap();
            let mut changes = Vec::new();
            for (i, row_id) in ROWS.iter().enumerate() {
                if (i + k) % 3 == 0 {
                    continue;
                }
                let mut row = fixture::row(
                    &schema,
                    fixture::ITEMS,
                    row_id,
                    GROUPS[i % 2],
                    (k * 10 + i) as i64,
                    k as i64 + 1,
                );
                if is_b(p) {
                    row.scopes.insert("owner".into(), MARK.into());
                }
                tx.upsert_row(fixture::ITEMS, &row, None).unwrap();
                changes.push(fixture::upsert_change(fixture::ITEMS, &row));
                let note =
                    fixture::row(&schema, fixture::NOTES, row_id, GROUPS[i % 2], k as i64, 1);
                tx.upsert_row(fixture::NOTES, &note, None).unwrap();
                changes.push(fixture::upsert_change(fixture::NOTES, &note));
            }
            if k == 4 {
                tx.delete_row(fixture::NOTES, "r1").unwrap();
                changes.push(NewChange::delete(
                    fixture::NOTES,
                    "r1",
                    fixture::scopes("g1"),
                ));
            }
            let seq = tx
                .append_commit(&NewCommit {
                    client_id: "c".into(),
                    client_commit_id: format!("k{k}"),
                    actor_id: actor.into(),
                    created_at_ms: 1000 * k as i64,
                    changes,
                })
                .unwrap();
            let mut result = StoredPushResult::applied(seq);
            result.cache_identity = Some(format!("identity-{p}"));
            tx.put_push_result("c", &format!("k{k}"), &result).unwrap();
            tx.set_blob_refs(
                fixture::ITEMS,
                ROWS[k % 4],
                &["blob-1".into(), format!("blob-{k}")],
            )
            .ok();
            tx.enqueue_reactions(&[NewReaction {
                idempotency_key: KEYS[k % 4].to_owned() + &"x".repeat(k / 4),
                kind: "kind".into(),
                version: 1,
                payload: json!({"owner": p}),
                source_client_id: "c".into(),
                source_client_commit_id: format!("k{k}"),
                source_commit_seq: seq,
                created_at_ms: 10 * k as i64,
                max_attempts: 5,
            }])
            .unwrap();
            tx.commit().unwrap();
        }
        for client in ["c", "d"] {
            storage
                .put_client_record(
                    p,
                    &ClientRecord {
                        client_id: client.into(),
                        actor_id: actor.into(),
                        wire_version: 2,
                        cursor: 3,
                        updated_at_ms: 50,
                        subscriptions: vec![],
                    },
                )
                .unwrap();
        }
        // Reactions in every state: rx0 leased, rx1 completed, rx2 dead-letter.
        let claimed = storage
            .claim_reactions(
                p,
                &ReactionClaimQuery {
                    lease_owner: "w".into(),
                    kinds: vec!["kind".into()],
                    now_ms: 100,
                    lease_duration_ms: 1000,
                    limit: 3,
                },
            )
            .unwrap();
        assert_eq!(claimed.len(), 3);
        storage.complete_reaction(p, "rx1", "w", 101).unwrap();
        storage
            .fail_reaction(
                p,
                "rx2",
                &ReactionFailureUpdate {
                    lease_owner: "w".into(),
                    failure: ReactionFailure {
                        code: "x".into(),
                        at_ms: 102,
                        details: None,
                    },
                    retry_at_ms: None,
                },
            )
            .unwrap();
        storage.declare_checkpoint(p, "cp", 1, 5).unwrap();
        storage.declare_checkpoint(p, "cp2", 1, 5).unwrap();
    }
    storage.claim_checkpoint(B, "cp", 1, 6).unwrap();
    let epoch = storage.get_partition_log_epoch(B).unwrap().unwrap();
    storage
        .prune_commits_through(
            B,
            &CommitPruneQuery {
                log_epoch: epoch,
                through_seq: 1,
            },
        )
        .unwrap();
}

/// Everything the API shows about partition B (and nothing else).
fn observe_b(storage: &dyn ServerStorage) -> BTreeMap<String, String> {
    let mut view = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        view.insert(k.to_owned(), v);
    };
    put("counter", format!("{:?}", storage.get_max_commit_seq(B)));
    put("horizon", format!("{:?}", storage.get_horizon_seq(B)));
    put("epoch", format!("{:?}", storage.get_partition_log_epoch(B)));
    put(
        "registry",
        format!(
            "{:?}",
            storage.list_partition_registry().map(|l| l
                .into_iter()
                .filter(|e| e.partition == B)
                .collect::<Vec<_>>())
        ),
    );
    put("fence", format!("{:?}", storage.required_writer_version(B)));
    put("checkpoints", format!("{:?}", storage.read_checkpoints(B)));
    put("gate", format!("{:?}", storage.read_serve_gate(B, 1)));
    put("commits", format!("{:?}", storage.read_commits(B, 0, 1000)));
    put(
        "metadata",
        format!(
            "{:?}",
            storage.list_commit_metadata(
                B,
                &CommitMetadataQuery {
                    after_seq: 0,
                    before_seq: None,
                    limit: 1000,
                    table: None
                }
            )
        ),
    );
    put("clients", format!("{:?}", storage.list_client_records(B)));
    put("cursors", format!("{:?}", storage.list_client_cursors(B)));
    put(
        "floor",
        format!("{:?}", storage.get_active_client_cursor_floor(B, 0)),
    );
    put(
        "reactions",
        format!(
            "{:?}",
            storage.list_reactions(
                B,
                &ReactionListQuery {
                    statuses: vec![],
                    kinds: vec![],
                    limit: 1000
                }
            )
        ),
    );
    put(
        "blobs",
        format!("{:?}", storage.list_referenced_blob_ids(B)),
    );
    put(
        "blob-1 rows",
        format!("{:?}", storage.list_rows_referencing_blob(B, "blob-1")),
    );
    put(
        "sources",
        format!(
            "{:?}",
            storage.list_source_changes(
                B,
                &[fixture::ITEMS.into(), fixture::NOTES.into()],
                0,
                1000
            )
        ),
    );
    put(
        "coverage",
        format!(
            "{:?}",
            storage.source_coverage_seq(B, &[fixture::ITEMS.into()])
        ),
    );
    for k in 0..7 {
        put(
            &format!("push k{k}"),
            format!("{:?}", storage.get_push_result(B, "c", &format!("k{k}"))),
        );
    }
    for table in fixture::TABLES {
        put(
            &format!("rows {table}"),
            format!("{:?}", storage.scan_partition_rows(B, table, None, 1000)),
        );
        for g in GROUPS {
            let filter = [("grp".to_owned(), vec![g.to_owned()])].into();
            put(
                &format!("scan {table} {g}"),
                format!(
                    "{:?}",
                    storage.scan_rows(
                        B,
                        &RowScanQuery {
                            table: table.into(),
                            scope_filter: filter,
                            after_row_id: None,
                            limit: 1000
                        }
                    )
                ),
            );
            let filter = [("grp".to_owned(), vec![g.to_owned()])].into();
            put(
                &format!("window {table} {g}"),
                format!(
                    "{:?}",
                    storage.read_commit_window(
                        B,
                        &CommitWindowQuery {
                            table: table.into(),
                            scope_filter: filter,
                            after_seq: 0,
                            through_seq: 1000,
                            limit_changes: 1000
                        }
                    )
                ),
            );
            put(
                &format!("activity {g}"),
                format!(
                    "{:?}",
                    storage.scope_activity(
                        B,
                        &ScopeActivityQuery {
                            variable: "grp".into(),
                            value: g.into(),
                            limit: 1000
                        }
                    )
                ),
            );
        }
        let mut tx = storage.begin(B).unwrap();
        for row in ROWS {
            put(
                &format!("tombstone {table} {row}"),
                format!("{:?}", tx.get_tombstone_seq(table, row)),
            );
        }
        drop(tx);
    }
    view
}

struct Run<'s> {
    storage: &'s dyn ServerStorage,
    dialect: &'static str,
    before: BTreeMap<String, String>,
    calls: usize,
    failures: Vec<String>,
}

impl Run<'_> {
    /// Checks a call made inside an open transaction of A: its result shows
    /// nothing of B (B's state is compared once the transaction ends — on
    /// SQLite a second transaction would wait for the writer).
    fn peek<T: std::fmt::Debug>(&mut self, method: &str, result: T) {
        self.calls += 1;
        let text = format!("{result:?}");
        if text.contains(MARK) {
            self.failures.push(format!(
                "{}: {method} for A returned B's data: {}",
                self.dialect,
                &text[..text.len().min(300)]
            ));
        }
    }

    /// Checks one call for A: its result shows nothing of B and B is unchanged.
    fn call<T: std::fmt::Debug>(&mut self, method: &str, result: T) {
        self.peek(method, result);
        let after = observe_b(self.storage);
        if after != self.before {
            let changed: Vec<&String> = after
                .keys()
                .filter(|k| after.get(*k) != self.before.get(*k))
                .collect();
            self.failures.push(format!(
                "{}: {method} for A changed B: {changed:?}",
                self.dialect
            ));
            self.before = after;
        }
    }
}

#[allow(clippy::too_many_lines)]
fn isolation(dialect: &'static str) -> (usize, Vec<String>) {
    let deployment = deployment(dialect);
    let storage = deployment.process();
    storage
        .ensure_schema(&fixture::schema(1), &EnsureOptions::default())
        .unwrap();
    seed(storage.as_ref());
    let s = storage.as_ref();
    let before = observe_b(s);
    assert!(before["commits"].contains(MARK), "B is seeded");
    let mut run = Run {
        storage: s,
        dialect,
        before,
        calls: 0,
        failures: Vec::new(),
    };
    let tables = || vec![fixture::ITEMS.to_owned(), fixture::NOTES.to_owned()];
    let g0 = || -> sync_core::ScopeFilter {
        [("grp".to_owned(), vec!["g0".to_owned(), "g1".to_owned()])].into()
    };
    let owner =
        || -> sync_core::ScopeFilter { [("owner".to_owned(), vec![MARK.to_owned()])].into() };

    // ---- pool reads
    run.call("get_max_commit_seq", s.get_max_commit_seq(A));
    run.call("get_horizon_seq", s.get_horizon_seq(A));
    run.call(
        "get_commit_seq_before",
        s.get_commit_seq_before(A, i64::MAX),
    );
    run.call("get_partition_log_epoch", s.get_partition_log_epoch(A));
    for row in ROWS {
        run.call("get_row", s.get_row(A, fixture::ITEMS, row));
        run.call("get_row_scopes", s.get_row_scopes(A, fixture::ITEMS, row));
    }
    for k in 0..7 {
        run.call(
            "get_push_result",
            s.get_push_result(A, "c", &format!("k{k}")),
        );
    }
    for table in fixture::TABLES {
        for filter in [g0(), owner()] {
            run.call(
                "read_commit_window",
                s.read_commit_window(
                    A,
                    &CommitWindowQuery {
                        table: table.into(),
                        scope_filter: filter.clone(),
                        after_seq: 0,
                        through_seq: 1000,
                        limit_changes: 1000,
                    },
                ),
            );
            run.call(
                "latest_scoped_change_seq",
                s.latest_scoped_change_seq(A, table, &filter),
            );
            run.call(
                "scan_rows",
                s.scan_rows(
                    A,
                    &RowScanQuery {
                        table: table.into(),
                        scope_filter: filter,
                        after_row_id: None,
                        limit: 1000,
                    },
                ),
            );
        }
        run.call(
            "scan_partition_rows",
            s.scan_partition_rows(A, table, None, 1000),
        );
        run.call(
            "inspect_table_rows",
            s.inspect_table_rows(A, table, None, 1000),
        );
    }
    for n in 0..60 {
        run.call(
            "scan_rows_by_index",
            s.scan_rows_by_index(
                A,
                &IndexRowScanQuery {
                    table: fixture::ITEMS.into(),
                    index: "items_by_n".into(),
                    values: vec![RowValue::Integer(n)],
                    after_row_id: None,
                    limit: 1000,
                },
            ),
        );
    }
    run.call("get_client_record", s.get_client_record(A, "c"));
    run.call("list_client_cursors", s.list_client_cursors(A));
    run.call(
        "get_active_client_cursor_floor",
        s.get_active_client_cursor_floor(A, 0),
    );
    run.call("list_client_records", s.list_client_records(A));
    for key in KEYS {
        run.call("get_reaction", s.get_reaction(A, key));
    }
    run.call(
        "list_reactions",
        s.list_reactions(
            A,
            &ReactionListQuery {
                statuses: vec![],
                kinds: vec![],
                limit: 1000,
            },
        ),
    );
    run.call("list_referenced_blob_ids", s.list_referenced_blob_ids(A));
    run.call(
        "list_rows_referencing_blob",
        s.list_rows_referencing_blob(A, "blob-1"),
    );
    run.call(
        "list_commit_metadata",
        s.list_commit_metadata(
            A,
            &CommitMetadataQuery {
                after_seq: 0,
                before_seq: None,
                limit: 1000,
                table: None,
            },
        ),
    );
    for g in GROUPS {
        run.call(
            "scope_activity",
            s.scope_activity(
                A,
                &ScopeActivityQuery {
                    variable: "grp".into(),
                    value: g.into(),
                    limit: 1000,
                },
            ),
        );
    }
    run.call(
        "scope_activity(owner)",
        s.scope_activity(
            A,
            &ScopeActivityQuery {
                variable: "owner".into(),
                value: MARK.into(),
                limit: 1000,
            },
        ),
    );
    run.call("read_commits", s.read_commits(A, 0, 1000));
    run.call("read_checkpoints", s.read_checkpoints(A));
    run.call("read_checkpoint", s.read_checkpoint(A, "cp"));
    run.call("read_serve_gate", s.read_serve_gate(A, 1));
    run.call("source_coverage_seq", s.source_coverage_seq(A, &tables()));
    run.call(
        "has_source_changes_above",
        s.has_source_changes_above(A, &tables(), 0),
    );
    run.call(
        "list_source_changes",
        s.list_source_changes(A, &tables(), 0, 1000),
    );
    run.call("required_writer_version", s.required_writer_version(A));
    run.call(
        "query_authoritative",
        s.query_authoritative(
            "pQuery",
            &AuthoritativeQueryRequest { sql: "SELECT i.id, i.grp, n.body FROM items i JOIN notes n ON n.id = i.id WHERE i.grp IN (?, ?)".into(), params: vec![SqlValue::Text("g0".into()), SqlValue::Text("g1".into())], tables: tables() },
            &ServeContext::default(),
        ),
    );

    // ---- transaction methods (reads, then writes, then commit)
    {
        let mut tx = s.begin(A).unwrap();
        run.peek("tx.lock_partition_for_push", tx.lock_partition_for_push());
        run.peek("tx.read_serve_gate", tx.read_serve_gate(1));
        run.peek("tx.max_commit_seq", tx.max_commit_seq());
        for row in ROWS {
            run.peek("tx.get_row", tx.get_row(fixture::ITEMS, row));
            run.peek(
                "tx.get_tombstone_seq",
                tx.get_tombstone_seq(fixture::NOTES, row),
            );
        }
        run.peek("tx.get_push_result", tx.get_push_result("c", "k5"));
        run.peek(
            "tx.scan_rows",
            tx.scan_rows(&RowScanQuery {
                table: fixture::ITEMS.into(),
                scope_filter: g0(),
                after_row_id: None,
                limit: 1000,
            }),
        );
        run.peek(
            "tx.scan_rows(owner)",
            tx.scan_rows(&RowScanQuery {
                table: fixture::ITEMS.into(),
                scope_filter: owner(),
                after_row_id: None,
                limit: 1000,
            }),
        );
        run.peek(
            "tx.scan_rows_by_index",
            tx.scan_rows_by_index(&IndexRowScanQuery {
                table: fixture::ITEMS.into(),
                index: "items_by_n".into(),
                values: vec![RowValue::Integer(51)],
                after_row_id: None,
                limit: 1000,
            }),
        );
        run.peek(
            "tx.scan_partition_rows",
            tx.scan_partition_rows(fixture::NOTES, None, 1000),
        );
        run.peek(
            "tx.query_authoritative",
            tx.query_authoritative(&AuthoritativeQueryRequest {
                sql: "SELECT * FROM items".into(),
                params: vec![],
                tables: vec![fixture::ITEMS.into()],
            }),
        );
        run.peek("tx.read_checkpoint", tx.read_checkpoint("cp"));
        run.peek(
            "tx.has_source_changes_above",
            tx.has_source_changes_above(&tables(), 0),
        );
        run.peek(
            "tx.list_source_changes",
            tx.list_source_changes(&tables(), 0, 1000),
        );
        let schema = s.ensured_schema().unwrap();
        let row = fixture::row(&schema, fixture::ITEMS, "r0", "g0", 5, 9);
        run.peek("tx.upsert_row", tx.upsert_row(fixture::ITEMS, &row, None));
        run.peek("tx.delete_row", tx.delete_row(fixture::ITEMS, "r1"));
        run.peek(
            "tx.clear_tombstone",
            tx.clear_tombstone(fixture::NOTES, "r1"),
        );
        run.peek(
            "tx.set_blob_refs",
            tx.set_blob_refs(fixture::ITEMS, "r2", &[]),
        );
        run.peek(
            "tx.append_commit",
            tx.append_commit(&NewCommit {
                client_id: "c".into(),
                client_commit_id: "k6".into(),
                actor_id: "a".into(),
                created_at_ms: 9000,
                changes: vec![
                    fixture::upsert_change(fixture::ITEMS, &row),
                    NewChange::delete(fixture::ITEMS, "r1", fixture::scopes("g1")),
                ],
            }),
        );
        run.peek(
            "tx.put_push_result",
            tx.put_push_result("c", "k6", &StoredPushResult::applied(7)),
        );
        run.peek(
            "tx.enqueue_reactions",
            tx.enqueue_reactions(&[NewReaction {
                idempotency_key: "rx9".into(),
                kind: "kind".into(),
                version: 1,
                payload: json!({}),
                source_client_id: "c".into(),
                source_client_commit_id: "k6".into(),
                source_commit_seq: 7,
                created_at_ms: 99,
                max_attempts: 1,
            }]),
        );
        run.peek(
            "tx.advance_checkpoint",
            tx.advance_checkpoint("cp", 1, 0, 0, 9),
        );
        run.peek(
            "tx.activate_checkpoint",
            tx.activate_checkpoint("cp2", 0, 0, &[], 9),
        );
        run.call("tx.commit", tx.commit());
    }
    {
        let mut tx = s.begin(A).unwrap();
        tx.lock_partition_for_push().unwrap();
        let schema = s.ensured_schema().unwrap();
        tx.upsert_row(
            fixture::ITEMS,
            &fixture::row(&schema, fixture::ITEMS, "r3", "g1", 1, 20),
            None,
        )
        .unwrap();
        run.call(
            "tx.commit_rejected_push_result",
            tx.commit_rejected_push_result("c", "k7", &model::rejection(1)),
        );
    }
    {
        let tx = s.begin(A).unwrap();
        run.call("tx.rollback", tx.rollback());
    }
    let outcome = model::push(
        s,
        Some(&ServeContext::default()),
        A,
        "c",
        "k8",
        &[ChangeSpec {
            table: 0,
            row: 2,
            delete: true,
            group: 0,
            n: 0,
        }],
        false,
        1,
    );
    run.call(
        "push (standard sequence)",
        outcome.map(|o| matches!(o, Outcome::Pushed(_))),
    );

    // ---- pool writes for A with identifiers that also exist in B
    run.call("touch_partition", s.touch_partition(A, 77, "other"));
    run.call(
        "put_client_record",
        s.put_client_record(
            A,
            &ClientRecord {
                client_id: "c".into(),
                actor_id: "actor-A".into(),
                wire_version: 3,
                cursor: 9,
                updated_at_ms: 99,
                subscriptions: vec![],
            },
        ),
    );
    run.call(
        "update_client_cursor",
        s.update_client_cursor(A, "d", 11, 111),
    );
    let epoch = s.get_partition_log_epoch(A).unwrap().unwrap();
    run.call(
        "advance_client_cursor",
        s.advance_client_cursor(A, "c", "actor-A", &epoch, 12, 112),
    );
    run.call(
        "claim_reactions",
        s.claim_reactions(
            A,
            &ReactionClaimQuery {
                lease_owner: "w".into(),
                kinds: vec!["kind".into()],
                now_ms: 5000,
                lease_duration_ms: 10,
                limit: 100,
            },
        ),
    );
    run.call(
        "extend_reaction_lease",
        s.extend_reaction_lease(A, "rx0", "w", 9999),
    );
    run.call(
        "complete_reaction",
        s.complete_reaction(A, "rx0", "w", 6000),
    );
    run.call(
        "fail_reaction",
        s.fail_reaction(
            A,
            "rx3",
            &ReactionFailureUpdate {
                lease_owner: "w".into(),
                failure: ReactionFailure {
                    code: "y".into(),
                    at_ms: 1,
                    details: None,
                },
                retry_at_ms: None,
            },
        ),
    );
    run.call("retry_reaction", s.retry_reaction(A, "rx2", 7000));
    run.call(
        "prune_reactions",
        s.prune_reactions(
            A,
            &ReactionPruneQuery {
                completed_before_ms: i64::MAX,
                dead_letter_before_ms: i64::MAX,
                limit: 1000,
            },
        ),
    );
    run.call("declare_checkpoint", s.declare_checkpoint(A, "cp3", 1, 10));
    run.call("claim_checkpoint", s.claim_checkpoint(A, "cp", 1, 11));
    run.call("claim_checkpoint again", s.claim_checkpoint(A, "cp", 1, 11));
    let counter = s.get_max_commit_seq(A).unwrap();
    run.call(
        "advance_checkpoint",
        s.advance_checkpoint(A, "cp", 3, counter, 1, 12),
    );
    run.call(
        "activate_checkpoint",
        s.activate_checkpoint(A, "cp", 3, counter, &tables(), 13),
    );
    run.call(
        "activate_checkpoint (declared)",
        s.activate_checkpoint(A, "cp3", 0, counter, &[], 13),
    );
    run.call("set_horizon_seq", s.set_horizon_seq(A, 2));
    run.call(
        "prune_commits_through",
        s.prune_commits_through(
            A,
            &CommitPruneQuery {
                log_epoch: epoch.clone(),
                through_seq: counter,
            },
        ),
    );
    run.call(
        "prune_commit_log",
        sync_core::prune_commit_log(
            s,
            A,
            i64::MAX / 2,
            &RetentionPolicy {
                active_window_ms: 1,
                age_force_ms: 1,
                min_retained_commits: 0,
            },
        ),
    );
    run.call(
        "rotate_partition_log_epoch",
        s.rotate_partition_log_epoch(A, "rotated", 200),
    );
    run.call(
        "list_partitions",
        s.list_partitions()
            .map(|l| l.into_iter().filter(|p| p != B).collect::<Vec<_>>()),
    );
    run.call(
        "list_pending_checkpoints",
        s.list_pending_checkpoints(1).map(|l| {
            l.into_iter()
                .filter(|k| k.partition != B)
                .collect::<Vec<_>>()
        }),
    );
    // A different schema fingerprint at the same version re-verifies: it
    // must not touch any partition either.
    let other = deployment.process();
    run.call(
        "ensure_schema (another process)",
        other.ensure_schema(
            &fixture::schema(1),
            &EnsureOptions::with_declarations(vec![
                sync_core::CheckpointDeclaration::new(B, "cp", 1),
                sync_core::CheckpointDeclaration::new(B, "cp2", 1),
            ]),
        ),
    );
    (run.calls, run.failures)
}

#[test]
fn no_call_for_one_partition_reads_or_changes_another_on_both_dialects() {
    let mut failures = Vec::new();
    for dialect in DIALECTS {
        let (calls, mut found) = isolation(dialect);
        println!("isolation (calls) {dialect}: {calls} calls for partition A, B's full state compared after each");
        failures.append(&mut found);
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
