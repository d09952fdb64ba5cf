//! Guard triggers on the migration barrier's own tables
//! (`docs/design/mariadb.md` §7.1, `docs/decisions.md`, *The barrier's
//! rules in the database*): "a fence is never lowered" and "only the
//! storage activates or deletes a checkpoint" as rules of the database, like
//! the writer fence itself.
//!
//! - `sync_writer_fence`: no update to a lower value or another partition,
//!   no delete.
//! - `sync_schema_meta`: once the database-wide fence is set, no update to a
//!   lower value or NULL, no delete.
//! - `sync_backfill_checkpoints`: a row is inserted only as a fresh
//!   `declared` one (epoch, watermark and observed rows 0); an activated
//!   row is never changed (an update that leaves every column as it is
//!   passes: the storage's insert-if-absent) or deleted; no update moves a
//!   row to another key, lowers its owner epoch or moves its watermark back
//!   within one schema version; an activation keeps the epoch and version,
//!   needs the effective fence at the version and a watermark within the
//!   log; and activations and deletions come only from a session logged in
//!   under the user name of the account that installed the guards (the
//!   triggers' definer, whose name `CURRENT_USER()` returns inside them;
//!   `USER()` is the session's login). A writer granted only DML under
//!   another account cannot forge its login name.
//!
//! MariaDB fires these guards on every path that changes a row: an
//! `INSERT … ON DUPLICATE KEY UPDATE` fires the insert guard and then, on a
//! duplicate, the update guard; a `REPLACE` over an existing row fires the
//! insert guard and then the delete guard. So no insert guard is needed on
//! the fence tables: a new fence row lowers nothing. Each guard raises
//! SQLSTATE `45000` with the message `sync.storage.barrier_write_refused`.

/// The message every guard signals (the error code).
pub(crate) const GUARD_MESSAGE: &str = "sync.storage.barrier_write_refused";

/// One guard trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    /// The trigger's name.
    pub name: &'static str,
    /// The guarded table.
    pub table: &'static str,
    /// `INSERT`, `UPDATE` or `DELETE` (always `BEFORE`, `FOR EACH ROW`).
    pub event: &'static str,
    /// The body exactly as installed (`information_schema.TRIGGERS.
    /// ACTION_STATEMENT` holds it verbatim).
    pub body: &'static str,
}

impl Guard {
    /// `CREATE OR REPLACE TRIGGER` of this guard.
    pub fn create_sql(&self) -> String {
        format!(
            "CREATE OR REPLACE TRIGGER `{}` BEFORE {} ON `{}` FOR EACH ROW\n{}",
            self.name, self.event, self.table, self.body
        )
    }

    /// `DROP TRIGGER IF EXISTS` of this guard.
    pub fn drop_sql(&self) -> String {
        format!("DROP TRIGGER IF EXISTS `{}`", self.name)
    }
}

/// Every guard, in installation order.
pub const GUARDS: &[Guard] = &[
    Guard {
        name: "sync_writer_fence_guard_update",
        table: "sync_writer_fence",
        event: "UPDATE",
        body: "BEGIN
  IF NOT (NEW.`partition` <=> OLD.`partition`)
     OR NEW.`required_writer_version` IS NULL
     OR NEW.`required_writer_version` < OLD.`required_writer_version` THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.barrier_write_refused';
  END IF;
END",
    },
    Guard {
        name: "sync_writer_fence_guard_delete",
        table: "sync_writer_fence",
        event: "DELETE",
        body: "BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.barrier_write_refused';
END",
    },
    Guard {
        name: "sync_schema_meta_guard_update",
        table: "sync_schema_meta",
        event: "UPDATE",
        body: "BEGIN
  IF OLD.`required_writer_version` IS NOT NULL
     AND (NEW.`required_writer_version` IS NULL
          OR NEW.`required_writer_version` < OLD.`required_writer_version`) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.barrier_write_refused';
  END IF;
END",
    },
    Guard {
        name: "sync_schema_meta_guard_delete",
        table: "sync_schema_meta",
        event: "DELETE",
        body: "BEGIN
  IF OLD.`required_writer_version` IS NOT NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.barrier_write_refused';
  END IF;
END",
    },
    Guard {
        name: "sync_backfill_checkpoints_guard_insert",
        table: "sync_backfill_checkpoints",
        event: "INSERT",
        body: "BEGIN
  IF NOT (NEW.`state` <=> 'declared') OR NOT (NEW.`owner_epoch` <=> 0)
     OR NOT (NEW.`watermark` <=> 0) OR NOT (NEW.`observed_rows` <=> 0) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.barrier_write_refused';
  END IF;
END",
    },
    Guard {
        name: "sync_backfill_checkpoints_guard_update",
        table: "sync_backfill_checkpoints",
        event: "UPDATE",
        body: "BEGIN
  DECLARE session_login VARBINARY(512) DEFAULT USER();
  DECLARE guard_definer VARBINARY(512) DEFAULT CURRENT_USER();
  DECLARE fence INT DEFAULT NULL;
  DECLARE head BIGINT DEFAULT NULL;
  IF OLD.`state` = 'activated' THEN
    IF NOT (NEW.`partition` <=> OLD.`partition` AND NEW.`name` <=> OLD.`name`
            AND NEW.`schema_version` <=> OLD.`schema_version` AND NEW.`state` <=> OLD.`state`
            AND NEW.`watermark` <=> OLD.`watermark` AND NEW.`owner_epoch` <=> OLD.`owner_epoch`
            AND NEW.`observed_rows` <=> OLD.`observed_rows`
            AND NEW.`updated_at_ms` <=> OLD.`updated_at_ms`) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.barrier_write_refused';
    END IF;
  ELSEIF NOT (NEW.`partition` <=> OLD.`partition`) OR NOT (NEW.`name` <=> OLD.`name`)
     OR NEW.`owner_epoch` < OLD.`owner_epoch`
     OR (NEW.`watermark` < OLD.`watermark` AND NEW.`schema_version` = OLD.`schema_version`) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.barrier_write_refused';
  ELSEIF NEW.`state` = 'activated' THEN
    SELECT MAX(f.v) INTO fence FROM (
      SELECT `required_writer_version` AS v FROM `sync_writer_fence`
        WHERE `partition` = NEW.`partition`
      UNION ALL
      SELECT `required_writer_version` FROM `sync_schema_meta` WHERE `id` = 1) AS f;
    SELECT MAX(`max_commit_seq`) INTO head FROM `sync_partitions`
      WHERE `partition` = NEW.`partition`;
    IF NOT (LEFT(session_login, LENGTH(session_login) - LENGTH(SUBSTRING_INDEX(session_login, '@', -1)) - 1)
            <=> LEFT(guard_definer, LENGTH(guard_definer) - LENGTH(SUBSTRING_INDEX(guard_definer, '@', -1)) - 1))
       OR NEW.`owner_epoch` <> OLD.`owner_epoch`
       OR NEW.`schema_version` <> OLD.`schema_version`
       OR COALESCE(fence, 0) < NEW.`schema_version`
       OR NEW.`watermark` > COALESCE(head, 0) THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.barrier_write_refused';
    END IF;
  END IF;
END",
    },
    Guard {
        name: "sync_backfill_checkpoints_guard_delete",
        table: "sync_backfill_checkpoints",
        event: "DELETE",
        body: "BEGIN
  DECLARE session_login VARBINARY(512) DEFAULT USER();
  DECLARE guard_definer VARBINARY(512) DEFAULT CURRENT_USER();
  IF OLD.`state` = 'activated'
     OR NOT (LEFT(session_login, LENGTH(session_login) - LENGTH(SUBSTRING_INDEX(session_login, '@', -1)) - 1)
             <=> LEFT(guard_definer, LENGTH(guard_definer) - LENGTH(SUBSTRING_INDEX(guard_definer, '@', -1)) - 1)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sync.storage.barrier_write_refused';
  END IF;
END",
    },
];

/// The guards of `table`.
pub fn guards_of(table: &str) -> impl Iterator<Item = &'static Guard> + '_ {
    GUARDS.iter().filter(move |g| g.table == table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_guard_signals_the_code_and_names_are_unique_per_table_and_event() {
        for guard in GUARDS {
            assert!(guard.body.contains(GUARD_MESSAGE), "{}", guard.name);
            assert!(guard.name.starts_with(guard.table), "{}", guard.name);
            assert!(guard.name.len() <= 64, "{}", guard.name);
            let same = GUARDS
                .iter()
                .filter(|g| g.table == guard.table && g.event == guard.event)
                .count();
            assert_eq!(same, 1, "{}", guard.name);
        }
        assert_eq!(guards_of("sync_backfill_checkpoints").count(), 3);
    }

    #[test]
    fn the_statement_names_timing_event_and_table() {
        let guard = &GUARDS[0];
        assert!(guard.create_sql().starts_with(
            "CREATE OR REPLACE TRIGGER `sync_writer_fence_guard_update` \
             BEFORE UPDATE ON `sync_writer_fence` FOR EACH ROW\nBEGIN"
        ));
        assert_eq!(
            guard.drop_sql(),
            "DROP TRIGGER IF EXISTS `sync_writer_fence_guard_update`"
        );
    }
}
