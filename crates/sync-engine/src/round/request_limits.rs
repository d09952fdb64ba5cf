//! The size limits of one request (`engine.md` §8 item 8), checked right
//! after the single-frame invariants and before any storage call.

use crate::config::Limits;
use crate::wire::request::SyncRequest;
use crate::wire::wire_error::WireError;

fn over(limit: &str, max: usize) -> WireError {
    WireError::invalid_request("over_limit")
        .with_detail("limit", limit)
        .with_detail("max", max)
}

/// The first limit the request exceeds, as its wire error.
pub(crate) fn check(limits: &Limits, req: &SyncRequest) -> Result<(), WireError> {
    if req.subscriptions.len() > limits.max_subscriptions_per_request {
        return Err(over("subscriptions", limits.max_subscriptions_per_request));
    }
    let oversized = req.pushes.iter().flat_map(|c| &c.operations).any(|op| {
        op.payload
            .as_ref()
            .is_some_and(|p| p.len() > limits.max_payload_bytes)
    });
    if oversized {
        return Err(over("payload_bytes", limits.max_payload_bytes));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::request::{Operation, PushCommit, ReqHeader, Subscription};

    fn request(subscriptions: usize, payload: usize) -> SyncRequest {
        SyncRequest {
            wire_version: 2,
            header: ReqHeader {
                client_id: "c".into(),
                schema_version: 1,
                log_epoch: Some("e".into()),
            },
            pushes: vec![PushCommit {
                client_commit_id: "k".into(),
                operations: vec![Operation::upsert("tasks", "t1", None, vec![0; payload])],
            }],
            pull: None,
            subscriptions: (0..subscriptions)
                .map(|i| Subscription::new(format!("s{i}"), "tasks", Default::default(), -1))
                .collect(),
        }
    }

    fn limit(req: &SyncRequest, limits: &Limits) -> Option<String> {
        check(limits, req).err().map(|e| {
            assert_eq!(e.code, "sync.invalid_request");
            e.details
                .and_then(|d| d.get("limit").and_then(|l| l.as_str().map(str::to_owned)))
                .unwrap_or_default()
        })
    }

    #[test]
    fn limits_are_inclusive_and_named() {
        let limits = Limits {
            max_subscriptions_per_request: 3,
            max_payload_bytes: 10,
            ..Limits::default()
        };
        assert_eq!(limit(&request(3, 10), &limits), None);
        assert_eq!(
            limit(&request(4, 10), &limits).as_deref(),
            Some("subscriptions")
        );
        assert_eq!(
            limit(&request(3, 11), &limits).as_deref(),
            Some("payload_bytes")
        );
    }
}
