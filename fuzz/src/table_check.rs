//! The checks of the table fuzz targets: open a table, verify it, walk it both ways, seek and
//! get, and on a table that verifies, check the answers against each other.

use std::cmp::Ordering;
use std::sync::{Arc, Weak};

use strata_engine::iter::InternalIterator;
use strata_engine::key::{ValueKind, MAX_SEQNO};
use strata_engine::stats::Statistics;
use strata_engine::table::{BlockCache, BlockFiles, Table};
use strata_engine::Result;

use crate::MemFile;

/// Keys kept from a walk for checking seeks (a table of long keys sharing prefixes decodes to
/// far more key bytes than it stores).
const KEY_BUDGET: usize = 16 << 20;

/// (user key, trailer) of an internal key; short keys sort as a bare user key with the largest
/// trailer, as the engine's reader does.
fn split(key: &[u8]) -> (&[u8], u64) {
    match key.len().checked_sub(8) {
        Some(n) => {
            let mut t = [0u8; 8];
            t.copy_from_slice(&key[n..]);
            (&key[..n], u64::from_le_bytes(t))
        }
        None => (key, u64::MAX),
    }
}

fn cmp(a: &[u8], b: &[u8]) -> Ordering {
    let ((ua, ta), (ub, tb)) = (split(a), split(b));
    ua.cmp(ub).then_with(|| tb.cmp(&ta))
}

fn hash(key: &[u8], value: &[u8]) -> u64 {
    // FNV-1a over both, with a separator: only equality matters.
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in key.iter().chain(&[0xff, 0x00]).chain(value) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^ key.len() as u64
}

/// One walk: entry hashes in visiting order and (within the budget) the keys.
struct Walk {
    hashes: Vec<u64>,
    keys: Option<Vec<Vec<u8>>>,
    result: Result<()>,
}

fn walk(
    it: &mut dyn InternalIterator,
    start: fn(&mut dyn InternalIterator) -> Result<()>,
    step: fn(&mut dyn InternalIterator) -> Result<()>,
    limit: usize,
) -> Walk {
    let mut w = Walk {
        hashes: Vec::new(),
        keys: Some(Vec::new()),
        result: Ok(()),
    };
    let mut key_bytes = 0usize;
    w.result = start(it);
    while w.result.is_ok() && it.valid() {
        assert!(
            w.hashes.len() < limit,
            "iterator yields more entries than the file can hold"
        );
        w.hashes.push(hash(it.key(), it.value()));
        key_bytes += it.key().len();
        if key_bytes > KEY_BUDGET {
            w.keys = None;
        }
        if let Some(keys) = &mut w.keys {
            keys.push(it.key().to_vec());
        }
        w.result = step(it);
    }
    if w.result.is_err() {
        assert!(!it.valid(), "an iterator stays valid after an error");
    }
    w
}

/// Opens `bytes` as table 7 (through `files` for blocks it keeps in other files) and checks
/// everything a reader can be asked; `input` supplies seek targets.
pub fn check_table(bytes: Vec<u8>, input: &[u8], files: Option<Weak<dyn BlockFiles>>) {
    let len = bytes.len();
    let cache = len
        .is_multiple_of(2)
        .then(|| Arc::new(BlockCache::new(256 << 10)));
    let Ok(table) = Table::open(
        Arc::new(MemFile(bytes)),
        7,
        "000007.sst".to_string(),
        cache,
        Arc::new(Statistics::default()),
    ) else {
        return;
    };
    let table = Arc::new(match files {
        Some(files) => table.with_block_files(files),
        None => table,
    });
    let verified = table.verify_checksums().is_ok();
    let props = table.properties().clone();
    let _ = (
        table.block_ranges(),
        table.memory_usage(),
        table.file_size(),
    );

    // Entries decode from at most 255x the file's bytes, at least three bytes each.
    let limit = len.saturating_mul(255) / 3 + 1;
    let mut it = table.iter();
    let fwd = walk(&mut it, |i| i.seek_to_first(), |i| i.next(), limit);
    let bwd = walk(&mut it, |i| i.seek_to_last(), |i| i.prev(), limit);

    // Seek targets: slices of the input, and keys of the table with nearby trailers.
    let mut targets: Vec<Vec<u8>> = [0, len / 3, len / 2, len.saturating_sub(80)]
        .iter()
        .map(|&at| input.iter().skip(at).take(1 + at % 20).copied().collect())
        .collect();
    if let Some(keys) = &fwd.keys {
        for i in [0, keys.len() / 2, keys.len().saturating_sub(1)] {
            if let Some(k) = keys.get(i) {
                targets.push(k.clone());
                let (user, trailer) = split(k);
                for t in [trailer.wrapping_add(1), trailer.wrapping_sub(1), u64::MAX] {
                    let mut key = user.to_vec();
                    key.extend_from_slice(&t.to_le_bytes());
                    targets.push(key);
                }
                targets.push(user.to_vec());
            }
        }
    }

    let consistent = verified && fwd.result.is_ok() && bwd.result.is_ok();
    if consistent {
        assert_eq!(
            fwd.hashes.len() as u64,
            props.entries,
            "verified table: walk and properties disagree on the entry count"
        );
        let mut back = bwd.hashes.clone();
        back.reverse();
        assert_eq!(fwd.hashes, back, "verified table: walks disagree");
        if let Some(keys) = &fwd.keys {
            for pair in keys.windows(2) {
                assert_eq!(cmp(&pair[0], &pair[1]), Ordering::Less, "keys out of order");
            }
        }
    }
    for target in &targets {
        let sought = it.seek(target);
        let found = (sought.is_ok() && it.valid()).then(|| it.key().to_vec());
        let sought_prev = it.seek_for_prev(target);
        let found_prev = (sought_prev.is_ok() && it.valid()).then(|| it.key().to_vec());
        if let (true, Some(keys), Ok(()), Ok(())) = (consistent, &fwd.keys, sought, sought_prev) {
            let first_at_or_after = keys.iter().find(|k| cmp(k, target) != Ordering::Less);
            assert_eq!(found.as_ref(), first_at_or_after, "seek missed");
            let last_at_or_before = keys
                .iter()
                .rev()
                .find(|k| cmp(k, target) != Ordering::Greater);
            assert_eq!(
                found_prev.as_ref(),
                last_at_or_before,
                "seek_for_prev missed"
            );
        }
        // Point lookups at the target's user key, at the newest and at its own sequence number.
        let (user, trailer) = split(target);
        for snapshot in [MAX_SEQNO, trailer >> 8] {
            let got = table.get(user, snapshot);
            let _ = table.may_contain(user);
            if let (true, Some(keys), Ok(Some((seq, kind, _)))) = (consistent, &fwd.keys, &got) {
                // A hit must be the newest entry of that user key visible at the snapshot.
                let newest = keys
                    .iter()
                    .map(|k| split(k))
                    .find(|&(u, t)| u == user && (t >> 8) <= snapshot.min(MAX_SEQNO));
                let kind_byte = match kind {
                    ValueKind::Put => 1,
                    ValueKind::Delete => 0,
                };
                assert_eq!(
                    newest.map(|(_, t)| t),
                    Some((seq << 8) | kind_byte),
                    "get returned an entry that is not the newest visible one"
                );
            }
        }
    }
}
