//! Database URLs and opening a storage from one.
//!
//! - `sqlite:PATH` (also `sqlite://PATH`): the SQLite file at `PATH`,
//!   created when absent (its directory must exist).
//! - `postgres://…` / `postgresql://…`: a Postgres database. An optional
//!   query parameter `schema=NAME` selects the schema every connection works
//!   in (`SET search_path`); the schema is created when absent, as SQLite
//!   creates its file. Every other parameter goes to the driver unchanged
//!   (so `options=-csearch_path%3DNAME` also works, but then the schema must
//!   exist). Without `connect_timeout` the CLI adds `connect_timeout=10`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sync_core::ServerStorage;
use sync_postgres::{PostgresConfig, PostgresStorage};
use sync_schema::{Dialect, ObservedTables};
use sync_sqlite::{SqliteConfig, SqliteStorage};

use crate::error::{root_cause, CliCode, CliError, CliResult};

/// Environment variable holding the default database URL.
pub const DATABASE_URL_ENV: &str = "SYNCSTORE_DATABASE_URL";
/// The database URL when neither `--db` nor the environment names one.
pub const DEFAULT_DATABASE_URL: &str = "sqlite:syncstore.db";
/// Seconds the CLI waits for a Postgres connection unless the URL says otherwise.
const DEFAULT_CONNECT_TIMEOUT_S: u32 = 10;

/// A parsed `--db` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A Postgres database, optionally one schema of it.
    Postgres {
        /// The driver URL (without the `schema` parameter).
        url: String,
        /// The schema selected by the `schema` parameter.
        schema: Option<String>,
    },
}

impl DatabaseUrl {
    /// Parses a URL; anything else is `sync.cli.invalid_url`.
    pub fn parse(text: &str) -> CliResult<Self> {
        let invalid = |reason: &str| CliError::new(CliCode::InvalidUrl).detail("reason", reason);
        if let Some(rest) = text.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(invalid("empty_path"));
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return postgres_url(text).map_err(&invalid);
        }
        Err(invalid("unknown_scheme"))
    }

    /// The URL resolved from `--db`, else `SYNCSTORE_DATABASE_URL`, else the default.
    pub fn resolve(explicit: Option<&str>) -> CliResult<Self> {
        match explicit {
            Some(url) => Self::parse(url),
            None => match std::env::var(DATABASE_URL_ENV) {
                Ok(url) if !url.is_empty() => Self::parse(&url),
                _ => Self::parse(DEFAULT_DATABASE_URL),
            },
        }
    }

    /// Where the database is, for people (never shows a password).
    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite(path) => format!("sqlite:{}", path.display()),
            Self::Postgres { url, schema } => {
                let shown = redact_password(url);
                match schema {
                    Some(schema) => format!("{shown} (schema {schema})"),
                    None => shown,
                }
            }
        }
    }

    /// The SQL dialect of this database.
    pub fn dialect(&self) -> Dialect {
        match self {
            Self::Sqlite(_) => Dialect::Sqlite,
            Self::Postgres { .. } => Dialect::Postgres,
        }
    }

    /// Opens a storage instance (one "process" in the RFC 0007 sense: its
    /// own pools and its own ensured schema). Failures to open or connect
    /// are `sync.cli.unreachable` with the driver's reason in `details`.
    pub fn open(&self) -> CliResult<Database> {
        let backend = match self {
            Self::Sqlite(path) => Backend::Sqlite(Arc::new(open_sqlite(path)?)),
            Self::Postgres { url, schema } => {
                Backend::Postgres(Arc::new(open_postgres(url, schema.as_deref())?))
            }
        };
        tracing::debug!(database = %self.describe(), "opened storage");
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

#[derive(Debug, Clone)]
enum Backend {
    Sqlite(Arc<SqliteStorage>),
    Postgres(Arc<PostgresStorage>),
}

impl Database {
    /// The storage.
    pub fn storage(&self) -> &dyn ServerStorage {
        match &self.backend {
            Backend::Sqlite(storage) => storage.as_ref(),
            Backend::Postgres(storage) => storage.as_ref(),
        }
    }

    /// The storage as a shared handle (what the engine holds).
    pub fn shared_storage(&self) -> Arc<dyn ServerStorage> {
        match &self.backend {
            Backend::Sqlite(storage) => storage.clone(),
            Backend::Postgres(storage) => storage.clone(),
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

    /// Read-only introspection of the named tables (absent ones included),
    /// as `ensure_schema` would observe them (`schema-and-migrations.md` §7.1).
    pub fn observe_tables(&self, tables: &[String]) -> sync_core::Result<ObservedTables> {
        match &self.backend {
            Backend::Sqlite(storage) => storage.observe_tables(tables),
            Backend::Postgres(storage) => storage.observe_tables(tables),
        }
    }
}

fn open_sqlite(path: &Path) -> CliResult<SqliteStorage> {
    SqliteStorage::open(path, SqliteConfig::default()).map_err(|error| unreachable(&error))
}

fn open_postgres(url: &str, schema: Option<&str>) -> CliResult<PostgresStorage> {
    if let Some(schema) = schema {
        create_schema(url, schema)?;
    }
    let config = PostgresConfig {
        schema: schema.map(str::to_owned),
        ..PostgresConfig::default()
    };
    PostgresStorage::connect(url, config).map_err(|error| unreachable(&error))
}

/// `CREATE SCHEMA IF NOT EXISTS` on a probe connection.
fn create_schema(url: &str, schema: &str) -> CliResult<()> {
    let config: postgres::Config = url
        .parse()
        .map_err(|_| CliError::new(CliCode::InvalidUrl).detail("reason", "unparsable"))?;
    let mut client = config
        .connect(postgres::NoTls)
        .map_err(|error| unreachable(&error))?;
    client
        .batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {}",
            sync_schema::quote_ident(schema)
        ))
        .map_err(|error| unreachable(&error))
}

fn unreachable(error: &(dyn std::error::Error + 'static)) -> CliError {
    let mut cli = CliError::new(CliCode::Unreachable).detail("reason", root_cause(error));
    if let Some(coded) = error.downcast_ref::<sync_core::Error>() {
        cli = cli.detail("cause", coded.code().as_str());
    }
    cli
}

/// Splits the `schema` parameter off a Postgres URL and adds the default
/// connect timeout.
fn postgres_url(text: &str) -> Result<DatabaseUrl, &'static str> {
    let (base, query) = match text.split_once('?') {
        Some((base, query)) => (base, query),
        None => (text, ""),
    };
    let mut schema = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("schema", value)) => {
                let name = percent_decode(value).ok_or("bad_schema")?;
                if name.is_empty() {
                    return Err("bad_schema");
                }
                schema = Some(name);
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

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_name_a_path() {
        assert_eq!(
            DatabaseUrl::parse("sqlite:data/x.db").unwrap(),
            DatabaseUrl::Sqlite(PathBuf::from("data/x.db"))
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:///tmp/x.db").unwrap(),
            DatabaseUrl::Sqlite(PathBuf::from("/tmp/x.db"))
        );
        let error = DatabaseUrl::parse("sqlite:").unwrap_err();
        assert_eq!(error.code(), "sync.cli.invalid_url");
    }

    #[test]
    fn other_schemes_are_invalid() {
        for url in ["mysql://x/y", "x.db", ""] {
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
        assert_eq!(
            redact_password("postgres://u:secret@h/db?x=1"),
            "postgres://u:***@h/db?x=1"
        );
        assert_eq!(redact_password("postgres://u@h/db"), "postgres://u@h/db");
    }
}
