//! §13 Registered queries, C-206…C-218.

use serde_json::json;
use sync_core::{
    AuthoritativeQueryRequest, AuthoritativeQueryResult, Capability, ErrorCode, ServeContext,
    ServerStorage, SqlValue,
};
use sync_schema::{prepare_query, Dialect};

use crate::check::{expect_code, expect_detail, CheckDef, CheckResult};
use crate::checks::support_barrier::{decl, fix1_storage, tables, CLIENT};
use crate::context::{Ctx, NOW};
use crate::fixtures::{compile_json, fix1, push, task, Op};
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "registered-queries";

const AQ: Capability = Capability::AuthoritativeQuery;

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-206",
        "registered query before ensure_schema: schema_not_ensured",
        c206_before_ensure,
    )
    .needs(AQ),
    check(
        GROUP,
        "C-207",
        "a query reads only the bound partition, by `tasks` and by `TASKS`",
        c207_partition_bound,
    )
    .needs(AQ),
    check(
        GROUP,
        "C-208",
        "preparation vector: exact SQL and parameters, literal and comments untouched",
        c208_preparation_vector,
    ),
    check(
        GROUP,
        "C-209",
        "placeholders: each bind outside protected spans becomes the dialect's n-th, in order",
        c209_placeholders_in_order,
    ),
    check(
        GROUP,
        "C-210",
        "`;` outside literals: query_rejected (multiple_statements)",
        c210_multiple_statements,
    )
    .needs(AQ),
    check(
        GROUP,
        "C-211",
        "table referenced but not listed / listed but not referenced: table_metadata_mismatch",
        c211_table_metadata_mismatch,
    )
    .needs(AQ),
    check(
        GROUP,
        "C-212",
        "query over non-materialized secrets: non_materialized_table",
        c212_non_materialized,
    )
    .needs(AQ),
    check(
        GROUP,
        "C-213",
        "bind out of range / parameter never used: bind_mismatch",
        c213_bind_mismatch,
    )
    .needs(AQ),
    check(
        GROUP,
        "C-214",
        "comma join and schema-qualified name: unsupported_table_reference",
        c214_unsupported_table_reference,
    )
    .needs(AQ),
    check(
        GROUP,
        "C-215",
        "reserved names outside literals, bare or quoted: reserved_reference",
        c215_reserved_reference,
    )
    .needs(AQ),
    check(
        GROUP,
        "C-216",
        "unterminated string literal: unterminated_literal",
        c216_unterminated_literal,
    )
    .needs(AQ),
    check(
        GROUP,
        "C-217",
        "closed gate refuses with checkpoint_pending; the declaring caller is served",
        c217_gate_closed,
    )
    .needs(AQ),
    check(
        GROUP,
        "C-218",
        "a transaction-bound query observes rows staged in the transaction",
        c218_transaction_bound,
    )
    .needs(AQ),
];

fn request(sql: &str, names: &[&str], params: &[&str]) -> AuthoritativeQueryRequest {
    AuthoritativeQueryRequest {
        sql: sql.to_owned(),
        params: params
            .iter()
            .map(|p| SqlValue::Text((*p).to_owned()))
            .collect(),
        tables: tables(names),
    }
}

fn text(value: &str) -> SqlValue {
    SqlValue::Text(value.to_owned())
}

fn query(
    storage: &dyn ServerStorage,
    req: &AuthoritativeQueryRequest,
) -> sync_core::Result<AuthoritativeQueryResult> {
    storage.query_authoritative("part-1", req, &ServeContext::default())
}

/// Expects `query_rejected` with `reason` for each SQL of `cases` (`(sql, tables)`).
fn expect_rejected(
    storage: &dyn ServerStorage,
    reason: &str,
    cases: &[(&str, &[&str], &[&str])],
) -> CheckResult {
    for (sql, names, params) in cases {
        let error = expect_code(
            query(storage, &request(sql, names, params)),
            ErrorCode::QueryRejected,
            &format!("query {sql:?} with tables {names:?} and params {params:?}"),
        )?;
        expect_detail(&error, "reason", reason)?;
    }
    Ok(())
}

fn c206_before_ensure(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.open()?;
    expect_code(
        query(
            storage.as_ref(),
            &request("SELECT id FROM tasks", &["tasks"], &[]),
        ),
        ErrorCode::SchemaNotEnsured,
        "query before ensure_schema",
    )?;
    Ok(())
}

fn c207_partition_bound(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    let schema = fix1()?;
    push(
        s,
        "part-1",
        CLIENT,
        "k1",
        &[
            Op::upsert("tasks", task(&schema, "r1", "p1", "one")?),
            Op::upsert("tasks", task(&schema, "r3", "p1", "three")?),
        ],
    )?
    .seq()?;
    push(
        s,
        "part-2",
        CLIENT,
        "k1",
        &[Op::upsert("tasks", task(&schema, "r2", "p1", "two")?)],
    )?
    .seq()?;
    push(
        s,
        "part-2",
        CLIENT,
        "k2",
        &[Op::upsert("tasks", task(&schema, "r4", "p1", "four")?)],
    )?
    .seq()?;
    for sql in [
        "SELECT id, title FROM tasks ORDER BY id",
        "SELECT id, title FROM TASKS ORDER BY id",
    ] {
        let result = query(s, &request(sql, &["tasks"], &[]))?;
        check_eq!(result.columns, vec!["id", "title"], "columns of {sql:?}");
        check_eq!(
            result.rows,
            vec![
                vec![text("r1"), text("one")],
                vec![text("r3"), text("three")]
            ],
            "rows of {sql:?}"
        );
        check_eq!(result.max_commit_seq, 1, "max_commit_seq of {sql:?}");
    }
    Ok(())
}

const VECTOR_SQL: &str = "SELECT id, '?; FROM tasks' AS lit FROM tasks /* ? FROM tasks */ WHERE project_id = ?1 -- ? FROM tasks\n  OR title = ?1";

fn vector_schema() -> CheckResult<sync_core::CompiledSchema> {
    compile_json(&json!({
        "version": 1,
        "tables": [{
            "name": "tasks",
            "primaryKey": "id",
            "columns": [
                {"name": "id", "type": "string"},
                {"name": "project_id", "type": "string"},
                {"name": "title", "type": "string"}
            ],
            "scopes": ["project:{project_id}"]
        }]
    }))
}

fn prepared_vector(dialect: Dialect) -> CheckResult<sync_schema::PreparedQuery> {
    let schema = vector_schema()?;
    Ok(prepare_query(
        &schema,
        dialect,
        "part-1",
        VECTOR_SQL,
        &[text("p1")],
        &tables(&["tasks"]),
    )?)
}

fn c208_preparation_vector(ctx: &mut Ctx<'_>) -> CheckResult {
    let d = ctx.sql_dialect();
    let prepared = prepared_vector(d)?;
    let q = |name: &str| d.quote_ident(name);
    check_eq!(
        prepared.sql,
        format!(
            "SELECT id, '?; FROM tasks' AS lit FROM (SELECT {}, {}, {} FROM {} WHERE {} = {}) AS {} /* ? FROM tasks */ WHERE project_id = {} -- ? FROM tasks\n  OR title = {}",
            q("id"),
            q("project_id"),
            q("title"),
            q("tasks"),
            q("_sync_partition"),
            d.placeholder(1),
            q("tasks"),
            d.placeholder(2),
            d.placeholder(3)
        ),
        "prepared SQL"
    );
    check_eq!(
        prepared.params,
        vec![text("part-1"), text("p1"), text("p1")],
        "prepared parameters"
    );
    Ok(())
}

fn c209_placeholders_in_order(ctx: &mut Ctx<'_>) -> CheckResult {
    let d = ctx.sql_dialect();
    let schema = vector_schema()?;
    let prepared = prepare_query(
        &schema,
        d,
        "part-1",
        "SELECT id FROM tasks WHERE title = ?2 AND project_id = ?1",
        &[text("a"), text("b")],
        &tables(&["tasks"]),
    )?;
    check_eq!(
        prepared.params,
        vec![text("part-1"), text("b"), text("a")],
        "parameters in placeholder order"
    );
    let positions: Vec<Option<usize>> = (1..=3)
        .map(|n| prepared.sql.find(&d.placeholder(n)))
        .collect();
    check!(
        positions.iter().all(Option::is_some) && positions.windows(2).all(|w| w[0] <= w[1]),
        "placeholders 1..3 of {} not in order in {}",
        d,
        prepared.sql
    );
    Ok(())
}

fn c210_multiple_statements(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    expect_rejected(
        storage.as_ref(),
        "multiple_statements",
        &[
            (
                "SELECT id FROM tasks; SELECT id FROM tasks",
                &["tasks"],
                &[],
            ),
            ("SELECT id FROM tasks;", &["tasks"], &[]),
        ],
    )?;
    let inside = query(
        storage.as_ref(),
        &request("SELECT id FROM tasks WHERE title = 'a;b'", &["tasks"], &[]),
    )?;
    check_eq!(
        inside.rows.len(),
        0,
        "rows of the query with `;` inside a literal"
    );
    Ok(())
}

fn c211_table_metadata_mismatch(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    expect_rejected(
        storage.as_ref(),
        "table_metadata_mismatch",
        &[
            ("SELECT id FROM tasks", &[], &[]),
            ("SELECT id FROM tasks", &["tasks", "docs"], &[]),
        ],
    )
}

fn c212_non_materialized(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    expect_rejected(
        storage.as_ref(),
        "non_materialized_table",
        &[("SELECT id FROM secrets", &["secrets"], &[])],
    )
}

fn c213_bind_mismatch(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    expect_rejected(
        storage.as_ref(),
        "bind_mismatch",
        &[
            (
                "SELECT id FROM tasks WHERE project_id = ?3",
                &["tasks"],
                &["p1", "p2"],
            ),
            (
                "SELECT id FROM tasks WHERE project_id = ?",
                &["tasks"],
                &["p1", "p2"],
            ),
        ],
    )
}

fn c214_unsupported_table_reference(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    expect_rejected(
        storage.as_ref(),
        "unsupported_table_reference",
        &[
            ("SELECT docs.id FROM docs, tasks", &["docs"], &[]),
            ("SELECT id FROM main.tasks", &["tasks"], &[]),
        ],
    )
}

fn c215_reserved_reference(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    expect_rejected(
        storage.as_ref(),
        "reserved_reference",
        &[
            ("SELECT _sync_partition FROM tasks", &["tasks"], &[]),
            ("SELECT \"_sync_partition\" FROM tasks", &["tasks"], &[]),
            ("SELECT commit_seq FROM sync_changes", &[], &[]),
            ("SELECT commit_seq FROM \"sync_changes\"", &[], &[]),
        ],
    )?;
    let literal = query(
        storage.as_ref(),
        &request(
            "SELECT id, 'sync_changes' AS lit FROM tasks",
            &["tasks"],
            &[],
        ),
    )?;
    check_eq!(
        literal.columns,
        vec!["id", "lit"],
        "columns of the query naming sync_changes in a literal"
    );
    Ok(())
}

fn c216_unterminated_literal(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    expect_rejected(
        storage.as_ref(),
        "unterminated_literal",
        &[("SELECT id FROM tasks WHERE title = 'abc", &["tasks"], &[])],
    )
}

fn c217_gate_closed(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let s = storage.as_ref();
    s.declare_checkpoint("part-1", "search_v1", 1, NOW)?;
    let req = request("SELECT id FROM tasks", &["tasks"], &[]);
    let error = expect_code(
        query(s, &req),
        ErrorCode::SchemaNotReady,
        "query with an undeclared pending checkpoint",
    )?;
    expect_detail(&error, "reason", "checkpoint_pending")?;
    let declaring = ServeContext {
        declarations: vec![decl("part-1", "search_v1", 1)],
        expected_log_epoch: None,
    };
    let served = s.query_authoritative("part-1", &req, &declaring)?;
    check_eq!(served.rows.len(), 0, "rows served to the declaring caller");
    check_eq!(
        served.max_commit_seq,
        0,
        "max_commit_seq served to the declaring caller"
    );
    Ok(())
}

fn c218_transaction_bound(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = fix1_storage(ctx)?;
    let row = task(&fix1()?, "r1", "p1", "staged")?;
    let mut tx = storage.begin("part-1")?;
    tx.lock_partition_for_push()?;
    tx.upsert_row("tasks", &row, None)?;
    let result =
        tx.query_authoritative(&request("SELECT id, title FROM tasks", &["tasks"], &[]))?;
    tx.rollback()?;
    check_eq!(
        result.rows,
        vec![vec![text("r1"), text("staged")]],
        "rows seen by the transaction"
    );
    Ok(())
}
