//! The demo's application: a todo list, at schema v1 and v2.
//!
//! v2 appends one nullable column, `search_text`, derived from the title:
//! `search_text = lower(title)`.

use sync_core::{CompiledSchema, RowValue};

use crate::error::CliResult;

/// The table of the demo.
pub const TABLE: &str = "todos";
/// The derived column v2 adds.
pub const DERIVED: &str = "search_text";
/// The column it is derived from.
pub const SOURCE: &str = "title";
/// The partition (tenant) of the demo.
pub const PARTITION: &str = "acme";
/// The checkpoint that tracks the backfill of `search_text` in `acme`.
pub const CHECKPOINT: &str = "search_text_v2";

const V1_COLUMNS: &str = r#"
    {"name": "id", "type": "string"},
    {"name": "list_id", "type": "string"},
    {"name": "title", "type": "string"},
    {"name": "done", "type": "boolean"},
    {"name": "position", "type": "integer"}"#;

fn schema_json(version: i32, extra_columns: &str) -> String {
    format!(
        r#"{{"version": {version}, "tables": [{{
  "name": "{TABLE}", "primaryKey": "id",
  "columns": [{V1_COLUMNS}{extra_columns}],
  "scopes": ["list:{{list_id}}"],
  "indexes": [{{"name": "todos_by_list_position", "columns": ["list_id", "position"]}}]
}}]}}"#
    )
}

/// Schema v1.
pub fn schema_v1() -> CliResult<CompiledSchema> {
    compile(&schema_json(1, ""))
}

/// Schema v2: v1 plus the nullable `search_text`.
pub fn schema_v2() -> CliResult<CompiledSchema> {
    compile(&schema_json(
        2,
        r#",
    {"name": "search_text", "type": "string", "nullable": true}"#,
    ))
}

fn compile(text: &str) -> CliResult<CompiledSchema> {
    Ok(sync_schema::compile(&sync_schema::parse_schema_json(
        text,
    )?)?)
}

/// The derivation v2 code applies: `lower(title)`.
pub fn derive(title: &str) -> String {
    title.to_lowercase()
}

/// One todo as the application sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Todo {
    /// Primary key (the row id).
    pub id: String,
    /// The list it belongs to (the scope).
    pub list_id: String,
    /// Title, mixed case.
    pub title: String,
    /// Done?
    pub done: bool,
    /// Position in its list.
    pub position: i64,
}

const VERBS: [&str; 8] = [
    "Buy", "Call", "Email", "Fix", "Plan", "Read", "Write", "Water",
];
const OBJECTS: [&str; 6] = [
    "Milk",
    "ANNA",
    "the Garage Door",
    "Quarterly REPORT",
    "Plants",
    "Ünïcode Bike",
];

impl Todo {
    /// The `n`-th todo of the v1 fleet (deterministic).
    pub fn numbered(n: u32) -> Self {
        let i = n as usize;
        Self {
            id: format!("todo-{n:06}"),
            list_id: format!("list-{}", n % 8),
            title: format!(
                "{} {} #{n}",
                VERBS[i % VERBS.len()],
                OBJECTS[(i / 8) % OBJECTS.len()]
            ),
            done: n % 3 == 0,
            position: i64::from(n),
        }
    }

    /// A todo created by the v2 writer during the backfill.
    pub fn created_live(k: u32) -> Self {
        Self {
            id: format!("todo-live-{k:05}"),
            title: format!("New During BACKFILL #{k}"),
            ..Self::numbered(k)
        }
    }

    /// The same todo with another title.
    pub fn renamed(mut self, title: String) -> Self {
        self.title = title;
        self
    }

    /// Values under schema v1 (what v1 code encodes).
    pub fn v1_values(&self) -> Vec<RowValue> {
        vec![
            RowValue::String(self.id.clone()),
            RowValue::String(self.list_id.clone()),
            RowValue::String(self.title.clone()),
            RowValue::Boolean(self.done),
            RowValue::Integer(self.position),
        ]
    }

    /// Values under schema v2: v2 code derives `search_text` on every write.
    pub fn v2_values(&self) -> Vec<RowValue> {
        let mut values = self.v1_values();
        values.push(RowValue::String(derive(&self.title)));
        values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_schemas_compile_and_v2_appends_one_nullable_column() {
        let v1 = schema_v1().unwrap();
        let v2 = schema_v2().unwrap();
        let (t1, t2) = (v1.table(TABLE).unwrap(), v2.table(TABLE).unwrap());
        assert_eq!(t1.columns.len() + 1, t2.columns.len());
        assert!(t2.column(DERIVED).unwrap().nullable);
        assert_eq!(&t2.columns[..t1.columns.len()], &t1.columns[..]);
    }

    #[test]
    fn titles_differ_from_their_derivation() {
        let todo = Todo::numbered(9);
        assert_ne!(derive(&todo.title), todo.title);
        assert_eq!(todo.v2_values().len(), 6);
    }
}
