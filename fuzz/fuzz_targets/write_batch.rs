//! The write-batch codec. Two inputs in one target, chosen by the first byte:
//!
//! - even: the rest is a WAL payload (group header and batch records) handed straight to
//!   `batch::replay_wal_payload`, with no log checksum in front, so every mutation reaches the
//!   record decoder. What it accepts must re-encode through `WriteBatch` and `encode_group` into
//!   a payload that decodes to the same operations.
//! - odd: the rest is a script of operations (kind byte, key length byte, value length varint,
//!   then the bytes), built into batches with `WriteBatch::put`/`delete`, grouped, encoded and
//!   decoded back: the operations, sequence numbers, counts and byte totals must all match.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::batch::{encode_group, replay_wal_payload, BatchOp, HEADER_LEN};
use strata_engine::key::MAX_SEQNO;
use strata_engine::{WriteBatch, MAX_KEY_SIZE};

/// An owned operation, to compare decodes of different buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

fn own(op: BatchOp<'_>) -> Op {
    match op {
        BatchOp::Put(k, v) => Op::Put(k.to_vec(), v.to_vec()),
        BatchOp::Delete(k) => Op::Delete(k.to_vec()),
    }
}

/// Decodes `payload`, checking the sequence numbers handed out; returns the first sequence
/// number (from the header), the operations and the last sequence number, or the error.
fn decode(payload: &[u8]) -> Result<(u64, Vec<Op>, Option<u64>), String> {
    let mut ops = Vec::new();
    let mut seqs = Vec::new();
    let last = replay_wal_payload(payload, |seq, _keyspace, op| {
        seqs.push(seq);
        ops.push(own(op));
    })?;
    let first = u64::from_le_bytes(payload[..8].try_into().expect("a header was decoded"));
    for (i, seq) in seqs.iter().enumerate() {
        assert_eq!(
            *seq,
            first + i as u64,
            "sequence numbers are not consecutive"
        );
        assert!(
            *seq <= MAX_SEQNO,
            "sequence number {seq} beyond {MAX_SEQNO}"
        );
    }
    assert_eq!(
        last,
        seqs.last().copied(),
        "the returned last sequence number"
    );
    let announced = u32::from_le_bytes(payload[8..12].try_into().expect("header"));
    assert_eq!(announced as usize, ops.len(), "the header's count");
    Ok((first, ops, last))
}

/// Key and value bytes of `ops`, as `WriteBatch::user_bytes` counts them.
fn user_bytes(ops: &[Op]) -> usize {
    ops.iter()
        .map(|op| match op {
            Op::Put(k, v) => k.len() + v.len(),
            Op::Delete(k) => k.len(),
        })
        .sum()
}

/// The operations as one batch, if the encoder accepts every key and value.
fn batch_of(ops: &[Op]) -> Option<WriteBatch> {
    let mut batch = WriteBatch::new();
    for op in ops {
        match op {
            Op::Put(k, v) => batch.put(k, v).ok()?,
            Op::Delete(k) => batch.delete(k).ok()?,
        };
    }
    Some(batch)
}

fn check_payload(payload: &[u8]) {
    let Ok((first, ops, _)) = decode(payload) else {
        return;
    };
    // The decoder never hands out more bytes than the payload holds.
    let bytes = user_bytes(&ops);
    assert!(HEADER_LEN + bytes <= payload.len());
    let Some(batch) = batch_of(&ops) else {
        // Only a key beyond the limit can be refused (a value is bounded by the payload).
        assert!(ops.iter().any(|op| match op {
            Op::Put(k, _) | Op::Delete(k) => k.len() > MAX_KEY_SIZE,
        }));
        return;
    };
    let mut again = Vec::new();
    encode_group(&mut again, first, &[&batch]);
    // Varints may be non-canonical in the input, never longer once re-encoded.
    assert!(again.len() <= payload.len(), "re-encoding grew the payload");
    let (first_again, ops_again, _) = decode(&again).expect("a re-encoded payload decodes");
    assert_eq!(first_again, first);
    assert_eq!(ops_again, ops, "the re-encoded payload decodes differently");
}

/// Reads a script of operations: kind, key length, value length (LEB128, capped), bytes.
fn script(mut data: &[u8]) -> Vec<Vec<Op>> {
    let mut batches = vec![Vec::new()];
    let take = |data: &mut &[u8], n: usize| {
        let n = n.min(data.len());
        let (head, rest) = data.split_at(n);
        *data = rest;
        head.to_vec()
    };
    while let Some((&kind, rest)) = data.split_first() {
        data = rest;
        let key_len = take(&mut data, 1).first().copied().unwrap_or(0) as usize;
        let mut value_len = 0usize;
        for shift in [0, 7, 14] {
            let Some(&b) = take(&mut data, 1).first() else {
                break;
            };
            value_len |= usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
        }
        let key = take(&mut data, key_len);
        match kind % 3 {
            0 => {
                let value = take(&mut data, value_len);
                batches
                    .last_mut()
                    .expect("never empty")
                    .push(Op::Put(key, value));
            }
            1 => batches
                .last_mut()
                .expect("never empty")
                .push(Op::Delete(key)),
            _ => batches.push(Vec::new()),
        }
    }
    batches
}

fn check_script(data: &[u8]) {
    let Some((&seq_byte, rest)) = data.split_first() else {
        return;
    };
    let groups = script(rest);
    let batches: Vec<WriteBatch> = groups
        .iter()
        .map(|ops| batch_of(ops).expect("keys under 256 bytes are accepted"))
        .collect();
    for (batch, ops) in batches.iter().zip(&groups) {
        assert_eq!(batch.len(), ops.len());
        let iterated: Vec<Op> = batch
            .iter()
            .map(|op| own(op.expect("a built batch iterates").1))
            .collect();
        assert_eq!(&iterated, ops, "a batch iterates differently than built");
        let user_bytes = user_bytes(ops);
        assert_eq!(batch.user_bytes(), user_bytes as u64);
    }
    let all: Vec<Op> = groups.concat();
    // First sequence numbers near the top of the range: the header check must refuse exactly
    // the groups that would run past the largest sequence number.
    let first = MAX_SEQNO.saturating_sub(u64::from(seq_byte)) + 1;
    let mut payload = Vec::new();
    let refs: Vec<&WriteBatch> = batches.iter().collect();
    encode_group(&mut payload, first, &refs);
    if all.is_empty() {
        // Whether an empty group may start past the range is the decoder's call; it must
        // only not panic.
        let _ = decode(&payload);
        return;
    }
    let fits = first + (all.len() as u64 - 1) <= MAX_SEQNO;
    match decode(&payload) {
        Ok((f, ops, _)) => {
            assert!(
                fits,
                "a group past the largest sequence number was accepted"
            );
            assert_eq!(f, first);
            assert_eq!(ops, all, "a group decodes differently than encoded");
        }
        Err(why) => assert!(!fits, "a valid group was refused: {why}"),
    }
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((selector, rest)) if selector % 2 == 0 => check_payload(rest),
        Some((_, rest)) => check_script(rest),
        None => {}
    }
});
