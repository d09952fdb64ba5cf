//! The files SQLite keeps beside a database file — `-wal`, `-shm` and the
//! rollback `-journal` — and the two decisions they drive at open time.
//!
//! - A `-wal` or `-shm` standing where no database file is holds the last
//!   commits of a database that was moved (or lost) without them. Creating
//!   a new database at that path would make SQLite take the `-wal` for its
//!   own and delete it: acknowledged commits lost. [`refuse_stranded`]
//!   refuses instead (`sync.storage.stranded_journal`).
//! - A database with none of them beside it has no connection open on it in
//!   WAL mode (SQLite removes the `-wal` when the last one closes), so an
//!   inspection may open it `immutable` and create nothing
//!   ([`journal_present`], [`FileStamp`]).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sync_core::{Error, ErrorCode, Result};

/// The suffixes of the files SQLite keeps beside a database file.
const SUFFIXES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// `file` with `suffix` appended (`app.db` → `app.db-wal`).
pub(crate) fn companion(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Refuses to create a database at `path` when its file is absent but a
/// `-wal` or `-shm` of that name stands there: `sync.storage.stranded_journal`
/// with `details.path` (the database file) and `details.found` (the
/// stranded files, comma-separated). A SQLite URI file name is checked at
/// the file it names.
pub(crate) fn refuse_stranded(path: &Path) -> Result<()> {
    let Some(file) = disk_path(path) else {
        return Ok(());
    };
    if exists(&file) {
        return Ok(());
    }
    let found: Vec<String> = ["-wal", "-shm"]
        .into_iter()
        .map(|suffix| companion(&file, suffix))
        .filter(|p| exists(p))
        .map(|p| p.display().to_string())
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    Err(Error::new(ErrorCode::StrandedJournal)
        .detail("path", file.display())
        .detail("found", found.join(", ")))
}

/// Whether a `-wal`, `-shm` or `-journal` stands beside `file`.
pub(crate) fn journal_present(file: &Path) -> bool {
    SUFFIXES
        .iter()
        .any(|suffix| exists(&companion(file, suffix)))
}

/// What a database file looked like when an `immutable` inspection opened
/// it: a read is only trusted while the file is unchanged and no writer
/// has opened it since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    inode: u64,
}

impl FileStamp {
    /// The stamp of `file` now; `None` when it cannot be read.
    pub(crate) fn of(file: &Path) -> Option<Self> {
        let meta = std::fs::metadata(file).ok()?;
        Some(Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            inode: std::os::unix::fs::MetadataExt::ino(&meta),
        })
    }

    /// Refuses with `sync.storage.busy` (`reason = writer_opened`) when a
    /// writer opened `file` or changed it since the stamp was taken: what
    /// an `immutable` connection read may then be inconsistent. Opening
    /// again (a retry) reads through the writer's WAL instead.
    pub(crate) fn refuse_if_changed(&self, file: &Path) -> Result<()> {
        if journal_present(file) || Self::of(file).as_ref() != Some(self) {
            return Err(Error::new(ErrorCode::Busy).detail("reason", "writer_opened"));
        }
        Ok(())
    }
}

/// The URI of an `immutable`, read-only open of the plain path `file`
/// (every byte but unreserved ones percent-encoded); `None` when `path` is
/// already a URI file name (its parameters are the caller's).
pub(crate) fn immutable_uri(path: &Path) -> Option<String> {
    if is_uri(path) {
        return None;
    }
    let mut uri = String::from("file:");
    for &byte in path_bytes(path).iter() {
        if byte.is_ascii_alphanumeric() || b"/-_.~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?mode=ro&immutable=1");
    Some(uri)
}

/// The file a path or SQLite URI file name (`file:…?…`) names on disk;
/// `None` for a URI this function cannot read (a remote authority, a bad
/// escape).
fn disk_path(path: &Path) -> Option<PathBuf> {
    if !is_uri(path) {
        return Some(path.to_path_buf());
    }
    let text = path.to_str()?.strip_prefix("file:")?;
    let end = text.find(['?', '#']).unwrap_or(text.len());
    let mut name = &text[..end];
    if let Some(rest) = name.strip_prefix("//") {
        let slash = rest.find('/').unwrap_or(rest.len());
        if !matches!(&rest[..slash], "" | "localhost") {
            return None;
        }
        name = &rest[slash..];
    }
    percent_decode(name).map(PathBuf::from)
}

fn is_uri(path: &Path) -> bool {
    path_bytes(path).starts_with(b"file:")
}

#[cfg(unix)]
fn path_bytes(path: &Path) -> Vec<u8> {
    std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec()
}

#[cfg(not(unix))]
fn path_bytes(path: &Path) -> Vec<u8> {
    path.to_string_lossy().as_bytes().to_vec()
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Whether anything (a file, a directory, a dangling link) stands at `path`.
fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_file_names_are_checked_at_the_file_they_name() {
        assert_eq!(
            disk_path(Path::new("file:/tmp/a%20b.db?mode=rw")),
            Some(PathBuf::from("/tmp/a b.db"))
        );
        assert_eq!(
            disk_path(Path::new("file://localhost/tmp/x.db")),
            Some(PathBuf::from("/tmp/x.db"))
        );
        assert_eq!(disk_path(Path::new("file://elsewhere/x.db")), None);
        assert_eq!(
            disk_path(Path::new("rel/x.db")),
            Some(PathBuf::from("rel/x.db"))
        );
    }

    #[test]
    fn the_immutable_uri_escapes_every_reserved_byte() {
        assert_eq!(
            immutable_uri(Path::new("/tmp/a b?#%.db")).as_deref(),
            Some("file:/tmp/a%20b%3F%23%25.db?mode=ro&immutable=1")
        );
        assert_eq!(immutable_uri(Path::new("file:x.db")), None);
    }
}
