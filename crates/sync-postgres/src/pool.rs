//! Pooled connections: type erasure over the TLS connector, the per-connection
//! statement cache, `search_path` on acquire and the pool built by `connect`.
//!
//! Every statement of this crate goes through [`Conn`], which prepares each
//! distinct SQL text once per pooled connection and keeps the prepared
//! [`Statement`] in the connection's r2d2 extensions, so a cached statement
//! costs one round trip (bind + execute) instead of two.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use postgres::tls::{MakeTlsConnect, TlsConnect};
use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, SimpleQueryMessage, Socket, Statement};
use r2d2::{CustomizeConnection, Pool, PooledConnection};
use r2d2_postgres::PostgresConnectionManager;
use sync_core::{Error, Result};

use crate::errors::{classify, db, is_stale_statement, pool_timeout, Site};
use crate::named::Named;
use crate::sql::quote_ident;

/// Parameters of one statement.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// Driver error alias.
pub(crate) type PgError = postgres::Error;

/// Upper bound of cached statements per connection; the cache is cleared
/// when it would grow beyond it (statement texts are mostly fixed, so this
/// only bounds pathological workloads).
const STATEMENT_CACHE_LIMIT: usize = 512;

/// How long [`Conn::answers`] waits for the server.
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(10);

/// Prepared statements of one pooled connection, keyed by SQL text.
#[derive(Default)]
pub(crate) struct StatementCache {
    statements: HashMap<String, Statement>,
    /// Names of server-side statements prepared on this connection
    /// (`named.rs`); never evicted (a handful, and they live as long as
    /// the session).
    named: HashSet<&'static str>,
    /// Names of per-table server-side statements prepared on this
    /// connection ([`Conn::ensure_named_text`]), same lifetime.
    named_text: HashSet<String>,
    /// The session's state is uncertain (a failed `ROLLBACK` whose backend
    /// could not be terminated): before its next use the connection is
    /// re-synchronized — rolled back, every server-side prepared statement
    /// deallocated, both caches cleared — or dropped.
    resync: bool,
}

/// A pooled `postgres::Client` whatever the TLS connector.
trait PooledClient: Send {
    fn client(&mut self) -> &mut Client;
    fn take_cache(&mut self) -> StatementCache;
    fn put_cache(&mut self, cache: StatementCache);
}

impl<T> PooledClient for PooledConnection<PostgresConnectionManager<T>>
where
    T: MakeTlsConnect<Socket> + Clone + 'static + Sync + Send,
    T::TlsConnect: Send,
    T::Stream: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    fn client(&mut self) -> &mut Client {
        self
    }

    fn take_cache(&mut self) -> StatementCache {
        PooledConnection::extensions_mut(self)
            .remove::<StatementCache>()
            .unwrap_or_default()
    }

    fn put_cache(&mut self, cache: StatementCache) {
        PooledConnection::extensions_mut(self).insert(cache);
    }
}

/// A client owned outright (not pooled): raw access in the conformance harness.
struct OwnedClient(Client);

impl PooledClient for OwnedClient {
    fn client(&mut self) -> &mut Client {
        &mut self.0
    }

    fn take_cache(&mut self) -> StatementCache {
        StatementCache::default()
    }

    fn put_cache(&mut self, _cache: StatementCache) {}
}

/// One checked-out connection with its statement cache. Returned to the pool
/// (cache included) on drop.
pub(crate) struct Conn {
    inner: Box<dyn PooledClient>,
    cache: StatementCache,
    statements: u64,
    #[cfg(feature = "fault-injection")]
    faults: Option<std::sync::Arc<crate::faults::FaultHook>>,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("cached_statements", &self.cache.statements.len())
            .field("statements", &self.statements)
            .finish()
    }
}

impl Conn {
    fn new(mut inner: Box<dyn PooledClient>) -> Self {
        let cache = inner.take_cache();
        Self {
            inner,
            cache,
            statements: 0,
            #[cfg(feature = "fault-injection")]
            faults: None,
        }
    }

    /// Installs the fault hook every statement of this checkout consults.
    #[cfg(feature = "fault-injection")]
    pub(crate) fn set_fault_hook(
        &mut self,
        hook: Option<std::sync::Arc<crate::faults::FaultHook>>,
    ) {
        self.faults = hook;
    }

    /// The driver client, for the fault hook.
    #[cfg(feature = "fault-injection")]
    pub(crate) fn client_mut(&mut self) -> &mut Client {
        self.inner.client()
    }

    /// Sends one statement: the single place every statement of this crate
    /// passes (the fault hook, when compiled in, is consulted here).
    #[inline]
    fn send<T>(
        &mut self,
        sql: &str,
        run: impl FnOnce(&mut Self) -> Result<T, PgError>,
    ) -> Result<T, PgError> {
        self.statements += 1;
        #[cfg(feature = "fault-injection")]
        if let Some(hook) = self.faults.clone() {
            return crate::faults::around(&hook, sql, self, run);
        }
        #[cfg(not(feature = "fault-injection"))]
        let _ = sql;
        run(self)
    }

    /// Wraps a client that belongs to no pool.
    #[cfg_attr(not(feature = "conformance"), allow(dead_code))]
    pub(crate) fn from_client(client: Client) -> Self {
        Self::new(Box::new(OwnedClient(client)))
    }

    /// How many statements were issued on this checkout (failed ones included).
    pub(crate) fn statements(&self) -> u64 {
        self.statements
    }

    fn prepared(&mut self, sql: &str) -> Result<Statement, PgError> {
        if let Some(statement) = self.cache.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.inner.client().prepare(sql)?;
        if self.cache.statements.len() >= STATEMENT_CACHE_LIMIT {
            self.cache.statements.clear();
        }
        self.cache
            .statements
            .insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// Runs `run` with the cached statement for `sql`; a statement the server
    /// reports as stale (its result shape changed under DDL) leaves the cache.
    fn with_cached<T>(
        &mut self,
        sql: &str,
        run: impl FnOnce(&mut Client, &Statement) -> Result<T, PgError>,
    ) -> Result<T, PgError> {
        self.send(sql, |conn| {
            let statement = conn.prepared(sql)?;
            let result = run(conn.inner.client(), &statement);
            if let Err(err) = &result {
                if is_stale_statement(err) {
                    conn.cache.statements.remove(sql);
                }
            }
            result
        })
    }

    /// Runs a cached statement and returns its rows (raw driver error).
    pub(crate) fn query_raw(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, PgError> {
        self.with_cached(sql, |client, statement| client.query(statement, params))
    }

    /// Runs a cached statement and returns its rows.
    pub(crate) fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        self.query_raw(sql, params).map_err(db)
    }

    /// Runs a cached statement and returns its first row, if any.
    pub(crate) fn query_opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs a cached statement that must return a row.
    pub(crate) fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row> {
        self.query_opt(sql, params)?
            .ok_or_else(|| Error::backend("statement returned no row"))
    }

    /// Runs a cached statement and returns the affected-row count.
    pub(crate) fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64> {
        self.with_cached(sql, |client, statement| client.execute(statement, params))
            .map_err(db)
    }

    /// Whether `named` is prepared on this connection.
    pub(crate) fn has_named(&self, named: &Named) -> bool {
        self.cache.named.contains(named.name)
    }

    /// Prepares the named server-side statements this connection has not
    /// prepared yet, one round trip each (the first use per connection), so
    /// whether a name exists is never in doubt: a failed `PREPARE` created
    /// nothing.
    ///
    /// Like the `search_path` set on acquire, this is connection setup, not
    /// a statement of the operation that happens to come first: it counts
    /// for [`Conn::statements`] (so a failure poisons a transaction) but
    /// bypasses the fault hook, which therefore sees the same statements
    /// for an operation whether or not its connection was fresh.
    pub(crate) fn ensure_named(&mut self, statements: &[&'static Named]) -> Result<()> {
        for named in statements {
            if !self.cache.named.contains(named.name) {
                self.statements += 1;
                self.inner
                    .client()
                    .simple_query(&named.prepare_sql())
                    .map_err(db)?;
                self.cache.named.insert(named.name);
            }
        }
        Ok(())
    }

    /// Whether [`Conn::ensure_named_text`] prepared `name` on this connection.
    pub(crate) fn has_named_text(&self, name: &str) -> bool {
        self.cache.named_text.contains(name)
    }

    /// [`Conn::ensure_named`] for a statement whose name and text are built
    /// at run time (one per application table): `name` must be determined
    /// by `prepare_sql`, so a name never stands for two texts.
    pub(crate) fn ensure_named_text(&mut self, name: &str, prepare_sql: &str) -> Result<()> {
        if !self.cache.named_text.contains(name) {
            self.statements += 1;
            self.inner.client().simple_query(prepare_sql).map_err(db)?;
            self.cache.named_text.insert(name.to_owned());
        }
        Ok(())
    }

    /// Prepares a statement without caching it (registered queries, EXPLAIN).
    pub(crate) fn prepare_uncached(&mut self, sql: &str) -> Result<Statement, PgError> {
        self.send(sql, |conn| conn.inner.client().prepare(sql))
    }

    /// Runs a statement prepared with [`Conn::prepare_uncached`].
    pub(crate) fn query_prepared(
        &mut self,
        statement: &Statement,
        params: Params<'_>,
    ) -> Result<Vec<Row>, PgError> {
        self.send("<prepared>", |conn| {
            conn.inner.client().query(statement, params)
        })
    }

    /// Runs one or more parameterless statements in one round trip (simple
    /// query protocol) and returns every message (raw driver error).
    pub(crate) fn simple_raw(&mut self, sql: &str) -> Result<Vec<SimpleQueryMessage>, PgError> {
        self.send(sql, |conn| conn.inner.client().simple_query(sql))
    }

    /// [`Conn::simple_raw`] with classification.
    pub(crate) fn simple(&mut self, sql: &str) -> Result<Vec<SimpleQueryMessage>> {
        self.simple_raw(sql).map_err(db)
    }

    /// [`Conn::simple`] with its errors classified for `site` (a message
    /// carrying a deferred row write reports a class-23 error as that
    /// write's `constraint_violation`).
    pub(crate) fn simple_at(&mut self, sql: &str, site: Site) -> Result<Vec<SimpleQueryMessage>> {
        self.simple_raw(sql).map_err(|e| classify(e, site))
    }

    /// Whether the underlying connection is closed.
    pub(crate) fn is_closed(&mut self) -> bool {
        self.inner.client().is_closed()
    }

    /// Whether this connection is known closed (the driver saw it end), or
    /// its session state is uncertain ([`Conn::discard`] could not end it)
    /// and re-synchronizing it failed.
    pub(crate) fn known_closed(&mut self) -> bool {
        if self.cache.resync && !self.resync() {
            return true;
        }
        self.inner.client().is_closed()
    }

    /// One empty round trip: whether the server still answers on this
    /// connection (a backend terminated or a server restarted while the
    /// connection sat idle in the pool does not).
    pub(crate) fn answers(&mut self) -> bool {
        self.inner.client().is_valid(LIVENESS_TIMEOUT).is_ok()
    }

    /// Ends any transaction and deallocates every server-side prepared
    /// statement, then forgets both caches; `false` when the session could
    /// not be brought back to a known state.
    fn resync(&mut self) -> bool {
        self.cache.statements.clear();
        self.cache.named.clear();
        self.cache.named_text.clear();
        let done = self
            .inner
            .client()
            .simple_query("ROLLBACK; DEALLOCATE ALL")
            .is_ok();
        self.cache.resync = !done;
        done
    }

    /// Makes sure the pool never hands this connection out as it is: any
    /// transaction (even an aborted one, in which every statement but
    /// `ROLLBACK` fails) is rolled back, the backend is terminated and the
    /// client driven until it notices, so r2d2 sees a closed connection on
    /// return and drops it. Should the session survive all that, it is
    /// marked for re-synchronization before its next use
    /// ([`Conn::known_closed`]): the caches of prepared statements are
    /// never trusted again as they are.
    pub(crate) fn discard(&mut self) {
        self.cache.statements.clear();
        self.cache.named.clear();
        self.cache.named_text.clear();
        // The server ends the session; the errors these return are expected.
        let client = self.inner.client();
        let _ = client.simple_query("ROLLBACK");
        let _ = client.simple_query("SELECT pg_terminate_backend(pg_backend_pid())");
        for _ in 0..3 {
            if self.is_closed() {
                return;
            }
            let _ = self.inner.client().simple_query("");
        }
        self.cache.resync = true;
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let cache = std::mem::take(&mut self.cache);
        self.inner.put_cache(cache);
    }
}

/// Where connections come from: an r2d2 pool of any TLS connector.
pub(crate) trait ConnectionSource: Send + Sync {
    fn checkout(&self) -> Result<Conn>;
}

struct R2d2Source<T>
where
    T: MakeTlsConnect<Socket> + Clone + 'static + Sync + Send,
    T::TlsConnect: Send,
    T::Stream: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    pool: Pool<PostgresConnectionManager<T>>,
    /// The checkout wait when it differs from the pool's
    /// `connection_timeout` (pools built by [`build_pool`]).
    wait: Option<Duration>,
}

impl<T> ConnectionSource for R2d2Source<T>
where
    T: MakeTlsConnect<Socket> + Clone + 'static + Sync + Send,
    T::TlsConnect: Send,
    T::Stream: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    fn checkout(&self) -> Result<Conn> {
        let pooled = match self.wait {
            Some(wait) => self.pool.get_timeout(wait),
            None => self.pool.get(),
        }
        .map_err(pool_timeout)?;
        Ok(Conn::new(Box::new(pooled)))
    }
}

/// Erases the TLS connector of a host-built pool.
pub(crate) fn source_of<T>(pool: Pool<PostgresConnectionManager<T>>) -> Box<dyn ConnectionSource>
where
    T: MakeTlsConnect<Socket> + Clone + 'static + Sync + Send,
    T::TlsConnect: Send,
    T::Stream: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    Box::new(R2d2Source { pool, wait: None })
}

/// The source of a pool built by [`build_pool`]: checkouts wait up to
/// `pool_wait_ms`, while the pool's own `connection_timeout` only bounds its
/// reconnect backoff ([`RECONNECT_BACKOFF_CAP`]).
pub(crate) fn built_source(
    pool: Pool<PostgresConnectionManager<NoTls>>,
    pool_wait_ms: u64,
) -> Box<dyn ConnectionSource> {
    Box::new(R2d2Source {
        pool,
        wait: Some(Duration::from_millis(pool_wait_ms)),
    })
}

/// The longest a pool built by [`build_pool`] waits between two attempts to
/// replace a connection it lost. r2d2 doubles the wait after each failed
/// attempt up to half its `connection_timeout`; with the checkout wait as
/// that timeout (30 s by default) a pool that lost its server kept waiting
/// up to 15 s after the server was back before it tried again, and every
/// checkout waited with it. A short cap bounds how long a push waits after
/// the server is back; a failed attempt against a server that is down costs
/// a refused connection.
pub(crate) const RECONNECT_BACKOFF_CAP: Duration = Duration::from_millis(250);

/// The session setup every pooled connection runs once, on acquire.
#[derive(Debug)]
struct SessionSetup {
    statement: String,
}

impl CustomizeConnection<Client, PgError> for SessionSetup {
    fn on_acquire(&self, conn: &mut Client) -> Result<(), PgError> {
        conn.batch_execute(&self.statement)
    }
}

/// The `SET search_path` statement for a schema.
pub(crate) fn search_path_statement(schema: &str) -> String {
    format!("SET search_path TO {}", quote_ident(schema))
}

/// The planner settings of [`PostgresConfig::short_statement_planning`](crate::PostgresConfig::short_statement_planning).
pub(crate) const SHORT_STATEMENT_PLANNING: &str =
    "SET jit = off; SET max_parallel_workers_per_gather = 0";

/// The session setup of a pooled connection: the schema's `search_path`
/// and, with `short_statements`, [`SHORT_STATEMENT_PLANNING`]; `None` when
/// there is nothing to set.
pub(crate) fn session_setup(schema: Option<&str>, short_statements: bool) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(schema) = schema {
        parts.push(search_path_statement(schema));
    }
    if short_statements {
        parts.push(SHORT_STATEMENT_PLANNING.to_owned());
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Builds the pool of [`PostgresStorage::connect`](crate::PostgresStorage::connect):
/// `NoTls`, `max_size = pool_size`, no idle connections kept open eagerly,
/// a reconnect backoff of at most [`RECONNECT_BACKOFF_CAP`], and `session`
/// (see [`session_setup`]) run on acquire. Its checkouts wait
/// `pool_wait_ms` through [`built_source`].
pub(crate) fn build_pool(
    config: postgres::Config,
    session: Option<String>,
    pool_size: u32,
    pool_wait_ms: u64,
) -> Result<Pool<PostgresConnectionManager<NoTls>>> {
    if pool_size == 0 {
        return Err(Error::invalid_argument("pool_size", "zero"));
    }
    if pool_wait_ms == 0 {
        return Err(Error::invalid_argument("pool_wait_ms", "zero"));
    }
    let manager = PostgresConnectionManager::new(config, NoTls);
    let mut builder = Pool::builder()
        .max_size(pool_size)
        .min_idle(Some(0))
        .test_on_check_out(false)
        .idle_timeout(Some(Duration::from_secs(60)))
        .connection_timeout(Duration::from_millis(pool_wait_ms).min(RECONNECT_BACKOFF_CAP * 2));
    if let Some(statement) = session {
        builder = builder.connection_customizer(Box::new(SessionSetup { statement }));
    }
    builder.build(manager).map_err(Error::backend)
}

/// Reads column `idx` of a row; a type mismatch is `sync.storage.backend`.
pub(crate) fn col<'a, T: postgres::types::FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T> {
    row.try_get(idx).map_err(Error::backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(pool: &Pool<PostgresConnectionManager<NoTls>>, setting: &str) -> String {
        let mut conn = pool.get().expect("a pooled connection");
        let row = conn
            .query_one(&format!("SHOW {setting}"), &[])
            .expect("SHOW");
        row.get(0)
    }

    fn pool(session: Option<String>) -> Pool<PostgresConnectionManager<NoTls>> {
        let url = std::env::var("SYNCSTORE_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let config: postgres::Config = url.parse().expect("a parsable SYNCSTORE_PG_URL");
        build_pool(config, session, 1, 5_000).expect("a pool")
    }

    #[test]
    fn the_reconnect_backoff_is_bounded_whatever_the_checkout_wait() {
        let config: postgres::Config = "host=127.0.0.1 user=postgres".parse().expect("config");
        for (wait_ms, timeout) in [
            (30_000, RECONNECT_BACKOFF_CAP * 2),
            (2_000, RECONNECT_BACKOFF_CAP * 2),
            (100, Duration::from_millis(100)),
        ] {
            let pool = build_pool(config.clone(), None, 1, wait_ms).expect("a pool");
            // r2d2 waits at most half its connection timeout between attempts.
            assert_eq!(pool.connection_timeout(), timeout, "pool_wait_ms {wait_ms}");
            assert!(pool.connection_timeout() / 2 <= RECONNECT_BACKOFF_CAP);
        }
    }

    #[test]
    fn pooled_connections_plan_for_short_statements_unless_asked_not_to() {
        let short = pool(session_setup(None, true));
        assert_eq!(show(&short, "jit"), "off");
        assert_eq!(show(&short, "max_parallel_workers_per_gather"), "0");

        // Without it, each setting keeps the value the session started with.
        let server = pool(session_setup(None, false));
        for setting in ["jit", "max_parallel_workers_per_gather"] {
            let mut conn = server.get().expect("a pooled connection");
            let row = conn
                .query_one(
                    "SELECT current_setting($1), reset_val FROM pg_settings WHERE name = $1",
                    &[&setting],
                )
                .expect("pg_settings");
            let (current, at_start): (String, String) = (row.get(0), row.get(1));
            assert_eq!(current, at_start, "{setting} was changed");
        }
    }

    #[test]
    fn the_session_setup_sets_the_schema_first() {
        assert_eq!(session_setup(None, false), None);
        assert_eq!(
            session_setup(Some("tenant \"a\""), false).as_deref(),
            Some("SET search_path TO \"tenant \"\"a\"\"\"")
        );
        assert_eq!(
            session_setup(Some("s"), true).as_deref(),
            Some(
                "SET search_path TO \"s\"; SET jit = off; SET max_parallel_workers_per_gather = 0"
            )
        );
    }
}
