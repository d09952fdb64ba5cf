//! One test instance: its own storage, engine, realtime hub and sync
//! routes over one partition, with a virtual clock, a settable scope resolver, declarative
//! validators and an idempotency fault, all through the engine's hooks.
//!
//! Every method is synchronous and may block on the storage: the routes
//! call them on the blocking pool.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde_json::{json, Value};
use sync_core::{Clock, CompiledSchema, ErrorCode, ManualClock, RetentionPolicy, ServerStorage};
use sync_engine::{CommitValidator, Engine, EngineConfig, RowValidator, ScopeMap};
use sync_http::{HttpConfig, SyncState};
use sync_wire::realtime::{RealtimeConfig, RealtimeHub};
use sync_wire::{StorageSegmentStore, WireConfig, WireService};

use super::actor_auth::ActorBearer;
use super::create::{CreateOptions, InstanceLimits};
use super::driver_values::to_driver;
use super::idempotency_fault::IdempotencyFault;
use super::resolver::ControlResolver;
use super::validators::{CommitRules, RowRule, Rules, SiblingRule, TableRules};
use crate::error::{CliCode, CliError, CliResult};
use crate::scratch::{ScratchArea, ScratchDb};

/// Sync rounds and downloads of one instance running at once (its
/// storage pool is small).
const ROUNDS_PER_INSTANCE: usize = 4;
/// Rows read per storage call by [`Instance::rows`].
const ROWS_PAGE: i64 = 1_000;

/// The storage, realtime hub and routes serving now (replaced by a
/// restore).
struct Live {
    db: ScratchDb,
    storage: Arc<dyn ServerStorage>,
    hub: Arc<RealtimeHub>,
    router: axum::Router,
}

impl Live {
    /// Closes the hub's sockets (their clients reconnect and catch up) and
    /// frees the storage.
    fn retire(self, area: &ScratchArea) {
        self.hub.close_all();
        let db = self.db.clone();
        drop(self);
        area.discard(&db);
    }
}

/// A test instance.
pub(crate) struct Instance {
    partition: String,
    schema: Arc<CompiledSchema>,
    limits: InstanceLimits,
    clock: Arc<ManualClock>,
    resolver: Arc<ControlResolver>,
    rules: Arc<Rules>,
    idempotency_fault: Arc<AtomicBool>,
    area: Arc<ScratchArea>,
    live: RwLock<Option<Live>>,
    backup: Mutex<Option<ScratchDb>>,
    restores: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("partition", &self.partition)
            .field("now_ms", &self.clock.now_ms())
            .finish_non_exhaustive()
    }
}

fn closed() -> CliError {
    CliError::new(CliCode::ControlUnknownInstance).detail("reason", "closed")
}

impl Instance {
    /// Creates the instance's storage in `area` and its engine.
    pub(crate) fn create(options: CreateOptions, area: Arc<ScratchArea>) -> CliResult<Self> {
        let instance = Self {
            partition: options.partition,
            schema: Arc::new(options.schema),
            limits: options.limits,
            clock: Arc::new(ManualClock::new(options.now_ms)),
            resolver: Arc::new(ControlResolver::default()),
            rules: Arc::new(Rules::default()),
            idempotency_fault: Arc::new(AtomicBool::new(false)),
            area,
            live: RwLock::new(None),
            backup: Mutex::new(None),
            restores: std::sync::atomic::AtomicU64::new(0),
        };
        let db = instance.area.fresh();
        match instance.serve(db.clone()) {
            Ok(live) => {
                *instance
                    .live
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = Some(live);
                Ok(instance)
            }
            Err(error) => {
                instance.area.discard(&db);
                Err(error)
            }
        }
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// Opens the storage at `db` and builds the engine and routes over it.
    fn serve(&self, db: ScratchDb) -> CliResult<Live> {
        let opened = self.area.open(&db, &self.schema, self.clock())?;
        let storage: Arc<dyn ServerStorage> = Arc::new(IdempotencyFault::new(
            opened,
            self.idempotency_fault.clone(),
        ));
        let mut config = EngineConfig::new(self.resolver.clone());
        config.row_validators = self
            .schema
            .tables
            .iter()
            .map(|table| {
                let validator: Arc<dyn RowValidator> =
                    Arc::new(TableRules::new(&table.name, self.rules.clone()));
                (table.name.clone(), validator)
            })
            .collect();
        config.commit_validator =
            Some(Arc::new(CommitRules(self.rules.clone())) as Arc<dyn CommitValidator>);
        config.clock = self.clock();
        config.limits.max_operations_per_request = self.limits.max_operations_per_request;
        let engine = Engine::new(storage.clone(), self.schema.clone(), config)
            .map_err(crate::commands::sync::internal)?;
        let wire = WireConfig {
            inline_limit: self.limits.inline_segment_max_bytes,
            segment_ttl_ms: self.limits.segment_ttl_ms,
            segment_store: StorageSegmentStore::of(storage.clone())
                .map(|s| Arc::new(s) as Arc<dyn sync_core::segments::SegmentStore>),
            clock: self.clock(),
        };
        let service = Arc::new(WireService::new(Arc::new(engine), wire));
        let http = HttpConfig {
            max_concurrent_rounds: ROUNDS_PER_INSTANCE,
            ..HttpConfig::default()
        };
        let realtime = RealtimeConfig {
            max_message_bytes: self.limits.max_delta_bytes,
            max_presence_doc_bytes: self.limits.max_presence_bytes,
            ..RealtimeConfig::default()
        };
        let hub = Arc::new(RealtimeHub::new(service.clone(), realtime));
        let auth = Arc::new(ActorBearer::new(&self.partition));
        let state = SyncState::new(service, auth, http).with_realtime(hub.clone());
        Ok(Live {
            db,
            storage,
            hub,
            router: sync_http::router(state),
        })
    }

    fn storage(&self) -> CliResult<Arc<dyn ServerStorage>> {
        self.live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|live| live.storage.clone())
            .ok_or_else(closed)
    }

    /// The sync routes (`/sync`, `/segments/{id}`, `/realtime`) serving
    /// now.
    pub(crate) fn router(&self) -> CliResult<axum::Router> {
        self.live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|live| live.router.clone())
            .ok_or_else(closed)
    }

    /// The instance's partition.
    pub(crate) fn partition(&self) -> &str {
        &self.partition
    }

    /// Sets `actor`'s allowed scopes.
    pub(crate) fn set_allowed_scopes(&self, actor: &str, allowed: ScopeMap) {
        self.resolver.set_allowed(actor, allowed);
    }

    /// Makes the scope resolver fail (or answer again).
    pub(crate) fn set_resolver_failing(&self, failing: bool) {
        self.resolver.set_failing(failing);
    }

    /// Moves the virtual clock forward by `ms`; returns the new time.
    pub(crate) fn advance_clock(&self, ms: i64) -> i64 {
        self.clock.advance(ms);
        self.clock.now_ms()
    }

    /// The virtual time.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// One retention pass at the virtual time; returns the horizon after
    /// it. A partition no round has reached yet has nothing to prune (its
    /// horizon stays 0).
    pub(crate) fn prune(&self, retention: &RetentionPolicy) -> CliResult<i64> {
        let storage = self.storage()?;
        match sync_core::prune_commit_log(
            storage.as_ref(),
            &self.partition,
            self.clock.now_ms(),
            retention,
        ) {
            Ok(result) => Ok(result.horizon_seq),
            Err(e) if e.is(ErrorCode::PartitionUnregistered) => {
                Ok(storage.get_horizon_seq(&self.partition)?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The partition's commit counter and horizon.
    pub(crate) fn seqs(&self) -> CliResult<(i64, i64)> {
        let storage = self.storage()?;
        Ok((
            storage.get_max_commit_seq(&self.partition)?,
            storage.get_horizon_seq(&self.partition)?,
        ))
    }

    /// Every stored row of `table`, ascending by row id:
    /// `{"rowId", "version", "values", "scopes"}`.
    pub(crate) fn rows(&self, table: &str) -> CliResult<Vec<Value>> {
        let compiled = self
            .schema
            .table(table)
            .ok_or_else(|| sync_core::Error::unknown_table(table))?;
        let storage = self.storage()?;
        let mut rows = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page =
                storage.scan_partition_rows(&self.partition, table, after.as_deref(), ROWS_PAGE)?;
            let full = page.len() as i64 == ROWS_PAGE;
            for row in &page {
                let decoded = sync_core::codec::decode_row(compiled, &row.payload)?;
                let values: serde_json::Map<String, Value> = compiled
                    .columns
                    .iter()
                    .zip(&decoded)
                    .map(|(column, value)| (column.name.clone(), to_driver(value)))
                    .collect();
                rows.push(json!({
                    "rowId": row.row_id,
                    "version": row.server_version,
                    "values": values,
                    "scopes": crate::values::scopes_to_json(&row.scopes),
                }));
            }
            after = page.last().map(|row| row.row_id.clone());
            if !full {
                return Ok(rows);
            }
        }
    }

    /// The schema the instance serves.
    pub(crate) fn schema(&self) -> &CompiledSchema {
        &self.schema
    }

    /// Replaces the row validators.
    pub(crate) fn install_row_rules(&self, rules: BTreeMap<String, RowRule>) {
        self.rules.set_rows(rules);
    }

    /// Replaces (or clears) the commit validator.
    pub(crate) fn install_commit_rule(&self, rule: Option<SiblingRule>) {
        self.rules.set_commit(rule);
    }

    /// Makes the next idempotency lookup fail as an unreadable record.
    pub(crate) fn fail_next_idempotency_lookup(&self) {
        self.idempotency_fault
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Captures the whole storage as it is now (replacing an earlier
    /// backup).
    pub(crate) fn capture_backup(&self) -> CliResult<()> {
        let db = self
            .live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|live| live.db.clone())
            .ok_or_else(closed)?;
        let copy = self.area.copy(&db, &self.schema, self.clock())?;
        let earlier = self
            .backup
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(copy);
        if let Some(earlier) = earlier {
            self.area.discard(&earlier);
        }
        Ok(())
    }

    /// Serves a copy of the captured backup from now on (the backup stays
    /// for another restore), with the partition's log epoch rotated to
    /// `restored-<now>-<n>` (the `n`th restore of the instance, so two
    /// restores at one virtual time still differ): every client of an
    /// earlier epoch is reset, and every realtime socket of the replaced
    /// storage is closed (its client reconnects to the restored one).
    /// Returns the new epoch.
    pub(crate) fn restore_backup(&self) -> CliResult<String> {
        let backup = self
            .backup
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| CliError::new(CliCode::ControlNoBackup))?;
        let copy = self.area.copy(&backup, &self.schema, self.clock())?;
        let live = match self.serve(copy.clone()) {
            Ok(live) => live,
            Err(error) => {
                self.area.discard(&copy);
                return Err(error);
            }
        };
        let now = self.clock.now_ms();
        let n = self
            .restores
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        let epoch = format!("restored-{now}-{n}");
        live.storage
            .rotate_partition_log_epoch(&self.partition, &epoch, now)?;
        let old = self
            .live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(live);
        if let Some(old) = old {
            old.retire(&self.area);
        }
        Ok(epoch)
    }

    /// Frees everything: the realtime sockets, the storage, its backup,
    /// their files or schemas.
    pub(crate) fn close(&self) {
        let live = self
            .live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(live) = live {
            live.retire(&self.area);
        }
        let backup = self
            .backup
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(backup) = backup {
            self.area.discard(&backup);
        }
    }
}
