//! Rendering results and errors: text for people, one JSON document for
//! tools.
//!
//! With `--json`, stdout holds exactly one JSON document (the result, or
//! `{"error": {"code", "message", "details"}}`) and nothing else; logs and
//! progress bars go to stderr. Without it, results go to stdout as text and
//! errors to stderr as `error: <code>: <message>` followed by one indented
//! `key: value` line per detail. Values from data are shown through
//! `escape` (`field` in text, `json_text` for every JSON document).

use std::io::{IsTerminal, Write};

use serde_json::{json, Value};
use tracing_subscriber::EnvFilter;

use crate::error::CliError;
use crate::escape::{field, json_text, safe};
use crate::secrets;

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain text for people.
    Text,
    /// One JSON document on stdout.
    Json,
}

/// What a successful command produced: its JSON document and its text form.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The JSON document (`--json`).
    pub json: Value,
    /// The text for people.
    pub text: String,
}

impl Report {
    /// A report from both renderings.
    pub fn new(json: Value, text: impl Into<String>) -> Self {
        Self {
            json,
            text: text.into(),
        }
    }
}

/// Prints a successful result on stdout.
pub fn print_report(report: &Report, format: Format) {
    let mut out = std::io::stdout().lock();
    // A closed stdout (e.g. `| head`) is not an error worth reporting.
    let _ = match format {
        Format::Json => writeln!(out, "{}", pretty(&report.json)),
        Format::Text => write_text(&mut out, &report.text),
    };
}

/// Writes text for people: every line through [`safe`] (the backstop
/// behind the escaping of each value where the text is built), ending in
/// a newline.
pub fn write_text(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    // Values are escaped where the text is built (`safe`); this pass is the
    // backstop: no control character but the line breaks reaches a terminal.
    let text: String = text.split('\n').map(safe).collect::<Vec<_>>().join("\n");
    if text.ends_with('\n') {
        out.write_all(text.as_bytes())
    } else {
        writeln!(out, "{text}")
    }
}

/// The JSON form of an error (passwords masked).
pub fn error_json(error: &CliError) -> Value {
    let details: serde_json::Map<String, Value> = error
        .details()
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(secrets::mask(v))))
        .collect();
    json!({
        "error": {
            "code": error.code(),
            "message": secrets::mask(error.message()),
            "details": details,
        }
    })
}

/// The text form of an error (first line `error: <code>: <message>`), every
/// detail value a [`field`] and passwords masked.
pub fn error_text(error: &CliError) -> String {
    let mut text = format!(
        "error: {}: {}\n",
        safe(error.code()),
        safe(&secrets::mask(error.message()))
    );
    for (key, value) in error.details() {
        text.push_str(&format!(
            "  {}: {}\n",
            safe(key),
            field(&secrets::mask(value))
        ));
    }
    text
}

/// Logs the driver error chain at info level (`-v`), passwords masked.
pub fn log_chain(error: &CliError) {
    for (depth, line) in error.chain().iter().enumerate() {
        tracing::info!(depth, error = %safe(&secrets::mask(line)), "error chain");
    }
}

/// Prints an error: JSON on stdout with `--json`, text on stderr otherwise.
pub fn print_error(error: &CliError, format: Format) {
    let _ = match format {
        Format::Json => writeln!(std::io::stdout().lock(), "{}", pretty(&error_json(error))),
        Format::Text => std::io::stderr()
            .lock()
            .write_all(error_text(error).as_bytes()),
    };
}

fn pretty(value: &Value) -> String {
    json_text(value, true)
}

/// Logs go to stderr: `SYNCSTORE_LOG` (an `EnvFilter`) wins, else warnings,
/// `-v` info, `-vv` debug.
pub fn init_logs(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter =
        EnvFilter::try_from_env("SYNCSTORE_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CliCode;

    #[test]
    fn errors_render_with_code_message_and_details() {
        let error = CliError::new(CliCode::UnknownPartition).detail("partition", "p9");
        assert_eq!(
            error_json(&error),
            json!({"error": {
                "code": "sync.cli.unknown_partition",
                "message": CliCode::UnknownPartition.message(),
                "details": {"partition": "p9"},
            }})
        );
        let text = error_text(&error);
        assert!(text.starts_with("error: sync.cli.unknown_partition: "));
        assert!(text.contains("\n  partition: p9\n"));
    }

    /// A driver message may quote the connection string: every rendering
    /// of an error masks passwords in its message and in each detail.
    #[test]
    fn errors_mask_passwords_in_every_detail() {
        let error = CliError::new(CliCode::Unreachable)
            .detail("reason", "refused: postgres://app:hunter2@db:5432/x")
            .detail("dsn", "host=db password=hunter2 user=app");
        let json = error_json(&error);
        assert_eq!(
            json["error"]["details"],
            json!({
                "reason": "refused: postgres://app:***@db:5432/x",
                "dsn": "host=db password=*** user=app",
            })
        );
        let text = error_text(&error);
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("postgres://app:***@db:5432/x"), "{text}");
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(safe("plain"), "plain");
        assert_eq!(safe("a\u{1b}[31mred"), "a\\u{1b}[31mred");
        assert_eq!(safe("x\nerror: fake"), "x\\nerror: fake");
        assert_eq!(safe("cr\rback"), "cr\\rback");
        let error = CliError::new(CliCode::UnknownPartition).detail("partition", "p\nerror: x");
        let text = error_text(&error);
        assert_eq!(
            text.lines().filter(|l| l.starts_with("error: ")).count(),
            1,
            "{text}"
        );
        let mut out = Vec::new();
        write_text(&mut out, "line \u{1b}]0;title\u{7}\nnext\r\n").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "line \\u{1b}]0;title\\u{7}\nnext\\r\n"
        );
    }

    #[test]
    fn error_output_masks_passwords() {
        let error = CliError::new(CliCode::Unreachable).detail(
            "reason",
            "cannot reach postgres://u:hunter2@h/db?password=hunter3",
        );
        let json = error_json(&error).to_string();
        let text = error_text(&error);
        for shown in [json, text] {
            assert!(
                !shown.contains("hunter2") && !shown.contains("hunter3"),
                "{shown}"
            );
        }
    }
}
