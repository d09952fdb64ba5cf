//! The migration preflight's shape probe (`docs/design/mariadb.md` §6.5,
//! §10.3). InnoDB refuses a table whose row could exceed its inline limit
//! (1118) or a key longer than its limit (1071) only when the DDL runs —
//! and DDL commits, so a bump that met the refusal after its fence
//! transaction would leave the writers fenced at a version whose tables
//! cannot be built. The preflight therefore builds every table the plan
//! creates or alters, in its final shape with its declared indexes, as a
//! `TEMPORARY` table of this session (which InnoDB checks the same way and
//! which commits nothing), drops it, and refuses the bump before any write
//! when InnoDB refuses the shape.

use sync_core::{BackendCause, CompiledSchema, CompiledTable, Error, ErrorCode, Result};
use sync_schema::MigrationPlan;

use crate::dialect::quote_ident;
use crate::pool::Conn;
use crate::DIALECT;

/// The name of the probe table (temporary, this session only).
const PROBE_TABLE: &str = "_sync_shape_probe";

/// Builds and drops, as a temporary table, the final shape of every table
/// of `schema` that `plan` creates or alters; refuses with
/// `sync.storage.migration_refused` (`reason = physical_limit`, `table`)
/// the first shape InnoDB refuses.
pub(crate) fn probe_shapes(
    conn: &mut Conn,
    schema: &CompiledSchema,
    plan: &MigrationPlan,
) -> Result<()> {
    for table in &schema.tables {
        if touches(plan, &table.name) {
            probe(conn, table)?;
        }
    }
    Ok(())
}

/// Whether a create statement of `plan` names `table` (a table created,
/// a column added, an index created). A statement that only names a
/// column spelled like the table probes one table too many, never one too
/// few.
fn touches(plan: &MigrationPlan, table: &str) -> bool {
    let quoted = quote_ident(table);
    plan.creates.iter().any(|s| s.sql.contains(&quoted))
}

fn probe(conn: &mut Conn, table: &CompiledTable) -> Result<()> {
    let mut shape = table.clone();
    shape.name = PROBE_TABLE.to_owned();
    let mut statements = vec![DIALECT.create_table_sql(&shape).replacen(
        "CREATE TABLE",
        "CREATE TEMPORARY TABLE",
        1,
    )];
    for index in &shape.indexes {
        statements.extend(DIALECT.create_index_statements(&shape, index));
    }
    let drop = format!(
        "DROP TEMPORARY TABLE IF EXISTS {}",
        quote_ident(PROBE_TABLE)
    );
    conn.run(&drop)?;
    let built = statements.iter().try_for_each(|sql| conn.run(sql));
    let dropped = conn.run(&drop);
    match built {
        Err(error) if error.cause() == Some(BackendCause::TooLarge) => {
            Err(Error::new(ErrorCode::MigrationRefused)
                .detail("reason", "physical_limit")
                .detail("table", &table.name)
                .source_error(error))
        }
        Err(error) => Err(error),
        Ok(()) => dropped,
    }
}
