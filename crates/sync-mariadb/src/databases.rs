//! Whole databases of one server: created, dropped, and one filled with
//! another's rows — what a harness needs to give each test instance a
//! storage of its own (`serve --test-control`'s scratch area) and to back
//! one up.
//!
//! Every function connects with the credentials of a [`MariadbUrl`] and
//! names the database it works on; names are quoted, never checked
//! against a pattern (MariaDB refuses what it cannot hold).

use mysql::prelude::Queryable;
use sync_core::Result;

use crate::config::{MariadbUrl, DEFAULT_METADATA_LOCK_WAIT_SECONDS};
use crate::dialect::quote_ident;
use crate::errors::{connect_error, db};
use crate::pool::Conn;
use crate::session::LockWaits;

/// `CREATE DATABASE IF NOT EXISTS name` (`utf8mb4_nopad_bin`, the storage
/// tables' own collation) on `server`'s server; returns the URL of the new
/// database (same server and credentials). An unreachable server or
/// refused credentials are `sync.storage.backend` with `details.cause`.
pub fn create_database(server: &MariadbUrl, name: &str) -> Result<MariadbUrl> {
    let mut conn = mysql::Conn::new(server.server_opts()).map_err(connect_error)?;
    conn.query_drop(format!(
        "CREATE DATABASE IF NOT EXISTS {} CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
        quote_ident(name)
    ))
    .map_err(db)?;
    Ok(server.with_database(name))
}

/// `DROP DATABASE IF EXISTS name` on `server`'s server (its storages'
/// pools should be dropped first: an open transaction holds the drop).
pub fn drop_database(server: &MariadbUrl, name: &str) -> Result<()> {
    let mut conn = mysql::Conn::new(server.server_opts()).map_err(connect_error)?;
    conn.query_drop(format!("DROP DATABASE IF EXISTS {}", quote_ident(name)))
        .map_err(db)
}

/// Copies the rows of every table of database `source` into the table of
/// the same name in database `target`, in one transaction on a session
/// set up as the storage's own. `target` holds the same tables, made by
/// the storage (`ensure_schema` at the same schema version); a table it
/// already filled (the schema marker) is left as it is, since both were
/// ensured alike. Rows go in as they are, so the writer-fence trigger sees
/// only rows it once accepted, and generated columns are computed again.
pub fn copy_rows(server: &MariadbUrl, source: &str, target: &str) -> Result<()> {
    let waits = LockWaits {
        row_seconds: crate::config::DEFAULT_ROW_LOCK_WAIT_SECONDS,
        metadata_seconds: DEFAULT_METADATA_LOCK_WAIT_SECONDS,
    };
    let (mut conn, _) = Conn::open(&server.with_database(target).connection_opts(), waits)?;
    conn.run("START TRANSACTION")?;
    match copy_tables(&mut conn, source, target) {
        Ok(()) => conn.run("COMMIT"),
        Err(error) => {
            conn.rollback();
            Err(error)
        }
    }
}

fn copy_tables(conn: &mut Conn, source: &str, target: &str) -> Result<()> {
    let tables: Vec<String> = conn.rows(
        "SELECT TABLE_NAME FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
        (source,),
    )?;
    let (from, to) = (quote_ident(source), quote_ident(target));
    for table in &tables {
        let name = quote_ident(table);
        let filled: Option<i64> = conn.first(&format!("SELECT 1 FROM {to}.{name} LIMIT 1"), ())?;
        if filled.is_some() {
            continue;
        }
        let columns: Vec<String> = conn.rows(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND IS_GENERATED = 'NEVER' \
             ORDER BY ORDINAL_POSITION",
            (source, table),
        )?;
        let list = columns
            .iter()
            .map(|c| quote_ident(c))
            .collect::<Vec<_>>()
            .join(", ");
        conn.run(&format!(
            "INSERT INTO {to}.{name} ({list}) SELECT {list} FROM {from}.{name}"
        ))?;
    }
    Ok(())
}
