//! The migration transactions (`schema-and-migrations.md` §9.1, §13): the
//! bump and the same-version legacy upgrade. Both start with
//! `SET LOCAL lock_timeout` and `LOCK TABLE sync_partitions IN EXCLUSIVE
//! MODE` before any read or DDL, so every writer (aware or not) blocks at
//! its first partition statement while plain reads continue.

use postgres::types::ToSql;
use sync_core::{bump_resolutions, CompiledSchema, EnsureOptions, Resolution, Result};
use sync_schema::{layouts_json, parse_layouts, plan_legacy_upgrade, plan_migration, Statement};

use crate::citus;
use crate::ensure::check_pending;
use crate::instance::{Finish, PostgresStorage};
use crate::introspect::{names_with_internal, observe};
use crate::pool::Conn;
use crate::rewrites::{count_rows, rewrite_table};
use crate::session::Isolation;
use crate::{checkpoints, marker};

/// How a bump attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BumpOutcome {
    /// Migrated and committed.
    Done,
    /// Another process reached the version first; nothing was done.
    Raced,
}

/// `SET LOCAL lock_timeout` and the migration lock.
pub(crate) fn take_migration_lock(conn: &mut Conn, timeout_ms: u64) -> Result<()> {
    conn.simple(&format!(
        "SET LOCAL lock_timeout = {timeout_ms}; LOCK TABLE sync_partitions IN EXCLUSIVE MODE"
    ))
    .map(|_| ())
}

/// Runs one planned statement (DDL through the simple protocol, statements
/// with parameters through the extended one).
fn run_statement(conn: &mut Conn, statement: &Statement) -> Result<()> {
    if statement.params.is_empty() {
        return conn.simple(&statement.sql).map(|_| ());
    }
    let params: Vec<&(dyn ToSql + Sync)> = statement
        .params
        .iter()
        .map(|p| p as &(dyn ToSql + Sync))
        .collect();
    conn.execute(&statement.sql, &params).map(|_| ())
}

/// The bump transaction of §9.1.
pub(crate) fn bump(
    storage: &PostgresStorage,
    schema: &CompiledSchema,
    opts: &EnsureOptions,
) -> Result<BumpOutcome> {
    let config = storage.config();
    storage.in_transaction(Isolation::ReadCommitted, |conn| {
        take_migration_lock(conn, config.migration_lock_timeout_ms)?;
        if storage.is_citus() {
            citus::apply_ddl_settings(conn)?;
        }
        opts.notify_migration_locked();
        let stored = marker::read(conn)?;
        if stored
            .as_ref()
            .is_some_and(|m| m.schema_version >= i64::from(schema.version))
        {
            return Ok(Finish::Rollback(BumpOutcome::Raced));
        }
        check_pending(
            &checkpoints::pending(conn, schema.version)?,
            &opts.declarations,
            schema.version,
        )?;
        let resolved = bump_resolutions(&checkpoints::unfinished(conn, schema.version)?, opts)?;
        let layouts = parse_layouts(stored.as_ref().map(|m| m.layouts.as_str()))?;
        let mut names: Vec<String> = schema.tables.iter().map(|t| t.name.clone()).collect();
        names = names_with_internal(names);
        let observed = observe(conn, &names)?;
        let plan = plan_migration(schema, &layouts, &observed, crate::DIALECT)?;
        for statement in plan.statements() {
            run_statement(conn, statement)?;
        }
        if storage.is_citus() {
            citus::distribute_new_tables(conn)?;
        }
        let rewrites: Vec<_> = plan
            .needed_rewrites()
            .filter_map(|r| schema.table(&r.table).map(|t| (t, r)))
            .collect();
        let mut tally = opts.rewrite_tally(0);
        if tally.observed() {
            let mut total = 0_u64;
            for (_, rewrite) in &rewrites {
                total = total.saturating_add(count_rows(conn, rewrite)?);
            }
            tally = opts.rewrite_tally(total);
        }
        for (table, rewrite) in rewrites {
            tally.start(&table.name);
            rewrite_table(conn, table, rewrite, &mut tally)?;
        }
        marker::write(conn, schema.version, &layouts_json(schema))?;
        let now = config.clock.now_ms();
        for r in &resolved {
            let (partition, name) = (&r.checkpoint.partition, &r.checkpoint.name);
            match r.resolution {
                Resolution::Carry => {
                    checkpoints::carry(conn, partition, name, schema.version, now)?;
                }
                Resolution::Abandon => checkpoints::abandon(conn, partition, name)?,
            }
        }
        for declaration in &opts.declarations {
            checkpoints::install(conn, declaration, now)?;
        }
        Ok(Finish::Commit(BumpOutcome::Done))
    })
}

/// The same-version legacy upgrade (§13): under the migration lock,
/// re-detect, convert key collations and rebuild legacy-shaped indexes.
/// Marker, layouts and fences are unchanged.
pub(crate) fn legacy_upgrade(storage: &PostgresStorage, schema: &CompiledSchema) -> Result<()> {
    let timeout = storage.config().migration_lock_timeout_ms;
    storage.in_transaction(Isolation::ReadCommitted, |conn| {
        take_migration_lock(conn, timeout)?;
        if storage.is_citus() {
            citus::apply_ddl_settings(conn)?;
        }
        let names = names_with_internal(schema.tables.iter().map(|t| t.name.clone()));
        let observed = observe(conn, &names)?;
        let plan = plan_legacy_upgrade(schema, &observed, crate::DIALECT);
        for statement in plan.statements() {
            run_statement(conn, statement)?;
        }
        Ok(Finish::Commit(()))
    })
}
