//! The registry of every check, by checklist ID.

use crate::check::{CheckDef, CheckFn, Requires};
use crate::checks::*;

/// Every registered check, ordered by ID.
pub fn registry() -> Vec<&'static CheckDef> {
    // A slice, not a fixed-size array: adding a group changes one line.
    let groups: &[&'static [CheckDef]] = &[
        schema_lifecycle::CHECKS,
        schema_compile::CHECKS,
        codec::CHECKS,
        column_versions::CHECKS,
        commit_log::CHECKS,
        rows::CHECKS,
        idempotency::CHECKS,
        deferred_violations::CHECKS,
        reactions::CHECKS,
        scope_reads::CHECKS,
        lookups::CHECKS,
        pruning::CHECKS,
        clients::CHECKS,
        blobs_admin::CHECKS,
        registered_queries::CHECKS,
        rfc0007_checkpoints::CHECKS,
        rfc0007_fence::CHECKS,
        rfc0007_activation::CHECKS,
        rfc0007_ensure::CHECKS,
        rfc0007_serve_gate::CHECKS,
        rfc0007_runner::CHECKS,
        concurrency::CHECKS,
        bad_input::CHECKS,
        plans::CHECKS,
        engine_entry::CHECKS,
        engine_push::CHECKS,
        engine_idempotency::CHECKS,
        engine_replay_owner::CHECKS,
        engine_validators::CHECKS,
        engine_gate::CHECKS,
        engine_pull::CHECKS,
        engine_read_scopes::CHECKS,
        engine_retention::CHECKS,
        engine_limits::CHECKS,
        engine_command::CHECKS,
        engine_unstorable::CHECKS,
        engine_v3::CHECKS,
        mixed_fleet::CHECKS,
        commit_groups::CHECKS,
        round_entry::CHECKS,
        segments::CHECKS,
    ];
    let mut all: Vec<&'static CheckDef> = groups.iter().flat_map(|g| g.iter()).collect();
    all.sort_by_key(|c| c.id);
    all
}

/// Declares a check that applies to every dialect and needs no capability.
pub(crate) const fn check(
    group: &'static str,
    id: &'static str,
    title: &'static str,
    run: CheckFn,
) -> CheckDef {
    CheckDef {
        id,
        group,
        title,
        requires: Requires::Nothing,
        capability: None,
        run,
    }
}

impl CheckDef {
    /// Restricts the check to harnesses with a property.
    pub const fn requires(self, requires: Requires) -> Self {
        CheckDef { requires, ..self }
    }

    /// Marks the capability group the check needs.
    pub const fn needs(self, capability: sync_core::Capability) -> Self {
        CheckDef {
            capability: Some(capability),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_checklist_id_has_exactly_one_check() {
        let ids: Vec<&str> = registry().iter().map(|c| c.id).collect();
        // C-336…C-365 and E-083 guard behaviours beyond the checklists
        // (`docs/decisions.md`); E-090…E-097 are the 2026-12 amendments of
        // `engine.md` (§3.2 item 4a, §8 items 7–8); C-366 onwards are the
        // storage checks of wire version 3 (`docs/design/wire-v3.md` §8.2),
        // of which C-370 and C-374 are covered elsewhere (the reference
        // fixtures and `syncstore migrate --dry-run`); E-100 onwards are
        // the engine rules of wire version 3 (§8.3), of which E-119 (realtime
        // deltas per connection version) is a test of `sync-wire`.
        let expected: Vec<String> = (1..=369)
            .chain([371, 372, 373, 375])
            .map(|n| format!("C-{n:03}"))
            .chain((1..=83).map(|n| format!("E-{n:03}")))
            .chain((90..=97).map(|n| format!("E-{n:03}")))
            .chain((100..=118).chain([120]).map(|n| format!("E-{n:03}")))
            .collect();
        assert_eq!(
            ids, expected,
            "the registry must hold C-001…C-369, C-371…C-373, C-375, E-001…E-083, E-090…E-097, E-100…E-118 and E-120 exactly once each"
        );
    }

    #[test]
    fn property_requirements_are_the_declared_ones() {
        let with = |requires| {
            registry()
                .into_iter()
                .filter(|c| c.requires == requires)
                .map(|c| c.id)
                .collect::<Vec<_>>()
        };
        use Requires as R;
        assert_eq!(
            with(R::PerPartitionLocking),
            ["C-037", "C-186", "C-302", "C-310"]
        );
        assert_eq!(with(R::WholeDatabaseLocking), ["C-303"]);
        assert_eq!(with(R::PlansByShape), ["C-240", "C-326", "C-327"]);
        assert_eq!(with(R::PlansByStatistics), ["C-328", "C-329"]);
        assert_eq!(
            with(R::TransactionalDdl),
            ["C-038", "C-269", "C-270", "C-308", "C-320", "C-322"]
        );
        assert_eq!(with(R::KeyCollationControl), ["C-033"]);
        assert_eq!(with(R::OutdatedTriggerInstall), ["C-036"]);
        assert_eq!(with(R::TriggerTamper), ["C-332"]);
        assert_eq!(with(R::ReferenceStartReplay), ["C-330", "C-331", "C-333"]);
        assert_eq!(with(R::DatabaseRoles), ["C-334"]);
        assert_eq!(with(R::JsonNulProjectsNull), ["C-118"]);
    }

    #[test]
    fn ids_are_unique_well_formed_and_grouped() {
        let all = registry();
        let mut seen = std::collections::BTreeSet::new();
        for check in &all {
            assert!(seen.insert(check.id), "duplicate {}", check.id);
            assert!(
                check.id.len() == 5 && (check.id.starts_with("C-") || check.id.starts_with("E-")),
                "{}",
                check.id
            );
            assert!(!check.title.is_empty(), "{} has no title", check.id);
        }
    }
}
