//! Server commands: operations built under the partition lock
//! (`engine.md` §4.13).

use sync_core::{codec, IndexRowScanQuery, RoundEntry, RoundEntryRequest, RowValue, ServerStorage};

use crate::context::RequestContext;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::hooks::reader::{CandidateReader, CandidateRow};
use crate::hooks::validators::RowValues;
use crate::outcome::{AppliedCommit, RoundOutcome};
use crate::push::tx_reader::TxReader;
use crate::push::{run_pipeline, CommitKey, Ops};
use crate::round::abort::Abort;
use crate::round::{serve_context, Round};
use crate::wire::request::{Operation, ReqHeader, SyncRequest};
use crate::wire::response::PushResult;
use crate::wire::wire_error::WireError;

/// The candidate reader of a command builder, with trusted index lookups.
pub trait CommandReader: CandidateReader {
    /// Rows whose index columns equal `values` (`scan_rows_by_index` through
    /// the transaction), ascending by row id.
    fn lookup(
        &mut self,
        table: &str,
        index: &str,
        values: &[RowValue],
        after_row_id: Option<&str>,
        limit: i64,
    ) -> sync_core::Result<Vec<CandidateRow>>;
}

impl CommandReader for TxReader<'_, '_> {
    fn lookup(
        &mut self,
        table: &str,
        index: &str,
        values: &[RowValue],
        after_row_id: Option<&str>,
        limit: i64,
    ) -> sync_core::Result<Vec<CandidateRow>> {
        self.lookup_by_index(&IndexRowScanQuery {
            table: table.to_owned(),
            index: index.to_owned(),
            values: values.to_vec(),
            after_row_id: after_row_id.map(str::to_owned),
            limit,
        })
    }
}

/// One write a command builder asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandWrite {
    /// Upsert a full row: every column of the table, keyed by name.
    Upsert {
        /// Table.
        table: String,
        /// Every column's value.
        row: RowValues,
        /// Optional base version.
        base_version: Option<i64>,
    },
    /// Delete a row by id.
    Delete {
        /// Table.
        table: String,
        /// Row id.
        row_id: String,
    },
}

/// What a command produced.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandOutcome {
    /// The commit's result (`applied`, `cached` or `rejected`).
    pub result: PushResult,
    /// The applied commit, for fanout.
    pub applied: Option<AppliedCommit>,
}

fn operation_error(reason: &str) -> WireError {
    WireError::new(
        "operation.invalid_request",
        "command mutation plan is invalid",
    )
    .with_detail("reason", reason)
}

/// Encodes builder writes into ordinary operations.
fn encode(engine: &Engine, writes: Vec<CommandWrite>) -> Result<Vec<Operation>, WireError> {
    writes
        .into_iter()
        .map(|write| match write {
            CommandWrite::Delete { table, row_id } => Ok(Operation::delete(table, row_id)),
            CommandWrite::Upsert {
                table,
                mut row,
                base_version,
            } => {
                let compiled = engine
                    .schema
                    .table(&table)
                    .ok_or_else(|| operation_error("unknown_table"))?;
                let values = compiled
                    .columns
                    .iter()
                    .map(|c| {
                        row.remove(&c.name)
                            .ok_or_else(|| operation_error("missing_column"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if !row.is_empty() {
                    return Err(operation_error("unknown_column"));
                }
                let row_id = values
                    .get(compiled.primary_key_index)
                    .and_then(RowValue::render_key)
                    .ok_or_else(|| operation_error("primary_key"))?;
                let payload = codec::encode_row(compiled, &values)
                    .map_err(|_| operation_error("values_do_not_encode"))?;
                Ok(Operation::upsert(table, row_id, base_version, payload))
            }
        })
        .collect()
}

/// JSON text of a string array without whitespace.
fn json_array(items: &[&str]) -> String {
    serde_json::Value::from(items.to_vec()).to_string()
}

impl Engine {
    /// Runs a server command (`engine.md` §4.13): `builder` reads through
    /// the push transaction after the lock and the locked idempotency
    /// re-check, and returns the writes; they apply as one commit under
    /// `clientId = ["remote-command", actor, client_id]` and
    /// `clientCommitId = [command_id, request_id]`. A replay returns the
    /// stored result without calling the builder. Builder errors are
    /// request-level (`operation.*` codes).
    pub fn apply_command<F>(
        &self,
        ctx: &RequestContext,
        client_id: &str,
        command_id: &str,
        request_id: &str,
        mut builder: F,
    ) -> Result<CommandOutcome, EngineError>
    where
        F: FnMut(&mut dyn CommandReader) -> Result<Vec<CommandWrite>, WireError>,
    {
        let cid = json_array(&["remote-command", &ctx.actor_id, client_id]);
        let ccid = json_array(&[command_id, request_id]);
        let request = SyncRequest {
            wire_version: 2,
            header: ReqHeader {
                client_id: cid.clone(),
                schema_version: self.schema.version,
                log_epoch: None,
            },
            pushes: Vec::new(),
            pull: None,
            subscriptions: Vec::new(),
        };
        let mut run = || -> Result<CommandOutcome, Abort> {
            let storage: &dyn ServerStorage = self.storage.as_ref();
            let now = self.config.clock.now_ms();
            // E2, E3 and P1 at once (a command's client has no record).
            let entry_request = RoundEntryRequest {
                partition: ctx.partition.clone(),
                authenticated_at_ms: now,
                initial_log_epoch: self.config.ids.new_id(),
                refresh_after_ms: self.config.activity_refresh_ms,
                running_schema_version: self.schema.version,
                client_id: cid.clone(),
                client_commit_ids: vec![ccid.clone()],
                log_bounds: false,
            };
            let RoundEntry {
                registry: reg,
                gate,
                push_results,
                ..
            } = storage
                .enter_round(&entry_request)
                .map_err(Abort::storage)?;
            let prefetched = entry_request
                .client_commit_ids
                .into_iter()
                .zip(push_results)
                .collect();
            sync_core::check_serve_gate(&gate, self.schema.version, &serve_context(self, &reg))
                .map_err(|e| Abort::Request(WireError::from_storage(&e)))?;
            let resolved = crate::round::entry::resolve(self, ctx, &cid)?;
            let mut round = Round {
                engine: self,
                ctx,
                req: &request,
                reg,
                record: None,
                prefetched,
                pull_start: None,
                resolved,
                outcome: RoundOutcome::default(),
                stage_record: false,
                record_staged: false,
                foreign_replay: false,
            };
            let mut build = |reader: &mut dyn CommandReader| {
                builder(reader).and_then(|writes| encode(self, writes))
            };
            let key = CommitKey {
                client_id: &cid,
                client_commit_id: &ccid,
            };
            let result = run_pipeline(&mut round, &key, Ops::Built(&mut build))?;
            Ok(CommandOutcome {
                result,
                applied: round.outcome.applied.pop(),
            })
        };
        run().map_err(Abort::into_engine_error)
    }
}
