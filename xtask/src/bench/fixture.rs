//! The pinned workload data: table `todos`, scope `list:{list_id}`, 100
//! lists, deterministic rows and commits. Payloads, scopes and their JSON
//! text are built before any clock starts, so both implementations measure
//! storage work only.

use anyhow::Result;
use sync_core::{codec, CompiledSchema, CompiledTable, RowValue, StoredScopes};

/// The benchmarked table.
pub const TABLE: &str = "todos";
/// The scope variable.
pub const SCOPE_VAR: &str = "list_id";
/// Lists the row ids cycle over.
pub const LISTS: u64 = 100;
/// The derived column of W5.
pub const DERIVED: &str = "title_lower";
/// The checkpoint of W5.
pub const CHECKPOINT: &str = "title_lower_v1";
/// Schema version of every benchmark database.
pub const VERSION: i32 = 1;
/// Commit timestamps start here (fixed, so runs are comparable).
pub const EPOCH_MS: i64 = 1_700_000_000_000;

const COLUMNS: &str = r#"
    {"name": "id", "type": "string"},
    {"name": "list_id", "type": "string"},
    {"name": "title", "type": "string"},
    {"name": "done", "type": "boolean"},
    {"name": "position", "type": "integer"},
    {"name": "updated_at_ms", "type": "integer"}"#;

/// The schema: W1–W4, W6, W7 use the six pinned columns; W5 adds the
/// nullable derived column `title_lower` (same version, so the backfill
/// declares its checkpoint at version 1 without a rewrite).
pub fn schema(with_derived: bool) -> Result<CompiledSchema> {
    let extra = if with_derived {
        r#", {"name": "title_lower", "type": "string", "nullable": true}"#
    } else {
        ""
    };
    let text = format!(
        r#"{{"version": {VERSION}, "tables": [{{"name": "{TABLE}", "primaryKey": "id",
        "columns": [{COLUMNS}{extra}], "scopes": ["list:{{list_id}}"]}}]}}"#
    );
    Ok(sync_schema::compile(&sync_schema::parse_schema_json(
        &text,
    )?)?)
}

/// The list id of list number `n`.
pub fn list_id(n: u64) -> String {
    format!("list-{:03}", n % LISTS)
}

/// Every list id, in order.
pub fn all_lists() -> Vec<String> {
    (0..LISTS).map(list_id).collect()
}

/// One row as both implementations write it.
#[derive(Debug, Clone)]
pub struct BenchRow {
    pub id: String,
    pub list_id: String,
    pub title: String,
    pub done: bool,
    pub position: i64,
    pub updated_at_ms: i64,
    pub server_version: i64,
    pub payload: Vec<u8>,
    pub scopes: StoredScopes,
    /// The scopes exactly as the dialects store them (`{"list_id":"list-007"}`).
    pub scopes_json: String,
}

impl BenchRow {
    /// Row number `n` under `prefix` (`<prefix>-<n>`), version 1.
    pub fn new(table: &CompiledTable, prefix: &str, n: u64) -> Result<Self> {
        let id = format!("{prefix}-{n:08}");
        let list_id = list_id(n);
        let title = format!("Todo Number {n} In {}", list_id.to_uppercase());
        let position = i64::try_from(n)?;
        let updated_at_ms = EPOCH_MS + position;
        let done = n % 3 == 0;
        let mut values = vec![
            RowValue::String(id.clone()),
            RowValue::String(list_id.clone()),
            RowValue::String(title.clone()),
            RowValue::Boolean(done),
            RowValue::Integer(position),
            RowValue::Integer(updated_at_ms),
        ];
        if table.columns.len() > values.len() {
            values.push(RowValue::Null);
        }
        let payload = codec::encode_row(table, &values)?;
        let scopes = StoredScopes::from([(SCOPE_VAR.to_owned(), list_id.clone())]);
        let scopes_json = scopes_json(&scopes);
        Ok(Self {
            id,
            list_id,
            title,
            done,
            position,
            updated_at_ms,
            server_version: 1,
            payload,
            scopes,
            scopes_json,
        })
    }
}

/// The stored JSON text of a scope map (an object of strings).
pub fn scopes_json(scopes: &StoredScopes) -> String {
    let map = scopes
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// One client commit.
#[derive(Debug, Clone)]
pub struct BenchCommit {
    pub client_id: String,
    pub commit_id: String,
    pub actor_id: String,
    pub created_at_ms: i64,
    pub rows: Vec<BenchRow>,
}

impl BenchCommit {
    /// The push-result JSON both implementations store: status applied,
    /// the sequence, recorded at the commit time, no per-operation results.
    pub fn result_json(&self, commit_seq: i64) -> String {
        let mut result = sync_core::StoredPushResult::applied(commit_seq);
        result.recorded_at_ms = Some(self.created_at_ms);
        result.to_json()
    }
}

/// `count` commits of `rows_per_commit` distinct new rows each; row and
/// commit numbers start at `first_row`, ids carry `prefix`.
pub fn commits(
    table: &CompiledTable,
    prefix: &str,
    count: usize,
    rows_per_commit: usize,
    first_row: u64,
) -> Result<Vec<BenchCommit>> {
    let mut out = Vec::with_capacity(count);
    let mut n = first_row;
    for c in 0..count {
        let mut rows = Vec::with_capacity(rows_per_commit);
        for _ in 0..rows_per_commit {
            rows.push(BenchRow::new(table, prefix, n)?);
            n += 1;
        }
        out.push(BenchCommit {
            client_id: format!("{prefix}-client-{}", c % 16),
            commit_id: format!("{prefix}-commit-{c:08}"),
            actor_id: "bench-user".to_owned(),
            created_at_ms: EPOCH_MS + i64::try_from(c)?,
            rows,
        });
    }
    Ok(out)
}

/// A filter naming the given lists.
pub fn filter(lists: &[String]) -> sync_core::ScopeFilter {
    sync_core::ScopeFilter::from([(SCOPE_VAR.to_owned(), lists.to_vec())])
}
