//! The shape of one check and the assertion helpers checks use.

use std::fmt;

use sync_core::{Capability, Error, ErrorCode};

use crate::context::Ctx;

pub use crate::properties::Requires;

/// Why a check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What was expected and what happened.
    pub message: String,
}

impl Failure {
    /// A failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::new(format!("unexpected error {error:?}"))
    }
}

/// Result of one check body.
pub type CheckResult<T = ()> = std::result::Result<T, Failure>;

/// A check body.
pub type CheckFn = fn(&mut Ctx<'_>) -> CheckResult;

/// One registered check: its checklist ID, group, title, required property,
/// optional capability group and body.
#[derive(Clone, Copy)]
pub struct CheckDef {
    /// Checklist ID, `C-nnn`.
    pub id: &'static str,
    /// Group name (section heading of the checklist).
    pub group: &'static str,
    /// One-line title.
    pub title: &'static str,
    /// The harness property it needs (not selected on a harness without it).
    pub requires: Requires,
    /// Capability group it needs (skipped when not advertised).
    pub capability: Option<Capability>,
    /// The body.
    pub run: CheckFn,
}

impl fmt::Debug for CheckDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckDef")
            .field("id", &self.id)
            .field("group", &self.group)
            .field("title", &self.title)
            .field("requires", &self.requires)
            .finish_non_exhaustive()
    }
}

/// Fails unless `result` is an error with `code`; returns the error for further assertions.
pub fn expect_code<T: fmt::Debug>(
    result: sync_core::Result<T>,
    code: ErrorCode,
    what: &str,
) -> CheckResult<Error> {
    match result {
        Ok(value) => Err(Failure::new(format!(
            "{what}: expected {code}, got Ok({value:?})"
        ))),
        Err(error) if error.code() == code => Ok(error),
        Err(error) => Err(Failure::new(format!(
            "{what}: expected {code}, got {error:?}"
        ))),
    }
}

/// Fails unless `error` carries `details[key] == value`.
pub fn expect_detail(error: &Error, key: &str, value: &str) -> CheckResult {
    match error.get_detail(key) {
        Some(actual) if actual == value => Ok(()),
        actual => Err(Failure::new(format!(
            "{}: expected details.{key} = {value:?}, got {actual:?} in {error:?}",
            error.code()
        ))),
    }
}

/// Fails unless the message of `error` contains none of `needles`.
pub fn expect_message_free_of(error: &Error, needles: &[&str]) -> CheckResult {
    let text = format!("{error}");
    for needle in needles {
        if !needle.is_empty() && text.contains(needle) {
            return Err(Failure::new(format!("message {text:?} leaks {needle:?}")));
        }
    }
    Ok(())
}

/// `check!(condition, "format", args…)`: fails the check with the message when false.
#[macro_export]
macro_rules! check {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err($crate::Failure::new(format!($($arg)+)));
        }
    };
}

/// `check_eq!(actual, expected, "context")`: fails with both values when unequal.
#[macro_export]
macro_rules! check_eq {
    ($actual:expr, $expected:expr, $($arg:tt)+) => {
        match (&$actual, &$expected) {
            (actual, expected) => {
                if actual != expected {
                    return Err($crate::Failure::new(format!(
                        "{}: expected {:?}, got {:?}",
                        format!($($arg)+),
                        expected,
                        actual
                    )));
                }
            }
        }
    };
}
