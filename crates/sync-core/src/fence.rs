//! The writer-fence predicate (`storage-contract.md` §7.3).

/// Whether a commit stamped with `writer_version` passes the effective fence
/// `required`. Mirrors the database trigger, which remains the authority.
pub fn writer_fence_allows(required: Option<i32>, writer_version: i32) -> bool {
    required.is_none_or(|fence| writer_version >= fence)
}

/// The effective fence: the larger of a partition fence and the database-wide fence.
pub fn effective_fence(partition: Option<i32>, database: Option<i32>) -> Option<i32> {
    match (partition, database) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Whether the database enforces the writer fence for every writer: the
/// state of the storage's fence trigger on the commit table (`tables.md`
/// §4.2a). Read by operator tools next to the fence numbers; only
/// [`FenceTriggerState::Enforced`] means a fence number is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceTriggerState {
    /// The commit table does not exist yet: there is nothing to fence.
    NoCommitTable,
    /// The storage's trigger is installed, enabled and runs the storage's check.
    Enforced,
    /// The commit table carries no trigger of the storage's name.
    Missing,
    /// The storage's trigger exists but does not fire (disabled).
    Disabled,
    /// A trigger of the storage's name runs something other than the
    /// storage's check (another function, or another definition).
    Foreign,
    /// The storage's trigger fires, but its check is not the current text
    /// (an older one that resolves names through the inserting session).
    Outdated,
    /// A trigger of the storage's name runs the storage's check, but is
    /// not defined as the storage defines it (another timing, event, level
    /// or a `WHEN` condition): it may never fire on a commit insert.
    Tampered(TriggerDifference),
}

/// What differs between the fence trigger found and the one the storage
/// installs ([`FenceTriggerState::Tampered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerDifference {
    /// Not `BEFORE` (an `AFTER` or `INSTEAD OF` trigger).
    Timing,
    /// Not `INSERT` only (another or a further event: `UPDATE`, `DELETE`, …).
    Events,
    /// Not `FOR EACH ROW`.
    Level,
    /// A `WHEN` condition other than the storage's (none on Postgres).
    Condition,
    /// Anything else of the definition: arguments, a column list, a
    /// constraint trigger, a text that does not parse as the storage's.
    Definition,
}

impl TriggerDifference {
    /// The stable name (`details.difference`): `timing`, `events`,
    /// `level`, `condition` or `definition`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timing => "timing",
            Self::Events => "events",
            Self::Level => "level",
            Self::Condition => "condition",
            Self::Definition => "definition",
        }
    }
}

impl FenceTriggerState {
    /// Whether a writer fence stored in the database is enforced on insert.
    pub fn is_enforced(self) -> bool {
        self == Self::Enforced
    }

    /// The stable cause of a trigger that does not enforce the fence:
    /// `trigger_missing`, `trigger_disabled`, `trigger_foreign`,
    /// `function_outdated` or `trigger_tampered`; `None`
    /// when enforced or when there is no commit table.
    pub fn cause(self) -> Option<&'static str> {
        match self {
            Self::NoCommitTable | Self::Enforced => None,
            Self::Missing => Some("trigger_missing"),
            Self::Disabled => Some("trigger_disabled"),
            Self::Foreign => Some("trigger_foreign"),
            Self::Outdated => Some("function_outdated"),
            Self::Tampered(_) => Some("trigger_tampered"),
        }
    }

    /// What differs from the storage's definition, for
    /// [`FenceTriggerState::Tampered`].
    pub fn difference(self) -> Option<TriggerDifference> {
        match self {
            Self::Tampered(difference) => Some(difference),
            _ => None,
        }
    }
}
