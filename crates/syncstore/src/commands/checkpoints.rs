//! `checkpoints [--partition P]`: the checkpoint rows, each as in `status`
//! plus its partition: `{"checkpoints": [{"partition", "name",
//! "schema_version", "state", "watermark", "owner_epoch", "observed_rows"}]}`,
//! ordered by partition, then name.

use serde_json::{json, Value};

use crate::cli::PartitionFilter;
use crate::error::CliResult;
use crate::escape::field;
use crate::output::Report;
use crate::stored::{
    checkpoint_json, checkpoint_text, listed_partitions, require_known_partition, stored_version,
};
use crate::url::Database;

/// Runs `checkpoints`.
pub fn run(db: &Database, args: &PartitionFilter) -> CliResult<Report> {
    let storage = db.storage();
    let partitions = match &args.partition {
        Some(partition) => {
            require_known_partition(storage, partition)?;
            vec![partition.clone()]
        }
        None => {
            let marker = storage.read_schema_marker()?;
            listed_partitions(storage, stored_version(marker.as_ref()))?
        }
    };
    let mut rows = Vec::new();
    let mut text = String::new();
    for partition in &partitions {
        for checkpoint in storage.read_checkpoints(partition)? {
            let mut row = json!({"partition": partition});
            if let (Value::Object(row), Value::Object(fields)) =
                (&mut row, checkpoint_json(&checkpoint))
            {
                row.extend(fields);
            }
            text.push_str(&format!(
                "{}: {}\n",
                field(partition),
                checkpoint_text(&checkpoint)
            ));
            rows.push(row);
        }
    }
    if rows.is_empty() {
        text.push_str("no checkpoints\n");
    }
    Ok(Report::new(json!({"checkpoints": rows}), text))
}
