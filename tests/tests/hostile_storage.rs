//! Hostile input through the storage API, on both dialects: SQL-injection
//! attempts, quotes, NULs, control characters, Unicode and very long strings
//! in every identifier and value the API accepts — partitions, row ids,
//! scope variables and values, checkpoint names, client and actor ids,
//! client commit ids, log epochs, blob ids, reaction keys, kinds and lease
//! owners, table and index names, registered-query parameters — and
//! oversized inputs: huge payloads, 1000-column schemas, 10 000-change
//! commits, giant scope filters, limits at and beyond their bounds.
//!
//! Every call must either refuse with a coded error or store the value and
//! read it back verbatim; never panic, never run it as SQL. The database
//! census (every physical table and its row count, read over a raw
//! connection) proves that nothing was dropped or emptied, and the invariant
//! checker that what was stored is consistent.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::json;
use sync_core::{
    AuthoritativeQueryRequest, ClientRecord, ClientSubscription, CommitMetadataQuery,
    CommitPruneQuery, CommitWindowQuery, CompiledSchema, EnsureOptions, Error, IndexRowScanQuery,
    NewChange, NewCommit, NewReaction, PushOperationResult, PushStatus, ReactionClaimQuery,
    ReactionListQuery, RejectionDetails, RowScanQuery, RowValue, ScopeActivityQuery, ServeContext,
    ServerStorage, SqlValue, StoredPushResult, StoredRow,
};
use syncstore_tests::invariants::InvariantChecker;
use syncstore_tests::{deployment, fixture, DIALECTS};

/// The hostile strings every identifier and value is tried with.
fn hostile_strings() -> Vec<String> {
    let mut list: Vec<String> = [
        "p'; DROP TABLE sync_commits; --",
        "x\" OR \"1\"=\"1",
        "'); DELETE FROM sync_partitions WHERE ('1'='1",
        "\\'; SELECT pg_sleep(10); --",
        "Robert'); DROP TABLE items;--",
        "%_%",
        "$1 ?1 ? :name @x",
        "ünïcødé 名前 🚀",
        "\u{202e}rtl\u{FEFF}bom",
        "line\nbreak\ttab\r",
        "nul\0byte",
        "\0",
        " ",
        "\u{7f}del",
        "sync_commits",
        "_sync_partition",
        "\"\"\"'''",
        "[]`",
        "--",
        "/*",
        "null",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    list.push(format!("{}'", "a".repeat(10_000)));
    list.push("é".repeat(70));
    list
}

/// Outcome counts and failures of hostile calls.
#[derive(Default)]
struct Tally {
    tried: usize,
    verbatim: usize,
    refused: BTreeMap<String, usize>,
    failures: Vec<String>,
}

impl Tally {
    /// Runs `call`; a coded error is a refusal, `Ok` must pass `verify`, a
    /// panic is a failure.
    fn check<T>(
        &mut self,
        label: &str,
        call: impl FnOnce() -> sync_core::Result<T>,
        verify: impl FnOnce(T) -> Result<(), String>,
    ) -> bool {
        self.tried += 1;
        match catch_unwind(AssertUnwindSafe(call)) {
            Err(_) => {
                self.failures.push(format!("{label}: panicked"));
                false
            }
            Ok(Err(e)) => {
                self.refusal(label, &e);
                false
            }
            Ok(Ok(value)) => match verify(value) {
                Ok(()) => {
                    self.verbatim += 1;
                    true
                }
                Err(why) => {
                    self.failures.push(format!("{label}: {why}"));
                    false
                }
            },
        }
    }

    /// A call that must refuse with `code`.
    fn refuses<T: std::fmt::Debug>(
        &mut self,
        label: &str,
        code: &str,
        call: impl FnOnce() -> sync_core::Result<T>,
    ) {
        self.tried += 1;
        match catch_unwind(AssertUnwindSafe(call)) {
            Err(_) => self.failures.push(format!("{label}: panicked")),
            Ok(Ok(v)) => self
                .failures
                .push(format!("{label}: expected {code}, got {v:?}")),
            Ok(Err(e)) if e.code().as_str() == code => self.refusal(label, &e),
            Ok(Err(e)) => self
                .failures
                .push(format!("{label}: expected {code}, got {e:?}")),
        }
    }

    fn refusal(&mut self, label: &str, e: &Error) {
        let code = e.code().as_str();
        if code == "sync.storage.backend" {
            println!("{label}: refused by the database: {e:?}");
        }
        if !code.starts_with("sync.") && !code.starts_with("schema.") {
            self.failures.push(format!("{label}: uncoded error {e:?}"));
        }
        if e.message().contains('\'') || e.message().contains("DROP") {
            self.failures.push(format!(
                "{label}: the message leaks data: {:?}",
                e.message()
            ));
        }
        *self.refused.entry(code.to_owned()).or_default() += 1;
    }
}

fn same<T: PartialEq + std::fmt::Debug>(actual: T, expected: T) -> Result<(), String> {
    if actual == expected {
        Ok(())
    } else {
        Err(format!("read back {actual:?}, stored {expected:?}"))
    }
}

fn short(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if s.len() > out.len() {
        out.push('…');
    }
    format!("{out:?}")
}

/// A push of one upsert of `items/<row_id>` with hostile ids everywhere.
fn push_row(
    storage: &dyn ServerStorage,
    partition: &str,
    row: &StoredRow,
    client: &str,
    result: &StoredPushResult,
) -> sync_core::Result<i64> {
    let mut tx = storage.begin(partition)?;
    tx.lock_partition_for_push()?;
    tx.upsert_row(fixture::ITEMS, row, Some(0))?;
    let seq = tx.append_commit(&NewCommit {
        client_id: client.to_owned(),
        client_commit_id: client.to_owned(),
        actor_id: client.to_owned(),
        created_at_ms: 1,
        changes: vec![fixture::upsert_change(fixture::ITEMS, row)],
    })?;
    tx.put_push_result(client, client, result)?;
    tx.commit()?;
    Ok(seq)
}

fn hostile_result(h: &str, seq: i64) -> StoredPushResult {
    StoredPushResult {
        status: PushStatus::Applied,
        commit_seq: Some(seq),
        recorded_at_ms: Some(1),
        cache_identity: Some(h.to_owned()),
        results: vec![PushOperationResult::Error {
            op_index: 0,
            code: h.to_owned(),
            message: h.to_owned(),
            retryable: false,
            details: Some(RejectionDetails {
                field_paths: Some(vec![h.to_owned()]),
                reason: Some(h.to_owned()),
                required_action: Some(h.to_owned()),
                references: Some([(h.to_owned(), h.to_owned())].into()),
            }),
        }],
        actor_id: Some(h.to_owned()),
    }
}

/// Every API value that is a partition, an id, a name or a scope.
#[allow(clippy::too_many_lines)]
fn hostile_values(storage: &dyn ServerStorage, tally: &mut Tally, dialect: &str) -> Vec<String> {
    let schema = storage.ensured_schema().unwrap();
    let base = "pA";
    storage.touch_partition(base, 1, "e0").unwrap();
    let mut stored_partitions = vec![base.to_owned()];
    for (i, h) in hostile_strings().iter().enumerate() {
        let l = |what: &str| format!("{dialect}: {what} = {}", short(h));
        // --- as a partition, row id, scope value, client, epoch, result text
        let mut registered = false;
        tally.check(
            &l("touch_partition(partition, epoch)"),
            || storage.touch_partition(h, 5, h),
            |entry| {
                registered = true;
                same(
                    (entry.partition.as_str(), entry.log_epoch.as_str()),
                    (h.as_str(), h.as_str()),
                )
            },
        );
        let row = StoredRow {
            row_id: h.clone(),
            server_version: 1,
            scopes: [
                (fixture::SCOPE_VAR.to_owned(), h.clone()),
                (h.clone(), h.clone()),
            ]
            .into(),
            payload: fixture::encode(
                &schema,
                fixture::ITEMS,
                &fixture::row_values(fixture::ITEMS, 1, h, h, 3),
            ),
            column_versions: None,
        };
        let result = hostile_result(h, 1);
        let pushed = tally.check(
            &l("push(partition, row id, scopes, client ids, result)"),
            || push_row(storage, h, &row, h, &result),
            |seq| same(seq, 1),
        );
        if pushed {
            stored_partitions.push(h.clone());
            tally.check(
                &l("get_row"),
                || storage.get_row(h, fixture::ITEMS, h),
                |r| same(r, Some(row.clone())),
            );
            for filter in [fixture::SCOPE_VAR.to_owned(), h.clone()] {
                tally.check(
                    &l("scan_rows by hostile variable/value"),
                    || {
                        storage.scan_rows(
                            h,
                            &RowScanQuery {
                                table: fixture::ITEMS.into(),
                                scope_filter: [(filter.clone(), vec![h.clone()])].into(),
                                after_row_id: None,
                                limit: 10,
                            },
                        )
                    },
                    |rows| same(rows, vec![row.clone()]),
                );
            }
            tally.check(
                &l("read_commit_window"),
                || {
                    storage.read_commit_window(
                        h,
                        &CommitWindowQuery {
                            table: fixture::ITEMS.into(),
                            scope_filter: [(h.clone(), vec![h.clone()])].into(),
                            after_seq: 0,
                            through_seq: 10,
                            limit_changes: 10,
                        },
                    )
                },
                |commits| {
                    same(
                        commits
                            .iter()
                            .map(|c| (c.actor_id.clone(), c.changes.len()))
                            .collect::<Vec<_>>(),
                        vec![(h.clone(), 1)],
                    )
                },
            );
            tally.check(
                &l("read_commits"),
                || storage.read_commits(h, 0, 10),
                |commits| {
                    same(
                        commits
                            .iter()
                            .map(|c| {
                                (
                                    c.client_id.clone(),
                                    c.client_commit_id.clone(),
                                    c.changes[0].row_id.clone(),
                                )
                            })
                            .collect::<Vec<_>>(),
                        vec![(h.clone(), h.clone(), h.clone())],
                    )
                },
            );
            tally.check(
                &l("get_push_result"),
                || storage.get_push_result(h, h, h),
                |r| same(r, Some(result.clone())),
            );
            tally.check(
                &l("scope_activity"),
                || {
                    storage.scope_activity(
                        h,
                        &ScopeActivityQuery {
                            variable: h.clone(),
                            value: h.clone(),
                            limit: 10,
                        },
                    )
                },
                |a| same(a.len(), 1),
            );
            tally.check(
                &l("get_row_scopes"),
                || storage.get_row_scopes(h, fixture::ITEMS, h),
                |s| same(s, Some((1, row.scopes.clone()))),
            );
            tally.check(
                &l("latest_scoped_change_seq"),
                || {
                    storage.latest_scoped_change_seq(
                        h,
                        fixture::ITEMS,
                        &[(h.clone(), vec![h.clone()])].into(),
                    )
                },
                |s| same(s, 1),
            );
        }
        if registered {
            tally.check(
                &l("list_partitions"),
                || storage.list_partitions(),
                |list| {
                    if list.contains(h) {
                        Ok(())
                    } else {
                        Err(format!(
                            "{} missing from {} partitions",
                            short(h),
                            list.len()
                        ))
                    }
                },
            );
            tally.check(
                &l("get_partition_log_epoch"),
                || storage.get_partition_log_epoch(h),
                |e| same(e, Some(h.clone())),
            );
            tally.check(
                &l("prune_commits_through(epoch)"),
                || {
                    storage.prune_commits_through(
                        h,
                        &CommitPruneQuery {
                            log_epoch: h.clone(),
                            through_seq: 0,
                        },
                    )
                },
                |r| same(r.removed_commits, 0),
            );
        }
        // --- values inside the base partition
        tally.check(
            &l("rotate_partition_log_epoch(epoch)"),
            || storage.rotate_partition_log_epoch(base, h, 9),
            |e| same(e.log_epoch, h.clone()),
        );
        let name = format!("{h}{i}");
        tally.check(
            &l("declare_checkpoint(name)"),
            || storage.declare_checkpoint(base, &name, 1, 2),
            |c| same(c.name, name.clone()),
        );
        tally.check(
            &l("read_checkpoint(name)"),
            || storage.read_checkpoint(base, &name),
            // Names of 1..=128 bytes without NUL are valid; anything else
            // was refused above and leaves nothing to read.
            |c| match c {
                Some(c) => same(c.name, name.clone()),
                None if !name.contains('\0') && name.len() <= 128 => {
                    Err("a declared checkpoint is missing".to_owned())
                }
                None => Ok(()),
            },
        );
        let record = ClientRecord {
            client_id: h.clone(),
            actor_id: h.clone(),
            wire_version: 2,
            cursor: 1,
            updated_at_ms: 5,
            subscriptions: vec![ClientSubscription {
                id: h.clone(),
                table: h.clone(),
                scopes: [(h.clone(), vec![h.clone(), h.clone()])].into(),
            }],
        };
        if tally.check(
            &l("put_client_record"),
            || storage.put_client_record(base, &record),
            |()| Ok(()),
        ) {
            tally.check(
                &l("get_client_record"),
                || storage.get_client_record(base, h),
                |r| same(r, Some(record.clone())),
            );
            let epoch = storage.get_partition_log_epoch(base).unwrap().unwrap();
            tally.check(
                &l("advance_client_cursor(client, actor)"),
                || storage.advance_client_cursor(base, h, h, &epoch, 3, 6),
                |b| same(b, true),
            );
        }
        let reaction = NewReaction {
            idempotency_key: format!("{h}{i}"),
            kind: h.clone(),
            version: 1,
            payload: json!({ h.clone(): h }),
            source_client_id: h.clone(),
            source_client_commit_id: h.clone(),
            source_commit_seq: 1,
            created_at_ms: 1,
            max_attempts: 3,
        };
        let enqueued = tally.check(
            &l("enqueue_reactions(key, kind, payload, sources)"),
            || {
                let mut tx = storage.begin(base)?;
                tx.enqueue_reactions(std::slice::from_ref(&reaction))?;
                tx.commit()
            },
            |()| Ok(()),
        );
        if enqueued {
            tally.check(
                &l("get_reaction"),
                || storage.get_reaction(base, &reaction.idempotency_key),
                |r| {
                    let r = r.ok_or("absent")?;
                    same(
                        (r.kind, r.payload, r.source_client_id),
                        (reaction.kind.clone(), reaction.payload.clone(), h.clone()),
                    )
                },
            );
            tally.check(
                &l("claim_reactions(kind, lease owner)"),
                || {
                    storage.claim_reactions(
                        base,
                        &ReactionClaimQuery {
                            lease_owner: h.clone(),
                            kinds: vec![h.clone()],
                            now_ms: 10,
                            lease_duration_ms: 10,
                            limit: 1000,
                        },
                    )
                },
                |claimed| {
                    same(
                        claimed.iter().any(|r| {
                            r.idempotency_key == reaction.idempotency_key
                                && r.lease_owner.as_deref() == Some(h.as_str())
                        }),
                        true,
                    )
                },
            );
            tally.check(
                &l("complete_reaction(lease owner)"),
                || storage.complete_reaction(base, &reaction.idempotency_key, h, 11),
                |b| same(b, true),
            );
        }
        let blob_row = fixture::row(&schema, fixture::ITEMS, &format!("blob-row-{i}"), "g", 1, 1);
        let blobbed = tally.check(
            &l("set_blob_refs(blob id)"),
            || {
                let mut tx = storage.begin(base)?;
                tx.upsert_row(fixture::ITEMS, &blob_row, None)?;
                tx.set_blob_refs(fixture::ITEMS, &blob_row.row_id, &[h.clone(), h.clone()])?;
                tx.commit()
            },
            |()| Ok(()),
        );
        if blobbed {
            tally.check(
                &l("list_referenced_blob_ids"),
                || storage.list_referenced_blob_ids(base),
                |ids| same(ids.contains(h), true),
            );
            tally.check(
                &l("list_rows_referencing_blob"),
                || storage.list_rows_referencing_blob(base, h),
                |rows| {
                    same(
                        rows.iter().map(|r| r.row_id.clone()).collect::<Vec<_>>(),
                        vec![blob_row.row_id.clone()],
                    )
                },
            );
        }
        // --- names that are not in the schema
        tally.refuses(&l("get_row(table)"), "sync.storage.unknown_table", || {
            storage.get_row(base, h, "r")
        });
        tally.refuses(
            &l("scan_partition_rows(table)"),
            "sync.storage.unknown_table",
            || storage.scan_partition_rows(base, h, None, 10),
        );
        tally.refuses(
            &l("has_source_changes_above(table)"),
            "sync.storage.unknown_table",
            || storage.has_source_changes_above(base, std::slice::from_ref(h), 0),
        );
        tally.refuses(
            &l("scan_rows_by_index(index)"),
            "sync.storage.index_not_found",
            || {
                storage.scan_rows_by_index(
                    base,
                    &IndexRowScanQuery {
                        table: fixture::ITEMS.into(),
                        index: h.clone(),
                        values: vec![RowValue::Integer(1)],
                        after_row_id: None,
                        limit: 10,
                    },
                )
            },
        );
        tally.check(
            &l("list_commit_metadata(table)"),
            || {
                storage.list_commit_metadata(
                    base,
                    &CommitMetadataQuery {
                        after_seq: 0,
                        before_seq: None,
                        limit: 10,
                        table: Some(h.clone()),
                    },
                )
            },
            |list| same(list.len(), 0),
        );
        tally.check(
            &l("scan_rows_by_index(value)"),
            || {
                storage.scan_rows_by_index(
                    base,
                    &IndexRowScanQuery {
                        table: fixture::ITEMS.into(),
                        index: "items_by_n".into(),
                        values: vec![RowValue::Integer(3)],
                        after_row_id: Some(h.clone()),
                        limit: 10,
                    },
                )
            },
            |_| Ok(()),
        );
        tally.check(
            &l("query_authoritative(param)"),
            || {
                storage.query_authoritative(
                    "pQ",
                    &AuthoritativeQueryRequest {
                        sql: "SELECT id FROM items WHERE id = ? OR grp = ?1".into(),
                        params: vec![SqlValue::Text(h.clone())],
                        tables: vec!["items".into()],
                    },
                    &ServeContext::default(),
                )
            },
            |r| same(r.rows.len(), 0),
        );
        tally.check(
            &l("delete_row / tombstone(row id)"),
            || {
                let mut tx = storage.begin(base)?;
                tx.delete_row(fixture::ITEMS, h)?;
                let seq = tx.append_commit(&NewCommit {
                    client_id: "c".into(),
                    client_commit_id: format!("del-{i}"),
                    actor_id: "a".into(),
                    created_at_ms: 1,
                    changes: vec![NewChange::delete(
                        fixture::ITEMS,
                        h.clone(),
                        Default::default(),
                    )],
                })?;
                let tomb = tx.get_tombstone_seq(fixture::ITEMS, h)?;
                tx.clear_tombstone(fixture::ITEMS, h)?;
                let cleared = tx.get_tombstone_seq(fixture::ITEMS, h)?;
                tx.commit()?;
                Ok((tomb == Some(seq), cleared))
            },
            |r| same(r, (true, None)),
        );
    }
    stored_partitions
}

fn assert_intact(tally: &Tally, dialect: &str) {
    assert!(
        tally.failures.is_empty(),
        "{dialect}: {} failure(s):\n{}",
        tally.failures.len(),
        tally.failures.join("\n")
    );
}

#[test]
fn hostile_values_are_refused_or_stored_verbatim_on_both_dialects() {
    for dialect in DIALECTS {
        let deployment = deployment(dialect);
        let storage = deployment.process();
        storage
            .ensure_schema(&fixture::schema(1), &EnsureOptions::default())
            .unwrap();
        let before = deployment.census();
        let mut tally = Tally::default();
        let partitions = hostile_values(storage.as_ref(), &mut tally, dialect);
        let after = deployment.census();
        for table in before.keys() {
            assert!(
                after.contains_key(table),
                "{dialect}: table {table} vanished"
            );
        }
        assert_eq!(
            after.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            "{dialect}: the set of tables changed"
        );
        assert!(
            after["sync_commits"] > before["sync_commits"],
            "{dialect}: nothing was stored"
        );
        let extra: Vec<&str> = partitions.iter().map(String::as_str).collect();
        InvariantChecker::new(fixture::schema_history(1)).assert_consistent(
            storage.as_ref(),
            &extra,
            dialect,
        );
        println!(
            "hostile values {dialect}: {} calls with {} hostile strings; {} stored and read back verbatim; refused {:?}; {} partitions stored",
            tally.tried,
            hostile_strings().len(),
            tally.verbatim,
            tally.refused,
            partitions.len()
        );
        assert_intact(&tally, dialect);
    }
}

/// A schema whose every identifier is an injection attempt that the
/// identifier rules allow: compile keeps them, the DDL quotes them.
fn hostile_schema(version: i32) -> CompiledSchema {
    let mut columns = vec![
        json!({"name": "i\"d", "type": "string"}),
        json!({"name": "x'); DROP TABLE sync_commits; --", "type": "string"}),
        json!({"name": "select", "type": "integer"}),
        json!({"name": "名前 🚀", "type": "string", "nullable": true}),
    ];
    if version >= 2 {
        columns.push(
            json!({"name": "\"); DELETE FROM sync_changes; --", "type": "json", "nullable": true}),
        );
    }
    let value = json!({
        "version": version,
        "tables": [{
            "name": "t\"); DROP TABLE sync_partitions; --",
            "primaryKey": "i\"d",
            "columns": columns,
            "scopes": [{"pattern": "p'--:{v\"x'; DROP TABLE sync_changes; --}", "column": "x'); DROP TABLE sync_commits; --"}],
            "indexes": [{"name": "ix\"'; DROP INDEX x; --", "columns": ["select", "名前 🚀"]}]
        }]
    });
    sync_schema::compile(&sync_schema::parse_schema_value(&value).unwrap()).unwrap()
}

#[test]
fn hostile_identifiers_are_quoted_everywhere_on_both_dialects() {
    // Identifiers the rules refuse, with their codes.
    for (name, failure) in [
        ("sync_commits", "reserved-prefix"),
        ("_SYNC_x", "reserved-prefix"),
        ("a\u{0}b", "invalid-character"),
        ("a\nb", "invalid-character"),
        ("", "empty"),
    ] {
        let value = json!({"version": 1, "tables": [{"name": name, "primaryKey": "id", "columns": [{"name": "id", "type": "string"}], "scopes": ["s:{id}"]}]});
        let error =
            sync_schema::compile(&sync_schema::parse_schema_value(&value).unwrap()).unwrap_err();
        assert_eq!(
            error.code().as_str(),
            "schema.invalid_identifier",
            "{name:?}"
        );
        assert_eq!(error.get_detail("failure"), Some(failure), "{name:?}");
    }
    let long = "é".repeat(32);
    let value = json!({"version": 1, "tables": [{"name": long, "primaryKey": "id", "columns": [{"name": "id", "type": "string"}], "scopes": ["s:{id}"]}]});
    let error =
        sync_schema::compile(&sync_schema::parse_schema_value(&value).unwrap()).unwrap_err();
    assert_eq!(error.get_detail("failure"), Some("too-long"));

    for dialect in DIALECTS {
        let deployment = deployment(dialect);
        let storage = deployment.process();
        let v1 = hostile_schema(1);
        storage
            .ensure_schema(&v1, &EnsureOptions::default())
            .unwrap();
        let table = v1.tables[0].name.clone();
        assert!(
            deployment.census().contains_key(&table),
            "{dialect}: the table is stored under its exact name"
        );
        let variable = v1.tables[0].scope_patterns[0].variable.clone();
        let values = vec![
            RowValue::String("r'1".into()),
            RowValue::String("s'; --".into()),
            RowValue::Integer(7),
            RowValue::String("名".into()),
        ];
        let row = StoredRow {
            row_id: "r'1".into(),
            server_version: 1,
            scopes: [(variable.clone(), "s'; --".to_owned())].into(),
            payload: sync_core::codec::encode_row(&v1.tables[0], &values).unwrap(),
            column_versions: None,
        };
        let mut tx = storage.begin("p").unwrap();
        tx.upsert_row(&table, &row, None).unwrap();
        tx.append_commit(&NewCommit {
            client_id: "c".into(),
            client_commit_id: "k".into(),
            actor_id: "a".into(),
            created_at_ms: 1,
            changes: vec![fixture::upsert_change(&table, &row)],
        })
        .unwrap();
        tx.commit().unwrap();
        assert_eq!(
            storage.get_row("p", &table, "r'1").unwrap(),
            Some(row.clone()),
            "{dialect}"
        );
        let scanned = storage
            .scan_rows(
                "p",
                &RowScanQuery {
                    table: table.clone(),
                    scope_filter: [(variable.clone(), vec!["s'; --".into()])].into(),
                    after_row_id: None,
                    limit: 10,
                },
            )
            .unwrap();
        assert_eq!(scanned, vec![row.clone()], "{dialect}: scope scan");
        let by_index = storage
            .scan_rows_by_index(
                "p",
                &IndexRowScanQuery {
                    table: table.clone(),
                    index: v1.tables[0].indexes[0].name.clone(),
                    values: vec![RowValue::Integer(7), RowValue::String("名".into())],
                    after_row_id: None,
                    limit: 10,
                },
            )
            .unwrap();
        assert_eq!(by_index, vec![row.clone()], "{dialect}: index scan");
        let quoted = table.replace('"', "\"\"");
        let result = storage
            .query_authoritative(
                "p",
                &AuthoritativeQueryRequest {
                    sql: format!("SELECT \"select\" FROM \"{quoted}\""),
                    params: vec![],
                    tables: vec![table.clone()],
                },
                &ServeContext::default(),
            )
            .unwrap();
        assert_eq!(
            result.rows,
            vec![vec![SqlValue::Integer(7)]],
            "{dialect}: registered query"
        );
        // A bump appends a hostile nullable column and rewrites the row.
        let v2 = hostile_schema(2);
        storage
            .ensure_schema(&v2, &EnsureOptions::default())
            .unwrap();
        let rewritten = storage.get_row("p", &table, "r'1").unwrap().unwrap();
        let mut expected = values.clone();
        expected.push(RowValue::Null);
        assert_eq!(
            sync_core::codec::decode_row(&v2.tables[0], &rewritten.payload).unwrap(),
            expected,
            "{dialect}: rewrite"
        );
        let census = deployment.census();
        for internal in ["sync_commits", "sync_changes", "sync_partitions"] {
            assert!(
                census.contains_key(internal),
                "{dialect}: {internal} survived"
            );
        }
        assert_eq!(census["sync_commits"], 1, "{dialect}");
        println!("hostile identifiers {dialect}: table, columns, index and scope variable stored and used under their exact names");
    }
}

fn wide_schema(columns: usize) -> Result<CompiledSchema, Error> {
    let cols: Vec<_> = (0..columns)
        .map(|i| json!({"name": format!("c{i}"), "type": if i % 3 == 2 { "integer" } else { "string" }, "nullable": i > 1}))
        .collect();
    let value = json!({"version": 1, "tables": [{"name": "wide", "primaryKey": "c0", "columns": cols, "scopes": ["w:{c1}"], "indexes": [{"name": "wide_ix", "columns": ["c997"]}]}]});
    sync_schema::compile(&sync_schema::parse_schema_value(&value)?)
}

#[test]
fn oversized_inputs_are_stored_whole_or_refused_on_both_dialects() {
    let too_wide = wide_schema(1001).unwrap_err();
    assert_eq!(too_wide.code().as_str(), "schema.too_many_columns");
    for dialect in DIALECTS {
        let mut tally = Tally::default();
        // A 1000-column table whose row holds a value in every column: on
        // Postgres it fills a heap page, null bitmap included (the NULL of
        // `_sync_column_versions` brings one, as any NULL value would).
        {
            let deployment = deployment(dialect);
            let storage = deployment.process();
            let schema = wide_schema(1000).unwrap();
            storage
                .ensure_schema(&schema, &EnsureOptions::default())
                .unwrap();
            let values: Vec<RowValue> = (0..1000)
                .map(|i| {
                    if i % 3 == 2 {
                        RowValue::Integer(i as i64)
                    } else {
                        RowValue::String(format!("{i}'"))
                    }
                })
                .collect();
            let row = StoredRow {
                row_id: "0'".into(),
                server_version: 1,
                scopes: [("w".to_owned(), "1'".to_owned())].into(),
                payload: sync_core::codec::encode_row(&schema.tables[0], &values).unwrap(),
                column_versions: None,
            };
            let mut tx = storage.begin("p").unwrap();
            tx.upsert_row("wide", &row, None).unwrap();
            tx.commit().unwrap();
            assert_eq!(
                storage.get_row("p", "wide", "0'").unwrap(),
                Some(row),
                "{dialect}: 1000 columns"
            );
            let hits = storage
                .scan_rows_by_index(
                    "p",
                    &IndexRowScanQuery {
                        table: "wide".into(),
                        index: "wide_ix".into(),
                        values: vec![RowValue::String("997'".into())],
                        after_row_id: None,
                        limit: 1,
                    },
                )
                .unwrap();
            assert_eq!(hits.len(), 1, "{dialect}: index on column 997");
        }
        let deployment = deployment(dialect);
        let storage = deployment.process();
        storage
            .ensure_schema(&fixture::schema(1), &EnsureOptions::default())
            .unwrap();
        let schema = storage.ensured_schema().unwrap();
        // An 8 MiB payload.
        let big = "x'".repeat(4 << 20);
        let row = StoredRow {
            row_id: "big".into(),
            server_version: 1,
            scopes: fixture::scopes("g"),
            payload: fixture::encode(
                &schema,
                fixture::NOTES,
                &[
                    RowValue::String("big".into()),
                    RowValue::String("g".into()),
                    RowValue::String(big),
                ],
            ),
            column_versions: None,
        };
        tally.check(
            &format!("{dialect}: 8 MiB payload"),
            || {
                let mut tx = storage.begin("p")?;
                tx.upsert_row(fixture::NOTES, &row, None)?;
                tx.append_commit(&NewCommit {
                    client_id: "c".into(),
                    client_commit_id: "big".into(),
                    actor_id: "a".into(),
                    created_at_ms: 1,
                    changes: vec![fixture::upsert_change(fixture::NOTES, &row)],
                })?;
                tx.commit()?;
                storage.get_row("p", fixture::NOTES, "big")
            },
            |r| {
                same(r.as_ref().map(|r| r.payload.len()), Some(row.payload.len()))
                    .and(same(r, Some(row.clone())))
            },
        );
        // A 10 000-change commit with 10 001 distinct change-scope entries.
        let changes: Vec<NewChange> = (0..10_000)
            .map(|i| {
                let mut scopes = fixture::scopes("many");
                scopes.insert("k".into(), format!("v{i}'"));
                NewChange::delete(fixture::ITEMS, format!("row-{i:05}"), scopes)
            })
            .collect();
        tally.check(
            &format!("{dialect}: 10 000-change commit"),
            || {
                let mut tx = storage.begin("p")?;
                let seq = tx.append_commit(&NewCommit {
                    client_id: "c".into(),
                    client_commit_id: "huge".into(),
                    actor_id: "a".into(),
                    created_at_ms: 2,
                    changes: changes.clone(),
                })?;
                tx.commit()?;
                let stored = storage.read_commits("p", seq - 1, 1)?;
                let window = storage.read_commit_window(
                    "p",
                    &CommitWindowQuery {
                        table: fixture::ITEMS.into(),
                        scope_filter: [("grp".to_owned(), vec!["many".into()])].into(),
                        after_seq: 0,
                        through_seq: seq,
                        limit_changes: 1,
                    },
                )?;
                let one = storage.read_commit_window(
                    "p",
                    &CommitWindowQuery {
                        table: fixture::ITEMS.into(),
                        scope_filter: [("k".to_owned(), vec!["v9999'".into()])].into(),
                        after_seq: 0,
                        through_seq: seq,
                        limit_changes: 1,
                    },
                )?;
                Ok((stored, window, one))
            },
            |(stored, window, one)| {
                same(stored[0].changes.len(), 10_000)?;
                same(&stored[0].changes, &changes)?;
                same(window.len(), 1).and(same(window[0].changes.len(), 10_000))?;
                same(one[0].changes.len(), 1)
            },
        );
        // Giant scope filters: 100 000 values of one variable, 1 000 variables.
        let many_values: Vec<String> = (0..100_000).map(|i| format!("v{i}'")).collect();
        let many_vars: BTreeMap<String, Vec<String>> = (0..1000)
            .map(|i| (format!("var{i}'"), vec!["x".to_owned()]))
            .collect();
        for (label, filter, expect) in [
            (
                "100 000 values",
                BTreeMap::from([("k".to_owned(), many_values.clone())]),
                10_000usize,
            ),
            ("1 000 variables", many_vars.clone(), 0),
        ] {
            tally.check(
                &format!("{dialect}: read_commit_window with {label}"),
                || {
                    storage.read_commit_window(
                        "p",
                        &CommitWindowQuery {
                            table: fixture::ITEMS.into(),
                            scope_filter: filter.clone(),
                            after_seq: 0,
                            through_seq: i64::MAX,
                            limit_changes: i64::MAX,
                        },
                    )
                },
                |w| same(w.iter().map(|c| c.changes.len()).sum::<usize>(), expect),
            );
            tally.check(
                &format!("{dialect}: scan_rows with {label}"),
                || {
                    storage.scan_rows(
                        "p",
                        &RowScanQuery {
                            table: fixture::ITEMS.into(),
                            scope_filter: filter.clone(),
                            after_row_id: None,
                            limit: i64::MAX,
                        },
                    )
                },
                |rows| same(rows.len(), 0),
            );
            tally.check(
                &format!("{dialect}: latest_scoped_change_seq with {label}"),
                || storage.latest_scoped_change_seq("p", fixture::ITEMS, &filter),
                |_| Ok(()),
            );
        }
        // Limits at and beyond their bounds.
        for limit in [i64::MIN, -1, 0, 1, 1000, 1001, i64::MAX] {
            let in_range = (1..=1000).contains(&limit);
            let expect = |n: usize| {
                if in_range {
                    Ok(n)
                } else {
                    Err("sync.storage.invalid_limit")
                }
            };
            let mut bounded = |label: &str, result: sync_core::Result<usize>| {
                tally.tried += 1;
                match (result, expect(0)) {
                    (Ok(_), Ok(_)) => tally.verbatim += 1,
                    (Err(e), Err(code)) if e.code().as_str() == code => tally.refusal(label, &e),
                    (other, _) => tally
                        .failures
                        .push(format!("{dialect}: {label} limit {limit}: {other:?}")),
                }
            };
            bounded(
                "scan_partition_rows",
                storage
                    .scan_partition_rows("p", fixture::ITEMS, None, limit)
                    .map(|r| r.len()),
            );
            bounded(
                "list_source_changes",
                storage
                    .list_source_changes("p", &[fixture::ITEMS.into()], 0, limit)
                    .map(|r| r.len()),
            );
            bounded(
                "read_commits",
                storage.read_commits("p", 0, limit).map(|r| r.len()),
            );
            bounded(
                "scan_rows_by_index",
                storage
                    .scan_rows_by_index(
                        "p",
                        &IndexRowScanQuery {
                            table: fixture::ITEMS.into(),
                            index: "items_by_n".into(),
                            values: vec![RowValue::Integer(1)],
                            after_row_id: None,
                            limit,
                        },
                    )
                    .map(|r| r.len()),
            );
            // Unbounded limits: any value is an answer, never a crash.
            let label = format!("{dialect}: unbounded limit {limit}");
            tally.check(
                &format!("{label} scan_rows"),
                || {
                    storage.scan_rows(
                        "p",
                        &RowScanQuery {
                            table: fixture::ITEMS.into(),
                            scope_filter: fixture::scopes("many")
                                .into_iter()
                                .map(|(k, v)| (k, vec![v]))
                                .collect(),
                            after_row_id: None,
                            limit,
                        },
                    )
                },
                |_| Ok(()),
            );
            tally.check(
                &format!("{label} read_commit_window"),
                || {
                    storage.read_commit_window(
                        "p",
                        &CommitWindowQuery {
                            table: fixture::ITEMS.into(),
                            scope_filter: [("grp".to_owned(), vec!["many".into()])].into(),
                            after_seq: 0,
                            through_seq: 10,
                            limit_changes: limit,
                        },
                    )
                },
                |_| Ok(()),
            );
            tally.check(
                &format!("{label} list_commit_metadata"),
                || {
                    storage.list_commit_metadata(
                        "p",
                        &CommitMetadataQuery {
                            after_seq: 0,
                            before_seq: None,
                            limit,
                            table: None,
                        },
                    )
                },
                |_| Ok(()),
            );
            tally.check(
                &format!("{label} scope_activity"),
                || {
                    storage.scope_activity(
                        "p",
                        &ScopeActivityQuery {
                            variable: "k".into(),
                            value: "v1'".into(),
                            limit,
                        },
                    )
                },
                |_| Ok(()),
            );
            tally.check(
                &format!("{label} claim_reactions"),
                || {
                    storage.claim_reactions(
                        "p",
                        &ReactionClaimQuery {
                            lease_owner: "o".into(),
                            kinds: vec!["k".into()],
                            now_ms: 1,
                            lease_duration_ms: i64::MAX,
                            limit,
                        },
                    )
                },
                |_| Ok(()),
            );
            tally.check(
                &format!("{label} list_reactions"),
                || {
                    storage.list_reactions(
                        "p",
                        &ReactionListQuery {
                            statuses: vec![],
                            kinds: vec![],
                            limit,
                        },
                    )
                },
                |_| Ok(()),
            );
        }
        // Sequence and time arguments at and beyond the safe-integer range.
        for seq in [-1, 0, (1 << 53) - 1, 1 << 53, i64::MAX] {
            tally.check(
                &format!("{dialect}: set_horizon_seq({seq})"),
                || storage.set_horizon_seq("q", seq),
                |()| Ok(()),
            );
            tally.check(
                &format!("{dialect}: prune through {seq}"),
                || {
                    storage.prune_commits_through(
                        "q",
                        &CommitPruneQuery {
                            log_epoch: "e".into(),
                            through_seq: seq,
                        },
                    )
                },
                |_| Ok(()),
            );
            tally.check(
                &format!("{dialect}: touch at {seq}"),
                || storage.touch_partition("q", seq, "e"),
                |e| same(e.last_authenticated_at_ms, seq),
            );
            tally.check(
                &format!("{dialect}: has_source_changes_above({seq})"),
                || storage.has_source_changes_above("p", &[fixture::ITEMS.into()], seq),
                |_| Ok(()),
            );
            tally.check(
                &format!("{dialect}: get_commit_seq_before({seq})"),
                || storage.get_commit_seq_before("p", seq),
                |_| Ok(()),
            );
        }
        let extra = ["p", "q"];
        InvariantChecker::new(fixture::schema_history(1)).assert_consistent(
            storage.as_ref(),
            &extra,
            dialect,
        );
        println!(
            "hostile oversized {dialect}: {} calls; {} answered; refused {:?}",
            tally.tried, tally.verbatim, tally.refused
        );
        assert_intact(&tally, dialect);
    }
}
