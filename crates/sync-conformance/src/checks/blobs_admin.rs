//! §12 Blob references and admin surface, C-199…C-205.

use serde_json::{json, Value};
use sync_core::{
    BlobReferencingRow, Capability, ClientRecord, CommitMetadata, CommitMetadataQuery,
    EnsureOptions, ScopeActivityQuery, ScopeCommitActivity, ServerStorage, StoredRow,
};

use crate::check::{CheckDef, CheckResult};
use crate::checks::support_pdata::{strings, P};
use crate::context::{Ctx, NOW};
use crate::fixtures::{compile_json, doc, fix1, fix1_json, push, task, Op};
use crate::harness::RawFilter;
use crate::registry::check;
use crate::{check, check_eq};

/// Group name.
pub(crate) const GROUP: &str = "blobs-admin";

/// The checks of this group.
pub(crate) const CHECKS: &[CheckDef] = &[
    check(
        GROUP,
        "C-199",
        "blob references list rows with scopes by (table, row_id) and distinct byte-ordered ids",
        c199_blob_refs_listing,
    )
    .needs(Capability::BlobRefs),
    check(
        GROUP,
        "C-200",
        "set_blob_refs replaces the previous reference set",
        c200_set_blob_refs_replaces,
    )
    .needs(Capability::BlobRefs),
    check(
        GROUP,
        "C-201",
        "set_blob_refs([]) and delete_row clear a row's references",
        c201_refs_cleared,
    )
    .needs(Capability::BlobRefs),
    check(
        GROUP,
        "C-202",
        "references of a retired table are deleted by the bump and not listed",
        c202_retired_table_refs,
    )
    .needs(Capability::BlobRefs),
    check(
        GROUP,
        "C-203",
        "list_client_records is newest updated_at_ms first",
        c203_list_client_records,
    )
    .needs(Capability::Admin),
    check(
        GROUP,
        "C-204",
        "list_commit_metadata: newest first, change_count, tables, filter, paging",
        c204_list_commit_metadata,
    )
    .needs(Capability::Admin),
    check(
        GROUP,
        "C-205",
        "scope_activity(project_id = p1) reports commit 1 with table and change_count",
        c205_scope_activity,
    )
    .needs(Capability::Admin),
];

fn blob_ids(ids: &[&str]) -> Vec<String> {
    strings(ids)
}

/// Upserts `(table, row, blob ids)` triples and sets their references, in one committed transaction.
fn write_with_refs(
    storage: &dyn ServerStorage,
    rows: &[(&str, &StoredRow, &[&str])],
) -> CheckResult {
    let mut tx = storage.begin(P)?;
    for (table, row, blobs) in rows {
        tx.upsert_row(table, row, None)?;
        tx.set_blob_refs(table, &row.row_id, &blob_ids(blobs))?;
    }
    tx.commit()?;
    Ok(())
}

fn referencing(table: &str, row: &StoredRow) -> BlobReferencingRow {
    BlobReferencingRow {
        table: table.to_owned(),
        row_id: row.row_id.clone(),
        scopes: row.scopes.clone(),
    }
}

fn c199_blob_refs_listing(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let r2 = task(&schema, "r2", "p2", "t2")?;
    let r1 = task(&schema, "r1", "p1", "t1")?;
    let d1 = doc(&schema, "z1", "o1", "p3", None)?;
    write_with_refs(
        storage.as_ref(),
        &[
            ("tasks", &r2, &["blob-a", "blob-Z"]),
            ("tasks", &r1, &["blob-a"]),
            ("docs", &d1, &["blob-a", "blob-é", "blob-a"]),
        ],
    )?;
    check_eq!(
        storage.list_rows_referencing_blob(P, "blob-a")?,
        vec![
            referencing("docs", &d1),
            referencing("tasks", &r1),
            referencing("tasks", &r2)
        ],
        "rows referencing blob-a"
    );
    check_eq!(
        storage.list_referenced_blob_ids(P)?,
        blob_ids(&["blob-Z", "blob-a", "blob-é"]),
        "referenced blob ids"
    );
    Ok(())
}

fn c200_set_blob_refs_replaces(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let r1 = task(&schema, "r1", "p1", "t1")?;
    write_with_refs(storage.as_ref(), &[("tasks", &r1, &["blob-old"])])?;
    let mut tx = storage.begin(P)?;
    tx.set_blob_refs("tasks", "r1", &blob_ids(&["blob-new"]))?;
    tx.commit()?;
    check!(
        storage
            .list_rows_referencing_blob(P, "blob-old")?
            .is_empty(),
        "the replaced blob is still referenced"
    );
    check_eq!(
        storage.list_rows_referencing_blob(P, "blob-new")?,
        vec![referencing("tasks", &r1)],
        "rows referencing the new blob"
    );
    check_eq!(
        storage.list_referenced_blob_ids(P)?,
        blob_ids(&["blob-new"]),
        "referenced blob ids"
    );
    Ok(())
}

fn c201_refs_cleared(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let r1 = task(&schema, "r1", "p1", "t1")?;
    let r2 = task(&schema, "r2", "p1", "t2")?;
    write_with_refs(
        storage.as_ref(),
        &[("tasks", &r1, &["blob-1"]), ("tasks", &r2, &["blob-1"])],
    )?;
    let mut tx = storage.begin(P)?;
    tx.set_blob_refs("tasks", "r1", &[])?;
    tx.commit()?;
    check_eq!(
        storage.list_rows_referencing_blob(P, "blob-1")?,
        vec![referencing("tasks", &r2)],
        "rows referencing blob-1 after clearing r1"
    );
    let mut tx = storage.begin(P)?;
    tx.delete_row("tasks", "r2")?;
    tx.commit()?;
    check!(
        storage.list_rows_referencing_blob(P, "blob-1")?.is_empty(),
        "a deleted row still references blob-1"
    );
    check!(
        storage.list_referenced_blob_ids(P)?.is_empty(),
        "blob ids remain listed"
    );
    Ok(())
}

/// `FIX1` at version 2 without the `docs` table (retires it).
fn fix1_without_docs() -> Value {
    let mut schema = fix1_json();
    schema["version"] = json!(2);
    if let Some(tables) = schema["tables"].as_array_mut() {
        tables.retain(|t| t["name"] != "docs");
    }
    schema
}

fn c202_retired_table_refs(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    let r1 = task(&schema, "r1", "p1", "t1")?;
    let d1 = doc(&schema, "d1", "o1", "p1", None)?;
    write_with_refs(
        storage.as_ref(),
        &[("docs", &d1, &["blob-1"]), ("tasks", &r1, &["blob-1"])],
    )?;
    let bumped = ctx.open()?;
    bumped.ensure_schema(
        &compile_json(&fix1_without_docs())?,
        &EnsureOptions::default(),
    )?;
    check_eq!(
        bumped.list_rows_referencing_blob(P, "blob-1")?,
        vec![referencing("tasks", &r1)],
        "rows referencing blob-1 after retiring docs"
    );
    check_eq!(
        ctx.raw()?
            .count("sync_blob_refs", RawFilter::eq("tbl", "docs"))?,
        0,
        "docs references after the bump"
    );
    Ok(())
}

fn c203_list_client_records(ctx: &mut Ctx<'_>) -> CheckResult {
    let storage = ctx.ensured(&fix1()?)?;
    let record = |client_id: &str, updated_at_ms| ClientRecord {
        client_id: client_id.to_owned(),
        actor_id: "actor-1".to_owned(),
        wire_version: 2,
        cursor: 1,
        updated_at_ms,
        subscriptions: Vec::new(),
    };
    for (id, at) in [("a", NOW), ("c", NOW + 10), ("b", NOW + 10)] {
        storage.put_client_record(P, &record(id, at))?;
    }
    let listed: Vec<String> = storage
        .list_client_records(P)?
        .into_iter()
        .map(|r| r.client_id)
        .collect();
    check_eq!(
        listed,
        strings(&["b", "c", "a"]),
        "list_client_records order"
    );
    Ok(())
}

fn c204_list_commit_metadata(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    push(
        storage.as_ref(),
        P,
        "client-1",
        "c-1",
        &[
            Op::upsert("tasks", task(&schema, "r1", "p1", "t1")?),
            Op::upsert("tasks", task(&schema, "r2", "p1", "t2")?),
            Op::upsert("docs", doc(&schema, "d1", "o1", "p1", None)?),
        ],
    )?
    .seq()?;
    push(
        storage.as_ref(),
        P,
        "client-1",
        "c-2",
        &[Op::upsert("docs", doc(&schema, "d2", "o1", "p1", None)?)],
    )?
    .seq()?;
    push(
        storage.as_ref(),
        P,
        "client-2",
        "c-3",
        &[Op::upsert("tasks", task(&schema, "r3", "p1", "t3")?)],
    )?
    .seq()?;
    let list = |after_seq, before_seq, limit, table: Option<&str>| {
        storage.list_commit_metadata(
            P,
            &CommitMetadataQuery {
                after_seq,
                before_seq,
                limit,
                table: table.map(str::to_owned),
            },
        )
    };
    let seqs = |items: &[CommitMetadata]| items.iter().map(|m| m.commit_seq).collect::<Vec<_>>();
    let all = list(0, None, 10, None)?;
    check_eq!(seqs(&all), [3, 2, 1], "newest first");
    check_eq!(
        all[2],
        CommitMetadata {
            commit_seq: 1,
            client_id: "client-1".to_owned(),
            client_commit_id: "c-1".to_owned(),
            actor_id: "actor:client-1".to_owned(),
            created_at_ms: NOW,
            change_count: 3,
            tables: strings(&["docs", "tasks"]),
        },
        "metadata of commit 1"
    );
    check_eq!(all[0].tables, strings(&["tasks"]), "tables of commit 3");
    check_eq!(all[0].client_id, "client-2", "client of commit 3");
    check_eq!(seqs(&list(1, None, 10, None)?), [3, 2], "after_seq 1");
    check_eq!(
        seqs(&list(0, None, 10, Some("docs"))?),
        [2, 1],
        "table filter docs"
    );
    check!(
        list(0, None, 10, Some("device_key_grants"))?.is_empty(),
        "table filter without a match returned commits"
    );
    check_eq!(seqs(&list(0, None, 2, None)?), [3, 2], "limit 2");
    check_eq!(seqs(&list(0, Some(3), 1, None)?), [2], "page before 3");
    check_eq!(seqs(&list(0, Some(2), 1, None)?), [1], "page before 2");
    check!(
        list(0, Some(1), 1, None)?.is_empty(),
        "page before 1 returned commits"
    );
    Ok(())
}

fn c205_scope_activity(ctx: &mut Ctx<'_>) -> CheckResult {
    let schema = fix1()?;
    let storage = ctx.ensured(&schema)?;
    push(
        storage.as_ref(),
        P,
        "client-1",
        "c-1",
        &[
            Op::upsert("tasks", task(&schema, "r1", "p1", "t1")?),
            Op::upsert("tasks", task(&schema, "r2", "p1", "t2")?),
            Op::upsert("docs", doc(&schema, "d1", "o1", "p2", None)?),
        ],
    )?
    .seq()?;
    push(
        storage.as_ref(),
        P,
        "client-1",
        "c-2",
        &[Op::upsert("tasks", task(&schema, "r3", "p2", "t3")?)],
    )?
    .seq()?;
    let activity = storage.scope_activity(
        P,
        &ScopeActivityQuery {
            variable: "project_id".to_owned(),
            value: "p1".to_owned(),
            limit: 10,
        },
    )?;
    check_eq!(
        activity,
        vec![ScopeCommitActivity {
            commit_seq: 1,
            table: "tasks".to_owned(),
            created_at_ms: NOW,
            actor_id: "actor:client-1".to_owned(),
            change_count: 2,
        }],
        "scope_activity(project_id = p1)"
    );
    Ok(())
}
