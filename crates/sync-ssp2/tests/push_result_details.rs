//! `PUSH_RESULT_DETAILS` completes the `PUSH_RESULT` right before it
//! (§6.3.1): that result is a rejection, the details name its commit, and
//! every entry names one of its `error` records. Checked on decode, on
//! encode and by the streaming writer.

mod support;

use sync_ssp2::*;

const DETAILS: &str = r#"{"reason":"too-long"}"#;

/// A result for commit `id` whose operation 0 is an error and operation 1
/// applied.
fn result(id: &str, status: PushStatus) -> ResponseFrame {
    ResponseFrame::PushResult(PushResult {
        client_commit_id: id.into(),
        status,
        results: vec![
            OpResult {
                op_index: 0,
                kind: OpResultKind::Error {
                    code: "sync.forbidden".into(),
                    message: "no".into(),
                    retryable: false,
                },
            },
            OpResult {
                op_index: 1,
                kind: OpResultKind::Applied,
            },
        ],
    })
}

fn details(id: &str, op_index: i32) -> ResponseFrame {
    ResponseFrame::PushResultDetails(PushResultDetails {
        client_commit_id: id.into(),
        entries: vec![DetailEntry {
            op_index,
            details_json: DETAILS.into(),
        }],
    })
}

/// A `PUSH_RESULT_DETAILS` payload written by hand, so that any commit id
/// and operation index can be put on the wire.
fn details_payload(id: &str, op_index: i32) -> Vec<u8> {
    let mut p = support::str_field(id);
    p.extend_from_slice(&1u32.to_le_bytes());
    p.extend_from_slice(&op_index.to_le_bytes());
    p.extend_from_slice(&support::str_field(DETAILS));
    p
}

fn response(frames: Vec<ResponseFrame>) -> Response {
    let mut all = vec![ResponseFrame::RespHeader(RespHeader::default())];
    all.extend(frames);
    Response {
        wire_version: WireVersion::V1,
        frames: all,
    }
}

/// The bytes of a response holding `result`, followed by a details frame
/// naming `id` and `op_index`, whatever our encoder thinks of the pair.
fn result_then_details(result: ResponseFrame, id: &str, op_index: i32) -> Vec<u8> {
    let bytes = encode_response(&response(vec![result])).unwrap();
    let (header, mut frames) = support::split(&bytes);
    frames.push((
        frames::types::PUSH_RESULT_DETAILS,
        details_payload(id, op_index),
    ));
    support::join(&header, &frames)
}

const REJECTED: PushStatus = PushStatus::Rejected;
const APPLIED: PushStatus = PushStatus::Applied { commit_seq: 7 };

/// The cases every check refuses, as (what, result, details id, op index).
fn broken_pairs() -> Vec<(&'static str, ResponseFrame, &'static str, i32)> {
    vec![
        ("after an applied result", result("c1", APPLIED), "c1", 0),
        (
            "after a cached result",
            result("c1", PushStatus::Cached { commit_seq: 7 }),
            "c1",
            0,
        ),
        ("naming another commit", result("c1", REJECTED), "c2", 0),
        ("naming an applied record", result("c1", REJECTED), "c1", 1),
        ("naming no record at all", result("c1", REJECTED), "c1", 3),
        ("naming an empty commit id", result("", REJECTED), "", 0),
    ]
}

#[test]
fn details_completing_their_rejected_result_are_read() {
    let bytes = result_then_details(result("c1", REJECTED), "c1", 0);
    let decoded = decode_response(&bytes).unwrap();
    assert_eq!(decoded.frames[2], details("c1", 0));
}

#[test]
fn details_that_do_not_complete_the_result_before_them_are_refused_on_decode() {
    for (what, result, id, op_index) in broken_pairs() {
        let bytes = result_then_details(result, id, op_index);
        match decode_response(&bytes) {
            Err(e) => assert_eq!(e.code(), "sync.invalid_request", "{what}: {e}"),
            Ok(r) => panic!("details {what} were read: {r:?}"),
        }
    }
}

#[test]
fn details_that_do_not_complete_the_result_before_them_are_not_encoded() {
    assert!(encode_response(&response(vec![result("c1", REJECTED), details("c1", 0)])).is_ok());
    for (what, result, id, op_index) in broken_pairs() {
        let refused = encode_response(&response(vec![result, details(id, op_index)]));
        assert!(
            matches!(
                refused,
                Err(EncodeError::Grammar { .. } | EncodeError::Constraint { .. })
            ),
            "details {what}: {refused:?}"
        );
    }
}

#[test]
fn the_writer_refuses_mismatched_details_without_writing_them() {
    let mut writer = ResponseWriter::new(Vec::new(), WireVersion::V1).unwrap();
    writer
        .write_frame(&ResponseFrame::RespHeader(RespHeader::default()))
        .unwrap();
    writer.write_frame(&result("c1", REJECTED)).unwrap();
    assert!(matches!(
        writer.write_frame(&details("c2", 0)),
        Err(WriteError::Encode(EncodeError::Grammar { .. }))
    ));
    writer.write_frame(&details("c1", 0)).unwrap();
    let decoded = decode_response(&writer.finish().unwrap()).unwrap();
    assert_eq!(decoded.frames.len(), 3);
    assert_eq!(decoded.frames[2], details("c1", 0));
}
