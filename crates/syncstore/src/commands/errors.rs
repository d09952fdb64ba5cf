//! `errors [--markdown]`: every error code this command line can print —
//! its own `sync.cli.*` codes and every code of the storage layer — with
//! whether a retry may help and its fixed message. `--markdown` prints the
//! table `docs/operations.md` embeds (a test keeps the two equal).

use serde_json::{json, Value};
use sync_core::ErrorCode;

use crate::cli::ErrorsArgs;
use crate::error::{CliCode, CliResult};
use crate::output::Report;

/// One row of the table.
struct Row {
    code: &'static str,
    retryable: bool,
    message: &'static str,
}

fn rows() -> Vec<Row> {
    let cli = CliCode::ALL.iter().map(|code| Row {
        code: code.as_str(),
        retryable: false,
        message: code.message(),
    });
    let library = ErrorCode::ALL.iter().map(|code| Row {
        code: code.as_str(),
        retryable: code.retryable(),
        message: code.default_message(),
    });
    let mut rows: Vec<Row> = cli.chain(library).collect();
    rows.sort_by_key(|row| row.code);
    rows
}

/// The Markdown table of every code, ordered by code.
pub fn markdown() -> String {
    let mut text = "| code | retryable | message |\n|---|---|---|\n".to_owned();
    for row in rows() {
        text.push_str(&format!(
            "| `{}` | {} | {} |\n",
            row.code,
            if row.retryable { "yes" } else { "no" },
            row.message.replace('|', "\\|")
        ));
    }
    text
}

/// Runs `errors`.
pub fn run(args: &ErrorsArgs) -> CliResult<Report> {
    let listed: Vec<Value> = rows()
        .iter()
        .map(|row| json!({"code": row.code, "retryable": row.retryable, "message": row.message}))
        .collect();
    let text = if args.markdown {
        markdown()
    } else {
        rows()
            .iter()
            .map(|row| format!("{}  {}\n", row.code, row.message))
            .collect()
    };
    Ok(Report::new(json!({"errors": listed}), text))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- error-table:begin (generated: syncstore errors --markdown) -->\n";
    const END: &str = "<!-- error-table:end -->";

    #[test]
    fn the_operations_doc_embeds_the_generated_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/operations.md");
        let doc = std::fs::read_to_string(path).expect("docs/operations.md is readable");
        let start = doc.find(BEGIN).expect("the begin marker") + BEGIN.len();
        let end = doc[start..].find(END).expect("the end marker") + start;
        assert_eq!(
            &doc[start..end],
            markdown(),
            "docs/operations.md is stale: paste `syncstore errors --markdown` between the markers"
        );
    }

    #[test]
    fn every_code_is_listed_once() {
        let table = markdown();
        for code in ErrorCode::ALL {
            let cell = format!("| `{}` |", code.as_str());
            assert_eq!(table.matches(&cell).count(), 1, "{cell}");
        }
        assert!(table.contains("| `sync.codec.decode_failed` |"));
        assert!(table.contains("| `sync.cli.declaration_missing` |"));
    }
}
