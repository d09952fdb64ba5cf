//! `ensure_schema` (`schema-and-migrations.md` §9): declaration validation,
//! the memoized fast path, the checkpoint startup check, and the three
//! branches — newer database, same version (layouts, legacy upgrade,
//! physical checks) and the bump transaction (§9.1).

use rusqlite::{Connection, OptionalExtension};
use sync_core::{
    bump_resolutions, CheckpointDeclaration, CheckpointKey, CompiledSchema, EnsureOptions,
    EnsureOutcome, Error, ErrorCode, Resolution, Result,
};
use sync_schema::{
    check_physical, compare_same_version, layouts_json, parse_layouts, plan_legacy_upgrade,
    plan_migration, ObservedTable, ObservedTables, StoredLayouts,
};

use crate::checkpoints;
use crate::ddl;
use crate::errors::DbResultExt;
use crate::introspect::observe_schema;
use crate::pools::{begin_immediate, commit, rollback, with_temp_files, Pools};
use crate::seam;

/// The stored marker: version and layouts text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Marker {
    pub(crate) version: i64,
    pub(crate) layouts: Option<String>,
}

/// Reads the marker row.
pub(crate) fn read_marker(conn: &Connection) -> Result<Option<Marker>> {
    seam::cached(
        conn,
        "SELECT schema_version, layouts FROM sync_schema_meta WHERE id = 1",
    )
    .db()?
    .query_row([], |r| {
        Ok(Marker {
            version: r.get(0)?,
            layouts: r.get(1)?,
        })
    })
    .optional()
    .db()
}

/// Step 4: every pending checkpoint at the version must be declared here.
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

/// Steps 3–5 (everything after the memo check); `now_ms` stamps installed declarations.
pub(crate) fn run(
    pools: &Pools,
    schema: &CompiledSchema,
    opts: &EnsureOptions,
    now_ms: impl Fn() -> i64,
) -> Result<EnsureOutcome> {
    let version = i64::from(schema.version);
    let mut restarted = false;
    loop {
        let (marker, pending) = pools.read_snapshot(|conn| {
            Ok((
                read_marker(conn)?,
                checkpoints::list_pending(conn, schema.version)?,
            ))
        })?;
        check_pending(&pending, &opts.declarations, schema.version)?;
        match marker {
            Some(m) if m.version > version => {
                return Err(Error::new(ErrorCode::SchemaNewerThanCode)
                    .detail("stored", m.version)
                    .detail("configured", schema.version));
            }
            Some(m) if m.version == version => {
                return same_version(pools, schema, m.layouts.as_deref())
            }
            _ => match bump(pools, schema, opts, &now_ms)? {
                BumpOutcome::Done => return Ok(EnsureOutcome::Migrated),
                BumpOutcome::Raced if !restarted => restarted = true,
                BumpOutcome::Raced => {
                    return Err(Error::new(ErrorCode::Busy).detail("reason", "marker_changed"))
                }
            },
        }
    }
}

/// Step 5b: exact layouts, one-time legacy upgrade, physical checks.
fn same_version(
    pools: &Pools,
    schema: &CompiledSchema,
    layouts: Option<&str>,
) -> Result<EnsureOutcome> {
    let stored = parse_layouts(layouts)?;
    compare_same_version(schema, &stored)?;
    let observed = pools.read_snapshot(|conn| observe_schema(conn, schema))?;
    let (observed, outcome) = if plan_legacy_upgrade(schema, &observed, crate::DIALECT).is_empty() {
        (observed, EnsureOutcome::Verified)
    } else {
        (legacy_upgrade(pools, schema)?, EnsureOutcome::Upgraded)
    };
    for table in &schema.tables {
        let physical = observed
            .iter()
            .find(|t| t.name == table.name)
            .cloned()
            .unwrap_or_else(|| ObservedTable::absent(&table.name));
        check_physical(table, &physical, crate::DIALECT)?;
    }
    Ok(outcome)
}

/// §13: re-detects under the migration lock, upgrades, commits; returns the
/// state observed after the upgrade.
fn legacy_upgrade(pools: &Pools, schema: &CompiledSchema) -> Result<ObservedTables> {
    pools.write_ddl(|conn| {
        let observed = observe_schema(conn, schema)?;
        let plan = plan_legacy_upgrade(schema, &observed, crate::DIALECT);
        for statement in plan.statements() {
            ddl::execute(conn, statement)?;
        }
        if plan.is_empty() {
            Ok(observed)
        } else {
            observe_schema(conn, schema)
        }
    })
}

enum BumpOutcome {
    Done,
    /// Another process moved the marker to `≥ V` before the lock was held.
    Raced,
}

/// §9.1: the bump transaction on the writer under `BEGIN IMMEDIATE`.
fn bump(
    pools: &Pools,
    schema: &CompiledSchema,
    opts: &EnsureOptions,
    now_ms: &dyn Fn() -> i64,
) -> Result<BumpOutcome> {
    let conn = pools.writer()?;
    with_temp_files(&conn, || {
        begin_immediate(&conn)?;
        opts.notify_migration_locked();
        match bump_locked(&conn, schema, opts, now_ms) {
            Ok(BumpOutcome::Done) => {
                commit(&conn)?;
                conn.flush_prepared_statement_cache();
                Ok(BumpOutcome::Done)
            }
            Ok(BumpOutcome::Raced) => {
                rollback(&conn);
                Ok(BumpOutcome::Raced)
            }
            Err(error) => {
                rollback(&conn);
                Err(error)
            }
        }
    })
}

fn bump_locked(
    conn: &Connection,
    schema: &CompiledSchema,
    opts: &EnsureOptions,
    now_ms: &dyn Fn() -> i64,
) -> Result<BumpOutcome> {
    let version = schema.version;
    let marker = read_marker(conn)?;
    if marker
        .as_ref()
        .is_some_and(|m| m.version >= i64::from(version))
    {
        return Ok(BumpOutcome::Raced);
    }
    check_pending(
        &checkpoints::list_pending(conn, version)?,
        &opts.declarations,
        version,
    )?;
    let resolved = bump_resolutions(&checkpoints::list_unfinished(conn, version)?, opts)?;
    let stored = match &marker {
        Some(m) => parse_layouts(m.layouts.as_deref())?,
        None => StoredLayouts::new(),
    };
    let observed = observe_schema(conn, schema)?;
    let plan = plan_migration(schema, &stored, &observed, crate::DIALECT)?;
    for statement in plan.statements() {
        ddl::execute(conn, statement)?;
    }
    let rewrites: Vec<_> = plan
        .needed_rewrites()
        .filter_map(|r| schema.table(&r.table).map(|t| (t, r)))
        .collect();
    let mut tally = opts.rewrite_tally(0);
    if tally.observed() {
        let mut total = 0_u64;
        for (_, rewrite) in &rewrites {
            total = total.saturating_add(ddl::count_rows(conn, rewrite)?);
        }
        tally = opts.rewrite_tally(total);
    }
    for (table, rewrite) in rewrites {
        tally.start(&table.name);
        ddl::rewrite_rows(conn, table, rewrite, &mut tally)?;
    }
    write_marker(conn, schema)?;
    let installed_at = now_ms();
    for r in &resolved {
        let (partition, name) = (&r.checkpoint.partition, &r.checkpoint.name);
        match r.resolution {
            Resolution::Carry => checkpoints::carry(conn, partition, name, version, installed_at)?,
            Resolution::Abandon => checkpoints::abandon(conn, partition, name)?,
        }
    }
    for d in &opts.declarations {
        checkpoints::install(conn, &d.partition, &d.name, version, installed_at)?;
    }
    Ok(BumpOutcome::Done)
}

/// Step 11: marker, layouts and the database-wide fence `max(existing, V)`.
fn write_marker(conn: &Connection, schema: &CompiledSchema) -> Result<()> {
    seam::cached(conn,
        "INSERT INTO sync_schema_meta (id, schema_version, layouts, required_writer_version) \
         VALUES (1, ?1, ?2, max(?1, coalesce((SELECT required_writer_version FROM sync_schema_meta WHERE id = 1), ?1))) \
         ON CONFLICT (id) DO UPDATE SET schema_version = excluded.schema_version, layouts = excluded.layouts, \
         required_writer_version = max(coalesce(sync_schema_meta.required_writer_version, 0), excluded.required_writer_version)",
    )
    .db()?
    .execute((schema.version, layouts_json(schema)))
    .db()?;
    Ok(())
}
