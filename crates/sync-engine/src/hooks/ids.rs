//! Identity source for cache identities and initial log epochs.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// Produces fresh unique ids.
pub trait IdSource: Send + Sync + fmt::Debug {
    /// A new id.
    fn new_id(&self) -> String;
}

/// Random UUID v4 text. The 122 random bits come from the standard
/// library's randomly keyed SipHash (seeded from the operating system)
/// over a per-instance counter, so no extra dependency is needed.
#[derive(Debug, Default)]
pub struct RandomIds {
    keys: (RandomState, RandomState),
    counter: AtomicU64,
}

impl RandomIds {
    /// A new source with fresh random keys.
    pub fn new() -> Self {
        Self::default()
    }
}

impl IdSource for RandomIds {
    fn new_id(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let word = |state: &RandomState| {
            let mut h = state.build_hasher();
            h.write_u64(n);
            h.finish()
        };
        let hi = word(&self.keys.0);
        let lo = word(&self.keys.1);
        let hi = (hi & !0xF000) | 0x4000; // version 4
        let lo = (lo & !(0xC000 << 48)) | (0x8000 << 48); // RFC 4122 variant
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xFFFF,
            hi & 0xFFFF,
            lo >> 48,
            lo & 0xFFFF_FFFF_FFFF
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_uuid_v4_shaped_and_distinct() {
        let ids = RandomIds::new();
        let a = ids.new_id();
        let b = ids.new_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
    }

    /// Every id of many has the version and variant nibbles, and every
    /// other hex digit varies: the 122 random bits reach the text.
    #[test]
    fn every_id_keeps_its_fixed_bits_and_the_rest_vary() {
        let ids = RandomIds::new();
        let many: Vec<String> = (0..512).map(|_| ids.new_id()).collect();
        let distinct: std::collections::HashSet<&String> = many.iter().collect();
        assert_eq!(distinct.len(), many.len());
        for id in &many {
            assert_eq!(&id[14..15], "4", "{id}");
            assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        }
        for position in (0..36).filter(|p| ![8, 13, 14, 18, 19, 23].contains(p)) {
            let seen: std::collections::HashSet<&str> =
                many.iter().map(|id| &id[position..=position]).collect();
            assert!(seen.len() > 1, "hex digit {position} never varies");
        }
    }
}
