//! A writer role that is not the storage: granted only `SELECT, INSERT,
//! UPDATE, DELETE` on the storage's tables, as an application role or an
//! old binary's role would be. The migration barrier's guard triggers must
//! refuse it every write the protocol never makes (C-365).

use postgres::types::ToSql;
use sync_conformance::BarrierAttack;
use sync_core::{Error, Result};

use super::{fresh_schema_name, schema_client};
use crate::pool::Conn;
use crate::sql::quote_ident;

/// The statement and parameters of an attack.
fn attack_sql(attack: BarrierAttack<'_>) -> (&'static str, Vec<&str>) {
    match attack {
        BarrierAttack::RaisePartitionFence(p) => (
            "UPDATE sync_writer_fence SET required_writer_version = 3 WHERE partition = $1",
            vec![p],
        ),
        BarrierAttack::LowerDatabaseFence => (
            "UPDATE sync_schema_meta SET required_writer_version = 1 WHERE id = 1",
            vec![],
        ),
        BarrierAttack::ClearDatabaseFence => (
            "UPDATE sync_schema_meta SET required_writer_version = NULL WHERE id = 1",
            vec![],
        ),
        BarrierAttack::DeleteMarker => ("DELETE FROM sync_schema_meta", vec![]),
        BarrierAttack::LowerPartitionFence(p) => (
            "UPDATE sync_writer_fence SET required_writer_version = 1 WHERE partition = $1",
            vec![p],
        ),
        BarrierAttack::DeletePartitionFence(p) => (
            "DELETE FROM sync_writer_fence WHERE partition = $1",
            vec![p],
        ),
        BarrierAttack::ReplacePartitionFence(p) => (
            "INSERT INTO sync_writer_fence (partition, required_writer_version) VALUES ($1, 1) \
             ON CONFLICT (partition) DO UPDATE SET required_writer_version = 1",
            vec![p],
        ),
        BarrierAttack::ActivateCheckpoint(p, n) => (
            "UPDATE sync_backfill_checkpoints SET state = 'activated' \
             WHERE partition = $1 AND name = $2",
            vec![p, n],
        ),
        BarrierAttack::DeleteCheckpoint(p, n) => (
            "DELETE FROM sync_backfill_checkpoints WHERE partition = $1 AND name = $2",
            vec![p, n],
        ),
        BarrierAttack::InsertActivatedCheckpoint(p, n) => (
            "INSERT INTO sync_backfill_checkpoints (partition, name, schema_version, state, \
               watermark, owner_epoch, observed_rows, updated_at_ms) \
             SELECT $1, $2, schema_version, 'activated', 0, 0, 0, 0 FROM sync_schema_meta \
             WHERE id = 1 ON CONFLICT (partition, name) DO UPDATE SET state = 'activated'",
            vec![p, n],
        ),
    }
}

/// Runs `attack` in `schema` as a fresh role granted only DML on the
/// schema's tables; the role is dropped before returning, whatever the
/// outcome.
pub(crate) fn attack_as_dml_role(url: &str, schema: &str, attack: BarrierAttack<'_>) -> Result<()> {
    let role = fresh_schema_name("sync_dml");
    let r = quote_ident(&role);
    let s = quote_ident(schema);
    let mut conn = Conn::from_client(schema_client(url, schema)?);
    let (sql, values) = attack_sql(attack);
    let params: Vec<&(dyn ToSql + Sync)> =
        values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
    let outcome = conn
        .simple(&format!(
            "CREATE ROLE {r} LOGIN; GRANT USAGE ON SCHEMA {s} TO {r}; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {r}; \
             SET ROLE {r}; SET search_path TO {s}"
        ))
        .and_then(|_| conn.execute(sql, &params).map(|_| ()));
    let cleanup = conn
        .simple(&format!("RESET ROLE; DROP OWNED BY {r}; DROP ROLE {r}"))
        .map(|_| ())
        .map_err(|e: Error| e.detail("cleanup", "dml_role"));
    outcome?;
    cleanup
}
