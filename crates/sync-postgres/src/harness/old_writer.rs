//! A fence-unaware (pre-RFC 0007) writer: its own connection, the partition
//! lock the old way (counter row insert-if-missing + `FOR UPDATE`), raw row
//! and commit inserts, one statement per step.

use sync_conformance::OldWriter;
use sync_core::Result;

use super::schema_client;
use crate::pool::{col, Conn};
use crate::sql::quote_ident;

const LOCK_INSERT_SQL: &str =
    "INSERT INTO sync_partitions (partition) VALUES ($1) ON CONFLICT (partition) DO NOTHING";
const LOCK_SQL: &str = "SELECT max_commit_seq FROM sync_partitions WHERE partition = $1 FOR UPDATE";
const NEXT_SEQ_SQL: &str = "UPDATE sync_partitions SET max_commit_seq = max_commit_seq + 1 \
    WHERE partition = $1 RETURNING max_commit_seq";
const INSERT_COMMIT_SQL: &str = "INSERT INTO sync_commits \
    (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version) \
    VALUES ($1, $2::int8, 'old-writer', 'old-' || ($2::int8)::text, 'old-actor', 0, $3::int4)";

/// One old writer's open transaction.
#[derive(Debug)]
pub(crate) struct PgOldWriter {
    conn: Conn,
    partition: String,
}

impl PgOldWriter {
    pub(crate) fn begin(url: &str, schema: &str, partition: &str) -> Result<Self> {
        let mut conn = Conn::from_client(schema_client(url, schema)?);
        conn.simple("BEGIN")?;
        Ok(Self {
            conn,
            partition: partition.to_owned(),
        })
    }
}

impl OldWriter for PgOldWriter {
    fn lock(&mut self) -> Result<()> {
        self.conn.execute(LOCK_INSERT_SQL, &[&self.partition])?;
        self.conn.query(LOCK_SQL, &[&self.partition]).map(|_| ())
    }

    fn upsert_row(
        &mut self,
        table: &str,
        row_id: &str,
        payload: &[u8],
        scopes_json: &str,
    ) -> Result<()> {
        let sql = format!(
            "INSERT INTO {} (\"_sync_partition\", \"_sync_row_id\", \"_sync_server_version\", \
               \"_sync_scopes\", \"_sync_payload\") VALUES ($1, $2, 1, ($3::text)::jsonb, $4) \
             ON CONFLICT (\"_sync_partition\", \"_sync_row_id\") DO UPDATE SET \
               \"_sync_server_version\" = excluded.\"_sync_server_version\", \
               \"_sync_scopes\" = excluded.\"_sync_scopes\", \"_sync_payload\" = excluded.\"_sync_payload\"",
            quote_ident(table)
        );
        self.conn
            .execute(&sql, &[&self.partition, &row_id, &scopes_json, &payload])
            .map(|_| ())
    }

    fn insert_commit(&mut self, writer_version: Option<i32>) -> Result<()> {
        let row = self.conn.query_one(NEXT_SEQ_SQL, &[&self.partition])?;
        let seq: i64 = col(&row, 0)?;
        self.conn
            .execute(INSERT_COMMIT_SQL, &[&self.partition, &seq, &writer_version])
            .map(|_| ())
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        self.conn.simple("COMMIT").map(|_| ())
    }
}
