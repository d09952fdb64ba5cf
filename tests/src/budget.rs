//! How much work the bounded test runs do. Every count has a default that
//! keeps `cargo xtask test` short and an environment variable that a soak
//! run raises; nothing is bounded by wall-clock time.

/// Reads a positive count from `var`, or `default`.
fn count(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(text) if !text.trim().is_empty() => text
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("{var} must be a positive integer, got {text:?}")),
        _ => default,
    }
}

/// Model sequences per dialect (`SYNCSTORE_MODEL_CASES`, default 24).
pub fn model_cases() -> u32 {
    u32::try_from(count("SYNCSTORE_MODEL_CASES", 24)).unwrap_or(u32::MAX)
}

/// Longest model sequence (`SYNCSTORE_MODEL_STEPS`, default 40).
pub fn model_steps() -> usize {
    usize::try_from(count("SYNCSTORE_MODEL_STEPS", 40)).unwrap_or(usize::MAX)
}

/// The seed of the model runner (`SYNCSTORE_MODEL_SEED`, default fixed), so
/// that every run of the default budget explores the same sequences.
pub fn model_seed() -> u64 {
    count("SYNCSTORE_MODEL_SEED", 0x5EED_0007)
}

/// Operations per thread of a stress run (`SYNCSTORE_STRESS_OPS`, default 200).
pub fn stress_ops() -> usize {
    usize::try_from(count("SYNCSTORE_STRESS_OPS", 200)).unwrap_or(usize::MAX)
}

/// Stress rounds per dialect (`SYNCSTORE_STRESS_ROUNDS`, default 3).
pub fn stress_rounds() -> usize {
    usize::try_from(count("SYNCSTORE_STRESS_ROUNDS", 3)).unwrap_or(usize::MAX)
}

/// Executions per fuzz target of the stable driver (`SYNCSTORE_FUZZ_EXECS`,
/// default 20 000).
pub fn fuzz_execs() -> u64 {
    count("SYNCSTORE_FUZZ_EXECS", 20_000)
}

/// Rounds of the realtime fault run per dialect
/// (`SYNCSTORE_REALTIME_ROUNDS`, default 3): clients with dropped sockets
/// and restarted servers, checked for lost changes.
pub fn realtime_rounds() -> u64 {
    count("SYNCSTORE_REALTIME_ROUNDS", 3)
}
