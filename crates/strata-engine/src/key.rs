//! Internal keys: a user key followed by an 8-byte trailer packing the sequence number and the
//! value kind, ordered by user key ascending, then sequence number descending (newest first).

use std::cmp::Ordering;

/// A sequence number: the position of a write in the global write order (the metadata crate's
/// type; one type for the whole system).
pub use strata_meta::SeqNo;

/// The largest sequence number (56 bits; the low byte of the trailer holds the kind).
pub const MAX_SEQNO: SeqNo = (1 << 56) - 1;

/// Bytes of the trailer after the user key.
pub const TRAILER_LEN: usize = 8;

/// What an entry is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone.
    Delete = 0,
    /// A value.
    Put = 1,
    /// A merge operand ([`crate::MergeOperator`]): the key's value is the operator applied to
    /// the older versions and this. A build from before merge operators finds the kind invalid
    /// and reports the table or WAL corrupt rather than read a wrong value.
    Merge = 2,
}

impl ValueKind {
    /// The kind encoded by `byte`, if valid.
    pub fn from_u8(byte: u8) -> Option<ValueKind> {
        match byte {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::Merge),
            _ => None,
        }
    }
}

/// The kind used in seek keys: the largest, so a seek for (key, seq) lands on the newest entry
/// of `key` with a sequence number ≤ seq.
pub const SEEK_KIND: u8 = 0xff;

/// Packs a sequence number and kind byte into a trailer value.
#[inline]
pub fn pack_trailer(seq: SeqNo, kind: u8) -> u64 {
    (seq << 8) | u64::from(kind)
}

/// Appends the internal key for (`user_key`, `seq`, `kind`) to `buf`.
#[inline]
pub fn append_internal_key(buf: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: u8) {
    buf.extend_from_slice(user_key);
    buf.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// The internal key for (`user_key`, `seq`, `kind`).
pub fn internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut buf = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut buf, user_key, seq, kind as u8);
    buf
}

/// The seek key that finds the newest entry of `user_key` visible at `seq`.
pub fn seek_key(user_key: &[u8], seq: SeqNo) -> Vec<u8> {
    let mut buf = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut buf, user_key, seq, SEEK_KIND);
    buf
}

/// The user-key part of an internal key.
///
/// REQUIRES: `ikey.len() >= TRAILER_LEN`.
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len() - TRAILER_LEN]
}

/// The trailer value of an internal key.
///
/// REQUIRES: `ikey.len() >= TRAILER_LEN`.
#[inline]
pub fn trailer(ikey: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&ikey[ikey.len() - TRAILER_LEN..]);
    u64::from_le_bytes(b)
}

/// Splits an internal key into (user key, sequence number, kind); `None` if it is too short or
/// the kind byte is invalid.
pub fn parse_internal_key(ikey: &[u8]) -> Option<(&[u8], SeqNo, ValueKind)> {
    if ikey.len() < TRAILER_LEN {
        return None;
    }
    let t = trailer(ikey);
    let kind = ValueKind::from_u8((t & 0xff) as u8)?;
    Some((user_key(ikey), t >> 8, kind))
}

/// Orders internal keys: user key ascending, then trailer descending (newest first).
///
/// REQUIRES: both keys are at least `TRAILER_LEN` long.
#[inline]
pub fn compare_internal_keys(a: &[u8], b: &[u8]) -> Ordering {
    compare_user_keys(user_key(a), user_key(b)).then_with(|| trailer(b).cmp(&trailer(a)))
}

/// Byte order of user keys (`a.cmp(b)`), deciding most pairs without calling memcmp: keys that
/// differ in their first eight bytes are compared as one big-endian word (measured: memcmp and
/// the comparison around it took 12% of a random fill, most of it in memtable inserts).
#[inline]
pub fn compare_user_keys(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some(wa), Some(wb)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        let (wa, wb) = (u64::from_be_bytes(*wa), u64::from_be_bytes(*wb));
        if wa != wb {
            return wa.cmp(&wb);
        }
    }
    a.cmp(b)
}

/// An owned internal key ordered by [`compare_internal_keys`] (for ordered containers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InternalKey(pub bytes::Bytes);

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal_keys(&self.0, &other.0)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_is_user_key_then_newest_first() {
        let a5 = internal_key(b"a", 5, ValueKind::Put);
        let a9 = internal_key(b"a", 9, ValueKind::Delete);
        let ab1 = internal_key(b"ab", 1, ValueKind::Put);
        assert_eq!(compare_internal_keys(&a9, &a5), Ordering::Less);
        assert_eq!(compare_internal_keys(&a5, &ab1), Ordering::Less);
        assert_eq!(
            compare_internal_keys(&seek_key(b"a", 7), &a5),
            Ordering::Less
        );
        assert_eq!(
            compare_internal_keys(&seek_key(b"a", 9), &a9),
            Ordering::Less
        );
        assert_eq!(
            compare_internal_keys(&a9, &seek_key(b"a", 8)),
            Ordering::Less
        );
        assert_eq!(
            parse_internal_key(&a9),
            Some((&b"a"[..], 9, ValueKind::Delete))
        );
        assert_eq!(parse_internal_key(b"short"), None);
        assert_eq!(parse_internal_key(&seek_key(b"x", 1)), None);
    }

    proptest::proptest! {
        /// The word fast path agrees with plain byte order, keys shorter than a word included.
        #[test]
        fn user_key_order_is_byte_order(
            a in proptest::collection::vec(0u8..4, 0..12),
            b in proptest::collection::vec(0u8..4, 0..12),
        ) {
            proptest::prop_assert_eq!(compare_user_keys(&a, &b), a.cmp(&b));
        }
    }
}
