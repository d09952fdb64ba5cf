//! Wire version 3 through the service (`docs/design/wire-v3.md` §2.3,
//! §5.3): sparse pushes decoded from the envelope, a conflict record with
//! `conflictColumns` encoded at version 3, and the same stored conflict
//! replayed at version 2 without it.

mod fixture;

use fixture::{header, Fixture};
use sync_ssp2::{
    OpResultKind, PushCommit, PushOp, PushOperation, PushStatus, Request, ResponseFrame,
    WireVersion,
};

/// One commit of one upsert of `todos/t1` at `version`; its push result.
fn push(
    f: &Fixture,
    version: WireVersion,
    epoch: &str,
    ccid: &str,
    base_version: Option<i64>,
    payload: Vec<u8>,
) -> sync_ssp2::PushResult {
    let response = f.ok(
        "writer",
        Request::from_parts(
            version,
            sync_ssp2::ReqHeader {
                log_epoch: (version != WireVersion::V1).then(|| epoch.to_owned()),
                ..header("writer-1")
            },
            vec![PushCommit {
                client_commit_id: ccid.into(),
                operations: vec![PushOperation {
                    table: "todos".into(),
                    row_id: "t1".into(),
                    base_version,
                    op: PushOp::Upsert { payload },
                }],
            }],
            None,
        ),
    );
    assert_eq!(response.wire_version, version);
    response
        .frames
        .into_iter()
        .find_map(|frame| match frame {
            ResponseFrame::PushResult(r) => Some(r),
            _ => None,
        })
        .expect("a push result")
}

/// The log epoch, acquired by a version-3 bootstrap round of `writer-1`.
fn epoch(f: &Fixture) -> String {
    let mut pull = fixture::bootstrap("writer-1", "l1", 1);
    pull.wire_version = WireVersion::V3;
    f.ok("writer", pull)
        .frames
        .into_iter()
        .find_map(|frame| match frame {
            ResponseFrame::RespHeader(h) => h.epoch.map(|e| e.log_epoch),
            _ => None,
        })
        .expect("an epoch")
}

/// A sparse `todos/t1` row: every column (`None`, title `first`), or
/// only the key and `title`.
fn sparse(f: &Fixture, title: Option<&str>) -> Vec<u8> {
    let full = f.todo("t1", "l1", title.unwrap_or("first"));
    match title {
        None => {
            let mut out = vec![0b111];
            out.extend_from_slice(&full);
            out
        }
        Some(title) => {
            // key + title: bits 0 and 2; a null bitmap of two present
            // columns (one byte, none null); the two strings.
            let table = f.schema.table("todos").unwrap();
            let slots = vec![
                Some(sync_core::RowValue::String("t1".into())),
                None,
                Some(sync_core::RowValue::String(title.into())),
            ];
            sync_core::codec::encode_sparse(&table.columns, table.primary_key_index, &slots)
                .unwrap()
        }
    }
}

#[test]
fn a_version_3_conflict_names_its_columns_and_a_version_2_replay_drops_them() {
    let f = Fixture::new(sync_wire::DEFAULT_INLINE_LIMIT);
    f.allow("writer", "list_id", &["*"]);
    let epoch = epoch(&f);
    let insert = push(&f, WireVersion::V3, &epoch, "c1", None, sparse(&f, None));
    assert!(
        matches!(insert.status, PushStatus::Applied { .. }),
        "{insert:?}"
    );
    let edit = push(
        &f,
        WireVersion::V3,
        &epoch,
        "c2",
        Some(1),
        sparse(&f, Some("two")),
    );
    assert!(
        matches!(edit.status, PushStatus::Applied { .. }),
        "{edit:?}"
    );
    // The same column at the same base: a conflict on `title` (bit 2).
    let stale = push(
        &f,
        WireVersion::V3,
        &epoch,
        "c3",
        Some(1),
        sparse(&f, Some("three")),
    );
    assert_eq!(stale.status, PushStatus::Rejected);
    let OpResultKind::Conflict {
        server_version,
        server_row,
        conflict_columns,
        ..
    } = &stale.results[0].kind
    else {
        panic!("not a conflict: {stale:?}");
    };
    assert_eq!(*server_version, 2);
    assert_eq!(*server_row, f.todo("t1", "l1", "two"));
    assert_eq!(conflict_columns.as_deref(), Some(&[0b100u8][..]));
    // Replayed at version 2: the same record without the bitmap.
    let replay = push(
        &f,
        WireVersion::V2,
        &epoch,
        "c3",
        Some(1),
        f.todo("t1", "l1", "x"),
    );
    let OpResultKind::Conflict {
        conflict_columns, ..
    } = &replay.results[0].kind
    else {
        panic!("not a conflict: {replay:?}");
    };
    assert_eq!(*conflict_columns, None);
}
