//! Reading the request: the JSON lines of the SSP2 debug rendering
//! (`engine.md` §2.3), with a `payload` given either as base64 row-codec
//! bytes or as a JSON object of column values encoded with the schema's
//! row codec.

use std::io::BufReader;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{Map, Value};
use sync_core::{codec, CompiledSchema, CompiledTable, RowValue};
use sync_engine::{JsonFrameError, SyncRequest};

use super::reader::{RequestLimits, RequestReader};
use crate::error::{CliCode, CliError, CliResult};
use crate::values::value_from_json;

/// The request text of `--request FILE|-` (`-` = stdin), read under
/// `limits` ([`RequestReader`]). An unreadable source is `sync.cli.io`; a
/// request or line over its limit `sync.cli.request_too_large`.
pub fn read_text(source: &str, limits: RequestLimits) -> CliResult<String> {
    let with_path = |error: CliError| error.detail("path", source);
    if source == "-" {
        let stdin = std::io::stdin().lock();
        return RequestReader::new(stdin, limits)
            .read_all()
            .map_err(with_path);
    }
    let file = std::fs::File::open(source).map_err(|error| {
        CliError::new(CliCode::Io)
            .detail("path", source)
            .detail("reason", error.kind())
    })?;
    RequestReader::new(BufReader::new(file), limits)
        .read_all()
        .map_err(with_path)
}

/// Parses the request; object payloads are encoded under `schema`.
pub fn parse(text: &str, schema: &CompiledSchema) -> Result<SyncRequest, JsonFrameError> {
    SyncRequest::from_json_lines_with(text, &|table: &str, member: &Value| {
        payload_bytes(schema, table, member)
    })
}

fn payload_bytes(
    schema: &CompiledSchema,
    table: &str,
    member: &Value,
) -> Result<Vec<u8>, JsonFrameError> {
    match member {
        Value::String(text) => BASE64
            .decode(text)
            .map_err(|_| frame_error("payload: not base64 text".to_owned())),
        Value::Object(columns) => match schema.table(table) {
            Some(compiled) => encode_object(compiled, columns),
            // An unknown table cannot be encoded; the engine answers the
            // operation with `sync.unknown_table` before it reads the payload.
            None => Ok(Vec::new()),
        },
        _ => Err(frame_error(
            "payload: expected base64 text or an object of column values".to_owned(),
        )),
    }
}

fn encode_object(
    table: &CompiledTable,
    columns: &Map<String, Value>,
) -> Result<Vec<u8>, JsonFrameError> {
    if let Some(unknown) = columns.keys().find(|name| table.column(name).is_none()) {
        return Err(frame_error(format!(
            "payload: `{unknown}` is not a column of `{}`",
            table.name
        )));
    }
    let values = table
        .columns
        .iter()
        .map(|column| match columns.get(&column.name) {
            None => Ok(RowValue::Null),
            Some(value) => value_from_json(column.column_type, value).map_err(|expected| {
                frame_error(format!("payload: `{}` must be {expected}", column.name))
            }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    codec::encode_row(table, &values)
        .map_err(|error| frame_error(format!("payload: {}", error.message())))
}

fn frame_error(reason: String) -> JsonFrameError {
    JsonFrameError { line: 0, reason }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> CompiledSchema {
        let input = sync_schema::parse_schema_json(
            r#"{"version": 1, "tables": [{"name": "todos", "primaryKey": "id",
                "columns": [{"name": "id", "type": "string"}, {"name": "list_id", "type": "string"},
                            {"name": "done", "type": "boolean", "nullable": true}],
                "scopes": ["list:{list_id}"]}]}"#,
        )
        .unwrap();
        sync_schema::compile(&input).unwrap()
    }

    #[test]
    fn object_and_base64_payloads_give_the_same_bytes() {
        let schema = schema();
        let table = schema.table("todos").unwrap();
        let bytes = codec::encode_row(
            table,
            &[
                RowValue::String("t1".into()),
                RowValue::String("l1".into()),
                RowValue::Null,
            ],
        )
        .unwrap();
        let object = json!({"id": "t1", "list_id": "l1"});
        assert_eq!(payload_bytes(&schema, "todos", &object).unwrap(), bytes);
        let text = json!(BASE64.encode(&bytes));
        assert_eq!(payload_bytes(&schema, "todos", &text).unwrap(), bytes);
    }

    #[test]
    fn bad_payloads_name_the_column() {
        let schema = schema();
        let unknown = payload_bytes(&schema, "todos", &json!({"id": "t", "nope": 1}));
        assert!(unknown.unwrap_err().reason.contains("`nope`"));
        let typed = payload_bytes(&schema, "todos", &json!({"id": "t", "list_id": 3}));
        assert!(typed
            .unwrap_err()
            .reason
            .contains("`list_id` must be a string"));
        let missing = payload_bytes(&schema, "todos", &json!({"id": "t"}));
        assert!(
            missing.is_err(),
            "a required column left out does not encode"
        );
        assert!(payload_bytes(&schema, "todos", &json!(7)).is_err());
        assert!(payload_bytes(&schema, "todos", &json!("%%")).is_err());
        assert_eq!(
            payload_bytes(&schema, "elsewhere", &json!({"a": 1})).unwrap(),
            Vec::<u8>::new()
        );
    }
}
