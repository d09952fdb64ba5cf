//! The database-side writer fence: function `sync_writer_fence_check()` and
//! trigger `sync_commits_effective_writer_fence` (`tables.md` §4.2, §4.2a,
//! §4.2b) — their text, their catalog state and their installation in the
//! bootstrap transaction.
//!
//! The function names both tables schema-qualified with the storage's
//! schema and runs with `search_path = pg_catalog, pg_temp`, so no name is
//! resolved through the inserting session (a role's own schema or temporary
//! tables cannot shadow the fence). The trigger has its own name: the
//! reference implementation drops and re-creates `sync_commits_writer_fence`
//! on every start, so that name is never created, dropped or replaced here —
//! except that a trigger of that name executing our function is ours from
//! before the rename and is removed once ours stands under the new name.

use sync_core::{FenceTriggerState, Result, TriggerDifference};

use crate::pool::{col, Conn};
use crate::sql::quote_ident;

/// Name of our writer-fence trigger on `sync_commits` (`tables.md` §4.2a).
pub const FENCE_TRIGGER_NAME: &str = "sync_commits_effective_writer_fence";

/// The name this storage installed its trigger under before `tables.md`
/// §4.2a — also the reference implementation's trigger name.
pub const LEGACY_FENCE_TRIGGER_NAME: &str = "sync_commits_writer_fence";

/// Name of the writer-fence function.
pub const FENCE_FUNCTION_NAME: &str = "sync_writer_fence_check";

/// `proconfig` of the fence function (`tables.md` §4.2b).
const FENCE_FUNCTION_CONFIG: &str = "search_path=pg_catalog, pg_temp";

/// Body (`prosrc`) of the writer-fence function of the storage in
/// `schema`, exactly as installed.
pub(crate) fn function_body(schema: &str) -> String {
    let s = quote_ident(schema);
    format!(
        "
DECLARE
  fence integer;
BEGIN
  SELECT max(v) INTO fence FROM (
    SELECT required_writer_version AS v FROM {s}.sync_writer_fence WHERE partition = NEW.partition
    UNION ALL
    SELECT required_writer_version FROM {s}.sync_schema_meta WHERE id = 1) AS f;
  IF fence IS NOT NULL AND (NEW.writer_version IS NULL OR NEW.writer_version < fence) THEN
    RAISE EXCEPTION 'sync.storage.writer_fence_rejected';
  END IF;
  RETURN NEW;
END
"
    )
}

/// `CREATE OR REPLACE FUNCTION "<schema>".sync_writer_fence_check()`. The
/// body contains `;`, so it is sent as its own statement.
pub(crate) fn function_sql(schema: &str) -> String {
    format!(
        "CREATE OR REPLACE FUNCTION {}.{FENCE_FUNCTION_NAME}() RETURNS trigger\n\
         LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $${}$$",
        quote_ident(schema),
        function_body(schema)
    )
}

/// `CREATE TRIGGER sync_commits_effective_writer_fence …`.
pub(crate) fn trigger_sql(schema: &str) -> String {
    let s = quote_ident(schema);
    format!(
        "CREATE TRIGGER {FENCE_TRIGGER_NAME} BEFORE INSERT ON {s}.sync_commits\n\
         FOR EACH ROW EXECUTE FUNCTION {s}.{FENCE_FUNCTION_NAME}()"
    )
}

fn drop_trigger_sql(name: &str, schema: &str) -> String {
    format!(
        "DROP TRIGGER IF EXISTS {name} ON {}.sync_commits",
        quote_ident(schema)
    )
}

/// The catalog state of the fence in the session's current schema: whether
/// `sync_commits` exists, whether the function is current, our trigger's
/// definition as `pg_trigger` holds it (`NULL`s when absent) and whether a
/// trigger of the legacy name executes our function.
const STATE_SQL: &str = "WITH s AS (SELECT \
      to_regclass(quote_ident(current_schema()) || '.sync_commits') AS commits, \
      to_regprocedure(quote_ident(current_schema()) || '.' || $1 || '()') AS fn) \
    SELECT s.commits IS NOT NULL, \
      EXISTS (SELECT 1 FROM pg_proc p WHERE p.oid = s.fn AND p.prosrc = $2 \
              AND p.proconfig = ARRAY[$3::text]), \
      g.tgfoid IS NOT DISTINCT FROM s.fn, g.tgenabled::text, g.tgtype::int4, \
      g.tgqual IS NOT NULL, g.tgnargs::int4, \
      g.tgattr::text <> '' OR g.tgconstraint <> 0, \
      g.oid IS NOT NULL, \
      EXISTS (SELECT 1 FROM pg_trigger l WHERE l.tgrelid = s.commits AND l.tgname = $5 \
              AND l.tgfoid = s.fn) \
    FROM s LEFT JOIN pg_trigger g ON g.tgrelid = s.commits AND g.tgname = $4";

/// `pg_trigger.tgtype` bits (`catalog/pg_trigger.h`).
mod tgtype {
    pub(super) const ROW: i32 = 1 << 0;
    pub(super) const BEFORE: i32 = 1 << 1;
    pub(super) const INSERT: i32 = 1 << 2;
    pub(super) const DELETE: i32 = 1 << 3;
    pub(super) const UPDATE: i32 = 1 << 4;
    pub(super) const TRUNCATE: i32 = 1 << 5;
    pub(super) const INSTEAD: i32 = 1 << 6;
}

/// Our trigger as `pg_trigger` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TriggerRow {
    /// `tgfoid` is our function.
    pub(crate) runs_our_function: bool,
    /// `tgenabled`: `O` (origin) or `A` (always) fire in a normal session.
    pub(crate) enabled: char,
    /// `tgtype`: timing, level and event bits.
    pub(crate) tgtype: i32,
    /// `tgqual` is set (a `WHEN` condition).
    pub(crate) has_condition: bool,
    /// `tgnargs`.
    pub(crate) nargs: i32,
    /// A column list (`UPDATE OF`) or a constraint trigger.
    pub(crate) columns_or_constraint: bool,
}

/// The trigger we install: `BEFORE INSERT … FOR EACH ROW`, no condition,
/// no arguments, no column list, not a constraint trigger.
const EXPECTED_TGTYPE: i32 = tgtype::ROW | tgtype::BEFORE | tgtype::INSERT;

/// The state of a trigger of our name from its whole definition: the
/// function it runs, whether it fires, and timing, level, events and
/// condition against what [`trigger_sql`] creates.
pub(crate) fn trigger_state(row: TriggerRow) -> FenceTriggerState {
    const EVENTS: i32 = tgtype::INSERT | tgtype::DELETE | tgtype::UPDATE | tgtype::TRUNCATE;
    const TIMING: i32 = tgtype::BEFORE | tgtype::INSTEAD;
    let expected = EXPECTED_TGTYPE;
    if !row.runs_our_function {
        return FenceTriggerState::Foreign;
    }
    let difference = if row.tgtype & TIMING != expected & TIMING {
        Some(TriggerDifference::Timing)
    } else if row.tgtype & EVENTS != expected & EVENTS {
        Some(TriggerDifference::Events)
    } else if row.tgtype & tgtype::ROW != expected & tgtype::ROW {
        Some(TriggerDifference::Level)
    } else if row.has_condition {
        Some(TriggerDifference::Condition)
    } else if row.tgtype != expected || row.nargs != 0 || row.columns_or_constraint {
        Some(TriggerDifference::Definition)
    } else {
        None
    };
    match difference {
        Some(difference) => FenceTriggerState::Tampered(difference),
        None if matches!(row.enabled, 'O' | 'A') => FenceTriggerState::Enforced,
        None => FenceTriggerState::Disabled,
    }
}

/// What [`STATE_SQL`] found.
struct Catalog {
    schema: String,
    function_current: bool,
    trigger: FenceTriggerState,
    legacy_ours: bool,
}

fn read_catalog(conn: &mut Conn) -> Result<Catalog> {
    let schema: String = col(&conn.query_one("SELECT current_schema()::text", &[])?, 0)?;
    let row = conn.query_one(
        STATE_SQL,
        &[
            &FENCE_FUNCTION_NAME,
            &function_body(&schema),
            &FENCE_FUNCTION_CONFIG,
            &FENCE_TRIGGER_NAME,
            &LEGACY_FENCE_TRIGGER_NAME,
        ],
    )?;
    let commits_exist: bool = col(&row, 0)?;
    let present: bool = col(&row, 8)?;
    let trigger = if !commits_exist {
        FenceTriggerState::NoCommitTable
    } else if !present {
        FenceTriggerState::Missing
    } else {
        let enabled: Option<String> = col(&row, 3)?;
        trigger_state(TriggerRow {
            runs_our_function: col(&row, 2)?,
            enabled: enabled.and_then(|e| e.chars().next()).unwrap_or('D'),
            tgtype: col::<Option<i32>>(&row, 4)?.unwrap_or(0),
            has_condition: col::<Option<bool>>(&row, 5)?.unwrap_or(false),
            nargs: col::<Option<i32>>(&row, 6)?.unwrap_or(0),
            columns_or_constraint: col::<Option<bool>>(&row, 7)?.unwrap_or(false),
        })
    };
    Ok(Catalog {
        schema,
        function_current: col(&row, 1)?,
        trigger,
        legacy_ours: col(&row, 9)?,
    })
}

/// The state of the fence trigger in the session's current schema, read
/// from the catalog only. A trigger that fires our function while that
/// function is not the current text (`tables.md` §4.2b) is
/// [`FenceTriggerState::Outdated`].
pub(crate) fn state(conn: &mut Conn) -> Result<FenceTriggerState> {
    let catalog = read_catalog(conn)?;
    Ok(match catalog.trigger {
        FenceTriggerState::Enforced if !catalog.function_current => FenceTriggerState::Outdated,
        other => other,
    })
}

/// Installs or repairs the fence inside the bootstrap transaction (after the
/// tables exist): the function when absent or not the current text, our
/// trigger when absent, disabled, executing another function or defined
/// otherwise (timing, events, level, a `WHEN` condition), then the
/// removal of our trigger under its legacy name. A warm start issues no DDL.
pub(crate) fn install(conn: &mut Conn) -> Result<()> {
    let catalog = read_catalog(conn)?;
    let schema = catalog.schema.as_str();
    if !catalog.function_current {
        conn.simple(&function_sql(schema))?;
    }
    match catalog.trigger {
        FenceTriggerState::Enforced | FenceTriggerState::NoCommitTable => {}
        FenceTriggerState::Missing => {
            conn.simple(&trigger_sql(schema))?;
        }
        FenceTriggerState::Disabled
        | FenceTriggerState::Foreign
        | FenceTriggerState::Outdated
        | FenceTriggerState::Tampered(_) => {
            conn.simple(&drop_trigger_sql(FENCE_TRIGGER_NAME, schema))?;
            conn.simple(&trigger_sql(schema))?;
        }
    }
    if catalog.legacy_ours {
        conn.simple(&drop_trigger_sql(LEGACY_FENCE_TRIGGER_NAME, schema))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours() -> TriggerRow {
        TriggerRow {
            runs_our_function: true,
            enabled: 'O',
            tgtype: EXPECTED_TGTYPE,
            has_condition: false,
            nargs: 0,
            columns_or_constraint: false,
        }
    }

    #[test]
    fn only_the_whole_definition_is_enforced() {
        assert_eq!(trigger_state(ours()), FenceTriggerState::Enforced);
        let always = TriggerRow {
            enabled: 'A',
            ..ours()
        };
        assert_eq!(trigger_state(always), FenceTriggerState::Enforced);
        for enabled in ['D', 'R'] {
            let off = TriggerRow { enabled, ..ours() };
            assert_eq!(trigger_state(off), FenceTriggerState::Disabled);
        }
        let other = TriggerRow {
            runs_our_function: false,
            ..ours()
        };
        assert_eq!(trigger_state(other), FenceTriggerState::Foreign);
    }

    #[test]
    fn every_difference_of_the_definition_is_named() {
        use TriggerDifference::*;
        let row = |tgtype: i32| TriggerRow { tgtype, ..ours() };
        for (found, difference) in [
            (row(tgtype::ROW | tgtype::INSERT), Timing),
            (row(tgtype::ROW | tgtype::INSTEAD | tgtype::INSERT), Timing),
            (row(tgtype::ROW | tgtype::BEFORE | tgtype::UPDATE), Events),
            (row(EXPECTED_TGTYPE | tgtype::UPDATE), Events),
            (row(tgtype::BEFORE | tgtype::INSERT), Level),
            (
                TriggerRow {
                    has_condition: true,
                    ..ours()
                },
                Condition,
            ),
            (TriggerRow { nargs: 1, ..ours() }, Definition),
            (
                TriggerRow {
                    columns_or_constraint: true,
                    ..ours()
                },
                Definition,
            ),
        ] {
            assert_eq!(
                trigger_state(found),
                FenceTriggerState::Tampered(difference),
                "{found:?}"
            );
            let disabled = TriggerRow {
                enabled: 'D',
                ..found
            };
            assert_eq!(
                trigger_state(disabled),
                FenceTriggerState::Tampered(difference)
            );
        }
    }
}
