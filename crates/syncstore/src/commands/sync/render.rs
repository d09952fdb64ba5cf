//! Writing the response: one JSON line per frame (`engine.md` §2.3), rows
//! and `serverRow` decoded to JSON objects of column values unless raw
//! bytes are asked for.

use std::io::Write;

use serde_json::Value;
use sync_core::{CompiledSchema, PushOperationResult};
use sync_engine::{ResponseItem, Sink, SinkError, SyncRequest};

use crate::escape::json_text;
use crate::values::decode_payload;

/// A sink writing JSON lines, flushed after every item.
pub struct JsonLinesSink<'a, W: Write> {
    out: W,
    schema: &'a CompiledSchema,
    /// Table of every operation, per push commit in request order (for
    /// decoding a conflict's `serverRow`).
    push_tables: Vec<Vec<String>>,
    push_results: usize,
    raw_bytes: bool,
    /// Items written so far.
    pub written: usize,
}

impl<'a, W: Write> JsonLinesSink<'a, W> {
    /// A sink for the response to `request`.
    pub fn new(out: W, schema: &'a CompiledSchema, request: &SyncRequest, raw_bytes: bool) -> Self {
        let push_tables = request
            .pushes
            .iter()
            .map(|push| push.operations.iter().map(|op| op.table.clone()).collect())
            .collect();
        Self {
            out,
            schema,
            push_tables,
            push_results: 0,
            raw_bytes,
            written: 0,
        }
    }

    fn decode_rows(&mut self, item: &ResponseItem, frame: &mut Value) {
        match item {
            ResponseItem::Commit(commit) => {
                let table = commit.tables.first().map(String::as_str).unwrap_or("");
                for (k, change) in commit.changes.iter().enumerate() {
                    if let Some(row) = &change.row {
                        self.replace(&mut frame["changes"][k]["row"], table, row);
                    }
                }
            }
            ResponseItem::BootstrapPage(page) => {
                for (k, row) in page.rows.iter().enumerate() {
                    self.replace(&mut frame["rows"][k]["row"], &page.table, &row.row);
                }
            }
            ResponseItem::PushResult(result) => {
                let tables = self.push_tables.get(self.push_results).cloned();
                self.push_results += 1;
                for (k, record) in result.results.iter().enumerate() {
                    if let PushOperationResult::Conflict {
                        op_index,
                        server_row,
                        ..
                    } = record
                    {
                        let table = tables
                            .as_ref()
                            .and_then(|t| t.get(*op_index as usize))
                            .map(String::as_str)
                            .unwrap_or("");
                        self.replace(&mut frame["results"][k]["serverRow"], table, server_row);
                    }
                }
            }
            _ => {}
        }
    }

    /// Replaces a base64 member by the decoded row; keeps it when the table
    /// is unknown or the bytes do not decode under the schema's layout.
    fn replace(&self, member: &mut Value, table: &str, bytes: &[u8]) {
        if let Some(compiled) = self.schema.table(table) {
            if let Some(object) = decode_payload(&compiled.layout(), bytes) {
                *member = Value::Object(object);
            }
        }
    }
}

impl<W: Write> Sink for JsonLinesSink<'_, W> {
    fn emit(&mut self, item: ResponseItem) -> Result<(), SinkError> {
        let mut frames = item.to_json_frames();
        if !self.raw_bytes {
            if let Some(first) = frames.first_mut() {
                self.decode_rows(&item, first);
            }
        }
        let mut write = || -> std::io::Result<()> {
            for frame in &frames {
                writeln!(self.out, "{}", json_text(frame, false))?;
            }
            self.out.flush()
        };
        write().map_err(|error| SinkError {
            reason: error.kind().to_string(),
        })?;
        self.written += 1;
        Ok(())
    }
}
