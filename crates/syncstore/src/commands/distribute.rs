//! `distribute [--shard-count N]`: distributes a freshly bootstrapped
//! Postgres schema by partition on a Citus coordinator
//! (`docs/scale-out.md`): every storage and application table
//! hash-distributed by its partition column, colocated, and
//! `sync_schema_meta` a reference table. Idempotent; refuses (code
//! `sync.storage.not_distributable`) on SQLite, without the `citus`
//! extension, on a schema sharded by schema, and when a table to
//! distribute holds rows.

use serde_json::json;
use sync_postgres::DistributeOptions;

use crate::cli::DistributeArgs;
use crate::error::CliResult;
use crate::escape::field;
use crate::output::Report;
use crate::url::Database;

/// Runs `distribute`.
pub fn run(db: &Database, args: &DistributeArgs) -> CliResult<Report> {
    let options = DistributeOptions {
        shard_count: args.shard_count,
    };
    let report = db.distribute(&options)?;
    tracing::info!(
        distributed = report.distributed.len(),
        reference = report.reference.len(),
        "distributed"
    );
    let mut text = String::new();
    if report.already_distributed {
        text.push_str("already distributed by partition; nothing to do\n");
    }
    for (table, column) in &report.distributed {
        text.push_str(&format!(
            "distributed {} by {}\n",
            field(table),
            field(column)
        ));
    }
    for table in &report.reference {
        text.push_str(&format!("reference table {}\n", field(table)));
    }
    for table in &report.left_local {
        text.push_str(&format!(
            "left local {} (not a storage or application table)\n",
            field(table)
        ));
    }
    let json = json!({
        "already_distributed": report.already_distributed,
        "distributed": report.distributed.iter()
            .map(|(table, column)| json!({"table": table, "column": column}))
            .collect::<Vec<_>>(),
        "reference": report.reference,
        "left_local": report.left_local,
        "shard_count": args.shard_count,
    });
    Ok(Report::new(json, text))
}
