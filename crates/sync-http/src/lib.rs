//! `sync-http`: the HTTP adapter of the sync protocol, on axum.
//!
//! [`router`] gives an [`axum::Router`] with the two SSP2 routes of this
//! server, relative to wherever an application nests it:
//!
//! - `POST /sync`: one sync round. The body must be
//!   `application/vnd.syncular.sync.v2` (else 415 with the §10.1 JSON
//!   body), may be gzip-compressed (`Content-Encoding: gzip`) and is
//!   limited in size ([`HttpConfig::max_body_bytes`], 413 beyond). The
//!   response streams frame by frame and is gzip-compressed when the
//!   client's `Accept-Encoding` allows it.
//! - `GET /segments/{id}`: a bootstrap segment download, re-authorized on
//!   every request from the `X-Syncular-Scopes` header.
//!
//! Who is calling is the application's [`Authenticator`]: request parts →
//! partition and actor, or 401 `sync.auth_required`. Rounds run on tokio's
//! blocking pool, at most [`HttpConfig::max_concurrent_rounds`] at once
//! (set it to the storage pool's connection count); the response flows to
//! the client through a bounded channel, and a client that stops reading
//! for [`HttpConfig::send_timeout`] (or goes away) fails the round's sink,
//! which stops the engine and frees its connection.
//!
//! This is the only async crate of the workspace: the codec (`sync-ssp2`),
//! the wire layer (`sync-wire`) and the engine stay synchronous.
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]
#![forbid(unsafe_code)]

mod auth;
mod body;
mod config;
mod download;
mod realtime;
mod responses;
mod routes;
mod state;
mod sync_route;

pub use auth::Authenticator;
pub use config::{HttpConfig, DEFAULT_MAX_BODY_BYTES, DEFAULT_SEND_TIMEOUT};
pub use routes::router;
pub use state::SyncState;
