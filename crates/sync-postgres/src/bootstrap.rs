//! The base DDL (`dialects.md` §4.2, `tables.md` §3–§4).
//!
//! Catalog-driven and idempotent: one transaction, serialized per schema by
//! an advisory lock, that probes the catalog in one statement and creates
//! only what is absent. A warm start therefore issues no DDL and takes no
//! table lock, so it never queues behind in-flight pushes.

use sync_core::{Error, ErrorCode, Result};

use crate::citus::{self, DistributeOptions};
use crate::fence_trigger;
use crate::pool::{col, Conn};
use crate::session::{self, Isolation};

/// One internal relation and the statement creating it.
struct Relation {
    name: &'static str,
    ddl: &'static str,
}

/// Internal tables first, then their indexes (creation order).
const RELATIONS: &[Relation] = &[
    Relation {
        name: "sync_schema_meta",
        ddl: "CREATE TABLE sync_schema_meta (id INTEGER PRIMARY KEY CHECK (id = 1), \
              schema_version BIGINT NOT NULL, layouts TEXT NOT NULL DEFAULT '{}', \
              required_writer_version INTEGER)",
    },
    Relation {
        name: "sync_partitions",
        ddl: "CREATE TABLE sync_partitions (partition TEXT COLLATE \"C\" PRIMARY KEY, \
              max_commit_seq BIGINT NOT NULL DEFAULT 0, horizon_seq BIGINT NOT NULL DEFAULT 0)",
    },
    Relation {
        name: "sync_partition_registry",
        ddl: "CREATE TABLE sync_partition_registry (partition TEXT COLLATE \"C\" PRIMARY KEY, \
              log_epoch TEXT NOT NULL, epoch_required BOOLEAN NOT NULL DEFAULT FALSE, \
              last_authenticated_at_ms BIGINT NOT NULL)",
    },
    Relation {
        name: "sync_commits",
        ddl: "CREATE TABLE sync_commits (partition TEXT COLLATE \"C\" NOT NULL, \
              commit_seq BIGINT NOT NULL, client_id TEXT NOT NULL, client_commit_id TEXT NOT NULL, \
              actor_id TEXT NOT NULL, created_at_ms BIGINT NOT NULL, writer_version INTEGER, \
              PRIMARY KEY (partition, commit_seq))",
    },
    Relation {
        name: "sync_changes",
        ddl: "CREATE TABLE sync_changes (partition TEXT COLLATE \"C\" NOT NULL, \
              commit_seq BIGINT NOT NULL, idx INTEGER NOT NULL, tbl TEXT COLLATE \"C\" NOT NULL, \
              row_id TEXT COLLATE \"C\" NOT NULL, op SMALLINT NOT NULL, row_version BIGINT, \
              scopes JSONB NOT NULL, payload BYTEA, PRIMARY KEY (partition, commit_seq, idx))",
    },
    Relation {
        name: "sync_change_scopes",
        ddl: "CREATE TABLE sync_change_scopes (partition TEXT COLLATE \"C\" NOT NULL, \
              tbl TEXT COLLATE \"C\" NOT NULL, var TEXT COLLATE \"C\" NOT NULL, \
              value TEXT COLLATE \"C\" NOT NULL, commit_seq BIGINT NOT NULL, \
              PRIMARY KEY (partition, tbl, var, value, commit_seq))",
    },
    Relation {
        name: "sync_row_scopes",
        ddl: "CREATE TABLE sync_row_scopes (partition TEXT COLLATE \"C\" NOT NULL, \
              tbl TEXT COLLATE \"C\" NOT NULL, var TEXT COLLATE \"C\" NOT NULL, \
              value TEXT COLLATE \"C\" NOT NULL, row_id TEXT COLLATE \"C\" NOT NULL, \
              PRIMARY KEY (partition, tbl, var, value, row_id))",
    },
    Relation {
        name: "sync_tombstones",
        ddl: "CREATE TABLE sync_tombstones (partition TEXT COLLATE \"C\" NOT NULL, \
              tbl TEXT COLLATE \"C\" NOT NULL, row_id TEXT COLLATE \"C\" NOT NULL, \
              commit_seq BIGINT NOT NULL, PRIMARY KEY (partition, tbl, row_id))",
    },
    Relation {
        name: "sync_push_results",
        ddl: "CREATE TABLE sync_push_results (partition TEXT COLLATE \"C\" NOT NULL, \
              client_id TEXT COLLATE \"C\" NOT NULL, client_commit_id TEXT COLLATE \"C\" NOT NULL, \
              result JSONB NOT NULL, PRIMARY KEY (partition, client_id, client_commit_id))",
    },
    Relation {
        name: "sync_clients",
        ddl: "CREATE TABLE sync_clients (partition TEXT COLLATE \"C\" NOT NULL, \
              client_id TEXT COLLATE \"C\" NOT NULL, actor_id TEXT NOT NULL, \
              wire_version INTEGER NOT NULL DEFAULT 1, cursor BIGINT NOT NULL, \
              subscriptions JSONB NOT NULL, updated_at_ms BIGINT NOT NULL, \
              PRIMARY KEY (partition, client_id))",
    },
    Relation {
        name: "sync_reactions",
        ddl: "CREATE TABLE sync_reactions (partition TEXT COLLATE \"C\" NOT NULL, \
              idempotency_key TEXT COLLATE \"C\" NOT NULL, type TEXT NOT NULL, \
              version INTEGER NOT NULL, payload JSONB NOT NULL, source_client_id TEXT NOT NULL, \
              source_client_commit_id TEXT NOT NULL, source_commit_seq BIGINT NOT NULL, \
              created_at_ms BIGINT NOT NULL, available_at_ms BIGINT NOT NULL, \
              status TEXT NOT NULL CHECK (status IN ('pending', 'leased', 'completed', 'dead-letter')), \
              attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL, lease_owner TEXT, \
              lease_expires_at_ms BIGINT, completed_at_ms BIGINT, last_failure JSONB, \
              PRIMARY KEY (partition, idempotency_key))",
    },
    Relation {
        name: "sync_blob_refs",
        ddl: "CREATE TABLE sync_blob_refs (partition TEXT COLLATE \"C\" NOT NULL, \
              tbl TEXT COLLATE \"C\" NOT NULL, row_id TEXT COLLATE \"C\" NOT NULL, \
              blob_id TEXT COLLATE \"C\" NOT NULL, PRIMARY KEY (partition, tbl, row_id, blob_id))",
    },
    Relation {
        name: "sync_backfill_checkpoints",
        ddl: "CREATE TABLE sync_backfill_checkpoints (partition TEXT COLLATE \"C\" NOT NULL, \
              name TEXT COLLATE \"C\" NOT NULL, \
              schema_version INTEGER NOT NULL CHECK (schema_version >= 1), \
              state TEXT NOT NULL CHECK (state IN ('declared', 'backfilling', 'activated')), \
              watermark BIGINT NOT NULL DEFAULT 0 CHECK (watermark >= 0), \
              owner_epoch BIGINT NOT NULL DEFAULT 0 CHECK (owner_epoch >= 0), \
              observed_rows BIGINT NOT NULL DEFAULT 0 CHECK (observed_rows >= 0), \
              updated_at_ms BIGINT NOT NULL, PRIMARY KEY (partition, name))",
    },
    Relation {
        name: "sync_writer_fence",
        ddl: "CREATE TABLE sync_writer_fence (partition TEXT COLLATE \"C\" PRIMARY KEY, \
              required_writer_version INTEGER NOT NULL CHECK (required_writer_version >= 1))",
    },
    Relation {
        name: "_syncstore_segments",
        ddl: "CREATE TABLE _syncstore_segments (partition TEXT COLLATE \"C\" NOT NULL, \
              segment_id TEXT COLLATE \"C\" NOT NULL, scope_digest TEXT COLLATE \"C\" NOT NULL, \
              build_key TEXT COLLATE \"C\" NOT NULL, tbl TEXT NOT NULL, \
              media_type SMALLINT NOT NULL, schema_version INTEGER NOT NULL, \
              as_of_commit_seq BIGINT NOT NULL, row_cursor TEXT, page_rows BIGINT NOT NULL, \
              next_row_cursor TEXT, row_count BIGINT NOT NULL, byte_length BIGINT NOT NULL, \
              created_at_ms BIGINT NOT NULL, expires_at_ms BIGINT NOT NULL, bytes BYTEA NOT NULL, \
              PRIMARY KEY (partition, segment_id, scope_digest))",
    },
    Relation {
        name: "sync_commits_by_time",
        ddl: "CREATE INDEX sync_commits_by_time ON sync_commits (partition, created_at_ms)",
    },
    Relation {
        name: "sync_changes_by_table",
        ddl: "CREATE INDEX sync_changes_by_table ON sync_changes (partition, commit_seq, tbl, idx)",
    },
    Relation {
        name: "sync_row_scopes_by_row",
        ddl: "CREATE INDEX sync_row_scopes_by_row ON sync_row_scopes (partition, tbl, row_id)",
    },
    Relation {
        name: "sync_reactions_due",
        ddl: "CREATE INDEX sync_reactions_due ON sync_reactions \
              (partition, status, available_at_ms, created_at_ms, idempotency_key)",
    },
    Relation {
        name: "sync_reactions_lease",
        ddl: "CREATE INDEX sync_reactions_lease ON sync_reactions (partition, status, lease_expires_at_ms)",
    },
    Relation {
        name: "sync_reactions_completed",
        ddl: "CREATE INDEX sync_reactions_completed ON sync_reactions \
              (partition, status, completed_at_ms, idempotency_key)",
    },
    Relation {
        name: "sync_reactions_dead_letter",
        ddl: "CREATE INDEX sync_reactions_dead_letter ON sync_reactions \
              (partition, status, available_at_ms, idempotency_key)",
    },
    Relation {
        name: "sync_blob_refs_by_blob",
        ddl: "CREATE INDEX sync_blob_refs_by_blob ON sync_blob_refs (partition, blob_id)",
    },
    Relation {
        name: "_syncstore_segments_by_key",
        ddl: "CREATE INDEX _syncstore_segments_by_key ON _syncstore_segments \
              (partition, build_key, expires_at_ms)",
    },
    Relation {
        name: "_syncstore_segments_by_expiry",
        ddl: "CREATE INDEX _syncstore_segments_by_expiry ON _syncstore_segments (expires_at_ms)",
    },
];

/// The three columns older databases may lack (`tables.md` §1).
const LEGACY_COLUMNS: &[(&str, &str, &str)] = &[
    (
        "sync_clients",
        "wire_version",
        "ALTER TABLE sync_clients ADD COLUMN wire_version INTEGER NOT NULL DEFAULT 1",
    ),
    (
        "sync_commits",
        "writer_version",
        "ALTER TABLE sync_commits ADD COLUMN writer_version INTEGER",
    ),
    (
        "sync_schema_meta",
        "required_writer_version",
        "ALTER TABLE sync_schema_meta ADD COLUMN required_writer_version INTEGER",
    ),
];

const ADVISORY_LOCK_SQL: &str =
    "SELECT pg_advisory_xact_lock(hashtext('sync-bootstrap:' || current_schema()))";

/// One catalog probe: encoding, absent relations (in creation order), absent
/// legacy columns of existing tables, whether the `citus` extension is
/// installed. The writer fence is probed and installed by
/// [`fence_trigger::install`] once the tables exist.
const PROBE_SQL: &str = "SELECT current_setting('server_encoding'), \
    ARRAY(SELECT r.n FROM unnest($1::text[]) WITH ORDINALITY AS r(n, i) \
          WHERE to_regclass(r.n) IS NULL ORDER BY r.i), \
    ARRAY(SELECT x.t || '.' || x.c FROM unnest($2::text[], $3::text[]) AS x(t, c) \
          WHERE to_regclass(x.t) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_attribute a \
            WHERE a.attrelid = to_regclass(x.t) AND a.attname = x.c AND a.attnum > 0 \
              AND NOT a.attisdropped)), \
    EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')";

/// What the catalog probe found missing, and whether Citus is installed.
struct Missing {
    relations: Vec<String>,
    columns: Vec<String>,
    citus: bool,
}

/// Runs the bootstrap transaction on `conn`; returns whether the `citus`
/// extension is installed. With `distribution` set, on Citus, a bootstrap
/// that creates the storage tables distributes them by partition in the same
/// transaction.
pub(crate) fn run(
    conn: &mut Conn,
    statement_timeout_ms: Option<u64>,
    distribution: Option<&DistributeOptions>,
) -> Result<bool> {
    session::begin(
        conn,
        &session::begin_sql(Isolation::ReadCommitted, statement_timeout_ms, None),
    )?;
    match create_missing(conn, distribution) {
        Ok(citus) => session::commit(conn).map(|()| citus),
        Err(err) => {
            session::rollback(conn);
            Err(err)
        }
    }
}

fn create_missing(conn: &mut Conn, distribution: Option<&DistributeOptions>) -> Result<bool> {
    conn.query(ADVISORY_LOCK_SQL, &[])?;
    let missing = probe(conn)?;
    if missing.citus {
        citus::apply_ddl_settings(conn)?;
    }
    for relation in RELATIONS {
        if missing.relations.iter().any(|m| m == relation.name) {
            conn.simple(relation.ddl)?;
        }
    }
    for (table, column, ddl) in LEGACY_COLUMNS {
        if missing.columns.contains(&format!("{table}.{column}")) {
            conn.simple(ddl)?;
        }
    }
    fence_trigger::install(conn)?;
    if let Some(options) = distribution.filter(|_| missing.citus) {
        if missing.relations.iter().any(|m| m == "sync_partitions") {
            citus::distribute_schema(conn, options)?;
        }
    }
    Ok(missing.citus)
}

fn probe(conn: &mut Conn) -> Result<Missing> {
    let names: Vec<&str> = RELATIONS.iter().map(|r| r.name).collect();
    let tables: Vec<&str> = LEGACY_COLUMNS.iter().map(|c| c.0).collect();
    let columns: Vec<&str> = LEGACY_COLUMNS.iter().map(|c| c.1).collect();
    let row = conn.query_one(PROBE_SQL, &[&names, &tables, &columns])?;
    let encoding: String = col(&row, 0)?;
    if !encoding.eq_ignore_ascii_case("UTF8") {
        return Err(Error::new(ErrorCode::Backend)
            .detail("reason", "server_encoding_not_utf8")
            .detail("encoding", encoding));
    }
    Ok(Missing {
        relations: col(&row, 1)?,
        columns: col(&row, 2)?,
        citus: col(&row, 3)?,
    })
}
