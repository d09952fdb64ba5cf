//! Migrations without transactional DDL on a live server: the journal of a
//! finished bump, a crashed migration rolled forward by the next
//! `ensure_schema`, the gate while a migration is open, and a writer below
//! the fence refused by the trigger.

use std::sync::Arc;

use mysql::prelude::Queryable;
use sync_conformance::fixtures::{self, Op, PushOutcome};
use sync_core::{EnsureOptions, EnsureOutcome, ErrorCode, ServerStorage};
use sync_mariadb::scratch::{url_from_env, ScratchDatabase};
use sync_mariadb::{MariadbConfig, MariadbStorage};

fn scratch() -> ScratchDatabase {
    ScratchDatabase::from_env()
        .unwrap_or_else(|e| panic!("cannot reach MariaDB at {} ({e:?})", url_from_env()))
}

/// Pushes task row `t1` of `schema` to partition `p1` as one commit.
fn push_task(
    storage: &dyn ServerStorage,
    schema: &sync_core::CompiledSchema,
) -> sync_core::Result<PushOutcome> {
    let t1 = fixtures::task(schema, "t1", "proj-1", "first").expect("t1");
    fixtures::push(
        storage,
        "p1",
        "c1",
        "cc1",
        &[Op::Upsert {
            table: "tasks".into(),
            row: t1,
        }],
    )
}

fn open(db: &ScratchDatabase) -> Arc<dyn ServerStorage> {
    Arc::new(
        MariadbStorage::connect_to(db.url().clone(), MariadbConfig::default()).expect("connect"),
    )
}

#[test]
fn a_finished_bump_leaves_a_done_journal_and_no_open_migration() {
    let db = scratch();
    let schema = fixtures::fix1().expect("fix1");
    open(&db)
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("ensure");
    let mut raw = db.raw().expect("raw");
    let journal: Vec<(i32, String, i64, i64)> = raw
        .query(
            "SELECT `target_version`, `state`, `next_step`, \
             (SELECT COUNT(*) FROM `sync_schema_meta` WHERE `migrating_to` IS NOT NULL) \
             FROM `sync_migration_journal`",
        )
        .expect("journal");
    assert_eq!(journal.len(), 1);
    let (target, state, next_step, open_migrations) = journal[0].clone();
    assert_eq!((target, state.as_str(), open_migrations), (1, "done", 0));
    assert!(next_step > 0, "every DDL statement was journaled");
}

#[test]
fn a_crashed_migration_is_rolled_forward_and_gates_refuse_meanwhile() {
    let db = scratch();
    let v1 = fixtures::fix1().expect("fix1");
    let v2 = fixtures::fix1_at(2).expect("fix1 at 2");
    let storage = open(&db);
    storage
        .ensure_schema(&v1, &EnsureOptions::default())
        .expect("v1");

    // What a migrator that died after its fence transaction leaves behind:
    // the fence raised, the meta row marked, an open journal whose plan
    // still has a statement to run.
    let mut raw = db.raw().expect("raw");
    let plan = serde_json::json!({
        "format": 1,
        "statements": [{"sql": "CREATE TABLE IF NOT EXISTS `crash_marker` (`a` INT) ENGINE=InnoDB", "params": []}],
        "rewrites": [],
        "layouts": sync_schema::layouts_json(&v2),
    })
    .to_string();
    raw.query_drop(
        "UPDATE `sync_schema_meta` SET `migrating_to` = 2, `required_writer_version` = 2 WHERE `id` = 1",
    )
    .expect("mark");
    raw.exec_drop(
        "INSERT INTO `sync_migration_journal` (`target_version`, `from_version`, `state`, `plan`, \
         `owner`, `started_at_ms`, `updated_at_ms`) VALUES (2, 1, 'fenced', ?, 'crashed', 0, 0)",
        (plan,),
    )
    .expect("journal");

    // Every gate refuses while the migration is open.
    let old_code = storage.read_serve_gate("p1", 1).expect("gate");
    assert_eq!(
        old_code.stored_schema_version, 2,
        "older code: schema_ahead"
    );
    let new_code = storage.read_serve_gate("p1", 2).expect("gate");
    assert_eq!(
        new_code.stored_schema_version, 0,
        "target code: schema_behind"
    );
    // A writer at version 1 is refused by the trigger.
    let err = push_task(storage.as_ref(), &v1).expect_err("fenced");
    assert!(
        err.code() == ErrorCode::SchemaNotReady && err.get_detail("reason") == Some("schema_ahead"),
        "{err:?}"
    );

    // The next ensure_schema at 2 finishes the plan, then verifies.
    let next = open(&db);
    assert_eq!(
        next.ensure_schema_outcome(&v2, &EnsureOptions::default())
            .expect("roll forward"),
        EnsureOutcome::Migrated
    );
    let marker = next.read_schema_marker().expect("marker").expect("stored");
    assert_eq!(marker.schema_version, 2);
    let created: Option<i64> = raw
        .query_first(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'crash_marker'",
        )
        .expect("catalog");
    assert_eq!(created, Some(1));
    let state: Option<String> = raw
        .query_first("SELECT `state` FROM `sync_migration_journal` WHERE `target_version` = 2")
        .expect("journal");
    assert_eq!(state.as_deref(), Some("done"));

    // Code at 2 now pushes.
    let pushed = push_task(next.as_ref(), &v2).expect("push");
    assert!(matches!(pushed, PushOutcome::Applied(1)), "{pushed:?}");
}

#[test]
fn a_checkpoint_is_declared_claimed_advanced_and_activated() {
    use sync_core::{ActivationOutcome, CheckpointState};
    let db = scratch();
    let schema = fixtures::fix1().expect("fix1");
    let storage = open(&db);
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .expect("v1");
    let s = storage.as_ref();
    let declared = s
        .declare_checkpoint("p1", "search", 1, 10)
        .expect("declare");
    assert_eq!(declared.state, CheckpointState::Declared);
    assert_eq!(s.required_writer_version("p1").expect("fence"), Some(1));
    let err = s
        .declare_checkpoint("p1", "later", 2, 10)
        .expect_err("not current");
    assert_eq!(err.code(), ErrorCode::CheckpointDeclarationInvalid);

    let claimed = s.claim_checkpoint("p1", "search", 1, 20).expect("claim");
    assert_eq!(
        (claimed.state, claimed.owner_epoch),
        (CheckpointState::Backfilling, 1)
    );
    assert!(s
        .advance_checkpoint("p1", "search", 1, 0, 5, 30)
        .expect("advance"));
    assert!(!s
        .advance_checkpoint("p1", "search", 7, 0, 5, 30)
        .expect("stale owner"));
    let outcome = s
        .activate_checkpoint("p1", "search", 1, 0, &["tasks".to_owned()], 40)
        .expect("activate");
    assert_eq!(outcome, ActivationOutcome::Activated);
    let stored = s
        .read_checkpoint("p1", "search")
        .expect("read")
        .expect("row");
    assert_eq!(stored.state, CheckpointState::Activated);
}

/// `fix1` at version 2 with a `wide` table of `columns` nullable string
/// columns (each a `LONGTEXT` projection).
fn with_wide_table(columns: usize) -> sync_core::CompiledSchema {
    let mut json = fixtures::fix1_json();
    json["version"] = serde_json::json!(2);
    let mut defs = vec![serde_json::json!({"name": "id", "type": "string"})];
    defs.extend(
        (0..columns).map(
            |i| serde_json::json!({"name": format!("c{i}"), "type": "string", "nullable": true}),
        ),
    );
    json["tables"]
        .as_array_mut()
        .expect("tables")
        .push(serde_json::json!({
            "name": "wide",
            "primaryKey": "id",
            "columns": defs,
            "scopes": ["w:{id}"],
        }));
    fixtures::compile_json(&json).expect("compile")
}

#[test]
fn a_table_innodb_cannot_build_is_refused_before_the_fence() {
    let db = scratch();
    let v1 = fixtures::fix1().expect("fix1");
    let storage = open(&db);
    storage
        .ensure_schema(&v1, &EnsureOptions::default())
        .expect("v1");

    // 420 LONGTEXT projections pass InnoDB's 8 126-byte inline row limit.
    let error = storage
        .ensure_schema(&with_wide_table(420), &EnsureOptions::default())
        .expect_err("a row InnoDB cannot hold");
    assert_eq!(error.code(), ErrorCode::MigrationRefused, "{error:?}");
    assert_eq!(error.get_detail("reason"), Some("physical_limit"));
    assert_eq!(error.get_detail("table"), Some("wide"));

    // Nothing was written: no raised fence, no open migration, no table, no
    // journal of version 2; the version-1 writer still serves.
    let mut raw = db.raw().expect("raw");
    let meta: Option<(i64, Option<i32>, Option<i32>)> = raw
        .query_first(
            "SELECT `schema_version`, `required_writer_version`, `migrating_to` \
             FROM `sync_schema_meta` WHERE `id` = 1",
        )
        .expect("meta");
    assert_eq!(
        meta,
        Some((1, Some(1), None)),
        "the fence stays at version 1"
    );
    let tables: i64 = raw
        .query_first(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'wide'",
        )
        .expect("tables")
        .unwrap_or(-1);
    assert_eq!(tables, 0);
    let journal: i64 = raw
        .query_first("SELECT COUNT(*) FROM `sync_migration_journal` WHERE `target_version` = 2")
        .expect("journal")
        .unwrap_or(-1);
    assert_eq!(journal, 0);
    push_task(storage.as_ref(), &v1).expect("the version-1 writer still pushes");

    // A shape InnoDB accepts migrates.
    storage
        .ensure_schema(&with_wide_table(40), &EnsureOptions::default())
        .expect("a table InnoDB can hold");
}
