//! Race-injection callbacks (feature `test-hooks`, `engine.md` §7). They run
//! on the round's thread at fixed points and may block (barriers) or act
//! on the storage from another thread or instance.

use std::fmt;
use std::sync::Arc;

/// A callback receiving the commit's `clientCommitId`.
pub type CommitHook = Arc<dyn Fn(&str) + Send + Sync>;
/// A callback without arguments.
pub type PullHook = Arc<dyn Fn() + Send + Sync>;
/// A callback receiving the index of the section about to start.
pub type SectionHook = Arc<dyn Fn(usize) + Send + Sync>;

/// Callbacks at the engine's race points.
#[derive(Clone, Default)]
pub struct TestHooks {
    /// After push step P1 missed (no transaction held yet), before `begin`.
    pub after_p1: Option<CommitHook>,
    /// After pull step L2 (`max_seq` and horizon read), before any section.
    pub after_l2: Option<PullHook>,
    /// After a section's `SubEnd`, before the next section (index ≥ 1) reads.
    pub between_sections: Option<SectionHook>,
}

impl fmt::Debug for TestHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestHooks")
            .field("after_p1", &self.after_p1.is_some())
            .field("after_l2", &self.after_l2.is_some())
            .field("between_sections", &self.between_sections.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_debug_form_says_which_hooks_are_set() {
        let hooks = TestHooks {
            after_p1: None,
            after_l2: Some(std::sync::Arc::new(|| {})),
            between_sections: None,
        };
        assert_eq!(
            format!("{hooks:?}"),
            "TestHooks { after_p1: false, after_l2: true, between_sections: false }"
        );
    }
}
