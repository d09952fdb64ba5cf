//! The expected content of a fixture set, parsed from its manifest.

use std::collections::BTreeMap;
use std::fmt::{Debug, Display};
use std::path::{Path, PathBuf};

use serde_json::Value;
use sync_core::{
    ChangeOp, ClientRecord, ClientSubscription, CommitRecord, CompiledSchema, NewChange,
    PartitionRegistryEntry, ScopeFilter, StoredRow, StoredScopes,
};

use crate::check::{CheckResult, Failure};
use crate::{check, check_eq};

use super::*;

/// The expected content of one fixture set, parsed and validated from
/// `<set>.manifest.json` (the fixtures `README.md` describes every field).
#[derive(Debug, Clone)]
pub struct Manifest {
    pub(super) set: String,
    pub(super) dir: PathBuf,
    pub(super) document: Value,
    pub(super) schema: CompiledSchema,
    pub(super) stored_schema_meta: SchemaMeta,
    pub(super) physical_indexes: Vec<PhysicalIndex>,
    pub(super) partitions: Vec<Partition>,
    pub(super) upgrade: Option<Upgrade>,
}

/// A `sync_schema_meta` row: schema version and per-table layouts.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaMeta {
    /// Stored schema version.
    pub schema_version: i64,
    /// The layouts document.
    pub layouts: Value,
}

/// A declared index as the reference created it (`physical_indexes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysicalIndex {
    /// Application table.
    pub table: String,
    /// Declared index name.
    pub declared_name: String,
    /// Physical name (`sync_ix_…`).
    pub physical_name: String,
    /// Declared columns.
    pub columns: Vec<String>,
    /// Unique index.
    pub unique: bool,
    /// Whether the reference created it.
    pub created: bool,
}

/// The expected content of one partition (`partitions.<p>`).
#[derive(Debug, Clone)]
pub struct Partition {
    /// Partition name.
    pub name: String,
    /// `get_max_commit_seq`.
    pub max_commit_seq: i64,
    /// `get_horizon_seq`.
    pub horizon_seq: i64,
    /// The registry entry, if the partition has one.
    pub registry: Option<PartitionRegistryEntry>,
    /// Live rows per table, in byte order of row id.
    pub tables: BTreeMap<String, Vec<ExpectedRow>>,
    /// Retained commits in `commit_seq` order, changes in storage order.
    pub commits: Vec<ExpectedCommit>,
    /// Stored push results.
    pub push_results: Vec<ExpectedPushResult>,
    /// Client records, in manifest order.
    pub clients: Vec<ClientRecord>,
    /// Blob references of live rows.
    pub blob_refs: Vec<ExpectedBlobRefs>,
    /// Every scope value seen, per table: variable → values.
    pub scope_values_seen: BTreeMap<String, ScopeFilter>,
}

impl Partition {
    /// The live rows of `table` (none when the manifest lists none).
    pub fn rows(&self, table: &str) -> &[ExpectedRow] {
        self.tables.get(table).map_or(&[], Vec::as_slice)
    }
}

/// One live row: the stored row and its decoded values (column → JSON in
/// the manifest's `value_encoding`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedRow {
    /// Row id, version, scopes and payload bytes.
    pub row: StoredRow,
    /// Decoded values.
    pub values: Value,
}

/// One retained commit with every change.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedCommit {
    /// The commit as `read_commits` returns it (`writer_version` is `None`:
    /// the reference never wrote one).
    pub record: CommitRecord,
    /// Decoded values of each change (`Null` for deletes).
    pub values: Vec<Value>,
}

/// One stored push result (`push_results[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedPushResult {
    /// Client id of the commit key.
    pub client_id: String,
    /// Client commit id of the commit key.
    pub client_commit_id: String,
    /// The stored JSON document.
    pub document: Value,
}

/// The blob ids one live row references (`blob_refs[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedBlobRefs {
    /// Table.
    pub table: String,
    /// Row id.
    pub row_id: String,
    /// Referenced blob ids.
    pub blob_ids: Vec<String>,
}

/// What the reference's `ensure_schema(schema_v2)` left (`upgrade_check`).
#[derive(Debug, Clone)]
pub struct Upgrade {
    /// The v2 schema.
    pub schema: CompiledSchema,
    /// The marker afterwards.
    pub stored_schema_meta: SchemaMeta,
    /// Whether change-log payloads were left untouched.
    pub change_payloads_unchanged: bool,
    /// Live rows afterwards: partition → table → rows in byte order.
    pub live_rows_after: BTreeMap<String, BTreeMap<String, Vec<ExpectedRow>>>,
    /// Physical index names afterwards: dialect → table → names.
    pub relational_indexes_after: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

impl Manifest {
    /// Reads and validates `<dir>/<set>.manifest.json`.
    pub fn load(dir: &Path, set: &str) -> CheckResult<Manifest> {
        let file = format!("{set}{MANIFEST_SUFFIX}");
        let path = dir.join(&file);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Failure::new(format!("cannot read {}: {e}", path.display())))?;
        let document: Value = serde_json::from_str(&text)
            .map_err(|e| Failure::new(format!("{}: not JSON ({e})", path.display())))?;
        let root = Node::root(&document, &file);
        let schema = root.at("schema")?.schema()?;
        let mut partitions = root
            .at("partitions")?
            .entries()?
            .into_iter()
            .map(|(name, node)| node.partition(name, &schema))
            .collect::<CheckResult<Vec<_>>>()?;
        partitions.sort_by(|a, b| a.name.cmp(&b.name));
        let upgrade = match root.opt("upgrade_check") {
            Some(node) => Some(node.upgrade()?),
            None => None,
        };
        Ok(Manifest {
            set: set.to_owned(),
            dir: dir.to_path_buf(),
            stored_schema_meta: root.at("stored_schema_meta")?.schema_meta()?,
            physical_indexes: root
                .opt("physical_indexes")
                .map_or(Ok(Vec::new()), |n| n.map_items(Node::physical_index))?,
            schema,
            partitions,
            upgrade,
            document,
        })
    }

    /// The set name (`A`, …).
    pub fn set(&self) -> &str {
        &self.set
    }

    /// The directory the manifest was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The set's database file for `kind` (`files.<kind>`: `sqlite`,
    /// `postgres`); a missing entry or file is a failure.
    pub fn file(&self, kind: &str) -> CheckResult<PathBuf> {
        let root = Node::root(&self.document, &format!("{}{MANIFEST_SUFFIX}", self.set));
        let path = self.dir.join(root.at("files")?.at(kind)?.str()?);
        check!(
            path.is_file(),
            "set {}: {} is missing",
            self.set,
            path.display()
        );
        Ok(path)
    }

    /// The schema the reference ensured (`schema`).
    pub fn schema(&self) -> &CompiledSchema {
        &self.schema
    }

    /// The v2 schema of the upgrade check (`upgrade_check.schema_v2`).
    pub fn schema_v2(&self) -> CheckResult<&CompiledSchema> {
        Ok(&self.upgrade()?.schema)
    }

    /// The stored marker the reference wrote (`stored_schema_meta`).
    pub fn stored_schema_meta(&self) -> &SchemaMeta {
        &self.stored_schema_meta
    }

    /// The declared indexes as the reference created them.
    pub fn physical_indexes(&self) -> &[PhysicalIndex] {
        &self.physical_indexes
    }

    /// Every partition, in byte order of name.
    pub fn partitions(&self) -> &[Partition] {
        &self.partitions
    }

    /// One partition.
    pub fn partition(&self, name: &str) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.name == name)
    }

    /// The upgrade check; a manifest without one is a failure.
    pub fn upgrade(&self) -> CheckResult<&Upgrade> {
        self.upgrade
            .as_ref()
            .ok_or_else(|| Failure::new(format!("set {}: no upgrade_check", self.set)))
    }

    /// The raw manifest document, for fields this type does not model.
    pub fn document(&self) -> &Value {
        &self.document
    }
}

/// A position in the manifest document, for parse failures that name it.
struct Node<'a> {
    pub(super) value: &'a Value,
    pub(super) path: String,
}

impl<'a> Node<'a> {
    fn root(value: &'a Value, file: &str) -> Self {
        Node {
            value,
            path: file.to_owned(),
        }
    }

    fn child(&self, key: impl Display, value: &'a Value) -> Node<'a> {
        Node {
            value,
            path: format!("{}.{key}", self.path),
        }
    }

    fn fail(&self, expected: &str) -> Failure {
        Failure::new(format!("{}: expected {expected}", self.path))
    }

    /// A member that must be present.
    fn at(&self, key: &str) -> CheckResult<Node<'a>> {
        let value = self
            .value
            .get(key)
            .ok_or_else(|| self.fail(&format!("a member {key:?}")))?;
        Ok(self.child(key, value))
    }

    /// A member that may be absent or null.
    fn opt(&self, key: &str) -> Option<Node<'a>> {
        match self.value.get(key) {
            None | Some(Value::Null) => None,
            Some(value) => Some(self.child(key, value)),
        }
    }

    fn str(&self) -> CheckResult<&'a str> {
        self.value.as_str().ok_or_else(|| self.fail("a string"))
    }

    fn string(&self) -> CheckResult<String> {
        self.str().map(str::to_owned)
    }

    fn i64(&self) -> CheckResult<i64> {
        self.value.as_i64().ok_or_else(|| self.fail("an integer"))
    }

    fn i32(&self) -> CheckResult<i32> {
        i32::try_from(self.i64()?).map_err(|_| self.fail("a 32-bit integer"))
    }

    fn bool(&self) -> CheckResult<bool> {
        self.value
            .as_bool()
            .ok_or_else(|| self.fail("true or false"))
    }

    fn items(&self) -> CheckResult<Vec<Node<'a>>> {
        let items = self.value.as_array().ok_or_else(|| self.fail("an array"))?;
        Ok(items
            .iter()
            .enumerate()
            .map(|(i, v)| self.child(i, v))
            .collect())
    }

    fn map_items<T>(&self, parse: impl Fn(&Node<'a>) -> CheckResult<T>) -> CheckResult<Vec<T>> {
        self.items()?.iter().map(parse).collect()
    }

    fn entries(&self) -> CheckResult<Vec<(&'a str, Node<'a>)>> {
        let map = self
            .value
            .as_object()
            .ok_or_else(|| self.fail("an object"))?;
        Ok(map
            .iter()
            .map(|(k, v)| (k.as_str(), self.child(k, v)))
            .collect())
    }

    fn strings(&self) -> CheckResult<Vec<String>> {
        self.map_items(Node::string)
    }

    fn scopes(&self) -> CheckResult<StoredScopes> {
        self.entries()?
            .into_iter()
            .map(|(k, v)| Ok((k.to_owned(), v.string()?)))
            .collect()
    }

    fn filter(&self) -> CheckResult<ScopeFilter> {
        self.entries()?
            .into_iter()
            .map(|(k, v)| Ok((k.to_owned(), v.strings()?)))
            .collect()
    }

    fn hex(&self) -> CheckResult<Vec<u8>> {
        hex_decode(self.str()?).ok_or_else(|| self.fail("lowercase hex"))
    }

    fn schema(&self) -> CheckResult<CompiledSchema> {
        sync_schema::parse_schema_value(self.value)
            .and_then(|input| sync_schema::compile(&input))
            .map_err(|e| Failure::new(format!("{}: schema does not compile ({e:?})", self.path)))
    }

    fn schema_meta(&self) -> CheckResult<SchemaMeta> {
        Ok(SchemaMeta {
            schema_version: self.at("schema_version")?.i64()?,
            layouts: self.at("layouts")?.value.clone(),
        })
    }

    fn physical_index(&self) -> CheckResult<PhysicalIndex> {
        Ok(PhysicalIndex {
            table: self.at("table")?.string()?,
            declared_name: self.at("declared_name")?.string()?,
            physical_name: self.at("physical_name")?.string()?,
            columns: self.at("columns")?.strings()?,
            unique: self.opt("unique").map_or(Ok(false), |n| n.bool())?,
            created: self.opt("created").map_or(Ok(true), |n| n.bool())?,
        })
    }

    fn partition(&self, name: &str, schema: &CompiledSchema) -> CheckResult<Partition> {
        let mut tables = BTreeMap::new();
        for (table, node) in self.at("tables")?.entries()? {
            check!(
                schema.table(table).is_some(),
                "{}: table {table} is not in the schema",
                self.path
            );
            let rows = node.at("rows")?.rows()?;
            if let Some(count) = node.opt("row_count") {
                check_eq!(count.i64()?, rows.len() as i64, "{}: row_count", node.path);
            }
            tables.insert(table.to_owned(), rows);
        }
        let scope_values_seen = match self.opt("scope_values_seen") {
            Some(seen) => seen
                .entries()?
                .into_iter()
                .map(|(table, node)| Ok((table.to_owned(), node.filter()?)))
                .collect::<CheckResult<_>>()?,
            None => BTreeMap::new(),
        };
        let partition = Partition {
            name: name.to_owned(),
            max_commit_seq: self.at("max_commit_seq")?.i64()?,
            horizon_seq: self.at("horizon_seq")?.i64()?,
            registry: match self.opt("registry") {
                Some(node) => Some(node.registry(name)?),
                None => None,
            },
            tables,
            commits: self.at("commits")?.map_items(Node::commit)?,
            push_results: self.at("push_results")?.map_items(Node::push_result)?,
            clients: self.at("clients")?.map_items(Node::client)?,
            blob_refs: self
                .opt("blob_refs")
                .map_or(Ok(Vec::new()), |n| n.map_items(Node::blob_refs))?,
            scope_values_seen,
        };
        seen_covers_scopes(&partition).map_err(|f| Failure::new(format!("{}: {f}", self.path)))?;
        Ok(partition)
    }

    /// `rows.<row_id>` objects, in byte order of row id.
    fn rows(&self) -> CheckResult<Vec<ExpectedRow>> {
        let mut rows = self
            .entries()?
            .into_iter()
            .map(|(row_id, node)| {
                Ok(ExpectedRow {
                    row: StoredRow {
                        row_id: row_id.to_owned(),
                        server_version: node.at("server_version")?.i64()?,
                        scopes: node.at("scopes")?.scopes()?,
                        payload: node.at("payload_hex")?.hex()?,
                        column_versions: None,
                    },
                    values: node.at("values")?.value.clone(),
                })
            })
            .collect::<CheckResult<Vec<_>>>()?;
        rows.sort_by(|a, b| a.row.row_id.cmp(&b.row.row_id));
        Ok(rows)
    }

    fn registry(&self, partition: &str) -> CheckResult<PartitionRegistryEntry> {
        Ok(PartitionRegistryEntry {
            partition: partition.to_owned(),
            log_epoch: self.at("log_epoch")?.string()?,
            epoch_required: self.at("epoch_required")?.bool()?,
            last_authenticated_at_ms: self.at("last_authenticated_at_ms")?.i64()?,
        })
    }

    fn commit(&self) -> CheckResult<ExpectedCommit> {
        let mut changes = Vec::new();
        let mut values = Vec::new();
        for node in self.at("changes")?.items()? {
            let op = match node.at("op")?.str()? {
                "upsert" => ChangeOp::Upsert,
                "delete" => ChangeOp::Delete,
                _ => return Err(node.at("op")?.fail("\"upsert\" or \"delete\"")),
            };
            changes.push(NewChange {
                table: node.at("table")?.string()?,
                row_id: node.at("row_id")?.string()?,
                op,
                row_version: node.opt("row_version").map(|n| n.i64()).transpose()?,
                scopes: node.at("scopes")?.scopes()?,
                payload: node.opt("payload_hex").map(|n| n.hex()).transpose()?,
            });
            values.push(node.opt("values").map_or(Value::Null, |n| n.value.clone()));
        }
        Ok(ExpectedCommit {
            record: CommitRecord {
                commit_seq: self.at("commit_seq")?.i64()?,
                client_id: self.at("client_id")?.string()?,
                client_commit_id: self.at("client_commit_id")?.string()?,
                actor_id: self.at("actor_id")?.string()?,
                created_at_ms: self.at("created_at_ms")?.i64()?,
                writer_version: None,
                changes,
            },
            values,
        })
    }

    fn push_result(&self) -> CheckResult<ExpectedPushResult> {
        Ok(ExpectedPushResult {
            client_id: self.at("client_id")?.string()?,
            client_commit_id: self.at("client_commit_id")?.string()?,
            document: self.at("document")?.value.clone(),
        })
    }

    fn client(&self) -> CheckResult<ClientRecord> {
        Ok(ClientRecord {
            client_id: self.at("client_id")?.string()?,
            actor_id: self.at("actor_id")?.string()?,
            wire_version: self.at("wire_version")?.i32()?,
            cursor: self.at("cursor")?.i64()?,
            updated_at_ms: self.at("updated_at_ms")?.i64()?,
            subscriptions: self.at("subscriptions")?.map_items(|s| {
                Ok(ClientSubscription {
                    id: s.at("id")?.string()?,
                    table: s.at("table")?.string()?,
                    scopes: s.at("scopes")?.filter()?,
                })
            })?,
        })
    }

    fn blob_refs(&self) -> CheckResult<ExpectedBlobRefs> {
        Ok(ExpectedBlobRefs {
            table: self.at("table")?.string()?,
            row_id: self.at("row_id")?.string()?,
            blob_ids: self.at("blob_ids")?.strings()?,
        })
    }

    fn upgrade(&self) -> CheckResult<Upgrade> {
        let expected = self.at("expected")?;
        let mut live_rows_after = BTreeMap::new();
        for (partition, tables) in expected.at("live_rows_after")?.entries()? {
            let mut by_table = BTreeMap::new();
            for (table, rows) in tables.entries()? {
                by_table.insert(table.to_owned(), rows.rows()?);
            }
            live_rows_after.insert(partition.to_owned(), by_table);
        }
        let mut relational_indexes_after = BTreeMap::new();
        if let Some(node) = expected.opt("relational_indexes_after") {
            for (dialect, tables) in node.entries()? {
                let by_table = tables
                    .entries()?
                    .into_iter()
                    .map(|(table, names)| Ok((table.to_owned(), names.strings()?)))
                    .collect::<CheckResult<_>>()?;
                relational_indexes_after.insert(dialect.to_owned(), by_table);
            }
        }
        Ok(Upgrade {
            schema: self.at("schema_v2")?.schema()?,
            stored_schema_meta: expected.at("stored_schema_meta")?.schema_meta()?,
            change_payloads_unchanged: expected.at("change_payloads_unchanged")?.bool()?,
            live_rows_after,
            relational_indexes_after,
        })
    }
}

/// `scope_values_seen` lists every scope value of every live row and
/// retained change, so filters built from it enumerate everything.
fn seen_covers_scopes(partition: &Partition) -> CheckResult {
    let rows = partition
        .tables
        .iter()
        .flat_map(|(t, rows)| rows.iter().map(move |r| (t, &r.row.row_id, &r.row.scopes)));
    let changes = partition
        .commits
        .iter()
        .flat_map(|c| &c.record.changes)
        .map(|c| (&c.table, &c.row_id, &c.scopes));
    for (table, row_id, scopes) in rows.chain(changes) {
        let seen = partition.scope_values_seen.get(table);
        for (var, value) in scopes {
            check!(
                seen.and_then(|s| s.get(var))
                    .is_some_and(|v| v.contains(value)),
                "scope_values_seen misses {table}.{var} = {value:?} (row {row_id})"
            );
        }
    }
    Ok(())
}

/// Lowercase hex to bytes; `None` for anything else.
pub(super) fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
