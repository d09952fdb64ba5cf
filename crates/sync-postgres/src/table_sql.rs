//! SQL text of the row-level statements of one application table
//! (`dialects.md` §6–§7), built once per ensured schema.

use std::sync::OnceLock;

use sync_core::{ColumnType, CompiledTable, IndexDef};

use crate::sql::quote_ident;
use crate::values::{column_array_param, column_element, column_param};

/// Placeholder number of the first projection value in [`TableSql::upsert`].
pub(crate) const UPSERT_FIRST_PROJECTION_PARAM: usize = 9;
/// Placeholder number of the first projection array in [`TableSql::upsert_batch`].
pub(crate) const UPSERT_BATCH_FIRST_PROJECTION_PARAM: usize = 10;

/// Row-level statements of one table.
#[derive(Debug, Clone)]
pub struct TableSql {
    /// The quoted table name.
    pub quoted: String,
    /// Projection column types in codec order (empty when not materialized).
    pub projection: Vec<ColumnType>,
    /// Scope replacement and row upsert in one statement:
    /// `$1` partition, `$2` row id, `$3` table, `$4`/`$5` scope variables and
    /// values, `$6` server version, `$7` scopes JSON, `$8` payload, `$9…` projections.
    pub upsert: String,
    /// The server-side name of [`upsert`](Self::upsert) for a push's
    /// deferred row write (`EXECUTE` with literal arguments, sent with the
    /// statements after it): a hash of its text.
    pub upsert_name: String,
    /// The row upsert of [`upsert`](Self::upsert) without its scope
    /// replacement, with the same parameters (`$3`…`$5` unused): the
    /// statement a Citus coordinator routes whole, sent after the scope
    /// replacement as plain statements (`routed_writes`).
    pub row_put: String,
    /// The server-side name of [`row_put`](Self::row_put): a hash of its
    /// text.
    pub row_put_name: String,
    /// The set-based form of [`upsert`](Self::upsert) (rows distinct by id):
    /// `$1` partition, `$2` table, `$3` row ids, `$4` server versions, `$5`
    /// scopes JSON, `$6` payloads (one element per row), `$7`/`$8`/`$9` scope
    /// entries' row ids, variables and values, `$10…` projection arrays.
    pub upsert_batch: String,
    /// `$1` partition, `$2` row id, `$3` table: row, scope entries, blob references.
    pub delete: String,
    /// `$1` partition, `$2` row id → version, scopes, payload.
    pub get_row: String,
    /// `$1` partition, `$2` row ids → row id, version, scopes, payload.
    pub get_rows: String,
    /// The push prelude's row read (`partition_lock::lock_for_push`): `$1`
    /// partition, `$2` row ids → row id, version, scopes, payload as hex
    /// text (read through the simple-query protocol, whatever the
    /// server's `bytea_output`).
    pub prelude_rows: String,
    /// The server-side name of [`prelude_rows`](Self::prelude_rows): a hash
    /// of its text, so a name never stands for two statements.
    pub prelude_rows_name: String,
    /// `$1` partition, `$2` row id → version, scopes.
    pub row_scopes: String,
    /// Scope scan pages by value count (see [`scan_page_sql`]).
    pub scan_pages: ScanPages,
    /// The first walk of a many-value scan, behind its density probe (see
    /// [`scan_walk_sql`]).
    pub scan_walk_gated: String,
    /// A further walk of a many-value scan found dense (see [`scan_walk_sql`]).
    pub scan_walk: String,
    /// Keyset scan: `$1` partition, `$2` after row id, `$3` limit.
    pub partition_scan: String,
    /// `$1` partition, `$2` row ids → row id, scopes (blob reference rows).
    pub scopes_of_rows: String,
}

impl TableSql {
    /// `PREPARE` of [`upsert`](Self::upsert) under
    /// [`upsert_name`](Self::upsert_name) (every parameter's type is fixed
    /// by its cast in the text).
    pub(crate) fn upsert_prepare(&self) -> String {
        format!("PREPARE {} AS {}", self.upsert_name, self.upsert)
    }

    /// `PREPARE` of [`row_put`](Self::row_put) under
    /// [`row_put_name`](Self::row_put_name): the types of the unused `$3`…`$5`
    /// are given, the others fixed by their casts.
    pub(crate) fn row_put_prepare(&self) -> String {
        format!(
            "PREPARE {}(text, text, text, text[], text[]) AS {}",
            self.row_put_name, self.row_put
        )
    }
}

/// See [`TableSql::prelude_rows`].
fn prelude_rows_sql(quoted: &str) -> String {
    format!(
        "SELECT t.\"_sync_row_id\", t.\"_sync_server_version\", t.\"_sync_scopes\"::text, \
         encode(t.\"_sync_payload\", 'hex'), encode(t.\"_sync_column_versions\", 'hex') FROM {} ",
        by_ids(quoted)
    )
}

/// The rows of `$2` (a `text[]` of row ids, repeats read once) in partition
/// `$1`, as `t` (a `FROM … WHERE` tail): one primary-key probe per id. The shape is for the plan
/// the server keeps, which after five executions may be a generic plan made
/// once per connection, perhaps while the table is empty and has no
/// statistics:
/// - the plain `"_sync_row_id" = ANY($2)` could get a generic plan that
///   reads the partition and filters it by the array, so that every read of
///   a push's candidate rows grew with the table;
/// - a lateral `= i.id` lookup ties, on an empty table, with any secondary
///   index that starts with the partition column, and the tie went to the
///   secondary index (a scan of the partition);
/// - the probe used here (the first row at or after the id in primary-key
///   order, `LIMIT 1`, then kept only if it is the id) is ordered by the
///   primary key, which no other index gives without a sort, so it wins on
///   an empty table as on a large one;
/// - `LIMIT cardinality($2)` never cuts the list. Without it a generic plan
///   assumes ten ids where a custom plan sees the real count, so the server
///   never chose the generic plan and planned the statement anew on every
///   push.
fn by_ids(quoted: &str) -> String {
    format!(
        "(SELECT DISTINCT unnest($2::text[]) AS id LIMIT cardinality($2::text[])) i \
         CROSS JOIN LATERAL (SELECT * FROM {quoted} WHERE \"_sync_partition\" = $1 \
           AND \"_sync_row_id\" >= i.id ORDER BY \"_sync_row_id\" LIMIT 1) t \
         WHERE t.\"_sync_row_id\" = i.id"
    )
}

/// The row reads of `by_ids` on the table named `quoted` (quoted
/// identifier): `$1` partition, `$2` row ids → row id, version, scopes,
/// payload, column versions (as `get_rows` runs it).
pub fn rows_by_ids_sql(quoted: &str) -> String {
    format!(
        "SELECT t.\"_sync_row_id\", {}, t.\"_sync_column_versions\" FROM {}",
        ROW_COLUMNS_T,
        by_ids(quoted)
    )
}

/// FNV-1a, 64 bits: a stable name for a statement text.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

const ROW_COLUMNS: &str = "\"_sync_server_version\", \"_sync_scopes\"::text, \"_sync_payload\"";
/// [`ROW_COLUMNS`] of the row source `t` of [`by_ids`].
const ROW_COLUMNS_T: &str =
    "t.\"_sync_server_version\", t.\"_sync_scopes\"::text, t.\"_sync_payload\"";

impl TableSql {
    /// Builds every statement of `table`.
    pub(crate) fn new(table: &CompiledTable) -> Self {
        let quoted = quote_ident(&table.name);
        let projection: Vec<ColumnType> = if table.materialize {
            table.columns.iter().map(|c| c.column_type).collect()
        } else {
            Vec::new()
        };
        let projection_names: Vec<String> = if table.materialize {
            table.columns.iter().map(|c| quote_ident(&c.name)).collect()
        } else {
            Vec::new()
        };
        let upsert = upsert_sql(&quoted, &projection, &projection_names);
        let row_put = row_put_sql(&quoted, &projection, &projection_names);
        Self {
            upsert_name: format!("sync_upsert_{:016x}", fnv1a(&upsert)),
            upsert,
            row_put_name: format!("sync_row_put_{:016x}", fnv1a(&row_put)),
            row_put,
            upsert_batch: upsert_batch_sql(&quoted, &projection, &projection_names),
            delete: delete_sql(&quoted),
            get_row: format!(
                "SELECT {ROW_COLUMNS}, \"_sync_column_versions\" FROM {quoted} \
                 WHERE \"_sync_partition\" = $1 AND \"_sync_row_id\" = $2"
            ),
            get_rows: rows_by_ids_sql(&quoted),
            prelude_rows: prelude_rows_sql(&quoted),
            prelude_rows_name: format!(
                "sync_prelude_rows_{:016x}",
                fnv1a(&prelude_rows_sql(&quoted))
            ),
            row_scopes: format!(
                "SELECT \"_sync_server_version\", \"_sync_scopes\"::text FROM {quoted} \
                 WHERE \"_sync_partition\" = $1 AND \"_sync_row_id\" = $2"
            ),
            scan_pages: ScanPages::default(),
            scan_walk_gated: scan_walk_sql(&quoted, true),
            scan_walk: scan_walk_sql(&quoted, false),
            partition_scan: format!(
                "SELECT \"_sync_row_id\", {ROW_COLUMNS} FROM {quoted} \
                 WHERE \"_sync_partition\" = $1 AND \"_sync_row_id\" > $2 \
                 ORDER BY \"_sync_row_id\" LIMIT $3"
            ),
            scopes_of_rows: format!(
                "SELECT t.\"_sync_row_id\", t.\"_sync_scopes\"::text FROM {}",
                by_ids(&quoted)
            ),
            quoted,
            projection,
        }
    }

    /// The exact lookup of `scan_rows_by_index`: `$1` partition, `$2` after
    /// row id, `$3` limit, `$4…` the non-NULL values; `nulls[i]` turns the
    /// i-th column test into `IS NULL`. `unique` is the declared index's.
    ///
    /// Each form lets only the looked-up index serve the whole lookup, so
    /// that the planner does not trade it for another declared index that
    /// covers fewer of its columns at the same estimate:
    /// - a unique index without NULLs holds at most one matching row: it is
    ///   read alone and the cursor tested on the result;
    /// - a non-unique index ends with `_sync_row_id` ([`crate::PostgresSql`]):
    ///   without NULLs the cursor is the row comparison
    ///   `("c1", …, "_sync_row_id") > ($4, …, $2)` over exactly its columns
    ///   (with the equalities it means `"_sync_row_id" > $2`), one ordered
    ///   range of the index, no sort however many rows share the value;
    /// - with NULLs, the tests as written and `"_sync_row_id" > $2`.
    pub(crate) fn index_lookup_sql(
        &self,
        columns: &[(String, ColumnType)],
        nulls: &[bool],
        unique: bool,
    ) -> String {
        let mut sql = format!(
            "SELECT \"_sync_row_id\", {ROW_COLUMNS} FROM {} WHERE \"_sync_partition\" = $1",
            self.quoted
        );
        let mut n = 4;
        let mut keys = Vec::new();
        let mut params = Vec::new();
        for ((name, column_type), is_null) in columns.iter().zip(nulls) {
            let column = quote_ident(name);
            if *is_null {
                sql.push_str(&format!(" AND {column} IS NULL"));
            } else {
                let param = column_param(*column_type, n);
                sql.push_str(&format!(" AND {column} = {param}"));
                keys.push(column);
                params.push(param);
                n += 1;
            }
        }
        let nulls = nulls.contains(&true);
        if unique && !nulls {
            return format!(
                "SELECT * FROM ({sql} LIMIT 1) AS u WHERE u.\"_sync_row_id\" > $2 LIMIT $3"
            );
        }
        if !nulls {
            keys.push("\"_sync_row_id\"".to_owned());
            params.push("$2".to_owned());
            sql.push_str(&format!(
                " AND ({}) > ({}) ORDER BY \"_sync_row_id\" LIMIT $3",
                keys.join(", "),
                params.join(", ")
            ));
            return sql;
        }
        sql.push_str(" AND \"_sync_row_id\" > $2 ORDER BY \"_sync_row_id\" LIMIT $3");
        sql
    }
}

/// The statement `scan_rows_by_index` runs for `index` of `table` (see
/// `TableSql::index_lookup_sql`): `$1` partition, `$2` after row id, `$3`
/// limit, `$4…` the non-NULL values; `nulls[i]` tests the i-th column for
/// `NULL`. Columns missing from `table` are left out of the text.
pub fn index_lookup_sql(table: &CompiledTable, index: &IndexDef, nulls: &[bool]) -> String {
    let columns: Vec<(String, ColumnType)> = index
        .columns
        .iter()
        .filter_map(|name| table.column(name).map(|c| (c.name.clone(), c.column_type)))
        .collect();
    TableSql::new(table).index_lookup_sql(&columns, nulls, index.unique)
}

/// The old entries are removed with `(var, value) NOT IN (…)` (a hashed
/// subplan; neither side holds NULLs): with the equivalent `NOT EXISTS`
/// anti-join the planner, before the table's first `ANALYZE`, probes the
/// primary key on its `(partition, tbl)` prefix and scans every entry of the
/// table, instead of `sync_row_scopes_by_row` (measured by `cargo xtask
/// bench`, W2).
fn upsert_sql(quoted: &str, projection: &[ColumnType], names: &[String]) -> String {
    format!(
        "WITH new_scopes AS (SELECT s.var, s.value FROM unnest($4::text[], $5::text[]) AS s(var, value)), \
         removed AS (DELETE FROM sync_row_scopes o WHERE o.partition = $1::text AND o.tbl = $3::text \
           AND o.row_id = $2::text AND (o.var, o.value) NOT IN (SELECT n.var, n.value FROM new_scopes n)), \
         added AS (INSERT INTO sync_row_scopes (partition, tbl, var, value, row_id) \
           SELECT $1::text, $3::text, n.var, n.value, $2::text FROM new_scopes n ON CONFLICT DO NOTHING) \
         {}",
        row_put_sql(quoted, projection, names)
    )
}

/// The row upsert of [`upsert_sql`] alone ([`TableSql::row_put`]).
fn row_put_sql(quoted: &str, projection: &[ColumnType], names: &[String]) -> String {
    let mut values = vec!["$1::text".to_owned(), "$2::text".to_owned()];
    for (i, column_type) in projection.iter().enumerate() {
        values.push(column_param(
            *column_type,
            UPSERT_FIRST_PROJECTION_PARAM + i,
        ));
    }
    values.extend(["$6::int8", "($7::text)::jsonb", "$8::bytea"].map(str::to_owned));
    values.push(format!(
        "${}::bytea",
        UPSERT_FIRST_PROJECTION_PARAM + projection.len()
    ));
    row_upsert(quoted, names, &format!("VALUES ({})", values.join(", ")))
}

/// The set-based [`upsert_sql`]: the same scope replacement for every row of
/// the batch (old entries of the batch's rows not among the new ones are
/// removed, new ones added) and one `INSERT … SELECT … FROM unnest(…)`, in
/// the batch's order.
fn upsert_batch_sql(quoted: &str, projection: &[ColumnType], names: &[String]) -> String {
    let mut arrays = vec![
        "$3::text[]".to_owned(),
        "$4::int8[]".to_owned(),
        "$5::text[]".to_owned(),
        "$6::bytea[]".to_owned(),
    ];
    let mut aliases = vec!["row_id".to_owned(), "version".to_owned()];
    aliases.extend(["scopes", "payload"].map(str::to_owned));
    let mut values = vec!["$1::text".to_owned(), "i.row_id".to_owned()];
    for (i, column_type) in projection.iter().enumerate() {
        arrays.push(column_array_param(
            *column_type,
            UPSERT_BATCH_FIRST_PROJECTION_PARAM + i,
        ));
        aliases.push(format!("p{i}"));
        values.push(column_element(*column_type, &format!("i.p{i}")));
    }
    arrays.push(format!(
        "${}::bytea[]",
        UPSERT_BATCH_FIRST_PROJECTION_PARAM + projection.len()
    ));
    aliases.push("column_versions".to_owned());
    aliases.push("ord".to_owned());
    values.extend(
        [
            "i.version",
            "(i.scopes)::jsonb",
            "i.payload",
            "i.column_versions",
        ]
        .map(str::to_owned),
    );
    // Only rows whose scope map changes (or that are new) touch the scope
    // index: a stored row's entries are exactly its stored map (`dialects.md`
    // §6.3 allows skipping equal maps), and every CTE reads the rows as they
    // were before this statement.
    format!(
        "WITH rescoped AS (SELECT i.row_id FROM unnest($3::text[], $5::text[]) AS i(row_id, scopes) \
           LEFT JOIN {quoted} t ON t.\"_sync_partition\" = $1::text AND t.\"_sync_row_id\" = i.row_id \
           WHERE t.\"_sync_scopes\" IS DISTINCT FROM (i.scopes)::jsonb), \
         new_scopes AS (SELECT s.row_id, s.var, s.value \
           FROM unnest($7::text[], $8::text[], $9::text[]) AS s(row_id, var, value) \
           WHERE s.row_id IN (SELECT r.row_id FROM rescoped r)), \
         removed AS (DELETE FROM sync_row_scopes o WHERE o.partition = $1::text AND o.tbl = $2::text \
           AND o.row_id IN (SELECT r.row_id FROM rescoped r) \
           AND (o.row_id, o.var, o.value) NOT IN (SELECT n.row_id, n.var, n.value FROM new_scopes n)), \
         added AS (INSERT INTO sync_row_scopes (partition, tbl, var, value, row_id) \
           SELECT $1::text, $2::text, n.var, n.value, n.row_id FROM new_scopes n ON CONFLICT DO NOTHING) \
         {}",
        row_upsert(
            quoted,
            names,
            &format!(
                "SELECT {} FROM unnest({}) WITH ORDINALITY AS i({}) ORDER BY i.ord",
                values.join(", "),
                arrays.join(", "),
                aliases.join(", ")
            )
        )
    )
}

/// `INSERT INTO <table> (<columns>) <source> ON CONFLICT … DO UPDATE`, the
/// row write shared by [`upsert_sql`] and [`upsert_batch_sql`]; `source`
/// yields partition, row id, the projections, version, scopes, payload,
/// column versions.
fn row_upsert(quoted: &str, names: &[String], source: &str) -> String {
    let mut columns = vec![
        "\"_sync_partition\"".to_owned(),
        "\"_sync_row_id\"".to_owned(),
    ];
    columns.extend(names.iter().cloned());
    columns.extend(
        [
            "\"_sync_server_version\"",
            "\"_sync_scopes\"",
            "\"_sync_payload\"",
            "\"_sync_column_versions\"",
        ]
        .map(str::to_owned),
    );
    let updates: Vec<String> = columns[2..]
        .iter()
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    format!(
        "INSERT INTO {quoted} ({}) {source} \
         ON CONFLICT (\"_sync_partition\", \"_sync_row_id\") DO UPDATE SET {}",
        columns.join(", "),
        updates.join(", ")
    )
}

fn delete_sql(quoted: &str) -> String {
    format!(
        "WITH removed_scopes AS (DELETE FROM sync_row_scopes \
           WHERE partition = $1::text AND tbl = $3::text AND row_id = $2::text), \
         removed_refs AS (DELETE FROM sync_blob_refs \
           WHERE partition = $1::text AND tbl = $3::text AND row_id = $2::text) \
         DELETE FROM {quoted} WHERE \"_sync_partition\" = $1::text AND \"_sync_row_id\" = $2::text"
    )
}

/// Rows the density probe of a many-value scan reads (see [`scan_walk_sql`]).
pub const SCAN_PROBE_ROWS: i64 = 64;

/// Matches among the probe's rows from which a many-value scan walks the
/// table instead of merging the values' ranges.
pub const SCAN_DENSE_MATCHES: i64 = 16;

/// The walk of a many-value scope scan of the table `quoted`: `$1`
/// partition, `$2` after row id, `$3` variable, `$4` values, `$5` rows to
/// walk (gated: the rows wanted) → row id, version, scopes, the payload of
/// each row whose stored map gives `$3` one of the values (`NULL` for the
/// others), and the number of rows the statement walks at most, in row-id
/// order.
///
/// The walk reads the table's primary key from the cursor on; it stands in
/// for the scope index, whose entries for a row are exactly the `(variable,
/// text value)` pairs of its stored map (`->>`), and both keys are ordered
/// by `COLLATE "C"` (the physical check refuses any other key collation).
/// With `gated`, the statement first counts the matches among the next
/// [`SCAN_PROBE_ROWS`] rows: below [`SCAN_DENSE_MATCHES`] a one-time filter
/// returns nothing (no row is read beyond the probe); otherwise it walks
/// `$5` rows when every probed row matched, else a quarter more than the
/// probe's density says hold `$5` matches (at most four times `$5`), so one
/// statement both decides and, for a dense filter, reads the page. The limits are computed or written `(SELECT …)`, which
/// every plan costs as a tenth of the rows the walk may read, so the plan
/// is a fast-start primary-key walk: with a bound `LIMIT $5` larger than
/// an unanalyzed table's row estimate, the custom plans collected the whole
/// partition by bitmap scan and sorted it (100 ms a page on 70 000 rows).
/// JIT and parallel plans, which that costing could reach on a large
/// table, are off on the storage's connections
/// (`PostgresConfig::short_statement_planning`).
pub fn scan_walk_sql(quoted: &str, gated: bool) -> String {
    let hit = "(x.\"_sync_scopes\" ->> $3::text) = ANY($4::text[])";
    let (probe, gate, size) = if gated {
        (
            format!(
                "WITH probe AS MATERIALIZED (SELECT \
                   count(*) FILTER (WHERE p.hit) >= {SCAN_DENSE_MATCHES} AS dense, \
                   CASE WHEN count(*) FILTER (WHERE p.hit) = count(*) THEN $5::int8 \
                     ELSE least($5::int8 * 4, $5::int8 * count(*) * 5 \
                       / (greatest(count(*) FILTER (WHERE p.hit), 1) * 4) + 16) END AS size \
                 FROM (SELECT {hit} AS hit FROM {quoted} AS x \
                   WHERE x.\"_sync_partition\" = $1::text AND x.\"_sync_row_id\" > $2::text \
                   ORDER BY x.\"_sync_row_id\" LIMIT (SELECT {SCAN_PROBE_ROWS}::int8)) AS p) "
            ),
            " AND (SELECT dense FROM probe)",
            "(SELECT size FROM probe)",
        )
    } else {
        (String::new(), "", "(SELECT $5::int8)")
    };
    format!(
        "{probe}SELECT x.\"_sync_row_id\", x.\"_sync_server_version\", x.\"_sync_scopes\"::text, \
           CASE WHEN {hit} THEN x.\"_sync_payload\" END, {size} \
         FROM {quoted} AS x \
         WHERE x.\"_sync_partition\" = $1::text AND x.\"_sync_row_id\" > $2::text{gate} \
         ORDER BY x.\"_sync_row_id\" LIMIT {size}"
    )
}

/// Most values a scan page merges range by range (see [`scan_page_sql`]);
/// larger lists use the `= ANY` form.
pub const MERGED_SCAN_VALUES: usize = 128;

/// Scan page texts of one table by value count, built on first use.
#[derive(Debug, Clone)]
pub struct ScanPages([OnceLock<String>; MERGED_SCAN_VALUES + 2]);

impl Default for ScanPages {
    fn default() -> Self {
        Self([const { OnceLock::new() }; MERGED_SCAN_VALUES + 2])
    }
}

impl ScanPages {
    /// The page of [`scan_page_sql`] for `values` values of `quoted`.
    pub(crate) fn get(&self, quoted: &str, values: usize) -> &str {
        // Every count above the merged range shares the `= ANY` text.
        self.0[values.min(MERGED_SCAN_VALUES + 1)].get_or_init(|| scan_page_sql(quoted, values))
    }
}

/// One scope scan page of the table `quoted`: `$1` partition, `$2` table,
/// `$3` variable, `$4` values, `$5` after row id, `$6` page size → row id,
/// version, scopes, payload, in row-id order.
///
/// The candidates are one ordered primary-key range per value
/// (`s.value = ($4)[k]`): for one value that range itself; for 2 to
/// [`MERGED_SCAN_VALUES`] values a `UNION ALL` of the ranges — a `Merge
/// Append` that stops after the page — made distinct by comparing each row
/// id with the one before it. Each range is cut at the page size too (the
/// first page of distinct ids lies within the first page of every range),
/// so even a plan that sorts the union sorts at most `values × page` ids.
/// The `= ANY` form of `dialects.md` §7 (kept
/// above [`MERGED_SCAN_VALUES`]) must collect and sort every matching entry
/// above the cursor, even for one value, so its page time grows with the
/// table; these do not. Each candidate reaches its row through a
/// `LEFT JOIN LATERAL` primary-key lookup, which the planner cannot turn
/// into a hash or merge join on unanalyzed tables (`docs/decisions.md`).
///
/// A range's cursor is the row comparison `(value, row_id) > (value, $5)`,
/// not `row_id > $5`: only the primary key can search it, so
/// `sync_row_scopes_by_row` `(partition, tbl, row_id)`, which orders by row
/// id too, cannot take the range by the cursor and filter out the other
/// values' entries — the plan an unanalyzed table got (both estimated at
/// one row), reading about 50 000 entries for a page of one list among
/// 100. The comparison starts at `value`, not `var`: its estimate is its
/// first column's, and `var > $3` looks empty to an analyzed table, which
/// made every custom plan look cheaper than the generic one
/// (`docs/decisions.md`, "Scan ranges the by-row index cannot take").
pub fn scan_page_sql(quoted: &str, values: usize) -> String {
    let arm = |k: usize| {
        format!(
            "SELECT s.row_id FROM sync_row_scopes s \
             WHERE s.partition = $1 AND s.tbl = $2 AND s.var = $3 AND s.value = ($4::text[])[{k}] \
               AND (s.value, s.row_id) > (($4::text[])[{k}], $5::text) \
             ORDER BY s.row_id"
        )
    };
    let candidates = match values {
        1 => format!("{} LIMIT $6", arm(1)),
        2..=MERGED_SCAN_VALUES => {
            let arms: Vec<String> = (1..=values)
                .map(|k| format!("({} LIMIT (SELECT $6::int8))", arm(k)))
                .collect();
            format!(
                "SELECT w.row_id FROM (SELECT u.row_id, \
                   lag(u.row_id) OVER (ORDER BY u.row_id) AS previous FROM ({}) AS u) AS w \
                 WHERE w.previous IS DISTINCT FROM w.row_id ORDER BY w.row_id LIMIT (SELECT $6::int8)",
                arms.join(" UNION ALL ")
            )
        }
        _ => "SELECT DISTINCT s.row_id FROM sync_row_scopes s \
              WHERE s.partition = $1 AND s.tbl = $2 AND s.var = $3 AND s.value = ANY($4::text[]) \
                AND s.row_id > $5 ORDER BY s.row_id LIMIT $6"
            .to_owned(),
    };
    format!(
        "SELECT c.row_id, t.\"_sync_server_version\", t.scopes, t.\"_sync_payload\" \
         FROM ({candidates}) AS c \
         LEFT JOIN LATERAL (SELECT x.\"_sync_server_version\", x.\"_sync_scopes\"::text AS scopes, \
           x.\"_sync_payload\" FROM {quoted} AS x \
           WHERE x.\"_sync_partition\" = $1 AND x.\"_sync_row_id\" = c.row_id LIMIT 1) AS t ON true \
         ORDER BY c.row_id"
    )
}
