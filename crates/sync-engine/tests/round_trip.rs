//! Push-then-pull round trips against the SQLite dialect.

mod support;

use sync_core::PushOperationResult;
use sync_engine::{Operation, PushResultStatus, ResponseItem, SectionStatus, SyncRequest};

use support::{
    commit, commits, fixture, pages, push_results, put_task, rejected_code, sub, sub_ends, task_op,
};

#[test]
fn push_then_bootstrap_then_incremental() {
    let f = fixture();
    let insert = commit("k1", vec![task_op(&f, "t1", "p1", "a", None)]);
    let items = f.round(
        "alice",
        &f.request("c1", vec![insert.clone()], vec![sub("tasks", "p1", -1)]),
    );
    let results = push_results(&items);
    assert_eq!(results[0].status, PushResultStatus::Applied);
    assert_eq!(results[0].commit_seq, Some(1));
    let page = pages(&items)[0];
    assert_eq!(page.rows.len(), 1);
    assert_eq!(
        (page.rows[0].row_id.as_str(), page.rows[0].row_version),
        ("t1", 1)
    );
    assert!(matches!(items.last(), Some(ResponseItem::End)));

    f.clock.advance(10);
    let update = commit("k2", vec![task_op(&f, "t1", "p1", "b", Some(1))]);
    let items = f.round(
        "alice",
        &f.request("c1", vec![update], vec![sub("tasks", "p1", 1)]),
    );
    assert_eq!(push_results(&items)[0].commit_seq, Some(2));
    let commits = commits(&items);
    assert_eq!(commits.len(), 1);
    assert_eq!(commits[0].changes[0].row_version, Some(2));
    assert_eq!(sub_ends(&items)[0].next_cursor, 2);

    // The replay of k1 is cached with its original sequence.
    let items = f.round("alice", &f.request("c1", vec![insert], vec![]));
    assert_eq!(push_results(&items)[0].status, PushResultStatus::Cached);
    assert_eq!(push_results(&items)[0].commit_seq, Some(1));
    assert_eq!(f.storage.get_max_commit_seq("P").expect("max"), 2);
}

#[test]
fn stale_base_version_is_a_persisted_conflict() {
    let f = fixture();
    let first = f.task("t1", "p1", "a");
    f.push(
        "alice",
        commit(
            "k1",
            vec![Operation::upsert("tasks", "t1", None, first.clone())],
        ),
    );
    let stale = commit("k2", vec![task_op(&f, "t1", "p1", "b", Some(7))]);
    let result = f.push("alice", stale.clone());
    assert_eq!(result.status, PushResultStatus::Rejected);
    match &result.results[..] {
        [PushOperationResult::Conflict {
            op_index: 0,
            server_version: 1,
            server_row,
            ..
        }] => assert_eq!(server_row, &first),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(f.push("alice", stale), result);
    assert_eq!(f.storage.get_max_commit_seq("P").expect("max"), 1);
}

#[test]
fn writes_outside_the_scope_are_forbidden() {
    let f = fixture();
    let foreign = commit("k1", vec![task_op(&f, "t9", "p2", "x", None)]);
    assert_eq!(
        rejected_code(&f.push("alice", foreign)),
        (0, "sync.forbidden".into())
    );
    assert_eq!(f.storage.get_max_commit_seq("P").expect("max"), 0);
}

#[test]
fn cursor_behind_the_horizon_resets() {
    let f = fixture();
    for i in 0..3 {
        let title = i.to_string();
        put_task(&f, &format!("k{i}"), "t1", "p1", &title);
    }
    f.storage
        .prune_commits_through(
            "P",
            &sync_core::CommitPruneQuery {
                log_epoch: f.epoch().expect("epoch"),
                through_seq: 2,
            },
        )
        .expect("prune");
    let items = f.round(
        "alice",
        &f.request("c1", vec![], vec![sub("tasks", "p1", 1)]),
    );
    assert!(items.iter().any(|i| matches!(i,
        ResponseItem::SubStart(s) if s.status == SectionStatus::Reset && s.reason_code == "sync.cursor_expired")));
    let items = f.round(
        "alice",
        &f.request("c1", vec![], vec![sub("tasks", "p1", 2)]),
    );
    assert!(items
        .iter()
        .any(|i| matches!(i, ResponseItem::Commit(c) if c.commit_seq == 3)));
}

#[test]
fn schema_floor_answers_without_work() {
    let f = fixture();
    let mut req = f.request("c1", vec![], vec![sub("tasks", "p1", -1)]);
    req.header.schema_version = 2;
    let items = f.round("alice", &req);
    assert!(matches!(&items[0], ResponseItem::Header(h) if h.required_schema_version == Some(1)));
    assert_eq!(items.len(), 2);
}

#[test]
fn json_lines_round_trip_a_whole_response() {
    let f = fixture();
    let insert = commit("k1", vec![task_op(&f, "t1", "p1", "a", None)]);
    let request = f.request("c1", vec![insert], vec![sub("tasks", "p1", -1)]);
    let text = request.to_json_lines();
    assert_eq!(
        SyncRequest::from_json_lines(&text).expect("parses"),
        request
    );
    let items = f.round("alice", &request);
    let rendered: String = items.iter().map(ResponseItem::to_json_lines).collect();
    assert_eq!(
        ResponseItem::parse_json_lines(&rendered).expect("parses"),
        items
    );
}

#[test]
fn a_second_operation_on_a_row_sees_the_first_one_of_its_commit() {
    // The push prelude reads each named row once, before any write; the
    // second operation on the same row must read the first one's write.
    let f = fixture();
    let both = commit(
        "k1",
        vec![
            task_op(&f, "t1", "p1", "a", None),
            task_op(&f, "t1", "p1", "b", Some(1)),
        ],
    );
    let result = f.push("alice", both);
    assert_eq!(result.status, PushResultStatus::Applied);
    let row = f
        .storage
        .get_row("P", "tasks", "t1")
        .expect("read")
        .expect("the row");
    assert_eq!(row.server_version, 2);
    assert_eq!(row.payload, f.task("t1", "p1", "b"));
}

#[test]
fn the_engine_debugs_its_schema_version_and_configuration() {
    let f = fixture();
    let text = format!("{:?}", f.engine);
    assert!(
        text.starts_with("Engine { schema_version: 1, config: EngineConfig {"),
        "{text}"
    );
    assert!(text.contains("activity_refresh_ms:"), "{text}");
    assert!(text.contains("limits:"), "{text}");
}
