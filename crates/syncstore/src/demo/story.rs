//! The story, one function per step. Every step says what happens, makes it
//! happen with the real storage API, and checks what it claims.
//!
//! The cast: server A runs the v1 code; B, C and D run the v2 code. B
//! migrates and is the backfiller (it declares the checkpoint); C is a v2
//! replica that started before the checkpoint was declared; D is a v2
//! replica started while it is pending. Each is its own storage instance
//! (own pools, own ensured schema), exactly like separate processes.

use std::sync::mpsc;
use std::sync::Arc;

use sync_backfill::{CheckpointRunner, RunOutcome, RunnerConfig};
use sync_core::{
    codec, serve_gate_refusal, CheckpointDeclaration, CheckpointState, Clock, CompiledSchema,
    CompiledTable, EnsureOptions, ErrorCode, RowValue, ServeContext, ServeGateRefusal,
    ServerStorage, SystemClock,
};

use super::narrator::Narrator;
use super::push::{ClientCommit, Gate, Pushed, Pusher};
use super::todos::{self, Todo, CHECKPOINT, DERIVED, PARTITION, SOURCE, TABLE};
use super::traffic::{self, FleetTotals, Interleave, LiveTotals, FLEET_THREADS, ROWS_PER_COMMIT};
use crate::cli::Transform;
use crate::error::CliResult;
use crate::progress::BackfillProgress;
use crate::projectors;
use crate::url::{Database, DatabaseUrl};

/// Rows per backfill batch in the demo (small enough to watch the bar move).
const BACKFILL_BATCH: i64 = 200;

/// One server process of the story.
#[derive(Debug)]
struct Server {
    db: Database,
    table: CompiledTable,
    ctx: ServeContext,
}

impl Server {
    fn pusher(&self, gate: Gate) -> Pusher<'_> {
        Pusher {
            storage: self.db.storage(),
            table: &self.table,
            ctx: self.ctx.clone(),
            gate,
        }
    }

    fn storage(&self) -> &dyn ServerStorage {
        self.db.storage()
    }
}

/// The state the story builds up.
#[derive(Debug)]
pub struct Story {
    url: DatabaseUrl,
    rows: u32,
    distribute: Option<sync_postgres::DistributeOptions>,
    v1: CompiledSchema,
    v2: CompiledSchema,
    a: Option<Server>,
    b: Option<Server>,
    c: Option<Server>,
    fleet: FleetTotals,
    live: LiveTotals,
}

/// The steps, in order.
pub const STEPS: [fn(&mut Story, &mut Narrator) -> CliResult<()>; 9] = [
    Story::schema_v1,
    Story::v1_fleet,
    Story::bump_to_v2,
    Story::v1_writer_fenced,
    Story::checkpoint_declared,
    Story::undeclared_refused,
    Story::backfill_under_traffic,
    Story::gate_opens,
    Story::consistency,
];

fn now() -> i64 {
    SystemClock.now_ms()
}

fn table_of(schema: &CompiledSchema) -> CliResult<CompiledTable> {
    Ok(schema.require_table(TABLE)?.clone())
}

impl Story {
    /// A story about `rows` todos on the database at `url`.
    /// With `distribute`, the fresh tables are distributed by partition on
    /// a Citus coordinator before the first write (`syncstore distribute`).
    pub fn new(
        url: DatabaseUrl,
        rows: u32,
        distribute: Option<sync_postgres::DistributeOptions>,
    ) -> CliResult<Self> {
        Ok(Self {
            url,
            rows,
            distribute,
            v1: todos::schema_v1()?,
            v2: todos::schema_v2()?,
            a: None,
            b: None,
            c: None,
            fleet: FleetTotals::default(),
            live: LiveTotals::default(),
        })
    }

    fn start(
        &self,
        schema: &CompiledSchema,
        declarations: Vec<CheckpointDeclaration>,
    ) -> CliResult<Server> {
        let db = self.url.open()?;
        db.storage().ensure_schema(
            schema,
            &EnsureOptions::with_declarations(declarations.clone()),
        )?;
        Ok(Server {
            db,
            table: table_of(schema)?,
            ctx: ServeContext {
                declarations,
                expected_log_epoch: None,
            },
        })
    }

    fn server<'s>(slot: Option<&'s Server>, narrator: &Narrator) -> CliResult<&'s Server> {
        slot.ok_or_else(|| narrator.failure().detail("reason", "server_not_started"))
    }

    /// Every row of the partition decoded under v2, via server B.
    fn all_rows(&self, narrator: &Narrator) -> CliResult<Vec<(String, Vec<RowValue>)>> {
        let b = Self::server(self.b.as_ref(), narrator)?;
        let mut rows = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = b
                .storage()
                .scan_partition_rows(PARTITION, TABLE, after.as_deref(), 1000)?;
            let Some(last) = page.last() else { break };
            after = Some(last.row_id.clone());
            for row in &page {
                rows.push((
                    row.row_id.clone(),
                    codec::decode_row(&b.table, &row.payload)?,
                ));
            }
        }
        Ok(rows)
    }

    // ---- 1 ---------------------------------------------------------------

    fn schema_v1(&mut self, n: &mut Narrator) -> CliResult<()> {
        n.step("Schema v1: server A starts");
        n.say(
            "Server A runs the v1 code. At startup it calls ensure_schema with schema v1: one table, \
             todos(id, list_id, title, done, position), scoped by list (list:{list_id}). On a fresh \
             database that creates the table and writes the schema marker. The tenant 'acme' is registered \
             in the partition registry.",
        );
        let a = self.start(&self.v1.clone(), Vec::new())?;
        if let Some(options) = &self.distribute {
            let report = a.db.distribute(options)?;
            n.say(&format!(
                "Before the first write the empty tables are distributed by partition on the Citus \
                 coordinator (syncstore distribute): {} tables colocated by partition, {} reference table(s).",
                report.distributed.len(),
                report.reference.len()
            ));
            n.fact("distributed_tables", report.distributed.len());
        }
        a.storage()
            .touch_partition(PARTITION, now(), "acme-log-1")?;
        let marker = a.storage().read_schema_marker()?;
        n.check_eq(
            marker.as_ref().map(|m| m.schema_version),
            Some(1),
            "the database is at schema version 1",
        )?;
        n.check_eq(
            a.storage().ensured_version(),
            Some(1),
            "server A runs version 1",
        )?;
        n.fact("schema_version", 1);
        self.a = Some(a);
        Ok(())
    }

    // ---- 2 ---------------------------------------------------------------

    fn v1_fleet(&mut self, n: &mut Narrator) -> CliResult<()> {
        n.step(&format!("A v1 fleet pushes {} todos", self.rows));
        n.say(&format!(
            "{FLEET_THREADS} client threads push through server A, {ROWS_PER_COMMIT} todos per commit. Each commit \
             is the standard push sequence: begin, lock_partition_for_push, read the serve gate and check it, \
             get_push_result (idempotency), upsert_row for each todo, append_commit, put_push_result, commit."
        ));
        let a = Self::server(self.a.as_ref(), n)?;
        self.fleet = traffic::run_fleet(&a.pusher(Gate::Check), self.rows)?;
        let stored = self.count_rows_as(a)?;
        let max_seq = a.storage().get_max_commit_seq(PARTITION)?;
        n.fact("commits", self.fleet.commits);
        n.fact("rows", stored);
        n.check_eq(
            self.fleet.rows,
            u64::from(self.rows),
            "every todo was applied",
        )?;
        n.check_eq(
            stored,
            u64::from(self.rows),
            "the partition holds exactly those rows",
        )?;
        n.check_eq(
            u64::try_from(max_seq).unwrap_or(0),
            self.fleet.commits,
            "the commit log is dense: one commit_seq per commit",
        )?;
        Ok(())
    }

    fn count_rows_as(&self, server: &Server) -> CliResult<u64> {
        let mut count = 0;
        let mut after: Option<String> = None;
        loop {
            let page =
                server
                    .storage()
                    .scan_partition_rows(PARTITION, TABLE, after.as_deref(), 1000)?;
            let Some(last) = page.last() else { break };
            after = Some(last.row_id.clone());
            count += page.len() as u64;
        }
        Ok(count)
    }

    // ---- 3 ---------------------------------------------------------------

    fn bump_to_v2(&mut self, n: &mut Narrator) -> CliResult<()> {
        n.step("Rolling deploy of v2: server B migrates, server C starts");
        n.say(
            "v2 adds a derived column: todos.search_text = lower(title), nullable. Server B, the first v2 \
             process, calls ensure_schema(v2). In one transaction under the migration lock it adds the column, \
             re-encodes every row's payload with search_text = NULL, writes marker 2 and raises the \
             database-wide writer fence to 2. Server C, a second v2 replica, starts right after: same \
             version, nothing to migrate.",
        );
        let b = self.start(&self.v2.clone(), Vec::new())?;
        let marker = b.storage().read_schema_marker()?;
        n.check_eq(
            marker.as_ref().map(|m| m.schema_version),
            Some(2),
            "the database is at schema version 2",
        )?;
        n.check_eq(
            marker.as_ref().and_then(|m| m.required_writer_version),
            Some(2),
            "the database-wide writer fence is 2",
        )?;
        let sample = Todo::numbered(0);
        let row = b.storage().get_row(PARTITION, TABLE, &sample.id)?;
        let values = match &row {
            Some(row) => codec::decode_row(&b.table, &row.payload)?,
            None => Vec::new(),
        };
        n.check_eq(
            values.last(),
            Some(&RowValue::Null),
            "existing rows read search_text = NULL (not backfilled yet)",
        )?;
        let c = self.start(&self.v2.clone(), Vec::new())?;
        n.check_eq(
            c.storage().ensured_version(),
            Some(2),
            "server C runs version 2",
        )?;
        self.b = Some(b);
        self.c = Some(c);
        Ok(())
    }

    // ---- 4 ---------------------------------------------------------------

    fn v1_writer_fenced(&mut self, n: &mut Narrator) -> CliResult<()> {
        n.step("An old v1 writer is refused by the database itself");
        n.say(
            "Server A still runs v1. Code that knows RFC 0007 reads the serve gate and stops early \
             (schema_ahead). But the binaries to stop may predate any gate code, so the fence lives in the \
             database: a trigger on sync_commits rejects every commit whose writer version is below the \
             fence. Here A pushes like a pre-RFC binary, without the gate.",
        );
        let a = Self::server(self.a.as_ref(), n)?;
        let before = a.storage().get_max_commit_seq(PARTITION)?;
        let stale = Todo::numbered(self.rows + 1).renamed("Written By OLD v1".to_owned());
        let values = vec![stale.v1_values()];
        let commit = ClientCommit {
            partition: PARTITION,
            client_id: "v1-phone-old",
            commit_id: "old-1",
            actor: "user:old",
            created_at_ms: now(),
            rows: &values,
        };
        let aware = a.pusher(Gate::Check).push(&commit);
        n.check(
            refused_with(
                &aware,
                ErrorCode::SchemaNotReady,
                Some(("reason", "schema_ahead")),
            ),
            "gate-aware v1 code refuses itself: sync.schema_not_ready (schema_ahead)",
        )?;
        let unaware = a.pusher(Gate::Skip).push(&commit);
        n.check(
            refused_with(&unaware, ErrorCode::WriterFenceRejected, None),
            "a fence-unaware v1 writer is rejected by the database: sync.storage.writer_fence_rejected",
        )?;
        let b = Self::server(self.b.as_ref(), n)?;
        n.check(
            b.storage().get_row(PARTITION, TABLE, &stale.id)?.is_none(),
            "its row write rolled back with the rejected commit",
        )?;
        n.check_eq(
            b.storage().get_max_commit_seq(PARTITION)?,
            before,
            "no commit_seq was consumed",
        )?;
        n.check_eq(
            self.count_rows_as(b)?,
            u64::from(self.rows),
            "every row v1 committed before the bump is intact",
        )?;
        Ok(())
    }

    // ---- 5 ---------------------------------------------------------------

    fn checkpoint_declared(&mut self, n: &mut Narrator) -> CliResult<()> {
        n.step("B declares the backfill checkpoint search_text_v2 for acme");
        n.say(
            "The checkpoint records the backfill's progress (state, owner epoch, watermark). Declaring it \
             raises acme's writer fence to 2 and, from now on, only a process that declared it may serve \
             acme until it is activated. (In production, declare it in the bump itself with \
             `syncstore migrate --declare acme:search_text_v2`; then an undeclared v2 process cannot even \
             start, as D shows in the next step.)",
        );
        let b = self
            .b
            .as_mut()
            .ok_or_else(|| n.failure().detail("reason", "server_not_started"))?;
        let checkpoint =
            b.db.storage()
                .declare_checkpoint(PARTITION, CHECKPOINT, 2, now())?;
        b.ctx
            .declarations
            .push(CheckpointDeclaration::new(PARTITION, CHECKPOINT, 2));
        n.check_eq(
            checkpoint.state,
            CheckpointState::Declared,
            "the checkpoint is declared",
        )?;
        n.check_eq(
            b.db.storage().required_writer_version(PARTITION)?,
            Some(2),
            "acme's effective writer fence is 2",
        )?;
        Ok(())
    }

    // ---- 6 ---------------------------------------------------------------

    fn undeclared_refused(&mut self, n: &mut Narrator) -> CliResult<()> {
        n.step("Undeclared v2 servers are refused while the backfill is pending");
        n.say(
            "Server C runs v2 but did not declare the checkpoint: inside its push transaction the serve \
             gate lists search_text_v2 as pending and refuses (sync.schema_not_ready, checkpoint_pending), \
             so no client is served a half-derived search_text. Server D, started now without declarations, \
             fails fast at startup (sync.storage.checkpoint_incomplete). B, the declaring process, passes.",
        );
        let c = Self::server(self.c.as_ref(), n)?;
        let values = vec![c_todo().v2_values()];
        let pushed = c.pusher(Gate::Check).push(&c_commit(&values));
        n.check(
            refused_with(
                &pushed,
                ErrorCode::SchemaNotReady,
                Some(("reason", "checkpoint_pending")),
            ) && refused_with(
                &pushed,
                ErrorCode::SchemaNotReady,
                Some(("projection", CHECKPOINT)),
            ),
            "C's push is refused by the serve gate: checkpoint_pending (search_text_v2)",
        )?;
        let d = self.start(&self.v2.clone(), Vec::new());
        n.check(
            matches!(&d, Err(e) if e.code() == ErrorCode::CheckpointIncomplete.as_str()),
            "D cannot start: sync.storage.checkpoint_incomplete",
        )?;
        let b = Self::server(self.b.as_ref(), n)?;
        let gate = b.storage().read_serve_gate(PARTITION, 2)?;
        n.check(
            serve_gate_refusal(&gate, 2, &b.ctx).is_none(),
            "B's gate serves acme (it declared the checkpoint)",
        )?;
        Ok(())
    }

    // ---- 7 ---------------------------------------------------------------

    fn backfill_under_traffic(&mut self, n: &mut Narrator) -> CliResult<()> {
        n.step("B backfills search_text while its writer keeps pushing");
        n.say(&format!(
            "B runs the checkpoint runner with the derived-column projector (search_text = lower(title)): \
             claim (owner epoch 1), a full pass in batches of {BACKFILL_BATCH} rows under the partition lock, \
             then catch-up over the commit log and a seal that activates. Meanwhile B's writer thread keeps \
             pushing v2 commits (a new todo and a renamed one each); one lands between every two batches."
        ));
        let b = Self::server(self.b.as_ref(), n)?;
        let schema = b
            .storage()
            .ensured_schema()
            .ok_or_else(|| n.failure().detail("reason", "server_b_not_ensured"))?;
        let projector =
            projectors::derived_column(schema, TABLE, DERIVED, SOURCE, Transform::Lower)?;
        let bar = BackfillProgress::new("   backfill", Some(u64::from(self.rows)));
        let (go_tx, go_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let interleave = Arc::new(Interleave::new(bar.clone(), go_tx, done_rx));
        let writer_pusher = b.pusher(Gate::Check);
        let rows = self.rows;
        let (outcome, live, first_landed) = std::thread::scope(|scope| {
            let writer_pusher = &writer_pusher;
            let writer =
                scope.spawn(move || traffic::live_writer(writer_pusher, rows, &go_rx, &done_tx));
            let first_landed = interleave.one_live_commit();
            let outcome = CheckpointRunner::new(b.storage(), PARTITION, CHECKPOINT, 2, &projector)
                .with_config(RunnerConfig {
                    batch_size: BACKFILL_BATCH,
                    ..RunnerConfig::default()
                })
                .with_serve_context(b.ctx.clone())
                .with_progress(interleave.clone())
                .run();
            interleave.stop();
            let live = writer.join().unwrap_or_else(|_| {
                Err(sync_core::Error::new(ErrorCode::Backend)
                    .detail("reason", "writer_thread_panicked"))
            });
            (outcome, live, first_landed)
        });
        bar.finish();
        let outcome = outcome?;
        self.live = live?;
        n.fact("outcome", outcome.as_str());
        n.fact("live_commits", self.live.commits);
        n.check(
            first_landed,
            "the writer was already pushing when the backfill started",
        )?;
        let (watermark, observed) = match outcome {
            RunOutcome::Activated {
                watermark,
                observed_rows,
                ..
            } => (watermark, observed_rows),
            _ => (0, 0),
        };
        n.fact("watermark", watermark);
        n.fact("observed_rows", observed);
        n.check_eq(
            outcome.as_str(),
            "activated",
            "the runner activated the checkpoint",
        )?;
        n.check(
            self.live.commits >= 2,
            &format!(
                "{} live commits landed: one before the backfill, the rest between its batches",
                self.live.commits
            ),
        )?;
        n.say(&format!(
            "The full pass read {observed} rows; the catch-up re-derived what the writer changed meanwhile; \
             the seal activated at watermark {watermark}."
        ));
        Ok(())
    }

    // ---- 8 ---------------------------------------------------------------

    fn gate_opens(&mut self, n: &mut Narrator) -> CliResult<()> {
        n.step("Activation opens the gate for everyone");
        n.say(
            "The checkpoint is activated (one-way). C's retried push is now served, and D starts without \
             declarations: nothing is pending at version 2 any more.",
        );
        let b = Self::server(self.b.as_ref(), n)?;
        let checkpoint = b.storage().read_checkpoint(PARTITION, CHECKPOINT)?;
        n.check_eq(
            checkpoint.map(|c| c.state),
            Some(CheckpointState::Activated),
            "the checkpoint is activated",
        )?;
        let c = Self::server(self.c.as_ref(), n)?;
        let gate = c.storage().read_serve_gate(PARTITION, 2)?;
        n.check_eq(
            serve_gate_refusal(&gate, 2, &c.ctx),
            None::<ServeGateRefusal>,
            "the serve gate of undeclared v2 code serves acme",
        )?;
        let values = vec![c_todo().v2_values()];
        let pushed = c.pusher(Gate::Check).push(&c_commit(&values))?;
        n.check(
            matches!(pushed, Pushed::Applied(_)),
            "C's retried push is applied",
        )?;
        let d = self.start(&self.v2.clone(), Vec::new());
        n.check(d.is_ok(), "D starts without declarations")?;
        Ok(())
    }

    // ---- 9 ---------------------------------------------------------------

    fn consistency(&mut self, n: &mut Narrator) -> CliResult<()> {
        n.step("Final check: every row's search_text equals lower(its current title)");
        n.say(
            "Every row of acme is read back and decoded; the derived column must match the derivation of \
             the row's current title, including rows created or renamed during the backfill.",
        );
        let rows = self.all_rows(n)?;
        let title_at = self
            .v2
            .require_table(TABLE)?
            .column_index
            .get(SOURCE)
            .copied();
        let derived_at = self
            .v2
            .require_table(TABLE)?
            .column_index
            .get(DERIVED)
            .copied();
        let mismatched: Vec<&String> = rows
            .iter()
            .filter(|(_, values)| {
                let title = title_at.and_then(|i| values.get(i));
                let derived = derived_at.and_then(|i| values.get(i));
                match (title, derived) {
                    (Some(RowValue::String(t)), Some(RowValue::String(d))) => {
                        *d != todos::derive(t)
                    }
                    _ => true,
                }
            })
            .map(|(id, _)| id)
            .collect();
        let expected = u64::from(self.rows) + self.live.created + 1;
        n.fact("rows", rows.len() as u64);
        n.fact("mismatched", mismatched.len() as u64);
        n.check_eq(
            rows.len() as u64,
            expected,
            "rows = the fleet's + the live writer's new ones + C's (the v1 row was never written)",
        )?;
        n.check(
            mismatched.is_empty(),
            &format!("all {} rows have search_text = lower(title)", rows.len()),
        )?;
        let renamed = rows
            .iter()
            .filter(|(_, values)| {
                title_at.and_then(|i| values.get(i)).is_some_and(
                    |t| matches!(t, RowValue::String(t) if t.starts_with("Renamed LIVE")),
                )
            })
            .count();
        n.check(
            renamed > 0 || self.live.renamed == 0,
            &format!("{renamed} rows renamed during the backfill carry their new derivation"),
        )?;
        Ok(())
    }
}

/// The todo server C tries to create.
fn c_todo() -> Todo {
    Todo::created_live(90_000).renamed("Pushed Through SERVER C".to_owned())
}

fn c_commit(values: &[Vec<RowValue>]) -> ClientCommit<'_> {
    ClientCommit {
        partition: PARTITION,
        client_id: "v2-web-c",
        commit_id: "c-1",
        actor: "user:c",
        created_at_ms: now(),
        rows: values,
    }
}

/// Whether a push failed with `code` (and, when given, that detail).
fn refused_with(
    result: &sync_core::Result<Pushed>,
    code: ErrorCode,
    detail: Option<(&str, &str)>,
) -> bool {
    match result {
        Err(error) if error.code() == code => {
            detail.is_none_or(|(key, value)| error.get_detail(key) == Some(value))
        }
        _ => false,
    }
}
