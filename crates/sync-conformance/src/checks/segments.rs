//! Bootstrap segments in the storage's own database, C-355…C-363
//! (`docs/decisions.md`, "Bootstrap segments in the storage's database"):
//! the [`SegmentStore`] every built-in dialect offers through
//! `ServerStorage::segment_store`.

use sync_core::{
    EnsureOptions, EnsureOutcome, ErrorCode, NewSegment, SegmentBuildKey, SegmentFetch,
    SegmentMediaType, SegmentStore, ServerStorage,
};

use crate::check::{expect_code, expect_detail, CheckDef, CheckResult, Failure};
use crate::context::{Ctx, NOW};
use crate::fixtures::fix1;
use crate::harness::RawFilter;
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "segments";

/// The internal table of segments.
const TABLE: &str = "_syncstore_segments";

const HOUR: i64 = 3_600_000;

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-355",
        "a put segment comes back byte-exact with its metadata",
        c355_round_trip,
    ),
    check(
        GROUP,
        "C-356",
        "a second put of one segment keeps one row, its first metadata and the later expiry",
        c356_idempotent_put,
    ),
    check(
        GROUP,
        "C-357",
        "reuse finds the live segment of a build key that expires last, and nothing else",
        c357_reuse_by_build_key,
    ),
    check(
        GROUP,
        "C-358",
        "a segment is found before its expiry and expired from it on, by the caller's clock",
        c358_expiry_by_caller_clock,
    ),
    check(
        GROUP,
        "C-359",
        "another partition's segment is not found; other scopes are a scope mismatch",
        c359_partition_and_scopes,
    ),
    check(
        GROUP,
        "C-360",
        "pruning deletes only expired segments, at most the limit per call",
        c360_prune_expired,
    ),
    check(
        GROUP,
        "C-361",
        "a segment above the store's limit is refused with segment_too_large and not stored",
        c361_size_limit,
    ),
    check(
        GROUP,
        "C-362",
        "two storage instances on one database see each other's segments",
        c362_shared_between_instances,
    ),
    check(
        GROUP,
        "C-363",
        "a database without the segment table gains it on its next ensure_schema, nothing else changed",
        c363_table_created_on_old_database,
    ),
];

/// The storage's segment store; a storage without one fails the check.
fn store(storage: &dyn ServerStorage) -> CheckResult<&dyn SegmentStore> {
    storage
        .segment_store()
        .ok_or_else(|| Failure::new("the storage offers no segment store"))
}

fn id(n: u64) -> String {
    format!("sha256:{n:064x}")
}

fn key(digest: &str) -> SegmentBuildKey {
    SegmentBuildKey {
        table: "tasks".into(),
        scope_digest: digest.into(),
        media_type: SegmentMediaType::Rows,
        schema_version: 1,
        as_of_commit_seq: 42,
        row_cursor: None,
        page_rows: 500,
    }
}

/// Segment `n` of `partition` for scope digest `d1`: `len` bytes covering
/// every byte value, expiring an hour after [`NOW`].
fn segment(partition: &str, n: u64, len: usize) -> NewSegment {
    NewSegment {
        segment_id: id(n),
        partition: partition.into(),
        key: key("d1"),
        next_row_cursor: Some("t0500".into()),
        row_count: 500,
        bytes: (0..len).map(|i| ((i as u64 + n) % 256) as u8).collect(),
        created_at_ms: NOW,
        expires_at_ms: NOW + HOUR,
    }
}

/// Rows of the segment table with this id in this partition.
fn rows_of(ctx: &mut Ctx<'_>, partition: &str, n: u64) -> CheckResult<i64> {
    Ok(ctx.raw()?.count(
        TABLE,
        RawFilter::eq("partition", partition).and("segment_id", &id(n)),
    )?)
}

fn c355_round_trip(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.open()?;
    let store = store(storage.as_ref())?;
    let mut first = segment("p1", 1, 256 * 1024);
    first.key.row_cursor = Some("t0000".into());
    first.key.media_type = SegmentMediaType::Sqlite; // tidy: dialect-name (the protocol's media type)
    let mut last = segment("p1", 2, 0);
    last.next_row_cursor = None;
    for put in [&first, &last] {
        let meta = store.put_segment(put)?;
        check_eq!(meta, put.meta(), "put answers the stored metadata");
        match store.get_segment("p1", &put.segment_id, "d1", NOW)? {
            SegmentFetch::Found(found) => {
                check!(found.bytes == put.bytes, "the bytes come back exactly");
                check_eq!(found.meta, put.meta(), "the metadata comes back");
            }
            other => return Err(Failure::new(format!("expected the segment, got {other:?}"))),
        }
    }
    Ok(())
}

fn c356_idempotent_put(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.open()?;
    let store = store(storage.as_ref())?;
    let first = segment("p1", 1, 100);
    store.put_segment(&first)?;
    let mut again = first.clone();
    again.row_count = 7;
    again.created_at_ms = NOW + 10;
    again.expires_at_ms = NOW + 5 * HOUR;
    let meta = store.put_segment(&again)?;
    check_eq!(meta.expires_at_ms, NOW + 5 * HOUR, "the later expiry wins");
    check_eq!(meta.row_count, 500, "the first metadata stays");
    check_eq!(meta.created_at_ms, NOW, "the first build time stays");
    let mut shorter = first.clone();
    shorter.expires_at_ms = NOW + 1;
    check_eq!(
        store.put_segment(&shorter)?.expires_at_ms,
        NOW + 5 * HOUR,
        "an earlier expiry never shortens the stored one"
    );
    check_eq!(rows_of(ctx, "p1", 1)?, 1, "one stored segment");
    check!(
        matches!(
            store.get_segment("p1", &id(1), "d1", NOW + 4 * HOUR)?,
            SegmentFetch::Found(_)
        ),
        "the segment lives to the extended expiry"
    );
    Ok(())
}

fn c357_reuse_by_build_key(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.open()?;
    let store = store(storage.as_ref())?;
    let mut early = segment("p1", 1, 10);
    early.expires_at_ms = NOW + 10;
    let mut late = segment("p1", 2, 10);
    late.expires_at_ms = NOW + 2 * HOUR;
    store.put_segment(&early)?;
    store.put_segment(&late)?;
    let found = store.find_live_segment("p1", &key("d1"), NOW)?;
    check_eq!(
        found.map(|m| m.segment_id),
        Some(id(2)),
        "the live segment expiring last"
    );
    let mut other_page = key("d1");
    other_page.row_cursor = Some("t0500".into());
    let mut other_commit = key("d1");
    other_commit.as_of_commit_seq = 43;
    let mut other_version = key("d1");
    other_version.schema_version = 2;
    for (partition, other, what) in [
        ("p2", key("d1"), "another partition"),
        ("p1", key("d2"), "other scopes"),
        ("p1", other_page, "another page"),
        ("p1", other_commit, "another pinned commit"),
        ("p1", other_version, "another schema version"),
    ] {
        check_eq!(
            store.find_live_segment(partition, &other, NOW)?,
            None,
            "{what} reuses nothing"
        );
    }
    check_eq!(
        store.find_live_segment("p1", &key("d1"), NOW + 2 * HOUR)?,
        None,
        "an expired segment is not reused"
    );
    Ok(())
}

fn c358_expiry_by_caller_clock(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.open()?;
    let store = store(storage.as_ref())?;
    store.put_segment(&segment("p1", 1, 10))?;
    // The storage's own clock is far past the expiry: only `now_ms` counts.
    ctx.clock.set(NOW + 100 * HOUR);
    check!(
        matches!(
            store.get_segment("p1", &id(1), "d1", NOW + HOUR - 1)?,
            SegmentFetch::Found(_)
        ),
        "found one ms before its expiry"
    );
    check_eq!(
        store.get_segment("p1", &id(1), "d1", NOW + HOUR)?,
        SegmentFetch::Expired,
        "expired at its expiry"
    );
    check_eq!(
        store.get_segment("p1", &id(1), "d1", NOW + 3 * HOUR)?,
        SegmentFetch::Expired,
        "expired after it"
    );
    Ok(())
}

fn c359_partition_and_scopes(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.open()?;
    let store = store(storage.as_ref())?;
    let mine = segment("p1", 1, 10);
    store.put_segment(&mine)?;
    check_eq!(
        store.get_segment("p2", &id(1), "d1", NOW)?,
        SegmentFetch::NotFound,
        "another partition"
    );
    check_eq!(
        store.get_segment("p2", &id(1), "d2", NOW)?,
        SegmentFetch::NotFound,
        "another partition, other scopes"
    );
    check_eq!(
        store.get_segment("p1", &id(9), "d1", NOW)?,
        SegmentFetch::NotFound,
        "an unknown id"
    );
    check_eq!(
        store.get_segment("p1", "sha256:not-hex", "d1", NOW)?,
        SegmentFetch::NotFound,
        "an id that is no content address"
    );
    check_eq!(
        store.get_segment("p1", &id(1), "d2", NOW)?,
        SegmentFetch::ScopeMismatch,
        "the partition's segment for other scopes"
    );
    // The same bytes built for other scopes, and by another partition, are
    // separate entries, each answering its own digest.
    let mut other_scopes = mine.clone();
    other_scopes.key = key("d2");
    let mut theirs = mine.clone();
    theirs.partition = "p2".into();
    store.put_segment(&other_scopes)?;
    store.put_segment(&theirs)?;
    for (partition, digest) in [("p1", "d1"), ("p1", "d2"), ("p2", "d1")] {
        match store.get_segment(partition, &id(1), digest, NOW)? {
            SegmentFetch::Found(found) => {
                check_eq!(found.meta.partition, partition, "owner of {digest}");
                check_eq!(found.meta.key.scope_digest, digest, "digest");
            }
            other => {
                return Err(Failure::new(format!(
                    "{partition}/{digest}: expected the segment, got {other:?}"
                )))
            }
        }
    }
    check_eq!(
        store
            .get_segment("", &id(1), "d1", NOW)
            .map_err(|e| e.code()),
        Err(ErrorCode::InvalidPartition),
        "an empty partition"
    );
    Ok(())
}

fn c360_prune_expired(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.open()?;
    let store = store(storage.as_ref())?;
    for n in 0..5 {
        let mut s = segment(if n % 2 == 0 { "p1" } else { "p2" }, n, 10);
        s.expires_at_ms = NOW + 1 + n as i64;
        store.put_segment(&s)?;
    }
    for n in 5..8 {
        store.put_segment(&segment("p1", n, 10))?;
    }
    let later = NOW + 10;
    check_eq!(store.delete_expired_segments(later, 2)?, 2, "first batch");
    check_eq!(store.delete_expired_segments(later, 2)?, 2, "second batch");
    check_eq!(store.delete_expired_segments(later, 2)?, 1, "last batch");
    check_eq!(store.delete_expired_segments(later, 2)?, 0, "nothing left");
    check_eq!(
        ctx.raw()?.count(TABLE, RawFilter::all())?,
        3,
        "live segments remain"
    );
    for n in 5..8 {
        check!(
            matches!(
                store.get_segment("p1", &id(n), "d1", NOW)?,
                SegmentFetch::Found(_)
            ),
            "live segment {n} kept"
        );
    }
    let error = expect_code(
        store.delete_expired_segments(later, 0),
        ErrorCode::InvalidArgument,
        "a zero limit",
    )?;
    expect_detail(&error, "argument", "limit")
}

fn c361_size_limit(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.open()?;
    let store = store(storage.as_ref())?;
    let max = store.segment_limits().max_segment_bytes;
    let mut big = segment("p1", 1, 0);
    big.bytes = vec![0; max + 1];
    let error = expect_code(
        store.put_segment(&big),
        ErrorCode::SegmentTooLarge,
        "one byte above the limit",
    )?;
    expect_detail(&error, "max_bytes", &max.to_string())?;
    expect_detail(&error, "byte_length", &(max + 1).to_string())?;
    check_eq!(
        store.get_segment("p1", &id(1), "d1", NOW)?,
        SegmentFetch::NotFound,
        "the refused segment"
    );
    check_eq!(rows_of(ctx, "p1", 1)?, 0, "nothing stored");
    Ok(())
}

fn c362_shared_between_instances(ctx: &mut Ctx<'_>) -> CheckResult {
    let a = ctx.open()?;
    let b = ctx.open()?;
    let put = segment("p1", 1, 4096);
    store(a.as_ref())?.put_segment(&put)?;
    match store(b.as_ref())?.get_segment("p1", &id(1), "d1", NOW)? {
        SegmentFetch::Found(found) => check!(found.bytes == put.bytes, "the other's bytes"),
        other => return Err(Failure::new(format!("expected the segment, got {other:?}"))),
    }
    check_eq!(
        store(b.as_ref())?
            .find_live_segment("p1", &key("d1"), NOW)?
            .map(|m| m.segment_id),
        Some(id(1)),
        "the other instance reuses it"
    );
    let mut longer = put.clone();
    longer.expires_at_ms = NOW + 3 * HOUR;
    store(b.as_ref())?.put_segment(&longer)?;
    check!(
        matches!(
            store(a.as_ref())?.get_segment("p1", &id(1), "d1", NOW + 2 * HOUR)?,
            SegmentFetch::Found(_)
        ),
        "an expiry one instance extends holds for the other"
    );
    check_eq!(
        store(a.as_ref())?.delete_expired_segments(NOW + 3 * HOUR, 10)?,
        1,
        "one instance prunes"
    );
    check_eq!(
        store(b.as_ref())?.get_segment("p1", &id(1), "d1", NOW)?,
        SegmentFetch::NotFound,
        "the other sees it gone"
    );
    Ok(())
}

fn c363_table_created_on_old_database(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let marker = storage.read_schema_marker()?;
    drop(storage);
    let raw = ctx.raw()?;
    raw.drop_table(TABLE)?;
    check!(!raw.table_exists(TABLE)?, "the table was dropped");
    drop(raw);
    let storage = ctx.open()?;
    let outcome = storage.ensure_schema_outcome(&schema, &EnsureOptions::default())?;
    check_eq!(
        outcome,
        EnsureOutcome::Verified,
        "no migration ran for the table"
    );
    check!(
        ctx.raw()?.table_exists(TABLE)?,
        "ensure_schema created the table"
    );
    check_eq!(
        storage.read_schema_marker()?,
        marker,
        "the schema marker is unchanged"
    );
    let put = segment("p1", 1, 10);
    store(storage.as_ref())?.put_segment(&put)?;
    check!(
        matches!(
            store(storage.as_ref())?.get_segment("p1", &id(1), "d1", NOW)?,
            SegmentFetch::Found(_)
        ),
        "the new table stores segments"
    );
    Ok(())
}
