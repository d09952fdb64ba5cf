//! The fresh database the demo runs on: by default a new SQLite file in a
//! new temporary directory (kept afterwards, so it can be inspected); with
//! `--db sqlite:PATH` that file, which must not exist yet or be empty; with
//! `--db postgres://…` a new schema `syncstore_demo_<random>` in that
//! database (also kept); with the URL of another dialect (`mariadb://…`)
//! that database, which must not hold a syncstore database yet (kept).

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use sync_sqlite::Synchronous;

use crate::error::{CliCode, CliError, CliResult};
use crate::secrets;
use crate::url::DatabaseUrl;

/// Where the demo runs, and how to look at it afterwards.
#[derive(Debug, Clone)]
pub struct Fresh {
    /// The URL every demo process opens.
    pub url: DatabaseUrl,
    /// The `--db` value that opens it again (password masked).
    pub reopen: String,
    /// One sentence saying where it is.
    pub description: String,
}

/// Prepares a fresh database for the demo.
pub fn prepare(explicit: Option<&str>) -> CliResult<Fresh> {
    match explicit.map(DatabaseUrl::parse).transpose()? {
        None => temporary_sqlite(),
        Some(DatabaseUrl::Sqlite {
            path,
            synchronous,
            page_size,
            mmap_size,
        }) => given_sqlite(path, synchronous, page_size, mmap_size),
        Some(DatabaseUrl::Postgres { url, schema: None }) => Ok(new_postgres_schema(url)),
        Some(DatabaseUrl::Postgres {
            url,
            schema: Some(schema),
        }) => given_postgres_schema(url, schema),
        Some(url @ DatabaseUrl::Registered { .. }) => given_database(url),
    }
}

/// A database of a dialect with its own opener (`mariadb://…`): that
/// database, which must exist and not hold a syncstore database yet.
fn given_database(url: DatabaseUrl) -> CliResult<Fresh> {
    match url.open_read_only() {
        Ok(_) => {
            return Err(CliError::new(CliCode::DatabaseNotEmpty).detail("database", url.describe()));
        }
        Err(error) if error.code() == sync_core::ErrorCode::NotASyncDatabase.as_str() => {}
        Err(error) => return Err(error),
    }
    Ok(Fresh {
        description: format!("the database you named, {} (kept)", url.describe()),
        reopen: url.describe(),
        url,
    })
}

/// `?schema=NAME`: that schema, which must not hold a syncstore database yet
/// (it is created when absent).
fn given_postgres_schema(url: String, schema: String) -> CliResult<Fresh> {
    let given = DatabaseUrl::Postgres {
        url: url.clone(),
        schema: Some(schema.clone()),
    };
    match given.open_read_only() {
        Ok(_) => {
            return Err(CliError::new(CliCode::DatabaseNotEmpty).detail("schema", &schema));
        }
        Err(error) if error.code() == sync_core::ErrorCode::NotASyncDatabase.as_str() => {}
        Err(error) => return Err(error),
    }
    let server = DatabaseUrl::Postgres {
        url: url.clone(),
        schema: None,
    }
    .describe();
    let separator = if url.contains('?') { '&' } else { '?' };
    Ok(Fresh {
        description: format!("the Postgres schema {schema} you named, in {server} (kept)"),
        reopen: secrets::mask_url(&format!("{url}{separator}schema={schema}")),
        url: given,
    })
}

fn temporary_sqlite() -> CliResult<Fresh> {
    let dir = tempfile::Builder::new()
        .prefix("syncstore-demo-")
        .tempdir()
        .map_err(|e| CliError::new(CliCode::Io).detail("reason", e))?
        .keep();
    let path = dir.join("demo.sqlite");
    Ok(sqlite(
        path,
        Synchronous::default(),
        (None, None),
        "a new SQLite file in a new temporary directory",
    ))
}

fn given_sqlite(
    path: PathBuf,
    synchronous: Synchronous,
    page_size: Option<u32>,
    mmap_size: Option<u64>,
) -> CliResult<Fresh> {
    let used = std::fs::metadata(&path)
        .map(|m| m.len() > 0)
        .unwrap_or(false);
    if used {
        return Err(CliError::new(CliCode::DatabaseNotEmpty).detail("path", path.display()));
    }
    Ok(sqlite(
        path,
        synchronous,
        (page_size, mmap_size),
        "the SQLite file you named",
    ))
}

/// `sizes`: the URL's `page_size` and `mmap_size`.
fn sqlite(
    path: PathBuf,
    synchronous: Synchronous,
    sizes: (Option<u32>, Option<u64>),
    what: &str,
) -> Fresh {
    let (page_size, mmap_size) = sizes;
    let reopen = match synchronous {
        Synchronous::Full => format!("sqlite:{}", path.display()),
        Synchronous::Normal => format!("sqlite:{}?synchronous=normal", path.display()),
    };
    Fresh {
        description: format!("{what}: {}", path.display()),
        url: DatabaseUrl::Sqlite {
            path,
            synchronous,
            page_size,
            mmap_size,
        },
        reopen,
    }
}

fn new_postgres_schema(url: String) -> Fresh {
    let schema = format!("syncstore_demo_{}", random_suffix());
    let separator = if url.contains('?') { '&' } else { '?' };
    let reopen = secrets::mask_url(&format!("{url}{separator}schema={schema}"));
    let server = DatabaseUrl::Postgres {
        url: url.clone(),
        schema: None,
    }
    .describe();
    Fresh {
        description: format!(
            "a new Postgres schema {schema} in {server} (kept; drop it with DROP SCHEMA {schema} CASCADE)"
        ),
        url: DatabaseUrl::Postgres {
            url,
            schema: Some(schema),
        },
        reopen,
    }
}

/// 12 hex digits from the clock and the process id.
fn random_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!("{nanos}:{}", std::process::id());
    format!(
        "{:012x}",
        sync_schema::fnv1a64(seed.as_bytes()) & 0xffff_ffff_ffff
    )
}
