//! The todos story on MariaDB. The server is `SYNCSTORE_MARIADB_URL`
//! (default `mysql://root@127.0.0.1:3306/test`, whose database is only
//! where the example logs in); the example creates its own database there
//! and drops it at the end.
//!
//! `SYNCSTORE_MARIADB_URL=mysql://… cargo run -p sync-engine --example todos_mariadb`

#[path = "shared/story.rs"]
mod story;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use sync_mariadb::databases::{create_database, drop_database};
use sync_mariadb::{MariadbConfig, MariadbStorage, MariadbUrl};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("SYNCSTORE_MARIADB_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned());
    let server = MariadbUrl::parse(&url)?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let name = format!("todos_example_{:x}_{}", nanos, std::process::id());
    let database = create_database(&server, &name)?;
    println!("MariaDB database {name}");
    let outcome = (|| {
        let schema = story::schema()?;
        let storage = Arc::new(MariadbStorage::connect_to(
            database,
            MariadbConfig::default(),
        )?);
        story::run(storage, schema)
    })();
    drop_database(&server, &name)?;
    outcome
}
