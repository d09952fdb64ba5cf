//! The todos story on SQLite, with no setup: a database file in a
//! temporary directory.
//!
//! `cargo run -p sync-engine --example todos_sqlite`

#[path = "shared/story.rs"]
mod story;

use std::sync::Arc;

use sync_sqlite::{SqliteConfig, SqliteStorage};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let schema = story::schema()?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("todos.db");
    println!("SQLite database {}", path.display());
    let storage = Arc::new(SqliteStorage::open(&path, SqliteConfig::default())?);
    story::run(storage, schema)
}
