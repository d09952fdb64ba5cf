//! The text forms other programs read: the checkpoint states as stored in
//! `sync_backfill_checkpoints.state` (`tables.md`), change operations as
//! the engine's JSON and the operator tool print them, unfinished-checkpoint
//! resolutions as a migration plan prints them, the fence trigger's
//! states and causes as `syncstore status` prints them, and column types
//! as schema input and stored layouts spell them.

use sync_core::{
    ChangeOp, CheckpointState, ColumnType, FenceTriggerState, Resolution, TriggerDifference,
};

#[test]
fn checkpoint_states_have_their_stored_names_and_parse_back() {
    let states = [
        CheckpointState::Declared,
        CheckpointState::Backfilling,
        CheckpointState::Activated,
    ];
    let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    assert_eq!(names, ["declared", "backfilling", "activated"]);
    for state in states {
        assert_eq!(CheckpointState::parse(state.as_str()), Some(state));
    }
    assert_eq!(CheckpointState::parse("Activated"), None);
    assert_eq!(CheckpointState::parse(""), None);
}

const TRIGGER_STATES: [FenceTriggerState; 7] = [
    FenceTriggerState::NoCommitTable,
    FenceTriggerState::Enforced,
    FenceTriggerState::Missing,
    FenceTriggerState::Disabled,
    FenceTriggerState::Foreign,
    FenceTriggerState::Outdated,
    FenceTriggerState::Tampered(TriggerDifference::Condition),
];

#[test]
fn only_the_installed_enabled_current_trigger_enforces_the_fence() {
    let enforced: Vec<FenceTriggerState> = TRIGGER_STATES
        .into_iter()
        .filter(|s| s.is_enforced())
        .collect();
    assert_eq!(enforced, [FenceTriggerState::Enforced]);
}

#[test]
fn a_trigger_that_does_not_enforce_names_its_stable_cause() {
    let causes: Vec<Option<&str>> = TRIGGER_STATES.iter().map(|s| s.cause()).collect();
    assert_eq!(
        causes,
        [
            None,
            None,
            Some("trigger_missing"),
            Some("trigger_disabled"),
            Some("trigger_foreign"),
            Some("function_outdated"),
            Some("trigger_tampered"),
        ]
    );
}

#[test]
fn a_tampered_trigger_names_what_differs() {
    let names: Vec<&str> = [
        TriggerDifference::Timing,
        TriggerDifference::Events,
        TriggerDifference::Level,
        TriggerDifference::Condition,
        TriggerDifference::Definition,
    ]
    .into_iter()
    .map(|d| {
        let state = FenceTriggerState::Tampered(d);
        assert_eq!(state.difference(), Some(d));
        d.as_str()
    })
    .collect();
    assert_eq!(
        names,
        ["timing", "events", "level", "condition", "definition"]
    );
    assert_eq!(FenceTriggerState::Foreign.difference(), None);
}

#[test]
fn change_operations_and_resolutions_have_their_documented_names() {
    assert_eq!(
        [ChangeOp::Upsert.as_str(), ChangeOp::Delete.as_str()],
        ["upsert", "delete"]
    );
    assert_eq!(
        [Resolution::Carry.as_str(), Resolution::Abandon.as_str()],
        ["carry", "abandon"]
    );
}

#[test]
fn column_types_display_as_their_schema_names_and_parse_back() {
    let names: Vec<String> = ColumnType::ALL.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        ["string", "integer", "float", "boolean", "json", "bytes", "blob_ref", "crdt"]
    );
    for column_type in ColumnType::ALL {
        assert_eq!(column_type.to_string().parse(), Ok(column_type));
    }
    assert_eq!("Blob_Ref".parse::<ColumnType>(), Err(()));
}
