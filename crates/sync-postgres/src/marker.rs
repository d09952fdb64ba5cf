//! The schema marker row (`tables.md` §3.1).

use sync_core::{Result, SchemaMarker};

use crate::pool::{col, Conn};

const READ_SQL: &str =
    "SELECT schema_version::int8, layouts, required_writer_version::int4 FROM sync_schema_meta WHERE id = 1";
/// Writes the marker of a bump and raises the database-wide fence:
/// `$1` version, `$2` layouts.
const WRITE_SQL: &str = "INSERT INTO sync_schema_meta (id, schema_version, layouts, required_writer_version) \
    VALUES (1, $1::int8, $2::text, $3::int4) ON CONFLICT (id) DO UPDATE SET schema_version = excluded.schema_version, \
      layouts = excluded.layouts, required_writer_version = \
        GREATEST(sync_schema_meta.required_writer_version, excluded.required_writer_version)";

/// The stored marker, `None` on a database never bumped.
pub(crate) fn read(conn: &mut Conn) -> Result<Option<SchemaMarker>> {
    let Some(row) = conn.query_opt(READ_SQL, &[])? else {
        return Ok(None);
    };
    let layouts: Option<String> = col(&row, 1)?;
    Ok(Some(SchemaMarker {
        schema_version: col(&row, 0)?,
        layouts: layouts.unwrap_or_default(),
        required_writer_version: col(&row, 2)?,
    }))
}

/// Upserts the marker: version, layouts and `required_writer_version = max(existing, version)`.
pub(crate) fn write(conn: &mut Conn, version: i32, layouts: &str) -> Result<()> {
    conn.execute(WRITE_SQL, &[&i64::from(version), &layouts, &version])
        .map(|_| ())
}
