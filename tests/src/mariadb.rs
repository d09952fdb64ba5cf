//! MariaDB read and acted on around the storage API: the migration state a
//! killed migrator leaves (the meta row's `migrating_to` and the open
//! journal, which no API call shows), and the server connections of one
//! database, found in `information_schema.PROCESSLIST` and killed as an
//! operator's `KILL CONNECTION` would.
//!
//! The functions work on plain driver connections (no session set-up of
//! the storage): [`connect`] opens one from a URL, and
//! `sync_mariadb::scratch::ScratchDatabase::raw` one to a scratch database.

use mysql::prelude::Queryable;

/// A plain driver connection over TCP to `url` (`mysql://…` or
/// `mariadb://…`, a database optional), or why not.
pub fn connect(url: &str) -> Result<mysql::Conn, String> {
    let driver_url = match url.split_once("://") {
        Some((_, rest)) => format!("mysql://{rest}"),
        None => return Err(format!("not a URL: {url}")),
    };
    let opts = mysql::Opts::from_url(&driver_url).map_err(|e| format!("{url}: {e}"))?;
    let opts = mysql::OptsBuilder::from_opts(opts).prefer_socket(false);
    mysql::Conn::new(opts).map_err(|e| format!("connect to {url}: {e}"))
}

/// The migration a database is in, read on a connection of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationState {
    /// The stored marker (`sync_schema_meta.schema_version`; 0 when none).
    pub schema_version: i64,
    /// The version a migration fenced for and did not finish, if any.
    pub migrating_to: Option<i32>,
    /// The journal entry that is not `done`, if any.
    pub open_journal: Option<OpenJournal>,
}

/// A journal entry that is not `done`: where a killed migration stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenJournal {
    /// The version it migrates to.
    pub target_version: i32,
    /// `fenced`, `ddl` or `rewrite`.
    pub state: String,
    /// The next DDL statement to run.
    pub next_step: i64,
    /// The table of the last committed rewrite page, if one committed.
    pub rewrite_table: Option<String>,
    /// Whether a rewrite cursor (the last row of that page) is stored.
    pub rewrite_cursor: bool,
}

impl MigrationState {
    /// Whether a migration was fenced and not finished: every process is
    /// refused until one at its version rolls it forward.
    pub fn is_open(&self) -> bool {
        self.migrating_to.is_some() || self.open_journal.is_some()
    }
}

/// Reads the migration state of the current database of `conn`; panics
/// with the reason when it cannot (a test helper).
pub fn migration_state(conn: &mut mysql::Conn) -> MigrationState {
    let meta: Option<(i64, Option<i32>)> = conn
        .query_first(
            "SELECT `schema_version`, `migrating_to` FROM `sync_schema_meta` WHERE `id` = 1",
        )
        .unwrap_or_else(|e| panic!("migration state: meta row: {e}"));
    type Row = (i32, String, i64, Option<String>, i64);
    let journal: Vec<Row> = conn
        .query(
            "SELECT `target_version`, `state`, `next_step`, CAST(`rewrite_table` AS CHAR), \
             `rewrite_after_row_id` IS NOT NULL FROM `sync_migration_journal` \
             WHERE `state` <> 'done' ORDER BY `target_version`",
        )
        .unwrap_or_else(|e| panic!("migration state: journal: {e}"));
    assert!(
        journal.len() <= 1,
        "migration state: more than one open journal entry: {journal:?}"
    );
    let (schema_version, migrating_to) = meta.unwrap_or((0, None));
    MigrationState {
        schema_version,
        migrating_to,
        open_journal: journal.into_iter().next().map(
            |(target_version, state, next_step, rewrite_table, cursor)| OpenJournal {
                target_version,
                state,
                next_step,
                rewrite_table,
                rewrite_cursor: cursor != 0,
            },
        ),
    }
}

/// [`migration_state`] read while holding the migration lock
/// (`GET_LOCK('sync.migrate.' || SHA2(DATABASE(), 256))`, as every
/// migrator of the database takes it, `docs/design/mariadb.md` §10): once
/// it is granted, the session of a migrator that was killed has ended, so
/// nothing more of its migration can land — not even a `COMMIT` it sent
/// just before it died. Waits up to two minutes for the lock.
pub fn settled_migration_state(conn: &mut mysql::Conn) -> MigrationState {
    let got: Option<Option<i64>> = conn
        .query_first("SELECT GET_LOCK(CONCAT('sync.migrate.', SHA2(DATABASE(), 256)), 120)")
        .unwrap_or_else(|e| panic!("migration state: take the migration lock: {e}"));
    assert_eq!(
        got.flatten(),
        Some(1),
        "migration state: the migration lock was not granted"
    );
    let state = migration_state(conn);
    conn.query_drop("DO RELEASE_LOCK(CONCAT('sync.migrate.', SHA2(DATABASE(), 256)))")
        .unwrap_or_else(|e| panic!("migration state: release the migration lock: {e}"));
    state
}

/// The ids of the server connections whose current database is
/// `database`, the calling connection excepted.
pub fn connections_of(conn: &mut mysql::Conn, database: &str) -> Result<Vec<u64>, String> {
    conn.exec(
        "SELECT `ID` FROM `information_schema`.`PROCESSLIST` \
         WHERE `DB` = ? AND `ID` <> CONNECTION_ID()",
        (database,),
    )
    .map_err(|e| format!("list the connections of {database}: {e}"))
}

/// Kills every server connection whose current database is `database`
/// (`KILL CONNECTION`, from `conn`); returns how many were killed. A
/// connection that ended between the listing and its `KILL` is not an
/// error.
pub fn kill_connections_of(conn: &mut mysql::Conn, database: &str) -> Result<usize, String> {
    let mut killed = 0;
    for id in connections_of(conn, database)? {
        // `KILL` takes no placeholder; the id is a number the server gave.
        match conn.query_drop(format!("KILL CONNECTION {id}")) {
            Ok(()) => killed += 1,
            // ER_NO_SUCH_THREAD: it ended by itself meanwhile.
            Err(mysql::Error::MySqlError(e)) if e.code == 1094 => {}
            Err(e) => return Err(format!("KILL CONNECTION {id}: {e}")),
        }
    }
    Ok(killed)
}
