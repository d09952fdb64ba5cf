//! `POST /sync`.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use sync_wire::{RoundError, WireFailure, SYNC_CONTENT_TYPE};
use tokio::sync::mpsc;

use crate::body::{ChannelWriter, Piece, ResponseStream};
use crate::responses::failure;
use crate::state::SyncState;

/// Whether the `Content-Type` names the SSP2 media type (parameters and
/// letter case aside).
fn is_sync_content_type(value: &str) -> bool {
    value
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case(SYNC_CONTENT_TYPE))
}

async fn read_body(body: Body, limit: usize) -> Result<Bytes, WireFailure> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
            Err(WireFailure::body_too_large(limit))
        }
        Err(_) => Err(WireFailure::unreadable_body("body")),
    }
}

/// Slots are closed only if the semaphore is closed, which never happens;
/// answered as unavailable all the same.
fn no_slot() -> WireFailure {
    let error = sync_engine::WireError::new("sync.storage.busy", "server busy");
    WireFailure::from_wire_error(&error)
}

pub(crate) async fn post_sync(State(state): State<SyncState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !is_sync_content_type(content_type) {
        return failure(&WireFailure::unsupported_media_type(content_type));
    }
    let ctx = match state.auth.authenticate(&parts) {
        Ok(ctx) => ctx,
        Err(refusal) => return failure(&refusal),
    };
    let bytes = match read_body(body, state.config.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(refusal) => return failure(&refusal),
    };
    let Ok(permit) = state.slots.clone().acquire_owned().await else {
        return failure(&no_slot());
    };
    let (tx, mut rx) = mpsc::channel(state.config.channel_chunks.max(1));
    let mut writer = ChannelWriter::new(
        tx,
        state.config.chunk_bytes,
        state.config.send_timeout,
        tokio::runtime::Handle::current(),
    );
    let service = state.service.clone();
    let realtime = state.realtime.clone();
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _slot = permit;
        let _entered = span.enter();
        tracing::debug!(partition = %ctx.partition, actor = %ctx.actor_id, bytes = bytes.len(), "sync round");
        match service.sync(&ctx, &bytes, &mut writer) {
            Ok(outcome) => {
                if let Err(error) = writer.end() {
                    tracing::warn!(%error, "response end not delivered");
                }
                let through = outcome.applied.iter().map(|c| c.commit_seq).max();
                if let (Some(hub), Some(through)) = (realtime, through) {
                    if let Err(refusal) = hub.notify(&ctx.partition, through) {
                        tracing::warn!(code = refusal.code(), "realtime fanout failed");
                    }
                }
            }
            Err(RoundError::Refused(refusal)) => {
                tracing::debug!(
                    code = refusal.code(),
                    status = refusal.status,
                    "round refused"
                );
                writer.refuse(refusal);
            }
            Err(RoundError::Aborted { reason }) => {
                tracing::warn!(%reason, "response aborted");
                writer.abort();
            }
        }
    });
    let body = match rx.recv().await {
        // A response that fits one chunk (most rounds) goes out whole, with
        // its length: one write, no chunked framing to wait for.
        Some(Piece::Last(whole)) => Body::from(whole),
        Some(Piece::Data(first)) => match rx.recv().await {
            Some(Piece::End) => Body::from(first),
            // Two chunks in all: still one body with its length.
            Some(Piece::Last(second)) => {
                let mut whole = Vec::with_capacity(first.len() + second.len());
                whole.extend_from_slice(&first);
                whole.extend_from_slice(&second);
                Body::from(whole)
            }
            Some(Piece::Data(second)) => {
                Body::new(ResponseStream::new(vec![first, second], rx, false))
            }
            Some(Piece::Failure(_) | Piece::Abort) | None => {
                Body::new(ResponseStream::new(vec![first], rx, true))
            }
        },
        Some(Piece::Failure(refusal)) => return failure(&refusal),
        Some(Piece::Abort | Piece::End) | None => {
            let mut response = failure(&sync_wire::WireFailure::from_wire_error(
                &sync_engine::WireError::new("sync.internal", "internal server error"),
            ));
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            return response;
        }
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(SYNC_CONTENT_TYPE),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
