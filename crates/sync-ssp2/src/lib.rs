//! `sync-ssp2`: the SSP2 binary wire codec of the sync protocol.
//!
//! This crate turns SSP2 request and response messages, SSG2 rows segments
//! and realtime control messages into typed Rust values and back, byte for
//! byte, and renders them as the debug JSON of the specification's §11. It
//! holds the decode-error layer of §1.7 ([`DecodeError`], with the stable
//! wire codes), canonical JSON (§11.2), the scope digest (§3.5) and a small
//! SHA-256 for segment ids.
//!
//! It is not a server: it knows nothing of HTTP, sockets, storage, schemas
//! or authorization. Request validation that needs host or schema state
//! (duplicate subscription ids, unknown tables, row payloads against the
//! generated row codec) belongs to the caller. Row payloads inside frames are
//! carried as opaque bytes; only rows segments, which describe their own
//! columns, are decoded down to column values. The crate is synchronous, does
//! no I/O of its own (the [`ResponseWriter`] writes into any
//! [`std::io::Write`] it is handed) and depends on `serde_json` only.
//!
//! ```
//! use sync_ssp2::{Request, WireVersion};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bytes = sync_ssp2::encode_request(&Request::pull_only(
//!     WireVersion::V1,
//!     sync_ssp2::ReqHeader { client_id: "client-a".into(), schema_version: 1, log_epoch: None },
//!     sync_ssp2::PullHeader::default(),
//!     Vec::new(),
//! ))?;
//! let request = sync_ssp2::decode_request(&bytes)?;
//! assert_eq!(request.header().map(|h| h.client_id.as_str()), Some("client-a"));
//! # Ok(())
//! # }
//! ```
//!
//! The specification is `../shared/spec/` for the storage side and the
//! SSP2 specification of the protocol's reference implementation for the
//! wire; `docs/ssp2.md` says what is covered.

#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]
#![forbid(unsafe_code)]

mod base64;
pub mod canonical_json;
pub mod digest;
mod envelope;
mod error;
pub mod frames;
mod grammar;
mod json_syntax;
mod primitives;
pub mod realtime;
pub mod render;
mod request;
mod response;
mod row;
pub mod segment;
pub mod sha256;
mod sparse_row;
mod values;
mod writer;

pub use envelope::{
    message_length, peek_envelope, EnvelopeHeader, MessageKind, WireVersion,
    SUPPORTED_WIRE_VERSIONS,
};
pub use error::{DecodeError, EncodeError, WriteError};
pub use frames::{
    Accept, Change, ChangeOp, Commit, DetailEntry, ErrorFrame, Lease, MediaType, OpResult,
    OpResultKind, PullHeader, PushCommit, PushOp, PushOperation, PushResult, PushResultDetails,
    PushStatus, ReqHeader, RespHeader, ResponseEpoch, SegmentInline, SegmentRef, SignedUrl, SubEnd,
    SubStart, SubStatus, Subscription, UnknownFrame,
};
pub use request::{decode_request, encode_request, Request, RequestFrame};
pub use response::{decode_response, encode_response, Response, ResponseFrame};
pub use segment::{
    decode_segment, encode_segment, Column, ColumnType, ColumnValue, EncodedSegment, RowsSegment,
    SegmentEncoder, SegmentRow,
};
pub use sha256::{segment_id, sha256, to_hex};
pub use sparse_row::{
    decode_sparse_row, encode_sparse_row, full_row_suffix, SparseRow, SparseRowViolation,
};
pub use values::{
    cmp_utf16, CanonicalMap, DuplicateKey, InvalidJson, RawJson, ScopeMap, StoredScopes,
};
pub use writer::ResponseWriter;
