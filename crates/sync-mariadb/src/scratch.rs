//! Throwaway databases for tests and the conformance harness: each
//! [`ScratchDatabase`] is a fresh, empty database on the server, dropped
//! when the value is dropped.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use mysql::prelude::Queryable;
use sync_core::Result;

use crate::config::MariadbUrl;
use crate::databases::{create_database, drop_database};
use crate::errors::{connect_error, db};

/// The variable naming the server of the tests and the harness.
pub const URL_VARIABLE: &str = "SYNCSTORE_MARIADB_URL";

/// The server tried when [`URL_VARIABLE`] is unset.
pub const DEFAULT_URL: &str = "mysql://root@127.0.0.1:3306/test";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The URL of [`URL_VARIABLE`], else [`DEFAULT_URL`].
pub fn url_from_env() -> String {
    std::env::var(URL_VARIABLE).unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// `<prefix>_<time>_<process>_<counter>`: a name no other process or call
/// of this one produces (databases, throwaway accounts).
pub(crate) fn fresh_name(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}_{:x}_{:x}_{:x}",
        nanos & 0xffff_ffff_ffff,
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
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
        let name = fresh_name("sync_scratch");
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

/// A throwaway account granted only `SELECT, INSERT, UPDATE, DELETE` on one
/// database — a writer that is not the storage (an application's or an old
/// binary's account). Dropped by [`DmlAccount::remove`], or on drop.
pub struct DmlAccount {
    admin: MariadbUrl,
    url: MariadbUrl,
    user: String,
    removed: bool,
}

impl fmt::Debug for DmlAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DmlAccount({} on {})", self.user, self.url.database())
    }
}

impl DmlAccount {
    /// Creates the account `sync_dml_<…>`@`%` with a random password and
    /// grants it DML on the database of `database` (whose credentials must
    /// allow `CREATE USER` and `GRANT`).
    pub fn create(database: &MariadbUrl) -> Result<Self> {
        let mut admin = mysql::Conn::new(database.connection_opts()).map_err(connect_error)?;
        let user = fresh_name("sync_dml");
        let password: Option<String> = admin.query_first("SELECT SHA2(UUID(), 256)").map_err(db)?;
        let password = password.unwrap_or_default();
        admin
            .query_drop(format!(
                "CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'"
            ))
            .map_err(db)?;
        let account = Self {
            admin: database.clone(),
            url: database.with_account(&user, &password),
            user,
            removed: false,
        };
        admin
            .query_drop(format!(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON `{}`.* TO '{}'@'%'",
                database.database(),
                account.user
            ))
            .map_err(db)?;
        Ok(account)
    }

    /// The account's name.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The database's URL logged in as this account.
    pub fn url(&self) -> &MariadbUrl {
        &self.url
    }

    /// A plain driver connection to the database as this account.
    pub fn raw(&self) -> Result<mysql::Conn> {
        mysql::Conn::new(self.url.connection_opts()).map_err(connect_error)
    }

    /// Drops the account now, reporting a failure.
    pub fn remove(mut self) -> Result<()> {
        self.removed = true;
        self.drop_user()
    }

    fn drop_user(&self) -> Result<()> {
        let mut admin = mysql::Conn::new(self.admin.connection_opts()).map_err(connect_error)?;
        admin
            .query_drop(format!("DROP USER IF EXISTS '{}'@'%'", self.user))
            .map_err(db)
    }
}

impl Drop for DmlAccount {
    fn drop(&mut self) {
        // Best effort: an account left behind can reach only a dropped
        // database.
        if !self.removed {
            let _ = self.drop_user();
        }
    }
}
