//! The schema of the scenarios, one JSON document read by both sides: the
//! server's `--schema` file and the client's schema IR.

use serde_json::{json, Value};

/// The scenarios' table: `todos(id, list_id, title, done)` scoped by
/// `list:{list_id}`; from version 2 a nullable `note` column.
pub fn todos(version: i32) -> Value {
    let mut columns = vec![
        json!({"name": "id", "type": "string", "nullable": false}),
        json!({"name": "list_id", "type": "string", "nullable": false}),
        json!({"name": "title", "type": "string", "nullable": false}),
        json!({"name": "done", "type": "boolean", "nullable": false}),
    ];
    if version >= 2 {
        columns.push(json!({"name": "note", "type": "string", "nullable": true}));
    }
    json!({
        "version": version,
        "tables": [{
            "name": "todos",
            "primaryKey": "id",
            "columns": columns,
            "scopes": [{"pattern": "list:{list_id}", "column": "list_id"}],
        }]
    })
}

/// A tokens file: `(token, partition, actor, allowed list ids)` per entry,
/// the list ids comma-separated (`*` for any, empty for none).
pub fn tokens(entries: &[(&str, &str, &str, &str)]) -> Value {
    let mut map = serde_json::Map::new();
    for (token, partition, actor, lists) in entries {
        let lists: Vec<&str> = lists.split(',').filter(|l| !l.is_empty()).collect();
        map.insert(
            (*token).to_owned(),
            json!({"partition": partition, "actor": actor, "allow": {"list_id": lists}}),
        );
    }
    Value::Object(map)
}
