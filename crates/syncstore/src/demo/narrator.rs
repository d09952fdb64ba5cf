//! Tells the story: numbered steps, plain sentences, and checks that either
//! hold (`✓ …`) or stop the demo with `sync.cli.demo_failed`.
//!
//! In text mode everything is printed on stdout as it happens; with `--json`
//! nothing is printed and the steps are collected for the summary document.

use std::fmt::Debug;
use std::io::Write;

use serde_json::{json, Map, Value};

use crate::error::{CliCode, CliError, CliResult};
use crate::output::Format;

/// One finished step, for the JSON summary.
#[derive(Debug, Clone)]
struct Step {
    number: usize,
    title: String,
    checks: Vec<String>,
    facts: Map<String, Value>,
}

/// The demo's voice and its record of what happened.
#[derive(Debug)]
pub struct Narrator {
    format: Format,
    steps: Vec<Step>,
}

impl Narrator {
    /// A narrator printing (text) or collecting (JSON).
    pub fn new(format: Format) -> Self {
        Self {
            format,
            steps: Vec::new(),
        }
    }

    fn print(&self, text: &str) {
        if self.format == Format::Text {
            let mut out = std::io::stdout().lock();
            let _ = if text.is_empty() {
                writeln!(out)
            } else {
                crate::output::write_text(&mut out, text)
            };
            let _ = out.flush();
        }
    }

    /// A line before the first step.
    pub fn intro(&self, text: &str) {
        self.print(text);
    }

    /// Starts the next numbered step.
    pub fn step(&mut self, title: &str) {
        let number = self.steps.len() + 1;
        self.print(&format!("\n{number}. {title}"));
        self.steps.push(Step {
            number,
            title: title.to_owned(),
            checks: Vec::new(),
            facts: Map::new(),
        });
    }

    /// Explains what is happening in the current step.
    pub fn say(&self, text: &str) {
        self.print(&wrap(text, "   "));
    }

    /// Records a number or value of the current step (JSON summary).
    pub fn fact(&mut self, key: &str, value: impl Into<Value>) {
        if let Some(step) = self.steps.last_mut() {
            step.facts.insert(key.to_owned(), value.into());
        }
    }

    /// A claim that must hold.
    pub fn check(&mut self, holds: bool, claim: &str) -> CliResult<()> {
        self.verdict(holds, claim, None)
    }

    /// A claim that `actual == expected`.
    pub fn check_eq<T: PartialEq + Debug>(
        &mut self,
        actual: T,
        expected: T,
        claim: &str,
    ) -> CliResult<()> {
        let observed = format!("expected {expected:?}, observed {actual:?}");
        self.verdict(actual == expected, claim, Some(observed))
    }

    fn verdict(&mut self, holds: bool, claim: &str, observed: Option<String>) -> CliResult<()> {
        if holds {
            self.print(&format!("   ✓ {claim}"));
            if let Some(step) = self.steps.last_mut() {
                step.checks.push(claim.to_owned());
            }
            return Ok(());
        }
        self.print(&format!("   ✗ {claim}"));
        let mut error = self.failure().detail("claim", claim);
        if let Some(observed) = observed {
            error = error.detail("observed", observed);
        }
        Err(error)
    }

    /// `sync.cli.demo_failed` naming the current step.
    pub fn failure(&self) -> CliError {
        let mut error = CliError::new(CliCode::DemoFailed);
        if let Some(step) = self.steps.last() {
            error = error
                .detail("step", step.number)
                .detail("title", &step.title);
        }
        error
    }

    /// Turns an unexpected error of the current step into `demo_failed`
    /// (keeping the cause's code and details); `demo_failed` passes through.
    pub fn unexpected(&self, error: CliError) -> CliError {
        if error.code() == CliCode::DemoFailed.as_str() {
            return error;
        }
        let mut wrapped = self
            .failure()
            .detail("cause", error.code())
            .detail("cause_message", error.message());
        for (key, value) in error.details() {
            wrapped = wrapped.detail(&format!("cause_{key}"), value);
        }
        wrapped
    }

    /// Number of steps told.
    pub fn step_count(&self) -> usize {
        self.steps.len()
    }

    /// The steps as JSON.
    pub fn steps_json(&self) -> Value {
        Value::Array(
            self.steps
                .iter()
                .map(|s| json!({"step": s.number, "title": s.title, "checks": s.checks, "facts": s.facts}))
                .collect(),
        )
    }
}

/// Wraps a paragraph at 88 columns with an indent.
fn wrap(text: &str, indent: &str) -> String {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.len() + 1 + word.len() > 88 {
            lines.push(format!("{indent}{line}"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(format!("{indent}{line}"));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_names_the_step_and_what_was_seen() {
        let mut narrator = Narrator::new(Format::Json);
        narrator.step("Counting");
        narrator.check_eq(2, 2, "two is two").unwrap();
        let error = narrator.check_eq(3, 4, "three is four").unwrap_err();
        assert_eq!(error.code(), "sync.cli.demo_failed");
        assert_eq!(error.details()["step"], "1");
        assert_eq!(error.details()["claim"], "three is four");
        assert_eq!(error.details()["observed"], "expected 4, observed 3");
    }

    #[test]
    fn long_sentences_wrap() {
        let text = "word ".repeat(40);
        assert!(wrap(&text, "   ")
            .lines()
            .all(|l| l.len() <= 88 && l.starts_with("   ")));
    }
}
