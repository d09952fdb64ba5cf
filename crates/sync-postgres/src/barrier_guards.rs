//! Guard triggers on the migration barrier's own tables: "a fence is never
//! lowered" and "a checkpoint is activated only by the storage" as rules of
//! the database, like the writer fence itself (`docs/decisions.md`, *The
//! barrier's rules in the database*).
//!
//! - `sync_writer_fence`: no update to a lower value or another partition,
//!   no delete.
//! - `sync_schema_meta`: once the database-wide fence is set, no update to
//!   a lower value or NULL, no delete.
//! - `sync_backfill_checkpoints`: a row is inserted only as a fresh
//!   `declared` one (epoch, watermark and observed rows 0); an activated
//!   row is never changed or deleted; no update moves a row to another key,
//!   lowers its owner epoch or moves its watermark back within one schema
//!   version; an activation keeps the epoch and version, needs the
//!   effective fence at the version and a watermark within the log; and
//!   activations and deletions need the privileges of the role owning the
//!   table (the role that set the storage up), so a role granted only DML
//!   cannot make them. The database cannot see the sources an activation
//!   certifies clean, so who activates is the rule it can enforce.
//!
//! Each function names its tables schema-qualified and runs with
//! `search_path = pg_catalog, pg_temp` (`tables.md` §4.2b); each raises
//! `sync.storage.barrier_write_refused`.

use sync_core::Result;

use crate::pool::{col, Conn};
use crate::sql::quote_ident;

/// The message every guard raises.
pub(crate) const GUARD_MESSAGE: &str = "sync.storage.barrier_write_refused";

/// `proconfig` of every guard function.
const GUARD_CONFIG: &str = "search_path=pg_catalog, pg_temp";

/// One guard: a function and the trigger on `table` that runs it.
#[derive(Debug, Clone, Copy)]
pub struct Guard {
    /// Name of the function and of its trigger.
    pub name: &'static str,
    /// The guarded table.
    pub table: &'static str,
    /// Timing and events of the trigger (`BEFORE UPDATE OR DELETE`).
    pub events: &'static str,
    body: fn(&str) -> String,
}

/// Every guard.
pub const GUARDS: &[Guard] = &[
    Guard {
        name: "sync_writer_fence_guard",
        table: "sync_writer_fence",
        events: "BEFORE UPDATE OR DELETE",
        body: writer_fence_body,
    },
    Guard {
        name: "sync_schema_meta_guard",
        table: "sync_schema_meta",
        events: "BEFORE UPDATE OR DELETE",
        body: schema_meta_body,
    },
    Guard {
        name: "sync_backfill_checkpoints_guard",
        table: "sync_backfill_checkpoints",
        events: "BEFORE INSERT OR UPDATE OR DELETE",
        body: checkpoints_body,
    },
];

fn writer_fence_body(_schema: &str) -> String {
    "
BEGIN
  IF TG_OP = 'DELETE' OR NEW.partition IS DISTINCT FROM OLD.partition
     OR NEW.required_writer_version IS NULL
     OR NEW.required_writer_version < OLD.required_writer_version THEN
    RAISE EXCEPTION 'sync.storage.barrier_write_refused';
  END IF;
  RETURN NEW;
END
"
    .to_owned()
}

fn schema_meta_body(_schema: &str) -> String {
    "
BEGIN
  IF OLD.required_writer_version IS NOT NULL AND (TG_OP = 'DELETE'
     OR NEW.required_writer_version IS NULL
     OR NEW.required_writer_version < OLD.required_writer_version) THEN
    RAISE EXCEPTION 'sync.storage.barrier_write_refused';
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END
"
    .to_owned()
}

fn checkpoints_body(schema: &str) -> String {
    let s = quote_ident(schema);
    format!(
        "
DECLARE
  owner_privileges boolean;
  fence integer;
  head bigint;
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.state <> 'declared' OR NEW.owner_epoch <> 0 OR NEW.watermark <> 0
       OR NEW.observed_rows <> 0 THEN
      RAISE EXCEPTION 'sync.storage.barrier_write_refused';
    END IF;
    RETURN NEW;
  END IF;
  IF OLD.state = 'activated' THEN
    RAISE EXCEPTION 'sync.storage.barrier_write_refused';
  END IF;
  SELECT pg_has_role(current_user, c.relowner, 'USAGE') INTO owner_privileges
    FROM pg_class c WHERE c.oid = TG_RELID;
  IF TG_OP = 'DELETE' THEN
    IF NOT owner_privileges THEN
      RAISE EXCEPTION 'sync.storage.barrier_write_refused';
    END IF;
    RETURN OLD;
  END IF;
  IF NEW.partition IS DISTINCT FROM OLD.partition OR NEW.name IS DISTINCT FROM OLD.name
     OR NEW.owner_epoch < OLD.owner_epoch
     OR (NEW.watermark < OLD.watermark AND NEW.schema_version = OLD.schema_version) THEN
    RAISE EXCEPTION 'sync.storage.barrier_write_refused';
  END IF;
  IF NEW.state = 'activated' THEN
    SELECT max(v) INTO fence FROM (
      SELECT required_writer_version AS v FROM {s}.sync_writer_fence WHERE partition = NEW.partition
      UNION ALL
      SELECT required_writer_version FROM {s}.sync_schema_meta WHERE id = 1) AS f;
    SELECT max_commit_seq INTO head FROM {s}.sync_partitions WHERE partition = NEW.partition;
    IF NOT owner_privileges OR NEW.owner_epoch <> OLD.owner_epoch
       OR NEW.schema_version <> OLD.schema_version
       OR coalesce(fence, 0) < NEW.schema_version
       OR NEW.watermark > coalesce(head, 0) THEN
      RAISE EXCEPTION 'sync.storage.barrier_write_refused';
    END IF;
  END IF;
  RETURN NEW;
END
"
    )
}

impl Guard {
    /// The function body (`prosrc`) for the storage in `schema`.
    pub fn body(&self, schema: &str) -> String {
        (self.body)(schema)
    }

    fn function_sql(&self, schema: &str) -> String {
        format!(
            "CREATE OR REPLACE FUNCTION {}.{}() RETURNS trigger\n\
             LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $${}$$",
            quote_ident(schema),
            self.name,
            self.body(schema)
        )
    }

    fn trigger_sql(&self, schema: &str) -> String {
        let s = quote_ident(schema);
        format!(
            "CREATE TRIGGER {name} {events} ON {s}.{table}\n\
             FOR EACH ROW EXECUTE FUNCTION {s}.{name}()",
            name = self.name,
            events = self.events,
            table = self.table,
        )
    }

    fn drop_trigger_sql(&self, schema: &str) -> String {
        format!(
            "DROP TRIGGER IF EXISTS {} ON {}.{}",
            self.name,
            quote_ident(schema),
            self.table
        )
    }
}

/// Per guard: whether its function is the current text, and whether its
/// trigger exists, fires (`O`/`A`) and runs that function.
const STATE_SQL: &str = "SELECT \
      EXISTS (SELECT 1 FROM pg_proc p WHERE p.oid = to_regprocedure(quote_ident(current_schema()) || '.' || $1 || '()') \
              AND p.prosrc = $2 AND p.proconfig = ARRAY[$3::text]), \
      EXISTS (SELECT 1 FROM pg_trigger g \
              WHERE g.tgrelid = to_regclass(quote_ident(current_schema()) || '.' || $4) \
                AND g.tgname = $1 AND g.tgenabled IN ('O', 'A') \
                AND g.tgfoid = to_regprocedure(quote_ident(current_schema()) || '.' || $1 || '()'))";

/// Installs or repairs every guard inside the bootstrap transaction (after
/// the tables exist): the function when absent or not the current text,
/// the trigger when absent, disabled or running another function. A warm
/// start issues no DDL.
pub(crate) fn install(conn: &mut Conn) -> Result<()> {
    let schema: String = col(&conn.query_one("SELECT current_schema()::text", &[])?, 0)?;
    for guard in GUARDS {
        let row = conn.query_one(
            STATE_SQL,
            &[
                &guard.name,
                &guard.body(&schema),
                &GUARD_CONFIG,
                &guard.table,
            ],
        )?;
        let function_current: bool = col(&row, 0)?;
        let trigger_current: bool = col(&row, 1)?;
        if !function_current {
            conn.simple(&guard.function_sql(&schema))?;
        }
        if !trigger_current {
            conn.simple(&guard.drop_trigger_sql(&schema))?;
            conn.simple(&guard.trigger_sql(&schema))?;
        }
    }
    Ok(())
}
