//! `GET /segments/{id}`.

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::{header, HeaderValue, StatusCode};
use sync_wire::{Download, DownloadRequest, WireFailure, SEGMENT_CONTENT_TYPE};

use crate::responses::failure;
use crate::state::SyncState;

/// The header carrying the requested scopes of the owning subscription.
const SCOPES_HEADER: &str = "x-syncular-scopes";

fn header_text(parts: &http::request::Parts, name: impl header::AsHeaderName) -> Option<String> {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn with_segment_headers(mut response: Response, etag: &str) -> Response {
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=0"),
    );
    headers.insert(
        header::VARY,
        HeaderValue::from_static("Authorization, X-Syncular-Scopes, Accept-Encoding"),
    );
    response
}

pub(crate) async fn get_segment(
    State(state): State<SyncState>,
    Path(segment_id): Path<String>,
    request: Request,
) -> Response {
    let (parts, _) = request.into_parts();
    let ctx = match state.auth.authenticate(&parts) {
        Ok(ctx) => ctx,
        Err(refusal) => return failure(&refusal),
    };
    let scopes = header_text(&parts, SCOPES_HEADER);
    let if_none_match = header_text(&parts, header::IF_NONE_MATCH);
    let Ok(permit) = state.slots.clone().acquire_owned().await else {
        return failure(&WireFailure::from_wire_error(&sync_engine::WireError::new(
            "sync.storage.busy",
            "server busy",
        )));
    };
    let service = state.service.clone();
    let span = tracing::Span::current();
    let answer = tokio::task::spawn_blocking(move || {
        let _slot = permit;
        let _entered = span.enter();
        service.download(
            &ctx,
            &DownloadRequest {
                segment_id: &segment_id,
                scopes: scopes.as_deref(),
                if_none_match: if_none_match.as_deref(),
            },
        )
    })
    .await;
    match answer {
        Ok(Ok(Download::Segment { bytes, etag })) => {
            let mut response = Response::new(Body::from(bytes));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(SEGMENT_CONTENT_TYPE),
            );
            with_segment_headers(response, &etag)
        }
        Ok(Ok(Download::NotModified { etag })) => {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            with_segment_headers(response, &etag)
        }
        Ok(Err(refusal)) => failure(&refusal),
        Err(_) => failure(&WireFailure::from_wire_error(&sync_engine::WireError::new(
            "sync.internal",
            "internal server error",
        ))),
    }
}
