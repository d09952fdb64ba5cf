//! The control routes under `/test/instances` and the forwarding of each
//! instance's sync routes (`docs/ssp2.md`, "The test control surface").
//!
//! Every control response is JSON; every refusal is
//! `{"error": {"code", "message", "details"}}` with a status of its code.
//! Storage work runs on the blocking pool.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post, put};
use axum::Router;
use serde_json::{json, Value};
use sync_core::RetentionPolicy;
use sync_engine::{ScopeMap, MAX_SAFE_INTEGER};
use tower::ServiceExt;

use super::fields::{boolean, integer, invalid, member, object, required_integer, text};
use super::instance::Instance;
use super::registry::Control;
use super::validators::{parse_commit_rule, parse_row_rules};
use crate::error::{CliCode, CliError, CliResult};

/// The optional server capabilities every instance has, in the names of
/// the reference's conformance harness.
pub const CAPABILITIES: [&str; 4] = [
    "backup-restore",
    "idempotency-fault",
    "validators",
    "commit-validators",
];

/// The largest control request body read (schemas are a few KiB).
pub const MAX_CONTROL_BODY_BYTES: usize = 1 << 20;

type Shared = Arc<Control>;

/// The control routes over `control`.
pub fn router(control: Arc<Control>) -> Router {
    let per = "/test/instances/{id}";
    Router::new()
        .route("/test/instances", post(create))
        .route(per, axum::routing::delete(close))
        .route(&format!("{per}/sync"), any(forward))
        .route(&format!("{per}/segments/{{segment}}"), any(forward))
        .route(&format!("{per}/realtime"), any(forward))
        .route(&format!("{per}/control/scopes"), post(set_scopes))
        .route(&format!("{per}/control/resolver"), post(set_resolver))
        .route(&format!("{per}/control/clock"), get(clock))
        .route(&format!("{per}/control/clock/advance"), post(advance))
        .route(&format!("{per}/control/prune"), post(prune))
        .route(&format!("{per}/control/seqs"), get(seqs))
        .route(&format!("{per}/control/tables/{{table}}/rows"), get(rows))
        .route(&format!("{per}/control/validators"), put(validators))
        .route(
            &format!("{per}/control/commit-validator"),
            put(commit_validator),
        )
        .route(
            &format!("{per}/control/idempotency-fault"),
            post(idempotency_fault),
        )
        .route(&format!("{per}/control/backup"), post(backup))
        .route(&format!("{per}/control/restore"), post(restore))
        .with_state(control)
}

fn status_of(error: &CliError) -> StatusCode {
    let code = error.code();
    if code == CliCode::ControlUnknownInstance.as_str() || code == "sync.storage.unknown_table" {
        StatusCode::NOT_FOUND
    } else if code == CliCode::ControlInstanceLimit.as_str() {
        StatusCode::TOO_MANY_REQUESTS
    } else if code == CliCode::ControlNoBackup.as_str() {
        StatusCode::CONFLICT
    } else if code == CliCode::RequestTooLarge.as_str() {
        StatusCode::PAYLOAD_TOO_LARGE
    } else if code == CliCode::ControlInvalidRequest.as_str()
        || code == CliCode::ControlUnsupported.as_str()
        || code.starts_with("schema.")
    {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    }
}

/// A control result as its response.
fn respond(result: CliResult<(StatusCode, Value)>) -> Response {
    match result {
        Ok((status, body)) => json_response(status, &body),
        Err(error) => {
            tracing::info!(code = error.code(), "control request refused");
            json_response(status_of(&error), &crate::output::error_json(&error))
        }
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok(body: Value) -> CliResult<(StatusCode, Value)> {
    Ok((StatusCode::OK, body))
}

/// Runs `work` on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> CliResult<T> + Send + 'static,
) -> CliResult<T> {
    tokio::task::spawn_blocking(work).await.map_err(|_| {
        CliError::new(CliCode::Io)
            .detail("path", "control")
            .detail("reason", "task_failed")
    })?
}

/// The request body as JSON (an empty body is `{}`), at most
/// [`MAX_CONTROL_BODY_BYTES`].
async fn json_body(request: Request) -> CliResult<Value> {
    let bytes = axum::body::to_bytes(request.into_body(), MAX_CONTROL_BODY_BYTES)
        .await
        .map_err(|error| {
            let error = error.into_inner();
            if error.is::<http_body_util::LengthLimitError>() {
                CliError::new(CliCode::RequestTooLarge).detail("max_bytes", MAX_CONTROL_BODY_BYTES)
            } else {
                invalid("body", "unreadable")
            }
        })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(&bytes).map_err(|_| invalid("body", "not_json"))
}

async fn with_instance<T: Send + 'static>(
    control: Shared,
    id: String,
    work: impl FnOnce(&Instance) -> CliResult<T> + Send + 'static,
) -> CliResult<T> {
    blocking(move || work(&*control.get(&id)?)).await
}

async fn create(State(control): State<Shared>, request: Request) -> Response {
    let result = async {
        let body = json_body(request).await?;
        let options = super::create::parse(&body)?;
        let (id, instance) = blocking(move || control.create(options)).await?;
        Ok((
            StatusCode::CREATED,
            json!({
                "id": id,
                "path": format!("/test/instances/{id}"),
                "partition": instance.partition(),
                "nowMs": instance.now_ms(),
                "capabilities": CAPABILITIES,
            }),
        ))
    }
    .await;
    respond(result)
}

async fn close(State(control): State<Shared>, Path(id): Path<String>) -> Response {
    let result = blocking(move || control.close(&id)).await;
    respond(result.and_then(|()| ok(json!({"closed": true}))))
}

/// `/test/instances/{id}/sync`, `…/segments/{segment}` and `…/realtime`:
/// the instance's own sync routes, with the path below the instance (a
/// WebSocket upgrade goes through: the connection's upgrade is handed on).
async fn forward(
    State(control): State<Shared>,
    Path(params): Path<Vec<(String, String)>>,
    mut request: Request,
) -> Response {
    let id = params
        .iter()
        .find(|(key, _)| key == "id")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let router = match control.get(&id).and_then(|instance| instance.router()) {
        Ok(router) => router,
        Err(error) => return respond(Err(error)),
    };
    let prefix = format!("/test/instances/{id}");
    let rest = request
        .uri()
        .path_and_query()
        .map(|pq| pq.as_str())
        .and_then(|pq| pq.strip_prefix(&prefix))
        .unwrap_or("/")
        .to_owned();
    match rest.parse::<Uri>() {
        Ok(uri) => *request.uri_mut() = uri,
        Err(_) => return respond(Err(invalid("path", "unparsable"))),
    }
    // The instance's router matches the path anew: the parameters this
    // route captured must not reach its extractors. The connection's
    // upgrade is all that is handed on.
    let upgrade = request
        .extensions_mut()
        .remove::<hyper::upgrade::OnUpgrade>();
    *request.extensions_mut() = axum::http::Extensions::new();
    if let Some(upgrade) = upgrade {
        request.extensions_mut().insert(upgrade);
    }
    match router.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

async fn set_scopes(
    State(control): State<Shared>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let result = async {
        let body = json_body(request).await?;
        let body = object(&body, "", &["actorId", "allowed"])?;
        let actor = text(body, "", "actorId")?;
        let allowed = scope_map(member(body, "", "allowed")?)?;
        with_instance(control, id, move |i| {
            i.set_allowed_scopes(&actor, allowed);
            Ok(())
        })
        .await?;
        ok(json!({}))
    }
    .await;
    respond(result)
}

/// `{"<variable>": ["v1", "*"]}`: lists of strings (`*` allows any).
fn scope_map(value: &Value) -> CliResult<ScopeMap> {
    let object = value
        .as_object()
        .ok_or_else(|| invalid("allowed", "not_an_object"))?;
    let mut map = ScopeMap::new();
    for (variable, values) in object {
        let field = format!("allowed.{variable}");
        let list = values
            .as_array()
            .ok_or_else(|| invalid(&field, "not_an_array"))?;
        let mut out = Vec::with_capacity(list.len());
        for v in list {
            let v = v.as_str().ok_or_else(|| invalid(&field, "not_a_string"))?;
            if !out.iter().any(|o: &String| o == v) {
                out.push(v.to_owned());
            }
        }
        map.insert(variable.clone(), out);
    }
    Ok(map)
}

async fn set_resolver(
    State(control): State<Shared>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let result = async {
        let body = json_body(request).await?;
        let failing = boolean(object(&body, "", &["failing"])?, "", "failing")?;
        with_instance(control, id, move |i| {
            i.set_resolver_failing(failing);
            Ok(())
        })
        .await?;
        ok(json!({"failing": failing}))
    }
    .await;
    respond(result)
}

async fn clock(State(control): State<Shared>, Path(id): Path<String>) -> Response {
    let result = with_instance(control, id, |i| Ok(i.now_ms())).await;
    respond(result.and_then(|now| ok(json!({"nowMs": now}))))
}

async fn advance(
    State(control): State<Shared>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let result = async {
        let body = json_body(request).await?;
        let ms = required_integer(object(&body, "", &["ms"])?, "", "ms", 0, MAX_SAFE_INTEGER)?;
        let now = with_instance(control, id, move |i| {
            if i.now_ms()
                .checked_add(ms)
                .is_none_or(|t| t > MAX_SAFE_INTEGER)
            {
                return Err(invalid("ms", "out_of_range"));
            }
            Ok(i.advance_clock(ms))
        })
        .await?;
        ok(json!({"nowMs": now}))
    }
    .await;
    respond(result)
}

async fn prune(
    State(control): State<Shared>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let result = async {
        let body = json_body(request).await?;
        let keys = ["activeWindowMs", "ageForceMs", "minRetainedCommits"];
        let body = object(&body, "", &keys)?;
        let mut policy = RetentionPolicy::default();
        if let Some(ms) = integer(body, "", "activeWindowMs", 0, MAX_SAFE_INTEGER)? {
            policy.active_window_ms = ms;
        }
        if let Some(ms) = integer(body, "", "ageForceMs", 0, MAX_SAFE_INTEGER)? {
            policy.age_force_ms = ms;
        }
        if let Some(n) = integer(body, "", "minRetainedCommits", 0, MAX_SAFE_INTEGER)? {
            policy.min_retained_commits = n;
        }
        let horizon = with_instance(control, id, move |i| i.prune(&policy)).await?;
        ok(json!({"horizonSeq": horizon}))
    }
    .await;
    respond(result)
}

async fn seqs(State(control): State<Shared>, Path(id): Path<String>) -> Response {
    let result = with_instance(control, id, |i| i.seqs()).await;
    respond(
        result.and_then(|(max, horizon)| ok(json!({"maxCommitSeq": max, "horizonSeq": horizon}))),
    )
}

async fn rows(
    State(control): State<Shared>,
    Path((id, table)): Path<(String, String)>,
) -> Response {
    let result = with_instance(control, id, move |i| i.rows(&table)).await;
    respond(result.and_then(|rows| ok(json!({"rows": rows}))))
}

async fn validators(
    State(control): State<Shared>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let result = async {
        let body = json_body(request).await?;
        let count = with_instance(control, id, move |i| {
            let rules = parse_row_rules(&body, i.schema())?;
            let count = rules.len();
            i.install_row_rules(rules);
            Ok(count)
        })
        .await?;
        ok(json!({"installed": count}))
    }
    .await;
    respond(result)
}

async fn commit_validator(
    State(control): State<Shared>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let result = async {
        let body = json_body(request).await?;
        let installed = with_instance(control, id, move |i| {
            let rule = parse_commit_rule(&body, i.schema())?;
            let installed = rule.is_some();
            i.install_commit_rule(rule);
            Ok(installed)
        })
        .await?;
        ok(json!({"installed": installed}))
    }
    .await;
    respond(result)
}

async fn idempotency_fault(State(control): State<Shared>, Path(id): Path<String>) -> Response {
    let result = with_instance(control, id, |i| {
        i.fail_next_idempotency_lookup();
        Ok(())
    })
    .await;
    respond(result.and_then(|()| ok(json!({"armed": true}))))
}

async fn backup(State(control): State<Shared>, Path(id): Path<String>) -> Response {
    let result = with_instance(control, id, |i| i.capture_backup()).await;
    respond(result.and_then(|()| ok(json!({"captured": true}))))
}

async fn restore(State(control): State<Shared>, Path(id): Path<String>) -> Response {
    let result = with_instance(control, id, |i| i.restore_backup()).await;
    respond(result.and_then(|epoch| ok(json!({"logEpoch": epoch}))))
}
