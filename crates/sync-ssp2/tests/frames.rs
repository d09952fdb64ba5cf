//! Frame-level behaviour through the public API: unknown frames kept,
//! frames of the other message kind refused, the grammar, the wire
//! version check and the streaming writer.

use sync_ssp2::*;

fn header_bytes(version: u16, kind: u8) -> Vec<u8> {
    let mut out = b"SSP2".to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&[kind, 0]);
    out
}

fn frame(out: &mut Vec<u8>, frame_type: u8, payload: &[u8]) {
    out.push(frame_type);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

fn end(out: &mut Vec<u8>) {
    frame(out, 0, &[]);
}

/// A v1 RESP_HEADER payload with both options absent.
const EMPTY_RESP_HEADER: [u8; 2] = [0, 0];

/// A SUB_END payload: nextCursor 5, no bootstrap state.
fn sub_end_payload() -> Vec<u8> {
    let mut p = 5i64.to_le_bytes().to_vec();
    p.push(0);
    p
}

fn sub_start_payload() -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&1u32.to_le_bytes());
    p.push(b's');
    p.push(1); // active
    p.extend_from_slice(&0u32.to_le_bytes()); // reasonCode ""
    p.extend_from_slice(&0u32.to_le_bytes()); // no scopes
    p.push(0); // bootstrap false
    p
}

fn minimal_request_v1() -> Vec<u8> {
    let request = Request::pull_only(
        WireVersion::V1,
        ReqHeader {
            client_id: "c".into(),
            schema_version: 1,
            log_epoch: None,
        },
        PullHeader::default(),
        Vec::new(),
    );
    encode_request(&request).unwrap()
}

#[test]
fn unknown_frames_are_kept_in_place_and_reencoded_byte_for_byte() {
    let mut bytes = header_bytes(1, 2);
    frame(&mut bytes, 0x10, &EMPTY_RESP_HEADER);
    frame(&mut bytes, 0x17, b"reserved");
    frame(&mut bytes, 0x12, &sub_start_payload());
    frame(&mut bytes, 0x7e, &[]);
    frame(&mut bytes, 0x16, &sub_end_payload());
    frame(&mut bytes, 0xff, &[1, 2, 3]);
    end(&mut bytes);
    let response = decode_response(&bytes).unwrap();
    let types: Vec<u8> = response
        .frames
        .iter()
        .map(ResponseFrame::frame_type)
        .collect();
    assert_eq!(types, [0x10, 0x17, 0x12, 0x7e, 0x16, 0xff]);
    assert_eq!(
        response.frames[1],
        ResponseFrame::Unknown(UnknownFrame {
            frame_type: 0x17,
            payload: b"reserved".to_vec()
        })
    );
    assert_eq!(encode_response(&response).unwrap(), bytes);
    let rendered = render::render_response(&response);
    assert_eq!(
        rendered["frames"][1],
        serde_json::json!({"type": "UNKNOWN", "frameType": 23, "payload": "cmVzZXJ2ZWQ="})
    );
}

#[test]
fn a_frame_of_the_other_message_kind_is_refused() {
    // SUB_START inside a request.
    let mut bytes = minimal_request_v1();
    let end_at = bytes.len() - 5;
    bytes.truncate(end_at);
    frame(&mut bytes, 0x12, &sub_start_payload());
    end(&mut bytes);
    assert_eq!(
        decode_request(&bytes),
        Err(DecodeError::ForeignFrame { frame_type: 0x12 })
    );
    // REQ_HEADER inside a response.
    let mut bytes = header_bytes(1, 2);
    frame(&mut bytes, 0x10, &EMPTY_RESP_HEADER);
    frame(&mut bytes, 0x01, &[1, 0, 0, 0, b'c', 1, 0, 0, 0]);
    end(&mut bytes);
    let err = decode_response(&bytes).unwrap_err();
    assert_eq!(err, DecodeError::ForeignFrame { frame_type: 0x01 });
    assert_eq!(err.code(), "sync.invalid_request");
}

#[test]
fn an_unknown_frame_under_a_registered_type_is_not_encoded() {
    let response = Response {
        wire_version: WireVersion::V1,
        frames: vec![
            ResponseFrame::RespHeader(RespHeader::default()),
            ResponseFrame::Unknown(UnknownFrame {
                frame_type: 0x13,
                payload: vec![],
            }),
        ],
    };
    assert_eq!(
        encode_response(&response),
        Err(EncodeError::RegisteredFrameType { frame_type: 0x13 })
    );
}

#[test]
fn unknown_frames_cannot_open_a_message_or_follow_error() {
    let mut first = header_bytes(1, 2);
    frame(&mut first, 0x17, &[]);
    frame(&mut first, 0x10, &EMPTY_RESP_HEADER);
    end(&mut first);
    assert!(matches!(
        decode_response(&first),
        Err(DecodeError::Grammar { .. })
    ));

    let error = ErrorFrame {
        code: "sync.rate_limited".into(),
        message: "m".into(),
        category: "rate-limited".into(),
        retryable: true,
        recommended_action: "retryLater".into(),
        details: None,
    };
    let ok = Response {
        wire_version: WireVersion::V1,
        frames: vec![
            ResponseFrame::RespHeader(RespHeader::default()),
            ResponseFrame::Error(error),
        ],
    };
    let mut after_error = encode_response(&ok).unwrap();
    let end_at = after_error.len() - 5;
    after_error.truncate(end_at);
    frame(&mut after_error, 0x17, &[]);
    end(&mut after_error);
    assert!(matches!(
        decode_response(&after_error),
        Err(DecodeError::Grammar { .. })
    ));
}

/// A LEASE payload: leaseId "l", expiresAtMs 9.
fn lease_payload() -> Vec<u8> {
    let mut p = vec![1, 0, 0, 0, b'l'];
    p.extend_from_slice(&9i64.to_le_bytes());
    p
}

#[test]
fn lease_comes_immediately_after_the_header_with_no_unknown_frame_between() {
    let mut between = header_bytes(1, 2);
    frame(&mut between, 0x10, &EMPTY_RESP_HEADER);
    frame(&mut between, 0x30, &[1, 2, 3]);
    frame(&mut between, 0x19, &lease_payload());
    end(&mut between);
    let err = decode_response(&between).unwrap_err();
    assert!(matches!(err, DecodeError::Grammar { .. }), "{err:?}");
    assert_eq!(err.code(), "sync.invalid_request");

    let mut after = header_bytes(1, 2);
    frame(&mut after, 0x10, &EMPTY_RESP_HEADER);
    frame(&mut after, 0x19, &lease_payload());
    frame(&mut after, 0x30, &[1, 2, 3]);
    end(&mut after);
    assert_eq!(decode_response(&after).unwrap().frames.len(), 3);

    let mut writer = ResponseWriter::new(Vec::new(), WireVersion::V1).unwrap();
    writer
        .write_frame(&ResponseFrame::RespHeader(RespHeader::default()))
        .unwrap();
    writer
        .write_frame(&ResponseFrame::Unknown(UnknownFrame {
            frame_type: 0x30,
            payload: vec![1, 2, 3],
        }))
        .unwrap();
    let lease = ResponseFrame::Lease(Lease {
        lease_id: "l".into(),
        expires_at_ms: 9,
    });
    assert!(matches!(
        writer.write_frame(&lease),
        Err(WriteError::Encode(EncodeError::Grammar { .. }))
    ));
}

#[test]
fn wire_version_4_is_refused_before_any_frame() {
    // A version-4 envelope followed by bytes that are no frame at all.
    let mut bytes = header_bytes(4, 1);
    bytes.extend_from_slice(&[0xee; 3]);
    let err = decode_request(&bytes).unwrap_err();
    assert_eq!(err, DecodeError::UnsupportedWireVersion { version: 4 });
    assert_eq!(err.code(), "sync.invalid_request");
    assert_eq!(
        err.details(),
        Some(serde_json::json!({"wireVersion": 4, "supportedWireVersions": [1, 2, 3]}))
    );
    assert_eq!(
        peek_envelope(&bytes),
        Err(DecodeError::UnsupportedWireVersion { version: 4 })
    );
    // Versions 1, 2 and 3 are read.
    for v in [1u16, 2, 3] {
        assert_eq!(
            peek_envelope(&header_bytes(v, 1)).map(|h| h.wire_version.number()),
            Ok(v)
        );
    }
}

#[test]
fn bytes_after_end_and_a_missing_end_are_refused() {
    let mut bytes = minimal_request_v1();
    assert!(decode_request(&bytes).is_ok());
    bytes.push(0);
    assert_eq!(
        decode_request(&bytes),
        Err(DecodeError::TrailingBytes {
            what: "the END frame"
        })
    );
    let mut bytes = minimal_request_v1();
    bytes.truncate(bytes.len() - 5);
    assert_eq!(decode_request(&bytes), Err(DecodeError::MissingEnd));
}

#[test]
fn a_request_without_push_or_pull_is_refused() {
    let mut bytes = header_bytes(1, 1);
    frame(&mut bytes, 0x01, &[1, 0, 0, 0, b'c', 1, 0, 0, 0]);
    end(&mut bytes);
    assert!(matches!(
        decode_request(&bytes),
        Err(DecodeError::Grammar { .. })
    ));
}

#[test]
fn an_empty_push_commit_has_its_own_code() {
    let mut bytes = header_bytes(1, 1);
    frame(&mut bytes, 0x01, &[1, 0, 0, 0, b'c', 1, 0, 0, 0]);
    frame(&mut bytes, 0x02, &[1, 0, 0, 0, b'x', 0, 0, 0, 0]);
    end(&mut bytes);
    let err = decode_request(&bytes).unwrap_err();
    assert_eq!(err, DecodeError::EmptyCommit);
    assert_eq!(err.code(), "sync.empty_commit");
}

#[test]
fn mixing_commits_and_segments_in_one_section_is_refused() {
    let commit = Commit {
        commit_seq: 1,
        created_at_ms: 0,
        actor_id: "a".into(),
        tables: vec!["t".into()],
        changes: vec![],
    };
    let segment = SegmentRef {
        segment_id: "sha256:0".into(),
        media_type: MediaType::Rows,
        table: "t".into(),
        byte_length: 1,
        row_count: 1,
        as_of_commit_seq: 1,
        scope_digest: "d".into(),
        row_cursor: None,
        next_row_cursor: None,
        url: None,
    };
    let start = SubStart {
        id: "s".into(),
        status: SubStatus::Active,
        reason_code: String::new(),
        effective_scopes: ScopeMap::new(),
        bootstrap: false,
    };
    let response = Response {
        wire_version: WireVersion::V1,
        frames: vec![
            ResponseFrame::RespHeader(RespHeader::default()),
            ResponseFrame::SubStart(start),
            ResponseFrame::SegmentRef(segment),
            ResponseFrame::Commit(commit),
            ResponseFrame::SubEnd(SubEnd {
                next_cursor: 1,
                bootstrap_state: None,
            }),
        ],
    };
    assert!(matches!(
        encode_response(&response),
        Err(EncodeError::Grammar { .. })
    ));
}

#[test]
fn the_writer_streams_frames_and_refuses_an_illegal_one_without_writing() {
    let mut writer = ResponseWriter::new(Vec::new(), WireVersion::V2).unwrap();
    let header = RespHeader {
        required_schema_version: None,
        latest_schema_version: Some(4),
        epoch: Some(ResponseEpoch {
            log_epoch: "e1".into(),
            reset_required: false,
        }),
    };
    writer
        .write_frame(&ResponseFrame::RespHeader(header))
        .unwrap();
    // SUB_END with no open section: refused, nothing written.
    let stray = ResponseFrame::SubEnd(SubEnd {
        next_cursor: 1,
        bootstrap_state: None,
    });
    assert!(matches!(
        writer.write_frame(&stray),
        Err(WriteError::Encode(EncodeError::Grammar { .. }))
    ));
    writer
        .write_frame(&ResponseFrame::Lease(Lease {
            lease_id: "l".into(),
            expires_at_ms: 9,
        }))
        .unwrap();
    let bytes = writer.finish().unwrap();
    let response = decode_response(&bytes).unwrap();
    assert_eq!(response.frames.len(), 2);
    assert_eq!(response.wire_version, WireVersion::V2);
}

#[test]
fn v2_fields_are_refused_in_a_v1_message() {
    let header = ReqHeader {
        client_id: "c".into(),
        schema_version: 1,
        log_epoch: Some("e".into()),
    };
    let request = Request::pull_only(WireVersion::V1, header, PullHeader::default(), vec![]);
    assert_eq!(
        encode_request(&request),
        Err(EncodeError::VersionMismatch {
            what: "REQ_HEADER.logEpoch"
        })
    );
}

#[test]
fn a_twelve_byte_segment_claiming_four_gibibytes_fails_on_the_claim() {
    let mut bytes = b"SSG2".to_vec();
    bytes.extend_from_slice(&[1, 0, 0, 0]);
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(bytes.len(), 12);
    assert!(matches!(
        decode_segment(&bytes),
        Err(DecodeError::ClaimExceedsInput { claimed, available: 0, .. }) if claimed == u64::from(u32::MAX)
    ));
}

#[test]
fn host_json_is_any_rfc_8259_document_kept_verbatim() {
    // Deeper than serde_json's recursion limit, a number beyond f64, a
    // lone-surrogate escape: all valid JSON documents.
    let deep = format!("{}7{}", "[".repeat(300), "]".repeat(300));
    for text in [deep.as_str(), "1e400", "\"\\ud800\"", " { \"a\" : 1 } "] {
        let subscription = Subscription {
            id: "s".into(),
            table: "t".into(),
            scopes: ScopeMap::new(),
            params: Some(RawJson::new(text).expect("a JSON document")),
            cursor: -1,
            bootstrap_state: None,
        };
        let header = ReqHeader {
            client_id: "c".into(),
            schema_version: 1,
            log_epoch: None,
        };
        let request = Request::pull_only(
            WireVersion::V1,
            header,
            PullHeader::default(),
            vec![subscription],
        );
        let bytes = encode_request(&request).unwrap();
        let decoded = decode_request(&bytes).unwrap();
        let params = decoded
            .subscriptions()
            .next()
            .and_then(|s| s.params.clone());
        assert_eq!(params.as_ref().map(RawJson::as_str), Some(text));
    }
    assert!(RawJson::new("[1,]").is_err());
}
