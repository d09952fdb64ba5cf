//! `sync-schema`: schema input parsing and compilation, layouts, physical
//! expectations, migration planning and registered-query preparation for the
//! syncstore storage layer.
//!
//! This crate is **pure**: it turns schema JSON into a
//! [`sync_core::CompiledSchema`], compares column layouts, and emits SQL text
//! (DDL, rewrite statements, prepared registered queries) as plain data that
//! can be printed, serialized and tested. It is **not** a database driver: it
//! never opens a connection or executes a statement. The dialect crates
//! (`sync-sqlite`, `sync-postgres`) introspect their database into
//! [`ObservedTables`], ask [`plan_migration`] / [`plan_legacy_upgrade`] /
//! [`check_physical`] what to do, and execute the result inside their own
//! transactions.
//!
//! Pipeline (`schema-and-migrations.md` §1):
//!
//! ```text
//! schema JSON ──parse_schema_json──▶ SchemaInput ──compile──▶ CompiledSchema ──plan_migration──▶ MigrationPlan
//! ```
#![deny(rust_2018_idioms)]
#![warn(missing_docs, missing_debug_implementations, clippy::use_self)]

mod compile;
mod ddl;
mod dialect;
mod duplicates;
mod identifiers;
mod index_name;
mod input;
mod layouts;
mod legacy;
mod observed;
mod physical;
mod plan;
mod query;
mod ready;
mod registry;
mod rewrite;
mod statement;

pub use compile::{compile, MAX_COLUMNS};
pub use ddl::{
    add_column_sql, alter_key_collation_sql, create_index_sql, create_index_statements,
    create_table_sql, drop_column_sql, drop_index_sql, drop_table_sql, quote_ident,
    row_ordered_index_columns, standard_create_index_sql, standard_create_table_sql,
    standard_index_columns,
};
pub use dialect::{
    Dialect, InternalColumn, InternalRole, SqlDialect, COLUMN_VERSIONS_COLUMN, INTERNAL_COLUMNS,
};
pub use identifiers::{
    identifier_failure, is_reserved_name, validate_identifier, IdentifierFailure,
    MAX_IDENTIFIER_BYTES,
};
pub use index_name::{fnv1a64, physical_index_name, PHYSICAL_INDEX_PREFIX};
pub use input::{
    parse_schema_json, parse_schema_value, ColumnInput, IndexInput, SchemaInput, ScopeInput,
    TableInput,
};
pub use layouts::{
    compare_for_bump, compare_same_version, layouts_json, parse_layouts, retired_table_names,
    StoredLayouts,
};
pub use legacy::{plan_legacy_upgrade, LegacyUpgradePlan, INTERNAL_KEY_COLUMNS};
pub use observed::{
    ObserveTables, ObservedColumn, ObservedConstraint, ObservedIndex, ObservedTable, ObservedTables,
};
pub use physical::check_physical;
pub use plan::{plan_migration, MigrationPlan, RetiredTable};
pub use query::{
    prepare_query, prepare_request, Construct, PreparedQuery, QueryRules, PORTABLE_QUERY_RULES,
};
pub use ready::{ensure_ready, ensure_ready_with};
pub use registry::{
    check_registry, find_dialect, find_dialect_for_url, url_scheme, DialectEntry, RegistryError,
};
pub use rewrite::{rewrite_plan, RewritePlan, REWRITE_PAGE_SIZE};
pub use statement::Statement;
