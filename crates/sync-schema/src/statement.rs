//! One SQL statement of a plan, with its bound parameters.

use std::fmt;

use serde_json::{json, Value};

/// One SQL statement to execute as-is, with text parameters bound in order
/// (placeholders already rendered for the plan's dialect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The statement text (no trailing `;`).
    pub sql: String,
    /// Parameters, in placeholder order.
    pub params: Vec<String>,
}

impl Statement {
    /// A statement without parameters.
    pub fn new(sql: impl Into<String>) -> Self {
        Self {
            sql: sql.into(),
            params: Vec::new(),
        }
    }

    /// A statement with parameters.
    pub fn with_params(sql: impl Into<String>, params: Vec<String>) -> Self {
        Self {
            sql: sql.into(),
            params,
        }
    }

    /// `{"sql": …, "params": […]}`.
    pub fn to_json(&self) -> Value {
        json!({ "sql": self.sql, "params": self.params })
    }
}

/// `sql;` followed by ` -- params: [...]` when there are parameters.
impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{};", self.sql)?;
        if !self.params.is_empty() {
            write!(f, " -- params: {}", Value::from(self.params.clone()))?;
        }
        Ok(())
    }
}
