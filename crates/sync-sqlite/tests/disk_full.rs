//! A full disk under a live storage: pushes are refused with the retryable
//! `sync.storage.unavailable`, `details.cause = "disk_full"` — never a
//! panic, never a poisoned connection — nothing acknowledged is lost, and
//! once space is freed pushes succeed again on the same instance, the
//! refused ones retried under their own commit ids applied exactly once.
//!
//! The disk is "filled" with `RLIMIT_FSIZE` (the largest file this process
//! may write), which works without a mount and as root; `SIGXFSZ` is
//! ignored so a write crossing the limit is cut short and then fails with
//! `EFBIG`, which the storage reports like `ENOSPC` (`SQLITE_FULL`). The
//! limit applies to the whole process, so this file holds this one test
//! (each integration test file is its own process).

mod common;

use common::*;
use sync_core::{EnsureOptions, Error, ErrorCode, ServerStorage, StoredPushResult};

const PARTITION: &str = "acme";
const CLIENT: &str = "c1";

/// Sets the soft `RLIMIT_FSIZE` (bytes; `RLIM_INFINITY` for none).
fn set_file_size_limit(limit: libc::rlim_t) {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct passed by pointer.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut current) };
    assert_eq!(got, 0, "getrlimit: {}", std::io::Error::last_os_error());
    let wanted = libc::rlimit {
        rlim_cur: limit,
        rlim_max: current.rlim_max,
    };
    // SAFETY: as above.
    let set = unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &wanted) };
    assert_eq!(set, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// The standard push of one large task row, every failure returned.
fn try_push(storage: &dyn ServerStorage, ccid: &str) -> Result<i64, Error> {
    let title = format!("{ccid} {}", "x".repeat(4000));
    let row = task_row(&format!("row-{ccid}"), "p1", &title);
    let mut tx = storage.begin(PARTITION)?;
    tx.lock_partition_for_push()?;
    if tx.get_push_result(CLIENT, ccid)?.is_some() {
        return Err(Error::invalid_argument("ccid", "reused"));
    }
    tx.upsert_row("tasks", &row, Some(0))?;
    let seq = tx.append_commit(&commit_of(CLIENT, ccid, vec![upsert_change(&row)]))?;
    tx.put_push_result(CLIENT, ccid, &StoredPushResult::applied(seq))?;
    tx.commit()?;
    Ok(seq)
}

fn assert_disk_full(error: &Error, what: &str) {
    assert_eq!(error.code(), ErrorCode::Unavailable, "{what}: {error:?}");
    assert_eq!(
        error.get_detail("cause"),
        Some("disk_full"),
        "{what}: {error:?}"
    );
    assert!(error.retryable(), "{what}: {error:?}");
}

/// Every acknowledged push has its result, its commit (the log head is the
/// count of acknowledged pushes: one commit each) and its row; no refused
/// push left anything.
fn assert_nothing_lost(
    storage: &dyn ServerStorage,
    acked: &[(String, i64)],
    refused: &[String],
    what: &str,
) {
    for (ccid, seq) in acked {
        let stored = storage
            .get_push_result(PARTITION, CLIENT, ccid)
            .unwrap_or_else(|e| panic!("{what}: push result {ccid}: {e:?}"));
        assert_eq!(
            stored.and_then(|r| r.commit_seq),
            Some(*seq),
            "{what}: acknowledged push {ccid} is lost"
        );
        let row = storage
            .get_row(PARTITION, "tasks", &format!("row-{ccid}"))
            .unwrap_or_else(|e| panic!("{what}: row of {ccid}: {e:?}"));
        assert!(row.is_some(), "{what}: the row of {ccid} is lost");
    }
    assert_eq!(
        storage.get_max_commit_seq(PARTITION).ok(),
        Some(acked.len() as i64),
        "{what}: log head"
    );
    for ccid in refused {
        let stored = storage
            .get_push_result(PARTITION, CLIENT, ccid)
            .unwrap_or_else(|e| panic!("{what}: push result {ccid}: {e:?}"));
        assert!(stored.is_none(), "{what}: refused push {ccid} was stored");
        let row = storage
            .get_row(PARTITION, "tasks", &format!("row-{ccid}"))
            .unwrap_or_else(|e| panic!("{what}: row of {ccid}: {e:?}"));
        assert!(row.is_none(), "{what}: refused push {ccid} left its row");
    }
}

#[test]
fn a_full_disk_refuses_pushes_as_disk_full_loses_nothing_and_recovers() {
    // SAFETY: ignoring a signal installs no handler code; a write crossing
    // the file size limit then fails (short write / EFBIG) instead of
    // killing the process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let db = Db::new();
    let storage = db.ready();
    let mut acked: Vec<(String, i64)> = Vec::new();
    for i in 0..5 {
        let ccid = format!("before-{i}");
        let seq = try_push(&storage, &ccid).unwrap_or_else(|e| panic!("{ccid}: {e:?}"));
        acked.push((ccid, seq));
    }
    // Room for some 60 more pushes in the largest file; not a multiple of
    // the page size, so the write that crosses it is cut short.
    let largest = std::fs::read_dir(db.dir.path())
        .expect("read dir")
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .max()
        .unwrap_or(0);
    set_file_size_limit((largest + 256 * 1024 + 1000) as libc::rlim_t);

    let mut refused = Vec::new();
    for i in 0..5_000 {
        let ccid = format!("filling-{i}");
        match try_push(&storage, &ccid) {
            Ok(seq) => acked.push((ccid, seq)),
            Err(error) => {
                assert_disk_full(&error, &format!("push {ccid} on the full disk"));
                refused.push(ccid);
                break;
            }
        }
    }
    assert!(!refused.is_empty(), "the disk never filled");
    let before_full = acked.len();
    // While the disk stays full: reads answer, every push is refused alike.
    assert_nothing_lost(&storage, &acked, &refused, "disk full");
    for i in 0..3 {
        let ccid = format!("while-full-{i}");
        let error = try_push(&storage, &ccid).expect_err("a push on the full disk");
        assert_disk_full(&error, &ccid);
        refused.push(ccid);
    }

    // Space is freed: the same instance pushes again.
    set_file_size_limit(libc::RLIM_INFINITY);
    for i in 0..5 {
        let ccid = format!("after-{i}");
        let seq = try_push(&storage, &ccid)
            .unwrap_or_else(|e| panic!("{ccid} after space was freed: {e:?}"));
        acked.push((ccid, seq));
    }
    assert_nothing_lost(&storage, &acked, &refused, "after space was freed");
    // The refused pushes retried under their own commit ids: each applies
    // once, and a second retry finds its stored result.
    let retried = refused.len();
    for ccid in std::mem::take(&mut refused) {
        let seq = try_push(&storage, &ccid)
            .unwrap_or_else(|e| panic!("retry of {ccid} after space was freed: {e:?}"));
        acked.push((ccid.clone(), seq));
        let again = try_push(&storage, &ccid).expect_err("a second retry");
        assert_eq!(
            again.code(),
            ErrorCode::InvalidArgument,
            "{ccid}: {again:?}"
        );
    }
    assert_nothing_lost(&storage, &acked, &refused, "after the retries");
    drop(storage);

    // A new process sees the same.
    let reopened = db.open();
    reopened
        .ensure_schema(&fix1(), &EnsureOptions::default())
        .expect("ensure after reopen");
    assert_nothing_lost(&reopened, &acked, &refused, "reopened");
    let check: String = db
        .raw()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
    println!(
        "disk-full sqlite rlimit: {before_full} pushes acknowledged until the disk was full, {retried} refused with disk_full (retryable) and applied once on retry, {} acknowledged after space was freed, 0 lost",
        acked.len() - before_full - retried
    );
}
