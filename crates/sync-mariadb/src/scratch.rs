//! Throwaway databases for tests and the conformance harness: each
//! [`ScratchDatabase`] is a fresh, empty database on the server, dropped
//! when the value is dropped.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sync_core::Result;

use crate::config::MariadbUrl;
use crate::databases::{create_database, drop_database};
use crate::errors::connect_error;

/// The variable naming the server of the tests and the harness.
pub const URL_VARIABLE: &str = "SYNCSTORE_MARIADB_URL";

/// The server tried when [`URL_VARIABLE`] is unset.
pub const DEFAULT_URL: &str = "mysql://root@127.0.0.1:3306/test";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The URL of [`URL_VARIABLE`], else [`DEFAULT_URL`].
pub fn url_from_env() -> String {
    std::env::var(URL_VARIABLE).unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// A fresh database `sync_scratch_<…>` (`utf8mb4_nopad_bin`), dropped on drop.
pub struct ScratchDatabase {
    url: MariadbUrl,
}

impl fmt::Debug for ScratchDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScratchDatabase({})", self.url.database())
    }
}

impl ScratchDatabase {
    /// Creates a database on the server of `base` (its credentials; its
    /// database is only used to log in). An unreachable server is
    /// `sync.storage.backend` with `cause = unreachable`.
    pub fn create(base: &MariadbUrl) -> Result<Self> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let name = format!(
            "sync_scratch_{:x}_{:x}_{:x}",
            nanos & 0xffff_ffff_ffff,
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        Ok(Self {
            url: create_database(base, &name)?,
        })
    }

    /// Creates a database on the server of [`url_from_env`].
    pub fn from_env() -> Result<Self> {
        Self::create(&MariadbUrl::parse(&url_from_env())?)
    }

    /// The URL of the database.
    pub fn url(&self) -> &MariadbUrl {
        &self.url
    }

    /// A plain driver connection to the database, without the storage's
    /// session set-up (a fence-unaware writer, an operator's client).
    pub fn raw(&self) -> Result<mysql::Conn> {
        mysql::Conn::new(self.url.connection_opts()).map_err(connect_error)
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        // Best effort: a database left behind is only clutter.
        let _ = drop_database(&self.url, self.url.database());
    }
}
