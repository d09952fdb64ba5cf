//! Connections: an r2d2 manager whose every connection is set up and
//! checked (`docs/design/mariadb.md` §2), and [`Conn`], the statement
//! helpers every module uses (errors classified, a connection whose session
//! died marked broken so the pool discards it). Every statement passes
//! `Conn::send`, where the fault hook of the `fault-injection` feature is
//! consulted.

use std::time::Duration;

use mysql::prelude::{FromRow, Queryable};
use mysql::{Opts, Params};
use r2d2::{ManageConnection, Pool, PooledConnection};
use sync_core::{Error, Result};

use crate::errors::{classify, connect_error, is_connection_error, Site};
use crate::session::{self, LockWaits, SessionFacts};

/// Prepared statements kept per connection (the driver's LRU cache).
const STATEMENT_CACHE: usize = 256;

/// One set-up connection.
#[derive(Debug)]
pub(crate) struct Conn {
    inner: mysql::Conn,
    broken: bool,
    #[cfg(feature = "fault-injection")]
    faults: Option<std::sync::Arc<crate::faults::FaultHook>>,
}

// The statement helpers beyond the catalog reads serve the transaction
// backend of the next increment; until then only tests call them.
#[cfg_attr(not(test), allow(dead_code))]
impl Conn {
    /// Opens a connection with `opts` and sets its session up.
    pub(crate) fn open(opts: &Opts, waits: LockWaits) -> Result<(Self, SessionFacts)> {
        let opts = mysql::OptsBuilder::from_opts(opts.clone()).stmt_cache_size(STATEMENT_CACHE);
        let mut inner = mysql::Conn::new(opts).map_err(connect_error)?;
        let facts = session::setup(&mut inner, waits)?;
        Ok((
            Self {
                inner,
                broken: false,
                #[cfg(feature = "fault-injection")]
                faults: None,
            },
            facts,
        ))
    }

    /// Installs (`Some`) or removes (`None`) the fault hook every later
    /// statement of this connection consults.
    #[cfg(feature = "fault-injection")]
    pub(crate) fn set_fault_hook(
        &mut self,
        hook: Option<std::sync::Arc<crate::faults::FaultHook>>,
    ) {
        self.faults = hook;
    }

    /// Sends one statement: the single place every statement of this crate
    /// passes after the session set-up (the fault hook, when compiled in,
    /// is consulted here); a driver error is classified for `site`.
    fn send<T>(
        &mut self,
        sql: &str,
        site: Site,
        run: impl FnOnce(&mut mysql::Conn) -> std::result::Result<T, mysql::Error>,
    ) -> Result<T> {
        #[cfg(feature = "fault-injection")]
        let outcome = match self.faults.clone() {
            Some(hook) => crate::faults::around(&hook, sql, &mut self.inner, run),
            None => run(&mut self.inner),
        };
        #[cfg(not(feature = "fault-injection"))]
        let outcome = {
            let _ = sql;
            run(&mut self.inner)
        };
        outcome.map_err(|err| self.fail(err, site))
    }

    /// Whether a statement lost the session (the pool then discards it).
    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    fn fail(&mut self, err: mysql::Error, site: Site) -> Error {
        if is_connection_error(&err) {
            self.broken = true;
        }
        classify(err, site)
    }

    /// Runs one statement without parameters through the text protocol
    /// (transaction control, `SET`, DDL).
    pub(crate) fn run(&mut self, sql: &str) -> Result<()> {
        self.send(sql, Site::General, |inner| inner.query_drop(sql))
    }

    /// Executes a prepared statement; returns the number of rows it
    /// matched (`CLIENT_FOUND_ROWS`) or inserted.
    pub(crate) fn exec(&mut self, sql: &str, params: impl Into<Params>) -> Result<u64> {
        self.exec_at(sql, params, Site::General)
    }

    /// [`Conn::exec`] with errors classified for `site`.
    pub(crate) fn exec_at(
        &mut self,
        sql: &str,
        params: impl Into<Params>,
        site: Site,
    ) -> Result<u64> {
        self.send(sql, site, |inner| {
            inner.exec_drop(sql, params).map(|()| inner.affected_rows())
        })
    }

    /// Every row of a prepared query.
    pub(crate) fn rows<T: FromRow>(
        &mut self,
        sql: &str,
        params: impl Into<Params>,
    ) -> Result<Vec<T>> {
        self.send(sql, Site::General, |inner| {
            inner.exec_opt::<T, _, _>(sql, params)
        })?
        .into_iter()
        .map(|row| row.map_err(|e| Error::backend(mysql::Error::from(e))))
        .collect()
    }

    /// Every row of a prepared query and whether the server raised a
    /// warning with it: a walk bounded by `LIMIT … ROWS EXAMINED` that
    /// stopped before its `LIMIT` raises 1931 and returns the rows found so
    /// far.
    pub(crate) fn rows_warned<T: FromRow>(
        &mut self,
        sql: &str,
        params: impl Into<Params>,
    ) -> Result<(Vec<T>, bool)> {
        let (rows, warnings) = self.send(sql, Site::General, |inner| {
            let rows = inner.exec_opt::<T, _, _>(sql, params)?;
            Ok((rows, inner.warnings()))
        })?;
        let rows = rows
            .into_iter()
            .map(|row| row.map_err(|e| Error::backend(mysql::Error::from(e))))
            .collect::<Result<Vec<T>>>()?;
        Ok((rows, warnings > 0))
    }

    /// Every row of a prepared query with the result's column metadata
    /// (known even when no row came back).
    pub(crate) fn rows_with_columns(
        &mut self,
        sql: &str,
        params: impl Into<Params>,
    ) -> Result<(Vec<mysql::Column>, Vec<mysql::Row>)> {
        self.send(sql, Site::General, |inner| {
            let mut result = inner.exec_iter(sql, params)?;
            let columns = result.columns().as_ref().to_vec();
            let mut rows = Vec::new();
            if let Some(set) = result.iter() {
                for row in set {
                    rows.push(row?);
                }
            }
            Ok((columns, rows))
        })
    }

    /// The first row of a prepared query, if any.
    pub(crate) fn first<T: FromRow>(
        &mut self,
        sql: &str,
        params: impl Into<Params>,
    ) -> Result<Option<T>> {
        match self.send(sql, Site::General, |inner| {
            inner.exec_first_opt::<T, _, _>(sql, params)
        })? {
            None => Ok(None),
            Some(row) => row
                .map(Some)
                .map_err(|e| Error::backend(mysql::Error::from(e))),
        }
    }

    /// Marks the connection broken: the pool discards it instead of
    /// handing it out again (a session left in a state the next user must
    /// not inherit).
    pub(crate) fn discard(&mut self) {
        self.broken = true;
    }

    /// Rolls back whatever is open. A failed rollback marks the connection
    /// broken instead of returning an error: it is never reused.
    pub(crate) fn rollback(&mut self) {
        if self.run("ROLLBACK").is_err() {
            self.broken = true;
        }
    }
}

/// Makes every later transaction of the session read-only, autocommitted
/// statements included: a write is refused by the server.
pub(crate) const READ_ONLY_SESSION: &str = "SET SESSION TRANSACTION READ ONLY";

/// The r2d2 manager: opens set-up connections.
#[derive(Debug, Clone)]
pub(crate) struct Manager {
    opts: Opts,
    waits: LockWaits,
    read_only: bool,
}

impl Manager {
    pub(crate) fn new(opts: Opts, waits: LockWaits) -> Self {
        Self {
            opts,
            waits,
            read_only: false,
        }
    }

    /// Connections whose every transaction is read-only (inspection).
    pub(crate) fn read_only(opts: Opts, waits: LockWaits) -> Self {
        Self {
            opts,
            waits,
            read_only: true,
        }
    }
}

impl ManageConnection for Manager {
    type Connection = Conn;
    type Error = Error;

    fn connect(&self) -> Result<Conn> {
        let (mut conn, _) = Conn::open(&self.opts, self.waits)?;
        if self.read_only {
            conn.run(READ_ONLY_SESSION)?;
        }
        Ok(conn)
    }

    fn is_valid(&self, conn: &mut Conn) -> Result<()> {
        match conn.inner.ping() {
            Ok(()) => Ok(()),
            Err(err) => Err(conn.fail(err, Site::General)),
        }
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken
    }
}

/// A pooled connection.
pub(crate) type Pooled = PooledConnection<Manager>;

/// The longest the pool waits between two attempts to replace a
/// connection it lost. r2d2 doubles the wait after each failed attempt, up
/// to half its `connection_timeout`; with the checkout wait as that timeout
/// (30 s by default) a pool whose server was down kept waiting up to 15 s
/// after the server was back before it tried again, and every checkout
/// waited with it (a 3 s outage: the first push 2.3 s after the server
/// accepted connections again). A short cap bounds that lag; a failed
/// attempt against a server that is down costs a refused connection.
pub(crate) const RECONNECT_BACKOFF_CAP: Duration = Duration::from_millis(250);

/// Builds the pool (no connection is opened here; the caller probes
/// first). Its own `connection_timeout` only bounds the reconnect backoff
/// ([`RECONNECT_BACKOFF_CAP`]): checkouts wait `pool_wait_ms` through
/// [`checkout`].
pub(crate) fn build_pool(
    manager: Manager,
    pool_size: u32,
    pool_wait_ms: u64,
) -> Result<Pool<Manager>> {
    if pool_size == 0 {
        return Err(Error::invalid_argument("pool_size", "zero"));
    }
    if pool_wait_ms == 0 {
        return Err(Error::invalid_argument("pool_wait_ms", "zero"));
    }
    Ok(Pool::builder()
        .max_size(pool_size)
        .min_idle(Some(0))
        .test_on_check_out(false)
        .idle_timeout(Some(Duration::from_secs(60)))
        .connection_timeout(Duration::from_millis(pool_wait_ms).min(RECONNECT_BACKOFF_CAP * 2))
        .build_unchecked(manager))
}

/// A connection of `pool`, waiting up to `pool_wait_ms` for one; a timeout
/// is `sync.storage.busy`.
pub(crate) fn checkout(pool: &Pool<Manager>, pool_wait_ms: u64) -> Result<Pooled> {
    pool.get_timeout(Duration::from_millis(pool_wait_ms))
        .map_err(crate::errors::pool_timeout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MariadbUrl;
    use crate::session::LockWaits;

    #[test]
    fn the_reconnect_backoff_is_bounded_whatever_the_checkout_wait() {
        let url = MariadbUrl::parse("mysql://root@127.0.0.1:3306/test").expect("url");
        let waits = LockWaits {
            row_seconds: 1,
            metadata_seconds: 1,
        };
        for (wait_ms, timeout) in [
            (30_000, RECONNECT_BACKOFF_CAP * 2),
            (2_000, RECONNECT_BACKOFF_CAP * 2),
            (100, Duration::from_millis(100)),
        ] {
            let manager = Manager::new(url.connection_opts(), waits);
            let pool = build_pool(manager, 1, wait_ms).expect("a pool");
            // r2d2 waits at most half its connection timeout between attempts.
            assert_eq!(pool.connection_timeout(), timeout, "pool_wait_ms {wait_ms}");
            assert!(pool.connection_timeout() / 2 <= RECONNECT_BACKOFF_CAP);
        }
    }
}
