//! `cargo xtask bench-serve`: W12's server in a process of its own, so the
//! peak resident memory it reports (`VmHWM`) belongs to the server alone.
//!
//! It serves the bench database through `sync-http` as `syncstore serve`
//! does (segments kept by the storage, TCP_NODELAY), prints
//! `listening on http://ADDR`, serves until its standard input closes, then
//! prints one JSON line `{"peak_kb", "start_kb"}`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use sync_http::{HttpConfig, SyncState};
use sync_sqlite::Synchronous;
use sync_wire::{StorageSegmentStore, WireConfig, WireService};

use super::child::peak_rss_kb;
use super::db::{Db, Location};
use super::engine;
use super::w11_http_push::authenticate;

/// Options of the hidden `bench-serve` subcommand.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// SQLite database file.
    #[arg(long)]
    sqlite: Option<PathBuf>,
    /// PostgreSQL server.
    #[arg(long)]
    pg_url: Option<String>,
    /// Postgres schema of the database.
    #[arg(long)]
    schema: Option<String>,
}

/// Serves until standard input closes.
pub fn run(args: &ServeArgs) -> Result<()> {
    let location = match (&args.sqlite, &args.pg_url, &args.schema) {
        (Some(path), _, _) => Location::Sqlite(path.clone()),
        (None, Some(url), Some(schema)) => Location::Postgres {
            url: url.clone(),
            schema: schema.clone(),
        },
        _ => bail!("bench-serve needs --sqlite PATH or --pg-url URL --schema NAME"),
    };
    let start_kb = peak_rss_kb()?;
    let db = Db::at(location, Synchronous::default());
    let storage = db.storage(false)?;
    let wire = WireConfig {
        segment_store: StorageSegmentStore::of(storage.clone())
            .map(|s| Arc::new(s) as Arc<dyn sync_core::segments::SegmentStore>),
        ..WireConfig::default()
    };
    let service = Arc::new(WireService::new(Arc::new(engine::engine(storage)?), wire));
    let state = SyncState::new(service, Arc::new(authenticate), HttpConfig::default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // The storage is dropped outside the runtime (a Postgres client owns a
    // runtime of its own, which cannot be dropped from inside another): the
    // router gets a clone, this function keeps the last handle.
    let router = sync_http::router(state.clone());
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on http://{}", listener.local_addr()?)?;
        stdout.flush()?;
        drop(stdout);
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
            let _ = stop.send(());
        });
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
            .context("serving")
    });
    drop(runtime);
    drop(state);
    served?;
    println!(
        "{}",
        serde_json::json!({"peak_kb": peak_rss_kb()?, "start_kb": start_kb})
    );
    Ok(())
}
