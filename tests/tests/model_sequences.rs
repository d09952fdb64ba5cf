//! Model-based tests: random sequences of push, prune, rotate, declare,
//! claim, advance, activate, migrate, ensure and gate reads run against the
//! reference model and against both dialects; after every step the outcome
//! (value or error code) and the observable state of the partition and of the
//! database must equal the model's. Every sequence ends with the invariant
//! checker.
//!
//! The runner is seeded (`SYNCSTORE_MODEL_SEED`), so the default budget
//! (`SYNCSTORE_MODEL_CASES` sequences of at most `SYNCSTORE_MODEL_STEPS`
//! operations) explores the same sequences on every run; a failure shrinks to
//! a minimal sequence and prints it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use syncstore_tests::invariants::InvariantChecker;
use syncstore_tests::model::{self, Model, Op, Outcome, System, PARTITIONS};
use syncstore_tests::{budget, deployment, fixture, DIALECTS};

fn seeded_runner(cases: u32) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 200,
        ..Config::default()
    };
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&budget::model_seed().to_le_bytes());
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed))
}

#[derive(Default)]
struct Tally {
    sequences: AtomicU64,
    steps: AtomicU64,
    kinds: Mutex<BTreeMap<&'static str, u64>>,
    outcomes: Mutex<BTreeMap<String, u64>>,
}

impl Tally {
    fn count(&self, op: &Op, outcome: &Outcome) {
        self.steps.fetch_add(1, Ordering::Relaxed);
        *self.kinds.lock().unwrap().entry(op.kind()).or_default() += 1;
        let label = match outcome {
            Outcome::Failed(code) => code.clone(),
            other => outcome_label(other).to_owned(),
        };
        *self.outcomes.lock().unwrap().entry(label).or_default() += 1;
    }
}

fn outcome_label(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Done => "ok",
        Outcome::Entry(_) => "entry",
        Outcome::Pruned(_) => "pruned",
        Outcome::Checkpoint(_) => "checkpoint",
        Outcome::Advanced(true) => "advanced",
        Outcome::Advanced(false) => "advance_refused",
        Outcome::Activation(a) => match a {
            sync_core::ActivationOutcome::Activated => "activated",
            sync_core::ActivationOutcome::Stale => "activation_stale",
            sync_core::ActivationOutcome::Unverifiable => "activation_unverifiable",
        },
        Outcome::Gate(_, None) => "gate_open",
        Outcome::Gate(_, Some(_)) => "gate_refused",
        Outcome::Pushed(_) => "pushed",
        Outcome::Replayed(_) => "replayed",
        Outcome::Rejected => "rejected_push",
        Outcome::Failed(_) => "failed",
    }
}

/// Runs one sequence on one dialect, comparing with the model after every step.
fn run_sequence(dialect: &str, ops: &[Op], tally: &Tally) -> Result<(), TestCaseError> {
    let system = System::new(deployment(dialect));
    let mut model = Model::new();
    // The source tables each checkpoint name was activated with (over every
    // partition: the tables every activation of it certified). An
    // activation certifies the coverage of the sources it is given only.
    let mut activated_sources: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for (i, op) in ops.iter().enumerate() {
        let now = model::step_time(i);
        // The system reads the concrete arguments from the model *before* it
        // applies the step.
        let actual = system.run(&model, op, now);
        let expected = model.apply(op, now);
        let actual = match (&expected, actual) {
            (Outcome::Checkpoint(e), Outcome::Checkpoint(mut a)) => {
                model::normalize_checkpoint(e, &mut a);
                Outcome::Checkpoint(a)
            }
            (_, a) => a,
        };
        tally.count(op, &actual);
        if let (
            Op::Activate { name, sources, .. },
            Outcome::Activation(sync_core::ActivationOutcome::Activated),
        ) = (op, &actual)
        {
            let given = Model::sources(*sources);
            activated_sources
                .entry(model::CHECKPOINTS[*name])
                .and_modify(|certified| certified.retain(|t| given.contains(t)))
                .or_insert(given);
        }
        prop_assert_eq!(
            &actual,
            &expected,
            "{}: step {} {:?}: outcome differs from the model",
            dialect,
            i,
            op
        );
        let touched: Vec<usize> = match op.partition() {
            Some(p) => vec![PARTITIONS.iter().position(|x| *x == p).unwrap()],
            None => (0..PARTITIONS.len()).collect(),
        };
        for p in touched {
            let expected_view = model.view(p);
            let mut actual_view = system
                .view(p)
                .map_err(|e| TestCaseError::fail(format!("{dialect}: step {i}: view: {e:?}")))?;
            model::normalize_view(&expected_view, &mut actual_view);
            prop_assert_eq!(
                &actual_view,
                &expected_view,
                "{}: step {} {:?}: state of {:?} differs from the model",
                dialect,
                i,
                op,
                PARTITIONS[p]
            );
        }
        let global = system
            .global_view()
            .map_err(|e| TestCaseError::fail(format!("{dialect}: step {i}: global view: {e:?}")))?;
        prop_assert_eq!(
            &global,
            &model.global_view(),
            "{}: step {} {:?}: database state differs from the model",
            dialect,
            i,
            op
        );
    }
    // The invariants, through a process at the stored version.
    let reader = (0..model::PROCESSES)
        .find(|&p| model.running(p) == model.marker())
        .unwrap_or(0);
    let mut checker = InvariantChecker::new(fixture::schema_history(model.marker()));
    for (name, sources) in &activated_sources {
        let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
        checker = checker.with_sources(name, &sources);
    }
    if let Err(violations) = checker.check(system.proc(reader), &PARTITIONS) {
        return Err(TestCaseError::fail(format!(
            "{dialect}: invariants after {} steps: {violations:#?}",
            ops.len()
        )));
    }
    tally.sequences.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

#[test]
fn random_sequences_match_the_model_on_both_dialects() {
    let cases = budget::model_cases();
    let steps = budget::model_steps();
    let tally = Tally::default();
    let strategy = prop::collection::vec(model::op(), (steps / 4).max(1)..=steps);
    let result = seeded_runner(cases).run(&strategy, |ops| {
        for dialect in DIALECTS {
            run_sequence(dialect, &ops, &tally)?;
        }
        Ok(())
    });
    let kinds = tally.kinds.lock().unwrap().clone();
    let outcomes = tally.outcomes.lock().unwrap().clone();
    println!(
        "model: {} sequence runs ({} cases x {} dialects), {} steps compared; by operation {:?}; by outcome {:?}",
        tally.sequences.load(Ordering::Relaxed),
        cases,
        DIALECTS.len(),
        tally.steps.load(Ordering::Relaxed),
        kinds,
        outcomes
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}
