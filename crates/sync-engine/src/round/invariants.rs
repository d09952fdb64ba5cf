//! Single-frame invariants re-checked at entry (`engine.md` §2.4, step E1).

use sync_core::limits::{MAX_CLIENT_COMMIT_ID_BYTES, MAX_CLIENT_ID_BYTES};

use crate::engine::MAX_SAFE_INTEGER;
use crate::wire::request::{OpKind, SyncRequest};
use crate::wire::wire_error::WireError;

fn safe(value: i64) -> bool {
    (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&value)
}

/// Whether every dialect can store `text` as a key of at most `max_bytes`
/// UTF-8 bytes: no U+0000 (Postgres `text` refuses it) and no wider than
/// the narrowest dialect's index allows (`docs/decisions.md`).
fn storable_key(text: &str, max_bytes: usize) -> bool {
    !text.contains('\0') && text.len() <= max_bytes
}

/// The first violated invariant, as its wire error.
pub(crate) fn check(req: &SyncRequest) -> Result<(), WireError> {
    let bad = |reason: &str| Err(WireError::invalid_request(reason));
    if !matches!(req.wire_version, 1..=3) {
        return bad("wire_version");
    }
    if req.header.client_id.is_empty() {
        return bad("client_id_empty");
    }
    if !storable_key(&req.header.client_id, MAX_CLIENT_ID_BYTES) {
        return bad("client_id_unstorable");
    }
    if req.header.schema_version < 1 {
        return bad("schema_version");
    }
    match (&req.header.log_epoch, req.wire_version) {
        (Some(_), 1) => return bad("log_epoch_on_wire_1"),
        (Some(epoch), _) if epoch.is_empty() => return bad("log_epoch_empty"),
        _ => {}
    }
    for commit in &req.pushes {
        if commit.client_commit_id.is_empty() {
            return bad("client_commit_id_empty");
        }
        if !storable_key(&commit.client_commit_id, MAX_CLIENT_COMMIT_ID_BYTES) {
            return bad("client_commit_id_unstorable");
        }
        if commit.operations.is_empty() {
            return Err(WireError::new(
                "sync.empty_commit",
                "commit has no operations",
            ));
        }
        for op in &commit.operations {
            match (op.op, op.payload.is_some()) {
                (OpKind::Upsert, false) => return bad("upsert_without_payload"),
                (OpKind::Delete, true) => return bad("delete_with_payload"),
                _ => {}
            }
            if op.base_version.is_some_and(|v| !safe(v)) {
                return bad("base_version_out_of_range");
            }
        }
    }
    if let Some(pull) = &req.pull {
        if pull.accept & 0xF0 != 0 {
            return bad("accept_reserved_bits");
        }
    }
    if req.pushes.is_empty() && req.pull.is_none() {
        return bad("nothing_to_do");
    }
    if req.pull.is_none() && !req.subscriptions.is_empty() {
        return bad("subscriptions_without_pull");
    }
    if req.subscriptions.iter().any(|s| !safe(s.cursor)) {
        return bad("cursor_out_of_range");
    }
    // The client record stores each subscription's id, table and scopes.
    let nul = |s: &String| s.contains('\0');
    let subscription_nul = req.subscriptions.iter().any(|s| {
        nul(&s.id) || nul(&s.table) || s.scopes.iter().any(|(k, vs)| nul(k) || vs.iter().any(nul))
    });
    if subscription_nul {
        return bad("subscription_nul");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::request::{Operation, PullHeader, PushCommit, ReqHeader, Subscription};

    fn request() -> SyncRequest {
        SyncRequest {
            wire_version: 2,
            header: ReqHeader {
                client_id: "c".into(),
                schema_version: 1,
                log_epoch: Some("e".into()),
            },
            pushes: vec![PushCommit {
                client_commit_id: "k".into(),
                operations: vec![Operation::delete("tasks", "t1")],
            }],
            pull: None,
            subscriptions: vec![],
        }
    }

    fn code(req: &SyncRequest) -> Option<(String, Option<String>)> {
        check(req).err().map(|e| {
            let reason = e
                .details
                .and_then(|d| d.get("reason").and_then(|r| r.as_str().map(str::to_owned)));
            (e.code, reason)
        })
    }

    #[test]
    fn valid_request_passes() {
        assert_eq!(code(&request()), None);
    }

    #[test]
    fn wire_versions_one_to_three_are_served() {
        for version in [2, 3] {
            let mut r = request();
            r.wire_version = version;
            assert_eq!(code(&r), None, "version {version}");
        }
        for version in [0, 4] {
            let mut r = request();
            r.wire_version = version;
            assert_eq!(
                code(&r).unwrap().1.as_deref(),
                Some("wire_version"),
                "version {version}"
            );
        }
    }

    #[test]
    fn each_invariant_has_its_code() {
        let mut r = request();
        r.pushes[0].operations.clear();
        assert_eq!(code(&r).unwrap().0, "sync.empty_commit");

        let mut r = request();
        r.pushes[0].operations[0].payload = Some(vec![1]);
        assert_eq!(code(&r).unwrap().1.as_deref(), Some("delete_with_payload"));

        let mut r = request();
        r.pushes[0].operations[0] = Operation {
            payload: None,
            ..Operation::upsert("tasks", "t1", None, vec![])
        };
        assert_eq!(
            code(&r).unwrap().1.as_deref(),
            Some("upsert_without_payload")
        );

        let mut r = request();
        r.wire_version = 1;
        assert_eq!(code(&r).unwrap().1.as_deref(), Some("log_epoch_on_wire_1"));

        let mut r = request();
        r.pushes.clear();
        assert_eq!(code(&r).unwrap().1.as_deref(), Some("nothing_to_do"));

        let mut r = request();
        r.subscriptions
            .push(Subscription::new("a", "tasks", Default::default(), -1));
        assert_eq!(
            code(&r).unwrap().1.as_deref(),
            Some("subscriptions_without_pull")
        );

        let mut r = request();
        r.pull = Some(PullHeader {
            accept: 0b1_0001,
            ..PullHeader::default()
        });
        assert_eq!(code(&r).unwrap().1.as_deref(), Some("accept_reserved_bits"));

        let mut r = request();
        r.header.client_id = "dev\0a".into();
        assert_eq!(code(&r).unwrap().1.as_deref(), Some("client_id_unstorable"));
        r.header.client_id = "c".repeat(MAX_CLIENT_ID_BYTES + 1);
        assert_eq!(code(&r).unwrap().1.as_deref(), Some("client_id_unstorable"));
        r.header.client_id = "c".repeat(MAX_CLIENT_ID_BYTES);
        assert_eq!(code(&r), None);

        let mut r = request();
        r.pushes[0].client_commit_id = "k\0".into();
        assert_eq!(
            code(&r).unwrap().1.as_deref(),
            Some("client_commit_id_unstorable")
        );

        let mut r = request();
        r.pushes.clear();
        r.pull = Some(PullHeader::default());
        let scopes = [("project_id".to_owned(), vec!["p\u{0}1".to_owned()])].into();
        r.subscriptions
            .push(Subscription::new("a", "tasks", scopes, -1));
        assert_eq!(code(&r).unwrap().1.as_deref(), Some("subscription_nul"));

        let mut r = request();
        r.pushes[0].operations[0].base_version = Some(MAX_SAFE_INTEGER + 1);
        assert_eq!(
            code(&r).unwrap().1.as_deref(),
            Some("base_version_out_of_range")
        );
    }

    fn reason(req: &SyncRequest) -> Option<String> {
        code(req).and_then(|(_, reason)| reason)
    }

    /// A pull-only request with one valid subscription.
    fn pull_request() -> SyncRequest {
        let mut r = request();
        r.pushes.clear();
        r.pull = Some(PullHeader::default());
        r.subscriptions
            .push(Subscription::new("s", "tasks", Default::default(), -1));
        r
    }

    #[test]
    fn header_invariants_have_their_reasons() {
        let mut r = request();
        r.wire_version = 1;
        r.header.log_epoch = None;
        assert_eq!(code(&r), None, "wire 1 without an epoch");
        r.header.log_epoch = Some(String::new());
        assert_eq!(reason(&r).as_deref(), Some("log_epoch_on_wire_1"));

        let mut r = request();
        r.header.log_epoch = Some(String::new());
        assert_eq!(reason(&r).as_deref(), Some("log_epoch_empty"));
        r.header.log_epoch = None;
        assert_eq!(code(&r), None, "wire 2 without an epoch");

        let mut r = request();
        r.header.client_id.clear();
        assert_eq!(reason(&r).as_deref(), Some("client_id_empty"));

        for (version, expected) in [
            (0, Some("schema_version")),
            (-1, Some("schema_version")),
            (2, None),
        ] {
            let mut r = request();
            r.header.schema_version = version;
            assert_eq!(reason(&r).as_deref(), expected, "schema version {version}");
        }
    }

    #[test]
    fn commit_ids_and_base_versions_have_their_reasons() {
        let mut r = request();
        r.pushes[0].client_commit_id.clear();
        assert_eq!(reason(&r).as_deref(), Some("client_commit_id_empty"));
        r.pushes[0].client_commit_id = "k".repeat(MAX_CLIENT_COMMIT_ID_BYTES + 1);
        assert_eq!(reason(&r).as_deref(), Some("client_commit_id_unstorable"));
        r.pushes[0].client_commit_id = "k".repeat(MAX_CLIENT_COMMIT_ID_BYTES);
        assert_eq!(code(&r), None);

        for (base, expected) in [
            (MAX_SAFE_INTEGER, None),
            (-MAX_SAFE_INTEGER, None),
            (0, None),
            (-MAX_SAFE_INTEGER - 1, Some("base_version_out_of_range")),
        ] {
            let mut r = request();
            r.pushes[0].operations[0].base_version = Some(base);
            assert_eq!(reason(&r).as_deref(), expected, "baseVersion {base}");
        }
    }

    #[test]
    fn subscription_invariants_have_their_reasons() {
        assert_eq!(code(&pull_request()), None);

        for (cursor, expected) in [
            (MAX_SAFE_INTEGER, None),
            (-MAX_SAFE_INTEGER, None),
            (MAX_SAFE_INTEGER + 1, Some("cursor_out_of_range")),
            (-MAX_SAFE_INTEGER - 1, Some("cursor_out_of_range")),
        ] {
            let mut r = pull_request();
            r.subscriptions[0].cursor = cursor;
            assert_eq!(reason(&r).as_deref(), expected, "cursor {cursor}");
        }

        // A NUL in each stored member alone: the id, the table, a scope
        // variable, a scope value.
        let mut r = pull_request();
        r.subscriptions[0].id = "s\0".into();
        assert_eq!(reason(&r).as_deref(), Some("subscription_nul"), "id");
        let mut r = pull_request();
        r.subscriptions[0].table = "tasks\0".into();
        assert_eq!(reason(&r).as_deref(), Some("subscription_nul"), "table");
        let mut r = pull_request();
        r.subscriptions[0].scopes = [("project\0".to_owned(), vec!["p1".to_owned()])].into();
        assert_eq!(reason(&r).as_deref(), Some("subscription_nul"), "variable");
        let mut r = pull_request();
        r.subscriptions[0].scopes = [("project_id".to_owned(), vec!["p1".to_owned()])].into();
        assert_eq!(code(&r), None, "clean scopes");
    }
}
