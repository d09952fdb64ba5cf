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

use sync_core::{FenceTriggerState, Result};

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
/// `sync_commits` exists, whether the function is current,
/// the state of our trigger (`NULL` when absent) and whether a trigger of
/// the legacy name executes our function.
const STATE_SQL: &str = "WITH s AS (SELECT \
      to_regclass(quote_ident(current_schema()) || '.sync_commits') AS commits, \
      to_regprocedure(quote_ident(current_schema()) || '.' || $1 || '()') AS fn) \
    SELECT s.commits IS NOT NULL, \
      EXISTS (SELECT 1 FROM pg_proc p WHERE p.oid = s.fn AND p.prosrc = $2 \
              AND p.proconfig = ARRAY[$3::text]), \
      (SELECT CASE WHEN g.tgfoid IS DISTINCT FROM s.fn THEN 'foreign' \
                   WHEN g.tgenabled IN ('O', 'A') THEN 'enabled' ELSE 'disabled' END \
         FROM pg_trigger g WHERE g.tgrelid = s.commits AND g.tgname = $4), \
      EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = s.commits AND g.tgname = $5 \
              AND g.tgfoid = s.fn) \
    FROM s";

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
    let state: Option<String> = col(&row, 2)?;
    let trigger = match (commits_exist, state.as_deref()) {
        (false, _) => FenceTriggerState::NoCommitTable,
        (true, None) => FenceTriggerState::Missing,
        (true, Some("enabled")) => FenceTriggerState::Enforced,
        (true, Some("disabled")) => FenceTriggerState::Disabled,
        (true, Some(_)) => FenceTriggerState::Foreign,
    };
    Ok(Catalog {
        schema,
        function_current: col(&row, 1)?,
        trigger,
        legacy_ours: col(&row, 3)?,
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
/// trigger when absent, disabled or executing another function, then the
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
        FenceTriggerState::Disabled | FenceTriggerState::Foreign | FenceTriggerState::Outdated => {
            conn.simple(&drop_trigger_sql(FENCE_TRIGGER_NAME, schema))?;
            conn.simple(&trigger_sql(schema))?;
        }
    }
    if catalog.legacy_ours {
        conn.simple(&drop_trigger_sql(LEGACY_FENCE_TRIGGER_NAME, schema))?;
    }
    Ok(())
}
