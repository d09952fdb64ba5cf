//! `ensure_schema` without transactional DDL (`docs/design/mariadb.md`
//! §10): a read-only path when the stored version matches; otherwise a
//! bump under the migration lock (`GET_LOCK`, on a connection of its own):
//! a read-only preflight, the fence transaction (fences, declarations, the
//! `migrating_to` mark and the journal, one InnoDB transaction that drains
//! writers), the DDL statements one by one with the journal's step after
//! each, and the finishing transaction. A journal left open by a crash is
//! rolled forward by the next bump.
//!
//! Rows are rewritten after the DDL in journaled keyset pages; the
//! preflight decodes every payload a rewrite will decode first, and builds
//! every table it creates or alters as a temporary table first
//! ([`shape_probe`]: InnoDB's row-size and key-length refusals).

use serde_json::json;
use sync_core::{
    bump_resolutions, CheckpointDeclaration, CheckpointKey, CompiledSchema, EnsureOptions,
    EnsureOutcome, Error, ErrorCode, Resolution, Result,
};
use sync_schema::{
    check_physical, compare_same_version, layouts_json, parse_layouts, plan_legacy_upgrade,
    plan_migration, ObservedTable, ObservedTables, RewritePlan, Statement, StoredLayouts,
};

use crate::bootstrap::take_named_lock;
use crate::checkpoints;
use crate::config::ms_to_seconds;
use crate::instance::MariadbStorage;
use crate::introspect::observe_schema;
use crate::pool::Conn;
use crate::rewrite;
use crate::session::{lost_at_commit, LockWaits};
use crate::shape_probe;
use crate::values::corrupt;
use crate::DIALECT;

/// The stored marker row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Marker {
    /// 0 when the database was never bumped.
    pub version: i64,
    pub layouts: String,
    pub required_writer_version: Option<i32>,
    pub migrating_to: Option<i32>,
}

/// Reads the marker row.
pub(crate) fn read_marker(conn: &mut Conn) -> Result<Option<Marker>> {
    let row: Option<(i64, String, Option<i32>, Option<i32>)> = conn.first(
        "SELECT `schema_version`, `layouts`, `required_writer_version`, `migrating_to` \
         FROM `sync_schema_meta` WHERE `id` = 1",
        (),
    )?;
    Ok(row.map(
        |(version, layouts, required_writer_version, migrating_to)| Marker {
            version,
            layouts,
            required_writer_version,
            migrating_to,
        },
    ))
}

fn check_pending(
    pending: &[CheckpointKey],
    declarations: &[CheckpointDeclaration],
    version: i32,
) -> Result<()> {
    for key in pending {
        let declared = declarations.iter().any(|d| {
            d.partition == key.partition && d.name == key.name && d.schema_version == version
        });
        if !declared {
            return Err(Error::new(ErrorCode::CheckpointIncomplete)
                .detail("partition", &key.partition)
                .detail("name", &key.name));
        }
    }
    Ok(())
}

fn newer(stored: i64, configured: i32) -> Error {
    Error::new(ErrorCode::SchemaNewerThanCode)
        .detail("stored", stored)
        .detail("configured", configured)
}

/// Steps 3–14.
pub(crate) fn run(
    storage: &MariadbStorage,
    schema: &CompiledSchema,
    opts: &EnsureOptions,
) -> Result<EnsureOutcome> {
    let version = schema.version;
    let mut restarted = false;
    let mut rolled_forward = false;
    loop {
        let (marker, pending) = {
            let mut conn = storage.conn()?;
            (
                read_marker(&mut conn)?,
                checkpoints::list_pending(&mut conn, version)?,
            )
        };
        check_pending(&pending, &opts.declarations, version)?;
        let stored = marker.as_ref().map_or(0, |m| m.version);
        let migrating = marker.as_ref().and_then(|m| m.migrating_to);
        if stored > i64::from(version) || migrating.is_some_and(|m| m > version) {
            return Err(newer(
                stored.max(i64::from(migrating.unwrap_or(0))),
                version,
            ));
        }
        if stored == i64::from(version) && migrating.is_none() {
            let outcome = same_version(storage, schema, marker.as_ref())?;
            return Ok(if rolled_forward {
                EnsureOutcome::Migrated
            } else {
                outcome
            });
        }
        match bump(storage, schema, opts)? {
            Bump::Done => return Ok(EnsureOutcome::Migrated),
            Bump::RolledForward => rolled_forward = true,
            Bump::Raced if !restarted => restarted = true,
            Bump::Raced => {
                return Err(Error::new(ErrorCode::Busy).detail("reason", "marker_changed"))
            }
        }
    }
}

/// Exact layouts, the one-time legacy upgrade when a legacy shape is
/// present, then the physical checks; otherwise no lock and no DDL.
fn same_version(
    storage: &MariadbStorage,
    schema: &CompiledSchema,
    marker: Option<&Marker>,
) -> Result<EnsureOutcome> {
    let stored = parse_layouts(marker.map(|m| m.layouts.as_str()))?;
    compare_same_version(schema, &stored)?;
    let observed = storage.with_conn(|c| observe_schema(c, schema))?;
    let (observed, outcome) = if plan_legacy_upgrade(schema, &observed, DIALECT).is_empty() {
        (observed, EnsureOutcome::Verified)
    } else {
        (legacy_upgrade(storage, schema)?, EnsureOutcome::Upgraded)
    };
    for table in &schema.tables {
        let physical = observed
            .get(&table.name)
            .cloned()
            .unwrap_or_else(|| ObservedTable::absent(&table.name));
        check_physical(table, &physical, DIALECT)?;
    }
    Ok(outcome)
}

/// The same-version legacy upgrade (a configured table written before one
/// of its nullable internal columns existed): under the migration lock,
/// re-detect and run the plan's statements. Each is one `ALTER TABLE … ADD
/// COLUMN` of a nullable column, which InnoDB applies in place without
/// rewriting rows and which is idempotent through the re-detection, so no
/// journal is needed: a crash between two statements leaves a shape the
/// next open detects and finishes. Returns the state observed after it.
fn legacy_upgrade(storage: &MariadbStorage, schema: &CompiledSchema) -> Result<ObservedTables> {
    let mut conn = migration_session(storage)?;
    let observed = observe_schema(&mut conn, schema)?;
    let plan = plan_legacy_upgrade(schema, &observed, DIALECT);
    // Each statement commits by itself: once one was sent, a lost
    // connection may have left it done (`outcome_unknown`).
    for statement in plan.statements() {
        if statement.params.is_empty() {
            conn.run(&statement.sql).map_err(lost_at_commit)?;
        } else {
            conn.exec(&statement.sql, statement.params.clone())
                .map_err(lost_at_commit)?;
        }
    }
    let after = if plan.is_empty() {
        observed
    } else {
        observe_schema(&mut conn, schema).map_err(lost_at_commit)?
    };
    // Dropping the connection ends the session and with it the lock.
    drop(conn);
    Ok(after)
}

enum Bump {
    Done,
    /// The marker reached the version while this instance waited.
    Raced,
    /// An open migration was finished; look again.
    RolledForward,
}

/// The plan kept in the journal: the statements (text and bound text
/// parameters), in order, the rewrites, and the layouts the finishing
/// transaction stores.
fn plan_json(statements: &[Statement], rewrites: &[RewritePlan], layouts: &str) -> String {
    let statements: Vec<serde_json::Value> = statements
        .iter()
        .map(|s| json!({"sql": s.sql, "params": s.params}))
        .collect();
    let rewrites: Vec<serde_json::Value> = rewrites.iter().map(rewrite::plan_entry).collect();
    json!({"format": 1, "statements": statements, "rewrites": rewrites, "layouts": layouts})
        .to_string()
}

/// A journaled plan: statements, rewrite entries, target layouts.
struct JournalPlan {
    statements: Vec<Statement>,
    rewrites: Vec<serde_json::Value>,
    layouts: String,
}

fn parse_plan(text: &str) -> Result<JournalPlan> {
    let bad = || corrupt("journal_plan");
    let value: serde_json::Value = serde_json::from_str(text).map_err(|_| bad())?;
    let statements = value["statements"]
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|s| {
            let sql = s["sql"].as_str().ok_or_else(bad)?;
            let params = match s["params"].as_array() {
                Some(params) => params
                    .iter()
                    .map(|p| p.as_str().map(str::to_owned).ok_or_else(bad))
                    .collect::<Result<Vec<_>>>()?,
                None => Vec::new(),
            };
            Ok(Statement::with_params(sql, params))
        })
        .collect::<Result<Vec<_>>>()?;
    let layouts = value["layouts"].as_str().ok_or_else(bad)?.to_owned();
    let rewrites = value["rewrites"].as_array().cloned().unwrap_or_default();
    Ok(JournalPlan {
        statements,
        rewrites,
        layouts,
    })
}

/// A session of its own holding the migration lock (`GET_LOCK`), which
/// ends with it: dropping the connection releases the lock.
fn migration_session(storage: &MariadbStorage) -> Result<Conn> {
    let lock_ms = storage.config().migration_lock_timeout_ms;
    let (mut conn, _) = Conn::open(
        &storage.url().connection_opts(),
        LockWaits {
            metadata_seconds: ms_to_seconds(lock_ms),
            ..storage.lock_waits()
        },
    )?;
    storage.hook(&mut conn);
    take_named_lock(&mut conn, "sync.migrate.", lock_ms)?;
    Ok(conn)
}

fn bump(storage: &MariadbStorage, schema: &CompiledSchema, opts: &EnsureOptions) -> Result<Bump> {
    let mut conn = migration_session(storage)?;
    let outcome = bump_locked(&mut conn, storage, schema, opts);
    // Dropping the connection ends the session and with it the lock.
    drop(conn);
    outcome
}

fn bump_locked(
    conn: &mut Conn,
    storage: &MariadbStorage,
    schema: &CompiledSchema,
    opts: &EnsureOptions,
) -> Result<Bump> {
    let version = schema.version;
    let marker = read_marker(conn)?;
    if let Some(target) = marker.as_ref().and_then(|m| m.migrating_to) {
        if target > version {
            return Err(newer(i64::from(target), version));
        }
        // A crashed migration: finish it first, then look again. It is
        // open already: a lost connection never leaves it as it was.
        roll_forward(conn, target, schema, storage, opts).map_err(lost_at_commit)?;
        return Ok(Bump::RolledForward);
    }
    let stored_version = marker.as_ref().map_or(0, |m| m.version);
    if stored_version >= i64::from(version) {
        return Ok(Bump::Raced);
    }

    // Preflight: everything that can refuse, before any write.
    check_pending(
        &checkpoints::list_pending(conn, version)?,
        &opts.declarations,
        version,
    )?;
    let resolved = bump_resolutions(&checkpoints::list_unfinished(conn, version)?, opts)?;
    let stored = match &marker {
        Some(m) if m.version > 0 => parse_layouts(Some(&m.layouts))?,
        _ => StoredLayouts::new(),
    };
    let observed = observe_schema(conn, schema)?;
    let plan = plan_migration(schema, &stored, &observed, DIALECT)?;
    let rewrites: Vec<RewritePlan> = plan.needed_rewrites().cloned().collect();
    for rewrite in &rewrites {
        rewrite::decode_scan(conn, schema, rewrite)?;
    }
    shape_probe::probe_shapes(conn, schema, &plan)?;
    for d in &opts.declarations {
        if let Some(existing) = checkpoints::read_one(conn, &d.partition, &d.name)? {
            if existing.schema_version != version {
                return Err(checkpoints::version_mismatch(
                    existing.schema_version,
                    version,
                ));
            }
        }
    }
    let statements: Vec<Statement> = plan.statements().cloned().collect();
    let layouts = layouts_json(schema);
    let now = storage.config().clock.now_ms();

    // The fence transaction.
    conn.run("START TRANSACTION")?;
    let fenced = (|| -> Result<bool> {
        let locked = read_marker_for_update(conn)?;
        opts.notify_migration_locked();
        if locked != marker {
            return Ok(false);
        }
        conn.exec(
            "INSERT INTO `sync_schema_meta` (`id`, `schema_version`, `layouts`, \
             `required_writer_version`, `migrating_to`) VALUES (1, 0, '{}', ?, ?) \
             ON DUPLICATE KEY UPDATE `required_writer_version` = \
             GREATEST(COALESCE(`required_writer_version`, VALUE(`required_writer_version`)), \
             VALUE(`required_writer_version`)), `migrating_to` = VALUE(`migrating_to`)",
            (version, version),
        )?;
        for r in &resolved {
            let (partition, name) = (&r.checkpoint.partition, &r.checkpoint.name);
            match r.resolution {
                Resolution::Carry => checkpoints::carry(conn, partition, name, version, now)?,
                Resolution::Abandon => checkpoints::abandon(conn, partition, name)?,
            }
        }
        for d in &opts.declarations {
            checkpoints::install(conn, &d.partition, &d.name, version, now)?;
        }
        conn.exec(
            "INSERT INTO `sync_migration_journal` (`target_version`, `from_version`, `state`, \
             `plan`, `owner`, `started_at_ms`, `updated_at_ms`) VALUES (?, ?, 'fenced', ?, ?, ?, ?) \
             ON DUPLICATE KEY UPDATE `from_version` = VALUE(`from_version`), `state` = 'fenced', \
             `plan` = VALUE(`plan`), `next_step` = 0, `owner` = VALUE(`owner`), \
             `started_at_ms` = VALUE(`started_at_ms`), `updated_at_ms` = VALUE(`updated_at_ms`), \
             `finished_at_ms` = NULL",
            (
                version,
                stored_version,
                plan_json(&statements, &rewrites, &layouts),
                format!("pid {}", std::process::id()),
                now,
                now,
            ),
        )?;
        Ok(true)
    })();
    match fenced {
        Ok(true) => conn.run("COMMIT").map_err(lost_at_commit)?,
        Ok(false) => {
            conn.rollback();
            return Ok(Bump::Raced);
        }
        Err(error) => {
            conn.rollback();
            return Err(error);
        }
    }

    // From here on the migration is stored as open: a connection lost now
    // leaves it open (or done), never as it was — `outcome_unknown`, not
    // `connection_lost` (which says nothing changed); the next bump rolls
    // it forward.
    run_ddl(conn, version, &statements, 0, storage)
        .and_then(|()| run_rewrites(conn, schema, version, &rewrites, None, storage, opts))
        .and_then(|()| finish(conn, version, &layouts, storage))
        .map_err(lost_at_commit)?;
    Ok(Bump::Done)
}

fn read_marker_for_update(conn: &mut Conn) -> Result<Option<Marker>> {
    let row: Option<(i64, String, Option<i32>, Option<i32>)> = conn.first(
        "SELECT `schema_version`, `layouts`, `required_writer_version`, `migrating_to` \
         FROM `sync_schema_meta` WHERE `id` = 1 FOR UPDATE",
        (),
    )?;
    Ok(row.map(
        |(version, layouts, required_writer_version, migrating_to)| Marker {
            version,
            layouts,
            required_writer_version,
            migrating_to,
        },
    ))
}

/// Runs the DDL statements from `from` on, journaling the next step after
/// each (autocommit: every statement commits on its own).
fn run_ddl(
    conn: &mut Conn,
    version: i32,
    statements: &[Statement],
    from: usize,
    storage: &MariadbStorage,
) -> Result<()> {
    for (step, statement) in statements.iter().enumerate().skip(from) {
        if statement.params.is_empty() {
            conn.run(&statement.sql)?;
        } else {
            conn.exec(&statement.sql, statement.params.clone())?;
        }
        conn.exec(
            "UPDATE `sync_migration_journal` SET `next_step` = ?, `state` = 'ddl', \
             `updated_at_ms` = ? WHERE `target_version` = ?",
            (step as i64 + 1, storage.config().clock.now_ms(), version),
        )?;
    }
    Ok(())
}

/// The finishing transaction: marker and layouts, journal done.
fn finish(conn: &mut Conn, version: i32, layouts: &str, storage: &MariadbStorage) -> Result<()> {
    let now = storage.config().clock.now_ms();
    conn.run("START TRANSACTION")?;
    let done = (|| -> Result<()> {
        read_marker_for_update(conn)?;
        conn.exec(
            "UPDATE `sync_schema_meta` SET `schema_version` = ?, `layouts` = ?, \
             `migrating_to` = NULL WHERE `id` = 1 AND `migrating_to` = ?",
            (version, layouts, version),
        )?;
        conn.exec(
            "UPDATE `sync_migration_journal` SET `state` = 'done', `updated_at_ms` = ?, \
             `finished_at_ms` = ? WHERE `target_version` = ?",
            (now, now, version),
        )?;
        Ok(())
    })();
    match done {
        Ok(()) => conn.run("COMMIT"),
        Err(error) => {
            conn.rollback();
            Err(error)
        }
    }
}

/// Where a resumed rewrite continues: the table and the last row written.
type RewriteCursor = (String, Option<(Vec<u8>, Vec<u8>)>);

/// Rewrites the planned tables in order, from `cursor` on.
fn run_rewrites(
    conn: &mut Conn,
    schema: &CompiledSchema,
    version: i32,
    rewrites: &[RewritePlan],
    cursor: Option<RewriteCursor>,
    storage: &MariadbStorage,
    opts: &EnsureOptions,
) -> Result<()> {
    let start = cursor
        .as_ref()
        .and_then(|(table, _)| rewrites.iter().position(|r| &r.table == table))
        .unwrap_or(0);
    let mut tally = opts.rewrite_tally(0);
    if tally.observed() {
        let mut total = 0_u64;
        for rewrite in &rewrites[start..] {
            total = total.saturating_add(rewrite::count_rows(conn, &rewrite.table)?);
        }
        tally = opts.rewrite_tally(total);
    }
    let mut after = cursor.and_then(|(_, after)| after);
    for rewrite in &rewrites[start..] {
        let Some(table) = schema.table(&rewrite.table) else {
            continue;
        };
        tally.start(&table.name);
        let now = storage.config().clock.now_ms();
        rewrite::rewrite_table(conn, table, rewrite, version, after.take(), now, &mut tally)?;
    }
    Ok(())
}

/// Finishes the open migration to `target` from its journal (its rewrites
/// need the target's compiled tables: `schema` must be at `target`).
fn roll_forward(
    conn: &mut Conn,
    target: i32,
    schema: &CompiledSchema,
    storage: &MariadbStorage,
    opts: &EnsureOptions,
) -> Result<()> {
    type Journal = (
        String,
        i64,
        Option<String>,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
    );
    let journal: Option<Journal> = conn.first(
        "SELECT `plan`, `next_step`, CAST(`rewrite_table` AS CHAR), `rewrite_after_partition`, \
         `rewrite_after_row_id` FROM `sync_migration_journal` \
         WHERE `target_version` = ? AND `state` <> 'done'",
        (target,),
    )?;
    let Some((plan, next_step, rewrite_table, after_partition, after_row_id)) = journal else {
        return Err(corrupt("migration_journal_missing"));
    };
    let plan = parse_plan(&plan)?;
    run_ddl(
        conn,
        target,
        &plan.statements,
        usize::try_from(next_step).unwrap_or(0),
        storage,
    )?;
    if !plan.rewrites.is_empty() {
        if schema.version != target {
            return Err(Error::new(ErrorCode::SchemaNewerThanCode)
                .detail("stored", target)
                .detail("configured", schema.version)
                .detail("reason", "open_migration"));
        }
        // The stored layouts are still the ones the rows were written with.
        let stored = parse_layouts(read_marker(conn)?.map(|m| m.layouts).as_deref())?;
        let rewrites = rewrite::plans_from_journal(&plan.rewrites, &stored)?;
        let cursor = rewrite_table.map(|table| {
            let after = after_partition.zip(after_row_id);
            (table, after)
        });
        run_rewrites(conn, schema, target, &rewrites, cursor, storage, opts)?;
    }
    // The fence transaction already resolved and installed checkpoints.
    finish(conn, target, &plan.layouts, storage)
}
