//! `engine.md` §3.2 item 4a: reads are authorized like writes — a scope
//! variable the subscription leaves out is filtered by what the actor may
//! write (E-090…E-092).

use sync_engine::SectionStatus;

use super::engine_doubles::{scope_map, ResolverMode};
use super::engine_entry::GROUP;
use super::engine_fixture::{seed, P};
use super::engine_pull::{expect_dataless, expect_end};
use super::engine_round::{env, pull_req, run, scopes, sub, Env};
use crate::check::{CheckDef, CheckResult};
use crate::context::Ctx;
use crate::fixtures::{doc, Op};
use crate::registry::check;
use crate::{check, check_eq};

/// The checks of this file.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "E-090",
        "a left-out scope variable is filtered by the allowed values",
        e090_left_out_variable_filtered,
    ),
    check(
        GROUP,
        "E-091",
        "a left-out scope variable the actor may not write revokes",
        e091_left_out_variable_not_allowed,
    ),
    check(
        GROUP,
        "E-092",
        "a left-out scope variable allowed with \"*\" adds no filter",
        e092_left_out_variable_any,
    ),
];

/// Seeds one `docs` row per `(org, project)`, one commit each (seqs 1..);
/// returns the row ids in order.
fn seed_docs(env: &Env, cells: &[(&str, &str)]) -> CheckResult<Vec<String>> {
    let schema = crate::fixtures::fix1()?;
    let mut ids = Vec::new();
    for (n, (org, project)) in cells.iter().enumerate() {
        let id = format!("d{n}");
        let row = doc(&schema, &id, org, project, None)?;
        seed(env.storage.as_ref(), P, &id, &[Op::upsert("docs", row)])?;
        ids.push(id);
    }
    Ok(ids)
}

/// The row ids of every page of the only section of a bootstrap pull of
/// `docs` in `project_id = p1` by `actor`, after checking its effective scopes.
fn bootstrap_ids(
    engine: &sync_engine::Engine,
    expected_effective: &[(&str, &[&str])],
) -> CheckResult<Vec<String>> {
    let wanted = sub("s", "docs", &[("project_id", &["p1"])], -1);
    let round = run(engine, "carol", pull_req("dev-c", vec![wanted]));
    round.ok()?;
    let section = round.section()?;
    check!(
        section.start.status == SectionStatus::Active && section.start.bootstrap,
        "expected an active bootstrap section, got {:?}",
        section.start
    );
    check_eq!(
        section.start.effective_scopes,
        scopes(expected_effective),
        "SubStart effective scopes"
    );
    Ok(section
        .pages
        .iter()
        .flat_map(|p| p.rows.iter().map(|r| r.row_id.clone()))
        .collect())
}

fn e090_left_out_variable_filtered(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_docs(&env, &[("o1", "p1"), ("o2", "p1")])?;
    env.resolver.set(ResolverMode::Fixed(scope_map(&[
        ("org_id", &["o1"]),
        ("project_id", &["p1"]),
    ])));
    let engine = env.engine()?;
    let effective: &[(&str, &[&str])] = &[("org_id", &["o1"]), ("project_id", &["p1"])];
    check_eq!(
        bootstrap_ids(&engine, effective)?,
        vec!["d0".to_owned()],
        "bootstrap rows"
    );
    let incremental = sub("s", "docs", &[("project_id", &["p1"])], 0);
    let round = run(&engine, "carol", pull_req("dev-c", vec![incremental]));
    round.ok()?;
    let section = round.section()?;
    check!(
        section.start.status == SectionStatus::Active && !section.start.bootstrap,
        "expected an active incremental section, got {:?}",
        section.start
    );
    check_eq!(
        section.start.effective_scopes,
        scopes(effective),
        "incremental effective scopes"
    );
    check_eq!(
        section.commit_rows(),
        vec![(1, vec!["d0".to_owned()])],
        "delivered commits"
    );
    expect_end(&section, 2, None)
}

fn e091_left_out_variable_not_allowed(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_docs(&env, &[("o1", "p1")])?;
    env.resolver
        .set(ResolverMode::Fixed(scope_map(&[("project_id", &["p1"])])));
    let engine = env.engine()?;
    let round = run(
        &engine,
        "carol",
        pull_req(
            "dev-c",
            vec![sub("s", "docs", &[("project_id", &["p1"])], 0)],
        ),
    );
    round.ok()?;
    expect_dataless(
        &round.section()?,
        SectionStatus::Revoked,
        "sync.scope_revoked",
        0,
    )
}

fn e092_left_out_variable_any(ctx: &mut Ctx<'_>) -> CheckResult {
    let env = env(ctx)?;
    seed_docs(&env, &[("o1", "p1"), ("o2", "p1"), ("o1", "p2")])?;
    env.resolver.set(ResolverMode::Fixed(scope_map(&[
        ("org_id", &["*"]),
        ("project_id", &["p1"]),
    ])));
    let engine = env.engine()?;
    check_eq!(
        bootstrap_ids(&engine, &[("project_id", &["p1"])])?,
        vec!["d0".to_owned(), "d1".to_owned()],
        "bootstrap rows"
    );
    Ok(())
}
