//! What the runner reports to its caller: the names of outcomes and phases
//! (printed by the command line and logged by a server) and the row rate of
//! a progress snapshot.

use std::time::Duration;

use sync_backfill::{Phase, Progress, RunOutcome};

#[test]
fn outcomes_have_their_documented_names() {
    let names: Vec<&str> = [
        RunOutcome::Activated {
            owner_epoch: 1,
            watermark: 2,
            observed_rows: 3,
        },
        RunOutcome::AlreadyActivated,
        RunOutcome::Superseded { owner_epoch: 1 },
        RunOutcome::GaveUp { attempts: 4 },
    ]
    .iter()
    .map(RunOutcome::as_str)
    .collect();
    assert_eq!(
        names,
        ["activated", "already_activated", "superseded", "gave_up"]
    );
}

#[test]
fn phases_have_their_documented_names() {
    let names: Vec<String> = [
        Phase::Claim,
        Phase::FullPass,
        Phase::CatchUp,
        Phase::Seal,
        Phase::Done,
    ]
    .iter()
    .map(Phase::to_string)
    .collect();
    assert_eq!(names, ["claim", "full_pass", "catch_up", "seal", "done"]);
}

fn progress(rows_seen: i64, elapsed: Duration) -> Progress {
    Progress {
        phase: Phase::FullPass,
        rows_seen,
        estimated_total: None,
        batches: 1,
        watermark: 0,
        owner_epoch: 1,
        elapsed,
    }
}

#[test]
fn rate_is_rows_per_second_of_the_run() {
    assert_eq!(progress(500, Duration::from_millis(2_000)).rate(), 250.0);
    assert_eq!(progress(3, Duration::from_millis(500)).rate(), 6.0);
}

#[test]
fn rate_before_any_time_has_passed_is_zero() {
    assert_eq!(progress(10, Duration::ZERO).rate(), 0.0);
}
