//! A push's deferred writes as statements a Citus coordinator routes whole:
//! the append, and the scope replacement of a row upsert.
//!
//! On plain Postgres a deferred append is one statement: data-modifying
//! CTEs chain the counter, the commit, its changes, their scope entries and
//! its tombstones ([`commit_log::deferred_append_sql`]). Citus's router
//! planner takes no `INSERT` inside a CTE, so it plans that statement
//! recursively: each CTE becomes a subplan whose rows travel through the
//! coordinator, five trips to the worker for one append (about 7 ms of the
//! coordinator's time per push, `docs/benchmarks.md`, "Pushes through a
//! Citus coordinator"). The same append as one plain statement per table —
//! the counter upsert, then multi-row `VALUES` inserts, every value a
//! literal — is routed to the partition's shard statement by statement.
//!
//! The counter upsert raises (a failed `int8` cast, as the one-statement
//! form does with `int4`) when the counter is not at the sequence before
//! the predicted one; the caller holds the partition lock, so it never is.
//! These statements travel in the same simple-query message as the
//! one-statement form: a push's round trips do not change.
//!
//! A row upsert's statement ([`TableSql::upsert`](crate::table_sql::TableSql))
//! replaces the row's scope entries in CTEs too. Routed, the replacement is
//! a `DELETE` of the entries not among the new ones and a multi-row insert
//! of the new ones ([`routed_scopes_sql`]), followed by the row upsert alone
//! ([`TableSql::row_put`](crate::table_sql::TableSql)), prepared.

use sync_core::{NewCommit, StoredScopes};

use crate::commit_log::{literal_batch, DIVERGED, MAX_LITERAL_SQL};
use crate::sql::{bytea_literal, quote_literal};

/// The append of `commit` at the predicted sequence `seq`, as `;`-joined
/// statements; `None` when it does not fit the literal form
/// ([`literal_batch`], or a text holding NUL): the caller then appends at
/// once.
pub(crate) fn routed_append_sql(
    partition: &str,
    writer_version: i32,
    commit: &NewCommit,
    seq: i64,
) -> Option<String> {
    let batch = literal_batch(commit)?;
    if seq < 1 {
        return None;
    }
    let before = seq - 1;
    let p = quote_literal(partition)?;
    let mut statements = vec![
        format!(
            "INSERT INTO sync_partitions (partition, max_commit_seq) VALUES ({p}, {seq}) \
             ON CONFLICT (partition) DO UPDATE SET max_commit_seq = (CASE \
             WHEN sync_partitions.max_commit_seq = {before} THEN '{seq}' ELSE '{DIVERGED}' \
             END)::int8"
        ),
        format!(
            "INSERT INTO sync_commits \
             (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, \
             writer_version) VALUES ({p}, {seq}, {}, {}, {}, {}, {writer_version})",
            quote_literal(&commit.client_id)?,
            quote_literal(&commit.client_commit_id)?,
            quote_literal(&commit.actor_id)?,
            commit.created_at_ms,
        ),
    ];
    let mut changes = Vec::with_capacity(batch.idx.len());
    for i in 0..batch.idx.len() {
        changes.push(format!(
            "({p}, {seq}, {}, {}, {}, {}, {}, ({})::jsonb, {})",
            batch.idx[i],
            quote_literal(batch.tbl[i])?,
            quote_literal(batch.row_id[i])?,
            batch.op[i],
            batch.row_version[i].map_or_else(|| "NULL::int8".to_owned(), |v| v.to_string()),
            quote_literal(&batch.scopes[i])?,
            batch.payload[i].map_or_else(|| "NULL::bytea".to_owned(), bytea_literal),
        ));
    }
    if !changes.is_empty() {
        statements.push(format!(
            "INSERT INTO sync_changes \
             (partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload) \
             VALUES {}",
            changes.join(", ")
        ));
    }
    let mut scopes = Vec::with_capacity(batch.scope_tbl.len());
    for i in 0..batch.scope_tbl.len() {
        scopes.push(format!(
            "({p}, {}, {}, {}, {seq})",
            quote_literal(batch.scope_tbl[i])?,
            quote_literal(batch.scope_var[i])?,
            quote_literal(batch.scope_value[i])?,
        ));
    }
    if !scopes.is_empty() {
        statements.push(format!(
            "INSERT INTO sync_change_scopes (partition, tbl, var, value, commit_seq) \
             VALUES {} ON CONFLICT DO NOTHING",
            scopes.join(", ")
        ));
    }
    let mut tombstones = Vec::with_capacity(batch.tomb_tbl.len());
    for i in 0..batch.tomb_tbl.len() {
        tombstones.push(format!(
            "({p}, {}, {}, {seq})",
            quote_literal(batch.tomb_tbl[i])?,
            quote_literal(batch.tomb_row[i])?,
        ));
    }
    if !tombstones.is_empty() {
        statements.push(format!(
            "INSERT INTO sync_tombstones (partition, tbl, row_id, commit_seq) VALUES {} \
             ON CONFLICT (partition, tbl, row_id) DO UPDATE SET commit_seq = excluded.commit_seq",
            tombstones.join(", ")
        ));
    }
    let sql = statements.join("; ");
    (sql.len() <= MAX_LITERAL_SQL).then_some(sql)
}

/// The scope replacement of one row's upsert as plain statements: the
/// entries of `row_id` not in `scopes` deleted, those in `scopes` inserted
/// (kept where present). `None` when a text holds NUL.
pub(crate) fn routed_scopes_sql(
    partition: &str,
    table: &str,
    row_id: &str,
    scopes: &StoredScopes,
) -> Option<String> {
    let p = quote_literal(partition)?;
    let t = quote_literal(table)?;
    let r = quote_literal(row_id)?;
    let mut pairs = Vec::with_capacity(scopes.len());
    for (var, value) in scopes {
        pairs.push((quote_literal(var)?, quote_literal(value)?));
    }
    let mut delete =
        format!("DELETE FROM sync_row_scopes WHERE partition = {p} AND tbl = {t} AND row_id = {r}");
    if pairs.is_empty() {
        return Some(delete);
    }
    let kept: Vec<String> = pairs.iter().map(|(v, x)| format!("({v}, {x})")).collect();
    delete.push_str(&format!(" AND (var, value) NOT IN ({})", kept.join(", ")));
    let added: Vec<String> = pairs
        .iter()
        .map(|(v, x)| format!("({p}, {t}, {v}, {x}, {r})"))
        .collect();
    Some(format!(
        "{delete}; INSERT INTO sync_row_scopes (partition, tbl, var, value, row_id) VALUES {} \
         ON CONFLICT DO NOTHING",
        added.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::{routed_append_sql, routed_scopes_sql};
    use sync_core::{NewChange, NewCommit, StoredScopes};

    fn scopes(pairs: &[(&str, &str)]) -> StoredScopes {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn commit(changes: Vec<NewChange>) -> NewCommit {
        NewCommit {
            client_id: "c'1".into(),
            client_commit_id: "cc1".into(),
            actor_id: "a1".into(),
            created_at_ms: 1_700,
            changes,
        }
    }

    #[test]
    fn every_statement_is_a_plain_insert_without_ctes() {
        let sql = routed_append_sql(
            "p1",
            2,
            &commit(vec![
                NewChange::upsert("todos", "r1", 3, scopes(&[("list_id", "l1")]), vec![1]),
                NewChange::delete("todos", "r2", scopes(&[("list_id", "l1")])),
            ]),
            8,
        )
        .expect("fits");
        let statements: Vec<&str> = sql.split("; ").collect();
        assert_eq!(statements.len(), 5, "{sql}");
        assert!(statements
            .iter()
            .all(|s| s.starts_with("INSERT INTO sync_")));
        assert!(!sql.contains("WITH "), "no CTE: {sql}");
        // The counter moves from 7 to 8 or the statement raises.
        assert!(statements[0].contains("WHEN sync_partitions.max_commit_seq = 7 THEN '8'"));
        assert!(statements[1].contains("VALUES (E'p1', 8, E'c''1', E'cc1', E'a1', 1700, 2)"));
        assert!(statements[2].contains("(E'p1', 8, 0, E'todos', E'r1', 1, 3,"));
        assert!(statements[2].contains("(E'p1', 8, 1, E'todos', E'r2', 2, NULL::int8,"));
        assert!(
            statements[2].contains("NULL::bytea"),
            "a delete has no payload"
        );
        // One scope entry for the two changes of the same list.
        assert_eq!(statements[3].matches("E'list_id'").count(), 1);
        assert!(statements[4].starts_with("INSERT INTO sync_tombstones"));
        assert!(statements[4].contains("(E'p1', E'todos', E'r2', 8)"));
    }

    #[test]
    fn a_commit_without_changes_writes_the_counter_and_the_commit() {
        let sql = routed_append_sql("p1", 1, &commit(Vec::new()), 1).expect("fits");
        assert_eq!(sql.split("; ").count(), 2, "{sql}");
    }

    #[test]
    fn what_no_literal_can_hold_is_appended_at_once() {
        let nul = NewChange::upsert("todos", "r\0", 1, scopes(&[]), vec![1]);
        assert_eq!(routed_append_sql("p", 1, &commit(vec![nul]), 1), None);
        let big = NewChange::upsert("todos", "r", 1, scopes(&[]), vec![0; 64 * 1024]);
        assert_eq!(routed_append_sql("p", 1, &commit(vec![big]), 1), None);
        assert_eq!(routed_append_sql("p", 1, &commit(Vec::new()), 0), None);
    }

    #[test]
    fn a_scope_replacement_deletes_the_others_and_inserts_the_new() {
        let sql = routed_scopes_sql(
            "p1",
            "todos",
            "r'1",
            &scopes(&[("list_id", "l1"), ("org_id", "o1")]),
        )
        .expect("fits");
        let statements: Vec<&str> = sql.split("; ").collect();
        assert_eq!(
            statements[0],
            "DELETE FROM sync_row_scopes WHERE partition = E'p1' AND tbl = E'todos' \
             AND row_id = E'r''1' AND (var, value) NOT IN ((E'list_id', E'l1'), (E'org_id', E'o1'))"
        );
        assert!(statements[1].starts_with("INSERT INTO sync_row_scopes"));
        assert!(statements[1].contains("(E'p1', E'todos', E'org_id', E'o1', E'r''1')"));
        assert!(statements[1].ends_with("ON CONFLICT DO NOTHING"));
        // No scopes: every entry of the row goes.
        let none = routed_scopes_sql("p1", "todos", "r1", &scopes(&[])).expect("fits");
        assert_eq!(
            none,
            "DELETE FROM sync_row_scopes WHERE partition = E'p1' AND tbl = E'todos' AND row_id = E'r1'"
        );
        assert_eq!(
            routed_scopes_sql("p1", "todos", "r1", &scopes(&[("a", "\0")])),
            None
        );
    }

    /// The statements run on any Postgres: against temporary tables of the
    /// same columns and keys, an append moves the counter and writes every
    /// row; an append predicted from a counter that moved raises and
    /// writes nothing; a scope replacement leaves exactly the new entries.
    #[test]
    fn the_statements_write_what_the_one_statement_forms_write() {
        use crate::pool::Conn;
        let url = std::env::var("SYNCSTORE_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let client = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| {
            panic!("cannot reach PostgreSQL at {url} ({e}); start one with `pg_ctlcluster <version> main start`")
        });
        let mut conn = Conn::from_client(client);
        conn.simple(
            "CREATE TEMP TABLE sync_partitions (partition text PRIMARY KEY, max_commit_seq int8); \
             CREATE TEMP TABLE sync_commits (partition text, commit_seq int8, client_id text, \
               client_commit_id text, actor_id text, created_at_ms int8, writer_version int4, \
               PRIMARY KEY (partition, commit_seq)); \
             CREATE TEMP TABLE sync_changes (partition text, commit_seq int8, idx int4, tbl text, \
               row_id text, op int2, row_version int8, scopes jsonb, payload bytea, \
               PRIMARY KEY (partition, commit_seq, idx)); \
             CREATE TEMP TABLE sync_change_scopes (partition text, tbl text, var text, value text, \
               commit_seq int8, PRIMARY KEY (partition, tbl, var, value, commit_seq)); \
             CREATE TEMP TABLE sync_tombstones (partition text, tbl text, row_id text, \
               commit_seq int8, PRIMARY KEY (partition, tbl, row_id)); \
             CREATE TEMP TABLE sync_row_scopes (partition text, tbl text, var text, value text, \
               row_id text, PRIMARY KEY (partition, tbl, var, value, row_id)); \
             INSERT INTO sync_partitions VALUES ('p1', 7)",
        )
        .unwrap();
        let two = commit(vec![
            NewChange::upsert("todos", "r1", 3, scopes(&[("list_id", "l1")]), vec![1]),
            NewChange::delete("todos", "r2", scopes(&[("list_id", "l2")])),
        ]);
        conn.simple(&routed_append_sql("p1", 2, &two, 8).unwrap())
            .unwrap();
        let counts = "SELECT (SELECT max_commit_seq FROM sync_partitions)::text || ' ' || \
            (SELECT count(*) FROM sync_commits WHERE commit_seq = 8) || ' ' || \
            (SELECT count(*) FROM sync_changes WHERE commit_seq = 8) || ' ' || \
            (SELECT count(*) FROM sync_change_scopes WHERE commit_seq = 8) || ' ' || \
            (SELECT count(*) FROM sync_tombstones WHERE commit_seq = 8 AND row_id = 'r2')";
        assert_eq!(read(&mut conn, counts), "8 1 2 2 1");
        // Predicted from 7 again: the counter stands at 8.
        let err = conn
            .simple(&routed_append_sql("p1", 2, &commit(Vec::new()), 8).unwrap())
            .unwrap_err();
        assert!(format!("{err:?}").contains("diverged"), "{err:?}");
        assert_eq!(read(&mut conn, counts), "8 1 2 2 1");
        // A later delete of the same row moves its tombstone on.
        let again = commit(vec![NewChange::delete("todos", "r2", scopes(&[]))]);
        conn.simple(&routed_append_sql("p1", 2, &again, 9).unwrap())
            .unwrap();
        assert_eq!(
            read(
                &mut conn,
                "SELECT commit_seq::text FROM sync_tombstones WHERE row_id = 'r2'"
            ),
            "9"
        );

        let replace = |conn: &mut Conn, pairs: &[(&str, &str)]| {
            conn.simple(&routed_scopes_sql("p1", "todos", "r1", &scopes(pairs)).unwrap())
                .unwrap();
            read(
                conn,
                "SELECT coalesce(string_agg(var || '=' || value, ',' ORDER BY var), '') \
                 FROM sync_row_scopes WHERE row_id = 'r1'",
            )
        };
        assert_eq!(replace(&mut conn, &[("a", "1"), ("b", "2")]), "a=1,b=2");
        assert_eq!(replace(&mut conn, &[("b", "2"), ("c", "3")]), "b=2,c=3");
        assert_eq!(replace(&mut conn, &[]), "");
    }

    fn read(conn: &mut crate::pool::Conn, sql: &str) -> String {
        conn.simple(sql)
            .unwrap()
            .iter()
            .find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(row) => {
                    Some(row.get(0).unwrap_or_default().to_owned())
                }
                _ => None,
            })
            .unwrap()
    }
}
