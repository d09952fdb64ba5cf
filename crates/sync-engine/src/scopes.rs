//! Scope resolution, effective scopes and write authorization
//! (`engine.md` §3.2, §4.3).

use sync_core::{CompiledTable, RowValue, ScopeFilter, StoredScopes};

use crate::hooks::scope_resolver::ScopeMap;

/// The value that allows any value of a variable.
pub const ANY: &str = "*";

/// The resolver's answer for one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The resolver failed: revoke every section, forbid every write.
    Failed,
    /// The allowed scopes.
    Allowed(ScopeMap),
}

/// The effective scopes of a subscription to `table` (`engine.md` §3.2
/// items 4 and 4a); `None` = revoked.
///
/// Item 4: for each requested key in order, the requested values allowed
/// (all of them under `"*"`); a key the resolver did not allow, an empty
/// intersection or an empty request revokes. Item 4a: every scope variable
/// of the table the request leaves out is filtered by what the actor may
/// write — absent from `allowed` revokes, `"*"` adds no filter, otherwise
/// the map gains `variable → allowed[variable]`. A read therefore never
/// returns a row the same actor could not write.
///
/// Every read path (bootstrap pages, commit windows, realtime deltas,
/// segment digests and downloads) filters by the map this returns, and
/// `SUB_START` echoes it whole.
pub fn effective_scopes(
    table: &CompiledTable,
    requested: &ScopeFilter,
    resolved: &Resolved,
) -> Option<ScopeFilter> {
    let Resolved::Allowed(allowed) = resolved else {
        return None;
    };
    if requested.is_empty() {
        return None;
    }
    let mut effective = ScopeFilter::new();
    for (key, values) in requested {
        let allowed_values = allowed.get(key)?;
        let kept: Vec<String> = if allows_any(allowed_values) {
            values.clone()
        } else {
            values
                .iter()
                .filter(|v| allowed_values.contains(v))
                .cloned()
                .collect()
        };
        if kept.is_empty() {
            return None;
        }
        effective.insert(key.clone(), kept);
    }
    for pattern in &table.scope_patterns {
        let variable = &pattern.variable;
        if effective.contains_key(variable) {
            continue;
        }
        let allowed_values = allowed.get(variable)?;
        if allowed_values.is_empty() {
            return None;
        }
        if !allows_any(allowed_values) {
            effective.insert(variable.clone(), allowed_values.clone());
        }
    }
    Some(effective)
}

fn allows_any(values: &[String]) -> bool {
    values.iter().any(|v| v == ANY)
}

/// Write authorization of a row with stored scopes `scopes` (`engine.md`
/// §3.2 item 5): every scope variable of the table is present, non-empty
/// and allowed.
pub fn write_authorized(table: &CompiledTable, scopes: &StoredScopes, resolved: &Resolved) -> bool {
    let Resolved::Allowed(allowed) = resolved else {
        return false;
    };
    table.scope_patterns.iter().all(|pattern| {
        let Some(value) = scopes.get(&pattern.variable).filter(|v| !v.is_empty()) else {
            return false;
        };
        allowed
            .get(&pattern.variable)
            .is_some_and(|list| list.iter().any(|a| a == ANY || a == value))
    })
}

/// Whether every declared scope variable has a non-empty stored value.
pub fn has_all_scopes(table: &CompiledTable, scopes: &StoredScopes) -> bool {
    table
        .scope_patterns
        .iter()
        .all(|p| scopes.get(&p.variable).is_some_and(|v| !v.is_empty()))
}

/// The key rendering of a value (`engine.md` §4.3); `None` = absent.
pub fn render(value: &RowValue) -> Option<String> {
    value.render_key()
}

/// Stored scopes derived from row values; `None` when a scope value is absent.
pub fn extract_scopes(table: &CompiledTable, values: &[RowValue]) -> Option<StoredScopes> {
    table
        .scope_patterns
        .iter()
        .map(|p| {
            let value = values.get(p.column_index).and_then(render)?;
            Some((p.variable.clone(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &[&str])]) -> ScopeFilter {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn effective_is_requested_intersect_allowed() {
        let t = project_table();
        let allowed = Resolved::Allowed(map(&[("project_id", &["p1"])]));
        let requested = map(&[("project_id", &["p1", "p2"])]);
        assert_eq!(
            effective_scopes(&t, &requested, &allowed),
            Some(map(&[("project_id", &["p1"])]))
        );
        let any = Resolved::Allowed(map(&[("project_id", &["*"])]));
        assert_eq!(
            effective_scopes(&t, &requested, &any),
            Some(requested.clone())
        );
        assert_eq!(
            effective_scopes(&t, &map(&[("project_id", &["p3"])]), &allowed),
            None
        );
        assert_eq!(
            effective_scopes(&t, &map(&[("org_id", &["o"])]), &allowed),
            None
        );
        assert_eq!(effective_scopes(&t, &ScopeFilter::new(), &allowed), None);
        assert_eq!(effective_scopes(&t, &requested, &Resolved::Failed), None);
    }

    #[test]
    fn unrequested_variables_are_filtered_by_what_may_be_written() {
        let t = table();
        let requested = map(&[("project_id", &["p1"])]);
        let allowed = Resolved::Allowed(map(&[("org_id", &["o2", "o1"]), ("project_id", &["p1"])]));
        assert_eq!(
            effective_scopes(&t, &requested, &allowed),
            Some(map(&[("org_id", &["o2", "o1"]), ("project_id", &["p1"])]))
        );
        let any_org = Resolved::Allowed(map(&[("org_id", &["*"]), ("project_id", &["p1"])]));
        assert_eq!(
            effective_scopes(&t, &requested, &any_org),
            Some(requested.clone())
        );
        let no_org = Resolved::Allowed(map(&[("project_id", &["p1"])]));
        assert_eq!(effective_scopes(&t, &requested, &no_org), None);
        let empty_org = Resolved::Allowed(map(&[("org_id", &[]), ("project_id", &["p1"])]));
        assert_eq!(effective_scopes(&t, &requested, &empty_org), None);
    }

    fn project_table() -> CompiledTable {
        let mut t = table();
        t.scope_patterns.remove(0);
        t.declared_variables.remove(0);
        t
    }

    fn table() -> CompiledTable {
        let pattern = |variable: &str, column: &str, index: usize| sync_core::ScopePattern {
            variable: variable.into(),
            prefix: variable.trim_end_matches("_id").into(),
            column: column.into(),
            column_index: index,
        };
        let column = |name: &str| sync_core::CompiledColumn {
            name: name.into(),
            column_type: sync_core::ColumnType::String,
            nullable: false,
            crdt_type: None,
            encrypted: false,
            declared_type: None,
        };
        CompiledTable {
            name: "docs".into(),
            columns: vec![column("id"), column("org_id"), column("project_id")],
            primary_key_index: 0,
            scope_patterns: vec![
                pattern("org_id", "org_id", 1),
                pattern("project_id", "project_id", 2),
            ],
            indexes: vec![],
            materialize: true,
            column_index: [
                ("id".into(), 0),
                ("org_id".into(), 1),
                ("project_id".into(), 2),
            ]
            .into(),
            declared_variables: vec!["org_id".into(), "project_id".into()],
            blob_ref_column_indices: vec![],
            crdt_columns: vec![],
            encrypted_column_indices: vec![],
        }
    }

    #[test]
    fn writes_need_every_variable_allowed() {
        let t = table();
        let scopes: StoredScopes = [
            ("org_id".to_string(), "o1".to_string()),
            ("project_id".to_string(), "p1".to_string()),
        ]
        .into();
        let both = Resolved::Allowed(map(&[("org_id", &["o1"]), ("project_id", &["*"])]));
        assert!(write_authorized(&t, &scopes, &both));
        let one = Resolved::Allowed(map(&[("project_id", &["p1"])]));
        assert!(!write_authorized(&t, &scopes, &one));
        let partial: StoredScopes = [("org_id".to_string(), "o1".to_string())].into();
        assert!(!write_authorized(&t, &partial, &both));
        assert!(!write_authorized(&t, &scopes, &Resolved::Failed));
    }

    #[test]
    fn scopes_are_extracted_from_rendered_values() {
        let t = table();
        let values = vec![
            RowValue::String("d1".into()),
            RowValue::String("o1".into()),
            RowValue::Integer(7),
        ];
        let scopes = extract_scopes(&t, &values).unwrap();
        assert_eq!(scopes["project_id"], "7");
        let missing = vec![
            RowValue::String("d1".into()),
            RowValue::String(String::new()),
            RowValue::Integer(7),
        ];
        assert_eq!(extract_scopes(&t, &missing), None);
    }
}
