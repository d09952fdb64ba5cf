//! Registered-query preparation (`storage-contract.md` §4.13): the test
//! vector, every failure reason and the Postgres `$n` conversion.

mod support;

use serde_json::json;
use support::*;
use sync_core::{ColumnType, CompiledSchema, ErrorCode, SqlValue};
use sync_schema::{
    prepare_query, prepare_request, Construct, Dialect, InternalRole, PreparedQuery, QueryRules,
    SqlDialect, PORTABLE_QUERY_RULES,
};

/// `tasks(id, project_id, title)` of the test vector, a second materialized
/// table `docs(id, org_id)` and a non-materialized `vault`.
fn schema() -> CompiledSchema {
    compiled(&schema_text(vec![
        json!({
            "name": "tasks",
            "primaryKey": "id",
            "columns": [
                {"name": "id", "type": "string"},
                {"name": "project_id", "type": "string"},
                {"name": "title", "type": "string"}
            ],
            "scopes": ["project:{project_id}"]
        }),
        json!({
            "name": "docs",
            "primaryKey": "id",
            "columns": [{"name": "id", "type": "string"}, {"name": "org_id", "type": "string"}],
            "scopes": ["org:{org_id}"]
        }),
        json!({
            "name": "vault",
            "primaryKey": "id",
            "columns": [
                {"name": "id", "type": "string"},
                {"name": "org_id", "type": "string"},
                {"name": "blob", "type": "bytes", "encrypted": true}
            ],
            "scopes": ["org:{org_id}"]
        }),
    ]))
}

const VECTOR_SQL: &str = "SELECT id, '?; FROM tasks' AS lit FROM tasks /* ? FROM tasks */ WHERE project_id = ?1 -- ? FROM tasks\n  OR title = ?1";

const TASKS_SUBQUERY: &str =
    "(SELECT \"id\", \"project_id\", \"title\" FROM \"tasks\" WHERE \"_sync_partition\" = ?)";

fn text(s: &str) -> SqlValue {
    SqlValue::Text(s.to_owned())
}

fn prepare(
    dialect: Dialect,
    sql: &str,
    params: &[SqlValue],
    tables: &[&str],
) -> sync_core::Result<PreparedQuery> {
    let tables: Vec<String> = tables.iter().map(|t| (*t).to_owned()).collect();
    prepare_query(&schema(), dialect, "part-1", sql, params, &tables)
}

fn ok(sql: &str, params: &[SqlValue], tables: &[&str]) -> PreparedQuery {
    prepare(sync_sqlite::DIALECT, sql, params, tables).unwrap()
}

fn reason(sql: &str, params: &[SqlValue], tables: &[&str]) -> String {
    let error = prepare(sync_sqlite::DIALECT, sql, params, tables).unwrap_err();
    assert_eq!(error.code(), ErrorCode::QueryRejected, "{error:?}");
    assert_eq!(
        error.message(),
        "registered query does not match its metadata",
        "fixed message, no data"
    );
    error.get_detail("reason").unwrap().to_owned()
}

#[test]
fn test_vector_prepares_exactly() {
    let prepared = ok(VECTOR_SQL, &[text("p1")], &["tasks"]);
    assert_eq!(
        prepared.sql,
        "SELECT id, '?; FROM tasks' AS lit FROM (SELECT \"id\", \"project_id\", \"title\" FROM \"tasks\" WHERE \"_sync_partition\" = ?) AS \"tasks\" /* ? FROM tasks */ WHERE project_id = ? -- ? FROM tasks\n  OR title = ?"
    );
    assert_eq!(prepared.params, [text("part-1"), text("p1"), text("p1")]);
    assert_eq!(prepared.tables, ["tasks"]);
}

#[test]
fn postgres_numbers_placeholders_and_leaves_protected_question_marks() {
    let prepared = prepare(
        sync_postgres::DIALECT,
        VECTOR_SQL,
        &[text("p1")],
        &["tasks"],
    )
    .unwrap();
    assert_eq!(
        prepared.sql,
        "SELECT id, '?; FROM tasks' AS lit FROM (SELECT \"id\", \"project_id\", \"title\" FROM \"tasks\" WHERE \"_sync_partition\" = $1) AS \"tasks\" /* ? FROM tasks */ WHERE project_id = $2 -- ? FROM tasks\n  OR title = $3"
    );
    assert_eq!(prepared.params, [text("part-1"), text("p1"), text("p1")]);
    let prepared = prepare(
        sync_postgres::DIALECT,
        "SELECT \"a?b\", `c?`, [d?] FROM tasks WHERE title = ? AND id = ?",
        &[text("x"), text("y")],
        &["tasks"],
    )
    .unwrap();
    assert_eq!(
        prepared.sql,
        "SELECT \"a?b\", `c?`, [d?] FROM (SELECT \"id\", \"project_id\", \"title\" FROM \"tasks\" WHERE \"_sync_partition\" = $1) AS \"tasks\" WHERE title = $2 AND id = $3"
    );
}

#[test]
fn prepare_request_uses_the_request_fields() {
    let request = sync_core::AuthoritativeQueryRequest {
        sql: VECTOR_SQL.to_owned(),
        params: vec![text("p1")],
        tables: vec!["tasks".to_owned()],
    };
    let prepared = prepare_request(&schema(), sync_sqlite::DIALECT, "part-1", &request).unwrap();
    assert_eq!(prepared, ok(VECTOR_SQL, &[text("p1")], &["tasks"]));
}

#[test]
fn aliases_are_kept_as_written() {
    let p = ok(
        "SELECT t.id FROM tasks t WHERE t.title = ?",
        &[text("a")],
        &["tasks"],
    );
    assert_eq!(
        p.sql,
        format!("SELECT t.id FROM {TASKS_SUBQUERY} AS t WHERE t.title = ?")
    );
    let p = ok("SELECT T.id FROM tasks AS T", &[], &["tasks"]);
    assert_eq!(p.sql, format!("SELECT T.id FROM {TASKS_SUBQUERY} AS T"));
    let p = ok(
        "SELECT x.id FROM \"tasks\" /* c */ AS \"x\" LEFT JOIN docs ON docs.id = x.id",
        &[],
        &["tasks", "docs"],
    );
    assert_eq!(
        p.sql,
        format!("SELECT x.id FROM {TASKS_SUBQUERY} /* c */ AS \"x\" LEFT JOIN (SELECT \"id\", \"org_id\" FROM \"docs\" WHERE \"_sync_partition\" = ?) AS \"docs\" ON docs.id = x.id")
    );
    assert_eq!(p.params, [text("part-1"), text("part-1")]);
    assert_eq!(p.tables, ["tasks", "docs"]);
    // A non-alias keyword is never taken as an alias.
    let p = ok("SELECT id FROM tasks ORDER BY id LIMIT 3", &[], &["tasks"]);
    assert_eq!(
        p.sql,
        format!("SELECT id FROM {TASKS_SUBQUERY} AS \"tasks\" ORDER BY id LIMIT 3")
    );
}

#[test]
fn table_names_resolve_case_insensitively_and_through_parentheses() {
    let p = ok("SELECT id FROM TASKS", &[], &["tasks"]);
    assert_eq!(
        p.sql,
        format!("SELECT id FROM {TASKS_SUBQUERY} AS \"tasks\"")
    );
    assert_eq!(p.tables, ["tasks"]);
    let p = ok("SELECT id FROM ( Tasks ) x", &[], &["TASKS"]);
    assert_eq!(
        p.sql,
        format!("SELECT id FROM ( {TASKS_SUBQUERY} AS \"tasks\" ) x")
    );
    let p = ok("SELECT id FROM (SELECT id FROM tasks) sub", &[], &["tasks"]);
    assert_eq!(
        p.sql,
        format!("SELECT id FROM (SELECT id FROM {TASKS_SUBQUERY} AS \"tasks\") sub")
    );
}

#[test]
fn binds_number_like_sqlite() {
    // ?2 then anonymous continues after the highest number used.
    let p = ok(
        "SELECT id FROM tasks WHERE title = ?2 OR title = ? OR id = ?1",
        &[text("a"), text("b"), text("c")],
        &["tasks"],
    );
    assert_eq!(p.params, [text("part-1"), text("b"), text("c"), text("a")]);
    let p = ok(
        "SELECT id FROM tasks WHERE id = ? OR id = ? OR title = ?1",
        &[SqlValue::Integer(1), SqlValue::Null],
        &["tasks"],
    );
    assert_eq!(
        p.params,
        [
            text("part-1"),
            SqlValue::Integer(1),
            SqlValue::Null,
            SqlValue::Integer(1)
        ]
    );
}

#[test]
fn unterminated_literal_comment_or_identifier() {
    for sql in [
        "SELECT 'abc FROM tasks",
        "SELECT 'it''s FROM tasks",
        "SELECT id FROM tasks /* open",
        "SELECT \"id FROM tasks",
        "SELECT `id FROM tasks",
        "SELECT [id FROM tasks",
    ] {
        assert_eq!(
            reason(sql, &[], &["tasks"]),
            "unterminated_literal",
            "{sql}"
        );
    }
    // A line comment may end the input.
    ok("SELECT id FROM tasks -- trailing", &[], &["tasks"]);
    ok("SELECT 'it''s' FROM tasks", &[], &["tasks"]);
}

#[test]
fn multiple_statements() {
    for sql in [
        "SELECT id FROM tasks; SELECT id FROM tasks",
        "SELECT id FROM tasks;",
        "SELECT 1; DROP TABLE tasks",
    ] {
        assert_eq!(reason(sql, &[], &["tasks"]), "multiple_statements", "{sql}");
    }
    // `;` inside protected spans is fine.
    ok("SELECT ';', \";\" FROM tasks /* ; */ -- ;", &[], &["tasks"]);
}

#[test]
fn reserved_references() {
    for sql in [
        "SELECT _sync_payload FROM tasks",
        "SELECT id FROM tasks JOIN sync_commits c ON 1",
        "SELECT id FROM \"SYNC_changes\"",
        "SELECT [_sync_scopes] FROM tasks",
        "SELECT `sync_x` FROM tasks",
        "SELECT t._Synchronize FROM tasks t",
    ] {
        assert_eq!(reason(sql, &[], &["tasks"]), "reserved_reference", "{sql}");
    }
    // Inside literals and comments nothing is reserved.
    ok(
        "SELECT 'sync_x' FROM tasks /* _sync */ -- sync_",
        &[],
        &["tasks"],
    );
}

#[test]
fn unsupported_table_references() {
    for sql in [
        "SELECT t.id FROM tasks t, docs d",
        "SELECT id FROM main.tasks",
        "SELECT id FROM public.tasks",
        "SELECT id FROM [tasks]",
        "SELECT id FROM `tasks`",
        "SELECT id FROM tasks.other",
        "SELECT id FROM tasks WHERE id IN (SELECT id FROM x, tasks)",
        "SELECT tasks FROM docs",
    ] {
        assert_eq!(
            reason(sql, &[], &["tasks", "docs"]),
            "unsupported_table_reference",
            "{sql}"
        );
    }
    // Column qualifiers are fine.
    ok(
        "SELECT tasks.id, \"tasks\".title FROM tasks",
        &[],
        &["tasks"],
    );
}

#[test]
fn table_metadata_mismatch() {
    assert_eq!(
        reason("SELECT id FROM tasks", &[], &[]),
        "table_metadata_mismatch"
    );
    assert_eq!(
        reason("SELECT id FROM tasks", &[], &["tasks", "docs"]),
        "table_metadata_mismatch"
    );
    assert_eq!(
        reason("SELECT id FROM tasks", &[], &["nope"]),
        "table_metadata_mismatch"
    );
    let error = prepare(
        sync_sqlite::DIALECT,
        "SELECT id FROM tasks JOIN docs",
        &[],
        &["tasks"],
    )
    .unwrap_err();
    assert_eq!(error.get_detail("table"), Some("docs"));
}

#[test]
fn non_materialized_table() {
    assert_eq!(
        reason("SELECT id FROM vault", &[], &["vault"]),
        "non_materialized_table"
    );
}

#[test]
fn bind_mismatch() {
    let sql = "SELECT id FROM tasks WHERE title = ?2";
    assert_eq!(reason(sql, &[text("a")], &["tasks"]), "bind_mismatch");
    assert_eq!(
        reason(sql, &[text("a"), text("b")], &["tasks"]),
        "bind_mismatch",
        "param 1 unused"
    );
    // The error names the bind an author must fix: the number out of range,
    // else the first param never referenced (1-based, as written in SQL).
    let bind = |sql: &str, params: &[SqlValue]| {
        let error = prepare(sync_sqlite::DIALECT, sql, params, &["tasks"]).unwrap_err();
        error.get_detail("bind").map(str::to_owned)
    };
    assert_eq!(bind(sql, &[text("a")]).as_deref(), Some("2"));
    assert_eq!(bind(sql, &[text("a"), text("b")]).as_deref(), Some("1"));
    assert_eq!(
        bind(
            "SELECT id FROM tasks WHERE title = ?1",
            &[text("a"), text("b"), text("c")]
        )
        .as_deref(),
        Some("2")
    );
    assert_eq!(
        reason(
            "SELECT id FROM tasks WHERE title = ?0",
            &[text("a")],
            &["tasks"]
        ),
        "bind_mismatch"
    );
    assert_eq!(
        reason("SELECT id FROM tasks WHERE title = ?", &[], &["tasks"]),
        "bind_mismatch"
    );
    assert_eq!(
        reason("SELECT id FROM tasks", &[text("a")], &["tasks"]),
        "bind_mismatch"
    );
    assert_eq!(
        reason(
            "SELECT id FROM tasks WHERE title = ?99999999999999999999999",
            &[text("a")],
            &["tasks"]
        ),
        "bind_mismatch"
    );
}

#[test]
fn failure_reasons_take_precedence_in_rule_order() {
    // Unterminated beats everything.
    assert_eq!(reason("SELECT sync_x; '", &[], &[]), "unterminated_literal");
    // Multiple statements beat reserved names.
    assert_eq!(
        reason("SELECT sync_x; SELECT 1", &[], &[]),
        "multiple_statements"
    );
    // Reserved names beat table checks.
    assert_eq!(
        reason("SELECT _sync_row_id FROM main.tasks", &[], &[]),
        "reserved_reference"
    );
    // Unsupported references beat metadata.
    assert_eq!(
        reason("SELECT id FROM main.tasks", &[], &["docs"]),
        "unsupported_table_reference"
    );
    // Metadata beats materialization and binds.
    assert_eq!(
        reason("SELECT id FROM vault WHERE id = ?3", &[], &[]),
        "table_metadata_mismatch"
    );
    // Materialization beats binds.
    assert_eq!(
        reason("SELECT id FROM vault WHERE id = ?3", &[], &["vault"]),
        "non_materialized_table"
    );
}

/// Regression (reliability work): Postgres reads these lexical forms
/// differently from the SQLite-family mask, so that `sync_commits` of the
/// examples ran as SQL (or was named) on Postgres and leaked the commit log.
#[test]
fn postgres_lexical_forms_that_hide_sql_are_refused() {
    for (sql, construct) in [
        (
            "SELECT $$'$$ AS a, c.client_id FROM sync_commits c --'",
            "dollar_quote",
        ),
        ("SELECT $tag$x$tag$ FROM tasks", "dollar_quote"),
        ("SELECT id FROM tasks WHERE id = $1", "dollar_quote"),
        (
            "SELECT E'\\'' AS a, c.client_id FROM sync_commits c --'",
            "escape_string",
        ),
        ("SELECT e'x' FROM tasks", "escape_string"),
        ("SELECT * FROM U&\"\\0073ync_commits\"", "unicode_escape"),
        ("SELECT U&'\\0041' FROM tasks", "unicode_escape"),
        (
            "SELECT 1 /* /* */ ' */ , c.client_id FROM sync_commits c --'",
            "nested_comment",
        ),
    ] {
        for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
            let error = prepare(dialect, sql, &[], &["tasks"]).unwrap_err();
            assert_eq!(
                error.get_detail("reason"),
                Some("unsupported_syntax"),
                "{sql}"
            );
            assert_eq!(error.get_detail("construct"), Some(construct), "{sql}");
        }
    }
    // The forms that read alike stay accepted.
    ok(
        "SELECT 'it''s', \"a$b\", x'00' FROM tasks /* E'x' */ -- $$",
        &[],
        &["tasks"],
    );
}

/// Regression (reliability work): the transaction variant runs on a
/// writable connection; statements that write or are not queries were
/// executed there (`CREATE TABLE … AS SELECT`, `SELECT … INTO`).
#[test]
fn only_one_read_statement_is_prepared() {
    for sql in [
        "CREATE TABLE stolen AS SELECT * FROM tasks",
        "DELETE FROM tasks",
        "UPDATE tasks SET title = 'x'",
        "INSERT INTO docs SELECT id, id FROM tasks",
        "SELECT * INTO stolen FROM tasks",
        "WITH gone AS (DELETE FROM tasks RETURNING id) SELECT * FROM gone",
        "SELECT * FROM tasks FOR UPDATE",
        "PRAGMA writable_schema = 1",
        "ATTACH DATABASE ':memory:' AS other",
        "VACUUM INTO 'stolen.db'",
        "EXPLAIN SELECT * FROM tasks",
    ] {
        assert_eq!(reason(sql, &[], &["tasks"]), "unsupported_syntax", "{sql}");
    }
    ok(
        "WITH t AS (SELECT id FROM tasks) SELECT * FROM t",
        &[],
        &["tasks"],
    );
    ok(
        "(SELECT id FROM tasks) UNION (SELECT id FROM tasks)",
        &[],
        &["tasks"],
    );
    ok("VALUES (1)", &[], &[]);
    ok(
        "SELECT \"update\", 'DELETE' FROM tasks -- INSERT",
        &[],
        &["tasks"],
    );
}

/// Regression (reliability work): system catalogs and functions that run SQL
/// text, read server files or change session state reached `sync_` tables
/// (`query_to_xml('select … from sync_' || 'commits', …)`) or poisoned a
/// pooled Postgres connection (`set_config('search_path', …)`).
#[test]
fn system_catalogs_and_sql_running_functions_are_reserved() {
    for sql in [
        "SELECT name FROM sqlite_master",
        "SELECT * FROM \"SQLITE_SCHEMA\"",
        "SELECT * FROM pragma_table_info('tasks')",
        "SELECT relname FROM pg_catalog.pg_class",
        "SELECT table_name FROM information_schema.tables",
        "SELECT query_to_xml('select 1 from sync_' || 'commits', true, false, '')::text",
        "SELECT Table_To_Xml('x', true, false, '')",
        "SELECT pg_read_file('PG_VERSION')",
        "SELECT set_config('search_path', 'public', false)",
        "SELECT current_setting('search_path')",
        "SELECT load_extension('x')",
        "SELECT lo_import('/etc/passwd')",
        "SELECT dblink('x', 'y')",
    ] {
        assert_eq!(reason(sql, &[], &[]), "reserved_reference", "{sql}");
    }
}

/// A dialect whose database reads `\` as an escape inside `'…'` (as
/// MariaDB does by default): its rules add `backslash_in_literal`.
struct BackslashEscaping;

static BACKSLASH_RULES: QueryRules = QueryRules {
    constructs: &[Construct::BackslashInLiteral],
    system_prefixes: PORTABLE_QUERY_RULES.system_prefixes,
    system_names: PORTABLE_QUERY_RULES.system_names,
};

impl SqlDialect for BackslashEscaping {
    fn name(&self) -> &'static str {
        "backslash-escaping"
    }
    fn sql_type(&self, _: ColumnType) -> &'static str {
        "TEXT"
    }
    fn internal_type(&self, _: InternalRole) -> &'static str {
        "TEXT"
    }
    fn placeholder(&self, n: usize) -> String {
        format!("?{n}")
    }
    fn query_rules(&self) -> &'static QueryRules {
        &BACKSLASH_RULES
    }
}

static BACKSLASH_ESCAPING: BackslashEscaping = BackslashEscaping;

/// Such a database would end the literal `'\''` later than the mask does,
/// so a literal holding a backslash is refused there — and only such a
/// literal: plain literals, and backslashes where no literal is, stay
/// accepted.
#[test]
fn a_dialect_that_escapes_with_backslashes_refuses_them_in_literals_only() {
    let dialect = Dialect::new(&BACKSLASH_ESCAPING);
    let error = prepare(
        dialect,
        "SELECT '\\'' AS a, c.client_id FROM sync_commits c --'",
        &[],
        &["tasks"],
    )
    .unwrap_err();
    assert_eq!(error.get_detail("reason"), Some("unsupported_syntax"));
    assert_eq!(error.get_detail("construct"), Some("backslash_in_literal"));
    for sql in [
        "SELECT 'it''s', 'plain' FROM tasks",
        "SELECT \"a\\b\" FROM tasks -- \\",
    ] {
        prepare(dialect, sql, &[], &["tasks"]).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
    // The built-in dialects keep such literals (their databases read `\`
    // literally inside `'…'`).
    for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
        prepare(dialect, "SELECT 'a\\b' FROM tasks", &[], &["tasks"]).unwrap();
    }
}

#[test]
fn a_minus_sign_is_an_operator_and_only_two_start_a_comment() {
    // A single `-` hides nothing: the table after it is referenced and the
    // binds after it are counted.
    let prepared = ok(
        "SELECT 0 - 1 AS n FROM tasks WHERE length(title) -1 > ? AND project_id = ?",
        &[text("2"), text("p1")],
        &["tasks"],
    );
    assert_eq!(
        prepared.sql,
        format!("SELECT 0 - 1 AS n FROM {TASKS_SUBQUERY} AS \"tasks\" WHERE length(title) -1 > ? AND project_id = ?")
    );
    assert_eq!(prepared.params, [text("part-1"), text("2"), text("p1")]);
    // `--` hides the rest of its line, a table name and a bind included.
    let prepared = ok(
        "SELECT id FROM tasks -- FROM docs WHERE ?\nWHERE project_id = ?",
        &[text("p1")],
        &["tasks"],
    );
    assert_eq!(prepared.params, [text("part-1"), text("p1")]);
}

#[test]
fn only_a_bare_identifier_or_a_quoted_name_is_a_reference() {
    // Table names may hold any non-control character; unquoted, only a bare
    // `[A-Za-z_][A-Za-z0-9_]*` word is a relation (storage-contract §4.13).
    let names = ["_notes", "my_tasks2", "tâches", "2do", "t$x"];
    let tables = names
        .iter()
        .map(|name| {
            json!({
                "name": name,
                "primaryKey": "id",
                "columns": [{"name": "id", "type": "string"}, {"name": "org_id", "type": "string"}],
                "scopes": ["org:{org_id}"]
            })
        })
        .collect();
    let schema = compiled(&schema_text(tables));
    let prepare_named = |sql: &str, table: &str| {
        prepare_query(
            &schema,
            sync_sqlite::DIALECT,
            "part-1",
            sql,
            &[],
            &[table.to_owned()],
        )
    };
    for name in ["_notes", "my_tasks2"] {
        let prepared = prepare_named(&format!("SELECT id FROM {name}"), name)
            .unwrap_or_else(|e| panic!("bare {name}: {e:?}"));
        assert_eq!(prepared.tables, [name]);
    }
    for name in ["tâches", "2do", "t$x"] {
        let error = prepare_named(&format!("SELECT id FROM {name}"), name).unwrap_err();
        assert_eq!(
            error.get_detail("reason"),
            Some("unsupported_table_reference"),
            "unquoted {name}: {error:?}"
        );
        assert_eq!(error.get_detail("table"), Some(name));
        let prepared = prepare_named(&format!("SELECT id FROM \"{name}\""), name)
            .unwrap_or_else(|e| panic!("quoted {name}: {e:?}"));
        assert_eq!(prepared.tables, [name]);
    }
}
