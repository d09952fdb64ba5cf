//! The todos story on Postgres. The server is `SYNCSTORE_PG_URL`
//! (default `postgres://postgres@127.0.0.1:5432/test`); the example creates
//! its own schema there and drops it at the end.
//!
//! `SYNCSTORE_PG_URL=postgres://… cargo run -p sync-engine --example todos_postgres`

#[path = "shared/story.rs"]
mod story;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use sync_postgres::{PostgresConfig, PostgresStorage};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("SYNCSTORE_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let name = format!("todos_example_{:x}_{}", nanos, std::process::id());
    let mut admin = postgres::Client::connect(&url, postgres::NoTls)?;
    admin.batch_execute(&format!("CREATE SCHEMA \"{name}\""))?;
    println!("Postgres schema {name}");
    let outcome = (|| {
        let schema = story::schema()?;
        let config = PostgresConfig {
            schema: Some(name.clone()),
            ..PostgresConfig::default()
        };
        let storage = Arc::new(PostgresStorage::connect(&url, config)?);
        story::run(storage, schema)
    })();
    admin.batch_execute(&format!("DROP SCHEMA \"{name}\" CASCADE"))?;
    outcome
}
