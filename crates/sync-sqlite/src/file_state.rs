//! Whether the database file a storage acknowledges into is still the file
//! at its path, and whether it can be written at all.
//!
//! A database file unlinked or renamed under a live storage keeps working
//! through the open descriptors: writes would be acknowledged into a file
//! nobody will open again, and a new connection would create a fresh empty
//! file at the path. So before acknowledging anything — at every connection
//! checkout (the `begin` of a write, every read) and right before every
//! `COMMIT` — the connection asks SQLite whether its file has moved
//! (`SQLITE_FCNTL_HAS_MOVED`) and refuses with the retryable
//! `sync.storage.unavailable`, `details.cause = moved`; connections opened
//! after the first never create the file.

use std::ffi::c_int;
use std::path::Path;

use rusqlite::{ffi, Connection, MAIN_DB};
use sync_core::{BackendCause, Error, ErrorCode, Result};

/// `sync.storage.unavailable` with `cause = moved`: retryable, since the
/// file put back in place clears it without a restart.
pub(crate) fn moved_error() -> Error {
    Error::new(ErrorCode::Unavailable).with_cause(BackendCause::Moved)
}

/// Refuses when the file this connection has open is no longer the file at
/// its path (unlinked, renamed or replaced).
pub(crate) fn refuse_if_moved(conn: &Connection) -> Result<()> {
    if has_moved(conn) {
        return Err(moved_error());
    }
    Ok(())
}

/// Refuses when the database file is gone from `path` (a connection opened
/// now would otherwise create an empty one).
pub(crate) fn refuse_if_missing(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(moved_error()),
        // Another failure (permissions, I/O) surfaces when SQLite opens it.
        Err(_) => Ok(()),
    }
}

/// Refuses a connection that can only read (a read-only file, a read-only
/// mount, `mode=ro`) with `cause = read_only`, before anything is
/// acknowledged.
pub(crate) fn refuse_if_read_only(conn: &Connection) -> Result<()> {
    match conn.is_readonly(MAIN_DB) {
        Ok(false) => Ok(()),
        Ok(true) => Err(Error::new(ErrorCode::Backend).with_cause(BackendCause::ReadOnly)),
        Err(e) => Err(crate::errors::classify(
            e,
            crate::errors::Context::Statement,
        )),
    }
}

/// `SQLITE_FCNTL_HAS_MOVED` on the main database of `conn`.
fn has_moved(conn: &Connection) -> bool {
    let mut moved: c_int = 0;
    // SAFETY: `conn.handle()` is the open database handle owned by `conn`,
    // valid for the whole call (`conn` is borrowed); the file control
    // `SQLITE_FCNTL_HAS_MOVED` writes exactly one `int` through the pointer,
    // which points at the live local `moved`; the schema name is a NUL-
    // terminated static string.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_HAS_MOVED,
            (&mut moved as *mut c_int).cast(),
        )
    };
    rc == ffi::SQLITE_OK && moved != 0
}
