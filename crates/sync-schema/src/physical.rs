//! Physical checks on the same-version path (`schema-and-migrations.md` §8).

use sync_core::{CompiledTable, Error, ErrorCode, IndexDef, Result};

use crate::dialect::{Dialect, INTERNAL_COLUMNS};
use crate::index_name::physical_index_name;
use crate::observed::{ObservedIndex, ObservedTable};

/// Verifies that an existing table matches what the running code reads and
/// writes. Writes nothing.
///
/// Failures are `sync.storage.physical_layout_mismatch` with `details`
/// `table`, `column` (or `index`), `reason` (`missing_table`,
/// `missing_column`, `type`, `nullability`, `primary_key`, `collation`,
/// `missing_index`, `index_definition`) and, for `type`, `nullability`,
/// `collation` and `index_definition`, `expected` and `actual`. Checks run in
/// that order: internal columns, primary key, key collations, application
/// columns, extra `NOT NULL` columns of non-materialized tables, indexes.
/// Extra columns and operator indexes are tolerated.
pub fn check_physical(
    table: &CompiledTable,
    observed: &ObservedTable,
    dialect: Dialect,
) -> Result<()> {
    let t = table.name.as_str();
    if !observed.exists {
        return Err(mismatch(t, "missing_table"));
    }
    check_internal_columns(t, observed, dialect)?;
    check_primary_key(t, observed)?;
    if let Some(collation) = dialect.key_collation() {
        check_key_collations(t, observed, collation)?;
    }
    if table.materialize {
        check_application_columns(table, observed, dialect)?;
        check_indexes(table, observed, dialect)?;
    } else {
        check_no_extra_not_null(t, observed)?;
    }
    Ok(())
}

fn mismatch(table: &str, reason: &str) -> Error {
    Error::new(ErrorCode::PhysicalLayoutMismatch)
        .detail("table", table)
        .detail("reason", reason)
}

fn column_mismatch(table: &str, column: &str, reason: &str) -> Error {
    mismatch(table, reason).detail("column", column)
}

fn differs(error: Error, expected: impl ToString, actual: impl ToString) -> Error {
    error.detail("expected", expected).detail("actual", actual)
}

fn check_internal_columns(t: &str, observed: &ObservedTable, dialect: Dialect) -> Result<()> {
    for internal in &INTERNAL_COLUMNS {
        let Some(column) = observed.column(internal.name) else {
            return Err(column_mismatch(t, internal.name, "missing_column"));
        };
        let expected = internal.sql_type(dialect);
        if !dialect.type_matches(expected, &column.declared_type) {
            return Err(differs(
                column_mismatch(t, internal.name, "type"),
                expected,
                &column.declared_type,
            ));
        }
        if column.not_null == internal.nullable {
            let (expected, actual) = if internal.nullable {
                ("nullable", "not null")
            } else {
                ("not null", "nullable")
            };
            return Err(differs(
                column_mismatch(t, internal.name, "nullability"),
                expected,
                actual,
            ));
        }
    }
    Ok(())
}

fn check_primary_key(t: &str, observed: &ObservedTable) -> Result<()> {
    let mut key: Vec<_> = observed
        .columns
        .iter()
        .filter(|c| c.primary_key_position > 0)
        .collect();
    key.sort_by_key(|c| c.primary_key_position);
    let actual: Vec<&str> = key.iter().map(|c| c.name.as_str()).collect();
    let expected = [INTERNAL_COLUMNS[0].name, INTERNAL_COLUMNS[1].name];
    if actual != expected {
        return Err(differs(
            mismatch(t, "primary_key"),
            expected.join(", "),
            actual.join(", "),
        ));
    }
    Ok(())
}

fn check_key_collations(t: &str, observed: &ObservedTable, collation: &str) -> Result<()> {
    for internal in INTERNAL_COLUMNS.iter().filter(|c| c.is_key()) {
        let Some(column) = observed.column(internal.name) else {
            continue;
        };
        if column.collation.as_deref() != Some(collation) {
            return Err(differs(
                column_mismatch(t, internal.name, "collation"),
                collation,
                column.collation.as_deref().unwrap_or("default"),
            ));
        }
    }
    Ok(())
}

fn check_application_columns(
    table: &CompiledTable,
    observed: &ObservedTable,
    dialect: Dialect,
) -> Result<()> {
    for column in &table.columns {
        let Some(physical) = observed.column(&column.name) else {
            return Err(column_mismatch(&table.name, &column.name, "missing_column"));
        };
        let expected = dialect.sql_type(column.column_type);
        if !dialect.type_matches(expected, &physical.declared_type) {
            return Err(differs(
                column_mismatch(&table.name, &column.name, "type"),
                expected,
                &physical.declared_type,
            ));
        }
    }
    Ok(())
}

fn check_no_extra_not_null(t: &str, observed: &ObservedTable) -> Result<()> {
    let extra = observed
        .columns
        .iter()
        .filter(|c| !INTERNAL_COLUMNS.iter().any(|i| i.name == c.name))
        .find(|c| c.not_null);
    match extra {
        Some(column) => Err(differs(
            column_mismatch(t, &column.name, "nullability"),
            "nullable",
            "not null",
        )),
        None => Ok(()),
    }
}

fn check_indexes(table: &CompiledTable, observed: &ObservedTable, dialect: Dialect) -> Result<()> {
    for index in &table.indexes {
        let physical = physical_index_name(&index.name);
        let Some(found) = observed.index(&physical) else {
            return Err(mismatch(&table.name, "missing_index").detail("index", &physical));
        };
        let expected = render_definition(
            dialect,
            index.unique,
            &dialect.declared_index_columns(index),
        );
        let actual = render_definition(dialect, found.unique, &found.columns);
        if expected != actual && expected_definition(dialect, index) != actual {
            return Err(differs(
                mismatch(&table.name, "index_definition").detail("index", &physical),
                expected,
                actual,
            ));
        }
    }
    Ok(())
}

/// `[UNIQUE ](<_sync_partition>, <c1>, …)` with the dialect's quoting (the
/// text an operator reads in `details.expected` / `details.actual`).
fn render_definition(dialect: Dialect, unique: bool, columns: &[String]) -> String {
    let columns: Vec<String> = columns.iter().map(|c| dialect.quote_ident(c)).collect();
    format!(
        "{}({})",
        if unique { "UNIQUE " } else { "" },
        columns.join(", ")
    )
}

/// The default shape of a declared index, which every dialect accepts
/// besides its own [`crate::SqlDialect::declared_index_columns`].
pub(crate) fn expected_definition(dialect: Dialect, index: &IndexDef) -> String {
    render_definition(
        dialect,
        index.unique,
        &crate::ddl::standard_index_columns(index),
    )
}

/// Whether an observed index has exactly the declared columns and uniqueness
/// but lacks the leading `_sync_partition` (a legacy shape, §13).
pub(crate) fn is_legacy_definition(index: &IndexDef, observed: &ObservedIndex) -> bool {
    observed.unique == index.unique && observed.columns == index.columns
}
