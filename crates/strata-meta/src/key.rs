//! User keys, key ranges, and the text encoding of keys.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::fmt;

/// An inclusive range of user keys, `[smallest, largest]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyRange {
    /// Smallest key in the range (inclusive).
    pub smallest: Bytes,
    /// Largest key in the range (inclusive).
    pub largest: Bytes,
}

impl KeyRange {
    /// A range from `smallest` to `largest`, both inclusive.
    ///
    /// REQUIRES: `smallest <= largest` (checked by [`KeyRange::is_valid`], not here).
    pub fn new(smallest: impl Into<Bytes>, largest: impl Into<Bytes>) -> Self {
        KeyRange {
            smallest: smallest.into(),
            largest: largest.into(),
        }
    }

    /// Whether `smallest <= largest`.
    pub fn is_valid(&self) -> bool {
        self.smallest <= self.largest
    }

    /// Whether the two inclusive ranges share at least one key.
    pub fn overlaps(&self, other: &KeyRange) -> bool {
        self.smallest <= other.largest && other.smallest <= self.largest
    }

    /// Whether `key` lies inside the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.smallest.as_ref() <= key && key <= self.largest.as_ref()
    }

    /// The smallest range covering both.
    pub fn union(&self, other: &KeyRange) -> KeyRange {
        KeyRange {
            smallest: self.smallest.clone().min(other.smallest.clone()),
            largest: self.largest.clone().max(other.largest.clone()),
        }
    }
}

impl fmt::Display for KeyRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}, {}]",
            format_key(&self.smallest),
            format_key(&self.largest)
        )
    }
}

/// Characters that are never printed raw, because the text form uses them as delimiters.
fn is_plain_key_byte(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'[' | b']' | b',' | b'"' | b'=' | b'#')
}

/// Prints a key for the text form: printable ASCII keys as they are, anything else as `0x` followed
/// by lowercase hex. The empty key prints as `0x`. [`parse_key`] reverses it exactly.
pub fn format_key(key: &[u8]) -> String {
    let plain =
        !key.is_empty() && key.iter().all(|&b| is_plain_key_byte(b)) && !key.starts_with(b"0x");
    if plain {
        // All bytes are ASCII, so this cannot fail.
        String::from_utf8_lossy(key).into_owned()
    } else {
        let mut s = String::with_capacity(2 + key.len() * 2);
        s.push_str("0x");
        for b in key {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }
}

/// Parses a key printed by [`format_key`].
pub fn parse_key(text: &str) -> Result<Bytes, String> {
    if let Some(hex) = text.strip_prefix("0x") {
        if hex.len() % 2 != 0 {
            return Err(format!("hex key {text:?} has an odd number of digits"));
        }
        let mut out = Vec::with_capacity(hex.len() / 2);
        for i in (0..hex.len()).step_by(2) {
            let byte = u8::from_str_radix(hex.get(i..i + 2).unwrap_or(""), 16)
                .map_err(|_| format!("hex key {text:?} has a non-hex digit"))?;
            out.push(byte);
        }
        Ok(Bytes::from(out))
    } else if text.is_empty() {
        Err("empty key text (the empty key is written 0x)".to_string())
    } else if let Some(bad) = text.bytes().find(|&b| !is_plain_key_byte(b)) {
        Err(format!(
            "key {text:?} contains {:?}, which must be written in 0x hex form",
            bad as char
        ))
    } else {
        Ok(Bytes::copy_from_slice(text.as_bytes()))
    }
}

/// Whether `key` lies before a range that starts at `start`: below an included bound, at or
/// below an excluded one, never for an unbounded start.
pub fn below_start<B: AsRef<[u8]>>(start: &std::ops::Bound<B>, key: &[u8]) -> bool {
    match start {
        std::ops::Bound::Included(s) => key < s.as_ref(),
        std::ops::Bound::Excluded(s) => key <= s.as_ref(),
        std::ops::Bound::Unbounded => false,
    }
}

/// Whether `key` lies past a range that ends at `end`: above an included bound, at or above an
/// excluded one, never for an unbounded end.
pub fn above_end<B: AsRef<[u8]>>(end: &std::ops::Bound<B>, key: &[u8]) -> bool {
    match end {
        std::ops::Bound::Included(e) => key > e.as_ref(),
        std::ops::Bound::Excluded(e) => key >= e.as_ref(),
        std::ops::Bound::Unbounded => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_text() {
        let cases: Vec<&[u8]> = vec![
            b"a",
            b"user123",
            b"",
            b"0xab",
            b"with space",
            &[0, 255, 7],
            b"a,b",
            b"[x]",
        ];
        for key in cases {
            let text = format_key(key);
            assert_eq!(parse_key(&text).unwrap().as_ref(), key, "text {text}");
        }
        assert_eq!(format_key(b"abc"), "abc");
        assert_eq!(format_key(&[1, 2]), "0x0102");
        assert!(parse_key("0xz1").is_err());
        assert!(parse_key("0x1").is_err());
    }

    #[test]
    fn ranges_overlap_inclusively() {
        let r = KeyRange::new("b", "d");
        assert!(r.overlaps(&KeyRange::new("d", "f")));
        assert!(r.overlaps(&KeyRange::new("a", "b")));
        assert!(!r.overlaps(&KeyRange::new("e", "f")));
        assert!(r.contains(b"c"));
        assert!(!r.contains(b"e"));
        assert_eq!(r.union(&KeyRange::new("a", "c")), KeyRange::new("a", "d"));
    }
}
