//! JSON error responses (SSP2 §1.1, §10.1).

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use sync_wire::WireFailure;

/// `failure` as an `application/json` response with its status.
pub(crate) fn failure(failure: &WireFailure) -> Response {
    let status = StatusCode::from_u16(failure.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, failure.body_text()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
