//! The router.

use axum::routing::{get, post};
use axum::Router;
use tower_http::compression::CompressionLayer;
use tower_http::decompression::RequestDecompressionLayer;
use tower_http::trace::TraceLayer;

use crate::state::SyncState;

/// The SSP2 routes, `POST /sync` and `GET /segments/{id}`, over `state`.
///
/// Nest it where the clients' base URL points (`Router::new().nest("/api",
/// sync_http::router(state))` serves `/api/sync`), behind the application's
/// own layers. The router decodes gzip request bodies, compresses
/// responses by `Accept-Encoding` (gzip) and opens one tracing span per
/// request.
pub fn router(state: SyncState) -> Router {
    Router::new()
        .route("/sync", post(crate::sync_route::post_sync))
        .route("/segments/{id}", get(crate::download::get_segment))
        .route("/realtime", get(crate::realtime::get_realtime))
        .layer(RequestDecompressionLayer::new().gzip(true))
        .layer(CompressionLayer::new().gzip(true))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
