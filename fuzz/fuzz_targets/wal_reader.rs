//! `log::LogReader` over arbitrary bytes in all three recovery modes, every record then decoded as a
//! write-batch group and replayed into a memtable, as WAL recovery does. The raw input runs
//! first, then a copy whose record checksums were recomputed (see `src/lib.rs`), so that
//! mutated payloads reach the batch decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::batch::{replay_wal_payload, BatchOp};
use strata_engine::key::{ValueKind, MAX_SEQNO};
use strata_engine::log::{LogReader, HEADER_LEN};
use strata_engine::memtable::Memtable;
use strata_engine::{Error, RecoveryMode};
use strata_fuzz::reframe_log;

/// Reads every record; returns them and the offset of the damage that ended reading, if any.
fn read_all(data: &[u8], mode: RecoveryMode) -> (Vec<Vec<u8>>, Option<u64>) {
    let mut reader = LogReader::new(data.to_vec(), "000003.log".to_string(), mode);
    let mut records = Vec::new();
    let mut consumed = 0usize;
    let damage = loop {
        match reader.next_record() {
            Ok(Some(payload)) => {
                assert_eq!(reader.last_record_offset(), consumed as u64);
                consumed += HEADER_LEN + payload.len();
                assert!(consumed <= data.len(), "records hold more than the file");
                records.push(payload);
            }
            Ok(None) => {
                let dropped = reader.dropped_tail();
                if mode == RecoveryMode::AbsoluteConsistency {
                    assert!(dropped.is_none(), "absolute consistency dropped a tail");
                    assert_eq!(
                        consumed,
                        data.len(),
                        "a clean end before the end of the file"
                    );
                }
                match dropped {
                    Some((offset, _)) => assert_eq!(offset, consumed as u64),
                    None => assert_eq!(consumed, data.len()),
                }
                assert!(
                    matches!(reader.next_record(), Ok(None)),
                    "the end is not final"
                );
                break dropped.map(|(offset, _)| offset);
            }
            Err(Error::Corruption { offset, .. }) => {
                assert_eq!(
                    offset, consumed as u64,
                    "corruption reported at the wrong offset"
                );
                assert!(
                    matches!(reader.next_record(), Err(Error::Corruption { offset: o, .. }) if o == offset),
                    "an error does not repeat"
                );
                break Some(offset);
            }
            Err(e) => panic!("a log reader failed with a non-corruption error: {e}"),
        }
    };
    (records, damage)
}

/// Decodes one WAL payload and replays it into `mem`, checking what recovery relies on.
fn replay(payload: &[u8], mem: &Memtable) {
    let mut expected_seq = None;
    let (mut first, mut last) = (None, None);
    let result = replay_wal_payload(payload, |seq, _keyspace, op| {
        if let Some(e) = expected_seq {
            assert_eq!(seq, e, "sequence numbers are not consecutive");
        }
        expected_seq = seq.checked_add(1);
        first.get_or_insert(seq);
        last = Some(seq);
        match op {
            BatchOp::Put(k, v) => {
                assert!(k.len() + v.len() <= payload.len());
                mem.insert(k, seq, ValueKind::Put, v);
            }
            BatchOp::Delete(k) => {
                assert!(k.len() <= payload.len());
                mem.insert(k, seq, ValueKind::Delete, &[]);
            }
        }
    });
    if let Ok(returned_last) = result {
        assert_eq!(
            returned_last, last,
            "the last sequence number returned is not the last applied"
        );
        if let (Some(first), Some(last)) = (first, last) {
            assert!(
                last <= MAX_SEQNO,
                "a WAL record was accepted with sequence numbers {first}..={last}, beyond the \
                 largest sequence number {MAX_SEQNO}"
            );
        }
    }
}

fn check_log(data: &[u8]) {
    let (tolerant, damage_t) = read_all(data, RecoveryMode::TolerateCorruptedTail);
    let (absolute, damage_a) = read_all(data, RecoveryMode::AbsoluteConsistency);
    assert_eq!(
        tolerant, absolute,
        "the recovery modes read different records"
    );
    assert_eq!(
        damage_t, damage_a,
        "the recovery modes see damage at different offsets"
    );
    // Point in time never fails: it reads the same records and stops at the same damage.
    let mut reader = LogReader::new(
        data.to_vec(),
        "000003.log".to_string(),
        RecoveryMode::PointInTime,
    );
    let mut point_in_time = Vec::new();
    loop {
        match reader.next_record() {
            Ok(Some(payload)) => point_in_time.push(payload),
            Ok(None) => break,
            Err(e) => panic!("a point-in-time reader failed: {e}"),
        }
    }
    assert_eq!(
        point_in_time, tolerant,
        "point-in-time read different records"
    );
    assert_eq!(
        reader.damage().map(|d| d.offset),
        damage_t,
        "point-in-time saw damage at a different offset"
    );
    assert_eq!(reader.valid_len(), damage_t.unwrap_or(data.len() as u64));
    let mem = Memtable::new(3);
    for payload in &tolerant {
        replay(payload, &mem);
    }
}

fuzz_target!(|data: &[u8]| {
    check_log(data);
    let fixed = reframe_log(data);
    if fixed != data {
        check_log(&fixed);
    }
});
