//! The MariaDB server of `--dialect mariadb`: its URL, the check that it
//! answers (the run stops with instructions when it does not), driver
//! options for one database on it, and creating and dropping the fresh
//! databases of the measurements.

use anyhow::{bail, Context, Result};
use mysql::consts::CapabilityFlags;
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder};
use sync_mariadb::scratch::{DEFAULT_URL, URL_VARIABLE};

/// The URL from `--mariadb-url`, else `SYNCSTORE_MARIADB_URL`, else the
/// local test server.
pub fn url(explicit: Option<&str>) -> String {
    explicit
        .map(str::to_owned)
        .or_else(|| std::env::var(URL_VARIABLE).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| DEFAULT_URL.to_owned())
}

/// Driver options of `url` (`mariadb://` or `mysql://`), with `database`
/// selected (none: the server only, to create and drop databases). As the
/// storage's connections: TCP, `CLIENT_FOUND_ROWS` (an `UPDATE` reports
/// the rows it matched).
pub fn opts(url: &str, database: Option<&str>) -> Result<Opts> {
    let rest = url
        .split_once("://")
        .map(|(_, rest)| rest)
        .with_context(|| format!("{url} is not a mariadb:// or mysql:// URL"))?;
    let opts = Opts::from_url(&format!("mysql://{rest}"))
        .with_context(|| format!("parsing the MariaDB URL {url}"))?;
    Ok(OptsBuilder::from_opts(opts)
        .db_name(database)
        .additional_capabilities(CapabilityFlags::CLIENT_FOUND_ROWS)
        .prefer_socket(false)
        .into())
}

/// A connection to the server without a database selected.
pub fn server(url: &str) -> Result<Conn> {
    Conn::new(opts(url, None)?).with_context(|| format!("connecting to MariaDB at {url}"))
}

/// Connects once and asks for the server version; an error names the URL
/// and how to reach a server.
pub fn require(url: &str) -> Result<String> {
    let attempt = server(url).and_then(|mut conn| {
        let version: Option<String> = conn.query_first("SELECT version()")?;
        version.context("SELECT version() returned no row")
    });
    match attempt {
        Ok(version) => Ok(version),
        Err(error) => bail!(
            "MariaDB is not reachable at {url} ({error:#}).\n\
             --dialect mariadb needs a MariaDB 10.6+ server on which this user may create\n\
             and drop databases. Start the local one (e.g. `service mariadb start`), or pass\n\
             --mariadb-url / set {URL_VARIABLE} to such a server."
        ),
    }
}

/// Creates the empty database `name` (`utf8mb4_nopad_bin`, as the
/// storage's tables declare).
pub fn create_database(url: &str, name: &str) -> Result<()> {
    server(url)?
        .query_drop(format!(
            "CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
        ))
        .with_context(|| format!("creating database {name}"))
}

/// Drops the database `name` (best effort: one left behind is clutter).
pub fn drop_database(url: &str, name: &str) {
    if let Ok(mut conn) = server(url) {
        let _ = conn.query_drop(format!("DROP DATABASE IF EXISTS `{name}`"));
    }
}
