//! Construction options of [`MariadbStorage`](crate::MariadbStorage) and
//! the URL a storage connects to (`docs/design/mariadb.md` §2).

use std::sync::Arc;
use std::time::Duration;

use mysql::consts::CapabilityFlags;
use mysql::{Opts, OptsBuilder};
use sync_core::limits::DEFAULT_POOL_WAIT_MS;
use sync_core::segments::SegmentLimits;
use sync_core::{Clock, Error, Result, SystemClock};

use crate::dialect::URL_SCHEMES;

/// Default pool size: one pool of 16 serves pushes, pulls and pool reads.
pub const DEFAULT_POOL_SIZE: u32 = 16;

/// Default wait for the migration lock (`GET_LOCK`) and for metadata locks
/// (`lock_wait_timeout`) of the migrator's connection, in ms.
pub const DEFAULT_MIGRATION_LOCK_TIMEOUT_MS: u64 = 60_000;

/// Default `innodb_lock_wait_timeout` of pooled connections in seconds
/// (the server's own default).
pub const DEFAULT_ROW_LOCK_WAIT_SECONDS: u64 = 50;

/// Default `lock_wait_timeout` (metadata locks) of pooled connections in
/// seconds: never the server's 86 400.
pub const DEFAULT_METADATA_LOCK_WAIT_SECONDS: u64 = 60;

/// How long opening one connection may take before the server counts as
/// unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Configuration of a MariaDB storage instance.
#[derive(Debug, Clone)]
pub struct MariadbConfig {
    /// `max_size` of the pool.
    pub pool_size: u32,
    /// Pool checkout wait (ms); a timeout is `sync.storage.busy`.
    pub pool_wait_ms: u64,
    /// Wait for a row lock (the partition write lock among them) in ms,
    /// set per connection as `innodb_lock_wait_timeout` rounded up to whole
    /// seconds; a timeout is `sync.storage.busy`. `None` keeps the server
    /// default of 50 s.
    pub push_lock_timeout_ms: Option<u64>,
    /// Wait for the migration lock and for metadata locks of the migrator
    /// (ms), rounded up to whole seconds.
    pub migration_lock_timeout_ms: u64,
    /// Source of installation timestamps of checkpoints declared through
    /// `ensure_schema`.
    pub clock: Arc<dyn Clock>,
    /// The limits of the segment store in the database
    /// (`ServerStorage::segment_store`).
    pub segment_limits: SegmentLimits,
}

impl Default for MariadbConfig {
    fn default() -> Self {
        Self {
            pool_size: DEFAULT_POOL_SIZE,
            pool_wait_ms: DEFAULT_POOL_WAIT_MS,
            push_lock_timeout_ms: None,
            migration_lock_timeout_ms: DEFAULT_MIGRATION_LOCK_TIMEOUT_MS,
            clock: Arc::new(SystemClock),
            segment_limits: SegmentLimits::default(),
        }
    }
}

impl MariadbConfig {
    /// `innodb_lock_wait_timeout` of every pooled connection, in seconds.
    pub(crate) fn row_lock_wait_seconds(&self) -> u64 {
        self.push_lock_timeout_ms
            .map_or(DEFAULT_ROW_LOCK_WAIT_SECONDS, ms_to_seconds)
    }
}

/// Whole seconds of `ms`, rounded up, at least 1 (MariaDB's lock waits are
/// set in seconds; 0 would mean "do not wait").
pub(crate) fn ms_to_seconds(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

/// Where a storage connects: the parsed URL.
#[derive(Debug, Clone)]
pub struct MariadbUrl {
    opts: Opts,
    database: String,
}

impl MariadbUrl {
    /// Parses `mariadb://user[:password]@host[:port]/database` (or the same
    /// with `mysql://`). The database is required: every table of the
    /// storage lives in it. A bad URL is `sync.storage.invalid_argument`
    /// (`argument = url`).
    pub fn parse(url: &str) -> Result<Self> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(Error::invalid_argument("url", "unparsable"));
        };
        if !URL_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) {
            return Err(Error::invalid_argument("url", "unknown_scheme"));
        }
        let opts = Opts::from_url(&format!("mysql://{rest}"))
            .map_err(|e| Error::invalid_argument("url", "unparsable").source_error(e))?;
        let database = match opts.get_db_name() {
            Some(name) if !name.is_empty() => name.to_owned(),
            _ => return Err(Error::invalid_argument("url", "database_missing")),
        };
        Ok(Self { opts, database })
    }

    /// The database (schema) the storage works in.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// The same server and credentials, another database.
    pub fn with_database(&self, database: &str) -> Self {
        let opts = OptsBuilder::from_opts(self.opts.clone()).db_name(Some(database));
        Self {
            opts: opts.into(),
            database: database.to_owned(),
        }
    }

    /// The same server and database, logged in as another account.
    pub fn with_account(&self, user: &str, password: &str) -> Self {
        let opts = OptsBuilder::from_opts(self.opts.clone())
            .user(Some(user))
            .pass(Some(password));
        Self {
            opts: opts.into(),
            database: self.database.clone(),
        }
    }

    /// The same server and credentials without a database selected (for
    /// creating or dropping databases).
    pub(crate) fn server_opts(&self) -> Opts {
        OptsBuilder::from_opts(self.connection_opts())
            .db_name(None::<String>)
            .into()
    }

    /// Driver options of every connection: `CLIENT_FOUND_ROWS` (an `UPDATE`
    /// reports the rows it matched, not only those it changed), TCP only,
    /// a bounded connect time, no driver-side init statements (the session
    /// is set up and checked by [`crate::session::setup`]).
    pub(crate) fn connection_opts(&self) -> Opts {
        OptsBuilder::from_opts(self.opts.clone())
            .additional_capabilities(CapabilityFlags::CLIENT_FOUND_ROWS)
            .prefer_socket(false)
            .tcp_connect_timeout(Some(CONNECT_TIMEOUT))
            .init(Vec::<String>::new())
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_schemes_parse_and_the_database_is_required() {
        let url = MariadbUrl::parse("mariadb://root@127.0.0.1:3306/test").expect("parses");
        assert_eq!(url.database(), "test");
        let url = MariadbUrl::parse("mysql://app:secret@db:3307/app_db").expect("parses");
        assert_eq!(url.database(), "app_db");
        assert_eq!(url.with_database("other").database(), "other");
        let other = url.with_account("reader", "pw").connection_opts();
        assert_eq!(other.get_user(), Some("reader"));
        assert_eq!(other.get_pass(), Some("pw"));
        assert_eq!(other.get_db_name(), Some("app_db"));
        for bad in [
            "postgres://root@127.0.0.1/test",
            "mariadb://root@127.0.0.1:3306",
            "mariadb://root@127.0.0.1:3306/",
            "not a url",
        ] {
            let err = MariadbUrl::parse(bad).expect_err(bad);
            assert_eq!(err.code(), sync_core::ErrorCode::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn lock_waits_round_up_to_whole_seconds() {
        assert_eq!(ms_to_seconds(1), 1);
        assert_eq!(ms_to_seconds(1000), 1);
        assert_eq!(ms_to_seconds(1001), 2);
        assert_eq!(ms_to_seconds(0), 1);
        let config = MariadbConfig {
            push_lock_timeout_ms: Some(2500),
            ..MariadbConfig::default()
        };
        assert_eq!(config.row_lock_wait_seconds(), 3);
        assert_eq!(MariadbConfig::default().row_lock_wait_seconds(), 50);
    }
}
