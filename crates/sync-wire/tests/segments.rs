//! Bootstrap pages as segments: inline or by reference by the accept bits
//! and the inline limit; referenced segments stored content-addressed,
//! reused by build key, and downloaded with re-authorization every time.

mod fixture;

use fixture::{bootstrap, Fixture};
use sync_engine::RequestContext;
use sync_ssp2::{ResponseFrame, SegmentRef};
use sync_wire::{Download, DownloadRequest, WireFailure};

/// 40 rows of 100-character titles: about 5 KiB of segment.
fn seeded(inline_limit: usize) -> Fixture {
    let fixture = Fixture::new(inline_limit);
    fixture.allow("pusher", "list_id", &["*"]);
    fixture.allow("alice", "list_id", &["l1"]);
    fixture.allow("bob", "list_id", &["l2"]);
    fixture.push_todos("pusher", "l1", 40, 100);
    fixture
}

fn segment_frames(frames: &[ResponseFrame]) -> Vec<&ResponseFrame> {
    frames
        .iter()
        .filter(|f| {
            matches!(
                f,
                ResponseFrame::SegmentInline(_) | ResponseFrame::SegmentRef(_)
            )
        })
        .collect()
}

fn the_ref(frames: &[ResponseFrame]) -> SegmentRef {
    match segment_frames(frames).as_slice() {
        [ResponseFrame::SegmentRef(r)] => r.clone(),
        other => panic!("expected one SEGMENT_REF, got {other:?}"),
    }
}

#[test]
fn a_small_page_goes_inline_when_inline_rows_are_accepted() {
    let fixture = seeded(64 * 1024);
    for accept in [0b01, 0b11] {
        let response = fixture.ok("alice", bootstrap("phone-a", "l1", accept));
        match segment_frames(&response.frames).as_slice() {
            [ResponseFrame::SegmentInline(inline)] => {
                let segment = inline.segment().unwrap();
                assert_eq!(segment.table, "todos");
                assert_eq!(segment.blocks.concat().len(), 40);
            }
            other => panic!("accept {accept:#b}: {other:?}"),
        }
    }
}

#[test]
fn a_page_above_the_inline_limit_goes_by_reference() {
    let fixture = seeded(1024);
    let response = fixture.ok("alice", bootstrap("phone-a", "l1", 0b11));
    let reference = the_ref(&response.frames);
    assert_eq!(reference.table, "todos");
    assert_eq!(reference.row_count, 40);
    assert!(reference.byte_length > 1024);
    assert_eq!(reference.media_type, sync_ssp2::MediaType::Rows);
    assert_eq!(reference.url, None);
    assert_eq!(
        reference.scope_digest,
        sync_ssp2::digest::scope_digest(&fixture::scopes("list_id", &["l1"]))
    );
    // A client that accepts inline rows only gets the page inline anyway.
    let response = fixture.ok("alice", bootstrap("phone-a", "l1", 0b01));
    assert!(matches!(
        segment_frames(&response.frames).as_slice(),
        [ResponseFrame::SegmentInline(_)]
    ));
}

#[test]
fn a_client_accepting_references_only_gets_one_even_for_a_small_page() {
    let fixture = seeded(64 * 1024);
    let response = fixture.ok("alice", bootstrap("phone-a", "l1", 0b10));
    assert_eq!(the_ref(&response.frames).row_count, 40);
}

#[test]
fn the_same_page_for_the_same_scopes_is_one_segment() {
    let fixture = seeded(1024);
    let first = the_ref(&fixture.ok("alice", bootstrap("phone-a", "l1", 0b10)).frames);
    // Another device, another actor with the same effective scopes.
    fixture.allow("carol", "list_id", &["l1", "l9"]);
    let second = the_ref(&fixture.ok("carol", bootstrap("phone-c", "l1", 0b10)).frames);
    assert_eq!(first, second);
}

fn download(
    fixture: &Fixture,
    actor: &str,
    partition: &str,
    id: &str,
    scopes: Option<&str>,
    if_none_match: Option<&str>,
) -> Result<Download, WireFailure> {
    fixture.service.download(
        &RequestContext::new(partition, actor),
        &DownloadRequest {
            segment_id: id,
            scopes,
            if_none_match,
        },
    )
}

fn refused(result: Result<Download, WireFailure>) -> (u16, String) {
    match result {
        Err(failure) => (failure.status, failure.code().to_owned()),
        Ok(Download::Segment { etag, .. } | Download::NotModified { etag }) => {
            panic!("expected a refusal, got the segment {etag}")
        }
    }
}

#[test]
fn downloads_are_reauthorized_every_time() {
    let fixture = seeded(1024);
    let reference = the_ref(&fixture.ok("alice", bootstrap("phone-a", "l1", 0b11)).frames);
    let id = reference.segment_id.as_str();
    let l1 = Some(r#"{"list_id":["l1"]}"#);

    // The owner with the subscription's scopes: the bytes, addressed by content.
    let Download::Segment { bytes, etag } =
        download(&fixture, "alice", "acme", id, l1, None).unwrap()
    else {
        panic!("expected the segment");
    };
    assert_eq!(sync_ssp2::sha256::segment_id(&bytes), id);
    assert_eq!(etag, format!("\"{id}\""));
    assert_eq!(i64::try_from(bytes.len()).unwrap(), reference.byte_length);
    assert_eq!(
        sync_ssp2::decode_segment(&bytes)
            .unwrap()
            .blocks
            .concat()
            .len(),
        40
    );
    // If-None-Match with its ETag: 304.
    assert_eq!(
        download(&fixture, "alice", "acme", id, l1, Some(&etag)).unwrap(),
        Download::NotModified { etag: etag.clone() }
    );

    // Another actor not allowed l1: nothing readable remains.
    assert_eq!(
        refused(download(&fixture, "bob", "acme", id, l1, None)),
        (403, "sync.forbidden".into())
    );
    // Other requested scopes: another digest.
    fixture.allow("alice", "list_id", &["l2"]);
    assert_eq!(
        refused(download(
            &fixture,
            "alice",
            "acme",
            id,
            Some(r#"{"list_id":["l1","l2"]}"#),
            None
        )),
        (403, "sync.forbidden".into())
    );
    // The resolver fails: forbidden.
    fixture.grants.failing.lock().unwrap().push("alice".into());
    assert_eq!(
        refused(download(&fixture, "alice", "acme", id, l1, None)),
        (403, "sync.forbidden".into())
    );
    fixture.grants.failing.lock().unwrap().clear();
    // Revoked since the pull: forbidden, although the segment exists.
    fixture.grants.allowed.lock().unwrap().remove("alice");
    assert_eq!(
        refused(download(&fixture, "alice", "acme", id, l1, None)),
        (403, "sync.forbidden".into())
    );
    fixture.allow("alice", "list_id", &["l1"]);

    // Missing or malformed scopes header: 400.
    assert_eq!(
        refused(download(&fixture, "alice", "acme", id, None, None)),
        (400, "sync.invalid_request".into())
    );
    assert_eq!(
        refused(download(&fixture, "alice", "acme", id, Some("[1]"), None)),
        (400, "sync.invalid_request".into())
    );
    // Another partition, an unknown id, not a content address: 404 not found.
    fixture.allow("alice", "list_id", &["l1"]);
    assert_eq!(
        refused(download(&fixture, "alice", "other", id, l1, None)),
        (404, "sync.not_found".into())
    );
    let unknown = format!("sha256:{}", "0".repeat(64));
    assert_eq!(
        refused(download(&fixture, "alice", "acme", &unknown, l1, None)),
        (404, "sync.not_found".into())
    );
    assert_eq!(
        refused(download(&fixture, "alice", "acme", "nope", l1, None)),
        (404, "sync.not_found".into())
    );

    // Past its TTL (24 h by default): 404 segment expired, retryable.
    fixture
        .clock
        .advance(sync_core::segments::DEFAULT_SEGMENT_TTL_MS);
    let expired = download(&fixture, "alice", "acme", id, l1, None).expect_err("expired");
    assert_eq!(
        (expired.status, expired.code()),
        (404, "sync.segment_expired")
    );
    assert_eq!(expired.body["retryable"], true);
}

/// Reads are authorized like writes (`engine.md` §3.2 item 4a), so the
/// effective map depends on the table: `docs` declares `org_id` and
/// `list_id`, `todos` only `list_id`. A segment of `docs` built for an
/// actor allowed every org carries the map `{list_id:[l1]}` — which is
/// also what an actor allowed only org `o1` gets for `todos`. That equal
/// map of another table must not open the segment.
#[test]
fn an_equal_map_of_another_table_never_opens_a_segment() {
    let fixture = Fixture::new(1024);
    fixture.allow("pusher", "list_id", &["*"]);
    fixture.allow("pusher", "org_id", &["*"]);
    fixture.push_docs(
        "pusher",
        &[
            ("d1", "o1", "l1"),
            ("d2", "o2", "l1"),
            ("d3", "o2", "l1"),
            ("d4", "o1", "l1"),
            ("d5", "o2", "l1"),
            ("d6", "o1", "l1"),
        ],
    );
    fixture.allow("root", "list_id", &["l1"]);
    fixture.allow("root", "org_id", &["*"]);
    fixture.allow("mallory", "list_id", &["l1"]);
    fixture.allow("mallory", "org_id", &["o1"]);
    let mut request = bootstrap("phone-r", "l1", 0b10);
    for frame in &mut request.frames {
        if let sync_ssp2::RequestFrame::Subscription(sub) = frame {
            sub.id = "docs".into();
            sub.table = "docs".into();
        }
    }
    let reference = the_ref(&fixture.ok("root", request).frames);
    let id = reference.segment_id.as_str();
    let l1 = Some(r#"{"list_id":["l1"]}"#);
    // The actor it was built for reads every org's rows.
    let Download::Segment { bytes, .. } = download(&fixture, "root", "acme", id, l1, None).unwrap()
    else {
        panic!("expected the segment");
    };
    assert_eq!(
        sync_ssp2::decode_segment(&bytes)
            .unwrap()
            .blocks
            .concat()
            .len(),
        6
    );
    // An actor allowed org o1 only: its `docs` map holds org_id, and its
    // equal `todos` map is not the segment's table.
    assert_eq!(
        refused(download(&fixture, "mallory", "acme", id, l1, None)),
        (403, "sync.forbidden".into())
    );
}

#[test]
fn expired_segments_are_pruned_by_the_service_clock() {
    let fixture = seeded(1024);
    let reference = the_ref(&fixture.ok("alice", bootstrap("phone-a", "l1", 0b10)).frames);
    let id = reference.segment_id.as_str();
    let l1 = Some(r#"{"list_id":["l1"]}"#);
    // Live: nothing to prune, the segment still downloads.
    assert_eq!(fixture.service.prune_expired_segments(100).unwrap(), 0);
    assert!(download(&fixture, "alice", "acme", id, l1, None).is_ok());
    // A day and an hour later it has expired and the prune deletes it.
    fixture.clock.advance(25 * 3_600_000);
    assert_eq!(fixture.service.prune_expired_segments(100).unwrap(), 1);
    assert_eq!(
        refused(download(&fixture, "alice", "acme", id, l1, None)),
        (404, "sync.not_found".into())
    );
}
