//! Idempotency records (`storage-contract.md` §4.6, §9.1): first writer wins.

use sync_core::{Result, StoredPushResult};

use crate::pool::{col, Conn};
use crate::sql::quote_literal;

/// The stored result as JSON text: `$1` partition, `$2` client, `$3` commit id.
pub(crate) const GET_SQL: &str = "SELECT result::text FROM sync_push_results \
    WHERE partition = $1 AND client_id = $2 AND client_commit_id = $3";
/// Insert-if-absent of one result: `$1` partition, `$2` client, `$3` commit id, `$4` JSON.
pub(crate) const PUT_SQL: &str = "INSERT INTO sync_push_results \
    (partition, client_id, client_commit_id, result) VALUES ($1, $2, $3, ($4::text)::jsonb) \
    ON CONFLICT DO NOTHING";

/// The stored result; unreadable JSON is `sync.idempotency_cache_miss`.
pub(crate) fn get(
    conn: &mut Conn,
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
) -> Result<Option<StoredPushResult>> {
    let Some(row) = conn.query_opt(GET_SQL, &[&partition, &client_id, &client_commit_id])? else {
        return Ok(None);
    };
    let text: String = col(&row, 0)?;
    StoredPushResult::from_json(&text).map(Some)
}

/// The stored result from the JSON text [`GET_SQL`] returned (`None`: no
/// row); unreadable JSON is `sync.idempotency_cache_miss`, as in [`get`].
pub(crate) fn from_text(text: Option<&str>) -> Result<Option<StoredPushResult>> {
    text.map(StoredPushResult::from_json).transpose()
}

/// Stores the result unless the key already has one.
pub(crate) fn put(
    conn: &mut Conn,
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
    result: &StoredPushResult,
) -> Result<()> {
    let json = result.to_json();
    conn.execute(PUT_SQL, &[&partition, &client_id, &client_commit_id, &json])
        .map(|_| ())
}

/// The arguments of [`PUT_SQL`] as literals, for an `EXECUTE` of
/// `named::PUT_PUSH_RESULT` that travels in one simple-query message with
/// the `COMMIT`; `None` when a value holds NUL (no text literal can) — the
/// caller then uses [`put`].
pub(crate) fn put_args(
    partition: &str,
    client_id: &str,
    client_commit_id: &str,
    result: &StoredPushResult,
) -> Option<Vec<String>> {
    Some(vec![
        quote_literal(partition)?,
        quote_literal(client_id)?,
        quote_literal(client_commit_id)?,
        quote_literal(&result.to_json())?,
    ])
}
