//! W16 grouped (SQLite): what a single-row push costs when [`GROUP`]
//! pushes share one `COMMIT`.
//!
//! - **Ours:** [`GROUP`] threads push W1's commits through the prelude (as
//!   the engine pushes) into one storage with group commit on, at most
//!   [`GROUP`] members a group; a group stays open long enough that every
//!   thread joins it.
//! - **Raw:** one thread pushes the same commits [`GROUP`] to a transaction
//!   (`RawClient::push_batch`), the best any grouping can do.
//!
//! Measured as in the single pass: the CPU time of the whole process per
//! push, and the WAL growth per push while a reader holds the snapshot of
//! the start. The WAL's commit frames are counted as well (a frame whose
//! header gives the database size after a commit), so the run shows how
//! many pushes one `COMMIT` really carried.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Barrier;

use anyhow::{anyhow, bail, Context, Result};
use sync_core::ServeContext;
use sync_sqlite::{GroupCommit, Synchronous};

use super::db::{Env, Location};
use super::pushes::{push_ours_prelude, Prepared};
use super::w16_cost::{process_cpu_ns, thread_cpu_ns};
use super::w1_push::{self, PARTITION};

/// Threads of ours, the most members of one group, and the raw client's
/// commits per transaction.
pub const GROUP: usize = 16;

/// Commits each thread pushes before the measured pass.
const WARM_UP_PER_THREAD: usize = 4;

/// One implementation's grouped costs.
#[derive(Debug, Default, Clone)]
pub struct GroupedCost {
    /// CPU µs of this process per push.
    pub cpu_us: f64,
    /// WAL bytes per push.
    pub log_bytes: f64,
    /// Pushes per `COMMIT`, from the WAL's commit frames.
    pub pushes_per_commit: f64,
    /// Log frames per push by the table or index whose page they hold.
    pub frames_by_btree: Vec<(String, f64)>,
}

/// Ours or the raw client, grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouped {
    Ours,
    Raw,
}

/// What one pass saw.
struct Seen {
    /// CPU ns of the whole process across the measured pushes.
    cpu_ns: u64,
    /// The WAL written by the measured pushes (the held pass only).
    log: Vec<u8>,
    /// Log frames per push by b-tree (the held pass only).
    frames_by_btree: Vec<(String, f64)>,
}

/// The grouped costs of `n` pushes (rounded down to whole groups): the
/// CPU from a plain pass, the log from a pass on a second fresh database
/// while a reader holds the snapshot of its start (the background
/// checkpointer's futile attempts on that growing log would count as CPU).
pub fn measure(env: &Env, who: Grouped, n: usize, tag: &str) -> Result<GroupedCost> {
    let n = (n / GROUP).max(1) * GROUP;
    let per = n as f64;
    let plain = pass(env, who, n, &format!("{tag}c"), false)?;
    let held = pass(env, who, n, &format!("{tag}w"), true)?;
    let frames = WalFrames::read(&held.log)?;
    Ok(GroupedCost {
        cpu_us: plain.cpu_ns as f64 / 1e3 / per,
        log_bytes: held.log.len() as f64 / per,
        pushes_per_commit: per / frames.commits.max(1) as f64,
        frames_by_btree: held.frames_by_btree,
    })
}

/// One pass of `n` pushes on a fresh database; with `hold`, a reader holds
/// the snapshot of its start and the WAL is read at its end.
fn pass(env: &Env, who: Grouped, n: usize, tag: &str, hold: bool) -> Result<Seen> {
    let all = w1_push::commits(GROUP * WARM_UP_PER_THREAD + n, tag)?;
    let (warm, measured) = all.split_at(GROUP * WARM_UP_PER_THREAD);
    let warm = Prepared::new(warm.to_vec());
    let measured = Prepared::new(measured.to_vec());
    let db = env.fresh(Synchronous::default())?;
    let Location::Sqlite(path) = &db.location else {
        bail!("W16 grouped pass without a SQLite file");
    };
    let wal = wal_path(path);
    let mut seen = Seen {
        cpu_ns: 0,
        log: Vec::new(),
        frames_by_btree: Vec::new(),
    };
    // `push` returns the CPU time of the threads it started and joined,
    // which the live threads after it no longer show.
    let mut around = |push: &mut dyn FnMut() -> Result<u64>| -> Result<()> {
        let reader = if hold { Some(hold_wal(path)?) } else { None };
        let cpu_before = process_cpu_ns()?;
        let joined = push()?;
        seen.cpu_ns = process_cpu_ns()? - cpu_before + joined;
        if let Some(reader) = reader {
            seen.log = std::fs::read(&wal).with_context(|| format!("reading {wal:?}"))?;
            reader.execute_batch("COMMIT")?;
            let frames = WalFrames::read(&seen.log)?;
            seen.frames_by_btree = frames_by_btree(&reader, &frames.pages, n as f64)?;
        }
        Ok(())
    };
    match who {
        Grouped::Ours => {
            let storage = db.storage_with(false, |c| {
                c.group_commit = GroupCommit {
                    max_members: GROUP as u32,
                    max_wait_ms: 1_000,
                }
            })?;
            let ctx = ServeContext::default();
            let threads = |commits: &Prepared| -> Result<u64> {
                let barrier = Barrier::new(GROUP);
                std::thread::scope(|scope| {
                    let workers: Vec<_> = (0..GROUP)
                        .map(|t| {
                            let (storage, ctx, barrier) = (&storage, &ctx, &barrier);
                            scope.spawn(move || -> Result<u64> {
                                barrier.wait();
                                let start = thread_cpu_ns()?;
                                for commit in commits.ours.iter().skip(t).step_by(GROUP) {
                                    push_ours_prelude(
                                        storage.as_ref(),
                                        PARTITION,
                                        commit,
                                        Some(ctx),
                                    )?;
                                }
                                Ok(thread_cpu_ns()? - start)
                            })
                        })
                        .collect();
                    workers
                        .into_iter()
                        .map(|w| w.join().map_err(|_| anyhow!("a W16 pusher panicked"))?)
                        .sum::<Result<u64>>()
                })
            };
            threads(&warm)?;
            around(&mut || threads(&measured))?;
        }
        Grouped::Raw => {
            drop(db.storage(false)?);
            let mut raw = db.raw()?;
            for chunk in warm.bench.chunks(GROUP) {
                raw.push_batch(PARTITION, chunk)?;
            }
            around(&mut || {
                for chunk in measured.bench.chunks(GROUP) {
                    raw.push_batch(PARTITION, chunk)?;
                }
                Ok(0)
            })?;
        }
    }
    Ok(seen)
}

/// Frames per push by the table or index (`dbstat`) that owns each page
/// now, most first; pages no b-tree owns (freed since) count as
/// `(free)`.
pub fn frames_by_btree(
    conn: &rusqlite::Connection,
    pages: &[u32],
    per: f64,
) -> Result<Vec<(String, f64)>> {
    let mut owner: HashMap<u32, String> = HashMap::new();
    let mut stmt = conn.prepare("SELECT name, pageno FROM dbstat")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        owner.insert(row.get(1)?, row.get(0)?);
    }
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for page in pages {
        let name = owner.get(page).map_or("(free)", String::as_str);
        *counts.entry(name).or_default() += 1;
    }
    let mut out: Vec<(String, f64)> = counts
        .into_iter()
        .map(|(name, count)| (name.to_owned(), count as f64 / per))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}

/// `name frames, …` of [`frames_by_btree`], for a progress line.
pub fn describe(by_btree: &[(String, f64)]) -> String {
    by_btree
        .iter()
        .map(|(name, frames)| format!("{name} {frames:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Empties the WAL of `path` (`TRUNCATE` checkpoint) and returns a reader
/// inside a transaction on the snapshot after it: while it is open no
/// checkpoint can copy a frame back or restart the log, so the WAL holds
/// every frame written meanwhile. `COMMIT` on it releases the log.
pub fn hold_wal(path: &Path) -> Result<rusqlite::Connection> {
    let reader = rusqlite::Connection::open(path)?;
    let busy: i64 = reader.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
    if busy != 0 {
        bail!("W16: the WAL of {path:?} could not be truncated before the pass");
    }
    reader.execute_batch("BEGIN")?;
    let _: i64 = reader.query_row("SELECT count(*) FROM sync_partitions", [], |r| r.get(0))?;
    Ok(reader)
}

/// The WAL file of the database file `path`.
pub fn wal_path(path: &Path) -> PathBuf {
    let mut name = path.to_path_buf().into_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

/// The frames of a WAL file written since its header: how many, and how
/// many end a transaction.
#[derive(Debug, PartialEq, Eq)]
pub struct WalFrames {
    /// Valid frames (their salts match the header's).
    pub frames: u64,
    /// Frames that end a transaction.
    pub commits: u64,
    /// The page number of each frame, in log order.
    pub pages: Vec<u32>,
}

/// Size of the WAL header and of a frame's header (SQLite file format,
/// "The WAL File Format").
const WAL_HEADER: usize = 32;
const FRAME_HEADER: usize = 24;

impl WalFrames {
    /// Walks the frames of `log`; an empty log has none. A frame whose
    /// salts differ from the header's is left over from before the last
    /// restart, and it and everything after it are not counted.
    pub fn read(log: &[u8]) -> Result<Self> {
        let mut out = WalFrames {
            frames: 0,
            commits: 0,
            pages: Vec::new(),
        };
        if log.is_empty() {
            return Ok(out);
        }
        let header = log
            .get(..WAL_HEADER)
            .ok_or_else(|| anyhow!("WAL shorter than its header ({} bytes)", log.len()))?;
        let page_size = usize::try_from(be32(&header[8..12])).context("page size")?;
        if !(512..=65_536).contains(&page_size) && page_size != 1 {
            bail!("WAL header gives page size {page_size}");
        }
        // 1 stands for 65 536 in the header.
        let page_size = if page_size == 1 { 65_536 } else { page_size };
        let salts = &header[16..24];
        let mut at = WAL_HEADER;
        while let Some(frame) = log.get(at..at + FRAME_HEADER + page_size) {
            if &frame[8..16] != salts {
                break;
            }
            out.frames += 1;
            out.pages.push(be32(&frame[0..4]));
            if be32(&frame[4..8]) != 0 {
                out.commits += 1;
            }
            at += FRAME_HEADER + page_size;
        }
        Ok(out)
    }
}

fn be32(bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .take(4)
        .fold(0u32, |acc, b| (acc << 8) | u32::from(*b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The WAL of a file with `commits` transactions of one row each,
    /// read while a reader keeps it from being checkpointed.
    fn wal_of(commits: usize, page_size: u32) -> Result<Vec<u8>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("w.sqlite");
        let conn = rusqlite::Connection::open(&path)?;
        conn.pragma_update(None, "page_size", page_size)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        conn.execute_batch("CREATE TABLE t (x)")?;
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
        for i in 0..commits {
            conn.execute("INSERT INTO t VALUES (?1)", [i as i64])?;
        }
        Ok(std::fs::read(wal_path(&path))?)
    }

    #[test]
    fn counts_one_commit_frame_per_transaction() -> Result<()> {
        let frames = WalFrames::read(&wal_of(5, 1024)?)?;
        assert_eq!(frames.commits, 5);
        assert_eq!(frames.frames, 5, "one page changes per insert");
        Ok(())
    }

    #[test]
    fn an_empty_log_has_no_frames_and_a_torn_header_is_an_error() -> Result<()> {
        assert_eq!(
            WalFrames::read(&[])?,
            WalFrames {
                frames: 0,
                commits: 0,
                pages: Vec::new(),
            }
        );
        assert!(WalFrames::read(&[0u8; 10]).is_err());
        Ok(())
    }

    #[test]
    fn frames_with_other_salts_end_the_walk() -> Result<()> {
        let mut log = wal_of(3, 512)?;
        // The second frame's first salt byte.
        log[WAL_HEADER + FRAME_HEADER + 512 + 8] ^= 0xff;
        let frames = WalFrames::read(&log)?;
        assert_eq!((frames.frames, frames.commits), (1, 1));
        Ok(())
    }
}
