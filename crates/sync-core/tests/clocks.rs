//! The clocks every component reads time from.

use std::time::{SystemTime, UNIX_EPOCH};

use sync_core::{Clock, ManualClock, SystemClock};

fn system_now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the system clock is after 1970");
    i64::try_from(since.as_millis()).expect("milliseconds fit in i64")
}

#[test]
fn the_system_clock_reads_the_wall_clock_in_milliseconds() {
    let before = system_now_ms();
    let now = SystemClock.now_ms();
    let after = system_now_ms();
    assert!(
        (before..=after).contains(&now),
        "{now} outside [{before}, {after}]"
    );
}

#[test]
fn a_manual_clock_moves_only_when_told() {
    let clock = ManualClock::new(1_000);
    assert_eq!(clock.now_ms(), 1_000);
    assert_eq!(clock.now_ms(), 1_000);
    clock.advance(250);
    assert_eq!(clock.now_ms(), 1_250);
    clock.advance(-50);
    assert_eq!(clock.now_ms(), 1_200);
    clock.set(7);
    assert_eq!(clock.now_ms(), 7);
    assert_eq!(ManualClock::default().now_ms(), 0);
}
