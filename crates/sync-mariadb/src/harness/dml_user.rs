//! A writer that is not the storage: an account granted only `SELECT,
//! INSERT, UPDATE, DELETE` on the storage's database, as an application's
//! or an old binary's account would be. The migration barrier's guard
//! triggers must refuse it every write the protocol never makes (C-365).

use mysql::Value;
use sync_conformance::BarrierAttack;
use sync_core::Result;

use super::waits;
use crate::config::MariadbUrl;
use crate::pool::Conn;
use crate::scratch::DmlAccount;

/// The statement and parameters of an attack. A fence row is replaced with
/// `REPLACE` (a delete and an insert, past any update guard) and a
/// checkpoint forged with `INSERT … ON DUPLICATE KEY UPDATE` (an insert,
/// or an update of the stored row).
fn attack_sql(attack: BarrierAttack<'_>) -> (&'static str, Vec<&str>) {
    match attack {
        BarrierAttack::RaisePartitionFence(p) => (
            "UPDATE `sync_writer_fence` SET `required_writer_version` = 3 WHERE `partition` = ?",
            vec![p],
        ),
        BarrierAttack::LowerDatabaseFence => (
            "UPDATE `sync_schema_meta` SET `required_writer_version` = 1 WHERE `id` = 1",
            vec![],
        ),
        BarrierAttack::ClearDatabaseFence => (
            "UPDATE `sync_schema_meta` SET `required_writer_version` = NULL WHERE `id` = 1",
            vec![],
        ),
        BarrierAttack::DeleteMarker => ("DELETE FROM `sync_schema_meta`", vec![]),
        BarrierAttack::LowerPartitionFence(p) => (
            "UPDATE `sync_writer_fence` SET `required_writer_version` = 1 WHERE `partition` = ?",
            vec![p],
        ),
        BarrierAttack::DeletePartitionFence(p) => (
            "DELETE FROM `sync_writer_fence` WHERE `partition` = ?",
            vec![p],
        ),
        BarrierAttack::ReplacePartitionFence(p) => (
            "REPLACE INTO `sync_writer_fence` (`partition`, `required_writer_version`) VALUES (?, 1)",
            vec![p],
        ),
        BarrierAttack::ActivateCheckpoint(p, n) => (
            "UPDATE `sync_backfill_checkpoints` SET `state` = 'activated' \
             WHERE `partition` = ? AND `name` = ?",
            vec![p, n],
        ),
        BarrierAttack::DeleteCheckpoint(p, n) => (
            "DELETE FROM `sync_backfill_checkpoints` WHERE `partition` = ? AND `name` = ?",
            vec![p, n],
        ),
        BarrierAttack::InsertActivatedCheckpoint(p, n) => (
            "INSERT INTO `sync_backfill_checkpoints` (`partition`, `name`, `schema_version`, \
             `state`, `watermark`, `owner_epoch`, `observed_rows`, `updated_at_ms`) \
             SELECT ?, ?, `schema_version`, 'activated', 0, 0, 0, 0 FROM `sync_schema_meta` \
             WHERE `id` = 1 ON DUPLICATE KEY UPDATE `state` = 'activated'",
            vec![p, n],
        ),
    }
}

/// Runs `attack` in the database of `url` as a fresh account granted only
/// DML on that database ([`DmlAccount`]); the account is dropped before
/// returning, whatever the outcome.
pub(crate) fn attack_as_dml_user(url: &MariadbUrl, attack: BarrierAttack<'_>) -> Result<()> {
    let (sql, values) = attack_sql(attack);
    let params: Vec<Value> = values.into_iter().map(Value::from).collect();
    let account = DmlAccount::create(url)?;
    let outcome = Conn::open(&account.url().connection_opts(), waits())
        .and_then(|(mut conn, _)| conn.exec(sql, params).map(drop));
    let cleanup = account
        .remove()
        .map_err(|e| e.detail("cleanup", "dml_user"));
    outcome.and(cleanup)
}
