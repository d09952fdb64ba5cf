//! Strict parsing of the schema input JSON (`schema-and-migrations.md` §2).
//!
//! The JSON is parsed into a [`serde_json::Value`] and walked by hand so that
//! every failure names its exact JSON pointer:
//! `schema input is malformed at <json-pointer>: <what>`. Unknown members,
//! wrong JSON types and missing required members are all
//! `schema.malformed_input`. An unknown column `type` string is *not* a parse
//! error: it is kept verbatim and rejected by [`crate::compile`] (check 6).

use serde_json::{Map, Number, Value};
use sync_core::{Error, ErrorCode, Result};

/// A parsed, not yet validated, schema input file (the root object).
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaInput {
    /// The `version` member as written (always an integer when parsed from
    /// JSON; range-checked by [`crate::compile`]).
    pub version: Number,
    /// The `tables` member, in declaration order.
    pub tables: Vec<TableInput>,
}

impl SchemaInput {
    /// A schema input with the given version and no tables.
    pub fn new(version: i64) -> Self {
        Self {
            version: Number::from(version),
            tables: Vec::new(),
        }
    }
}

/// One `tables[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInput {
    /// `name`.
    pub name: String,
    /// `primaryKey`: the name of the primary-key column.
    pub primary_key: String,
    /// `columns`, in row codec order.
    pub columns: Vec<ColumnInput>,
    /// `scopes`, in declaration order.
    pub scopes: Vec<ScopeInput>,
    /// `indexes` (default empty).
    pub indexes: Vec<IndexInput>,
    /// `materialize` when given explicitly.
    pub materialize: Option<bool>,
}

/// One `columns[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnInput {
    /// `name`.
    pub name: String,
    /// `type`, verbatim (unknown strings are rejected by compile, check 6).
    pub column_type: String,
    /// `nullable` (default `false`).
    pub nullable: bool,
    /// `crdtType` when given.
    pub crdt_type: Option<String>,
    /// `encrypted` (default `false`).
    pub encrypted: bool,
    /// `declaredType` when given, verbatim.
    pub declared_type: Option<String>,
}

impl ColumnInput {
    /// A plain column of the given type, non-nullable, not encrypted.
    pub fn new(name: impl Into<String>, column_type: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            column_type: column_type.into(),
            nullable: false,
            crdt_type: None,
            encrypted: false,
            declared_type: None,
        }
    }
}

/// One `scopes[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeInput {
    /// String form `"prefix:{variable}"`: the column is the variable.
    Pattern(String),
    /// Object form `{ "pattern": "prefix:{variable}", "column": "c" }`.
    Explicit {
        /// `pattern`.
        pattern: String,
        /// `column`.
        column: String,
    },
}

impl ScopeInput {
    /// The pattern text of either form.
    pub fn pattern(&self) -> &str {
        match self {
            Self::Pattern(pattern) | Self::Explicit { pattern, .. } => pattern,
        }
    }
}

/// One `indexes[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexInput {
    /// `name`.
    pub name: String,
    /// `columns`.
    pub columns: Vec<String>,
    /// `unique` (default `false`).
    pub unique: bool,
}

/// Parses schema input text strictly.
///
/// Text that is not JSON, unknown members, wrong JSON types and missing
/// required members fail with `schema.malformed_input` and the message
/// `schema input is malformed at <json-pointer>: <what>` (`details.pointer`).
///
/// A leading UTF-8 byte-order mark is ignored. A member name repeated in one
/// object, at any depth, is `schema.malformed_input` at the repeated
/// member's pointer (JSON parsers disagree on which one wins, so none is
/// taken).
pub fn parse_schema_json(text: &str) -> Result<SchemaInput> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    crate::duplicates::reject_duplicate_members(text)
        .map_err(|pointer| malformed(&pointer, "duplicate member"))?;
    let value: Value = serde_json::from_str(text)
        .map_err(|error| malformed("", &format!("not valid JSON ({error})")))?;
    parse_schema_value(&value)
}

/// Parses an already decoded JSON value strictly (same rules as
/// [`parse_schema_json`]).
pub fn parse_schema_value(value: &Value) -> Result<SchemaInput> {
    let root = object(value, "")?;
    known_members(root, "", &["version", "tables"])?;
    let version = integer(required(root, "", "version")?, "/version")?;
    let tables_ptr = "/tables";
    let tables = array(required(root, "", "tables")?, tables_ptr)?
        .iter()
        .enumerate()
        .map(|(i, table)| parse_table(table, &format!("{tables_ptr}/{i}")))
        .collect::<Result<Vec<_>>>()?;
    Ok(SchemaInput { version, tables })
}

fn parse_table(value: &Value, ptr: &str) -> Result<TableInput> {
    let obj = object(value, ptr)?;
    known_members(
        obj,
        ptr,
        &[
            "name",
            "primaryKey",
            "columns",
            "scopes",
            "indexes",
            "materialize",
        ],
    )?;
    let name = string(required(obj, ptr, "name")?, &child(ptr, "name"))?;
    let primary_key = string(required(obj, ptr, "primaryKey")?, &child(ptr, "primaryKey"))?;
    let columns_ptr = child(ptr, "columns");
    let columns = array(required(obj, ptr, "columns")?, &columns_ptr)?
        .iter()
        .enumerate()
        .map(|(i, c)| parse_column(c, &format!("{columns_ptr}/{i}")))
        .collect::<Result<Vec<_>>>()?;
    let scopes_ptr = child(ptr, "scopes");
    let scopes = array(required(obj, ptr, "scopes")?, &scopes_ptr)?
        .iter()
        .enumerate()
        .map(|(i, s)| parse_scope(s, &format!("{scopes_ptr}/{i}")))
        .collect::<Result<Vec<_>>>()?;
    let indexes_ptr = child(ptr, "indexes");
    let indexes = match obj.get("indexes") {
        None => Vec::new(),
        Some(v) => array(v, &indexes_ptr)?
            .iter()
            .enumerate()
            .map(|(i, ix)| parse_index(ix, &format!("{indexes_ptr}/{i}")))
            .collect::<Result<Vec<_>>>()?,
    };
    let materialize = obj
        .get("materialize")
        .map(|v| boolean(v, &child(ptr, "materialize")))
        .transpose()?;
    Ok(TableInput {
        name,
        primary_key,
        columns,
        scopes,
        indexes,
        materialize,
    })
}

fn parse_column(value: &Value, ptr: &str) -> Result<ColumnInput> {
    let obj = object(value, ptr)?;
    known_members(
        obj,
        ptr,
        &[
            "name",
            "type",
            "nullable",
            "crdtType",
            "encrypted",
            "declaredType",
        ],
    )?;
    Ok(ColumnInput {
        name: string(required(obj, ptr, "name")?, &child(ptr, "name"))?,
        column_type: string(required(obj, ptr, "type")?, &child(ptr, "type"))?,
        nullable: optional_bool(obj, ptr, "nullable")?.unwrap_or(false),
        crdt_type: optional_string(obj, ptr, "crdtType")?,
        encrypted: optional_bool(obj, ptr, "encrypted")?.unwrap_or(false),
        declared_type: optional_string(obj, ptr, "declaredType")?,
    })
}

fn parse_scope(value: &Value, ptr: &str) -> Result<ScopeInput> {
    match value {
        Value::String(pattern) => Ok(ScopeInput::Pattern(pattern.clone())),
        Value::Object(obj) => {
            known_members(obj, ptr, &["pattern", "column"])?;
            Ok(ScopeInput::Explicit {
                pattern: string(required(obj, ptr, "pattern")?, &child(ptr, "pattern"))?,
                column: string(required(obj, ptr, "column")?, &child(ptr, "column"))?,
            })
        }
        _ => Err(malformed(ptr, "expected a string or an object")),
    }
}

fn parse_index(value: &Value, ptr: &str) -> Result<IndexInput> {
    let obj = object(value, ptr)?;
    known_members(obj, ptr, &["name", "columns", "unique"])?;
    let name = string(required(obj, ptr, "name")?, &child(ptr, "name"))?;
    let columns_ptr = child(ptr, "columns");
    let columns = array(required(obj, ptr, "columns")?, &columns_ptr)?
        .iter()
        .enumerate()
        .map(|(i, c)| string(c, &format!("{columns_ptr}/{i}")))
        .collect::<Result<Vec<_>>>()?;
    let unique = optional_bool(obj, ptr, "unique")?.unwrap_or(false);
    Ok(IndexInput {
        name,
        columns,
        unique,
    })
}

/// The `schema.malformed_input` error for a JSON pointer (the root, `""`,
/// is shown as `/`).
fn malformed(pointer: &str, what: &str) -> Error {
    let pointer = if pointer.is_empty() { "/" } else { pointer };
    Error::with_message(
        ErrorCode::SchemaMalformedInput,
        format!("schema input is malformed at {pointer}: {what}"),
    )
    .detail("pointer", pointer)
}

/// `ptr` extended by one member name, escaped per RFC 6901.
fn child(ptr: &str, member: &str) -> String {
    format!("{ptr}/{}", member.replace('~', "~0").replace('/', "~1"))
}

fn known_members(obj: &Map<String, Value>, ptr: &str, known: &[&str]) -> Result<()> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => Err(malformed(&child(ptr, unknown), "unknown member")),
        None => Ok(()),
    }
}

fn required<'v>(obj: &'v Map<String, Value>, ptr: &str, member: &str) -> Result<&'v Value> {
    obj.get(member)
        .ok_or_else(|| malformed(&child(ptr, member), "missing required member"))
}

fn object<'v>(value: &'v Value, ptr: &str) -> Result<&'v Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| malformed(ptr, "expected an object"))
}

fn array<'v>(value: &'v Value, ptr: &str) -> Result<&'v Vec<Value>> {
    value
        .as_array()
        .ok_or_else(|| malformed(ptr, "expected an array"))
}

fn string(value: &Value, ptr: &str) -> Result<String> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| malformed(ptr, "expected a string"))
}

fn boolean(value: &Value, ptr: &str) -> Result<bool> {
    value
        .as_bool()
        .ok_or_else(|| malformed(ptr, "expected a boolean"))
}

/// A JSON integer (no fraction, no exponent that made it a float).
fn integer(value: &Value, ptr: &str) -> Result<Number> {
    match value {
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.clone()),
        _ => Err(malformed(ptr, "expected an integer")),
    }
}

fn optional_bool(obj: &Map<String, Value>, ptr: &str, member: &str) -> Result<Option<bool>> {
    obj.get(member)
        .map(|v| boolean(v, &child(ptr, member)))
        .transpose()
}

fn optional_string(obj: &Map<String, Value>, ptr: &str, member: &str) -> Result<Option<String>> {
    obj.get(member)
        .map(|v| string(v, &child(ptr, member)))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> String {
        let error = parse_schema_json(text).unwrap_err();
        assert_eq!(error.code(), ErrorCode::SchemaMalformedInput);
        error.message().to_owned()
    }

    #[test]
    fn duplicate_members_are_refused_at_every_level() {
        assert_eq!(
            message(r#"{"version":1,"tables":[],"version":2}"#),
            "schema input is malformed at /version: duplicate member"
        );
        assert_eq!(
            message(
                r#"{"version":1,"tables":[{"name":"t","name":"u","primaryKey":"id","columns":[],"scopes":[]}]}"#
            ),
            "schema input is malformed at /tables/0/name: duplicate member"
        );
        assert_eq!(
            message(
                r#"{"version":1,"tables":[{"name":"t","primaryKey":"id","columns":[{"name":"id","type":"string","type":"integer"}],"scopes":[]}]}"#
            ),
            "schema input is malformed at /tables/0/columns/0/type: duplicate member"
        );
        assert_eq!(
            message(r#"{"version":1,"tables":[],"a/b":1,"a/b":2}"#),
            "schema input is malformed at /a~1b: duplicate member"
        );
    }

    #[test]
    fn a_byte_order_mark_is_accepted() {
        let parsed = parse_schema_json("\u{feff}{\"version\":3,\"tables\":[]}").unwrap();
        assert_eq!(parsed.version, Number::from(3));
    }

    #[test]
    fn pointers_name_the_offending_member() {
        assert_eq!(
            message(
                r#"{"version":1,"tables":[{"name":"t","primaryKey":"id","columns":[{"name":"id","type":"string","nullable":"yes"}],"scopes":["a:{id}"]}]}"#
            ),
            "schema input is malformed at /tables/0/columns/0/nullable: expected a boolean"
        );
        assert_eq!(
            message(r#"{"version":1,"tables":[],"extra":1}"#),
            "schema input is malformed at /extra: unknown member"
        );
        assert_eq!(
            message(r#"{"tables":[]}"#),
            "schema input is malformed at /version: missing required member"
        );
        assert_eq!(
            message(r#"{"version":1.5,"tables":[]}"#),
            "schema input is malformed at /version: expected an integer"
        );
        assert_eq!(
            message(r#"[]"#),
            "schema input is malformed at /: expected an object"
        );
        assert_eq!(
            message(r#"{"version":1,"tables":[],"a/b~c":1}"#),
            "schema input is malformed at /a~1b~0c: unknown member"
        );
        assert_eq!(
            message(
                r#"{"version":1,"tables":[{"name":"t","primaryKey":"id","columns":[],"scopes":[7]}]}"#
            ),
            "schema input is malformed at /tables/0/scopes/0: expected a string or an object"
        );
    }

    #[test]
    fn not_json_is_malformed_at_the_root() {
        let error = parse_schema_json("{nope").unwrap_err();
        assert!(error
            .message()
            .starts_with("schema input is malformed at /: not valid JSON"));
        assert_eq!(error.get_detail("pointer"), Some("/"));
    }

    #[test]
    fn optional_members_take_their_defaults() {
        let input = parse_schema_json(
            r#"{"version":2,"tables":[{"name":"t","primaryKey":"id","columns":[{"name":"id","type":"weird"}],"scopes":[{"pattern":"a:{v}","column":"id"}]}]}"#,
        )
        .unwrap();
        let table = &input.tables[0];
        assert_eq!(table.indexes, vec![]);
        assert_eq!(table.materialize, None);
        assert_eq!(table.columns[0], ColumnInput::new("id", "weird"));
        assert_eq!(
            table.scopes[0],
            ScopeInput::Explicit {
                pattern: "a:{v}".into(),
                column: "id".into()
            }
        );
        assert_eq!(input.version, Number::from(2));
    }
}
