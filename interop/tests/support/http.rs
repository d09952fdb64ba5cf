//! Raw HTTP against the server, for what no well-behaved client sends:
//! a wrong content type, an unknown token, a wire version the server does
//! not speak, a segment asked for with someone else's credentials.

use serde_json::Value;

/// The SSP2 media type.
pub const SSP2: &str = "application/vnd.syncular.sync.v2";

/// A response: its status, content type and body.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as the §10.1 JSON error object; fails the test unless it
    /// is one with `code`.
    pub fn error(&self, code: &str) -> Value {
        let body: Value = serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: the body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        });
        assert_eq!(body["code"], code, "unexpected error body {body:#}");
        for field in ["category", "recommendedAction", "message"] {
            assert!(body[field].is_string(), "{field} missing in {body:#}");
        }
        assert!(
            body["retryable"].is_boolean(),
            "retryable missing in {body:#}"
        );
        assert!(
            self.content_type
                .as_deref()
                .is_some_and(|t| t.starts_with("application/json")),
            "an error body is JSON, got content type {:?}",
            self.content_type
        );
        body
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

fn reply(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
    let mut response = response.unwrap_or_else(|e| panic!("the HTTP request failed: {e}"));
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response
        .body_mut()
        .read_to_vec()
        .unwrap_or_else(|e| panic!("reading the body failed: {e}"));
    Reply {
        status,
        content_type,
        body,
    }
}

/// `POST {base}/sync` with `content_type`, an optional bearer token and `body`.
pub fn post_sync(base: &str, content_type: &str, token: Option<&str>, body: &[u8]) -> Reply {
    let mut request = agent()
        .post(format!("{base}/sync"))
        .header("content-type", content_type);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    reply(request.send(body))
}

/// `GET {base}/segments/{id}` with a bearer token and `X-Syncular-Scopes`.
pub fn get_segment(base: &str, id: &str, token: &str, scopes_json: &str) -> Reply {
    reply(
        agent()
            .get(format!("{base}/segments/{id}"))
            .header("authorization", format!("Bearer {token}"))
            .header("x-syncular-scopes", scopes_json)
            .call(),
    )
}

/// A pull-only request of wire version 2, encoded by the reference codec.
pub fn pull_request(client_id: &str, schema_version: i32) -> Vec<u8> {
    use ssp2::model::{Frame, Message, MsgKind};
    ssp2::encode_message(&Message {
        wire_version: 2,
        msg_kind: MsgKind::Request,
        frames: vec![
            Frame::ReqHeader {
                client_id: client_id.to_owned(),
                schema_version,
                log_epoch: None,
            },
            Frame::PullHeader {
                limit_commits: 0,
                limit_snapshot_rows: 0,
                max_snapshot_pages: 0,
                accept: 1,
            },
        ],
    })
}
