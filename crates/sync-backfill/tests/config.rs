//! `RunnerConfig`: the retry delays (doubled per retry from
//! `retry_backoff_ms`, capped at `MAX_BACKOFF_MS`) and the accepted batch
//! sizes (`rfc0007-migration-barrier.md` §8.1).

use sync_backfill::{RunnerConfig, MAX_BACKOFF_MS};
use sync_core::ErrorCode;

#[test]
fn retry_delays_double_from_the_first_and_stop_at_the_cap() {
    let config = RunnerConfig::default();
    let delays: Vec<u64> = (1..=8).map(|retry| config.backoff_ms(retry)).collect();
    assert_eq!(
        delays,
        [
            100,
            200,
            400,
            800,
            1_600,
            3_200,
            MAX_BACKOFF_MS,
            MAX_BACKOFF_MS
        ]
    );
    assert_eq!(config.backoff_ms(u32::MAX), MAX_BACKOFF_MS);
    let quick = RunnerConfig {
        retry_backoff_ms: 7,
        ..RunnerConfig::default()
    };
    assert_eq!(quick.backoff_ms(1), 7);
    assert_eq!(quick.backoff_ms(3), 28);
}

#[test]
fn batch_sizes_from_one_to_a_thousand_are_accepted() {
    for batch_size in [1, 500, 1_000] {
        let config = RunnerConfig {
            batch_size,
            ..RunnerConfig::default()
        };
        assert!(config.validate().is_ok(), "batch_size {batch_size}");
    }
    for batch_size in [0, -1, 1_001] {
        let config = RunnerConfig {
            batch_size,
            ..RunnerConfig::default()
        };
        let code = config.validate().err().map(|e| e.code());
        assert_eq!(
            code,
            Some(ErrorCode::InvalidArgument),
            "batch_size {batch_size}"
        );
    }
}
