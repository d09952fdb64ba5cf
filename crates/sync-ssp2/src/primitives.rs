//! The primitive encodings of the specification's conventions: fixed-width
//! little-endian integers, `bool`, `str`, `bytes`, `opt`, `list`, `map` and
//! `json`.
//!
//! Reading never allocates more than the input holds: every length or count
//! prefix is checked against the bytes left before anything is reserved.

use std::cmp::Ordering;

use crate::error::{DecodeError, EncodeError};
use crate::values::{cmp_utf16, CanonicalMap, RawJson};

/// The largest magnitude an `i64` field may carry: 2^53 − 1.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// Whether `v` is within ±(2^53−1).
pub fn is_safe_integer(v: i64) -> bool {
    (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&v)
}

/// A cursor over a byte slice that decodes the primitives.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

type R<T> = Result<T, DecodeError>;

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Refuses bytes left over after a complete record.
    pub(crate) fn finish(&self, what: &'static str) -> R<()> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes { what })
        }
    }

    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> R<&'a [u8]> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated { what });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Takes a prefixed run of `n` bytes, refusing a claim past the input.
    pub(crate) fn take_claimed(&mut self, n: u64, what: &'static str) -> R<&'a [u8]> {
        let available = self.remaining() as u64;
        if n > available {
            return Err(DecodeError::ClaimExceedsInput {
                what,
                claimed: n,
                available,
            });
        }
        self.take(n as usize, what)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> R<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> R<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> R<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> R<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> R<i32> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }

    /// An `i64` within the safe-integer range.
    pub(crate) fn i64(&mut self, what: &'static str) -> R<i64> {
        let v = i64::from_le_bytes(self.array(what)?);
        if is_safe_integer(v) {
            Ok(v)
        } else {
            Err(DecodeError::UnsafeInteger { what })
        }
    }

    pub(crate) fn f64(&mut self, what: &'static str) -> R<f64> {
        Ok(f64::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn bool(&mut self, what: &'static str) -> R<bool> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::InvalidBool { what }),
        }
    }

    /// An `opt()` presence byte.
    pub(crate) fn presence(&mut self, what: &'static str) -> R<bool> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::InvalidPresence { what }),
        }
    }

    pub(crate) fn str(&mut self, what: &'static str) -> R<String> {
        let len = self.u32(what)?;
        let raw = self.take_claimed(u64::from(len), what)?;
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(DecodeError::InvalidUtf8 { what }),
        }
    }

    /// A length-prefixed UTF-8 string, borrowed (no allocation).
    pub(crate) fn str_ref(&mut self, what: &'static str) -> R<&'a str> {
        let len = self.u32(what)?;
        let raw = self.take_claimed(u64::from(len), what)?;
        std::str::from_utf8(raw).map_err(|_| DecodeError::InvalidUtf8 { what })
    }

    /// A length-prefixed byte run, borrowed (no allocation).
    pub(crate) fn bytes_ref(&mut self, what: &'static str) -> R<&'a [u8]> {
        let len = self.u32(what)?;
        self.take_claimed(u64::from(len), what)
    }

    pub(crate) fn bytes(&mut self, what: &'static str) -> R<Vec<u8>> {
        let len = self.u32(what)?;
        Ok(self.take_claimed(u64::from(len), what)?.to_vec())
    }

    pub(crate) fn json(&mut self, what: &'static str) -> R<RawJson> {
        let text = self.str(what)?;
        RawJson::new(text).map_err(|_| DecodeError::InvalidJson { what })
    }

    pub(crate) fn opt<T>(
        &mut self,
        what: &'static str,
        read: impl FnOnce(&mut Self) -> R<T>,
    ) -> R<Option<T>> {
        if self.presence(what)? {
            read(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A `u32` count of items that each take at least `min_item` bytes;
    /// refused when the items cannot fit in what is left.
    pub(crate) fn count(&mut self, what: &'static str, min_item: u64) -> R<usize> {
        let count = u64::from(self.u32(what)?);
        self.check_claim(what, count, min_item)?;
        Ok(count as usize)
    }

    /// A `u16` count (column tables), checked like [`Reader::count`].
    pub(crate) fn count16(&mut self, what: &'static str, min_item: u64) -> R<usize> {
        let count = u64::from(self.u16(what)?);
        self.check_claim(what, count, min_item)?;
        Ok(count as usize)
    }

    pub(crate) fn check_claim(&self, what: &'static str, count: u64, min_item: u64) -> R<()> {
        let claimed = count.saturating_mul(min_item.max(1));
        let available = self.remaining() as u64;
        if claimed > available {
            Err(DecodeError::ClaimExceedsInput {
                what,
                claimed,
                available,
            })
        } else {
            Ok(())
        }
    }

    pub(crate) fn list<T>(
        &mut self,
        what: &'static str,
        min_item: u64,
        mut read: impl FnMut(&mut Self) -> R<T>,
    ) -> R<Vec<T>> {
        let count = self.count(what, min_item)?;
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            out.push(read(self)?);
        }
        Ok(out)
    }

    pub(crate) fn str_list(&mut self, what: &'static str) -> R<Vec<String>> {
        self.list(what, 4, |r| r.str(what))
    }

    /// A `map`: keys strictly ascending by UTF-16 code units.
    pub(crate) fn map<V>(
        &mut self,
        what: &'static str,
        min_value: u64,
        mut read: impl FnMut(&mut Self) -> R<V>,
    ) -> R<CanonicalMap<V>> {
        let count = self.count(what, 4 + min_value)?;
        let mut entries: Vec<(String, V)> = Vec::with_capacity(count);
        for _ in 0..count {
            let key = self.str(what)?;
            if let Some((prev, _)) = entries.last() {
                match cmp_utf16(prev, &key) {
                    Ordering::Less => {}
                    Ordering::Equal => return Err(DecodeError::DuplicateKey { what }),
                    Ordering::Greater => return Err(DecodeError::KeyOutOfOrder { what }),
                }
            }
            let value = read(self)?;
            entries.push((key, value));
        }
        Ok(CanonicalMap::from_sorted(entries))
    }
}

type W = Result<(), EncodeError>;

pub(crate) fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_i64(out: &mut Vec<u8>, v: i64, what: &'static str) -> W {
    if !is_safe_integer(v) {
        return Err(EncodeError::UnsafeInteger { what });
    }
    out.extend_from_slice(&v.to_le_bytes());
    Ok(())
}

pub(crate) fn put_f64(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_bool(out: &mut Vec<u8>, v: bool) {
    out.push(u8::from(v));
}

/// A `u32` length or count prefix.
pub(crate) fn put_len(out: &mut Vec<u8>, n: usize, what: &'static str) -> W {
    let n = u32::try_from(n).map_err(|_| EncodeError::TooLong { what })?;
    put_u32(out, n);
    Ok(())
}

pub(crate) fn put_str(out: &mut Vec<u8>, s: &str, what: &'static str) -> W {
    put_bytes(out, s.as_bytes(), what)
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8], what: &'static str) -> W {
    put_len(out, b.len(), what)?;
    out.extend_from_slice(b);
    Ok(())
}

pub(crate) fn put_json(out: &mut Vec<u8>, v: &RawJson, what: &'static str) -> W {
    put_str(out, v.as_str(), what)
}

pub(crate) fn put_opt<T>(
    out: &mut Vec<u8>,
    v: Option<&T>,
    write: impl FnOnce(&mut Vec<u8>, &T) -> W,
) -> W {
    match v {
        None => {
            put_u8(out, 0);
            Ok(())
        }
        Some(v) => {
            put_u8(out, 1);
            write(out, v)
        }
    }
}

pub(crate) fn put_str_list(out: &mut Vec<u8>, list: &[String], what: &'static str) -> W {
    put_len(out, list.len(), what)?;
    for s in list {
        put_str(out, s, what)?;
    }
    Ok(())
}

pub(crate) fn put_map<V>(
    out: &mut Vec<u8>,
    map: &CanonicalMap<V>,
    what: &'static str,
    mut write: impl FnMut(&mut Vec<u8>, &V) -> W,
) -> W {
    put_len(out, map.len(), what)?;
    for (k, v) in map.iter() {
        put_str(out, k, what)?;
        write(out, v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_integer_edges() {
        let mut out = Vec::new();
        assert!(put_i64(&mut out, MAX_SAFE_INTEGER, "v").is_ok());
        assert!(put_i64(&mut out, -MAX_SAFE_INTEGER, "v").is_ok());
        assert_eq!(
            put_i64(&mut out, MAX_SAFE_INTEGER + 1, "v"),
            Err(EncodeError::UnsafeInteger { what: "v" })
        );
        assert!(put_i64(&mut out, -MAX_SAFE_INTEGER - 1, "v").is_err());
        let mut r = Reader::new(&out);
        assert_eq!(r.i64("v"), Ok(MAX_SAFE_INTEGER));
        assert_eq!(r.i64("v"), Ok(-MAX_SAFE_INTEGER));
        for bad in [
            MAX_SAFE_INTEGER + 1,
            -MAX_SAFE_INTEGER - 1,
            i64::MAX,
            i64::MIN,
        ] {
            let bytes = bad.to_le_bytes();
            assert_eq!(
                Reader::new(&bytes).i64("v"),
                Err(DecodeError::UnsafeInteger { what: "v" })
            );
        }
    }

    #[test]
    fn map_keys_must_ascend_by_utf16() {
        // "\u{FFFD}" then "\u{1F600}" ascends by UTF-8 bytes, not by UTF-16.
        let mut utf8_order = Vec::new();
        put_u32(&mut utf8_order, 2);
        for key in ["\u{FFFD}", "\u{1F600}"] {
            put_str(&mut utf8_order, key, "k").unwrap();
            put_str(&mut utf8_order, "v", "v").unwrap();
        }
        assert_eq!(
            Reader::new(&utf8_order).map("m", 4, |r| r.str("v")),
            Err(DecodeError::KeyOutOfOrder { what: "m" })
        );
        let map = CanonicalMap::from_entries([
            ("\u{FFFD}".to_string(), "v".to_string()),
            ("\u{1F600}".to_string(), "v".to_string()),
        ])
        .unwrap();
        let mut canonical = Vec::new();
        put_map(&mut canonical, &map, "m", |o, v| put_str(o, v, "v")).unwrap();
        assert_ne!(canonical, utf8_order);
        assert_eq!(Reader::new(&canonical).map("m", 4, |r| r.str("v")), Ok(map));
    }

    #[test]
    fn duplicate_map_keys_are_refused() {
        let mut bytes = Vec::new();
        put_u32(&mut bytes, 2);
        for _ in 0..2 {
            put_str(&mut bytes, "k", "k").unwrap();
            put_str(&mut bytes, "v", "v").unwrap();
        }
        assert_eq!(
            Reader::new(&bytes).map("m", 4, |r| r.str("v")),
            Err(DecodeError::DuplicateKey { what: "m" })
        );
    }

    #[test]
    fn claims_past_the_input_are_refused_before_allocating() {
        let mut bytes = Vec::new();
        put_u32(&mut bytes, u32::MAX);
        bytes.extend_from_slice(&[0; 8]);
        assert!(matches!(
            Reader::new(&bytes).str_list("l"),
            Err(DecodeError::ClaimExceedsInput { claimed, available: 8, .. }) if claimed == 4 * u64::from(u32::MAX)
        ));
        assert!(matches!(
            Reader::new(&bytes).bytes("b"),
            Err(DecodeError::ClaimExceedsInput { .. })
        ));
    }

    #[test]
    fn bool_presence_and_utf8_are_checked() {
        assert_eq!(
            Reader::new(&[2]).bool("b"),
            Err(DecodeError::InvalidBool { what: "b" })
        );
        assert_eq!(
            Reader::new(&[2]).presence("o"),
            Err(DecodeError::InvalidPresence { what: "o" })
        );
        let bytes = [2, 0, 0, 0, 0xC3, 0x28];
        assert_eq!(
            Reader::new(&bytes).str("s"),
            Err(DecodeError::InvalidUtf8 { what: "s" })
        );
    }
}
