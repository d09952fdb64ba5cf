//! The base DDL (`docs/design/mariadb.md` §5), the writer-fence trigger
//! (§7) and the barrier's guard triggers (§7.1): catalog-driven. A trigger
//! that is absent or whose definition differs is (re)created. When the catalog already holds everything, no DDL
//! runs and no lock is taken; otherwise the bootstrap lock
//! (`GET_LOCK('sync.bootstrap.' || SHA2(DATABASE(), 256))`, on a connection
//! of its own that is closed afterwards) serializes the bootstraps of one
//! database, the catalog is read again, and only what is missing is
//! created. Every statement is idempotent and commits on its own, so a
//! crash midway is repaired by the next bootstrap.

use std::collections::{BTreeMap, BTreeSet};

use mysql::Opts;
use sync_core::{Error, ErrorCode, Result};

use crate::barrier_guards::{Guard, GUARDS};
use crate::config::ms_to_seconds;
use crate::pool::Conn;
use crate::session::{lost_at_commit, LockWaits, SessionRefused};

/// The internal tables (`docs/design/mariadb.md` §5), each `(name, CREATE TABLE IF NOT EXISTS …)`.
pub(crate) const BASE_TABLES: &[(&str, &str)] = &[
    (
        "sync_schema_meta",
        r#"CREATE TABLE IF NOT EXISTS `sync_schema_meta` (
  `id` INT NOT NULL,
  `schema_version` BIGINT NOT NULL,
  `layouts` LONGTEXT NOT NULL DEFAULT '{}',
  `required_writer_version` INT NULL,
  `migrating_to` INT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `sync_schema_meta_single_row` CHECK (`id` = 1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_migration_journal",
        r#"CREATE TABLE IF NOT EXISTS `sync_migration_journal` (
  `target_version` INT NOT NULL,
  `from_version` BIGINT NOT NULL,
  `state` VARCHAR(16) NOT NULL,
  `plan` LONGTEXT NOT NULL,
  `next_step` INT NOT NULL DEFAULT 0,
  `rewrite_table` VARBINARY(63) NULL,
  `rewrite_after_partition` VARBINARY(255) NULL,
  `rewrite_after_row_id` VARBINARY(1024) NULL,
  `owner` LONGTEXT NOT NULL,
  `started_at_ms` BIGINT NOT NULL,
  `updated_at_ms` BIGINT NOT NULL,
  `finished_at_ms` BIGINT NULL,
  PRIMARY KEY (`target_version`),
  CONSTRAINT `sync_migration_journal_state` CHECK (`state` IN ('fenced','ddl','rewrite','done'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_partitions",
        r#"CREATE TABLE IF NOT EXISTS `sync_partitions` (
  `partition` VARBINARY(255) NOT NULL,
  `max_commit_seq` BIGINT NOT NULL DEFAULT 0,
  `horizon_seq` BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (`partition`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_partition_registry",
        r#"CREATE TABLE IF NOT EXISTS `sync_partition_registry` (
  `partition` VARBINARY(255) NOT NULL,
  `log_epoch` LONGTEXT NOT NULL,
  `epoch_required` BOOLEAN NOT NULL DEFAULT FALSE,
  `last_authenticated_at_ms` BIGINT NOT NULL,
  PRIMARY KEY (`partition`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_commits",
        r#"CREATE TABLE IF NOT EXISTS `sync_commits` (
  `partition` VARBINARY(255) NOT NULL,
  `commit_seq` BIGINT NOT NULL,
  `client_id` VARBINARY(255) NOT NULL,
  `client_commit_id` VARBINARY(255) NOT NULL,
  `actor_id` LONGTEXT NOT NULL,
  `created_at_ms` BIGINT NOT NULL,
  `writer_version` INT NULL,
  PRIMARY KEY (`partition`, `commit_seq`),
  KEY `sync_commits_by_time` (`partition`, `created_at_ms`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_changes",
        r#"CREATE TABLE IF NOT EXISTS `sync_changes` (
  `partition` VARBINARY(255) NOT NULL,
  `commit_seq` BIGINT NOT NULL,
  `idx` INT NOT NULL,
  `tbl` VARBINARY(63) NOT NULL,
  `row_id` VARBINARY(1024) NOT NULL,
  `op` TINYINT NOT NULL,
  `row_version` BIGINT NULL,
  `scopes` LONGTEXT NOT NULL,
  `payload` LONGBLOB NULL,
  PRIMARY KEY (`partition`, `commit_seq`, `idx`),
  KEY `sync_changes_by_table` (`partition`, `commit_seq`, `tbl`, `idx`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_change_scopes",
        r#"CREATE TABLE IF NOT EXISTS `sync_change_scopes` (
  `partition` VARBINARY(255) NOT NULL,
  `tbl` VARBINARY(63) NOT NULL,
  `var` VARBINARY(63) NOT NULL,
  `value` VARBINARY(1024) NOT NULL,
  `commit_seq` BIGINT NOT NULL,
  PRIMARY KEY (`partition`, `tbl`, `var`, `value`, `commit_seq`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_row_scopes",
        r#"CREATE TABLE IF NOT EXISTS `sync_row_scopes` (
  `partition` VARBINARY(255) NOT NULL,
  `tbl` VARBINARY(63) NOT NULL,
  `var` VARBINARY(63) NOT NULL,
  `value` VARBINARY(1024) NOT NULL,
  `row_id` VARBINARY(1024) NOT NULL,
  PRIMARY KEY (`partition`, `tbl`, `var`, `value`, `row_id`),
  KEY `sync_row_scopes_by_row` (`partition`, `tbl`, `row_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_tombstones",
        r#"CREATE TABLE IF NOT EXISTS `sync_tombstones` (
  `partition` VARBINARY(255) NOT NULL,
  `tbl` VARBINARY(63) NOT NULL,
  `row_id` VARBINARY(1024) NOT NULL,
  `commit_seq` BIGINT NOT NULL,
  PRIMARY KEY (`partition`, `tbl`, `row_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_push_results",
        r#"CREATE TABLE IF NOT EXISTS `sync_push_results` (
  `partition` VARBINARY(255) NOT NULL,
  `client_id` VARBINARY(255) NOT NULL,
  `client_commit_id` VARBINARY(255) NOT NULL,
  `result` LONGTEXT NOT NULL,
  PRIMARY KEY (`partition`, `client_id`, `client_commit_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_clients",
        r#"CREATE TABLE IF NOT EXISTS `sync_clients` (
  `partition` VARBINARY(255) NOT NULL,
  `client_id` VARBINARY(255) NOT NULL,
  `actor_id` LONGTEXT NOT NULL,
  `wire_version` INT NOT NULL DEFAULT 1,
  `cursor` BIGINT NOT NULL,
  `subscriptions` LONGTEXT NOT NULL,
  `updated_at_ms` BIGINT NOT NULL,
  PRIMARY KEY (`partition`, `client_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_reactions",
        r#"CREATE TABLE IF NOT EXISTS `sync_reactions` (
  `partition` VARBINARY(255) NOT NULL,
  `idempotency_key` VARBINARY(512) NOT NULL,
  `type` LONGTEXT NOT NULL,
  `version` INT NOT NULL,
  `payload` LONGTEXT NOT NULL,
  `source_client_id` VARBINARY(255) NOT NULL,
  `source_client_commit_id` VARBINARY(255) NOT NULL,
  `source_commit_seq` BIGINT NOT NULL,
  `created_at_ms` BIGINT NOT NULL,
  `available_at_ms` BIGINT NOT NULL,
  `status` VARCHAR(16) NOT NULL,
  `attempts` INT NOT NULL,
  `max_attempts` INT NOT NULL,
  `lease_owner` LONGTEXT NULL,
  `lease_expires_at_ms` BIGINT NULL,
  `completed_at_ms` BIGINT NULL,
  `last_failure` LONGTEXT NULL,
  PRIMARY KEY (`partition`, `idempotency_key`),
  KEY `sync_reactions_due` (`partition`, `status`, `available_at_ms`, `created_at_ms`, `idempotency_key`),
  KEY `sync_reactions_lease` (`partition`, `status`, `lease_expires_at_ms`),
  KEY `sync_reactions_completed` (`partition`, `status`, `completed_at_ms`, `idempotency_key`),
  KEY `sync_reactions_dead_letter` (`partition`, `status`, `available_at_ms`, `idempotency_key`),
  CONSTRAINT `sync_reactions_status` CHECK (`status` IN ('pending','leased','completed','dead-letter'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_blob_refs",
        r#"CREATE TABLE IF NOT EXISTS `sync_blob_refs` (
  `partition` VARBINARY(255) NOT NULL,
  `tbl` VARBINARY(63) NOT NULL,
  `row_id` VARBINARY(1024) NOT NULL,
  `blob_id` VARBINARY(255) NOT NULL,
  PRIMARY KEY (`partition`, `tbl`, `row_id`, `blob_id`),
  KEY `sync_blob_refs_by_blob` (`partition`, `blob_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_backfill_checkpoints",
        r#"CREATE TABLE IF NOT EXISTS `sync_backfill_checkpoints` (
  `partition` VARBINARY(255) NOT NULL,
  `name` VARBINARY(128) NOT NULL,
  `schema_version` INT NOT NULL,
  `state` VARCHAR(16) NOT NULL,
  `watermark` BIGINT NOT NULL DEFAULT 0,
  `owner_epoch` BIGINT NOT NULL DEFAULT 0,
  `observed_rows` BIGINT NOT NULL DEFAULT 0,
  `updated_at_ms` BIGINT NOT NULL,
  PRIMARY KEY (`partition`, `name`),
  CONSTRAINT `sync_backfill_checkpoints_version` CHECK (`schema_version` >= 1),
  CONSTRAINT `sync_backfill_checkpoints_state` CHECK (`state` IN ('declared','backfilling','activated')),
  CONSTRAINT `sync_backfill_checkpoints_watermark` CHECK (`watermark` >= 0),
  CONSTRAINT `sync_backfill_checkpoints_owner_epoch` CHECK (`owner_epoch` >= 0),
  CONSTRAINT `sync_backfill_checkpoints_observed_rows` CHECK (`observed_rows` >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "sync_writer_fence",
        r#"CREATE TABLE IF NOT EXISTS `sync_writer_fence` (
  `partition` VARBINARY(255) NOT NULL,
  `required_writer_version` INT NOT NULL,
  PRIMARY KEY (`partition`),
  CONSTRAINT `sync_writer_fence_version` CHECK (`required_writer_version` >= 1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
    (
        "_syncstore_segments",
        r#"CREATE TABLE IF NOT EXISTS `_syncstore_segments` (
  `partition` VARBINARY(255) NOT NULL,
  `segment_id` VARBINARY(128) NOT NULL,
  `scope_digest` VARBINARY(128) NOT NULL,
  `build_key` LONGBLOB NOT NULL,
  `tbl` LONGTEXT NOT NULL,
  `media_type` SMALLINT NOT NULL,
  `schema_version` INT NOT NULL,
  `as_of_commit_seq` BIGINT NOT NULL,
  `row_cursor` LONGTEXT NULL,
  `page_rows` BIGINT NOT NULL,
  `next_row_cursor` LONGTEXT NULL,
  `row_count` BIGINT NOT NULL,
  `byte_length` BIGINT NOT NULL,
  `created_at_ms` BIGINT NOT NULL,
  `expires_at_ms` BIGINT NOT NULL,
  `bytes` LONGBLOB NOT NULL,
  PRIMARY KEY (`partition`, `segment_id`, `scope_digest`),
  KEY `_syncstore_segments_by_key` (`partition`, `build_key`(1000), `expires_at_ms`),
  KEY `_syncstore_segments_by_expiry` (`expires_at_ms`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin"#,
    ),
];

/// Columns older shapes of the internal tables lacked (`tables.md` §1),
/// added in place when missing: `(table, column, ALTER TABLE …)`.
pub(crate) const LEGACY_COLUMNS: &[(&str, &str, &str)] = &[
    (
        "sync_clients",
        "wire_version",
        "ALTER TABLE `sync_clients` ADD COLUMN IF NOT EXISTS `wire_version` INT NOT NULL DEFAULT 1",
    ),
    (
        "sync_commits",
        "writer_version",
        "ALTER TABLE `sync_commits` ADD COLUMN IF NOT EXISTS `writer_version` INT NULL",
    ),
    (
        "sync_schema_meta",
        "required_writer_version",
        "ALTER TABLE `sync_schema_meta` ADD COLUMN IF NOT EXISTS `required_writer_version` INT NULL",
    ),
];

/// The name of the writer-fence trigger.
pub const FENCE_TRIGGER_NAME: &str = "sync_commits_writer_fence";

/// The trigger body exactly as installed (`information_schema.TRIGGERS.
/// ACTION_STATEMENT` holds it verbatim). Its reads lock in share mode, so
/// a writer waits for an uncommitted fence raise and a raise waits for
/// every writer that already passed the trigger.
pub const FENCE_TRIGGER_BODY: &str = "BEGIN
  DECLARE database_fence INT DEFAULT NULL;
  DECLARE partition_fence INT DEFAULT NULL;
  SELECT MAX(required_writer_version) INTO database_fence
    FROM sync_schema_meta WHERE id = 1 LOCK IN SHARE MODE;
  SELECT MAX(required_writer_version) INTO partition_fence
    FROM sync_writer_fence WHERE `partition` = NEW.`partition` LOCK IN SHARE MODE;
  IF COALESCE(NEW.writer_version, -1)
     < GREATEST(COALESCE(database_fence, -1), COALESCE(partition_fence, -1)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.writer_fence_rejected';
  END IF;
END";

/// The body the first fence trigger had: plain (non-locking) reads, which a
/// writer with an old snapshot passes. The bootstrap replaces it.
pub(crate) const OUTDATED_FENCE_TRIGGER_BODY: &str = "BEGIN
  DECLARE database_fence INT DEFAULT NULL;
  DECLARE partition_fence INT DEFAULT NULL;
  SELECT MAX(required_writer_version) INTO database_fence FROM sync_schema_meta WHERE id = 1;
  SELECT MAX(required_writer_version) INTO partition_fence
    FROM sync_writer_fence WHERE `partition` = NEW.`partition`;
  IF COALESCE(NEW.writer_version, -1)
     < GREATEST(COALESCE(database_fence, -1), COALESCE(partition_fence, -1)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.writer_fence_rejected';
  END IF;
END";

/// `CREATE OR REPLACE TRIGGER` of the fence trigger with `body`.
pub(crate) fn fence_trigger_sql(body: &str) -> String {
    format!(
        "CREATE OR REPLACE TRIGGER `{FENCE_TRIGGER_NAME}` BEFORE INSERT ON `sync_commits` FOR EACH ROW\n{body}"
    )
}

/// What the catalog holds of the base DDL.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    tables: BTreeSet<String>,
    columns: BTreeSet<(String, String)>,
    trigger: Option<TriggerFacts>,
    guards: BTreeMap<String, TriggerFacts>,
}

/// The fence trigger as `information_schema.TRIGGERS` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TriggerFacts {
    pub body: String,
    pub timing: String,
    pub event: String,
    pub table: String,
}

impl TriggerFacts {
    /// Whether this is the trigger [`FENCE_TRIGGER_BODY`] installs.
    pub(crate) fn is_current(&self) -> bool {
        self.body == FENCE_TRIGGER_BODY
            && self.timing == "BEFORE"
            && self.event == "INSERT"
            && self.table == "sync_commits"
    }

    /// Whether this is `guard` as the bootstrap installs it.
    fn is_guard(&self, guard: &Guard) -> bool {
        self.body == guard.body
            && self.timing == "BEFORE"
            && self.event == guard.event
            && self.table == guard.table
    }
}

impl TriggerFacts {
    /// The state operator tools read (`ServerStorage::writer_fence_trigger`).
    pub(crate) fn state(&self) -> sync_core::FenceTriggerState {
        use sync_core::{FenceTriggerState as S, TriggerDifference as D};
        if self.table != "sync_commits" {
            return S::Missing;
        }
        if self.event != "INSERT" {
            return S::Tampered(D::Events);
        }
        if self.timing != "BEFORE" {
            return S::Tampered(D::Timing);
        }
        if self.body == FENCE_TRIGGER_BODY {
            S::Enforced
        } else if self.body == OUTDATED_FENCE_TRIGGER_BODY {
            S::Outdated
        } else if self.body.contains(crate::errors::FENCE_MESSAGE) {
            S::Tampered(D::Definition)
        } else {
            S::Foreign
        }
    }
}

impl Catalog {
    /// Reads the catalog of the connection's database.
    pub(crate) fn read(conn: &mut Conn) -> Result<Self> {
        let tables: Vec<String> = conn.rows(
            "SELECT CAST(TABLE_NAME AS CHAR) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE()",
            (),
        )?;
        let legacy: Vec<(String, String)> = conn.rows(
            "SELECT CAST(TABLE_NAME AS CHAR), CAST(COLUMN_NAME AS CHAR) \
             FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() \
             AND TABLE_NAME IN ('sync_clients', 'sync_commits', 'sync_schema_meta')",
            (),
        )?;
        let mut guards = read_triggers(conn)?;
        let trigger = guards.remove(FENCE_TRIGGER_NAME);
        Ok(Self {
            tables: tables.into_iter().collect(),
            columns: legacy.into_iter().collect(),
            trigger,
            guards,
        })
    }

    /// The statements still needed, in order.
    pub(crate) fn missing(&self) -> Vec<String> {
        let mut statements: Vec<String> = BASE_TABLES
            .iter()
            .filter(|(name, _)| !self.tables.contains(*name))
            .map(|(_, ddl)| (*ddl).to_owned())
            .collect();
        statements.extend(
            LEGACY_COLUMNS
                .iter()
                .filter(|(table, column, _)| {
                    self.tables.contains(*table)
                        && !self
                            .columns
                            .contains(&((*table).to_owned(), (*column).to_owned()))
                })
                .map(|(_, _, ddl)| (*ddl).to_owned()),
        );
        if !self.trigger.as_ref().is_some_and(TriggerFacts::is_current) {
            statements.push(fence_trigger_sql(FENCE_TRIGGER_BODY));
        }
        statements.extend(
            GUARDS
                .iter()
                .filter(|guard| {
                    !self
                        .guards
                        .get(guard.name)
                        .is_some_and(|found| found.is_guard(guard))
                })
                .map(Guard::create_sql),
        );
        statements
    }
}

/// The fence trigger of the connection's database, if any.
pub(crate) fn read_trigger(conn: &mut Conn) -> Result<Option<TriggerFacts>> {
    let row: Option<(String, String, String, String)> = conn.first(
        "SELECT CAST(ACTION_STATEMENT AS CHAR), CAST(ACTION_TIMING AS CHAR), \
         CAST(EVENT_MANIPULATION AS CHAR), CAST(EVENT_OBJECT_TABLE AS CHAR) \
         FROM information_schema.TRIGGERS \
         WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = ?",
        (FENCE_TRIGGER_NAME,),
    )?;
    Ok(row.map(|(body, timing, event, table)| TriggerFacts {
        body,
        timing,
        event,
        table,
    }))
}

/// The storage's triggers (the fence trigger and the barrier's guards)
/// found in the connection's database, by name: one catalog read.
fn read_triggers(conn: &mut Conn) -> Result<BTreeMap<String, TriggerFacts>> {
    let marks = vec!["?"; GUARDS.len() + 1].join(", ");
    let names: Vec<mysql::Value> = std::iter::once(FENCE_TRIGGER_NAME)
        .chain(GUARDS.iter().map(|g| g.name))
        .map(mysql::Value::from)
        .collect();
    let rows: Vec<(String, String, String, String, String)> = conn.rows(
        &format!(
            "SELECT CAST(TRIGGER_NAME AS CHAR), CAST(ACTION_STATEMENT AS CHAR), \
             CAST(ACTION_TIMING AS CHAR), CAST(EVENT_MANIPULATION AS CHAR), \
             CAST(EVENT_OBJECT_TABLE AS CHAR) FROM information_schema.TRIGGERS \
             WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME IN ({marks})"
        ),
        names,
    )?;
    Ok(rows
        .into_iter()
        .map(|(name, body, timing, event, table)| {
            (
                name,
                TriggerFacts {
                    body,
                    timing,
                    event,
                    table,
                },
            )
        })
        .collect())
}

/// Creates what the catalog lacks. `conn` is any connection of the
/// database (its catalog read decides whether anything is needed); the
/// DDL runs on a connection of its own, opened with `opts`, holding the
/// bootstrap lock, and closed afterwards. Returns whether any DDL ran.
///
/// A DDL statement commits by itself, so a connection lost at one of them
/// may have left it done: `outcome_unknown`, never `connection_lost`
/// (which says nothing changed). `hook` prepares the DDL connection as the
/// storage prepares its pooled ones (the fault plan, in tests).
pub(crate) fn bootstrap(
    conn: &mut Conn,
    opts: &Opts,
    waits: LockWaits,
    lock_timeout_ms: u64,
    hook: impl FnOnce(&mut Conn),
) -> Result<bool> {
    if Catalog::read(conn)?.missing().is_empty() {
        return Ok(false);
    }
    let (mut own, _) = Conn::open(
        opts,
        LockWaits {
            metadata_seconds: ms_to_seconds(lock_timeout_ms),
            ..waits
        },
    )?;
    hook(&mut own);
    take_named_lock(&mut own, "sync.bootstrap.", lock_timeout_ms)?;
    // The lock is released when `own` is dropped (the session ends).
    for statement in Catalog::read(&mut own)?.missing() {
        own.run(&statement).map_err(lost_at_commit)?;
    }
    Ok(true)
}

/// `GET_LOCK(prefix || SHA2(DATABASE(), 256), seconds)` on `conn`: `1` is
/// held, `0` (timeout) is `sync.storage.busy`, `NULL` is
/// `sync.storage.backend`. The name carries the database, so databases on
/// one server never serialize each other.
pub(crate) fn take_named_lock(conn: &mut Conn, prefix: &str, timeout_ms: u64) -> Result<()> {
    let got: Option<Option<i64>> = conn.first(
        "SELECT GET_LOCK(CONCAT(?, SHA2(DATABASE(), 256)), ?)",
        (prefix, ms_to_seconds(timeout_ms)),
    )?;
    match got.flatten() {
        Some(1) => Ok(()),
        Some(_) => Err(Error::new(ErrorCode::Busy).detail("lock", prefix.trim_end_matches('.'))),
        None => Err(Error::backend(SessionRefused(format!(
            "GET_LOCK of {prefix}… returned NULL"
        )))),
    }
}
