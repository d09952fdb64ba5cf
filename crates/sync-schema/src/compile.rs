//! Compilation of [`SchemaInput`] into [`CompiledSchema`]: every validation
//! rule of `schema-and-migrations.md` §4, in order, with its exact code,
//! message and details.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde_json::Number;
use sync_core::{
    ColumnType, CompiledColumn, CompiledSchema, CompiledTable, Error, ErrorCode, IndexDef, Result,
    ScopePattern,
};

use crate::identifiers::{fold, validate_identifier};
use crate::input::{ColumnInput, SchemaInput, ScopeInput, TableInput};

/// Maximum number of columns per table **(decision)**.
pub const MAX_COLUMNS: usize = 1000;

/// Validates and compiles a schema input. Deterministic and pure.
///
/// The first failing rule of §4 is returned as a `schema.*` error whose
/// message follows the §3.1/§4 templates and whose `details` carry `table`
/// and, when relevant, `column`, `index`, `pattern`, `variable`.
pub fn compile(input: &SchemaInput) -> Result<CompiledSchema> {
    let version = check_version(&input.version)?;
    let mut table_names = HashSet::new();
    let mut index_names = HashSet::new();
    let mut tables = Vec::with_capacity(input.tables.len());
    for table in &input.tables {
        tables.push(compile_table(table, &mut table_names, &mut index_names)?);
    }
    let declared_variables: BTreeSet<String> = tables
        .iter()
        .flat_map(|t: &CompiledTable| t.declared_variables.iter().cloned())
        .collect();
    let table_index = tables
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    Ok(CompiledSchema {
        version,
        tables,
        declared_variables: declared_variables.into_iter().collect(),
        table_index,
    })
}

fn check_version(version: &Number) -> Result<i32> {
    version
        .as_i64()
        .filter(|v| *v >= 1)
        .and_then(|v| i32::try_from(v).ok())
        .ok_or_else(|| {
            Error::with_message(
                ErrorCode::SchemaInvalidVersion,
                format!("schema version {version} must be an integer between 1 and 2147483647"),
            )
            .detail("version", version)
        })
}

/// A `schema.*` error naming its table.
fn table_error(code: ErrorCode, table: &str, message: String) -> Error {
    Error::with_message(code, message).detail("table", table)
}

fn compile_table(
    input: &TableInput,
    table_names: &mut HashSet<String>,
    index_names: &mut HashSet<String>,
) -> Result<CompiledTable> {
    let t = input.name.as_str();
    // 1. table identifier
    validate_identifier("table", t).map_err(|e| e.detail("table", t))?;
    // 2. table name unique (case-insensitive)
    if !table_names.insert(fold(t)) {
        return Err(table_error(
            ErrorCode::SchemaDuplicateTable,
            t,
            format!("duplicate table \"{t}\""),
        ));
    }
    // 3. at most 1000 columns
    if input.columns.len() > MAX_COLUMNS {
        return Err(table_error(
            ErrorCode::SchemaTooManyColumns,
            t,
            format!("table {t}: at most 1000 columns are supported"),
        ));
    }
    let columns = compile_columns(t, &input.columns)?;
    let column_index: BTreeMap<String, usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.clone(), i))
        .collect();
    let indexes = compile_indexes(input, &column_index, index_names)?;
    let primary_key_index = check_primary_key(input, &columns, &column_index)?;
    let scope_patterns = compile_scopes(input, &columns, &column_index)?;

    let mut declared_variables: Vec<String> = Vec::new();
    for pattern in &scope_patterns {
        if !declared_variables.contains(&pattern.variable) {
            declared_variables.push(pattern.variable.clone());
        }
    }
    let materialize = input
        .materialize
        .unwrap_or_else(|| !fully_encrypted(&columns, primary_key_index, &scope_patterns));
    let blob_ref_column_indices = positions(&columns, |c| c.column_type == ColumnType::BlobRef);
    let encrypted_column_indices = positions(&columns, |c| c.encrypted);
    let crdt_columns = columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.crdt_type.clone().map(|crdt| (i, crdt)))
        .collect();
    Ok(CompiledTable {
        name: t.to_owned(),
        columns,
        primary_key_index,
        scope_patterns,
        indexes,
        materialize,
        column_index,
        declared_variables,
        blob_ref_column_indices,
        crdt_columns,
        encrypted_column_indices,
    })
}

fn positions(columns: &[CompiledColumn], keep: impl Fn(&CompiledColumn) -> bool) -> Vec<usize> {
    columns
        .iter()
        .enumerate()
        .filter(|(_, c)| keep(c))
        .map(|(i, _)| i)
        .collect()
}

/// §3.5: at least one encrypted column, at least one projectable column
/// (neither primary key nor scope column), and every projectable column
/// encrypted.
fn fully_encrypted(columns: &[CompiledColumn], pk: usize, scopes: &[ScopePattern]) -> bool {
    let projectable: Vec<&CompiledColumn> = columns
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != pk && !scopes.iter().any(|s| s.column_index == *i))
        .map(|(_, c)| c)
        .collect();
    columns.iter().any(|c| c.encrypted)
        && !projectable.is_empty()
        && projectable.iter().all(|c| c.encrypted)
}

/// Checks 4–8.
fn compile_columns(t: &str, inputs: &[ColumnInput]) -> Result<Vec<CompiledColumn>> {
    let column_kind = format!("table {t}: column");
    // 4. each column identifier
    for column in inputs {
        validate_identifier(&column_kind, &column.name)
            .map_err(|e| e.detail("table", t).detail("column", &column.name))?;
    }
    // 5. column names unique (case-insensitive)
    let mut seen = HashSet::new();
    for column in inputs {
        if !seen.insert(fold(&column.name)) {
            return Err(column_error(
                ErrorCode::SchemaDuplicateColumn,
                t,
                &column.name,
                format!("table {t}: duplicate column \"{}\"", column.name),
            ));
        }
    }
    // 6. known type
    let mut types = Vec::with_capacity(inputs.len());
    for column in inputs {
        let column_type: ColumnType = column.column_type.parse().map_err(|()| {
            column_error(
                ErrorCode::SchemaUnsupportedColumnType,
                t,
                &column.name,
                format!(
                    "table {t}: column \"{}\" has unsupported type \"{}\"",
                    column.name, column.column_type
                ),
            )
        })?;
        types.push(column_type);
    }
    // 7. crdt columns and crdtType
    for (column, &column_type) in inputs.iter().zip(&types) {
        check_crdt(t, column, column_type)?;
    }
    // 8. encrypted / declaredType
    let mut declared_types = Vec::with_capacity(inputs.len());
    for (column, &column_type) in inputs.iter().zip(&types) {
        declared_types.push(check_encrypted(t, column, column_type)?);
    }
    Ok(inputs
        .iter()
        .zip(types)
        .zip(declared_types)
        .map(|((column, column_type), declared_type)| CompiledColumn {
            name: column.name.clone(),
            column_type,
            nullable: column.nullable,
            crdt_type: column.crdt_type.clone(),
            encrypted: column.encrypted,
            declared_type,
        })
        .collect())
}

fn column_error(code: ErrorCode, t: &str, column: &str, message: String) -> Error {
    table_error(code, t, message).detail("column", column)
}

fn check_crdt(t: &str, column: &ColumnInput, column_type: ColumnType) -> Result<()> {
    let c = &column.name;
    let has_crdt_type = column.crdt_type.as_deref().is_some_and(|s| !s.is_empty());
    if column_type == ColumnType::Crdt && !has_crdt_type {
        return Err(column_error(
            ErrorCode::SchemaInvalidCrdtColumn,
            t,
            c,
            format!("table {t}: crdt column \"{c}\" must declare a crdtType"),
        ));
    }
    if column_type != ColumnType::Crdt && column.crdt_type.is_some() {
        return Err(column_error(
            ErrorCode::SchemaInvalidCrdtColumn,
            t,
            c,
            format!("table {t}: column \"{c}\" declares a crdtType but is not a crdt column"),
        ));
    }
    Ok(())
}

fn check_encrypted(
    t: &str,
    column: &ColumnInput,
    column_type: ColumnType,
) -> Result<Option<ColumnType>> {
    let c = &column.name;
    if column.encrypted && column_type != ColumnType::Bytes {
        return Err(column_error(
            ErrorCode::SchemaInvalidEncryptedColumn,
            t,
            c,
            format!("table {t}: encrypted column \"{c}\" must have type bytes"),
        ));
    }
    let Some(declared) = &column.declared_type else {
        return Ok(None);
    };
    if !column.encrypted {
        return Err(column_error(
            ErrorCode::SchemaInvalidEncryptedColumn,
            t,
            c,
            format!("table {t}: column \"{c}\" declares a declaredType but is not encrypted"),
        ));
    }
    match declared.parse::<ColumnType>() {
        Ok(declared) if declared != ColumnType::Crdt => Ok(Some(declared)),
        _ => Err(column_error(
            ErrorCode::SchemaInvalidEncryptedColumn,
            t,
            c,
            format!(
                "table {t}: encrypted column \"{c}\" has unsupported declaredType \"{declared}\""
            ),
        )),
    }
}

/// Checks 9–13.
fn compile_indexes(
    input: &TableInput,
    column_index: &BTreeMap<String, usize>,
    index_names: &mut HashSet<String>,
) -> Result<Vec<IndexDef>> {
    let t = input.name.as_str();
    let index_kind = format!("table {t}: index");
    let index_error =
        |code, index: &str, message: String| table_error(code, t, message).detail("index", index);
    // 9. each index identifier
    for index in &input.indexes {
        validate_identifier(&index_kind, &index.name)
            .map_err(|e| e.detail("table", t).detail("index", &index.name))?;
    }
    // 10. index names unique across the whole schema (case-insensitive)
    for index in &input.indexes {
        if !index_names.insert(fold(&index.name)) {
            return Err(index_error(
                ErrorCode::SchemaDuplicateIndex,
                &index.name,
                format!("table {t}: duplicate index \"{}\"", index.name),
            ));
        }
    }
    // 11. at least one column
    for index in &input.indexes {
        if index.columns.is_empty() {
            return Err(index_error(
                ErrorCode::SchemaInvalidIndex,
                &index.name,
                format!(
                    "table {t}: index \"{}\" must name at least one column",
                    index.name
                ),
            ));
        }
    }
    // 12. columns exist
    for index in &input.indexes {
        if let Some(c) = index
            .columns
            .iter()
            .find(|c| !column_index.contains_key(*c))
        {
            return Err(index_error(
                ErrorCode::SchemaInvalidIndex,
                &index.name,
                format!(
                    "table {t}: index \"{}\" names unknown column \"{c}\"",
                    index.name
                ),
            )
            .detail("column", c));
        }
    }
    // 13. columns distinct
    for index in &input.indexes {
        let mut seen = HashSet::new();
        if let Some(c) = index.columns.iter().find(|c| !seen.insert(c.as_str())) {
            return Err(index_error(
                ErrorCode::SchemaInvalidIndex,
                &index.name,
                format!(
                    "table {t}: index \"{}\" names column \"{c}\" twice",
                    index.name
                ),
            )
            .detail("column", c));
        }
    }
    Ok(input
        .indexes
        .iter()
        .map(|index| IndexDef {
            name: index.name.clone(),
            columns: index.columns.clone(),
            unique: index.unique,
        })
        .collect())
}

/// Checks 14–16; returns the primary-key position.
fn check_primary_key(
    input: &TableInput,
    columns: &[CompiledColumn],
    column_index: &BTreeMap<String, usize>,
) -> Result<usize> {
    let t = input.name.as_str();
    let pk = input.primary_key.as_str();
    let pk_error = |message: String| {
        table_error(ErrorCode::SchemaInvalidPrimaryKey, t, message).detail("column", pk)
    };
    let Some(&position) = column_index.get(pk) else {
        return Err(pk_error(format!(
            "table {t}: primary key \"{pk}\" is not a column"
        )));
    };
    let column = &columns[position];
    if !column.column_type.can_be_primary_key() {
        return Err(pk_error(format!(
            "table {t}: primary key \"{pk}\" must have type string, integer, boolean or json"
        )));
    }
    if column.nullable {
        return Err(pk_error(format!(
            "table {t}: primary key \"{pk}\" must not be nullable"
        )));
    }
    Ok(position)
}

/// Splits `prefix:{variable}` per `^([^{}]+):\{([^{}:]+)\}$`.
fn split_pattern(pattern: &str) -> Option<(&str, &str)> {
    let body = pattern.strip_suffix('}')?;
    let open = body.find('{')?;
    let prefix = body[..open].strip_suffix(':')?;
    let variable = &body[open + 1..];
    let prefix_ok = !prefix.is_empty() && !prefix.contains(['{', '}']);
    let variable_ok = !variable.is_empty() && !variable.contains(['{', '}', ':']);
    (prefix_ok && variable_ok).then_some((prefix, variable))
}

/// Checks 17–21.
fn compile_scopes(
    input: &TableInput,
    columns: &[CompiledColumn],
    column_index: &BTreeMap<String, usize>,
) -> Result<Vec<ScopePattern>> {
    let t = input.name.as_str();
    // 17. at least one scope pattern
    if input.scopes.is_empty() {
        return Err(table_error(
            ErrorCode::SchemaMissingScope,
            t,
            format!("table {t}: every synced table declares at least one scope pattern"),
        ));
    }
    let pattern_error = |code, scope: &ScopeInput, message: String| {
        table_error(code, t, message).detail("pattern", scope.pattern())
    };
    // 18. pattern shape
    let mut parsed = Vec::with_capacity(input.scopes.len());
    for scope in &input.scopes {
        let p = scope.pattern();
        let (prefix, variable) = split_pattern(p).ok_or_else(|| {
            pattern_error(
                ErrorCode::SchemaInvalidScopePattern,
                scope,
                format!(
                    "table {t}: scope pattern \"{p}\" must be 'prefix:{{variable}}' with exactly one variable"
                ),
            )
        })?;
        let column = match scope {
            ScopeInput::Pattern(_) => variable,
            ScopeInput::Explicit { column, .. } => column.as_str(),
        };
        parsed.push((scope, prefix, variable, column));
    }
    // 19. scope column exists
    let mut patterns = Vec::with_capacity(parsed.len());
    for &(scope, prefix, variable, column) in &parsed {
        let Some(&column_index) = column_index.get(column) else {
            return Err(pattern_error(
                ErrorCode::SchemaInvalidScopeColumn,
                scope,
                format!(
                    "table {t}: scope pattern \"{}\" names unknown column \"{column}\"",
                    scope.pattern()
                ),
            )
            .detail("column", column));
        };
        patterns.push(ScopePattern {
            variable: variable.to_owned(),
            prefix: prefix.to_owned(),
            column: column.to_owned(),
            column_index,
        });
    }
    // 20. scope column type
    for (pattern, (scope, ..)) in patterns.iter().zip(&parsed) {
        let column = &columns[pattern.column_index];
        if column.nullable || column.encrypted || !column.column_type.can_be_scope() {
            return Err(pattern_error(
                ErrorCode::SchemaInvalidScopeColumn,
                scope,
                format!(
                    "table {t}: scope column \"{}\" must be a non-nullable string, integer or boolean column",
                    column.name
                ),
            )
            .detail("column", &column.name));
        }
    }
    // 21. one column per variable within the table
    let mut variable_columns: HashMap<&str, &str> = HashMap::new();
    for (pattern, (scope, ..)) in patterns.iter().zip(&parsed) {
        let known = variable_columns
            .entry(pattern.variable.as_str())
            .or_insert(pattern.column.as_str());
        if *known != pattern.column {
            return Err(pattern_error(
                ErrorCode::SchemaScopeVariableConflict,
                scope,
                format!(
                    "table {t}: variable \"{}\" maps to two different columns",
                    pattern.variable
                ),
            )
            .detail("variable", &pattern.variable)
            .detail("column", &pattern.column));
        }
    }
    Ok(patterns)
}

#[cfg(test)]
mod tests {
    use super::split_pattern;

    #[test]
    fn pattern_grammar() {
        assert_eq!(split_pattern("org:{org_id}"), Some(("org", "org_id")));
        assert_eq!(split_pattern("a:b:{v}"), Some(("a:b", "v")));
        assert_eq!(split_pattern("project:{a}{b}"), None);
        assert_eq!(split_pattern("{x}"), None);
        assert_eq!(split_pattern(":{x}"), None);
        assert_eq!(split_pattern("project:x"), None);
        assert_eq!(split_pattern("p:{a:b}"), None);
        assert_eq!(split_pattern("p:{}"), None);
        assert_eq!(split_pattern("a}:{v}"), None);
        assert_eq!(split_pattern("p{:{v}"), None);
        assert_eq!(split_pattern("ü:{é}"), Some(("ü", "é")));
    }
}
