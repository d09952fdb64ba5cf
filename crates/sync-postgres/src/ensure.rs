//! `ensure_schema` (`schema-and-migrations.md` §9, `rfc0007-migration-barrier.md`
//! §6): validation, memo fast path, base DDL, the marker/pending snapshot,
//! the startup checkpoint check, and the branch to the same-version checks
//! or the bump transaction.

use std::sync::Arc;

use sync_core::{
    CheckpointDeclaration, CheckpointKey, CompiledSchema, EnsureOptions, EnsureOutcome, Error,
    ErrorCode, Result,
};
use sync_schema::{
    check_physical, compare_same_version, layouts_json, parse_layouts, plan_legacy_upgrade,
};

use crate::instance::PostgresStorage;
use crate::introspect::{names_with_internal, observe};
use crate::migrate::{self, BumpOutcome};
use crate::state::Ensured;
use crate::{checkpoints, marker};

/// Memo key: layouts, materialization flags and declared indexes.
pub(crate) fn fingerprint(schema: &CompiledSchema) -> String {
    let mut text = layouts_json(schema);
    for table in &schema.tables {
        text.push_str(&format!("\n{:?}|{}|", table.name, table.materialize));
        for index in &table.indexes {
            text.push_str(&format!(
                "{:?}{:?}{};",
                index.name, index.columns, index.unique
            ));
        }
    }
    text
}

/// Step 4: every pending `(partition, name)` at the version must be declared.
pub(crate) fn check_pending(
    pending: &[CheckpointKey],
    declarations: &[CheckpointDeclaration],
    version: i32,
) -> Result<()> {
    let undeclared = pending.iter().find(|key| {
        !declarations.iter().any(|d| {
            d.partition == key.partition && d.name == key.name && d.schema_version == version
        })
    });
    match undeclared {
        Some(key) => Err(Error::new(ErrorCode::CheckpointIncomplete)
            .detail("partition", &key.partition)
            .detail("name", &key.name)),
        None => Ok(()),
    }
}

/// The whole algorithm; on error nothing is memoized.
pub(crate) fn ensure_schema(
    storage: &PostgresStorage,
    schema: &CompiledSchema,
    opts: &EnsureOptions,
) -> Result<EnsureOutcome> {
    let _serialized = storage.ensure_guard();
    let fingerprint = fingerprint(schema);
    if storage
        .ensured()
        .is_some_and(|e| e.version == schema.version && e.fingerprint == fingerprint)
    {
        return Ok(EnsureOutcome::Verified);
    }
    storage.bootstrap()?;
    let mut restarted = false;
    let outcome = loop {
        let (stored, pending) = storage
            .with_snapshot(|c| Ok((marker::read(c)?, checkpoints::pending(c, schema.version)?)))?;
        check_pending(&pending, &opts.declarations, schema.version)?;
        let version = i64::from(schema.version);
        match stored {
            Some(m) if m.schema_version > version => {
                return Err(Error::new(ErrorCode::SchemaNewerThanCode)
                    .detail("stored", m.schema_version)
                    .detail("configured", schema.version));
            }
            Some(m) if m.schema_version == version => {
                break same_version(storage, schema, &m.layouts)?;
            }
            _ => match migrate::bump(storage, schema, opts)? {
                BumpOutcome::Done => break EnsureOutcome::Migrated,
                BumpOutcome::Raced if !restarted => restarted = true,
                BumpOutcome::Raced => return Err(Error::new(ErrorCode::Busy)),
            },
        }
    };
    storage.set_ensured(Arc::new(Ensured::new(
        Arc::new(schema.clone()),
        fingerprint,
    )));
    Ok(outcome)
}

/// Step 5b: exact layouts, the one-time legacy upgrade when a legacy shape is
/// present, then the physical checks. Writes nothing otherwise.
fn same_version(
    storage: &PostgresStorage,
    schema: &CompiledSchema,
    layouts: &str,
) -> Result<EnsureOutcome> {
    let stored = parse_layouts(Some(layouts))?;
    compare_same_version(schema, &stored)?;
    let names = names_with_internal(schema.tables.iter().map(|t| t.name.clone()));
    let observed = storage.with_snapshot(|c| observe(c, &names))?;
    let (observed, outcome) = if plan_legacy_upgrade(schema, &observed, crate::DIALECT).is_empty() {
        (observed, EnsureOutcome::Verified)
    } else {
        migrate::legacy_upgrade(storage, schema)?;
        (
            storage.with_snapshot(|c| observe(c, &names))?,
            EnsureOutcome::Upgraded,
        )
    };
    for table in &schema.tables {
        let physical = observed
            .get(&table.name)
            .cloned()
            .unwrap_or_else(|| sync_schema::ObservedTable::absent(table.name.clone()));
        check_physical(table, &physical, crate::DIALECT)?;
    }
    Ok(outcome)
}
