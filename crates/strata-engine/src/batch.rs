//! Write batches: several puts and deletes applied atomically.
//!
//! The encoding is also the write-ahead-log payload: a 12-byte header (first sequence number
//! u64 LE, count u32 LE) followed by records `[kind u8][key len varint][key][value len varint]
//! [value]` (deletes carry no value; a range deletion, kind 2, carries its start and end keys
//! in place of the key and the value; a merge operand, kind 3, is laid out as a put). A record of a keyspace other than the default one sets
//! the kind's high bit and has the keyspace's id as a varint after it; the default keyspace's
//! records are exactly what they were before keyspaces, so older WALs replay unchanged.

use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind, MAX_SEQNO};
use crate::keyspace::KeyspaceId;
use smallvec::SmallVec;

/// The largest key the engine accepts, in bytes.
pub const MAX_KEY_SIZE: usize = 64 << 10;
/// The largest value the engine accepts, in bytes.
pub const MAX_VALUE_SIZE: usize = 256 << 20;
/// Bytes of the batch header.
pub const HEADER_LEN: usize = 12;
/// The kind byte's flag for a record that names its keyspace.
const IN_KEYSPACE: u8 = 0x80;
/// The kind byte of a range deletion (after [`ValueKind`]'s delete 0 and put 1). A build from
/// before range deletions finds it malformed and refuses the WAL rather than skip it.
const RANGE_DELETE: u8 = 2;
/// The kind byte of a merge operand (laid out as a put).
const MERGE: u8 = 3;

/// An atomic group of writes. Later writes to the same key in one batch win.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
    user_bytes: u64,
    /// Whether the batch writes to the default keyspace.
    writes_default: bool,
    /// The other keyspaces it writes to, in the order first written.
    other_keyspaces: SmallVec<[KeyspaceId; 2]>,
    /// Whether it holds a merge operand (refused where no merge operator is set).
    has_merges: bool,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Decodes a varint at `*pos`, advancing it; `None` if truncated or longer than 10 bytes.
pub(crate) fn get_varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut result = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*pos)?;
        *pos += 1;
        result |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(result);
        }
    }
    None
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_SIZE {
        return Err(Error::InvalidArgument(format!(
            "key of {} bytes is larger than the maximum of {MAX_KEY_SIZE} bytes",
            key.len()
        )));
    }
    Ok(())
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; HEADER_LEN],
            count: 0,
            user_bytes: 0,
            writes_default: false,
            other_keyspaces: SmallVec::new(),
            has_merges: false,
        }
    }

    /// Adds a put. Fails, leaving the batch unchanged, if the key or value is too large
    /// ([`MAX_KEY_SIZE`], [`MAX_VALUE_SIZE`]).
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<&mut Self> {
        self.put_in_keyspace(KeyspaceId::DEFAULT, key.as_ref(), value.as_ref())
    }

    /// Adds a delete. Fails, leaving the batch unchanged, if the key is too large.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<&mut Self> {
        self.delete_in_keyspace(KeyspaceId::DEFAULT, key.as_ref())
    }

    /// Adds a put into keyspace `keyspace`.
    pub(crate) fn put_in_keyspace(
        &mut self,
        keyspace: KeyspaceId,
        key: &[u8],
        value: &[u8],
    ) -> Result<&mut Self> {
        self.push_key_value(keyspace, ValueKind::Put as u8, key, value, "value")
    }

    /// Adds a merge operand for `key` into keyspace `keyspace`.
    pub(crate) fn merge_in_keyspace(
        &mut self,
        keyspace: KeyspaceId,
        key: &[u8],
        operand: &[u8],
    ) -> Result<&mut Self> {
        self.push_key_value(keyspace, MERGE, key, operand, "merge operand")?;
        self.has_merges = true;
        Ok(self)
    }

    /// Adds a record of kind byte `kind` holding `key` and `value` (a put's layout, which a
    /// merge operand shares), checking both sizes; `what` names the value in the error.
    fn push_key_value(
        &mut self,
        keyspace: KeyspaceId,
        kind: u8,
        key: &[u8],
        value: &[u8],
        what: &str,
    ) -> Result<&mut Self> {
        check_key(key)?;
        if value.len() > MAX_VALUE_SIZE {
            return Err(Error::InvalidArgument(format!(
                "{what} of {} bytes is larger than the maximum of {MAX_VALUE_SIZE} bytes",
                value.len()
            )));
        }
        // One allocation for the whole record (kind, keyspace and two varints of at most 10
        // bytes each, key, value) instead of a doubling per field.
        self.rep.reserve(31 + key.len() + value.len());
        self.push_kind_byte(keyspace, kind);
        put_varint(&mut self.rep, key.len() as u64);
        self.rep.extend_from_slice(key);
        put_varint(&mut self.rep, value.len() as u64);
        self.rep.extend_from_slice(value);
        self.count += 1;
        self.user_bytes += (key.len() + value.len()) as u64;
        Ok(self)
    }

    /// Adds a merge operand for `key` (RocksDB: `WriteBatch::Merge`); the database must have a
    /// merge operator ([`crate::Options::with_merge_operator`]) when the batch is written.
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<&mut Self> {
        self.merge_in_keyspace(KeyspaceId::DEFAULT, key.as_ref(), operand.as_ref())
    }

    /// Adds a merge operand for `key` into `keyspace` (see [`WriteBatch::merge`]).
    pub fn merge_in(
        &mut self,
        keyspace: &crate::Keyspace,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) -> Result<&mut Self> {
        self.merge_in_keyspace(keyspace.id(), key.as_ref(), operand.as_ref())
    }

    /// Whether the batch holds a merge operand.
    pub(crate) fn has_merges(&self) -> bool {
        self.has_merges
    }

    /// Adds a delete from keyspace `keyspace`.
    pub(crate) fn delete_in_keyspace(
        &mut self,
        keyspace: KeyspaceId,
        key: &[u8],
    ) -> Result<&mut Self> {
        check_key(key)?;
        self.push_kind(keyspace, ValueKind::Delete);
        put_varint(&mut self.rep, key.len() as u64);
        self.rep.extend_from_slice(key);
        self.count += 1;
        self.user_bytes += key.len() as u64;
        Ok(self)
    }

    /// Adds a deletion of every key in `[start, end)` from keyspace `keyspace`. An empty range
    /// (`start == end`) deletes nothing; an end before the start is an error, as in RocksDB.
    pub(crate) fn delete_range_in_keyspace(
        &mut self,
        keyspace: KeyspaceId,
        start: &[u8],
        end: &[u8],
    ) -> Result<&mut Self> {
        check_key(start)?;
        check_key(end)?;
        if end < start {
            return Err(Error::InvalidArgument(format!(
                "delete_range: the end key \"{}\" comes before the start key \"{}\"",
                end.escape_ascii(),
                start.escape_ascii()
            )));
        }
        self.push_kind_byte(keyspace, RANGE_DELETE);
        put_varint(&mut self.rep, start.len() as u64);
        self.rep.extend_from_slice(start);
        put_varint(&mut self.rep, end.len() as u64);
        self.rep.extend_from_slice(end);
        self.count += 1;
        self.user_bytes += (start.len() + end.len()) as u64;
        Ok(self)
    }

    /// Adds a deletion of every key in `[start, end)` (RocksDB: `WriteBatch::DeleteRange`).
    /// Fails, leaving the batch unchanged, if a key is too large.
    pub fn delete_range(
        &mut self,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<&mut Self> {
        self.delete_range_in_keyspace(KeyspaceId::DEFAULT, start.as_ref(), end.as_ref())
    }

    /// Adds a deletion of every key in `[start, end)` from `keyspace` (see
    /// [`WriteBatch::delete_range`]).
    pub fn delete_range_in(
        &mut self,
        keyspace: &crate::Keyspace,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<&mut Self> {
        self.delete_range_in_keyspace(keyspace.id(), start.as_ref(), end.as_ref())
    }

    /// The kind byte of a record, with the keyspace after it unless it is the default one (so
    /// the default keyspace's records are encoded as before keyspaces existed).
    fn push_kind(&mut self, keyspace: KeyspaceId, kind: ValueKind) {
        self.push_kind_byte(keyspace, kind as u8);
    }

    fn push_kind_byte(&mut self, keyspace: KeyspaceId, kind: u8) {
        if keyspace == KeyspaceId::DEFAULT {
            self.writes_default = true;
            self.rep.push(kind);
        } else {
            if !self.other_keyspaces.contains(&keyspace) {
                self.other_keyspaces.push(keyspace);
            }
            self.rep.push(IN_KEYSPACE | kind);
            put_varint(&mut self.rep, u64::from(keyspace.0));
        }
    }

    /// Adds a put into `keyspace` (RocksDB: `WriteBatch::Put` with a column family). A batch
    /// may write to several keyspaces of one database; it is applied atomically across them.
    pub fn put_in(
        &mut self,
        keyspace: &crate::Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<&mut Self> {
        self.put_in_keyspace(keyspace.id(), key.as_ref(), value.as_ref())
    }

    /// Adds a delete from `keyspace` (see [`WriteBatch::put_in`]).
    pub fn delete_in(
        &mut self,
        keyspace: &crate::Keyspace,
        key: impl AsRef<[u8]>,
    ) -> Result<&mut Self> {
        self.delete_in_keyspace(keyspace.id(), key.as_ref())
    }

    /// Whether the batch writes to the default keyspace.
    pub(crate) fn writes_default(&self) -> bool {
        self.writes_default
    }

    /// The keyspaces other than the default one the batch writes to.
    pub(crate) fn other_keyspaces(&self) -> &[KeyspaceId] {
        &self.other_keyspaces
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.rep.truncate(HEADER_LEN);
        self.count = 0;
        self.user_bytes = 0;
        self.writes_default = false;
        self.other_keyspaces.clear();
        self.has_merges = false;
    }

    /// User key+value bytes in the batch (the denominator of write amplification).
    pub fn user_bytes(&self) -> u64 {
        self.user_bytes
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.rep.len()
    }

    /// The records, without the header.
    pub(crate) fn records(&self) -> &[u8] {
        &self.rep[HEADER_LEN..]
    }

    /// The operations in order.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            data: self.records(),
            pos: 0,
        }
    }
}

/// Appends a WAL payload for a group of batches: header with the first sequence number and the
/// total count, then every batch's records.
///
/// Public (but hidden) so that the `write_batch` fuzz target in `fuzz/` round-trips through it.
#[doc(hidden)]
pub fn encode_group(out: &mut Vec<u8>, first_seq: SeqNo, batches: &[&WriteBatch]) {
    let count: u32 = batches.iter().map(|b| b.count).sum();
    out.extend_from_slice(&first_seq.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    for b in batches {
        out.extend_from_slice(b.records());
    }
}

/// A decoded WAL payload: the first sequence number and the operations.
pub(crate) struct DecodedGroup<'a> {
    pub first_seq: SeqNo,
    pub count: u32,
    pub records: &'a [u8],
}

/// Decodes a WAL payload's header; why it is malformed on failure: shorter than the header, or
/// sequence numbers `first_seq ..= first_seq + count - 1` beyond [`MAX_SEQNO`] (which the
/// memtable's 56-bit sequence field could not hold, and `u64` arithmetic on them could overflow).
fn decode_group_header(payload: &[u8]) -> std::result::Result<DecodedGroup<'_>, String> {
    let Some((header, records)) = payload.split_first_chunk::<HEADER_LEN>() else {
        return Err(format!(
            "WAL record of {} bytes is shorter than its {HEADER_LEN}-byte header",
            payload.len()
        ));
    };
    let (seq, count) = header.split_at(8);
    let mut seq_bytes = [0u8; 8];
    seq_bytes.copy_from_slice(seq);
    let mut count_bytes = [0u8; 4];
    count_bytes.copy_from_slice(count);
    let (first_seq, count) = (
        u64::from_le_bytes(seq_bytes),
        u32::from_le_bytes(count_bytes),
    );
    if let Some(last_offset) = u64::from(count).checked_sub(1) {
        if first_seq
            .checked_add(last_offset)
            .is_none_or(|last| last > MAX_SEQNO)
        {
            return Err(format!(
                "WAL record's {count} operations starting at sequence number {first_seq} go \
                 beyond the largest sequence number {MAX_SEQNO}"
            ));
        }
    }
    Ok(DecodedGroup {
        first_seq,
        count,
        records,
    })
}

/// Decodes a WAL payload completely, the way WAL recovery replays it: the header
/// ([`decode_group_header`]), then every record, calling `apply` with each operation, its
/// sequence number (consecutive from the header's) and its keyspace. Returns the last sequence number applied
/// (`None` for an empty group), or why the payload is malformed: a short header, sequence
/// numbers beyond [`MAX_SEQNO`], a malformed record, or a record count that differs from the
/// header's. On an error `apply` may have seen a prefix of the operations.
///
/// Public (but hidden) so that the `wal_reader` fuzz target in `fuzz/` drives exactly this code.
#[doc(hidden)]
pub fn replay_wal_payload<'a>(
    payload: &'a [u8],
    mut apply: impl FnMut(SeqNo, KeyspaceId, BatchOp<'a>),
) -> std::result::Result<Option<SeqNo>, String> {
    let group = decode_group_header(payload)?;
    let count = u64::from(group.count);
    let mut ops = 0u64;
    for op in BatchIter::new(group.records) {
        let (keyspace, op) = op.map_err(|at| {
            format!(
                "malformed write-batch record at byte {} of the payload",
                HEADER_LEN + at
            )
        })?;
        if ops == count {
            return Err(format!(
                "WAL record announces {count} operations but holds more"
            ));
        }
        // In range: the header check bounds `first_seq + count - 1` by `MAX_SEQNO`.
        apply(group.first_seq + ops, keyspace, op);
        ops += 1;
    }
    if ops != count {
        return Err(format!(
            "WAL record announces {count} operations but holds {ops}"
        ));
    }
    Ok(ops.checked_sub(1).map(|last| group.first_seq + last))
}

/// One operation of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// A put.
    Put(&'a [u8], &'a [u8]),
    /// A delete.
    Delete(&'a [u8]),
    /// A deletion of every key from the first key up to, not including, the second.
    DeleteRange(&'a [u8], &'a [u8]),
    /// A merge operand for a key.
    Merge(&'a [u8], &'a [u8]),
}

/// Iterates over encoded batch records, each with its keyspace. Yields `Err(offset)` at the
/// first malformed record.
pub struct BatchIter<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> BatchIter<'a> {
    /// Iterates over raw records (no header).
    pub(crate) fn new(records: &'a [u8]) -> Self {
        BatchIter {
            data: records,
            pos: 0,
        }
    }

    fn slice(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(get_varint(self.data, &mut self.pos)?).ok()?;
        let end = self.pos.checked_add(len)?;
        let s = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = std::result::Result<(KeyspaceId, BatchOp<'a>), usize>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.data.len() {
            return None;
        }
        let start = self.pos;
        let kind = self.data[self.pos];
        self.pos += 1;
        let keyspace = if kind & IN_KEYSPACE == 0 {
            Some(KeyspaceId::DEFAULT)
        } else {
            // A default keyspace named explicitly is malformed: one encoding per record.
            get_varint(self.data, &mut self.pos)
                .and_then(|id| u32::try_from(id).ok())
                .map(KeyspaceId)
                .filter(|&k| k != KeyspaceId::DEFAULT)
        };
        let op = keyspace.and_then(|keyspace| {
            let op = match kind & !IN_KEYSPACE {
                RANGE_DELETE => self
                    .slice()
                    .and_then(|start| self.slice().map(|end| BatchOp::DeleteRange(start, end))),
                MERGE => self
                    .slice()
                    .and_then(|k| self.slice().map(|v| BatchOp::Merge(k, v))),
                kind => match ValueKind::from_u8(kind)? {
                    ValueKind::Put => self
                        .slice()
                        .and_then(|k| self.slice().map(|v| BatchOp::Put(k, v))),
                    ValueKind::Delete => self.slice().map(BatchOp::Delete),
                    // Batches write operands as kind 3, never the internal-key kind.
                    ValueKind::Merge => None,
                },
            };
            op.map(|op| (keyspace, op))
        });
        match op {
            Some(op) => Some(Ok(op)),
            None => {
                // Stop after reporting: nothing after a malformed record can be trusted.
                self.pos = self.data.len();
                Some(Err(start))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_through_the_group_encoding() {
        let mut a = WriteBatch::new();
        a.put("k1", "v1").unwrap().delete("k2").unwrap();
        let mut b = WriteBatch::new();
        b.put("", "")
            .unwrap()
            .put(vec![7u8; 300], vec![1u8; 70_000])
            .unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a.user_bytes(), 6);
        let mut out = Vec::new();
        encode_group(&mut out, 42, &[&a, &b]);
        let g = decode_group_header(&out).unwrap();
        assert_eq!((g.first_seq, g.count), (42, 4));
        let ops: Vec<_> = BatchIter::new(g.records)
            .map(|r| r.unwrap())
            .map(|(keyspace, op)| {
                assert_eq!(keyspace, KeyspaceId::DEFAULT);
                op
            })
            .collect();
        assert_eq!(ops[0], BatchOp::Put(b"k1", b"v1"));
        assert_eq!(ops[1], BatchOp::Delete(b"k2"));
        assert_eq!(ops[2], BatchOp::Put(b"", b""));
        assert!(matches!(ops[3], BatchOp::Put(k, v) if k.len() == 300 && v.len() == 70_000));
    }

    #[test]
    fn merge_operands_round_trip_and_mark_the_batch() {
        let mut b = WriteBatch::new();
        b.put("a", "1").unwrap();
        assert!(!b.has_merges());
        b.merge("a", "2").unwrap();
        b.merge_in_keyspace(KeyspaceId(4), b"z", b"").unwrap();
        assert!(b.has_merges());
        let ops: Vec<_> = b.iter().map(|r| r.unwrap()).collect();
        assert_eq!(
            ops,
            vec![
                (KeyspaceId::DEFAULT, BatchOp::Put(b"a", b"1")),
                (KeyspaceId::DEFAULT, BatchOp::Merge(b"a", b"2")),
                (KeyspaceId(4), BatchOp::Merge(b"z", b"")),
            ]
        );
        b.clear();
        assert!(!b.has_merges());
    }

    #[test]
    fn range_deletions_round_trip_in_every_keyspace() {
        let mut b = WriteBatch::new();
        b.delete_range("a", "c").unwrap();
        b.delete_range_in_keyspace(KeyspaceId(3), b"x", b"x")
            .unwrap();
        assert_eq!((b.len(), b.user_bytes()), (2, 4));
        let before = b.clone();
        assert!(b.delete_range("a", vec![0u8; MAX_KEY_SIZE + 1]).is_err());
        let e = b.delete_range("b", "a").unwrap_err();
        assert!(e.to_string().contains("comes before the start key"), "{e}");
        assert_eq!(b, before, "a refused range leaves the batch as it was");
        let ops: Vec<_> = b.iter().map(|r| r.unwrap()).collect();
        assert_eq!(
            ops,
            vec![
                (KeyspaceId::DEFAULT, BatchOp::DeleteRange(b"a", b"c")),
                (KeyspaceId(3), BatchOp::DeleteRange(b"x", b"x")),
            ]
        );
    }

    #[test]
    fn oversized_keys_and_values_are_rejected_without_changing_the_batch() {
        let mut b = WriteBatch::new();
        b.put("a", "b").unwrap();
        let before = b.clone();
        let e = b.put(vec![0u8; MAX_KEY_SIZE + 1], "v").unwrap_err();
        assert!(e.to_string().contains("key of 65537 bytes"), "{e}");
        assert!(b.delete(vec![0u8; MAX_KEY_SIZE + 1]).is_err());
        assert_eq!(b, before);
        b.clear();
        assert!(b.is_empty());
    }

    #[test]
    fn malformed_records_are_reported_with_their_offset() {
        let mut b = WriteBatch::new();
        b.put("key", "value").unwrap();
        let records = b.records();
        let truncated = &records[..records.len() - 2];
        let results: Vec<_> = BatchIter::new(truncated).collect();
        assert_eq!(results, vec![Err(0)]);
        let results: Vec<_> = BatchIter::new(&[9, 1, 2]).collect();
        assert_eq!(results, vec![Err(0)]);
        assert!(decode_group_header(&[1, 2, 3]).is_err());
    }

    /// Found by the `wal_reader` fuzz target (minimized): a WAL payload whose first sequence
    /// number, 0x0cad5cb3_00000006, is beyond `MAX_SEQNO`. Recovery used to replay it into the
    /// memtable, whose 56-bit sequence field silently dropped the high bits (and a first sequence
    /// number near `u64::MAX` overflowed the `seq += 1` that numbers the operations).
    #[test]
    fn wal_payloads_beyond_the_largest_sequence_number_are_rejected() {
        let fuzzed = [
            0x06, 0x00, 0x00, 0x00, 0xb3, 0x5c, 0xad, 0x0c, // first_seq
            0x01, 0x00, 0x00, 0x00, // count
            0x00, 0x02, b'k', b'1', // delete "k1"
        ];
        let mut applied = 0;
        let e = replay_wal_payload(&fuzzed, |_, _, _| applied += 1).unwrap_err();
        assert!(e.contains("beyond the largest sequence number"), "{e}");
        assert_eq!(applied, 0, "nothing is applied from a rejected header");
        assert!(decode_group_header(&fuzzed).is_err());

        let mut b = WriteBatch::new();
        b.put("k", "v").unwrap().delete("k").unwrap();
        let group = |first_seq| {
            let mut out = Vec::new();
            encode_group(&mut out, first_seq, &[&b]);
            out
        };
        // The last two sequence numbers that fit, and every first one that does not.
        let mut seqs = Vec::new();
        let last = replay_wal_payload(&group(MAX_SEQNO - 1), |seq, _, _| seqs.push(seq)).unwrap();
        assert_eq!(seqs, [MAX_SEQNO - 1, MAX_SEQNO]);
        assert_eq!(last, Some(MAX_SEQNO));
        for first_seq in [MAX_SEQNO, MAX_SEQNO + 1, u64::MAX - 1, u64::MAX] {
            let e = replay_wal_payload(&group(first_seq), |_, _, _| {}).unwrap_err();
            assert!(e.contains("beyond the largest sequence number"), "{e}");
        }
        // An empty group uses no sequence number.
        let empty = WriteBatch::new();
        let mut out = Vec::new();
        encode_group(&mut out, u64::MAX, &[&empty]);
        assert_eq!(replay_wal_payload(&out, |_, _, _| {}), Ok(None));
    }

    #[test]
    fn replaying_a_payload_checks_every_record_and_the_count() {
        let mut b = WriteBatch::new();
        b.put("k1", "v1").unwrap().delete("k2").unwrap();
        let mut out = Vec::new();
        encode_group(&mut out, 7, &[&b]);
        let mut ops = Vec::new();
        let last = replay_wal_payload(&out, |seq, _, op| ops.push((seq, op))).unwrap();
        assert_eq!(last, Some(8));
        assert_eq!(
            ops,
            [(7, BatchOp::Put(b"k1", b"v1")), (8, BatchOp::Delete(b"k2"))]
        );

        let e = replay_wal_payload(&out[..5], |_, _, _| {}).unwrap_err();
        assert!(e.contains("shorter than its 12-byte header"), "{e}");
        let e = replay_wal_payload(&out[..out.len() - 1], |_, _, _| {}).unwrap_err();
        assert!(e.contains("malformed write-batch record at byte 19"), "{e}");
        let mut more = out.clone();
        more[8] = 1; // announces 1 operation, holds 2
        let e = replay_wal_payload(&more, |_, _, _| {}).unwrap_err();
        assert!(e.contains("announces 1 operations but holds more"), "{e}");
        let mut fewer = out;
        fewer[8] = 3;
        let e = replay_wal_payload(&fewer, |_, _, _| {}).unwrap_err();
        assert!(e.contains("announces 3 operations but holds 2"), "{e}");
    }

    #[test]
    fn records_of_other_keyspaces_name_them_and_the_default_keyspace_keeps_its_encoding() {
        let mut plain = WriteBatch::new();
        plain.put("a", "1").unwrap().delete("b").unwrap();
        let mut tagged = WriteBatch::new();
        tagged
            .put_in_keyspace(KeyspaceId::DEFAULT, b"a", b"1")
            .unwrap()
            .delete_in_keyspace(KeyspaceId::DEFAULT, b"b")
            .unwrap();
        assert_eq!(plain, tagged, "the default keyspace is encoded as before");
        tagged
            .put_in_keyspace(KeyspaceId(3), b"c", b"2")
            .unwrap()
            .delete_in_keyspace(KeyspaceId(300), b"d")
            .unwrap();
        let ops: Vec<_> = tagged.iter().map(|r| r.unwrap()).collect();
        assert_eq!(
            ops,
            vec![
                (KeyspaceId::DEFAULT, BatchOp::Put(b"a", b"1")),
                (KeyspaceId::DEFAULT, BatchOp::Delete(b"b")),
                (KeyspaceId(3), BatchOp::Put(b"c", b"2")),
                (KeyspaceId(300), BatchOp::Delete(b"d")),
            ]
        );
        assert_eq!(tagged.user_bytes(), 6);
        // An explicit default keyspace, an id beyond u32 and a missing id are malformed.
        for bad in [
            &[0x81, 0x00, 1, b'k', 0][..],
            &[0x80, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, b'k'],
            &[0x81],
        ] {
            let results: Vec<_> = BatchIter::new(bad).collect();
            assert_eq!(results, vec![Err(0)], "{bad:?}");
        }
    }
}
