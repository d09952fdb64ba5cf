//! Physical index names (`schema-and-migrations.md` §10).

use crate::identifiers::MAX_IDENTIFIER_BYTES;

/// Prefix of every physical (owned) declared index.
pub const PHYSICAL_INDEX_PREFIX: &str = "sync_ix_";

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64-bit hash of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    })
}

/// The physical name of a declared index: `sync_ix_<declared>` when that is
/// at most 63 UTF-8 bytes, else `sync_ix_` + 16 lowercase hex digits of
/// `fnv1a64(declared)`. Always at most 63 bytes for a valid declared name.
pub fn physical_index_name(declared: &str) -> String {
    let candidate = format!("{PHYSICAL_INDEX_PREFIX}{declared}");
    if candidate.len() <= MAX_IDENTIFIER_BYTES {
        candidate
    } else {
        format!(
            "{PHYSICAL_INDEX_PREFIX}{:016x}",
            fnv1a64(declared.as_bytes())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanity_vector() {
        assert_eq!(format!("{:016x}", fnv1a64(b"a")), "af63dc4c8601ec8c");
        assert_eq!(format!("{:016x}", fnv1a64(b"")), "cbf29ce484222325");
    }
}
