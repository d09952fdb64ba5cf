//! What `ensure_schema` would do, computed without changing anything: the
//! refusals it would raise first (finish or refuse included), then the bump plan (`plan_migration` over
//! the stored layouts and the observed tables) or, at the same version, the
//! legacy-shape upgrade.
//!
//! On a bump the preview also counts the rows of every table it would
//! retire (refused unless named by `--retire` when it holds rows,
//! [`crate::retiring`]) and checks that existing rows keep their identity
//! ([`crate::row_identity`]).
//!
//! The observation is read outside the migration lock, so the preview is
//! exact for a database nobody migrates concurrently. Physical checks of the
//! same-version path (`schema-and-migrations.md` §8) are not previewed: they
//! run at apply time, after the legacy upgrade.

use std::fmt::Write as _;

use serde_json::{json, Value};
use sync_core::{
    resolve_unfinished, CheckpointDeclaration, CompiledSchema, Error, ErrorCode, Resolution,
    ResolvedCheckpoint, SchemaMarker, ServerStorage, UnfinishedResolution,
};
use sync_schema::{LegacyUpgradePlan, MigrationPlan, StoredLayouts};

use crate::error::CliResult;
use crate::escape::pair;
use crate::retiring::{self, Retiring};
use crate::url::Database;

/// What `ensure_schema` is going to do.
#[derive(Debug)]
pub enum Preview {
    /// No marker: create every table.
    Create(MigrationPlan, Vec<ResolvedCheckpoint>),
    /// Stored version below the schema's: the bump transaction, what it
    /// does with unfinished checkpoints of older versions, and the tables
    /// it retires with their rows.
    Bump(MigrationPlan, Vec<ResolvedCheckpoint>, Vec<Retiring>),
    /// Same version: verification, plus the legacy upgrade when one is due.
    Verify(LegacyUpgradePlan),
}

impl Preview {
    /// `create`, `bump` or `verify`.
    pub fn action(&self) -> &'static str {
        match self {
            Self::Create(..) => "create",
            Self::Bump(..) => "bump",
            Self::Verify(_) => "verify",
        }
    }

    /// The plan document of `migrate`'s JSON: the keys of
    /// `MigrationPlan::to_json` (empty lists when verifying) plus `action`,
    /// `legacyUpgrade` (null on a bump, whose plan already rebuilds every
    /// owned index) and `declarations`.
    pub fn to_json(
        &self,
        schema: &CompiledSchema,
        declarations: &[CheckpointDeclaration],
    ) -> Value {
        let mut plan = match self {
            Self::Create(plan, _) | Self::Bump(plan, _, _) => plan.to_json(),
            Self::Verify(legacy) => json!({
                "dialect": legacy.dialect.as_str(),
                "schemaVersion": schema.version,
                "keyCollations": [],
                "retired": [],
                "drops": [],
                "creates": [],
                "rewrites": [],
            }),
        };
        if let Value::Object(map) = &mut plan {
            map.insert("action".to_owned(), json!(self.action()));
            map.insert(
                "retiredRows".to_owned(),
                self.retiring().iter().map(Retiring::to_json).collect(),
            );
            map.insert(
                "legacyUpgrade".to_owned(),
                match self {
                    Self::Verify(legacy) => legacy.to_json(),
                    _ => Value::Null,
                },
            );
            map.insert(
                "unfinished".to_owned(),
                self.resolved()
                    .iter()
                    .map(|r| {
                        json!({
                            "partition": r.checkpoint.partition,
                            "name": r.checkpoint.name,
                            "schemaVersion": r.checkpoint.schema_version,
                            "state": r.checkpoint.state.as_str(),
                            "resolution": r.resolution.as_str(),
                        })
                    })
                    .collect(),
            );
            map.insert(
                "declarations".to_owned(),
                declarations
                    .iter()
                    .map(|d| json!({"partition": d.partition, "name": d.name, "schemaVersion": d.schema_version}))
                    .collect(),
            );
        }
        plan
    }

    /// The unfinished checkpoints of older versions and their resolutions.
    pub fn resolved(&self) -> &[ResolvedCheckpoint] {
        match self {
            Self::Create(_, resolved) | Self::Bump(_, resolved, _) => resolved,
            Self::Verify(_) => &[],
        }
    }

    /// The tables a bump retires, with their rows.
    pub fn retiring(&self) -> &[Retiring] {
        match self {
            Self::Bump(_, _, retiring) => retiring,
            Self::Create(..) | Self::Verify(_) => &[],
        }
    }

    /// The plan as a commented SQL script.
    pub fn to_text(&self) -> String {
        let mut text = self.script();
        for r in self.retiring() {
            r.write_text(&mut text);
        }
        for r in self.resolved() {
            let _ = writeln!(
                text,
                "-- unfinished checkpoint {} (version {}, {}): {}",
                pair(&r.checkpoint.partition, &r.checkpoint.name),
                r.checkpoint.schema_version,
                r.checkpoint.state.as_str(),
                match r.resolution {
                    Resolution::Carry => "carried to the new version, progress reset",
                    Resolution::Abandon => "abandoned (deleted)",
                }
            );
        }
        text
    }

    fn script(&self) -> String {
        match self {
            Self::Create(plan, _) | Self::Bump(plan, _, _) => plan.to_string(),
            Self::Verify(legacy) if legacy.is_empty() => {
                "-- same version: layouts and physical tables are verified; nothing to change\n"
                    .to_owned()
            }
            Self::Verify(legacy) => {
                let mut text =
                    "-- same version: legacy shapes are upgraded, then verified\n".to_owned();
                let _ = write!(text, "{legacy}");
                text
            }
        }
    }
}

/// Previews `ensure_schema(schema, declarations)` on `db`; `retire` are the
/// tables the operator lets a bump retire with their rows (`--retire`).
pub fn preview(
    db: &Database,
    schema: &CompiledSchema,
    marker: Option<&SchemaMarker>,
    layouts: &StoredLayouts,
    declarations: &[CheckpointDeclaration],
    resolutions: &[UnfinishedResolution],
    retire: &[String],
) -> CliResult<Preview> {
    for declaration in declarations {
        sync_core::validate::declaration(declaration, schema.version)?;
    }
    check_pending(db.storage(), schema.version, declarations)?;
    let stored = marker.map(|m| m.schema_version);
    let configured = i64::from(schema.version);
    let names: Vec<String> = schema.tables.iter().map(|t| t.name.clone()).collect();
    match stored {
        Some(stored) if stored > configured => Err(Error::new(ErrorCode::SchemaNewerThanCode)
            .detail("stored", stored)
            .detail("configured", configured)
            .into()),
        Some(stored) if stored == configured => {
            sync_schema::compare_same_version(schema, layouts)?;
            let observed = db.observe_tables(&names)?;
            Ok(Preview::Verify(sync_schema::plan_legacy_upgrade(
                schema,
                &observed,
                db.dialect(),
            )))
        }
        _ => {
            let observed = db.observe_tables(&names)?;
            let resolved = resolve_unfinished(
                &db.storage().list_unfinished_checkpoints(schema.version)?,
                resolutions,
            )?;
            let plan = sync_schema::plan_migration(schema, layouts, &observed, db.dialect())?;
            if stored.is_none() {
                return Ok(Preview::Create(plan, resolved));
            }
            let retiring = retiring::count(db, &plan)?;
            retiring::check(&retiring, retire)?;
            crate::row_identity::check(db.storage(), schema, layouts, &observed)?;
            Ok(Preview::Bump(plan, resolved, retiring))
        }
    }
}

/// The startup check of `ensure_schema`: every pending checkpoint at the
/// version must be declared (`sync.storage.checkpoint_incomplete`).
fn check_pending(
    storage: &dyn ServerStorage,
    version: i32,
    declarations: &[CheckpointDeclaration],
) -> CliResult<()> {
    let undeclared = storage
        .list_pending_checkpoints(version)?
        .into_iter()
        .find(|key| {
            !declarations.iter().any(|d| {
                d.partition == key.partition && d.name == key.name && d.schema_version == version
            })
        });
    match undeclared {
        Some(key) => Err(Error::new(ErrorCode::CheckpointIncomplete)
            .detail("partition", key.partition)
            .detail("name", key.name)
            .into()),
        None => Ok(()),
    }
}
