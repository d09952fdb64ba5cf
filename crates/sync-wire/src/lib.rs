//! `sync-wire`: the SSP2 wire in front of the sync engine.
//!
//! This crate connects the binary codec (`sync-ssp2`) to one sync round of
//! the engine (`sync-engine`): request bytes become a
//! [`sync_engine::SyncRequest`], the round's response items become SSP2
//! frames written one by one into any [`std::io::Write`] (so a transport
//! streams them), bootstrap pages become SSG2 rows segments sent inline or
//! by reference, and a referenced segment is downloaded through
//! [`WireService::download`], which re-authorizes every time. Every failure
//! a transport must answer before a response starts is a [`WireFailure`]:
//! an HTTP status and the JSON body of SSP2 §10.1.
//!
//! It is not a transport: it knows no HTTP crate, no socket and no async
//! runtime (`sync-http` is the HTTP adapter over it). It is synchronous and
//! holds no dialect code.
//!
//! ```
//! use std::sync::Arc;
//! use sync_core::{EnsureOptions, ServerStorage};
//! use sync_engine::{Engine, EngineConfig, RequestContext, ResolveError, ScopeMap};
//! use sync_sqlite::{SqliteConfig, SqliteStorage};
//! use sync_wire::{WireConfig, WireService};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let schema = Arc::new(sync_schema::compile(&sync_schema::parse_schema_json(
//!     r#"{"version": 1, "tables": [{"name": "todos", "primaryKey": "id",
//!         "columns": [{"name": "id", "type": "string"}, {"name": "list_id", "type": "string"}],
//!         "scopes": ["list:{list_id}"]}]}"#,
//! )?)?);
//! let dir = tempfile::tempdir()?;
//! let storage = Arc::new(SqliteStorage::open(dir.path().join("app.db"), SqliteConfig::default())?);
//! storage.ensure_schema(&schema, &EnsureOptions::default())?;
//! let resolver = |_: &str, _: &str, _: &str| -> Result<ScopeMap, ResolveError> {
//!     Ok(ScopeMap::from([("list_id".to_owned(), vec!["l1".to_owned()])]))
//! };
//! let engine = Arc::new(Engine::new(storage, schema, EngineConfig::new(Arc::new(resolver)))?);
//! let service = WireService::new(engine, WireConfig::default());
//!
//! let request = sync_ssp2::encode_request(&sync_ssp2::Request::pull_only(
//!     sync_ssp2::WireVersion::V2,
//!     sync_ssp2::ReqHeader { client_id: "phone-1".into(), schema_version: 1, log_epoch: None },
//!     sync_ssp2::PullHeader::default(),
//!     Vec::new(),
//! ))?;
//! let mut body = Vec::new();
//! service.sync(&RequestContext::new("acme", "alice"), &request, &mut body)?;
//! let response = sync_ssp2::decode_response(&body)?;
//! assert!(response.header().is_some());
//! # Ok(())
//! # }
//! ```
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations)]
#![forbid(unsafe_code)]

mod config;
mod download;
mod failure;
mod frames;
pub mod realtime;
mod request;
mod round_error;
mod segments;
mod service;
mod sink;
mod storage_store;

pub use config::{WireConfig, DEFAULT_INLINE_LIMIT};
pub use download::{Download, DownloadRequest, SEGMENT_CONTENT_TYPE};
pub use failure::{WireFailure, SYNC_CONTENT_TYPE};
pub use request::{decode_sync_request, SERVED_WIRE_VERSIONS};
pub use round_error::round_failure;
pub use service::{RoundError, WireService};
pub use sink::FrameSink;
pub use storage_store::StorageSegmentStore;
