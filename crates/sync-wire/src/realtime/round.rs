//! Sync rounds over the realtime socket (SSP2 §8.7): the same round as
//! `POST /sync`, bound to the connection's client id, and the minimal
//! error stream that stands for an HTTP refusal on the socket.

use std::io::Write;

use sync_engine::{RequestContext, RespHeader, RoundOutcome, WireError};
use sync_ssp2::{ResponseWriter, WireVersion};

use crate::frames;
use crate::request::decode_sync_request;
use crate::service::{RoundError, WireService};
use crate::WireFailure;

/// What a completed socket round tells the connection.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SocketRound {
    /// The round's outcome (applied commits, for fanout).
    pub outcome: RoundOutcome,
    /// The request's wire version when it carried a `PULL_HEADER`: the
    /// connection re-registers at round end and encodes later deltas in
    /// this version.
    pub pulled: Option<i32>,
    /// The request's wire version.
    pub wire_version: i32,
}

impl WireService {
    /// Runs a socket round of the connection of `client_id` (§8.7): as
    /// [`WireService::sync`], except that a request whose
    /// `REQ_HEADER.clientId` is another client's is refused
    /// `sync.invalid_client_id`.
    pub fn socket_round<W: Write>(
        &self,
        ctx: &RequestContext,
        client_id: &str,
        body: &[u8],
        out: W,
    ) -> Result<SocketRound, RoundError> {
        let request = decode_sync_request(body).map_err(RoundError::Refused)?;
        if request.header.client_id != client_id {
            return Err(RoundError::Refused(WireFailure::from_wire_error(
                &WireError::new(
                    "sync.invalid_client_id",
                    "the round's clientId is not the connection's",
                ),
            )));
        }
        let outcome = self.run(ctx, &request, out)?;
        Ok(SocketRound {
            outcome,
            pulled: request
                .pull
                .is_some()
                .then_some(i32::from(request.wire_version)),
            wire_version: i32::from(request.wire_version),
        })
    }
}

/// The socket form of a refusal (§8.7 "Failures"): `RESP_HEADER` (with
/// the partition's `log_epoch` in version 2), `ERROR`, `END` in
/// `wire_version` (the request's, or the connection's when the request's
/// is unreadable).
pub fn refusal_stream(failure: &WireFailure, wire_version: i32, log_epoch: &str) -> Vec<u8> {
    // A refusal is written in the request's own version where the codec
    // writes it (a version-3 client reads the same header and `ERROR` as
    // version 2's), else in version 2.
    let version = u16::try_from(wire_version)
        .ok()
        .and_then(WireVersion::from_number)
        .unwrap_or(WireVersion::V2);
    let body = &failure.body;
    let text = |key: &str| body.get(key).and_then(|v| v.as_str()).unwrap_or_default();
    let mut error = WireError::new(text("code"), text("message"));
    if let Some(details) = body.get("details").and_then(|d| d.as_object()) {
        error.details = Some(Box::new(details.clone()));
    }
    let header = RespHeader {
        required_schema_version: None,
        latest_schema_version: None,
        log_epoch: Some(log_epoch.to_owned()),
        reset_required: false,
    };
    let written = ResponseWriter::new(Vec::new(), version).and_then(|mut writer| {
        writer.write_frame(&frames::header(&header, version))?;
        writer.write_frame(&frames::error(&error))?;
        writer.finish()
    });
    // A header, an error of catalog strings and END always encode.
    written.unwrap_or_default()
}
