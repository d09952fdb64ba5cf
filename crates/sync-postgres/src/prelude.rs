//! The push prelude (`StorageTransaction::begin_push`) in one round trip:
//! the idempotency read and the row reads travel in the push lock's
//! simple-query message (`partition_lock::lock_for_push`), after the gate
//! read, as `EXECUTE`s of named statements — the push-result read
//! (`named::GET_PUSH_RESULT`) and one row read per application table
//! (`TableSql::prelude_rows`, prepared per connection on first use). Every
//! value is an argument of those statements, never part of a statement's
//! text; each statement takes its own snapshot after the lock was granted.

use postgres::SimpleQueryRow;
use sync_core::{Error, PushPreludeRequest, Result, StoredPushResult, StoredRow};

use crate::named;
use crate::partition_lock::text;
use crate::pool::Conn;
use crate::push_results;
use crate::rows;
use crate::sql::quote_literal;
use crate::state::{resolve, Ensured};
use crate::table_sql::TableSql;

/// Largest prelude message this sends (larger ones read row by row).
const MAX_PRELUDE_SQL: usize = 256 * 1024;

/// One table's row read.
#[derive(Debug)]
struct TableRead {
    /// Index of the table in the request.
    index: usize,
    name: String,
    prepare_sql: String,
}

/// The reads of one prelude, rendered.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The statements, in the order [`read`] expects their rows: the
    /// push-result read, then one per table with row ids.
    pub(crate) statements: Vec<String>,
    tables: Vec<TableRead>,
    table_count: usize,
    /// `(name, PREPARE …)` of the named upserts of the tables the push
    /// names, when it defers its violations (its row writes may then
    /// travel with later statements as `EXECUTE`s).
    upserts: Vec<(String, String)>,
}

/// Renders the prelude's reads; `None` when a value cannot be a literal
/// (NUL), a table is unknown or the message would be too large: the
/// caller then reads one by one, where each method reports its own error.
///
/// `routed` (on Citus): a deferred row write is the row upsert alone after
/// plain scope statements (`routed_writes`), so that statement is the one
/// prepared.
pub(crate) fn plan(
    ensured: Option<&Ensured>,
    partition: &str,
    request: &PushPreludeRequest,
    routed: bool,
) -> Option<Plan> {
    let p = quote_literal(partition)?;
    let mut statements = vec![named::GET_PUSH_RESULT.execute_sql(&[
        p.clone(),
        quote_literal(&request.client_id)?,
        quote_literal(&request.client_commit_id)?,
    ])];
    let mut tables = Vec::new();
    let mut upserts: Vec<(String, String)> = Vec::new();
    let mut size = statements[0].len();
    for (index, (table, ids)) in request.rows.iter().enumerate() {
        let (_, sql) = resolve(ensured, table).ok()?;
        if ids.is_empty() {
            continue;
        }
        let (name, prepare) = if routed {
            (
                &sql.row_put_name,
                TableSql::row_put_prepare as fn(&TableSql) -> String,
            )
        } else {
            (
                &sql.upsert_name,
                TableSql::upsert_prepare as fn(&TableSql) -> String,
            )
        };
        if request.deferred_violations && !upserts.iter().any(|(n, _)| n == name) {
            upserts.push((name.clone(), prepare(sql)));
        }
        let ids: Vec<String> = ids
            .iter()
            .map(|id| quote_literal(id))
            .collect::<Option<_>>()?;
        let statement = format!(
            "EXECUTE {}({p}, ARRAY[{}]::text[])",
            sql.prelude_rows_name,
            ids.join(", ")
        );
        size += statement.len();
        if size > MAX_PRELUDE_SQL {
            return None;
        }
        statements.push(statement);
        tables.push(TableRead {
            index,
            name: sql.prelude_rows_name.clone(),
            prepare_sql: format!(
                "PREPARE {}(text, text[]) AS {}",
                sql.prelude_rows_name, sql.prelude_rows
            ),
        });
    }
    Some(Plan {
        statements,
        tables,
        table_count: request.rows.len(),
        upserts,
    })
}

/// Prepares the plan's per-table statements (row reads, and the named
/// upserts of a push that defers its violations) this connection lacks (one
/// round trip each, once per connection and table).
pub(crate) fn prepare(conn: &mut Conn, plan: &Plan) -> Result<()> {
    for table in &plan.tables {
        conn.ensure_named_text(&table.name, &table.prepare_sql)?;
    }
    for (name, prepare_sql) in &plan.upserts {
        conn.ensure_named_text(name, prepare_sql)?;
    }
    Ok(())
}

/// What the prelude's reads returned: the push result (its own error
/// inside) and the rows of each requested table, in the request's order.
pub(crate) type Reads = (
    Result<Option<StoredPushResult>>,
    Vec<Vec<Option<StoredRow>>>,
);

/// Decodes the rows of the plan's statements (`segments`, one list per
/// statement, in plan order).
pub(crate) fn read(
    plan: &Plan,
    request: &PushPreludeRequest,
    segments: Vec<Vec<SimpleQueryRow>>,
) -> Result<Reads> {
    if segments.len() != plan.statements.len() {
        return Err(Error::backend("push prelude: unexpected statements"));
    }
    let mut segments = segments.into_iter();
    let push_result = match segments.next().as_deref() {
        Some([]) => Ok(None),
        Some([row]) => push_results::from_text(text(row, 0)?),
        _ => return Err(Error::backend("push prelude: unexpected push results")),
    };
    let mut rows: Vec<Vec<Option<StoredRow>>> = request
        .rows
        .iter()
        .map(|(_, ids)| vec![None; ids.len()])
        .take(plan.table_count)
        .collect();
    for (table, found) in plan.tables.iter().zip(segments) {
        let found = found
            .iter()
            .map(decode_row)
            .collect::<Result<Vec<StoredRow>>>()?;
        let ids = &request.rows[table.index].1;
        rows[table.index] = rows::in_order(found, ids);
    }
    Ok((push_result, rows))
}

/// One row of [`TableSql::prelude_rows`](crate::table_sql::TableSql::prelude_rows).
fn decode_row(row: &SimpleQueryRow) -> Result<StoredRow> {
    let row_id = text(row, 0)?
        .ok_or_else(|| Error::backend("row id is NULL"))?
        .to_owned();
    let version = text(row, 1)?
        .ok_or_else(|| Error::backend("row version is NULL"))?
        .parse()
        .map_err(Error::backend)?;
    let payload = text(row, 3)?.map(hex).transpose()?;
    let column_versions = text(row, 4)?.map(hex).transpose()?;
    rows::stored_row(row_id, version, text(row, 2)?, payload, column_versions)
}

/// Bytes of `encode(…, 'hex')`.
fn hex(text: &str) -> Result<Vec<u8>> {
    let digit = |c: u8| -> Result<u8> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(Error::backend("payload is not hex")),
        }
    };
    let bytes = text.as_bytes();
    if bytes.len() % 2 != 0 {
        return Err(Error::backend("payload hex has odd length"));
    }
    bytes
        .chunks_exact(2)
        .map(|pair| Ok(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_payloads_decode() {
        assert_eq!(hex("007fFF").unwrap(), vec![0x00, 0x7f, 0xff]);
        assert_eq!(hex("").unwrap(), Vec::<u8>::new());
        assert!(hex("0").is_err());
        assert!(hex("zz").is_err());
    }

    #[test]
    fn a_nul_anywhere_leaves_the_reads_to_the_single_methods() {
        let request = PushPreludeRequest {
            client_id: "c\0".into(),
            client_commit_id: "k".into(),
            ..PushPreludeRequest::default()
        };
        assert!(plan(None, "p", &request, false).is_none());
        let request = PushPreludeRequest {
            client_id: "c".into(),
            client_commit_id: "k".into(),
            ..PushPreludeRequest::default()
        };
        let plan = plan(None, "p", &request, false).unwrap();
        assert_eq!(plan.statements.len(), 1);
        assert!(plan.statements[0].starts_with("EXECUTE sync_prelude_push_result("));
    }
}
