//! The reference's version 2 client (`syncular-client` 0.15.48) as a
//! process: one JSON command per line on stdin, one JSON answer per line
//! on stdout. The version 3 interop tests (a workspace of their own, whose
//! clients cannot be linked beside this one) drive a version 2 client
//! through it.
//!
//! Commands (`op`): `open {baseUrl, token, clientId, schema}`,
//! `subscribe {id, lists}`, `upsert {values, baseVersion?}`,
//! `delete {rowId}`, `sync`, `rows`, `outcome {commit}`, `conflicts`,
//! `pending`. Every answer is `{"ok": true, …}` or
//! `{"ok": false, "error": "…"}`; a failed round is an answer, not an exit.

use std::io::{BufRead, Write};

use serde_json::{json, Map, Value};
use syncular_client::native_transport::HostTransport;
use syncular_client::{ClientLimits, Mutation, SyncClient, SyncOutcome};

/// The client and its transport, once `open` ran.
struct Session {
    sync: SyncClient,
    wire: HostTransport,
}

fn text<'a>(command: &'a Value, key: &str) -> Result<&'a str, String> {
    command[key]
        .as_str()
        .ok_or_else(|| format!("`{key}` must be a string"))
}

fn open(command: &Value) -> Result<Session, String> {
    let wire = HostTransport::from_config(&json!({
        "baseUrl": text(command, "baseUrl")?,
        "headers": {"Authorization": format!("Bearer {}", text(command, "token")?)},
    }))?;
    let sync = SyncClient::new(
        text(command, "clientId")?.to_owned(),
        &command["schema"],
        ClientLimits::default(),
    )?;
    Ok(Session { sync, wire })
}

fn run(session: &mut Session, command: &Value) -> Result<Value, String> {
    match text(command, "op")? {
        "subscribe" => {
            let lists = command["lists"]
                .as_array()
                .ok_or("`lists` must be an array")?
                .iter()
                .filter_map(|l| l.as_str().map(str::to_owned))
                .collect();
            session.sync.subscribe(
                text(command, "id")?.to_owned(),
                "todos".to_owned(),
                vec![("list_id".to_owned(), lists)],
                None,
            )?;
            Ok(json!({}))
        }
        "upsert" => {
            let values: Map<String, Value> = command["values"]
                .as_object()
                .cloned()
                .ok_or("`values` must be an object")?;
            let commit = session
                .sync
                .mutate(vec![Mutation::Upsert {
                    table: "todos".into(),
                    values,
                    base_version: command["baseVersion"].as_i64(),
                }])
                .map_err(|e| e.to_string())?;
            Ok(json!({"commit": commit}))
        }
        "delete" => {
            let commit = session
                .sync
                .mutate(vec![Mutation::Delete {
                    table: "todos".into(),
                    row_id: text(command, "rowId")?.to_owned(),
                    base_version: None,
                }])
                .map_err(|e| e.to_string())?;
            Ok(json!({"commit": commit}))
        }
        "sync" => match session.sync.sync_until_idle(&mut session.wire, Some(64)) {
            SyncOutcome::Ok(report) => Ok(json!({"report": report})),
            SyncOutcome::Failed {
                error_code,
                message,
            } => Err(format!("the round failed: {error_code}: {message}")),
        },
        "rows" => {
            let rows = session.sync.read_rows("todos")?;
            Ok(json!({"rows": rows}))
        }
        "outcome" => {
            let outcome = session.sync.commit_outcome(text(command, "commit")?)?;
            Ok(json!({"status": outcome.map(|o| o.status)}))
        }
        "conflicts" => Ok(json!({"conflicts": session.sync.conflicts()})),
        "pending" => Ok(json!({"pending": session.sync.pending_commit_ids()})),
        other => Err(format!("unknown op {other:?}")),
    }
}

fn answer(session: &mut Option<Session>, line: &str) -> Value {
    let command: Value = match serde_json::from_str(line) {
        Ok(command) => command,
        Err(e) => return json!({"ok": false, "error": format!("not JSON: {e}")}),
    };
    let result = if command["op"] == "open" {
        open(&command).map(|opened| {
            *session = Some(opened);
            json!({})
        })
    } else {
        match session.as_mut() {
            Some(session) => run(session, &command),
            None => Err("`open` first".to_owned()),
        }
    };
    match result {
        Ok(Value::Object(mut fields)) => {
            fields.insert("ok".into(), json!(true));
            Value::Object(fields)
        }
        Ok(other) => json!({"ok": true, "value": other}),
        Err(error) => json!({"ok": false, "error": error}),
    }
}

fn main() {
    let mut session = None;
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let reply = answer(&mut session, &line);
        if writeln!(stdout, "{reply}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
}
