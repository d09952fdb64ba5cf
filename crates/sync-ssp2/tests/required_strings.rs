//! Strings whose field tables say "non-empty" beyond `clientId` and
//! `clientCommitId`: `REQ_HEADER.logEpoch` (when present),
//! `RESP_HEADER.logEpoch` and `LEASE.leaseId`. An empty one is refused on
//! decode and cannot be encoded.

mod support;

use sync_ssp2::*;

fn v2_request(log_epoch: &str) -> Request {
    Request::pull_only(
        WireVersion::V2,
        ReqHeader {
            client_id: "c".into(),
            schema_version: 1,
            log_epoch: Some(log_epoch.into()),
        },
        PullHeader::default(),
        Vec::new(),
    )
}

fn v2_header(log_epoch: &str) -> RespHeader {
    RespHeader {
        required_schema_version: None,
        latest_schema_version: Some(1),
        epoch: Some(ResponseEpoch {
            log_epoch: log_epoch.into(),
            reset_required: false,
        }),
    }
}

fn lease(lease_id: &str) -> ResponseFrame {
    ResponseFrame::Lease(Lease {
        lease_id: lease_id.into(),
        expires_at_ms: 1,
    })
}

fn v2_response(frames: Vec<ResponseFrame>) -> Response {
    Response {
        wire_version: WireVersion::V2,
        frames,
    }
}

/// `bytes` with the payload of its frame number `index` replaced.
fn with_payload(bytes: &[u8], index: usize, payload: Vec<u8>) -> Vec<u8> {
    let (header, mut frames) = support::split(bytes);
    frames[index].1 = payload;
    support::join(&header, &frames)
}

fn assert_refused(result: Result<impl std::fmt::Debug, DecodeError>, what: &str) {
    match result {
        Err(e) => assert_eq!(e.code(), "sync.invalid_request", "{what}: {e}"),
        Ok(v) => panic!("an empty {what} was decoded: {v:?}"),
    }
}

#[test]
fn an_empty_request_log_epoch_is_refused_on_decode() {
    let valid = encode_request(&v2_request("e")).unwrap();
    // clientId "c", schemaVersion 1, logEpoch present and empty.
    let mut payload = support::str_field("c");
    payload.extend_from_slice(&1i32.to_le_bytes());
    payload.push(1);
    payload.extend_from_slice(&support::str_field(""));
    assert_refused(
        decode_request(&with_payload(&valid, 0, payload)),
        "REQ_HEADER.logEpoch",
    );
    // The same bytes with the epoch back are read.
    let mut payload = support::str_field("c");
    payload.extend_from_slice(&1i32.to_le_bytes());
    payload.push(1);
    payload.extend_from_slice(&support::str_field("e"));
    assert!(decode_request(&with_payload(&valid, 0, payload)).is_ok());
}

#[test]
fn an_empty_response_log_epoch_is_refused_on_decode() {
    let valid = encode_response(&v2_response(vec![ResponseFrame::RespHeader(v2_header(
        "e",
    ))]))
    .unwrap();
    let header_payload = |epoch: &str| {
        // requiredSchemaVersion absent, latestSchemaVersion 1, logEpoch,
        // resetRequired false.
        let mut p = vec![0, 1];
        p.extend_from_slice(&1i32.to_le_bytes());
        p.extend_from_slice(&support::str_field(epoch));
        p.push(0);
        p
    };
    assert_refused(
        decode_response(&with_payload(&valid, 0, header_payload(""))),
        "RESP_HEADER.logEpoch",
    );
    assert!(decode_response(&with_payload(&valid, 0, header_payload("e"))).is_ok());
}

#[test]
fn an_empty_lease_id_is_refused_on_decode() {
    let valid = encode_response(&v2_response(vec![
        ResponseFrame::RespHeader(v2_header("e")),
        lease("l"),
    ]))
    .unwrap();
    let lease_payload = |id: &str| {
        let mut p = support::str_field(id);
        p.extend_from_slice(&1i64.to_le_bytes());
        p
    };
    assert_refused(
        decode_response(&with_payload(&valid, 1, lease_payload(""))),
        "LEASE.leaseId",
    );
    assert!(decode_response(&with_payload(&valid, 1, lease_payload("l"))).is_ok());
}

#[test]
fn the_encoder_cannot_write_an_empty_one() {
    assert!(matches!(
        encode_request(&v2_request("")),
        Err(EncodeError::Constraint { .. })
    ));
    assert!(matches!(
        encode_response(&v2_response(vec![ResponseFrame::RespHeader(v2_header(""))])),
        Err(EncodeError::Constraint { .. })
    ));
    assert!(matches!(
        encode_response(&v2_response(vec![
            ResponseFrame::RespHeader(v2_header("e")),
            lease("")
        ])),
        Err(EncodeError::Constraint { .. })
    ));
}

#[test]
fn the_writer_refuses_an_empty_lease_id_and_writes_nothing_of_it() {
    let mut writer = ResponseWriter::new(Vec::new(), WireVersion::V2).unwrap();
    writer
        .write_frame(&ResponseFrame::RespHeader(v2_header("e")))
        .unwrap();
    assert!(matches!(
        writer.write_frame(&lease("")),
        Err(WriteError::Encode(EncodeError::Constraint { .. }))
    ));
    writer.write_frame(&lease("l")).unwrap();
    let response = decode_response(&writer.finish().unwrap()).unwrap();
    assert_eq!(response.frames.len(), 2);
}
