//! `message_length`: where a message ends in a byte stream that arrives in
//! chunks (a realtime socket round, SSP2 §8.7).

use sync_ssp2::{
    encode_request, message_length, DecodeError, PullHeader, ReqHeader, Request, Subscription,
    WireVersion,
};

fn request() -> Vec<u8> {
    let mut scopes = sync_ssp2::ScopeMap::new();
    scopes.insert("list_id", vec!["l1".to_owned()]);
    encode_request(&Request::pull_only(
        WireVersion::V2,
        ReqHeader {
            client_id: "c".into(),
            schema_version: 1,
            log_epoch: Some("e".into()),
        },
        PullHeader {
            limit_commits: 0,
            limit_snapshot_rows: 0,
            max_snapshot_pages: 0,
            accept: sync_ssp2::Accept::from_bits(1).unwrap(),
        },
        vec![Subscription {
            id: "s".into(),
            table: "todos".into(),
            scopes,
            params: None,
            cursor: -1,
            bootstrap_state: None,
        }],
    ))
    .unwrap()
}

#[test]
fn every_proper_prefix_needs_more_and_the_whole_message_ends_at_its_end() {
    let bytes = request();
    for cut in 0..bytes.len() {
        assert_eq!(message_length(&bytes[..cut]).unwrap(), None, "cut at {cut}");
    }
    assert_eq!(message_length(&bytes).unwrap(), Some(bytes.len()));
    let mut longer = bytes.clone();
    longer.extend_from_slice(&request());
    assert_eq!(message_length(&longer).unwrap(), Some(bytes.len()));
}

#[test]
fn a_bad_envelope_header_is_an_error_as_soon_as_it_is_in() {
    let mut bytes = request();
    bytes[0] ^= 0xFF;
    assert_eq!(message_length(&bytes[..7]).unwrap(), None);
    assert!(matches!(
        message_length(&bytes[..8]),
        Err(DecodeError::BadMagic)
    ));
}

#[test]
fn a_huge_claimed_frame_length_allocates_nothing_and_waits() {
    let mut bytes = request()[..8].to_vec();
    bytes.push(0x10);
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(message_length(&bytes).unwrap(), None);
}

#[test]
fn an_end_frame_with_a_payload_is_refused() {
    let mut bytes = request()[..8].to_vec();
    bytes.push(0x00);
    bytes.extend_from_slice(&1u32.to_le_bytes());
    assert!(matches!(
        message_length(&bytes),
        Err(DecodeError::EndWithPayload)
    ));
}
