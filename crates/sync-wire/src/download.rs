//! `GET …/segments/{id}` as a pure function (SSP2 §5.5): re-authorize,
//! then answer with the bytes, 304, 403 or 404.

use std::collections::BTreeMap;

use sync_core::segments::{SegmentFetch, SegmentStore};
use sync_core::ScopeFilter;
use sync_engine::{Engine, EngineError, RequestContext, WireError};

use crate::failure::WireFailure;
use crate::frames::scope_map;
use crate::round_error::round_failure;

/// The content type of a segment download.
pub const SEGMENT_CONTENT_TYPE: &str = "application/octet-stream";

/// What a segment download asks for.
#[derive(Debug, Clone, Copy)]
pub struct DownloadRequest<'a> {
    /// The `{id}` of the path: `sha256:` and 64 lowercase hex digits.
    pub segment_id: &'a str,
    /// The `X-Syncular-Scopes` header: the canonical JSON of the requested
    /// scope map of the owning subscription (`None` when absent).
    pub scopes: Option<&'a str>,
    /// The `If-None-Match` header, if any.
    pub if_none_match: Option<&'a str>,
}

/// A successful download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Download {
    /// HTTP 200 with the segment's bytes (uncompressed; the transport may
    /// compress them by `Accept-Encoding`).
    Segment {
        /// The bytes, exactly as stored.
        bytes: Vec<u8>,
        /// The `ETag` header value: the quoted segment id.
        etag: String,
    },
    /// HTTP 304: the client's `If-None-Match` names this segment.
    NotModified {
        /// The `ETag` header value.
        etag: String,
    },
}

fn failure(code: &str, message: &str, reason: &str) -> WireFailure {
    WireFailure::from_wire_error(&WireError::new(code, message).with_detail("reason", reason))
}

fn forbidden(reason: &str) -> WireFailure {
    failure("sync.forbidden", "segment not authorized", reason)
}

/// The requested scopes of the header: a JSON object of string arrays.
fn parse_scopes(header: Option<&str>) -> Result<ScopeFilter, WireFailure> {
    let bad = || {
        failure(
            "sync.invalid_request",
            "malformed X-Syncular-Scopes",
            "scopes_header",
        )
    };
    let text = header.ok_or_else(bad)?;
    let parsed: BTreeMap<String, Vec<String>> = serde_json::from_str(text).map_err(|_| bad())?;
    Ok(parsed)
}

/// Whether an `If-None-Match` value names `etag` (a list, weak tags and
/// `*` included).
fn matches_etag(header: &str, etag: &str) -> bool {
    header.split(',').map(str::trim).any(|tag| {
        let tag = tag.strip_prefix("W/").unwrap_or(tag);
        tag == "*" || tag == etag
    })
}

/// Serves one download for `ctx` at `now_ms`.
///
/// The actor is re-authorized on every call: the engine's resolver runs
/// and its answer is intersected with the requested scopes as a pull
/// section's are ([`Engine::read_scopes`]); the digest of what remains
/// (§3.5) must be the one the segment was stored for. The answers:
///
/// | case | status | code |
/// |---|---|---|
/// | missing or malformed `X-Syncular-Scopes` | 400 | `sync.invalid_request` |
/// | nothing readable remains, or the resolver failed or refused | 403 | `sync.forbidden` |
/// | stored for this partition, for other scopes | 403 | `sync.forbidden` |
/// | unknown, forgotten, another partition's, not a content address | 404 | `sync.not_found` |
/// | stored, expired | 404 | `sync.segment_expired` |
/// | storage busy or unreachable | 503 | the storage's code |
/// | `If-None-Match` names it | 304 | — |
/// | otherwise | 200 | — |
pub(crate) fn serve(
    engine: &Engine,
    store: &dyn SegmentStore,
    ctx: &RequestContext,
    request: &DownloadRequest<'_>,
    now_ms: i64,
) -> Result<Download, WireFailure> {
    let requested = parse_scopes(request.scopes)?;
    // A download carries no client id; the resolver is asked for none.
    let effective = match engine.read_scopes(ctx, "", &requested) {
        Ok(Some(effective)) => effective,
        Ok(None) => return Err(forbidden("scopes")),
        Err(EngineError::Request(_)) => return Err(forbidden("resolver")),
        Err(error) => return Err(round_failure(&error)),
    };
    let digest = sync_ssp2::digest::scope_digest(&scope_map(&effective));
    let fetched = store
        .get_segment(&ctx.partition, request.segment_id, &digest, now_ms)
        .map_err(|e| {
            round_failure(&EngineError::Internal {
                source: Box::new(e),
            })
        })?;
    match fetched {
        SegmentFetch::Found(segment) => {
            let etag = format!("\"{}\"", segment.meta.segment_id);
            if request
                .if_none_match
                .is_some_and(|header| matches_etag(header, &etag))
            {
                return Ok(Download::NotModified { etag });
            }
            Ok(Download::Segment {
                bytes: segment.bytes,
                etag,
            })
        }
        SegmentFetch::Expired => Err(failure(
            "sync.segment_expired",
            "segment expired",
            "expired",
        )),
        SegmentFetch::ScopeMismatch => Err(forbidden("scope_digest")),
        SegmentFetch::NotFound => Err(failure(
            "sync.not_found",
            "segment not found",
            "unknown_segment",
        )),
    }
}
