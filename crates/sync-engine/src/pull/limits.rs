//! Pull limits clamped silently (`engine.md` §5.1).

use crate::wire::request::PullHeader;

/// Effective per-subscription limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PullLimits {
    /// Changes per incremental section.
    pub(crate) changes: i64,
    /// Rows per bootstrap page.
    pub(crate) page_rows: i64,
    /// Bootstrap pages per section.
    pub(crate) pages: i64,
}

fn clamp(value: i32, zero: i64, max: i64) -> i64 {
    if value == 0 {
        zero
    } else {
        i64::from(value).clamp(1, max)
    }
}

impl PullLimits {
    pub(crate) fn of(header: &PullHeader) -> Self {
        Self {
            changes: clamp(header.limit_commits, 1_000, 1_000),
            page_rows: clamp(header.limit_snapshot_rows, 1_000, 50_000),
            pages: clamp(header.max_snapshot_pages, 4, 50),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_means_default_and_values_clamp() {
        let of = |c, r, p| {
            PullLimits::of(&PullHeader {
                limit_commits: c,
                limit_snapshot_rows: r,
                max_snapshot_pages: p,
                accept: 1,
            })
        };
        assert_eq!(
            of(0, 0, 0),
            PullLimits {
                changes: 1000,
                page_rows: 1000,
                pages: 4
            }
        );
        assert_eq!(
            of(-5, -1, -9),
            PullLimits {
                changes: 1,
                page_rows: 1,
                pages: 1
            }
        );
        assert_eq!(
            of(5000, 90_000, 99),
            PullLimits {
                changes: 1000,
                page_rows: 50_000,
                pages: 50
            }
        );
        assert_eq!(
            of(5, 7, 2),
            PullLimits {
                changes: 5,
                page_rows: 7,
                pages: 2
            }
        );
    }
}
