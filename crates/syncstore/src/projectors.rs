//! The ready projectors of `backfill`, built from command-line options:
//!
//! - `derived-column`: `--table T --column C --from SOURCE --transform X`
//!   keeps `T.C = X(T.SOURCE)` (C nullable, same type as SOURCE);
//! - `derived-table`: `--source T --target T2 [--map TARGET=SOURCE[:X]]…`
//!   keeps one `T2` row per `T` row (same row id and scopes); each target
//!   column takes its `--map` source, else the source column of the same
//!   name, else NULL.
//!
//! Transforms: `copy`, `lower`, `upper`, `trim` (strings only; every other
//! value passes unchanged, NULL stays NULL).

use std::sync::Arc;

use sync_backfill::{DerivedColumn, DerivedTable};
use sync_core::{ColumnType, CompiledSchema, CompiledTable, RowValue};

use crate::cli::{ColumnMapping, Transform};
use crate::error::{CliCode, CliError, CliResult};

/// Applies a transform to one value.
pub fn apply(transform: Transform, value: RowValue) -> RowValue {
    match (transform, value) {
        (Transform::Lower, RowValue::String(s)) => RowValue::String(s.to_lowercase()),
        (Transform::Upper, RowValue::String(s)) => RowValue::String(s.to_uppercase()),
        (Transform::Trim, RowValue::String(s)) => RowValue::String(s.trim().to_owned()),
        (_, value) => value,
    }
}

fn invalid(option: &str, reason: &str) -> CliError {
    CliError::new(CliCode::InvalidProjector)
        .detail("option", option)
        .detail("reason", reason)
}

fn column_index(table: &CompiledTable, column: &str, option: &str) -> CliResult<usize> {
    table.column_index.get(column).copied().ok_or_else(|| {
        invalid(option, "unknown_column")
            .detail("table", &table.name)
            .detail("column", column)
    })
}

fn same_type(
    source: &CompiledTable,
    source_index: usize,
    target: &CompiledTable,
    target_index: usize,
    option: &str,
) -> CliResult<()> {
    let from: ColumnType = source.columns[source_index].column_type;
    let to: ColumnType = target.columns[target_index].column_type;
    if from == to {
        Ok(())
    } else {
        Err(invalid(option, "type_mismatch")
            .detail("column", &target.columns[target_index].name)
            .detail("expected", to)
            .detail("actual", from))
    }
}

/// `table.column = transform(table.from)`.
pub fn derived_column(
    schema: Arc<CompiledSchema>,
    table: &str,
    column: &str,
    from: &str,
    transform: Transform,
) -> CliResult<DerivedColumn> {
    let compiled = schema.require_table(table)?;
    let from_index = column_index(compiled, from, "--from")?;
    let target_index = column_index(compiled, column, "--column")?;
    same_type(compiled, from_index, compiled, target_index, "--column")?;
    let derive = Arc::new(move |_: &CompiledTable, values: &[RowValue]| {
        Ok(apply(
            transform,
            values.get(from_index).cloned().unwrap_or(RowValue::Null),
        ))
    });
    Ok(DerivedColumn::new(schema, table, column, derive)?)
}

/// One row of `target` per row of `source`, columns mapped as documented.
pub fn derived_table(
    schema: Arc<CompiledSchema>,
    source: &str,
    target: &str,
    mappings: &[ColumnMapping],
) -> CliResult<DerivedTable> {
    let source_table = schema.require_table(source)?;
    let target_table = schema.require_table(target)?;
    if source_table.name == target_table.name {
        return Err(invalid("--target", "same_as_source"));
    }
    for mapping in mappings {
        column_index(target_table, &mapping.target, "--map")?;
    }
    let mut plan: Vec<Option<(usize, Transform)>> = Vec::with_capacity(target_table.columns.len());
    for (target_index, column) in target_table.columns.iter().enumerate() {
        let chosen = match mappings.iter().rev().find(|m| m.target == column.name) {
            Some(mapping) => Some((
                column_index(source_table, &mapping.source, "--map")?,
                mapping.transform,
            )),
            None => source_table
                .column_index
                .get(&column.name)
                .map(|&i| (i, Transform::Copy)),
        };
        match chosen {
            Some((source_index, _)) => {
                same_type(
                    source_table,
                    source_index,
                    target_table,
                    target_index,
                    "--map",
                )?;
            }
            None if !column.nullable => {
                return Err(
                    invalid("--map", "unmapped_required_column").detail("column", &column.name)
                );
            }
            None => {}
        }
        plan.push(chosen);
    }
    let derive = Arc::new(move |_: &CompiledTable, values: &[RowValue]| {
        Ok(Some(
            plan.iter()
                .map(|slot| match slot {
                    Some((index, transform)) => apply(
                        *transform,
                        values.get(*index).cloned().unwrap_or(RowValue::Null),
                    ),
                    None => RowValue::Null,
                })
                .collect(),
        ))
    });
    Ok(DerivedTable::new(schema, source, target, derive)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transforms_touch_strings_only() {
        let s = |t: &str| RowValue::String(t.to_owned());
        assert_eq!(apply(Transform::Lower, s("Ünïcode ABC")), s("ünïcode abc"));
        assert_eq!(apply(Transform::Upper, s("abc")), s("ABC"));
        assert_eq!(apply(Transform::Trim, s("  a b ")), s("a b"));
        assert_eq!(apply(Transform::Copy, s(" A ")), s(" A "));
        assert_eq!(
            apply(Transform::Lower, RowValue::Integer(3)),
            RowValue::Integer(3)
        );
        assert_eq!(apply(Transform::Lower, RowValue::Null), RowValue::Null);
    }
}
