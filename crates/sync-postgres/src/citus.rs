//! A distributed Postgres (Citus) under the storage: the settings its DDL
//! transactions need and the distribution of a schema by partition.
//!
//! Whether the `citus` extension is installed is read once per bootstrap,
//! in the bootstrap's existing catalog probe; on plain Postgres nothing
//! here runs. On Citus, every transaction that issues storage DDL (the
//! bootstrap, the migration bump, the legacy upgrade, `distribute`) sets,
//! `LOCAL` to itself:
//!
//! - `citus.enable_unsafe_triggers = on`: the writer-fence trigger on
//!   `sync_commits` reads only the inserted row's partition in
//!   `sync_writer_fence` (colocated with it) and the reference table
//!   `sync_schema_meta`, so it is safe on a shard;
//! - `citus.multi_shard_modify_mode = 'sequential'`: the bootstrap's
//!   `CREATE OR REPLACE FUNCTION` and a migration's DDL follow statements on
//!   distributed tables in the same transaction, which Citus refuses after a
//!   parallel multi-shard operation.
//!
//! Every push transaction also carries [`PUSH_TRANSACTION_SETTINGS`]: the
//! coordinator propagates its `search_path` to the workers, so a trigger
//! function that names tables without a schema (the reference server's
//! fence function, run on the worker that holds the shard) resolves them in
//! the storage's schema.
//!
//! Row-based layout ([`DistributeOptions`]): every storage table with a
//! `partition` column and every application table (`_sync_partition`) is
//! hash-distributed by that column, colocated with `sync_partitions`; the
//! partition-less storage tables (`sync_schema_meta`) become reference
//! tables. Every primary key and unique index leads with the partition, so
//! every constraint holds per shard.

use postgres::types::ToSql;
use sync_core::{Error, ErrorCode, Result};

use crate::pool::{col, Conn};
use crate::sql::quote_ident;

/// The settings a DDL transaction needs on Citus (see the module docs).
const DDL_SETTINGS_SQL: &str = "SET LOCAL citus.enable_unsafe_triggers = on; \
    SET LOCAL citus.multi_shard_modify_mode = 'sequential'";

/// The table every distributed table is colocated with.
const ANCHOR: &str = "sync_partitions";

/// Options of a distribution by partition (`syncstore distribute`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DistributeOptions {
    /// Shards of the colocation group (`shard_count` of
    /// `create_distributed_table`); `None` takes the server's
    /// `citus.shard_count`.
    pub shard_count: Option<u32>,
}

/// What a distribution did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DistributeReport {
    /// Tables distributed by this call, with their distribution column.
    pub distributed: Vec<(String, String)>,
    /// Tables made reference tables by this call.
    pub reference: Vec<String>,
    /// Tables of the schema that are neither storage nor application
    /// tables, left as they are.
    pub left_local: Vec<String>,
    /// Whether the schema was fully distributed already (nothing was done).
    pub already_distributed: bool,
}

/// The statement every push transaction on Citus carries after its
/// `BEGIN`: `SET LOCAL` commands of the transaction are propagated to the
/// workers it touches, and the session's `search_path` is set `LOCAL` so
/// that it is one of them. Without it a worker runs a trigger function in
/// its own default `search_path`, where a name without a schema finds
/// nothing (`relation "sync_writer_fence" does not exist` in a distributed
/// schema).
///
/// It is one `DO` block because Citus propagates a `SET` with the text of
/// the message that carried it: sent beside other statements in one
/// simple-query message, the workers would run those statements too. Inside
/// the block each `SET` is a statement text of its own. The path is the
/// session's own (`current_setting`), so nothing is spliced into the SQL.
pub(crate) const PUSH_TRANSACTION_SETTINGS: &str = "DO $citus$BEGIN \
    SET LOCAL citus.propagate_set_commands = 'local'; \
    EXECUTE 'SET LOCAL search_path TO ' || current_setting('search_path'); END$citus$";

/// Sets the DDL settings `LOCAL` to the open transaction.
pub(crate) fn apply_ddl_settings(conn: &mut Conn) -> Result<()> {
    conn.simple(DDL_SETTINGS_SQL).map(|_| ())
}

/// One table of the schema that is not distributed yet.
struct Pending {
    name: String,
    /// The distribution column; `None` for a partition-less table.
    column: Option<String>,
    /// Whether it is a storage table (`sync_*`).
    storage: bool,
}

/// Ordinary tables of `current_schema()` absent from `pg_dist_partition`,
/// the anchor first.
const PENDING_SQL: &str = "SELECT c.relname::text, \
      CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid \
             AND a.attname = '_sync_partition' AND a.attnum > 0 AND NOT a.attisdropped) \
           THEN '_sync_partition' \
           WHEN starts_with(c.relname::text, 'sync_') AND EXISTS (SELECT 1 \
             FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'partition' \
             AND a.attnum > 0 AND NOT a.attisdropped) \
           THEN 'partition' END, \
      starts_with(c.relname::text, 'sync_') \
    FROM pg_catalog.pg_class c \
    WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n \
                            WHERE n.nspname = current_schema()) \
      AND c.relkind = 'r' \
      AND NOT EXISTS (SELECT 1 FROM pg_dist_partition d WHERE d.logicalrelid = c.oid) \
    ORDER BY c.relname::text <> 'sync_partitions', c.relname::text COLLATE \"C\"";

/// The anchor's distribution method (`h` hash, `n` none) and whether the
/// schema is a distributed schema (schema-based sharding).
const LAYOUT_SQL: &str = "SELECT (SELECT d.partmethod::text FROM pg_dist_partition d \
        WHERE d.logicalrelid = to_regclass('sync_partitions')), \
      EXISTS (SELECT 1 FROM pg_dist_schema s WHERE s.schemaid = (SELECT n.oid \
        FROM pg_catalog.pg_namespace n WHERE n.nspname = current_schema()))";

/// How the schema is laid out on Citus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Local tables on the coordinator.
    Local,
    /// A distributed schema (schema-based sharding): Citus places every
    /// table created in it on one node by itself.
    Schema,
    /// Distributed by partition (row-based).
    Rows,
}

/// Where the storage's tables live on a Citus cluster, as `syncstore
/// status` reports it ([`crate::PostgresStorage::citus_placement`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CitusPlacement {
    /// Local tables on the coordinator: nothing is distributed, every
    /// push and pull runs on the coordinator alone.
    Coordinator,
    /// A distributed schema (schema-based sharding): the whole schema
    /// lives on one node.
    DistributedSchema,
    /// Hash-distributed by partition (`syncstore distribute`).
    ByPartition,
}

impl CitusPlacement {
    /// The stable name (`coordinator`, `distributed_schema`,
    /// `by_partition`), as `--json` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Coordinator => "coordinator",
            Self::DistributedSchema => "distributed_schema",
            Self::ByPartition => "by_partition",
        }
    }
}

impl From<Layout> for CitusPlacement {
    fn from(layout: Layout) -> Self {
        match layout {
            Layout::Local => Self::Coordinator,
            Layout::Schema => Self::DistributedSchema,
            Layout::Rows => Self::ByPartition,
        }
    }
}

/// Whether the `citus` extension is installed in the database.
const CITUS_INSTALLED_SQL: &str =
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')";

/// The placement of the current schema; `None` without the `citus`
/// extension. Reads only the catalog.
pub(crate) fn placement(conn: &mut Conn) -> Result<Option<CitusPlacement>> {
    let row = conn.query_one(CITUS_INSTALLED_SQL, &[])?;
    if !col::<bool>(&row, 0)? {
        return Ok(None);
    }
    layout(conn).map(|layout| Some(layout.into()))
}

/// Reads the layout of the current schema.
pub(crate) fn layout(conn: &mut Conn) -> Result<Layout> {
    let row = conn.query_one(LAYOUT_SQL, &[])?;
    let method: Option<String> = col(&row, 0)?;
    let schema: bool = col(&row, 1)?;
    Ok(match (schema, method.as_deref()) {
        (true, _) => Layout::Schema,
        (false, Some("h")) => Layout::Rows,
        _ => Layout::Local,
    })
}

fn pending(conn: &mut Conn) -> Result<Vec<Pending>> {
    conn.query(PENDING_SQL, &[])?
        .iter()
        .map(|row| {
            Ok(Pending {
                name: col(row, 0)?,
                column: col(row, 1)?,
                storage: col(row, 2)?,
            })
        })
        .collect()
}

fn not_distributable(reason: &str) -> Error {
    Error::new(ErrorCode::NotDistributable).detail("reason", reason)
}

/// `distribute`: refuses a distributed schema and a schema whose tables
/// to distribute hold rows; distributes the rest (nothing when everything
/// is distributed already). Runs inside the caller's transaction, after
/// [`apply_ddl_settings`].
pub(crate) fn distribute_schema(
    conn: &mut Conn,
    options: &DistributeOptions,
) -> Result<DistributeReport> {
    if layout(conn)? == Layout::Schema {
        return Err(not_distributable("distributed_schema"));
    }
    let pending = pending(conn)?;
    for table in pending.iter().filter(|t| t.column.is_some()) {
        let sql = format!("SELECT EXISTS (SELECT 1 FROM {})", quote_ident(&table.name));
        let row = conn.query_one(&sql, &[])?;
        if col::<bool>(&row, 0)? {
            return Err(not_distributable("not_empty").detail("table", &table.name));
        }
    }
    distribute_pending(conn, pending, options)
}

/// After a migration's DDL on a schema distributed by partition: the new
/// tables join the layout (colocated, or reference tables). Nothing on a
/// local or distributed schema.
pub(crate) fn distribute_new_tables(conn: &mut Conn) -> Result<()> {
    if layout(conn)? != Layout::Rows {
        return Ok(());
    }
    let pending = pending(conn)?;
    distribute_pending(conn, pending, &DistributeOptions::default()).map(drop)
}

/// Serializes distributions database-wide: Citus's metadata is shared by
/// every schema, and concurrent `create_distributed_table` calls of two
/// schemas can deadlock on it.
const DISTRIBUTE_LOCK_SQL: &str = "SELECT pg_advisory_xact_lock(hashtext('sync-distribute'))";

fn distribute_pending(
    conn: &mut Conn,
    pending: Vec<Pending>,
    options: &DistributeOptions,
) -> Result<DistributeReport> {
    if pending.iter().any(|t| t.storage || t.column.is_some()) {
        conn.query(DISTRIBUTE_LOCK_SQL, &[])?;
    }
    let mut report = DistributeReport {
        already_distributed: pending.iter().all(|t| !t.storage && t.column.is_none()),
        ..DistributeReport::default()
    };
    for table in pending {
        let name = quote_ident(&table.name);
        match (&table.column, table.storage) {
            (Some(column), _) if table.name == ANCHOR => {
                let shards = options
                    .shard_count
                    .map(i32::try_from)
                    .transpose()
                    .map_err(|_| Error::invalid_argument("shard_count", "out_of_range"))?;
                let params: [&(dyn ToSql + Sync); 3] = [&name, column, &shards];
                conn.query(
                    "SELECT create_distributed_table(($1::text)::regclass, $2::text, \
                     shard_count => coalesce($3::int4, current_setting('citus.shard_count')::int4))",
                    &params,
                )?;
                report.distributed.push((table.name, column.clone()));
            }
            (Some(column), _) => {
                conn.query(
                    "SELECT create_distributed_table(($1::text)::regclass, $2::text, \
                     colocate_with => 'sync_partitions')",
                    &[&name, column],
                )?;
                report.distributed.push((table.name, column.clone()));
            }
            (None, true) => {
                conn.query(
                    "SELECT create_reference_table(($1::text)::regclass)",
                    &[&name],
                )?;
                report.reference.push(table.name);
            }
            (None, false) => report.left_local.push(table.name),
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use postgres::SimpleQueryMessage;

    use super::PUSH_TRANSACTION_SETTINGS;
    use crate::pool::Conn;

    /// On any server (a plain one keeps `citus.*` as a placeholder
    /// setting) the block is one statement that leaves the session's path
    /// exactly as it was, however its schema names are spelled, and turns
    /// the propagation on for the transaction only.
    #[test]
    fn the_push_settings_keep_the_session_path_and_last_one_transaction() {
        let url = std::env::var("SYNCSTORE_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let client = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| {
            panic!("cannot reach PostgreSQL at {url} ({e}); start one with `pg_ctlcluster <version> main start`")
        });
        let mut conn = Conn::from_client(client);
        let path = r#""we""ird $citus$ schema", "$user", public"#;
        conn.simple(&format!("SET search_path TO {path}")).unwrap();
        let before = read(&mut conn, "SELECT current_setting('search_path')");
        let messages = conn
            .simple(&format!(
                "BEGIN; {PUSH_TRANSACTION_SETTINGS}; SELECT current_setting('search_path'), \
                 current_setting('citus.propagate_set_commands')"
            ))
            .unwrap();
        let rows: Vec<(String, String)> = messages
            .iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(row) => Some((
                    row.get(0).unwrap_or_default().to_owned(),
                    row.get(1).unwrap_or_default().to_owned(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(rows, [(before.clone(), "local".to_owned())]);
        conn.simple("COMMIT").unwrap();
        assert_eq!(
            read(&mut conn, "SELECT current_setting('search_path')"),
            before
        );
        assert_eq!(
            read(
                &mut conn,
                "SELECT current_setting('citus.propagate_set_commands', true)"
            ),
            ""
        );
    }

    fn read(conn: &mut Conn, sql: &str) -> String {
        conn.simple(sql)
            .unwrap()
            .iter()
            .find_map(|m| match m {
                SimpleQueryMessage::Row(row) => Some(row.get(0).unwrap_or_default().to_owned()),
                _ => None,
            })
            .unwrap()
    }
}
