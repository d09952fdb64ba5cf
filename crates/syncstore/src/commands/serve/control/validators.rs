//! Declarative validators of a test instance, installed at run time and
//! run through the engine's own hooks: one row rule per table
//! (`maxLength`, `immutableWhen`) and one whole-commit rule
//! (`requireSiblingWhen`).
//!
//! The engine is built with a [`TableRules`] row validator for every table
//! and one [`CommitRules`] commit validator; both read the rules installed
//! now, so an install takes effect from the next push on.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;
use sync_core::{CompiledSchema, RejectionDetails, RowValue};
use sync_engine::{
    CandidateReader, CommitInput, CommitValidator, Rejection, RowValidator, ValidateContext,
    ValidateOperation, ValidationFailure,
};

use super::driver_values::{same, to_driver};
use super::fields::{integer, invalid, member, object, row_value, text};
use crate::error::{CliError, CliResult};

/// A per-table row rule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RowRule {
    /// Reject a written string longer than `max` (UTF-16 code units, as the
    /// harnesses' `String.length` counts).
    MaxLength {
        column: String,
        max: usize,
        code: String,
    },
    /// Reject an update that changes `column` while the stored row's
    /// `guard_column` equals `guard_value`.
    ImmutableWhen {
        column: String,
        guard_column: String,
        guard_value: Value,
        code: String,
    },
}

/// The whole-commit rule: an operation on `table` writing `column` =
/// `equals` needs, in the same commit, an operation on `table` whose row
/// id is its row id followed by `suffix`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SiblingRule {
    table: String,
    column: String,
    equals: Value,
    suffix: String,
    code: String,
}

/// The rules installed now.
#[derive(Debug, Default)]
pub(crate) struct Rules {
    rows: RwLock<BTreeMap<String, RowRule>>,
    commit: RwLock<Option<SiblingRule>>,
}

impl Rules {
    /// Replaces every row rule (an empty map clears them).
    pub(crate) fn set_rows(&self, rules: BTreeMap<String, RowRule>) {
        *self.rows.write().unwrap_or_else(PoisonError::into_inner) = rules;
    }

    /// Replaces (or clears) the commit rule.
    pub(crate) fn set_commit(&self, rule: Option<SiblingRule>) {
        *self.commit.write().unwrap_or_else(PoisonError::into_inner) = rule;
    }

    fn row_rule(&self, table: &str) -> Option<RowRule> {
        self.rows
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(table)
            .cloned()
    }

    fn commit_rule(&self) -> Option<SiblingRule> {
        self.commit
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The row validator of one table.
pub(crate) struct TableRules {
    table: String,
    rules: Arc<Rules>,
}

impl TableRules {
    /// The validator of `table` reading `rules`.
    pub(crate) fn new(table: &str, rules: Arc<Rules>) -> Self {
        Self {
            table: table.to_owned(),
            rules,
        }
    }
}

/// The commit validator reading `rules`.
pub(crate) struct CommitRules(pub(crate) Arc<Rules>);

fn reject(
    code: &str,
    message: &str,
    column: &str,
    reason: &str,
    action: &str,
    op_index: Option<u32>,
) -> ValidationFailure {
    let details = RejectionDetails {
        field_paths: Some(vec![column.to_owned()]),
        reason: Some(reason.to_owned()),
        required_action: Some(action.to_owned()),
        references: None,
    };
    match Rejection::new(code, message, Some(details), op_index) {
        Ok(rejection) => ValidationFailure::Reject(rejection),
        // The code was checked at install time; a failure here is the
        // validator's own.
        Err(error) => ValidationFailure::Failed(Box::new(error)),
    }
}

fn driver(values: Option<&BTreeMap<String, RowValue>>, column: &str) -> Option<Value> {
    values.and_then(|v| v.get(column)).map(to_driver)
}

impl RowValidator for TableRules {
    fn validate(
        &self,
        op: &ValidateOperation,
        _: &ValidateContext,
    ) -> Result<(), ValidationFailure> {
        let Some(rule) = self.rules.row_rule(&self.table) else {
            return Ok(());
        };
        let Some(row) = &op.row else {
            return Ok(()); // a delete writes no row
        };
        match rule {
            RowRule::MaxLength { column, max, code } => match row.get(&column) {
                Some(RowValue::String(s) | RowValue::Json(s)) if s.encode_utf16().count() > max => {
                    Err(reject(
                        &code,
                        "the value is longer than allowed",
                        &column,
                        "max_length_exceeded",
                        "edit_fields",
                        None,
                    ))
                }
                _ => Ok(()),
            },
            RowRule::ImmutableWhen {
                column,
                guard_column,
                guard_value,
                code,
            } => {
                let Some(stored) = &op.stored else {
                    return Ok(()); // an insert
                };
                let guarded = same(
                    driver(Some(stored), &guard_column).as_ref(),
                    Some(&guard_value),
                );
                let changed = !same(
                    driver(Some(row), &column).as_ref(),
                    driver(Some(stored), &column).as_ref(),
                );
                if guarded && changed {
                    return Err(reject(
                        &code,
                        "the value is immutable in the stored row's state",
                        &column,
                        "immutable_state",
                        "keep_server",
                        None,
                    ));
                }
                Ok(())
            }
        }
    }
}

impl CommitValidator for CommitRules {
    fn validate(
        &self,
        input: &CommitInput,
        _: &mut dyn CandidateReader,
    ) -> Result<(), ValidationFailure> {
        let Some(rule) = self.0.commit_rule() else {
            return Ok(());
        };
        let trigger = input.operations.iter().find(|op| {
            op.table == rule.table
                && op.row.is_some()
                && same(
                    driver(op.row.as_ref(), &rule.column).as_ref(),
                    Some(&rule.equals),
                )
        });
        let Some(trigger) = trigger else {
            return Ok(());
        };
        let sibling = format!("{}{}", trigger.row_id, rule.suffix);
        if input
            .operations
            .iter()
            .any(|op| op.table == rule.table && op.row_id == sibling)
        {
            return Ok(());
        }
        Err(reject(
            &rule.code,
            "the commit lacks a required sibling operation",
            &rule.column,
            "missing_sibling_operation",
            "repair_aggregate",
            Some(trigger.op_index),
        ))
    }
}

/// A host rejection code that the engine accepts.
fn host_code(object: &serde_json::Map<String, Value>, parent: &str) -> CliResult<String> {
    let code = text(object, parent, "code")?;
    Rejection::new(code.as_str(), "check", None, None)
        .map_err(|e| invalid(&format!("{parent}.code"), e.reason))?;
    Ok(code)
}

fn column_of(
    schema: &CompiledSchema,
    table: &str,
    object: &serde_json::Map<String, Value>,
    parent: &str,
    key: &str,
) -> CliResult<String> {
    let column = text(object, parent, key)?;
    let known = schema
        .table(table)
        .is_some_and(|t| t.column_index.contains_key(&column));
    if known {
        Ok(column)
    } else {
        Err(invalid(&format!("{parent}.{key}"), "unknown_column"))
    }
}

fn table_of(
    schema: &CompiledSchema,
    object: &serde_json::Map<String, Value>,
    parent: &str,
) -> CliResult<String> {
    let table = text(object, parent, "table")?;
    if schema.table(&table).is_none() {
        return Err(CliError::from(sync_core::Error::unknown_table(&table)));
    }
    Ok(table)
}

/// `{"validators": [{"table": T, "rule": {...}}, ...]}`: one rule per
/// table (a table named twice is refused); an empty list clears.
pub(crate) fn parse_row_rules(
    body: &Value,
    schema: &CompiledSchema,
) -> CliResult<BTreeMap<String, RowRule>> {
    let body = object(body, "", &["validators"])?;
    let list = member(body, "", "validators")?
        .as_array()
        .ok_or_else(|| invalid("validators", "not_an_array"))?;
    let mut rules = BTreeMap::new();
    for (i, spec) in list.iter().enumerate() {
        let at = format!("validators[{i}]");
        let spec = object(spec, &at, &["table", "rule"])?;
        let table = table_of(schema, spec, &at)?;
        let rule_at = format!("{at}.rule");
        let rule = member(spec, &at, "rule")?;
        let kind = rule
            .get("kind")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(&format!("{rule_at}.kind"), "missing"))?;
        let parsed = match kind {
            "maxLength" => {
                let rule = object(rule, &rule_at, &["kind", "column", "max", "code"])?;
                let max = integer(rule, &rule_at, "max", 0, i64::from(u32::MAX))?
                    .ok_or_else(|| invalid(&format!("{rule_at}.max"), "missing"))?;
                RowRule::MaxLength {
                    column: column_of(schema, &table, rule, &rule_at, "column")?,
                    max: usize::try_from(max)
                        .map_err(|_| invalid(&format!("{rule_at}.max"), "out_of_range"))?,
                    code: host_code(rule, &rule_at)?,
                }
            }
            "immutableWhen" => {
                let rule = object(
                    rule,
                    &rule_at,
                    &["kind", "column", "guardColumn", "guardValue", "code"],
                )?;
                RowRule::ImmutableWhen {
                    column: column_of(schema, &table, rule, &rule_at, "column")?,
                    guard_column: column_of(schema, &table, rule, &rule_at, "guardColumn")?,
                    guard_value: row_value(
                        member(rule, &rule_at, "guardValue")?,
                        &format!("{rule_at}.guardValue"),
                    )?,
                    code: host_code(rule, &rule_at)?,
                }
            }
            _ => return Err(invalid(&format!("{rule_at}.kind"), "unknown_kind")),
        };
        if rules.insert(table, parsed).is_some() {
            return Err(invalid(&format!("{at}.table"), "duplicate_table"));
        }
    }
    Ok(rules)
}

/// `{"validator": {"kind": "requireSiblingWhen", ...}}`, or
/// `{"validator": null}` to clear.
pub(crate) fn parse_commit_rule(
    body: &Value,
    schema: &CompiledSchema,
) -> CliResult<Option<SiblingRule>> {
    let body = object(body, "", &["validator"])?;
    let spec = member(body, "", "validator")?;
    if spec.is_null() {
        return Ok(None);
    }
    let at = "validator";
    let spec = object(
        spec,
        at,
        &[
            "kind",
            "table",
            "column",
            "equals",
            "siblingRowIdSuffix",
            "code",
        ],
    )?;
    if text(spec, at, "kind")? != "requireSiblingWhen" {
        return Err(invalid("validator.kind", "unknown_kind"));
    }
    let table = table_of(schema, spec, at)?;
    Ok(Some(SiblingRule {
        column: column_of(schema, &table, spec, at, "column")?,
        equals: row_value(member(spec, at, "equals")?, "validator.equals")?,
        suffix: text(spec, at, "siblingRowIdSuffix")?,
        code: host_code(spec, at)?,
        table,
    }))
}
