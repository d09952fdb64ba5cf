//! Layouts: serialization, strict parsing, comparison A (bump, append-only),
//! comparison B (same version, exact) and retired tables
//! (`schema-and-migrations.md` §6).

use serde_json::{Map, Value};
use sync_core::{CompiledSchema, CompiledTable, Error, ErrorCode, LayoutColumn, Result};

/// Per-table column layouts in stored (or compiled) table order, as read from
/// `sync_schema_meta.layouts` or computed from a [`CompiledSchema`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredLayouts {
    tables: Vec<(String, Vec<LayoutColumn>)>,
}

impl StoredLayouts {
    /// No layout information (a fresh database, or stored `{}`).
    pub fn new() -> Self {
        Self::default()
    }

    /// The layouts of every table of a compiled schema, in declaration order.
    pub fn from_schema(schema: &CompiledSchema) -> Self {
        Self {
            tables: schema
                .tables
                .iter()
                .map(|t| (t.name.clone(), t.layout()))
                .collect(),
        }
    }

    /// Whether no table has a layout.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Number of tables.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// The layout of a table (exact name).
    pub fn get(&self, table: &str) -> Option<&[LayoutColumn]> {
        self.tables
            .iter()
            .find(|(name, _)| name == table)
            .map(|(_, layout)| layout.as_slice())
    }

    /// Tables and layouts in stored order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[LayoutColumn])> + '_ {
        self.tables
            .iter()
            .map(|(name, layout)| (name.as_str(), layout.as_slice()))
    }

    /// Sets a table's layout; an existing table keeps its position.
    pub fn insert(&mut self, table: impl Into<String>, layout: Vec<LayoutColumn>) {
        let table = table.into();
        match self.tables.iter_mut().find(|(name, _)| *name == table) {
            Some(entry) => entry.1 = layout,
            None => self.tables.push((table, layout)),
        }
    }

    /// The canonical JSON text (§6.1): an object keyed by table name in
    /// order, each value an array of `{"name","type","nullable"}` objects with
    /// members in exactly that order, no whitespace, standard JSON escaping.
    pub fn to_json_text(&self) -> String {
        let mut out = String::from("{");
        for (i, (table, layout)) in self.tables.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&json_string(table));
            out.push_str(":[");
            for (j, column) in layout.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                out.push_str(&column_json_text(column));
            }
            out.push(']');
        }
        out.push('}');
        out
    }
}

fn json_string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// `{"name":…,"type":…,"nullable":…}` with members in that order.
fn column_json_text(column: &LayoutColumn) -> String {
    format!(
        "{{\"name\":{},\"type\":{},\"nullable\":{}}}",
        json_string(&column.name),
        json_string(&column.column_type),
        column.nullable
    )
}

/// The layouts JSON of a compiled schema, stored verbatim in
/// `sync_schema_meta.layouts` (§6.1).
pub fn layouts_json(schema: &CompiledSchema) -> String {
    StoredLayouts::from_schema(schema).to_json_text()
}

fn corrupt(reason: &str) -> Error {
    Error::new(ErrorCode::LayoutsCorrupt).detail("reason", reason)
}

/// Parses stored layouts strictly (§6.2).
///
/// `None`, the empty string and `{}` are an empty map. Failures are
/// `sync.storage.layouts_corrupt` with `details.reason` = `not_json`,
/// `not_object`, `not_array` or `bad_column` (plus `table`, and `position`
/// for a bad column). Extra members in a column object are ignored; unknown
/// type strings are kept verbatim. A dialect whose driver returns the column
/// as something other than text treats it as `not_json` itself.
pub fn parse_layouts(text: Option<&str>) -> Result<StoredLayouts> {
    let text = match text {
        None | Some("") => return Ok(StoredLayouts::new()),
        Some(text) => text,
    };
    let value: Value = serde_json::from_str(text).map_err(|_| corrupt("not_json"))?;
    let Value::Object(tables) = value else {
        return Err(corrupt("not_object"));
    };
    let mut layouts = StoredLayouts::new();
    for (table, columns) in tables {
        let Value::Array(columns) = columns else {
            return Err(corrupt("not_array").detail("table", &table));
        };
        let layout = columns
            .iter()
            .enumerate()
            .map(|(i, column)| {
                column.as_object().and_then(parse_column).ok_or_else(|| {
                    corrupt("bad_column")
                        .detail("table", &table)
                        .detail("position", i)
                })
            })
            .collect::<Result<Vec<_>>>()?;
        layouts.insert(table, layout);
    }
    Ok(layouts)
}

fn parse_column(column: &Map<String, Value>) -> Option<LayoutColumn> {
    Some(LayoutColumn {
        name: column.get("name")?.as_str()?.to_owned(),
        column_type: column.get("type")?.as_str()?.to_owned(),
        nullable: column.get("nullable")?.as_bool()?,
    })
}

fn refused(table: &str, reason: &str, column: &str) -> Error {
    Error::new(ErrorCode::MigrationRefused)
        .detail("table", table)
        .detail("reason", reason)
        .detail("column", column)
}

fn same_column(a: &LayoutColumn, b: &LayoutColumn) -> bool {
    a.name == b.name && a.column_type == b.column_type && a.nullable == b.nullable
}

/// Comparison A (§6.3), for a version bump: the configured columns must be
/// the stored layout `old` followed only by nullable columns.
///
/// Returns `appended` (new columns exist). Failures are
/// `sync.storage.migration_refused` with `reason` `column_removed`,
/// `column_changed` (with `expected` = stored and `actual` = configured
/// column as JSON objects) or `column_not_nullable`.
pub fn compare_for_bump(table: &CompiledTable, old: &[LayoutColumn]) -> Result<bool> {
    let new = table.layout();
    if old.len() > new.len() {
        let removed = old
            .iter()
            .find(|o| !new.iter().any(|n| n.name == o.name))
            .or_else(|| old.get(new.len()))
            .map_or("", |c| c.name.as_str());
        return Err(refused(&table.name, "column_removed", removed));
    }
    if let Some((o, n)) = old.iter().zip(&new).find(|(o, n)| !same_column(o, n)) {
        return Err(refused(&table.name, "column_changed", &o.name)
            .detail("expected", column_json_text(o))
            .detail("actual", column_json_text(n)));
    }
    if let Some(c) = new[old.len()..].iter().find(|c| !c.nullable) {
        return Err(refused(&table.name, "column_not_nullable", &c.name));
    }
    Ok(new.len() > old.len())
}

/// Comparison B (§6.4), at the same version: stored and configured layouts
/// must be identical.
///
/// Fails with `sync.storage.stored_layout_mismatch`: `table` and `column` (the
/// configured name at the first mismatching position, else the stored name,
/// else empty) for the first configured table that differs; otherwise `table`
/// only for the first stored table absent from the configuration.
pub fn compare_same_version(schema: &CompiledSchema, stored: &StoredLayouts) -> Result<()> {
    for table in &schema.tables {
        let new = table.layout();
        let old = stored.get(&table.name).unwrap_or(&[]);
        let mismatch = (0..new.len().max(old.len())).find(|&i| match (new.get(i), old.get(i)) {
            (Some(n), Some(o)) => !same_column(n, o),
            _ => true,
        });
        if let Some(i) = mismatch {
            let column = new
                .get(i)
                .or_else(|| old.get(i))
                .map_or("", |c| c.name.as_str());
            return Err(Error::new(ErrorCode::StoredLayoutMismatch)
                .detail("table", &table.name)
                .detail("column", column));
        }
        if stored.get(&table.name).is_none() {
            // A configured table absent from the stored layouts mismatches at
            // column 0 (reached only by a table without columns).
            return Err(Error::new(ErrorCode::StoredLayoutMismatch)
                .detail("table", &table.name)
                .detail("column", ""));
        }
    }
    if let Some((extra, _)) = stored.iter().find(|(name, _)| schema.table(name).is_none()) {
        return Err(Error::new(ErrorCode::StoredLayoutMismatch).detail("table", extra));
    }
    Ok(())
}

/// Stored table names absent from the configuration, sorted byte-wise (§6.5).
pub fn retired_table_names(schema: &CompiledSchema, stored: &StoredLayouts) -> Vec<String> {
    let mut names: Vec<String> = stored
        .iter()
        .filter(|(name, _)| schema.table(name).is_none())
        .map(|(name, _)| name.to_owned())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, column_type: &str, nullable: bool) -> LayoutColumn {
        LayoutColumn {
            name: name.into(),
            column_type: column_type.into(),
            nullable,
        }
    }

    #[test]
    fn empty_texts_are_empty_layouts() {
        for text in [None, Some(""), Some("{}")] {
            assert!(parse_layouts(text).unwrap().is_empty());
        }
    }

    #[test]
    fn layouts_count_their_tables_and_keep_insertion_order() {
        let mut layouts = StoredLayouts::new();
        assert!(layouts.is_empty());
        assert_eq!(layouts.len(), 0);
        layouts.insert("b", vec![col("x", "string", false)]);
        layouts.insert("a", Vec::new());
        layouts.insert("b", vec![col("y", "integer", true)]);
        assert!(!layouts.is_empty());
        assert_eq!(layouts.len(), 2);
        let order: Vec<&str> = layouts.iter().map(|(name, _)| name).collect();
        assert_eq!(order, ["b", "a"]);
        assert_eq!(layouts.get("b"), Some(&[col("y", "integer", true)][..]));
        let parsed = parse_layouts(Some(&layouts.to_json_text())).unwrap();
        assert_eq!((parsed.len(), parsed), (2, layouts));
    }

    #[test]
    fn corrupt_reasons() {
        let reason = |text: &str| {
            let error = parse_layouts(Some(text)).unwrap_err();
            assert_eq!(error.code(), ErrorCode::LayoutsCorrupt);
            error.get_detail("reason").unwrap().to_owned()
        };
        assert_eq!(reason("not json"), "not_json");
        assert_eq!(reason(" "), "not_json");
        assert_eq!(reason("[]"), "not_object");
        assert_eq!(reason("null"), "not_object");
        assert_eq!(reason(r#"{"t":{}}"#), "not_array");
        assert_eq!(reason(r#"{"t":[1]}"#), "bad_column");
        assert_eq!(
            reason(r#"{"t":[{"name":"a","type":"string"}]}"#),
            "bad_column"
        );
        assert_eq!(
            reason(r#"{"t":[{"name":"a","type":1,"nullable":true}]}"#),
            "bad_column"
        );
        assert_eq!(
            reason(r#"{"t":[{"name":"a","type":"string","nullable":"no"}]}"#),
            "bad_column"
        );
    }

    #[test]
    fn extra_members_ignored_and_unknown_types_kept() {
        let layouts = parse_layouts(Some(
            r#"{"t":[{"nullable":true,"type":"decimal","name":"a","x":1}]}"#,
        ))
        .unwrap();
        assert_eq!(layouts.get("t").unwrap(), &[col("a", "decimal", true)]);
        assert_eq!(
            layouts.to_json_text(),
            r#"{"t":[{"name":"a","type":"decimal","nullable":true}]}"#
        );
    }

    #[test]
    fn escaping_is_standard_json() {
        let mut layouts = StoredLayouts::new();
        layouts.insert("q\"t\\é", vec![col("a\nb\u{1}", "string", false)]);
        let text = layouts.to_json_text();
        assert_eq!(
            text,
            "{\"q\\\"t\\\\é\":[{\"name\":\"a\\nb\\u0001\",\"type\":\"string\",\"nullable\":false}]}"
        );
        assert_eq!(parse_layouts(Some(&text)).unwrap(), layouts);
    }
}
