//! Database URLs and opening a storage from one.
//!
//! - `sqlite:PATH` (also `sqlite://PATH`): the SQLite file at `PATH`,
//!   created when absent (its directory must exist). An optional query
//!   parameter `synchronous=full|normal` sets the writer's
//!   `PRAGMA synchronous`: `full` (the default) makes an acknowledged push
//!   survive a power loss; `normal` is faster but may lose the pushes of the
//!   last moments before an OS crash or power loss. A path holding `?` is
//!   written with the parameter after it (`sqlite:a?b.db?synchronous=full`).
//!   A parameter `page_size=N` (a power of two from 512 to 65 536) sets the
//!   page size of a file the storage creates (`SqliteConfig::page_size`);
//!   an existing file keeps its own. A parameter `mmap_size=N` sets how
//!   many bytes of the file each reader maps (`SqliteConfig::reader_mmap_size`;
//!   default 256 MiB, `0` turns memory-mapped reads off). Parameters join
//!   with `&` (`sqlite:x.db?synchronous=normal&page_size=1024&mmap_size=0`).
//! - `postgres://…` / `postgresql://…`: a Postgres database. An optional
//!   query parameter `schema=NAME` selects the schema every connection works
//!   in (`SET search_path`); the schema is created when absent, as SQLite
//!   creates its file. Every other parameter goes to the driver unchanged
//!   (so `options=-csearch_path%3DNAME` also works, but then the schema must
//!   exist). Without `connect_timeout` the CLI adds `connect_timeout=10`.
//! - `mariadb://user[:password]@host[:port]/database` (or `mysql://…`): a
//!   MariaDB database (10.6 or newer); the database is required and must
//!   exist.
//! - any other scheme of a dialect in [`DIALECTS`]: that dialect's opener
//!   gets the URL text unchanged.
//!
//! The scheme picks the dialect through [`DIALECTS`], the CLI's one list of
//! dialects; a scheme no dialect registers is `sync.cli.invalid_url` with
//! `reason` `unknown_scheme`, never a fallback.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sync_core::ServerStorage;
use sync_postgres::{PostgresConfig, PostgresStorage};
use sync_schema::{find_dialect_for_url, Dialect, DialectEntry, ObserveTables, ObservedTables};
use sync_sqlite::{SqliteConfig, SqliteStorage, Synchronous};

use crate::error::{root_cause, CliCode, CliError, CliResult};
use crate::secrets;

/// Environment variable holding the default database URL.
pub const DATABASE_URL_ENV: &str = "SYNCSTORE_DATABASE_URL";
/// The database URL when neither `--db` nor the environment names one.
pub const DEFAULT_DATABASE_URL: &str = "sqlite:syncstore.db";
/// Seconds the CLI waits for a Postgres connection unless the URL says otherwise.
const DEFAULT_CONNECT_TIMEOUT_S: u32 = 10;

/// How the CLI opens a registered dialect's database.
#[derive(Clone, Copy)]
pub enum UrlHooks {
    /// A parser into one of the built-in [`DatabaseUrl`] forms (their
    /// parameters are checked before anything connects).
    Parse(fn(&str) -> CliResult<DatabaseUrl>),
    /// A dialect's own opener: the URL text goes to it unchanged. The
    /// built-ins parse; this is the line a further dialect's crate adds
    /// (MariaDB's, [`open_mariadb`]).
    Open(OpenFn),
}

/// Opens a registered dialect's database from its URL; `read_only` asks
/// for an inspection handle that creates and alters nothing.
pub type OpenFn = fn(url: &str, read_only: bool) -> sync_core::Result<Arc<dyn OpenedStorage>>;

/// One entry of the CLI's dialect list.
pub type CliDialect = DialectEntry<UrlHooks>;

/// The dialects the CLI opens: one line per dialect.
pub const DIALECTS: &[CliDialect] = &[
    DialectEntry {
        sql: sync_sqlite::DIALECT,
        url_schemes: sync_sqlite::URL_SCHEMES,
        hooks: UrlHooks::Parse(parse_sqlite),
    },
    DialectEntry {
        sql: sync_postgres::DIALECT,
        url_schemes: sync_postgres::URL_SCHEMES,
        hooks: UrlHooks::Parse(parse_postgres),
    },
    DialectEntry {
        sql: sync_mariadb::DIALECT,
        url_schemes: sync_mariadb::URL_SCHEMES,
        hooks: UrlHooks::Open(open_mariadb),
    },
];

/// `mariadb://…` / `mysql://…`: the dialect's own URL parser and
/// connection (the database in the path is required); read-only opens
/// create nothing and refuse a database without the storage tables.
fn open_mariadb(url: &str, read_only: bool) -> sync_core::Result<Arc<dyn OpenedStorage>> {
    let config = sync_mariadb::MariadbConfig::default();
    Ok(if read_only {
        Arc::new(sync_mariadb::MariadbStorage::connect_read_only(
            url, config,
        )?)
    } else {
        Arc::new(sync_mariadb::MariadbStorage::connect(url, config)?)
    })
}

/// What the CLI needs of an opened storage: the contract plus read-only
/// introspection. Every storage type with both implements it.
pub trait OpenedStorage: ServerStorage + ObserveTables + std::fmt::Debug {
    /// The storage as the contract.
    fn as_storage(&self) -> &dyn ServerStorage;
    /// The storage as a shared contract handle.
    fn into_shared(self: Arc<Self>) -> Arc<dyn ServerStorage>;
}

impl<T: ServerStorage + ObserveTables + std::fmt::Debug + 'static> OpenedStorage for T {
    fn as_storage(&self) -> &dyn ServerStorage {
        self
    }
    fn into_shared(self: Arc<Self>) -> Arc<dyn ServerStorage> {
        self
    }
}

/// A parsed `--db` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// A SQLite database file.
    Sqlite {
        /// The file.
        path: PathBuf,
        /// `PRAGMA synchronous` of the writer (`synchronous` parameter).
        synchronous: Synchronous,
        /// Page size of a file created on open (`page_size` parameter).
        page_size: Option<u32>,
        /// Bytes of the file each reader maps (`mmap_size` parameter);
        /// `None`: the storage's default.
        mmap_size: Option<u64>,
    },
    /// A Postgres database, optionally one schema of it.
    Postgres {
        /// The driver URL (without the `schema` parameter).
        url: String,
        /// The schema selected by the `schema` parameter.
        schema: Option<String>,
    },
    /// A database of a dialect registered with its own opener.
    Registered {
        /// The dialect.
        dialect: Dialect,
        /// The URL text, unchanged.
        url: String,
        /// Its registry opener.
        open: Opener,
    },
}

fn parse_sqlite(text: &str) -> CliResult<DatabaseUrl> {
    let invalid = |reason: &str| CliError::new(CliCode::InvalidUrl).detail("reason", reason);
    let rest = text
        .strip_prefix("sqlite:")
        .ok_or_else(|| invalid("unknown_scheme"))?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, options) = sqlite_parameters(rest).map_err(&invalid)?;
    if path.is_empty() {
        return Err(invalid("empty_path"));
    }
    Ok(DatabaseUrl::Sqlite {
        path: PathBuf::from(path),
        synchronous: options.synchronous,
        page_size: options.page_size,
        mmap_size: options.mmap_size,
    })
}

fn parse_postgres(text: &str) -> CliResult<DatabaseUrl> {
    if !(text.starts_with("postgres://") || text.starts_with("postgresql://")) {
        return Err(CliError::new(CliCode::InvalidUrl).detail("reason", "unknown_scheme"));
    }
    postgres_url(text).map_err(|reason| CliError::new(CliCode::InvalidUrl).detail("reason", reason))
}

/// The URL text `--db` names, else `SYNCSTORE_DATABASE_URL`, else the
/// default.
pub fn resolved_text(explicit: Option<&str>) -> String {
    match explicit {
        Some(url) => url.to_owned(),
        None => match std::env::var(DATABASE_URL_ENV) {
            Ok(url) if !url.is_empty() => url,
            _ => DEFAULT_DATABASE_URL.to_owned(),
        },
    }
}

/// A registry opener, compared by address (so [`DatabaseUrl`] stays `Eq`).
#[derive(Clone, Copy)]
pub struct Opener(pub OpenFn);

impl PartialEq for Opener {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::fn_addr_eq(self.0, other.0)
    }
}

impl Eq for Opener {}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Opener")
    }
}

impl DatabaseUrl {
    /// Parses a URL; anything else is `sync.cli.invalid_url`.
    pub fn parse(text: &str) -> CliResult<Self> {
        Self::parse_with(DIALECTS, text)
    }

    /// [`DatabaseUrl::parse`] against a given dialect list.
    pub fn parse_with(entries: &[CliDialect], text: &str) -> CliResult<Self> {
        let entry = find_dialect_for_url(entries, text)
            .map_err(|_| CliError::new(CliCode::InvalidUrl).detail("reason", "unknown_scheme"))?;
        match entry.hooks {
            UrlHooks::Parse(parse) => parse(text),
            UrlHooks::Open(open) => Ok(Self::Registered {
                dialect: entry.sql,
                url: text.to_owned(),
                open: Opener(open),
            }),
        }
    }

    /// The URL resolved from `--db`, else `SYNCSTORE_DATABASE_URL`, else the default.
    pub fn resolve(explicit: Option<&str>) -> CliResult<Self> {
        Self::parse(&resolved_text(explicit))
    }

    /// Where the database is, for people (never shows a password).
    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite { path, .. } => format!("sqlite:{}", path.display()),
            Self::Postgres { url, schema } => {
                let shown = secrets::mask_url(url);
                match schema {
                    Some(schema) => format!("{shown} (schema {schema})"),
                    None => shown,
                }
            }
            Self::Registered { url, .. } => secrets::mask_url(url),
        }
    }

    /// The SQL dialect of this database.
    pub fn dialect(&self) -> Dialect {
        match self {
            Self::Sqlite { .. } => sync_sqlite::DIALECT,
            Self::Postgres { .. } => sync_postgres::DIALECT,
            Self::Registered { dialect, .. } => *dialect,
        }
    }

    /// Opens a storage instance (one "process" in the RFC 0007 sense: its
    /// own pools and its own ensured schema). Failures to open or connect
    /// are `sync.cli.unreachable` with the driver's reason in `details`.
    pub fn open(&self) -> CliResult<Database> {
        let backend = match self {
            Self::Sqlite {
                path,
                synchronous,
                page_size,
                mmap_size,
            } => Backend::Sqlite(Arc::new(open_sqlite(
                path,
                *synchronous,
                *page_size,
                *mmap_size,
            )?)),
            Self::Postgres { url, schema } => {
                Backend::Postgres(Arc::new(open_postgres(url, schema.as_deref())?))
            }
            Self::Registered { url, open, .. } => {
                Backend::Other(open.0(url, false).map_err(opening)?)
            }
        };
        tracing::debug!(database = %crate::escape::safe(&self.describe()), "opened storage");
        Ok(Database {
            url: self.clone(),
            backend,
        })
    }

    /// Opens the database read-only, for inspection: nothing is created,
    /// bootstrapped or altered (SQLite `SQLITE_OPEN_READ_ONLY` + `query_only`;
    /// Postgres `default_transaction_read_only`). A database without the
    /// storage tables is `sync.storage.not_a_sync_database`.
    pub fn open_read_only(&self) -> CliResult<Database> {
        let backend = match self {
            Self::Sqlite {
                path, mmap_size, ..
            } => Backend::Sqlite(Arc::new(
                SqliteStorage::open_read_only(
                    path,
                    SqliteConfig {
                        reader_mmap_size: reader_mmap_size(*mmap_size),
                        ..SqliteConfig::default()
                    },
                )
                .map_err(opening)?,
            )),
            Self::Postgres { url, schema } => {
                let config = PostgresConfig {
                    schema: schema.clone(),
                    ..PostgresConfig::default()
                };
                Backend::Postgres(Arc::new(
                    PostgresStorage::connect_read_only(url, config).map_err(opening)?,
                ))
            }
            Self::Registered { url, open, .. } => {
                Backend::Other(open.0(url, true).map_err(opening)?)
            }
        };
        tracing::debug!(database = %crate::escape::safe(&self.describe()), "opened storage read-only");
        Ok(Database {
            url: self.clone(),
            backend,
        })
    }
}

/// One opened storage instance.
#[derive(Debug, Clone)]
pub struct Database {
    url: DatabaseUrl,
    backend: Backend,
}

/// The built-in dialects stay typed for their own reports (SQLite's
/// `synchronous`, Postgres's Citus placement); every registered dialect is
/// an [`OpenedStorage`].
#[derive(Debug, Clone)]
enum Backend {
    Sqlite(Arc<SqliteStorage>),
    Postgres(Arc<PostgresStorage>),
    Other(Arc<dyn OpenedStorage>),
}

impl Database {
    /// The storage.
    pub fn storage(&self) -> &dyn ServerStorage {
        match &self.backend {
            Backend::Sqlite(storage) => storage.as_ref(),
            Backend::Postgres(storage) => storage.as_ref(),
            Backend::Other(storage) => storage.as_storage(),
        }
    }

    /// The storage as a shared handle (what the engine holds).
    pub fn shared_storage(&self) -> Arc<dyn ServerStorage> {
        match &self.backend {
            Backend::Sqlite(storage) => storage.clone(),
            Backend::Postgres(storage) => storage.clone(),
            Backend::Other(storage) => storage.clone().into_shared(),
        }
    }

    /// The URL this instance was opened from.
    pub fn url(&self) -> &DatabaseUrl {
        &self.url
    }

    /// The SQL dialect.
    pub fn dialect(&self) -> Dialect {
        self.url.dialect()
    }

    /// The `PRAGMA synchronous` a SQLite writer opened with this URL runs
    /// under; `None` on Postgres (which acknowledges a commit only after its
    /// WAL flush under the default `synchronous_commit = on`). SQLite keeps
    /// the setting per connection, not in the file, so every process states
    /// its own: a storage opened for writing reads it back from its writer,
    /// and a read-only inspection reports what this URL configures.
    pub fn sqlite_synchronous(&self) -> sync_core::Result<Option<Synchronous>> {
        match (&self.backend, &self.url) {
            (Backend::Sqlite(storage), _) if !storage.is_read_only() => {
                storage.synchronous().map(Some)
            }
            (_, DatabaseUrl::Sqlite { synchronous, .. }) => Ok(Some(*synchronous)),
            (_, DatabaseUrl::Postgres { .. } | DatabaseUrl::Registered { .. }) => Ok(None),
        }
    }

    /// The page size of the SQLite file, read from it (the one it was
    /// created with: a `page_size` parameter only applies to a new file);
    /// `None` on every other dialect.
    pub fn sqlite_page_size(&self) -> sync_core::Result<Option<u32>> {
        match &self.backend {
            Backend::Sqlite(storage) => storage.page_size().map(Some),
            Backend::Postgres(_) | Backend::Other(_) => Ok(None),
        }
    }

    /// Where the storage's tables live on a Citus coordinator
    /// ([`PostgresStorage::citus_placement`]); `None` on plain Postgres and
    /// on every other dialect.
    pub fn citus_placement(&self) -> sync_core::Result<Option<sync_postgres::CitusPlacement>> {
        match &self.backend {
            Backend::Postgres(storage) => storage.citus_placement(),
            Backend::Sqlite(_) | Backend::Other(_) => Ok(None),
        }
    }

    /// Distributes the schema by partition on a Citus coordinator
    /// (`PostgresStorage::distribute`, through the storage this instance
    /// holds); any other dialect is `sync.storage.not_distributable`
    /// (`reason = not_postgres`).
    pub fn distribute(
        &self,
        options: &sync_postgres::DistributeOptions,
    ) -> CliResult<sync_postgres::DistributeReport> {
        match &self.backend {
            Backend::Postgres(storage) => Ok(storage.distribute(options)?),
            Backend::Sqlite(_) | Backend::Other(_) => Err(sync_core::Error::new(
                sync_core::ErrorCode::NotDistributable,
            )
            .detail("reason", "not_postgres")
            .into()),
        }
    }

    /// Rows of one application table, all partitions (0 when absent;
    /// `None` when the dialect cannot count).
    pub fn count_table_rows(&self, table: &str) -> sync_core::Result<Option<u64>> {
        match &self.backend {
            Backend::Sqlite(storage) => storage.count_table_rows(table),
            Backend::Postgres(storage) => storage.count_table_rows(table),
            Backend::Other(storage) => storage.count_table_rows(table),
        }
    }

    /// Read-only introspection of the named tables (absent ones included),
    /// as `ensure_schema` would observe them (`schema-and-migrations.md` §7.1).
    pub fn observe_tables(&self, tables: &[String]) -> sync_core::Result<ObservedTables> {
        match &self.backend {
            Backend::Sqlite(storage) => storage.observe_tables(tables),
            Backend::Postgres(storage) => storage.observe_tables(tables),
            Backend::Other(storage) => storage.observe_tables(tables),
        }
    }
}

fn open_sqlite(
    path: &Path,
    synchronous: Synchronous,
    page_size: Option<u32>,
    mmap_size: Option<u64>,
) -> CliResult<SqliteStorage> {
    let config = SqliteConfig {
        synchronous,
        page_size,
        reader_mmap_size: reader_mmap_size(mmap_size),
        ..SqliteConfig::default()
    };
    SqliteStorage::open(path, config).map_err(opening)
}

/// The readers' map size a SQLite URL asks for: its `mmap_size`
/// parameter, else the storage's default.
fn reader_mmap_size(parameter: Option<u64>) -> u64 {
    parameter.unwrap_or(sync_sqlite::DEFAULT_READER_MMAP_SIZE)
}

/// An error of opening a storage: "not a syncstore database" and a
/// stranded `-wal`/`-shm` keep their codes (each asks the operator for
/// something else than a reachable server), a URL the dialect's opener
/// cannot read is `sync.cli.invalid_url` with its reason; anything else is
/// `sync.cli.unreachable`.
pub(crate) fn opening(error: sync_core::Error) -> CliError {
    match error.code() {
        sync_core::ErrorCode::NotASyncDatabase | sync_core::ErrorCode::StrandedJournal => {
            CliError::from(error)
        }
        // A dialect with its own opener parses its URL there: a URL it
        // cannot read is the operator's to fix, not an unreachable server.
        sync_core::ErrorCode::InvalidArgument if error.get_detail("argument") == Some("url") => {
            CliError::new(CliCode::InvalidUrl)
                .detail("reason", error.get_detail("reason").unwrap_or("unparsable"))
        }
        _ => unreachable(&error),
    }
}

/// The parameters of a SQLite URL.
#[derive(Debug, Default)]
struct SqliteParameters {
    synchronous: Synchronous,
    page_size: Option<u32>,
    mmap_size: Option<u64>,
}

/// Splits the `synchronous`, `page_size` and `mmap_size` parameters off a
/// SQLite path (after its last `?`); no other parameter is known.
fn sqlite_parameters(text: &str) -> Result<(&str, SqliteParameters), &'static str> {
    let mut options = SqliteParameters::default();
    let Some((path, query)) = text.rsplit_once('?') else {
        return Ok((text, options));
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("synchronous", value)) => {
                options.synchronous = Synchronous::parse(value).ok_or("bad_synchronous")?;
            }
            Some(("page_size", value)) => {
                let size = value
                    .parse()
                    .ok()
                    .filter(|&size| sync_sqlite::valid_page_size(size))
                    .ok_or("bad_page_size")?;
                options.page_size = Some(size);
            }
            Some(("mmap_size", value)) => {
                let size = value.parse().map_err(|_| "bad_mmap_size")?;
                options.mmap_size = Some(size);
            }
            _ => return Err("unknown_parameter"),
        }
    }
    Ok((path, options))
}

fn open_postgres(url: &str, schema: Option<&str>) -> CliResult<PostgresStorage> {
    if let Some(schema) = schema {
        create_schema(url, schema)?;
    }
    // Every command announces its commits, so the sockets of any `serve`
    // process on the same database hear of them (a one-shot `sync` push
    // included).
    let config = PostgresConfig {
        schema: schema.map(str::to_owned),
        announce_commits: true,
        ..PostgresConfig::default()
    };
    PostgresStorage::connect(url, config).map_err(opening)
}

/// `CREATE SCHEMA IF NOT EXISTS` on a probe connection.
pub(crate) fn create_schema(url: &str, schema: &str) -> CliResult<()> {
    let config: postgres::Config = url
        .parse()
        .map_err(|_| CliError::new(CliCode::InvalidUrl).detail("reason", "unparsable"))?;
    let mut client = config
        .connect(postgres::NoTls)
        .map_err(|error| unreachable(&sync_postgres::backend_error(error)))?;
    // An existing schema needs no `CREATE`: a hot standby, a read-only
    // session or a role without `CREATE` on the database can still use it.
    let exists: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&schema],
        )
        .and_then(|row| row.try_get(0))
        .map_err(|error| unreachable(&sync_postgres::backend_error(error)))?;
    if exists {
        return Ok(());
    }
    let statement = format!(
        "CREATE SCHEMA IF NOT EXISTS {}",
        sync_schema::quote_ident(schema)
    );
    match client.batch_execute(&statement) {
        Ok(()) => Ok(()),
        // Two first uses at once: the loser of `IF NOT EXISTS` hits the
        // catalog's unique index; the schema exists, which is all we need.
        Err(error) if created_concurrently(&error) => Ok(()),
        Err(error) => Err(unreachable(&sync_postgres::backend_error(error))),
    }
}

fn created_concurrently(error: &postgres::Error) -> bool {
    error.code().is_some_and(|state| {
        *state == postgres::error::SqlState::UNIQUE_VIOLATION
            || *state == postgres::error::SqlState::DUPLICATE_SCHEMA
    })
}

/// `sync.cli.unreachable`: the driver's innermost words in `reason` (the
/// password masked), and for a coded storage error its code in
/// `storage_code` plus its details (e.g. `cause`).
pub(crate) fn unreachable(error: &(dyn std::error::Error + 'static)) -> CliError {
    let mut cli = CliError::new(CliCode::Unreachable).detail("reason", root_cause(error));
    if let Some(coded) = error.downcast_ref::<sync_core::Error>() {
        cli = cli.detail("storage_code", coded.code().as_str());
        for (key, value) in coded.details() {
            if key != "reason" {
                cli = cli.detail(key, value);
            }
        }
    }
    cli.with_chain(error)
}

/// Splits the `schema` parameter off a Postgres URL and adds the default
/// connect timeout.
fn postgres_url(text: &str) -> Result<DatabaseUrl, &'static str> {
    // The driver's credentials run to the first `@`: a `?` before it is
    // part of the password, not the start of the query.
    let host_start = text.find("://").map_or(0, |i| i + 3);
    let host_start = text[host_start..]
        .find('@')
        .map_or(host_start, |at| host_start + at + 1);
    let (base, query) = match text[host_start..].split_once('?') {
        Some((tail, query)) => (&text[..host_start + tail.len()], query),
        None => (text, ""),
    };
    check_authority(&text[host_start..base.len()])?;
    let mut schema = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("schema", value)) => {
                if schema.is_some() {
                    return Err("duplicate_schema");
                }
                schema = Some(schema_name(value)?);
            }
            _ => kept.push(pair),
        }
    }
    let timeout = format!("connect_timeout={DEFAULT_CONNECT_TIMEOUT_S}");
    if !kept.iter().any(|p| p.starts_with("connect_timeout=")) {
        kept.push(&timeout);
    }
    let url = format!("{base}?{}", kept.join("&"));
    url.parse::<postgres::Config>().map_err(|_| "unparsable")?;
    Ok(DatabaseUrl::Postgres { url, schema })
}

/// Longest identifier Postgres keeps (`NAMEDATALEN - 1` bytes); a longer
/// one is silently truncated, so two long names could meet in one schema.
const MAX_SCHEMA_BYTES: usize = 63;

/// The decoded `schema=` value: non-empty, at most 63 bytes, no NUL, and
/// not in the `pg_` namespace Postgres reserves for itself.
fn schema_name(value: &str) -> Result<String, &'static str> {
    let name = percent_decode(value).ok_or("bad_schema")?;
    if name.is_empty() || name.contains('\0') {
        return Err("bad_schema");
    }
    if name.len() > MAX_SCHEMA_BYTES {
        return Err("schema_too_long");
    }
    if name.to_ascii_lowercase().starts_with("pg_") {
        return Err("reserved_schema");
    }
    Ok(name)
}

/// An `@` after the one that ends the credentials (in the host or the
/// path, before the query) is a password (or user) with an unencoded `@`:
/// the driver would take the rest as the host and report a failed host
/// lookup instead — and print part of the password as a host name.
fn check_authority(after_credentials: &str) -> Result<(), &'static str> {
    if after_credentials.contains('@') {
        return Err("unencoded_at");
    }
    Ok(())
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(path: &str, synchronous: Synchronous) -> DatabaseUrl {
        DatabaseUrl::Sqlite {
            path: PathBuf::from(path),
            synchronous,
            page_size: None,
            mmap_size: None,
        }
    }

    fn invalid_reason(url: &str) -> String {
        let error = DatabaseUrl::parse(url).unwrap_err();
        assert_eq!(error.code(), "sync.cli.invalid_url", "{url}");
        error.details().get("reason").cloned().unwrap_or_default()
    }

    #[test]
    fn postgres_urls_with_a_doubtful_schema_or_authority_are_refused() {
        let base = "postgres://u@h/db";
        let long = "x".repeat(64);
        for (url, reason) in [
            (format!("{base}?schema=a&schema=b"), "duplicate_schema"),
            (format!("{base}?schema={long}"), "schema_too_long"),
            (format!("{base}?schema=pg_catalog"), "reserved_schema"),
            (format!("{base}?schema=PG_x"), "reserved_schema"),
            (format!("{base}?schema=a%00b"), "bad_schema"),
            (format!("{base}?schema="), "bad_schema"),
            ("postgres://u:p@ss@h/db".to_owned(), "unencoded_at"),
            ("postgres://u@x:p@h/db?schema=s".to_owned(), "unencoded_at"),
        ] {
            assert_eq!(invalid_reason(&url), reason, "{url}");
        }
        let ok = DatabaseUrl::parse(&format!(
            "postgres://u:p%40ss@h/db?schema={}",
            "x".repeat(63)
        ));
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn sqlite_urls_name_a_path() {
        assert_eq!(
            DatabaseUrl::parse("sqlite:data/x.db").unwrap(),
            sqlite("data/x.db", Synchronous::Full)
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:///tmp/x.db").unwrap(),
            sqlite("/tmp/x.db", Synchronous::Full)
        );
        let error = DatabaseUrl::parse("sqlite:").unwrap_err();
        assert_eq!(error.code(), "sync.cli.invalid_url");
    }

    #[test]
    fn sqlite_page_size_is_sqlites_own_unless_asked_for() {
        assert_eq!(
            DatabaseUrl::parse("sqlite:x.db?page_size=512&synchronous=normal").unwrap(),
            DatabaseUrl::Sqlite {
                path: PathBuf::from("x.db"),
                synchronous: Synchronous::Normal,
                page_size: Some(512),
                mmap_size: None,
            }
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:x.db?page_size=65536").unwrap(),
            DatabaseUrl::Sqlite {
                path: PathBuf::from("x.db"),
                synchronous: Synchronous::Full,
                page_size: Some(65_536),
                mmap_size: None,
            }
        );
    }

    /// The reader map size of a storage opened through `url`, for writing
    /// and read-only.
    fn opened_mmap_sizes(url: &str) -> (u64, u64) {
        let parsed = DatabaseUrl::parse(url).unwrap();
        let size = |db: Database| match &db.backend {
            Backend::Sqlite(storage) => storage.reader_mmap_size().unwrap(),
            _ => panic!("{url} did not open SQLite"),
        };
        let written = size(parsed.open().unwrap());
        (written, size(parsed.open_read_only().unwrap()))
    }

    #[test]
    fn the_mmap_size_parameter_reaches_the_readers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let default = sync_sqlite::DEFAULT_READER_MMAP_SIZE;
        let url = format!("sqlite:{}", path.display());
        assert_eq!(opened_mmap_sizes(&url), (default, default));
        assert_eq!(opened_mmap_sizes(&format!("{url}?mmap_size=0")), (0, 0));
        assert_eq!(
            opened_mmap_sizes(&format!("{url}?mmap_size=1048576")),
            (1 << 20, 1 << 20)
        );
    }

    #[test]
    fn sqlite_mmap_size_is_the_storage_default_unless_asked_for() {
        assert_eq!(
            DatabaseUrl::parse("sqlite:x.db?mmap_size=0").unwrap(),
            DatabaseUrl::Sqlite {
                path: PathBuf::from("x.db"),
                synchronous: Synchronous::Full,
                page_size: None,
                mmap_size: Some(0),
            }
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:x.db?synchronous=normal&mmap_size=1073741824").unwrap(),
            DatabaseUrl::Sqlite {
                path: PathBuf::from("x.db"),
                synchronous: Synchronous::Normal,
                page_size: None,
                mmap_size: Some(1 << 30),
            }
        );
        for url in [
            "sqlite:x.db?mmap_size=",
            "sqlite:x.db?mmap_size=-1",
            "sqlite:x.db?mmap_size=256MiB",
            "sqlite:x.db?mmap_size=18446744073709551616",
        ] {
            assert_eq!(invalid_reason(url), "bad_mmap_size", "{url}");
        }
    }

    #[test]
    fn sqlite_synchronous_is_full_unless_normal_is_asked_for() {
        assert_eq!(
            DatabaseUrl::parse("sqlite:x.db?synchronous=normal").unwrap(),
            sqlite("x.db", Synchronous::Normal)
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:x.db?synchronous=FULL").unwrap(),
            sqlite("x.db", Synchronous::Full)
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:a?b.db?synchronous=normal").unwrap(),
            sqlite("a?b.db", Synchronous::Normal)
        );
        for (url, reason) in [
            ("sqlite:x.db?synchronous=off", "bad_synchronous"),
            ("sqlite:x.db?page_size=1000", "bad_page_size"),
            ("sqlite:x.db?page_size=256", "bad_page_size"),
            ("sqlite:x.db?page_size=", "bad_page_size"),
            ("sqlite:x.db?page_size=-512", "bad_page_size"),
            ("sqlite:x.db?mode=ro", "unknown_parameter"),
            ("sqlite:?synchronous=normal", "empty_path"),
        ] {
            let error = DatabaseUrl::parse(url).unwrap_err();
            assert_eq!(error.code(), "sync.cli.invalid_url", "{url}");
            assert_eq!(
                error.details().get("reason").map(String::as_str),
                Some(reason),
                "{url}"
            );
        }
    }

    #[test]
    fn the_cli_registry_is_consistent() {
        assert_eq!(sync_schema::check_registry(DIALECTS), Ok(()));
        let names: Vec<&str> = DIALECTS.iter().map(|e| e.name()).collect();
        assert_eq!(names, ["sqlite", "postgres", "mariadb"]);
    }

    /// A dialect registered with its own opener: the shadow of SQLite.
    struct ShadowSql;

    impl sync_schema::SqlDialect for ShadowSql {
        fn name(&self) -> &'static str {
            "shadow"
        }
        fn sql_type(&self, t: sync_core::ColumnType) -> &'static str {
            sync_sqlite::SqliteSql.sql_type(t)
        }
        fn internal_type(&self, r: sync_schema::InternalRole) -> &'static str {
            sync_sqlite::SqliteSql.internal_type(r)
        }
        fn placeholder(&self, n: usize) -> String {
            sync_sqlite::SqliteSql.placeholder(n)
        }
    }

    fn open_shadow(url: &str, read_only: bool) -> sync_core::Result<Arc<dyn OpenedStorage>> {
        let path = url.strip_prefix("shadow:").unwrap_or(url);
        let storage = if read_only {
            SqliteStorage::open_read_only(path, SqliteConfig::default())?
        } else {
            SqliteStorage::open(path, SqliteConfig::default())?
        };
        Ok(Arc::new(storage))
    }

    #[test]
    fn a_registered_dialect_opens_through_its_own_opener() {
        let entries = [
            DIALECTS[0],
            DIALECTS[1],
            DialectEntry {
                sql: Dialect::new(&ShadowSql),
                url_schemes: &["shadow"],
                hooks: UrlHooks::Open(open_shadow),
            },
        ];
        assert_eq!(sync_schema::check_registry(&entries), Ok(()));
        let dir = tempfile::tempdir().unwrap();
        let text = format!("shadow:{}", dir.path().join("x.db").display());
        let url = DatabaseUrl::parse_with(&entries, &text).unwrap();
        assert_eq!(url.dialect().as_str(), "shadow");
        assert_eq!(url.describe(), text);
        let db = url.open().unwrap();
        assert_eq!(db.dialect().as_str(), "shadow");
        let observed = db.observe_tables(&["tasks".to_owned()]).unwrap();
        assert!(!observed.get("tasks").is_some_and(|t| t.exists));
        assert_eq!(db.sqlite_synchronous().unwrap(), None);
        let error = DatabaseUrl::parse_with(&entries, "oracle://x/y").unwrap_err();
        assert_eq!(
            error.details().get("reason").map(String::as_str),
            Some("unknown_scheme")
        );
        // The shipped list does not know the shadow scheme: no fallback.
        assert_eq!(
            DatabaseUrl::parse(&text).unwrap_err().code(),
            "sync.cli.invalid_url"
        );
    }

    #[test]
    fn other_schemes_are_invalid() {
        for url in ["oracle://x/y", "x.db", ""] {
            assert_eq!(
                DatabaseUrl::parse(url).unwrap_err().code(),
                "sync.cli.invalid_url"
            );
        }
    }

    #[test]
    fn the_schema_parameter_is_split_off() {
        let parsed =
            DatabaseUrl::parse("postgres://u@h:5432/db?schema=a%20b&sslmode=disable").unwrap();
        assert_eq!(
            parsed,
            DatabaseUrl::Postgres {
                url: "postgres://u@h:5432/db?sslmode=disable&connect_timeout=10".to_owned(),
                schema: Some("a b".to_owned()),
            }
        );
        let plain = DatabaseUrl::parse("postgresql://u@h/db?connect_timeout=3").unwrap();
        assert_eq!(
            plain,
            DatabaseUrl::Postgres {
                url: "postgresql://u@h/db?connect_timeout=3".to_owned(),
                schema: None,
            }
        );
    }

    #[test]
    fn passwords_are_not_shown() {
        let url =
            DatabaseUrl::parse("postgres://u:secret@h/db?sslmode=disable&password=other").unwrap();
        let shown = url.describe();
        assert!(
            !shown.contains("secret") && !shown.contains("other"),
            "{shown}"
        );
    }
}
