//! The golden request vectors through the decoder into the engine: valid
//! ones run a round whose response decodes; invalid ones are refused with
//! HTTP 400 and the code their manifest names, before the engine runs.

mod fixture;

use std::path::PathBuf;

use fixture::Fixture;
use serde_json::Value;
use sync_ssp2::ResponseFrame;
use sync_wire::RoundError;

fn vectors() -> PathBuf {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/ssp2-vectors/request");
    assert!(
        dir.join("manifest.json").is_file(),
        "the SSP2 golden vectors are missing at {}",
        dir.display()
    );
    dir
}

fn manifest() -> Value {
    serde_json::from_slice(&std::fs::read(vectors().join("manifest.json")).unwrap()).unwrap()
}

fn refusal(result: Result<Vec<u8>, RoundError>) -> sync_wire::WireFailure {
    match result {
        Err(RoundError::Refused(failure)) => failure,
        Ok(bytes) => panic!(
            "expected a refusal, got {:?}",
            sync_ssp2::decode_response(&bytes)
        ),
        Err(other) => panic!("expected a refusal, got {other}"),
    }
}

/// What each valid vector gives: the response's frame types after its
/// header, or the refusal code.
fn outcome(fixture: &Fixture, body: &[u8]) -> String {
    match fixture.round("alice", body) {
        Ok(bytes) => {
            let response = sync_ssp2::decode_response(&bytes).unwrap();
            assert!(matches!(response.frames[0], ResponseFrame::RespHeader(_)));
            let names: Vec<&str> = response
                .frames
                .iter()
                .map(|f| sync_ssp2::frames::frame_name(f.frame_type()).unwrap_or("?"))
                .collect();
            names.join(" ")
        }
        Err(RoundError::Refused(failure)) => {
            format!("HTTP {} {}", failure.status, failure.code())
        }
        Err(other) => panic!("{other}"),
    }
}

#[test]
fn valid_request_vectors_run_a_round() {
    let fixture = Fixture::new(sync_wire::DEFAULT_INLINE_LIMIT);
    fixture.allow("alice", "project", &["*"]);
    let mut seen = Vec::new();
    for case in manifest()["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let body = std::fs::read(vectors().join(case["bin"].as_str().unwrap())).unwrap();
        seen.push(format!("{name}: {}", outcome(&fixture, &body)));
    }
    // Schema version 2 (pull-bootstrap, epoch-bound) is newer than the
    // running schema: the header alone answers. A cursor ahead of the log
    // (42 on an empty partition) bootstraps.
    let expected = [
        "pull-minimal: RESP_HEADER SUB_START SEGMENT_INLINE SUB_END",
        "pull-bootstrap: RESP_HEADER",
        "push-multi-commit: RESP_HEADER PUSH_RESULT PUSH_RESULT",
        "combined: RESP_HEADER PUSH_RESULT SUB_START SEGMENT_INLINE SUB_END",
        "epoch-bound: RESP_HEADER",
    ];
    assert_eq!(seen, expected);
}

#[test]
fn invalid_request_vectors_are_refused_before_the_round() {
    let fixture = Fixture::new(sync_wire::DEFAULT_INLINE_LIMIT);
    for case in manifest()["invalid"].as_array().unwrap() {
        let body = std::fs::read(vectors().join(case["bin"].as_str().unwrap())).unwrap();
        let failure = refusal(fixture.round("alice", &body));
        assert_eq!(failure.status, 400, "{}", case["name"]);
        assert_eq!(
            failure.code(),
            case["error"].as_str().unwrap(),
            "{}",
            case["name"]
        );
        assert_eq!(failure.body["category"], "invalid-request");
        assert_eq!(failure.body["recommendedAction"], "fixRequest");
    }
}

#[test]
fn wire_version_4_is_refused_naming_the_versions_served() {
    let fixture = Fixture::new(sync_wire::DEFAULT_INLINE_LIMIT);
    let mut body = std::fs::read(vectors().join("pull-minimal.bin")).unwrap();
    body[4..6].copy_from_slice(&4u16.to_le_bytes());
    // Whatever follows the envelope header is never read.
    body.truncate(8);
    let failure = refusal(fixture.round("alice", &body));
    assert_eq!(failure.status, 400);
    assert_eq!(failure.code(), "sync.invalid_request");
    assert_eq!(
        failure.body["details"]["supportedWireVersions"],
        serde_json::json!([1, 2, 3])
    );
    assert_eq!(failure.body["details"]["wireVersion"], 4);
}

#[test]
fn a_socket_refusal_of_a_version_3_round_is_written_in_version_3() {
    let fixture = Fixture::new(sync_wire::DEFAULT_INLINE_LIMIT);
    let mut body = std::fs::read(vectors().join("pull-minimal.bin")).unwrap();
    body[4..6].copy_from_slice(&4u16.to_le_bytes());
    let failure = refusal(fixture.round("alice", &body));
    let stream = sync_wire::realtime::refusal_stream(&failure, 3, "epoch-1");
    let response = sync_ssp2::decode_response(&stream).unwrap();
    assert_eq!(response.wire_version, sync_ssp2::WireVersion::V3);
    let Some(ResponseFrame::Error(error)) = response.frames.last() else {
        panic!("no ERROR frame: {response:?}");
    };
    assert_eq!(error.code, "sync.invalid_request");
    // A version the codec does not write falls back to version 2.
    let stream = sync_wire::realtime::refusal_stream(&failure, 9, "epoch-1");
    assert_eq!(
        sync_ssp2::decode_response(&stream).unwrap().wire_version,
        sync_ssp2::WireVersion::V2
    );
}
