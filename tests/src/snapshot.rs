//! A full observable snapshot of a database, for "is it exactly in its
//! before or its after state?": everything the storage API shows about the
//! named partitions, tables and push keys, plus raw facts read around the
//! API (row counts, columns, indexes and triggers of every table; on
//! MariaDB also a migration left open, which no API call shows).
//!
//! Values are kept as their `Debug` text under a stable key, so two
//! snapshots compare with `==` and [`diff`] names what differs. The one
//! field left out is a checkpoint's `updated_at_ms` (wall clock when
//! `ensure_schema` declares it).

use std::collections::BTreeMap;

use sync_core::{ReactionListQuery, ServerStorage};

/// What a snapshot looks at.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Partitions read (registered ones are added automatically).
    pub partitions: Vec<String>,
    /// Tables read through `inspect_table_rows` (stored layouts).
    pub tables: Vec<String>,
    /// Push results read: `(partition, client_id, client_commit_id)`.
    pub push_keys: Vec<(String, String, String)>,
}

/// One snapshot: `key → Debug text`.
pub type Snapshot = BTreeMap<String, String>;

/// Page size of every paged read.
const PAGE: i64 = 1000;

/// Everything the storage API shows about `observed` (committed state).
pub fn api(storage: &dyn ServerStorage, observed: &Observed) -> Snapshot {
    let mut snap = Snapshot::new();
    let mut put = |key: String, value: String| {
        snap.insert(key, value);
    };
    put(
        "marker".into(),
        format!("{:?}", storage.read_schema_marker()),
    );
    let registry = storage.list_partition_registry();
    put("registry".into(), format!("{registry:?}"));
    let mut partitions: Vec<String> = observed.partitions.clone();
    if let Ok(entries) = &registry {
        partitions.extend(entries.iter().map(|e| e.partition.clone()));
    }
    partitions.sort();
    partitions.dedup();
    for p in &partitions {
        let k = |what: &str| format!("{p}/{what}");
        put(k("counter"), format!("{:?}", storage.get_max_commit_seq(p)));
        put(k("horizon"), format!("{:?}", storage.get_horizon_seq(p)));
        put(
            k("fence"),
            format!("{:?}", storage.required_writer_version(p)),
        );
        // `ensure_schema` stamps the checkpoints it declares with the wall
        // clock: that one field is left out.
        let checkpoints = storage.read_checkpoints(p).map(|list| {
            list.into_iter()
                .map(|mut c| {
                    c.updated_at_ms = 0;
                    c
                })
                .collect::<Vec<_>>()
        });
        put(k("checkpoints"), format!("{checkpoints:?}"));
        put(
            k("clients"),
            format!("{:?}", storage.list_client_records(p)),
        );
        put(
            k("reactions"),
            format!(
                "{:?}",
                storage.list_reactions(
                    p,
                    &ReactionListQuery {
                        statuses: Vec::new(),
                        kinds: Vec::new(),
                        limit: PAGE,
                    }
                )
            ),
        );
        put(k("commits"), format!("{:?}", all_commits(storage, p)));
        for table in &observed.tables {
            put(
                k(&format!("rows/{table}")),
                format!("{:?}", all_rows(storage, p, table)),
            );
        }
    }
    for (p, client, commit) in &observed.push_keys {
        put(
            format!("{p}/push/{client}/{commit}"),
            format!("{:?}", storage.get_push_result(p, client, commit)),
        );
    }
    snap
}

fn all_commits(
    storage: &dyn ServerStorage,
    partition: &str,
) -> sync_core::Result<Vec<sync_core::CommitRecord>> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = storage.read_commits(partition, after, PAGE)?;
        let full = page.len() as i64 == PAGE;
        match page.last() {
            Some(last) => after = last.commit_seq,
            None => return Ok(out),
        }
        out.extend(page);
        if !full {
            return Ok(out);
        }
    }
}

fn all_rows(
    storage: &dyn ServerStorage,
    partition: &str,
    table: &str,
) -> sync_core::Result<Vec<sync_core::StoredRow>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = storage.inspect_table_rows(partition, table, after.as_deref(), PAGE)?;
        let full = page.len() as i64 == PAGE;
        match page.last() {
            Some(last) => after = Some(last.row_id.clone()),
            None => return Ok(out),
        }
        out.extend(page);
        if !full {
            return Ok(out);
        }
    }
}

/// Raw facts of a SQLite file: every table's row count and columns, and
/// every index and trigger, read on a connection of its own.
pub fn sqlite_raw(path: &std::path::Path) -> Snapshot {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap_or_else(|e| panic!("raw snapshot: open {}: {e}", path.display()));
    let query = |sql: &str| -> Vec<(String, String)> {
        let mut stmt = conn
            .prepare(sql)
            .unwrap_or_else(|e| panic!("raw snapshot: {sql}: {e}"));
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .unwrap_or_else(|e| panic!("raw snapshot: {sql}: {e}"));
        rows.map(|r| r.unwrap_or_else(|e| panic!("raw snapshot: {e}")))
            .collect()
    };
    let mut snap = Snapshot::new();
    let objects = query(
        "SELECT type || ' ' || name, coalesce(sql, '') FROM sqlite_master \
         WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
    );
    for (object, sql) in objects {
        if let Some(table) = object.strip_prefix("table ") {
            let count: i64 = conn
                .query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |r| {
                    r.get(0)
                })
                .unwrap_or_else(|e| panic!("raw snapshot: count {table}: {e}"));
            snap.insert(format!("raw/{object}/count"), count.to_string());
        }
        snap.insert(format!("raw/{object}"), sql);
    }
    snap
}

/// Raw facts of a Postgres schema: every table's row count and columns,
/// and every index and trigger, read on a connection of its own.
pub fn postgres_raw(url: &str, schema: &str) -> Snapshot {
    let mut client = postgres::Client::connect(url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("raw snapshot: connect {url}: {e}"));
    let mut snap = Snapshot::new();
    let tables = client
        .query(
            "SELECT c.relname::text, string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) \
             || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END, ', ' ORDER BY a.attnum) \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') GROUP BY c.relname ORDER BY 1",
            &[&schema],
        )
        .unwrap_or_else(|e| panic!("raw snapshot: tables: {e}"));
    let mut counts = Vec::new();
    for row in &tables {
        let table: String = row.get(0);
        snap.insert(format!("raw/table {table}"), row.get(1));
        counts.push(format!(
            "SELECT '{table}', count(*) FROM \"{schema}\".\"{table}\""
        ));
    }
    if !counts.is_empty() {
        for row in client
            .query(&counts.join(" UNION ALL "), &[])
            .unwrap_or_else(|e| panic!("raw snapshot: counts: {e}"))
        {
            let (table, count): (String, i64) = (row.get(0), row.get(1));
            snap.insert(format!("raw/table {table}/count"), count.to_string());
        }
    }
    let indexes = client
        .query(
            "SELECT indexname::text, indexdef FROM pg_indexes WHERE schemaname = $1",
            &[&schema],
        )
        .unwrap_or_else(|e| panic!("raw snapshot: indexes: {e}"));
    for row in indexes {
        let definition: String = row.get(1);
        snap.insert(
            format!("raw/index {}", row.get::<_, String>(0)),
            definition.replace(schema, "<schema>"),
        );
    }
    let triggers = client
        .query(
            "SELECT t.tgname::text, c.relname::text FROM pg_trigger t \
             JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND NOT t.tgisinternal",
            &[&schema],
        )
        .unwrap_or_else(|e| panic!("raw snapshot: triggers: {e}"));
    for row in triggers {
        snap.insert(
            format!("raw/trigger {}", row.get::<_, String>(0)),
            row.get(1),
        );
    }
    snap
}

/// Raw facts of a MariaDB database, read on `conn` (a plain connection of
/// its own whose current database it is): every table's row count and
/// columns, every index and trigger, and the migration a migrator left
/// open (the meta row's `migrating_to` and any journal entry not `done`,
/// which no API call shows). The database's own name is replaced by
/// `<database>`, so two databases in the same state read alike.
pub fn mariadb_raw(conn: &mut mysql::Conn) -> Snapshot {
    use mysql::prelude::Queryable;
    let database: String = conn
        .query_first("SELECT DATABASE()")
        .unwrap_or_else(|e| panic!("raw snapshot: current database: {e}"))
        .flatten()
        .unwrap_or_else(|| panic!("raw snapshot: the connection has no current database"));
    let anonymous = |text: String| text.replace(&database, "<database>");
    let mut snap = Snapshot::new();
    let tables: Vec<(String, String)> = conn
        .exec(
            "SELECT CAST(`TABLE_NAME` AS CHAR), CAST(GROUP_CONCAT(CONCAT(`COLUMN_NAME`, ' ', \
             `COLUMN_TYPE`, IF(`IS_NULLABLE` = 'NO', ' not null', ''), \
             IF(`IS_GENERATED` = 'NEVER', '', CONCAT(' as ', `GENERATION_EXPRESSION`))) \
             ORDER BY `ORDINAL_POSITION` SEPARATOR ', ') AS CHAR) \
             FROM `information_schema`.`COLUMNS` WHERE `TABLE_SCHEMA` = ? \
             GROUP BY `TABLE_NAME` ORDER BY 1",
            (&database,),
        )
        .unwrap_or_else(|e| panic!("raw snapshot: tables: {e}"));
    let mut counts = Vec::new();
    for (table, columns) in tables {
        counts.push(format!(
            "SELECT '{table}', COUNT(*) FROM `{}`",
            table.replace('`', "``")
        ));
        snap.insert(format!("raw/table {table}"), anonymous(columns));
    }
    if !counts.is_empty() {
        let rows: Vec<(String, i64)> = conn
            .query(counts.join(" UNION ALL "))
            .unwrap_or_else(|e| panic!("raw snapshot: counts: {e}"));
        for (table, count) in rows {
            snap.insert(format!("raw/table {table}/count"), count.to_string());
        }
    }
    // Index names are per table on MariaDB (every table has a `PRIMARY`).
    let indexes: Vec<(String, String, String)> = conn
        .exec(
            "SELECT CAST(`TABLE_NAME` AS CHAR), CAST(`INDEX_NAME` AS CHAR), \
             CAST(CONCAT(IF(MIN(`NON_UNIQUE`) = 0, 'unique ', ''), '(', \
             GROUP_CONCAT(CONCAT(`COLUMN_NAME`, COALESCE(CONCAT('(', `SUB_PART`, ')'), '')) \
             ORDER BY `SEQ_IN_INDEX` SEPARATOR ', '), ')') AS CHAR) \
             FROM `information_schema`.`STATISTICS` WHERE `TABLE_SCHEMA` = ? \
             GROUP BY `TABLE_NAME`, `INDEX_NAME`",
            (&database,),
        )
        .unwrap_or_else(|e| panic!("raw snapshot: indexes: {e}"));
    for (table, index, definition) in indexes {
        snap.insert(format!("raw/index {table}.{index}"), definition);
    }
    let triggers: Vec<(String, String)> = conn
        .exec(
            "SELECT CAST(`TRIGGER_NAME` AS CHAR), CAST(CONCAT(`ACTION_TIMING`, ' ', \
             `EVENT_MANIPULATION`, ' ON ', `EVENT_OBJECT_TABLE`, ': ', `ACTION_STATEMENT`) AS CHAR) \
             FROM `information_schema`.`TRIGGERS` WHERE `TRIGGER_SCHEMA` = ?",
            (&database,),
        )
        .unwrap_or_else(|e| panic!("raw snapshot: triggers: {e}"));
    for (trigger, definition) in triggers {
        snap.insert(format!("raw/trigger {trigger}"), anonymous(definition));
    }
    if snap.contains_key("raw/table sync_schema_meta") {
        let state = crate::mariadb::migration_state(conn);
        snap.insert(
            "raw/migration open".to_owned(),
            format!("{:?} {:?}", state.migrating_to, state.open_journal),
        );
    }
    snap
}

/// The keys whose values differ (or exist on one side only), each with both
/// values shortened, for failure messages.
pub fn diff(left: &Snapshot, right: &Snapshot) -> String {
    let mut out = Vec::new();
    let keys: std::collections::BTreeSet<&String> = left.keys().chain(right.keys()).collect();
    for key in keys {
        let (a, b) = (left.get(key), right.get(key));
        if a != b {
            let short = |v: Option<&String>| {
                v.map_or_else(
                    || "<absent>".to_owned(),
                    |s| s.chars().take(400).collect::<String>(),
                )
            };
            out.push(format!("  {key}:\n    {}\n    {}", short(a), short(b)));
        }
    }
    out.join("\n")
}
