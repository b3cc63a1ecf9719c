//! Merge operators (RocksDB's associative merge): `Db::merge(key, operand)` records an operand
//! instead of a value, and the key's value is the operator applied to its latest put (or none)
//! and the operands written since, oldest first. Reads apply it when they meet operands;
//! flushes and compactions fold the operands of one snapshot stripe into one entry, a put when
//! the stripe holds the key's base (a put or a delete) or nothing older can hold the key, else
//! one operand when the operator can combine operands alone. See `docs/write-semantics.md`.

use std::fmt;

/// How operands combine. Implementations must be deterministic, and `partial_merge` must agree
/// with `full_merge`: `full_merge(base, [a, b]) == full_merge(base, [partial_merge(a, b)])`
/// whenever `partial_merge` returns a value, for every base. Both run inside reads, flushes and
/// compactions, on any thread.
pub trait MergeOperator: Send + Sync + fmt::Debug {
    /// The operator's name, recorded in errors and `inspect` output.
    fn name(&self) -> &str;

    /// The value of `key` given its `base` (the latest put's value; `None` when the key had no
    /// value or was deleted) and the `operands` written after it, oldest first; `Err` with the
    /// reason when they cannot be combined (a malformed operand), which fails the read or the
    /// merge that asked.
    fn full_merge(
        &self,
        key: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String>;

    /// One operand equivalent to `older` followed by `newer`, if the operator can combine
    /// operands without a base (RocksDB's `PartialMerge`); `None` keeps both. The default
    /// combines nothing.
    fn partial_merge(&self, _key: &[u8], _older: &[u8], _newer: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// Adds unsigned 64-bit counters: values and operands are 8 bytes little-endian, and the sum
/// wraps (RocksDB's `UInt64AddOperator`). A value or operand of another length is an error.
#[derive(Clone, Copy, Debug, Default)]
pub struct U64AddOperator;

fn counter(bytes: &[u8], what: &str) -> Result<u64, String> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_le_bytes)
        .map_err(|_| format!("{what} of {} bytes is not an 8-byte counter", bytes.len()))
}

impl MergeOperator for U64AddOperator {
    fn name(&self) -> &str {
        "u64_add"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        let mut sum = base.map_or(Ok(0), |b| counter(b, "value"))?;
        for op in operands {
            sum = sum.wrapping_add(counter(op, "operand")?);
        }
        Ok(sum.to_le_bytes().to_vec())
    }

    fn partial_merge(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let sum = counter(older, "operand")
            .ok()?
            .wrapping_add(counter(newer, "operand").ok()?);
        Some(sum.to_le_bytes().to_vec())
    }
}

/// Appends operands to the value, separated by `separator` (none by default; RocksDB's
/// `StringAppendOperator` takes one byte).
#[derive(Clone, Debug, Default)]
pub struct AppendOperator {
    separator: Vec<u8>,
}

impl AppendOperator {
    /// Appends with no separator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends with `separator` between the value and each operand.
    pub fn with_separator(separator: impl Into<Vec<u8>>) -> Self {
        AppendOperator {
            separator: separator.into(),
        }
    }
}

impl MergeOperator for AppendOperator {
    fn name(&self) -> &str {
        "append"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        let mut out = base.map(<[u8]>::to_vec).unwrap_or_default();
        for (i, op) in operands.iter().enumerate() {
            if base.is_some() || i > 0 {
                out.extend_from_slice(&self.separator);
            }
            out.extend_from_slice(op);
        }
        Ok(out)
    }

    fn partial_merge(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(older.len() + self.separator.len() + newer.len());
        out.extend_from_slice(older);
        out.extend_from_slice(&self.separator);
        out.extend_from_slice(newer);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(n: u64) -> Vec<u8> {
        n.to_le_bytes().to_vec()
    }

    #[test]
    fn the_counter_adds_and_refuses_what_is_not_a_counter() {
        let op = U64AddOperator;
        let (a, b) = (le(2), le(40));
        assert_eq!(op.full_merge(b"k", None, &[&a, &b]).unwrap(), le(42));
        assert_eq!(
            op.full_merge(b"k", Some(&le(u64::MAX)), &[&a]).unwrap(),
            le(1)
        );
        assert_eq!(op.partial_merge(b"k", &a, &b), Some(le(42)));
        let e = op.full_merge(b"k", Some(b"abc"), &[&a]).unwrap_err();
        assert!(e.contains("value of 3 bytes"), "{e}");
        assert_eq!(op.partial_merge(b"k", b"x", &a), None);
    }

    #[test]
    fn append_puts_the_separator_between_parts_only() {
        let op = AppendOperator::with_separator(",");
        assert_eq!(op.full_merge(b"k", None, &[b"a", b"b"]).unwrap(), b"a,b");
        assert_eq!(op.full_merge(b"k", Some(b"x"), &[b"a"]).unwrap(), b"x,a");
        assert_eq!(op.full_merge(b"k", Some(b""), &[]).unwrap(), b"");
        // Partial merges agree with full merges on every base.
        let partial = op.partial_merge(b"k", b"a", b"b").unwrap();
        for base in [None, Some(&b"x"[..])] {
            assert_eq!(
                op.full_merge(b"k", base, &[&partial]).unwrap(),
                op.full_merge(b"k", base, &[b"a", b"b"]).unwrap()
            );
        }
    }
}
