//! Dialect-agnostic checks of a storage against a fixture manifest.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Debug, Display};

use serde_json::Value;
use sync_core::{
    codec, AuthoritativeQueryRequest, BlobReferencingRow, Capabilities, ClientCursorInfo,
    ColumnType, CommitMetadata, CommitMetadataQuery, CommitRecord, CommitWindowQuery,
    CompiledSchema, CompiledTable, EnsureOptions, IndexRowScanQuery, NewChange, NewCommit,
    PartitionRegistryEntry, RowScanQuery, RowValue, SchemaMarker, ScopeFilter, ServeContext,
    ServerStorage, SqlValue, StoredCommit, StoredRow, StoredScopes,
};

use crate::check::{CheckResult, Failure};
use crate::harness::RawIndex;
use crate::{check, check_eq};

use super::manifest::*;
use super::*;

// ---- the checks -----------------------------------------------------------

/// `ensure_schema(manifest schema)` on the reference database, then reads
/// everything back through the storage API exactly as the manifest states:
/// the marker, the partition list and registry, the counters, every live
/// row (payload bytes, version, scopes, decoded values) through every read
/// path, projections through a registered query, trusted index lookups,
/// every retained commit and its changes (commit windows per table and
/// scope variable, whole and paged; `read_commits`; commit metadata), push
/// results, client records and cursors, and blob references.
pub fn check_reads_back(storage: &dyn ServerStorage, manifest: &Manifest) -> CheckResult {
    in_set(manifest, || {
        let schema = manifest.schema();
        storage
            .ensure_schema(schema, &EnsureOptions::default())
            .during("ensure_schema(schema)")?;
        check_eq!(
            storage.ensured_version(),
            Some(schema.version),
            "ensured version"
        );
        check_marker(storage, &manifest.stored_schema_meta)?;
        check_partitions(storage, manifest)?;
        for partition in manifest.partitions() {
            let expect = Expect {
                schema,
                change_schema: schema,
                partition,
                tables: &partition.tables,
            };
            check_partition(storage, &expect)?;
        }
        Ok(())
    })
}

/// `ensure_schema(upgrade_check.schema_v2)` on the reference database (with
/// or without an earlier `ensure_schema` of the v1 schema) yields what the
/// reference's bump did: the v2 marker and layouts, the database-wide writer
/// fence raised to v2, every live row re-encoded to the v2 layout, and every
/// other record — change-log payloads included — untouched.
pub fn check_upgrade(storage: &dyn ServerStorage, manifest: &Manifest) -> CheckResult {
    in_set(manifest, || {
        let upgrade = manifest.upgrade()?;
        let v2 = &upgrade.schema;
        storage
            .ensure_schema(v2, &EnsureOptions::default())
            .during("ensure_schema(upgrade_check.schema_v2)")?;
        check_eq!(
            storage.ensured_version(),
            Some(v2.version),
            "ensured version"
        );
        let marker = check_marker(storage, &upgrade.stored_schema_meta)?;
        check!(
            marker.required_writer_version >= Some(v2.version),
            "database-wide writer fence after the bump: expected at least {}, got {:?}",
            v2.version,
            marker.required_writer_version
        );
        check!(
            upgrade.change_payloads_unchanged,
            "upgrade_check states that change payloads were rewritten; the reference never does"
        );
        check_partitions(storage, manifest)?;
        let none = BTreeMap::new();
        for partition in manifest.partitions() {
            let expect = Expect {
                schema: v2,
                change_schema: manifest.schema(),
                partition,
                tables: upgrade
                    .live_rows_after
                    .get(&partition.name)
                    .unwrap_or(&none),
            };
            check_partition(storage, &expect)?;
        }
        Ok(())
    })
}

/// After [`check_reads_back`] or [`check_upgrade`]: every partition takes a
/// new (empty) commit at `max_commit_seq + 1` — the upgraded database
/// satisfies its own writer fence.
pub fn check_takes_new_commits(storage: &dyn ServerStorage, manifest: &Manifest) -> CheckResult {
    in_set(manifest, || {
        for partition in manifest.partitions() {
            let p = partition.name.as_str();
            let before = storage.get_max_commit_seq(p).during(p)?;
            let last_ms = partition
                .commits
                .last()
                .map_or(0, |c| c.record.created_at_ms);
            let commit = NewCommit {
                client_id: PROBE_CLIENT.to_owned(),
                client_commit_id: format!("{p}-{}", before + 1),
                actor_id: PROBE_CLIENT.to_owned(),
                created_at_ms: last_ms + 1,
                changes: Vec::new(),
            };
            let mut tx = storage.begin(p).during(format_args!("begin {p}"))?;
            tx.lock_partition_for_push().during(p)?;
            let seq = tx
                .append_commit(&commit)
                .during(format_args!("append_commit {p}"))?;
            tx.commit().during(format_args!("commit {p}"))?;
            check_eq!(seq, before + 1, "{p}: seq of a new commit");
            check_eq!(
                storage.get_max_commit_seq(p).during(p)?,
                seq,
                "{p}: max_commit_seq"
            );
        }
        Ok(())
    })
}

/// A dialect's catalog, read by the index checks: the one physical fact a
/// dialect test supplies.
pub trait IndexCatalog {
    /// The indexes of `table` created by `CREATE INDEX` (not primary-key or
    /// constraint-owned ones): `(name, unique, key columns in order)`.
    fn indexes(&mut self, table: &str) -> CheckResult<Vec<RawIndex>>;
}

/// After [`check_reads_back`]: the legacy declared indexes were rebuilt
/// (specification `schema-and-migrations.md` §13) — each materialized table
/// holds exactly its declared indexes, under their physical names, with the
/// declared uniqueness and `_sync_partition` leading the declared columns.
pub fn check_indexes_rebuilt(
    catalog: &mut dyn IndexCatalog,
    manifest: &Manifest,
    dialect: sync_schema::Dialect,
) -> CheckResult {
    in_set(manifest, || {
        for legacy in manifest.physical_indexes().iter().filter(|i| i.created) {
            let declared = manifest
                .schema()
                .table(&legacy.table)
                .and_then(|t| t.index(&legacy.declared_name));
            check!(
                declared.is_some_and(|d| d.columns == legacy.columns && d.unique == legacy.unique)
                    && sync_schema::physical_index_name(&legacy.declared_name)
                        == legacy.physical_name,
                "physical index {legacy:?} is not a declared index of the schema"
            );
        }
        check_index_shapes(catalog, manifest.schema(), dialect)
    })
}

/// After [`check_upgrade`]: the index names per table are
/// `upgrade_check.expected.relational_indexes_after.<dialect name>`, and
/// every declared index of the v2 schema has the dialect's partition-leading
/// shape.
pub fn check_indexes_after_upgrade(
    catalog: &mut dyn IndexCatalog,
    manifest: &Manifest,
    dialect: sync_schema::Dialect,
) -> CheckResult {
    in_set(manifest, || {
        let upgrade = manifest.upgrade()?;
        let names = upgrade
            .relational_indexes_after
            .get(dialect.name())
            .ok_or_else(|| {
                Failure::new(format!("no relational_indexes_after.{}", dialect.name()))
            })?;
        for (table, want) in names {
            let mut got: Vec<String> = catalog.indexes(table)?.into_iter().map(|i| i.0).collect();
            let mut want = want.clone();
            got.sort();
            want.sort();
            check_eq!(got, want, "indexes of {table} after the bump");
        }
        check_index_shapes(catalog, &upgrade.schema, dialect)
    })
}

/// Every declared index in the dialect's shape
/// ([`sync_schema::SqlDialect::declared_index_columns`]).
fn check_index_shapes(
    catalog: &mut dyn IndexCatalog,
    schema: &CompiledSchema,
    dialect: sync_schema::Dialect,
) -> CheckResult {
    for table in schema.tables.iter().filter(|t| t.materialize) {
        let mut want: Vec<RawIndex> = table
            .indexes
            .iter()
            .map(|index| {
                (
                    sync_schema::physical_index_name(&index.name),
                    index.unique,
                    dialect.declared_index_columns(index),
                )
            })
            .collect();
        want.sort();
        let mut got = catalog.indexes(&table.name)?;
        got.sort();
        check_same(&format!("indexes of {}", table.name), &got, &want)?;
    }
    Ok(())
}

/// Prefixes a failure with the set name.
fn in_set(manifest: &Manifest, body: impl FnOnce() -> CheckResult) -> CheckResult {
    body().map_err(|f| Failure::new(format!("reference set {}: {}", manifest.set, f.message)))
}

/// A storage error as a failure that says which call failed.
trait During<T> {
    fn during(self, what: impl Display) -> CheckResult<T>;
}

impl<T> During<T> for sync_core::Result<T> {
    fn during(self, what: impl Display) -> CheckResult<T> {
        self.map_err(|e| Failure::new(format!("{what}: unexpected error {e:?}")))
    }
}

/// What one partition must read back as, under which schema.
struct Expect<'m> {
    /// The ensured schema: rows are decoded and scanned with it.
    schema: &'m CompiledSchema,
    /// The schema change payloads were written with.
    change_schema: &'m CompiledSchema,
    partition: &'m Partition,
    /// Live rows per table.
    tables: &'m BTreeMap<String, Vec<ExpectedRow>>,
}

impl Expect<'_> {
    fn rows(&self, table: &str) -> &[ExpectedRow] {
        self.tables.get(table).map_or(&[], Vec::as_slice)
    }
}

fn check_partition(storage: &dyn ServerStorage, expect: &Expect<'_>) -> CheckResult {
    let caps = storage.capabilities();
    check_counters(storage, expect.partition)?;
    for table in &expect.schema.tables {
        check_rows(storage, expect, table, caps)?;
        check_scoped_rows(storage, expect, table)?;
        if caps.index_scan && table.materialize {
            check_index_lookups(storage, expect, table)?;
        }
        if caps.authoritative_query && table.materialize {
            check_projections(storage, expect, table)?;
        }
        check_windows(storage, expect, table)?;
    }
    if caps.admin {
        check_commit_log(storage, expect)?;
        check_commit_metadata(storage, expect)?;
    }
    check_push_results(storage, expect.partition)?;
    check_clients(storage, expect.partition, caps)?;
    if caps.blob_refs {
        check_blob_refs(storage, expect)?;
    }
    Ok(())
}

fn check_marker(storage: &dyn ServerStorage, want: &SchemaMeta) -> CheckResult<SchemaMarker> {
    let marker = storage
        .read_schema_marker()
        .during("read_schema_marker")?
        .ok_or_else(|| Failure::new("read_schema_marker: no marker"))?;
    check_eq!(marker.schema_version, want.schema_version, "marker version");
    let layouts: Value = serde_json::from_str(&marker.layouts)
        .map_err(|e| Failure::new(format!("marker layouts are not JSON ({e})")))?;
    check!(
        json_equivalent(&layouts, &want.layouts),
        "marker layouts: expected {}, got {layouts}",
        want.layouts
    );
    Ok(marker)
}

/// `list_partitions`, `list_partition_registry` and `get_partition_log_epoch`.
fn check_partitions(storage: &dyn ServerStorage, manifest: &Manifest) -> CheckResult {
    let names: Vec<&str> = manifest
        .partitions()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    check_eq!(
        storage.list_partitions().during("list_partitions")?,
        names,
        "list_partitions"
    );
    let registry: Vec<PartitionRegistryEntry> = manifest
        .partitions()
        .iter()
        .filter_map(|p| p.registry.clone())
        .collect();
    check_same(
        "list_partition_registry",
        &storage
            .list_partition_registry()
            .during("list_partition_registry")?,
        &registry,
    )?;
    for partition in manifest.partitions() {
        let p = &partition.name;
        check_eq!(
            storage.get_partition_log_epoch(p).during(p)?,
            partition.registry.as_ref().map(|r| r.log_epoch.clone()),
            "{p}: get_partition_log_epoch"
        );
    }
    Ok(())
}

fn check_counters(storage: &dyn ServerStorage, partition: &Partition) -> CheckResult {
    let p = &partition.name;
    check_eq!(
        storage.get_max_commit_seq(p).during(p)?,
        partition.max_commit_seq,
        "{p}: get_max_commit_seq"
    );
    check_eq!(
        storage.get_horizon_seq(p).during(p)?,
        partition.horizon_seq,
        "{p}: get_horizon_seq"
    );
    Ok(())
}

/// Every live row through the keyset scans and single-row reads; rows the
/// retained log deleted read as absent.
fn check_rows(
    storage: &dyn ServerStorage,
    expect: &Expect<'_>,
    table: &CompiledTable,
    caps: Capabilities,
) -> CheckResult {
    let (p, t) = (expect.partition.name.as_str(), table.name.as_str());
    let want = expect.rows(t);
    let scanned = keyset(ROW_PAGE, |after, limit| {
        storage.scan_partition_rows(p, t, after, limit)
    })
    .during(format_args!("scan_partition_rows {p}/{t}"))?;
    check_rows_equal(&format!("{p}/{t} scan_partition_rows"), &scanned, want)?;
    for (row, expected) in scanned.iter().zip(want) {
        check_values(table, &row.payload, &expected.values)
            .map_err(|f| Failure::new(format!("{p}/{t}/{}: {f}", row.row_id)))?;
    }
    for expected in want {
        let id = &expected.row.row_id;
        let got = storage
            .get_row(p, t, id)
            .during(format_args!("get_row {p}/{t}/{id}"))?;
        check_eq!(got.as_ref(), Some(&expected.row), "{p}/{t}/{id}: get_row");
        if caps.admin {
            let scopes = storage
                .get_row_scopes(p, t, id)
                .during(format_args!("get_row_scopes {p}/{t}/{id}"))?;
            check_eq!(
                scopes,
                Some((expected.row.server_version, expected.row.scopes.clone())),
                "{p}/{t}/{id}: get_row_scopes"
            );
        }
    }
    if caps.admin {
        let inspected = keyset(ROW_PAGE, |after, limit| {
            storage.inspect_table_rows(p, t, after, limit)
        })
        .during(format_args!("inspect_table_rows {p}/{t}"))?;
        check_rows_equal(&format!("{p}/{t} inspect_table_rows"), &inspected, want)?;
    }
    let live: BTreeSet<&str> = want.iter().map(|r| r.row.row_id.as_str()).collect();
    let deleted: BTreeSet<&str> = expect
        .partition
        .commits
        .iter()
        .flat_map(|c| &c.record.changes)
        .filter(|c| c.table == t && !live.contains(c.row_id.as_str()))
        .map(|c| c.row_id.as_str())
        .collect();
    for id in deleted {
        let got = storage
            .get_row(p, t, id)
            .during(format_args!("get_row {p}/{t}/{id}"))?;
        check_eq!(got, None, "{p}/{t}/{id}: deleted row reads as absent");
    }
    Ok(())
}

/// `scan_rows` with every seen value of each scope variable, and of all
/// variables together, returns exactly the live rows the filter matches.
fn check_scoped_rows(
    storage: &dyn ServerStorage,
    expect: &Expect<'_>,
    table: &CompiledTable,
) -> CheckResult {
    let (p, t) = (expect.partition.name.as_str(), table.name.as_str());
    for filter in filters(expect.partition, t) {
        let want: Vec<ExpectedRow> = expect
            .rows(t)
            .iter()
            .filter(|r| matches(&filter, &r.row.scopes))
            .cloned()
            .collect();
        let got = keyset(ROW_PAGE, |after, limit| {
            let query = RowScanQuery {
                table: t.to_owned(),
                scope_filter: filter.clone(),
                after_row_id: after.map(str::to_owned),
                limit,
            };
            storage.scan_rows(p, &query)
        })
        .during(format_args!("scan_rows {p}/{t} {filter:?}"))?;
        check_rows_equal(&format!("{p}/{t} scan_rows {filter:?}"), &got, &want)?;
    }
    Ok(())
}

/// For each declared index (not over json or crdt columns, whose JSONB
/// projection is not the payload text), every distinct tuple of the live
/// rows' decoded values finds exactly the rows holding it.
fn check_index_lookups(
    storage: &dyn ServerStorage,
    expect: &Expect<'_>,
    table: &CompiledTable,
) -> CheckResult {
    let (p, t) = (expect.partition.name.as_str(), table.name.as_str());
    for index in &table.indexes {
        let positions = index
            .columns
            .iter()
            .map(|c| {
                table
                    .column_index
                    .get(c)
                    .copied()
                    .ok_or_else(|| Failure::new(format!("{t}: index {} names {c}", index.name)))
            })
            .collect::<CheckResult<Vec<usize>>>()?;
        if positions.iter().any(|&i| {
            matches!(
                table.columns[i].column_type,
                ColumnType::Json | ColumnType::Crdt
            )
        }) {
            continue;
        }
        let mut groups: BTreeMap<String, (Vec<RowValue>, Vec<ExpectedRow>)> = BTreeMap::new();
        for row in expect.rows(t) {
            let decoded = decode(table, &row.row)?;
            let values: Vec<RowValue> = positions
                .iter()
                .map(|&i| match &decoded[i] {
                    // -0.0 and 0.0 are one SQL value: one lookup group.
                    RowValue::Float(f) => RowValue::Float(f + 0.0),
                    value => value.clone(),
                })
                .collect();
            groups
                .entry(format!("{values:?}"))
                .or_insert_with(|| (values, Vec::new()))
                .1
                .push(row.clone());
        }
        for (key, (values, want)) in &groups {
            let got = keyset(ROW_PAGE, |after, limit| {
                let query = IndexRowScanQuery {
                    table: t.to_owned(),
                    index: index.name.clone(),
                    values: values.clone(),
                    after_row_id: after.map(str::to_owned),
                    limit,
                };
                storage.scan_rows_by_index(p, &query)
            })
            .during(format_args!(
                "scan_rows_by_index {p}/{t} {} {key}",
                index.name
            ))?;
            check_rows_equal(&format!("{p}/{t} by {} {key}", index.name), &got, want)?;
        }
    }
    Ok(())
}

/// The projection columns, read through a registered query, equal the
/// values decoded from the payload (JSON semantically, SQLite booleans as
/// 0/1).
fn check_projections(
    storage: &dyn ServerStorage,
    expect: &Expect<'_>,
    table: &CompiledTable,
) -> CheckResult {
    let (p, t) = (expect.partition.name.as_str(), table.name.as_str());
    let request = AuthoritativeQueryRequest {
        sql: format!("SELECT * FROM \"{t}\""),
        params: Vec::new(),
        tables: vec![t.to_owned()],
    };
    let result = storage
        .query_authoritative(p, &request, &ServeContext::default())
        .during(format_args!("query_authoritative {p}: {}", request.sql))?;
    let names: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
    check_eq!(result.columns, names, "{p}/{t}: projected columns");
    let want = expect.rows(t);
    check_eq!(result.rows.len(), want.len(), "{p}/{t}: projected rows");
    let mut seen = BTreeSet::new();
    for cells in &result.rows {
        let id = match cells.get(table.primary_key_index) {
            Some(SqlValue::Text(id)) => id.clone(),
            Some(SqlValue::Integer(id)) => id.to_string(),
            other => return Err(Failure::new(format!("{p}/{t}: primary key cell {other:?}"))),
        };
        check!(seen.insert(id.clone()), "{p}/{t}/{id}: projected twice");
        let decoded = decode(table, &expected_row(want, &id)?.row)?;
        for ((column, cell), value) in table.columns.iter().zip(cells).zip(&decoded) {
            check!(
                projection_matches(cell, value),
                "{p}/{t}/{id}.{}: projection {cell:?}, payload {value:?}",
                column.name
            );
        }
    }
    Ok(())
}

/// Commit windows of one table, for each scope filter, whole and paged,
/// and `latest_scoped_change_seq` per variable.
fn check_windows(
    storage: &dyn ServerStorage,
    expect: &Expect<'_>,
    table: &CompiledTable,
) -> CheckResult {
    let partition = expect.partition;
    let (p, t) = (partition.name.as_str(), table.name.as_str());
    for filter in filters(partition, t) {
        let want: Vec<StoredCommit> = partition
            .commits
            .iter()
            .filter_map(|c| {
                let changes: Vec<NewChange> = c
                    .record
                    .changes
                    .iter()
                    .filter(|ch| ch.table == t && matches(&filter, &ch.scopes))
                    .cloned()
                    .collect();
                (!changes.is_empty()).then(|| StoredCommit {
                    commit_seq: c.record.commit_seq,
                    created_at_ms: c.record.created_at_ms,
                    actor_id: c.record.actor_id.clone(),
                    changes,
                })
            })
            .collect();
        for limit in WINDOW_LIMITS {
            let what = format!("{p}/{t} read_commit_window {filter:?} (limit {limit})");
            let got = read_window(storage, p, t, &filter, limit, partition.max_commit_seq)
                .map_err(|f| Failure::new(format!("{what}: {f}")))?;
            check_same(&what, &got, &want)?;
        }
        if filter.len() == 1 {
            let latest = storage
                .latest_scoped_change_seq(p, t, &filter)
                .during(format_args!("latest_scoped_change_seq {p}/{t}"))?;
            let want_latest = want.last().map_or(0, |c| c.commit_seq);
            check_eq!(
                latest,
                want_latest,
                "{p}/{t}: latest_scoped_change_seq {filter:?}"
            );
        }
    }
    Ok(())
}

/// Every window page, until an empty one; a page never continues past the
/// commit that reaches `limit` matching changes.
fn read_window(
    storage: &dyn ServerStorage,
    partition: &str,
    table: &str,
    filter: &ScopeFilter,
    limit: i64,
    through_seq: i64,
) -> CheckResult<Vec<StoredCommit>> {
    let mut out: Vec<StoredCommit> = Vec::new();
    let mut after = 0;
    loop {
        let query = CommitWindowQuery {
            table: table.to_owned(),
            scope_filter: filter.clone(),
            after_seq: after,
            through_seq,
            limit_changes: limit,
        };
        let page = storage
            .read_commit_window(partition, &query)
            .during(format_args!("after {after}"))?;
        let Some(last) = page.last() else {
            return Ok(out);
        };
        check!(
            last.commit_seq > after,
            "page after {after} does not advance"
        );
        let before_last: usize = page[..page.len() - 1].iter().map(|c| c.changes.len()).sum();
        check!(
            (before_last as i64) < limit,
            "page after {after} continues past {limit} changes"
        );
        after = last.commit_seq;
        out.extend(page);
    }
}

/// `read_commits`, paged: every retained commit with every change, payloads
/// as the reference wrote them, decoding to the manifest's values.
fn check_commit_log(storage: &dyn ServerStorage, expect: &Expect<'_>) -> CheckResult {
    let p = expect.partition.name.as_str();
    let mut got: Vec<CommitRecord> = Vec::new();
    loop {
        let after = got.last().map_or(0, |c| c.commit_seq);
        let page = storage
            .read_commits(p, after, COMMIT_PAGE)
            .during(format_args!("read_commits {p} after {after}"))?;
        let full = page.len() as i64 == COMMIT_PAGE;
        got.extend(page);
        if !full {
            break;
        }
    }
    let want: Vec<CommitRecord> = expect
        .partition
        .commits
        .iter()
        .map(|c| c.record.clone())
        .collect();
    check_same(&format!("{p} read_commits"), &got, &want)?;
    for commit in &expect.partition.commits {
        for (change, values) in commit.record.changes.iter().zip(&commit.values) {
            let (Some(table), Some(payload)) =
                (expect.change_schema.table(&change.table), &change.payload)
            else {
                continue;
            };
            check_values(table, payload, values).map_err(|f| {
                Failure::new(format!(
                    "{p} commit {} change {}/{}: {f}",
                    commit.record.commit_seq, change.table, change.row_id
                ))
            })?;
        }
    }
    Ok(())
}

/// `list_commit_metadata`, newest first: paged over everything, and once per table.
fn check_commit_metadata(storage: &dyn ServerStorage, expect: &Expect<'_>) -> CheckResult {
    let p = expect.partition.name.as_str();
    let want: Vec<CommitMetadata> = expect
        .partition
        .commits
        .iter()
        .rev()
        .map(|c| metadata_of(&c.record))
        .collect();
    let mut got: Vec<CommitMetadata> = Vec::new();
    loop {
        let query = CommitMetadataQuery {
            after_seq: 0,
            before_seq: got.last().map(|m| m.commit_seq),
            limit: COMMIT_PAGE,
            table: None,
        };
        let page = storage
            .list_commit_metadata(p, &query)
            .during(format_args!("list_commit_metadata {p} {query:?}"))?;
        let full = page.len() as i64 == COMMIT_PAGE;
        got.extend(page);
        if !full {
            break;
        }
    }
    check_same(&format!("{p} list_commit_metadata"), &got, &want)?;
    for table in &expect.schema.tables {
        let query = CommitMetadataQuery {
            after_seq: 0,
            before_seq: None,
            limit: i64::from(i32::MAX),
            table: Some(table.name.clone()),
        };
        let got = storage
            .list_commit_metadata(p, &query)
            .during(format_args!("list_commit_metadata {p} {query:?}"))?;
        let want: Vec<CommitMetadata> = want
            .iter()
            .filter(|m| m.tables.contains(&table.name))
            .cloned()
            .collect();
        check_same(
            &format!("{p} list_commit_metadata of {}", table.name),
            &got,
            &want,
        )?;
    }
    Ok(())
}

fn metadata_of(commit: &CommitRecord) -> CommitMetadata {
    let tables: BTreeSet<&String> = commit.changes.iter().map(|c| &c.table).collect();
    CommitMetadata {
        commit_seq: commit.commit_seq,
        client_id: commit.client_id.clone(),
        client_commit_id: commit.client_commit_id.clone(),
        actor_id: commit.actor_id.clone(),
        created_at_ms: commit.created_at_ms,
        change_count: commit.changes.len() as i64,
        tables: tables.into_iter().cloned().collect(),
    }
}

/// Every push result, re-serialized, equals the stored document semantically.
fn check_push_results(storage: &dyn ServerStorage, partition: &Partition) -> CheckResult {
    let p = partition.name.as_str();
    for record in &partition.push_results {
        let (client, commit) = (&record.client_id, &record.client_commit_id);
        let stored = storage
            .get_push_result(p, client, commit)
            .during(format_args!("get_push_result {p}/{client}/{commit}"))?
            .ok_or_else(|| Failure::new(format!("{p}/{client}/{commit}: no push result")))?;
        let text = stored.to_json();
        let got: Value = serde_json::from_str(&text)
            .map_err(|e| Failure::new(format!("{p}/{client}/{commit}: {e} in {text}")))?;
        check!(
            json_equivalent(&got, &record.document),
            "{p}/{client}/{commit}: push result {got}, manifest {}",
            record.document
        );
    }
    Ok(())
}

fn check_clients(
    storage: &dyn ServerStorage,
    partition: &Partition,
    caps: Capabilities,
) -> CheckResult {
    let p = partition.name.as_str();
    for want in &partition.clients {
        let id = &want.client_id;
        let got = storage
            .get_client_record(p, id)
            .during(format_args!("get_client_record {p}/{id}"))?;
        check_eq!(got.as_ref(), Some(want), "{p}/{id}: get_client_record");
    }
    let mut by_id = partition.clients.clone();
    by_id.sort_by(|a, b| a.client_id.cmp(&b.client_id));
    let cursors: Vec<ClientCursorInfo> = by_id
        .iter()
        .map(|c| ClientCursorInfo {
            client_id: c.client_id.clone(),
            cursor: c.cursor,
            updated_at_ms: c.updated_at_ms,
        })
        .collect();
    let got = storage
        .list_client_cursors(p)
        .during(format_args!("list_client_cursors {p}"))?;
    check_same(&format!("{p} list_client_cursors"), &got, &cursors)?;
    if caps.admin {
        let mut newest_first = by_id;
        newest_first.sort_by_key(|c| std::cmp::Reverse(c.updated_at_ms));
        let got = storage
            .list_client_records(p)
            .during(format_args!("list_client_records {p}"))?;
        check_same(&format!("{p} list_client_records"), &got, &newest_first)?;
    }
    Ok(())
}

/// `list_referenced_blob_ids` and, per blob, the live rows referencing it
/// with their current scopes.
fn check_blob_refs(storage: &dyn ServerStorage, expect: &Expect<'_>) -> CheckResult {
    let p = expect.partition.name.as_str();
    let mut by_blob: BTreeMap<&str, Vec<BlobReferencingRow>> = BTreeMap::new();
    for entry in &expect.partition.blob_refs {
        let row = expected_row(expect.rows(&entry.table), &entry.row_id)
            .map_err(|f| Failure::new(format!("{p} blob_refs of {}: {f}", entry.table)))?;
        for blob in &entry.blob_ids {
            by_blob.entry(blob).or_default().push(BlobReferencingRow {
                table: entry.table.clone(),
                row_id: entry.row_id.clone(),
                scopes: row.row.scopes.clone(),
            });
        }
    }
    let ids: Vec<&str> = by_blob.keys().copied().collect();
    let got = storage
        .list_referenced_blob_ids(p)
        .during(format_args!("list_referenced_blob_ids {p}"))?;
    check_eq!(got, ids, "{p}: list_referenced_blob_ids");
    for (blob, rows) in &mut by_blob {
        rows.sort_by(|a, b| (&a.table, &a.row_id).cmp(&(&b.table, &b.row_id)));
        let got = storage
            .list_rows_referencing_blob(p, blob)
            .during(format_args!("list_rows_referencing_blob {p}/{blob}"))?;
        check_same(&format!("{p} rows referencing {blob}"), &got, rows)?;
    }
    Ok(())
}

// ---- comparison helpers ---------------------------------------------------

/// One filter per scope variable seen (all its values), and one with every
/// variable when the table has several: together they enumerate everything.
fn filters(partition: &Partition, table: &str) -> Vec<ScopeFilter> {
    let Some(seen) = partition.scope_values_seen.get(table) else {
        return Vec::new();
    };
    let mut filters: Vec<ScopeFilter> = seen
        .iter()
        .map(|(var, values)| ScopeFilter::from([(var.clone(), values.clone())]))
        .collect();
    if seen.len() > 1 {
        filters.push(seen.clone());
    }
    filters
}

/// For every filter variable, the stored value exists and is listed.
fn matches(filter: &ScopeFilter, scopes: &StoredScopes) -> bool {
    filter
        .iter()
        .all(|(var, values)| scopes.get(var).is_some_and(|v| values.contains(v)))
}

/// Every page of a keyset read until a short one, resuming after the last
/// row id of each page.
fn keyset(
    limit: i64,
    mut page: impl FnMut(Option<&str>, i64) -> sync_core::Result<Vec<StoredRow>>,
) -> sync_core::Result<Vec<StoredRow>> {
    let mut rows: Vec<StoredRow> = Vec::new();
    loop {
        let after = rows.last().map(|r| r.row_id.clone());
        let next = page(after.as_deref(), limit)?;
        let full = next.len() as i64 >= limit;
        rows.extend(next);
        if !full || rows.last().map(|r| &r.row_id) == after.as_ref() {
            return Ok(rows);
        }
    }
}

fn expected_row<'r>(rows: &'r [ExpectedRow], row_id: &str) -> CheckResult<&'r ExpectedRow> {
    rows.iter()
        .find(|r| r.row.row_id == row_id)
        .ok_or_else(|| Failure::new(format!("row {row_id} is not a live row of the manifest")))
}

/// Same row ids in the same order, then each row equal.
fn check_rows_equal(what: &str, got: &[StoredRow], want: &[ExpectedRow]) -> CheckResult {
    let got_ids: Vec<&str> = got.iter().map(|r| r.row_id.as_str()).collect();
    let want_ids: Vec<&str> = want.iter().map(|r| r.row.row_id.as_str()).collect();
    check_eq!(got_ids, want_ids, "{what}: row ids");
    for (row, expected) in got.iter().zip(want) {
        check_eq!(row, &expected.row, "{what}: row {}", row.row_id);
    }
    Ok(())
}

/// Equal lists, reporting the length or the first differing item.
fn check_same<T: PartialEq + Debug>(what: &str, got: &[T], want: &[T]) -> CheckResult {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        check_eq!(g, w, "{what}: item {i}");
    }
    check_eq!(got.len(), want.len(), "{what}: length");
    Ok(())
}

/// The payload decodes (with `table`'s layout) to exactly the manifest's values.
fn check_values(table: &CompiledTable, payload: &[u8], values: &Value) -> CheckResult {
    let decoded = codec::decode_row(table, payload).during("decode payload")?;
    let values = values
        .as_object()
        .ok_or_else(|| Failure::new(format!("values {values} are not an object")))?;
    check_eq!(values.len(), table.columns.len(), "number of values");
    for (column, value) in table.columns.iter().zip(&decoded) {
        let want = values
            .get(&column.name)
            .ok_or_else(|| Failure::new(format!("no value of {}", column.name)))?;
        check!(
            decoded_matches(value, want),
            "{}: decoded {value:?}, manifest {want}",
            column.name
        );
    }
    Ok(())
}

/// The values of a row's payload, decoded with `table`'s layout.
fn decode(table: &CompiledTable, row: &StoredRow) -> CheckResult<Vec<RowValue>> {
    codec::decode_row(table, &row.payload).during(format_args!("decode {}", row.row_id))
}

/// A decoded value against its manifest encoding.
fn decoded_matches(value: &RowValue, want: &Value) -> bool {
    match value {
        RowValue::Null => want.is_null(),
        RowValue::String(s) | RowValue::Json(s) | RowValue::BlobRef(s) => {
            want.as_str() == Some(s.as_str())
        }
        RowValue::Integer(i) => want.as_i64() == Some(*i),
        RowValue::Float(f) => want.as_f64().is_some_and(|w| same_float(*f, w)),
        RowValue::Boolean(b) => want.as_bool() == Some(*b),
        RowValue::Bytes(b) | RowValue::Crdt(b) => want.as_str() == Some(hex_encode(b).as_str()),
    }
}

/// A projected cell against the value decoded from the payload, allowing
/// each dialect's storage type (SQLite booleans as 0/1, Postgres JSONB).
fn projection_matches(cell: &SqlValue, value: &RowValue) -> bool {
    match (cell, value) {
        (SqlValue::Null, RowValue::Null) => true,
        (SqlValue::Text(text), RowValue::Json(doc)) => json_text_equivalent(text, doc),
        (SqlValue::Text(text), RowValue::String(s) | RowValue::BlobRef(s)) => text == s,
        (SqlValue::Integer(i), RowValue::Integer(j)) => i == j,
        (SqlValue::Integer(i), RowValue::Boolean(b)) => *i == i64::from(*b),
        (SqlValue::Bool(a), RowValue::Boolean(b)) => a == b,
        (SqlValue::Float(f), RowValue::Float(g)) => f == g,
        (SqlValue::Integer(i), RowValue::Float(g)) => *i as f64 == *g,
        (SqlValue::Bytes(a), RowValue::Bytes(b) | RowValue::Crdt(b)) => a == b,
        _ => false,
    }
}

/// Equal, or adjacent doubles: JSON number parsing may round the
/// manifest's shortest form one unit in the last place away.
fn same_float(a: f64, b: f64) -> bool {
    a == b
        || (a.is_sign_negative() == b.is_sign_negative() && a.to_bits().abs_diff(b.to_bits()) == 1)
}

/// `actual` (a JSONB rendering, or a legacy JSON string holding the
/// document) denotes the same document as the verbatim text `want`.
fn json_text_equivalent(actual: &str, want: &str) -> bool {
    let (Ok(actual), Ok(want)) = (
        serde_json::from_str::<Value>(actual),
        serde_json::from_str::<Value>(want),
    ) else {
        return false;
    };
    if json_equivalent(&actual, &want) {
        return true;
    }
    match &actual {
        Value::String(inner) => {
            serde_json::from_str::<Value>(inner).is_ok_and(|doc| json_equivalent(&doc, &want))
        }
        _ => false,
    }
}

/// JSON equality up to member order and number spelling (`1e2` = `100`).
pub fn json_equivalent(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equivalent(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equivalent(v, w)))
        }
        _ => a == b,
    }
}

fn hex_encode(bytes: &[u8]) -> String {
    struct Hex<'b>(&'b [u8]);
    impl Display for Hex<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
        }
    }
    Hex(bytes).to_string()
}
