//! `wal_chain::replay`, the rule that decides what a set of WALs may hold at open, over two
//! WALs (numbers 5 and 6) cut from the input: a little-endian u32 gives the first one's length,
//! the rest is the second. The raw WALs run first, then copies whose record checksums were
//! recomputed (`reframe_log`), so that mutated link records and batches reach the rule.
//!
//! What must hold in every case: point-in-time recovery never fails (no WAL holds re-logged
//! entries here); where the tolerant mode succeeds, point-in-time replays the same operations
//! and stops nowhere; where the strict mode succeeds, the tolerant one replays the same; where
//! the tolerant mode reports a hole, point-in-time stops at the same file and offset, having
//! replayed the same operations before it, and sets aside that WAL and every later one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::batch::BatchOp;
use strata_engine::wal_chain::{replay, Replayed, WalFile};
use strata_engine::{Error, RecoveryMode};
use strata_fuzz::reframe_log;

type Applied = Vec<(u64, Vec<u8>, Option<Vec<u8>>)>;

fn run(wals: &[(u64, Vec<u8>)], mode: RecoveryMode) -> (Result<Replayed, Error>, Applied) {
    let files = wals
        .iter()
        .map(|(number, data)| WalFile {
            number: *number,
            data: data.clone(),
        })
        .collect();
    let mut applied = Vec::new();
    let result = replay(files, 5, &[], mode, |_wal, seq, _keyspace, op| match op {
        BatchOp::Put(k, v) => applied.push((seq, k.to_vec(), Some(v.to_vec()))),
        BatchOp::Delete(k) => applied.push((seq, k.to_vec(), None)),
    });
    (result, applied)
}

fn check(wals: &[(u64, Vec<u8>)]) {
    let (tolerant, t_ops) = run(wals, RecoveryMode::TolerateCorruptedTail);
    let (strict, s_ops) = run(wals, RecoveryMode::AbsoluteConsistency);
    let (pit, p_ops) = run(wals, RecoveryMode::PointInTime);
    let pit = match pit {
        Ok(r) => r,
        Err(e) => panic!("point-in-time recovery failed: {e}"),
    };
    if let Ok(s) = &strict {
        assert!(s.stopped.is_none());
        match &tolerant {
            Ok(t) => assert_eq!(t, s, "strict and tolerant modes disagree"),
            Err(e) => panic!("the strict mode accepted what the tolerant one refused: {e}"),
        }
        assert_eq!(s_ops, t_ops);
    }
    match tolerant {
        Ok(t) => {
            assert!(t.stopped.is_none());
            assert_eq!(
                pit, t,
                "point-in-time and tolerant modes disagree on intact WALs"
            );
            assert_eq!(p_ops, t_ops);
        }
        Err(Error::Corruption { file, offset, .. }) => {
            let stop = pit
                .stopped
                .as_ref()
                .expect("point-in-time did not stop where the tolerant mode found a hole");
            assert_eq!((&stop.file, stop.offset), (&file, offset));
            assert_eq!(p_ops, t_ops, "different operations before the hole");
            let first: u64 = file
                .trim_end_matches(".log")
                .parse()
                .expect("a WAL file name");
            // That WAL and later ones (a later one without a single valid record that no
            // link names holds nothing and is no part of the chain).
            assert_eq!(stop.set_aside.first(), Some(&first), "the WALs set aside");
            assert!(stop.set_aside.windows(2).all(|w| w[0] < w[1]));
            assert!(stop
                .set_aside
                .iter()
                .all(|n| wals.iter().any(|(w, _)| w == n)));
        }
        Err(e) => panic!("the tolerant mode failed with a non-corruption error: {e}"),
    }
    if let Some(max) = pit.max_seq {
        assert!(p_ops.iter().all(|(seq, _, _)| *seq <= max));
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let split = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (five, six) = rest.split_at(split);
    check(&[(5, five.to_vec()), (6, six.to_vec())]);
    let fixed = [(5, reframe_log(five)), (6, reframe_log(six))];
    if fixed[0].1 != five || fixed[1].1 != six {
        check(&fixed);
    }
});
