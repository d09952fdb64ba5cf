//! Finding the MariaDB server the tests use, and failing loudly when it is absent.

use anyhow::{bail, Result};
use sync_mariadb::harness::MariadbHarness;

/// Environment variable naming the test server.
pub const MARIADB_URL_ENV: &str = sync_mariadb::scratch::URL_VARIABLE;

/// The URL from `--mariadb-url`, else `SYNCSTORE_MARIADB_URL`, else the default.
pub fn url(explicit: Option<&str>) -> String {
    explicit
        .map(str::to_owned)
        .or_else(|| {
            std::env::var(MARIADB_URL_ENV)
                .ok()
                .filter(|u| !u.is_empty())
        })
        .unwrap_or_else(|| sync_mariadb::scratch::DEFAULT_URL.to_owned())
}

/// Connects once with the dialect's session set-up (which refuses a server
/// that is not MariaDB 10.6 or newer); an error names how to start a server.
pub fn require(url: &str) -> Result<()> {
    match MariadbHarness::connect(url) {
        Ok(_) => Ok(()),
        Err(error) => bail!(
            "MariaDB is not reachable: {error}.\n\
             The MariaDB tests (the conformance suite included) need a real server \
             whose account may create databases and accounts."
        ),
    }
}
