//! Finding the PostgreSQL server the tests use, and failing loudly when it is absent.

use anyhow::{bail, Result};

/// Environment variable naming the test server.
pub const PG_URL_ENV: &str = "SYNCSTORE_PG_URL";
/// Default test server.
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The URL from `--pg-url`, else `SYNCSTORE_PG_URL`, else the default.
pub fn url(explicit: Option<&str>) -> String {
    explicit
        .map(str::to_owned)
        .or_else(|| std::env::var(PG_URL_ENV).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| DEFAULT_PG_URL.to_owned())
}

/// Connects once and asks for the server version; an error names the URL and how to start a server.
pub fn require(url: &str) -> Result<String> {
    let attempt = postgres::Client::connect(url, postgres::NoTls).and_then(|mut client| {
        client
            .query_one("SHOW server_version", &[])
            .map(|row| row.get::<_, String>(0))
    });
    match attempt {
        Ok(version) => Ok(version),
        Err(error) => bail!(
            "PostgreSQL is not reachable at {url} ({error}).\n\
             The Postgres tests need a real server. Start the local one with\n\
             \n    pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n\
             \nor point {PG_URL_ENV} at a server you can create schemas in."
        ),
    }
}
