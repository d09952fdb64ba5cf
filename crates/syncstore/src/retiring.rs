//! Tables a bump retires, with the rows each holds, and the refusal of
//! retiring rows the operator did not name with `--retire`.
//!
//! `schema-and-migrations.md` §12 lets a bump retire (drop) every table
//! that is in the stored layouts and not in the schema file. A table left
//! out by mistake (a rename typo) would go with its rows and the bump would
//! exit 0, so `migrate` retires a table that holds rows only when the
//! operator names it.

use std::fmt::Write as _;

use serde_json::{json, Value};
use sync_schema::MigrationPlan;

use crate::error::{CliCode, CliError, CliResult};
use crate::escape::field;
use crate::url::Database;

/// One table the bump retires and the rows it holds now (`None`: the
/// dialect cannot count them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retiring {
    /// Table name (from the stored layouts).
    pub table: String,
    /// Rows in the table now, all partitions.
    pub rows: Option<u64>,
}

impl Retiring {
    /// `{"table": …, "rows": …}` (`rows` null when not countable).
    pub fn to_json(&self) -> Value {
        json!({"table": self.table, "rows": self.rows})
    }

    /// `-- retire "t": N rows dropped with it` for the plan text.
    pub fn write_text(&self, text: &mut String) {
        let rows = self
            .rows
            .map_or_else(|| "an unknown number of".to_owned(), |n| n.to_string());
        let _ = writeln!(
            text,
            "-- retired table {}: {rows} rows dropped with it",
            field(&self.table)
        );
    }

    fn holds_rows(&self) -> bool {
        self.rows != Some(0)
    }
}

/// Counts the rows of every table `plan` retires.
pub fn count(db: &Database, plan: &MigrationPlan) -> CliResult<Vec<Retiring>> {
    plan.retired
        .iter()
        .map(|retired| {
            Ok(Retiring {
                table: retired.table.clone(),
                rows: db.count_table_rows(&retired.table)?,
            })
        })
        .collect()
}

/// Every retiring table that holds rows (or cannot be counted) is named in
/// `allowed` (`--retire`), else `sync.cli.retire_refused` naming each such
/// table with its rows (`details.tables`: `table:rows`, comma-separated,
/// `unknown` when not countable). Names in `allowed` that the bump does not
/// retire are ignored: a re-run after the bump, or the loser of two
/// concurrent bumps, retires nothing.
pub fn check(retiring: &[Retiring], allowed: &[String]) -> CliResult<()> {
    let refused: Vec<String> = retiring
        .iter()
        .filter(|r| r.holds_rows() && !allowed.contains(&r.table))
        .map(|r| {
            let rows = r
                .rows
                .map_or_else(|| "unknown".to_owned(), |n| n.to_string());
            format!("{}:{rows}", r.table)
        })
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    Err(CliError::new(CliCode::RetireRefused)
        .detail("tables", refused.join(","))
        .detail(
            "hint",
            "check the schema file (a renamed table starts empty), or pass --retire TABLE for each",
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str, rows: Option<u64>) -> Retiring {
        Retiring {
            table: name.to_owned(),
            rows,
        }
    }

    #[test]
    fn only_named_tables_with_rows_may_go() {
        let retiring = [
            table("empty", Some(0)),
            table("full", Some(20_000)),
            table("uncounted", None),
        ];
        let error = check(&retiring, &[]).unwrap_err();
        assert_eq!(error.code(), "sync.cli.retire_refused");
        assert_eq!(
            error.details().get("tables").map(String::as_str),
            Some("full:20000,uncounted:unknown")
        );
        let error = check(&retiring, &["full".to_owned()]).unwrap_err();
        assert_eq!(
            error.details().get("tables").map(String::as_str),
            Some("uncounted:unknown")
        );
        let all = ["full".to_owned(), "uncounted".to_owned(), "gone".to_owned()];
        assert!(check(&retiring, &all).is_ok());
        assert!(check(&[table("empty", Some(0))], &[]).is_ok());
    }
}
