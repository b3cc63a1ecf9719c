//! Table-level tests: round trips against a model, block boundaries, the Bloom filter,
//! statistics and the block cache, corruption, truncation and decoder robustness.

use std::collections::BTreeSet;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;

use parking_lot::Mutex;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::block::BlockBuilder;
use super::compress::{block_crc, BLOCK_TRAILER_LEN};
use super::file::ReadPurpose;
use super::format::{
    decode_index, BlockHandle, Footer, IndexValue, IndexWriter, FOOTER_LEN, FORMAT_VERSION,
    FORMAT_WITHOUT_DICTIONARY, FORMAT_WITHOUT_RANGE_DELETIONS,
};
use super::*;
use crate::error::Error;
use crate::fs::{RandomAccessFile, WritableFile};
use crate::iter::InternalIterator;
use crate::key::{
    compare_internal_keys, internal_key, pack_trailer, seek_key, SeqNo, ValueKind, MAX_SEQNO,
    SEEK_KIND,
};
use crate::stats::Statistics;

mod damage;
mod dictionary;

// ---- in-test file implementations ----

/// A writable file appending to a shared vector.
struct VecWriter {
    data: Arc<Mutex<Vec<u8>>>,
    synced: Arc<AtomicBool>,
}

impl WritableFile for VecWriter {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.data.lock().extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        self.synced.store(true, AtomicOrdering::SeqCst);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.data.lock().len() as u64
    }
}

/// A read-only file over bytes.
struct VecFile(Arc<Vec<u8>>);

impl RandomAccessFile for VecFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let end = start
            .checked_add(buf.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        let src = self.0.get(start..end).ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

type Entry = (Vec<u8>, Vec<u8>);

const NAME: &str = "000042.sst";

fn build(entries: &[Entry], options: TableOptions) -> (Vec<u8>, TableSummary) {
    let data = Arc::new(Mutex::new(Vec::new()));
    let synced = Arc::new(AtomicBool::new(false));
    let file = VecWriter {
        data: Arc::clone(&data),
        synced: Arc::clone(&synced),
    };
    // Without compression nothing shrinks when a buffered block is written out.
    let monotonic = options.compression == Compression::None;
    let mut b = TableBuilder::new(Box::new(file), NAME.to_string(), options);
    let mut last_estimate = 0;
    for (k, v) in entries {
        b.add(k, v).unwrap();
        assert!(
            !monotonic || b.estimated_size() >= last_estimate,
            "estimated size shrank"
        );
        last_estimate = b.estimated_size();
    }
    assert_eq!(b.entries(), entries.len() as u64);
    let summary = b.finish().unwrap();
    assert!(synced.load(AtomicOrdering::SeqCst), "finish syncs the file");
    let bytes = std::mem::take(&mut *data.lock());
    assert_eq!(summary.file_size, bytes.len() as u64);
    if monotonic {
        // Only the properties block and the footer are missing from the estimate.
        assert!(last_estimate <= summary.file_size && summary.file_size - last_estimate < 1024);
    }
    (bytes, summary)
}

fn open_with(
    bytes: Vec<u8>,
    number: u64,
    cache: Option<Arc<BlockCache>>,
) -> crate::Result<(Arc<Table>, Arc<Statistics>)> {
    let stats = Arc::new(Statistics::default());
    let file: Arc<dyn RandomAccessFile> = Arc::new(VecFile(Arc::new(bytes)));
    let table = Table::open(file, number, NAME.to_string(), cache, Arc::clone(&stats))?;
    Ok((Arc::new(table), stats))
}

fn open(bytes: Vec<u8>) -> crate::Result<Arc<Table>> {
    open_with(bytes, 1, None).map(|(t, _)| t)
}

// ---- random data and the model ----

/// Sorted entries: user keys of many shapes (empty, prefixes of one another, long, binary),
/// 1–4 versions each, ~20 % tombstones, values from empty to several blocks long.
fn random_entries(rng: &mut StdRng, users: usize) -> Vec<Entry> {
    let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
    keys.insert(Vec::new());
    while keys.len() < users {
        let key = match rng.random_range(0..10) {
            0 => {
                let len = rng.random_range(200..1500);
                (0..len).map(|_| rng.random::<u8>()).collect()
            }
            1 | 2 => {
                // A prefix or an extension of an existing key.
                let base = keys
                    .iter()
                    .nth(rng.random_range(0..keys.len()))
                    .cloned()
                    .unwrap_or_default();
                let mut k = base;
                if rng.random_bool(0.5) && !k.is_empty() {
                    k.truncate(rng.random_range(0..k.len()));
                } else {
                    k.push(*b"a\x00\xffz".get(rng.random_range(0..4)).unwrap());
                }
                k
            }
            _ => {
                let len = rng.random_range(1..12);
                (0..len)
                    .map(|_| *b"abcd\x00\xff".get(rng.random_range(0..6)).unwrap())
                    .collect()
            }
        };
        keys.insert(key);
    }
    let mut out = Vec::new();
    for user in keys {
        let versions = rng.random_range(1..=4);
        let mut seqs: Vec<SeqNo> = (0..versions).map(|_| rng.random_range(1..1000)).collect();
        seqs.sort_unstable();
        seqs.dedup();
        for &seq in seqs.iter().rev() {
            let kind = if rng.random_bool(0.2) {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = match (kind, rng.random_range(0..20)) {
                (ValueKind::Delete, _) | (_, 0..=1) => Vec::new(),
                (_, 2) => vec![rng.random::<u8>(); rng.random_range(5000..12000)],
                _ => (0..rng.random_range(1..80))
                    .map(|i| b'a' + (i % 7) as u8)
                    .collect(),
            };
            out.push((internal_key(&user, seq, kind), value));
        }
    }
    out
}

/// The model answer to `get(user_key, snapshot)`.
fn model_get(
    entries: &[Entry],
    user: &[u8],
    snapshot: SeqNo,
) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
    let target = seek_key(user, snapshot);
    let i = entries.partition_point(|(k, _)| compare_internal_keys(k, &target).is_lt());
    let (k, v) = entries.get(i)?;
    let (found, seq, kind) = crate::key::parse_internal_key(k)?;
    (found == user).then(|| (seq, kind, v.clone()))
}

fn all_options() -> Vec<TableOptions> {
    let mut out = Vec::new();
    for compression in [
        Compression::None,
        Compression::Lz4,
        Compression::zstd(3),
        Compression::Zstd {
            level: 3,
            max_dict_bytes: strata_policy::MIN_DICT_BYTES,
        },
    ] {
        out.push(TableOptions {
            compression,
            record_block_ranges: true,
            ..TableOptions::default()
        });
        out.push(TableOptions {
            compression,
            record_block_ranges: true,
            block_align: true,
            ..TableOptions::default()
        });
        out.push(TableOptions {
            compression,
            block_size: 256,
            restart_interval: 1,
            bloom_bits_per_key: 0.0,
            record_block_ranges: true,
            collect_key_hashes: false,
            block_align: false,
        });
        out.push(TableOptions {
            compression,
            block_size: 1024,
            restart_interval: 3,
            bloom_bits_per_key: 4.5,
            record_block_ranges: false,
            collect_key_hashes: false,
            block_align: false,
        });
    }
    out
}

fn collect_forward(it: &mut TableIterator) -> Vec<Entry> {
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

fn collect_backward(it: &mut TableIterator) -> Vec<Entry> {
    let mut out = Vec::new();
    it.seek_to_last().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().unwrap();
    }
    out.reverse();
    out
}

// ---- round trips ----

#[test]
fn round_trip_matches_the_model_for_every_compression_and_layout() {
    let mut rng = StdRng::seed_from_u64(7);
    let entries = random_entries(&mut rng, 1500);
    let users: BTreeSet<Vec<u8>> = entries
        .iter()
        .map(|(k, _)| k[..k.len() - 8].to_vec())
        .collect();
    for (n, options) in all_options().into_iter().enumerate() {
        let (bytes, summary) = build(&entries, options.clone());
        let cache = n
            .is_multiple_of(2)
            .then(|| Arc::new(BlockCache::new(1 << 20)));
        let (table, stats) = open_with(bytes, n as u64 + 1, cache).unwrap();

        // Summary and properties agree with the input.
        let props = table.properties();
        assert_eq!(props.entries, entries.len() as u64);
        assert_eq!(summary.entries, props.entries);
        let tombstones = entries.iter().filter(|(k, _)| k[k.len() - 8] == 0).count() as u64;
        assert_eq!(props.tombstones, tombstones);
        assert_eq!(summary.tombstones, tombstones);
        assert_eq!(&props.smallest[..], &users.first().unwrap()[..]);
        assert_eq!(&props.largest[..], &users.last().unwrap()[..]);
        assert_eq!(
            (&props.smallest, &props.largest),
            (&summary.smallest, &summary.largest)
        );
        assert_eq!(
            props.raw_key_bytes,
            entries.iter().map(|(k, _)| k.len() as u64).sum::<u64>()
        );
        assert_eq!(
            props.raw_value_bytes,
            entries.iter().map(|(_, v)| v.len() as u64).sum::<u64>()
        );
        assert_eq!(props.data_blocks, summary.data_blocks);
        assert_eq!(props.compression, options.compression);
        assert_eq!(props.bloom_bits_per_key, options.bloom_bits_per_key);
        // Version 6 only for a table that trained a dictionary.
        let expected_version = if props.compression_dictionary.is_some() {
            FORMAT_VERSION
        } else {
            FORMAT_WITHOUT_RANGE_DELETIONS
        };
        assert_eq!(props.format_version, expected_version);
        assert_eq!(
            (props.smallest_seqno, props.largest_seqno),
            (summary.smallest_seqno, summary.largest_seqno)
        );
        if options.record_block_ranges {
            assert_eq!(table.block_ranges().unwrap(), summary.blocks);
            assert_eq!(summary.blocks.len() as u64, summary.data_blocks);
        } else {
            assert!(summary.blocks.is_empty());
        }
        assert!(table
            .block_ranges()
            .unwrap()
            .windows(2)
            .all(|w| w[0].largest <= w[1].smallest));
        table.verify_checksums().unwrap();

        // Point lookups at many snapshots read at most one block each.
        for user in &users {
            let mut snapshots = vec![0, MAX_SEQNO, u64::MAX];
            for (k, _) in entries.iter().filter(|(k, _)| k[..k.len() - 8] == user[..]) {
                let seq = crate::key::parse_internal_key(k).unwrap().1;
                snapshots.extend([seq, seq - 1, seq + 1]);
            }
            for snapshot in snapshots {
                let before = Statistics::get(&stats.blocks_read);
                let got = table.get(user, snapshot).unwrap();
                assert!(Statistics::get(&stats.blocks_read) - before <= 1);
                let got = got.map(|(s, k, v)| (s, k, v.to_vec()));
                assert_eq!(
                    got,
                    model_get(&entries, user, snapshot),
                    "get {user:?} @ {snapshot}"
                );
            }
            assert!(table.may_contain(user).unwrap(), "no false negatives");
        }
        for _ in 0..300 {
            let absent: Vec<u8> = (0..rng.random_range(0..6))
                .map(|_| rng.random_range(b'0'..=b'9'))
                .collect();
            if !users.contains(&absent) {
                assert_eq!(table.get(&absent, MAX_SEQNO).unwrap(), None);
            }
        }

        // Full scans both ways.
        let mut it = table.iter();
        assert_eq!(
            collect_forward(&mut it),
            entries,
            "forward scan, options {n}"
        );
        assert_eq!(
            collect_backward(&mut it),
            entries,
            "backward scan, options {n}"
        );

        // Seeks to random targets, including before the first and after the last key, each
        // followed by a few random steps.
        let mut targets: Vec<Vec<u8>> = vec![
            seek_key(b"", MAX_SEQNO),
            internal_key(b"", 0, ValueKind::Delete),
            seek_key(&[0xff; 2000], 0),
            internal_key(&[0xff; 2000], MAX_SEQNO, ValueKind::Put),
            b"abc".to_vec(), // shorter than a trailer: treated as the user key's first position
        ];
        for _ in 0..400 {
            let user = if rng.random_bool(0.6) {
                users
                    .iter()
                    .nth(rng.random_range(0..users.len()))
                    .unwrap()
                    .clone()
            } else {
                (0..rng.random_range(0..5))
                    .map(|_| *b"abcd\x00\xff".get(rng.random_range(0..6)).unwrap())
                    .collect()
            };
            let seq = rng.random_range(0..1001);
            let kind = if rng.random_bool(0.5) {
                SEEK_KIND
            } else {
                rng.random_range(0..2)
            };
            let mut t = user;
            t.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
            targets.push(t);
        }
        for target in &targets {
            let cmp = |k: &[u8]| {
                super::block::cmp_to_target(
                    k,
                    super::block::split_internal_key(target).0,
                    super::block::split_internal_key(target).1,
                )
            };
            let mut pos = entries.partition_point(|(k, _)| cmp(k).is_lt());
            it.seek(target).unwrap();
            check_position(&it, &entries, pos);
            let mut steps = 0;
            while it.valid() && steps < 5 {
                if rng.random_bool(0.5) {
                    it.next().unwrap();
                    pos += 1;
                } else {
                    it.prev().unwrap();
                    if pos == 0 {
                        pos = entries.len();
                    } else {
                        pos -= 1;
                    }
                }
                check_position(&it, &entries, pos);
                steps += 1;
            }
            let at_or_before = entries.partition_point(|(k, _)| cmp(k).is_le());
            it.seek_for_prev(target).unwrap();
            check_position(
                &it,
                &entries,
                at_or_before.checked_sub(1).unwrap_or(entries.len()),
            );
        }
    }
}

/// Asserts the iterator is on `entries[pos]`, or invalid when `pos` is out of range.
fn check_position(it: &TableIterator, entries: &[Entry], pos: usize) {
    match entries.get(pos) {
        Some((k, v)) => {
            assert!(it.valid(), "expected entry {pos}");
            assert_eq!(it.key(), &k[..]);
            assert_eq!(it.value(), &v[..]);
        }
        None => assert!(!it.valid(), "expected no entry"),
    }
}

#[test]
fn one_entry_per_block_and_values_larger_than_a_block() {
    let mut rng = StdRng::seed_from_u64(11);
    let entries: Vec<Entry> = (0..200u32)
        .map(|i| {
            let value = if i.is_multiple_of(10) {
                (0..rng.random_range(10_000..40_000))
                    .map(|_| rng.random::<u8>())
                    .collect()
            } else {
                format!("value{i}").into_bytes()
            };
            (
                internal_key(format!("k{i:04}").as_bytes(), 5, ValueKind::Put),
                value,
            )
        })
        .collect();
    for compression in [Compression::None, Compression::Lz4, Compression::zstd(1)] {
        // block_size 1: every entry closes its block.
        let (bytes, summary) = build(
            &entries,
            TableOptions {
                block_size: 1,
                compression,
                ..TableOptions::default()
            },
        );
        assert_eq!(summary.data_blocks, entries.len() as u64);
        let table = open(bytes).unwrap();
        assert!(table
            .block_ranges()
            .unwrap()
            .iter()
            .all(|r| r.entries == 1 && r.smallest == r.largest));
        let mut it = table.iter();
        assert_eq!(collect_forward(&mut it), entries);
        assert_eq!(collect_backward(&mut it), entries);
        for (k, v) in &entries {
            let got = table.get(&k[..k.len() - 8], 9).unwrap().unwrap();
            assert_eq!((got.0, got.1, &got.2[..]), (5, ValueKind::Put, &v[..]));
            assert_eq!(
                table.get(&k[..k.len() - 8], 4).unwrap(),
                None,
                "older snapshot sees nothing"
            );
        }
        // Default block size: the huge values still get whole blocks of their own.
        let (bytes, summary) = build(
            &entries,
            TableOptions {
                compression,
                ..TableOptions::default()
            },
        );
        assert!(summary.data_blocks >= 20 && summary.data_blocks < entries.len() as u64);
        let table = open(bytes).unwrap();
        assert_eq!(collect_forward(&mut table.iter()), entries);
        table.verify_checksums().unwrap();
    }
}

#[test]
fn index_search_when_many_blocks_share_an_eight_byte_prefix() {
    // The index narrows by 8-byte key prefix first; here most blocks tie on it, some keys are
    // shorter than 8 bytes and some are exactly 8.
    let mut users: Vec<Vec<u8>> = vec![b"a".to_vec(), b"sharedpf".to_vec(), b"zz".to_vec()];
    users.extend((0..50u32).map(|i| format!("sharedpf{i:03}").into_bytes()));
    users.extend((0..10u32).map(|i| format!("sharedpg{i}").into_bytes()));
    users.sort();
    let entries: Vec<Entry> = users
        .iter()
        .map(|u| (internal_key(u, 9, ValueKind::Put), u.clone()))
        .collect();
    let (bytes, _) = build(
        &entries,
        TableOptions {
            block_size: 1,
            ..TableOptions::default()
        },
    );
    let table = open(bytes).unwrap();
    for u in &users {
        assert_eq!(&table.get(u, 9).unwrap().unwrap().2[..], &u[..]);
    }
    let mut it = table.iter();
    for probe in [
        &b"sharedpf0005"[..],
        b"sharedpf",
        b"sharedpe",
        b"sharedpf999",
        b"b",
        b"",
    ] {
        assert_eq!(
            table.get(probe, 9).unwrap().map(|(_, _, v)| v.to_vec()),
            users.contains(&probe.to_vec()).then(|| probe.to_vec())
        );
        let at = users.partition_point(|u| &u[..] < probe);
        it.seek(&seek_key(probe, MAX_SEQNO)).unwrap();
        check_position(&it, &entries, at);
    }
}

#[test]
fn versions_of_one_key_spanning_many_blocks() {
    // 300 versions of one key with 1-entry blocks: each snapshot must find its version.
    let entries: Vec<Entry> = (1..=300u64)
        .rev()
        .map(|seq| {
            (
                internal_key(b"hot", seq * 2, ValueKind::Put),
                seq.to_le_bytes().to_vec(),
            )
        })
        .collect();
    let (bytes, _) = build(
        &entries,
        TableOptions {
            block_size: 16,
            ..TableOptions::default()
        },
    );
    let (table, stats) = open_with(bytes, 3, None).unwrap();
    for snapshot in [1, 2, 3, 301, 599, 600, 601, MAX_SEQNO] {
        let before = Statistics::get(&stats.blocks_read);
        let got = table
            .get(b"hot", snapshot)
            .unwrap()
            .map(|(s, k, v)| (s, k, v.to_vec()));
        assert_eq!(got, model_get(&entries, b"hot", snapshot));
        assert!(Statistics::get(&stats.blocks_read) - before <= 1);
    }
    assert_eq!(table.get(b"hot", 1).unwrap(), None);
    assert_eq!(table.get(b"ho", MAX_SEQNO).unwrap(), None);
    assert_eq!(table.get(b"hott", MAX_SEQNO).unwrap(), None);
}

#[test]
fn empty_table_opens_and_is_empty() {
    let (bytes, summary) = build(&[], TableOptions::default());
    assert_eq!((summary.entries, summary.data_blocks), (0, 0));
    let table = open(bytes).unwrap();
    assert_eq!(table.properties().entries, 0);
    assert_eq!(table.get(b"a", MAX_SEQNO).unwrap(), None);
    assert!(!table.may_contain(b"a").unwrap());
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    assert!(!it.valid());
    it.seek(&seek_key(b"a", 1)).unwrap();
    assert!(!it.valid());
    it.seek_for_prev(&seek_key(b"a", 1)).unwrap();
    assert!(!it.valid());
    table.verify_checksums().unwrap();
}

#[test]
fn range_tombstones_read_back_and_widen_the_keys_and_sequence_numbers() {
    use strata_exec::range_del::{successor, RangeTombstone};
    let tombstone = |start: &[u8], end: &[u8], seq| RangeTombstone {
        start: bytes::Bytes::copy_from_slice(start),
        end: bytes::Bytes::copy_from_slice(end),
        seq,
    };
    let entries = vec![
        (internal_key(b"d", 20, ValueKind::Put), b"v".to_vec()),
        (internal_key(b"e", 3, ValueKind::Put), b"v".to_vec()),
    ];
    let build_with = |tombstones: &[RangeTombstone<bytes::Bytes>]| {
        let data = Arc::new(Mutex::new(Vec::new()));
        let file = VecWriter {
            data: Arc::clone(&data),
            synced: Arc::new(AtomicBool::new(false)),
        };
        let mut b = TableBuilder::new(Box::new(file), NAME.to_string(), TableOptions::default());
        for (k, v) in &entries {
            b.add(k, v).unwrap();
        }
        for t in tombstones {
            b.add_range_tombstone(t.clone());
        }
        let summary = b.finish().unwrap();
        let bytes = std::mem::take(&mut *data.lock());
        (summary, open(bytes).unwrap())
    };
    // A tombstone ending where a cut after "x" left it: the table ends on "x" itself.
    let wide = [
        tombstone(b"b", b"c", 30),
        tombstone(b"c", &successor(b"x"), 1),
    ];
    let (summary, table) = build_with(&wide);
    assert_eq!(
        (&summary.smallest[..], &summary.largest[..]),
        (&b"b"[..], &b"x"[..])
    );
    assert_eq!((summary.smallest_seqno, summary.largest_seqno), (1, 30));
    assert_eq!(summary.range_deletions, 2);
    assert_eq!(table.range_tombstones().to_vec(), wide.to_vec());
    assert_eq!(table.format_version(), FORMAT_WITHOUT_DICTIONARY);
    assert_eq!(table.properties().range_deletions, 2);
    assert_eq!(table.properties().largest, summary.largest);
    // Entries still read as before; deciding what the tombstones delete is the reader's job.
    assert!(table.get(b"d", MAX_SEQNO).unwrap().is_some());
    // An end that is no key's successor bounds the table by itself.
    let (summary, _) = build_with(&[tombstone(b"e", b"g", 9)]);
    assert_eq!(&summary.largest[..], b"g");
    // Without tombstones: version 4, which builds from before range deletions read.
    let (summary, table) = build_with(&[]);
    assert_eq!((summary.range_deletions, table.format_version()), (0, 4));
    assert!(table.range_tombstones().is_empty());
}

#[test]
fn out_of_order_and_invalid_adds_are_errors_and_change_nothing() {
    let data = Arc::new(Mutex::new(Vec::new()));
    let file = VecWriter {
        data: Arc::clone(&data),
        synced: Arc::new(AtomicBool::new(false)),
    };
    let mut b = TableBuilder::new(Box::new(file), NAME.to_string(), TableOptions::default());
    b.add(&internal_key(b"b", 5, ValueKind::Put), b"1").unwrap();
    for bad in [
        internal_key(b"a", 9, ValueKind::Put),    // smaller user key
        internal_key(b"b", 5, ValueKind::Put),    // equal key
        internal_key(b"b", 6, ValueKind::Delete), // newer version after an older one
    ] {
        let err = b.add(&bad, b"x").unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains(NAME)),
            "{err}"
        );
    }
    assert!(matches!(
        b.add(b"short", b""),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        b.add(&seek_key(b"c", 1), b""),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(b.entries(), 1);
    b.add(&internal_key(b"b", 4, ValueKind::Delete), b"")
        .unwrap();
    b.add(&internal_key(b"c", 1, ValueKind::Put), b"3").unwrap();
    b.finish().unwrap();
    let table = open(std::mem::take(&mut *data.lock())).unwrap();
    assert_eq!(table.properties().entries, 3);
    assert_eq!(table.properties().tombstones, 1);
    let got = table.get(b"b", 4).unwrap().unwrap();
    assert_eq!((got.0, got.1), (4, ValueKind::Delete));
}

// ---- Bloom filter ----

#[test]
fn bloom_false_positive_rate_at_10_bits_per_key_is_below_1_5_percent() {
    let n = 100_000u32;
    let entries: Vec<Entry> = (0..n)
        .map(|i| {
            (
                internal_key(format!("key{i:08}").as_bytes(), 1, ValueKind::Put),
                Vec::new(),
            )
        })
        .collect();
    let (bytes, _) = build(&entries, TableOptions::default());
    let (table, stats) = open_with(bytes, 9, None).unwrap();
    let probes = 500_000u32;
    let positives = (0..probes)
        .filter(|i| {
            table
                .may_contain(format!("absent{i:08}").as_bytes())
                .unwrap()
        })
        .count();
    let rate = positives as f64 / f64::from(probes);
    println!(
        "table bloom filter, 10 bits/key, {n} keys: false-positive rate {:.4} %",
        rate * 100.0
    );
    assert!(rate < 0.015, "false-positive rate {rate}");
    assert!(
        rate > 0.0,
        "a 10-bit filter should show some false positives over {probes} probes"
    );

    // `get` counts its probes, and a negative costs no block read.
    for i in 0..1000 {
        table
            .get(format!("absent{i:08}").as_bytes(), MAX_SEQNO)
            .unwrap();
    }
    assert_eq!(Statistics::get(&stats.bloom_checks), 1000);
    let negatives = Statistics::get(&stats.bloom_negatives);
    assert!(negatives >= 970, "{negatives} negatives");
    // Only a false positive whose key falls inside a block's key range reads a data block
    // (index, properties and filter count apart, as metadata).
    assert!(Statistics::get(&stats.blocks_read) <= 1000 - negatives);
}

// ---- statistics and the block cache ----

/// Entries "k00000", "k00001", … with 100-byte values, all at seq 1.
fn numbered_entries(n: u32) -> Vec<Entry> {
    (0..n)
        .map(|i| {
            (
                internal_key(format!("k{i:05}").as_bytes(), 1, ValueKind::Put),
                vec![b'v'; 100],
            )
        })
        .collect()
}

#[test]
fn block_cache_serves_repeated_reads_and_counts_hits_and_misses() {
    let entries = numbered_entries(2000);
    let (bytes, summary) = build(&entries, TableOptions::default());
    let cache = Arc::new(BlockCache::new(4 << 20));
    assert_eq!(cache.capacity(), 4 << 20);
    assert_eq!(cache.used_bytes(), 0);
    let (table, stats) = open_with(bytes, 77, Some(Arc::clone(&cache))).unwrap();
    let reads_at_open = Statistics::get(&stats.blocks_read);
    assert_eq!(reads_at_open, 0, "opening reads no data block");
    assert_eq!(
        Statistics::get(&stats.metadata_blocks_read),
        3,
        "properties, index and filter"
    );
    for _ in 0..2 {
        for i in (0..2000).step_by(7) {
            assert!(table
                .get(format!("k{i:05}").as_bytes(), 1)
                .unwrap()
                .is_some());
        }
    }
    let misses = Statistics::get(&stats.block_cache_misses);
    let hits = Statistics::get(&stats.block_cache_hits);
    assert!(misses > 0 && misses <= summary.data_blocks);
    assert_eq!(hits + misses, 2 * 2000u64.div_ceil(7));
    assert_eq!(Statistics::get(&stats.blocks_read) - reads_at_open, misses);
    assert!(Statistics::get(&stats.block_bytes_read) > misses * 4096);
    assert!(cache.used_bytes() >= misses * 4096 && cache.used_bytes() <= cache.capacity());

    // A tiny cache stays within its budget.
    let small = Arc::new(BlockCache::new(64 << 10));
    let (bytes, _) = build(&entries, TableOptions::default());
    let (table, _) = open_with(bytes, 78, Some(Arc::clone(&small))).unwrap();
    assert_eq!(collect_forward(&mut table.iter()).len(), entries.len());
    assert!(small.used_bytes() <= small.capacity());
}

#[test]
fn tables_charged_to_the_cache_shrink_its_block_budget_until_they_close() {
    let entries = numbered_entries(2000);
    let cache = Arc::new(BlockCache::new(1 << 20).charging_tables(true));
    let (bytes, _) = build(&entries, TableOptions::default());
    let (first, _) = open_with(bytes.clone(), 80, Some(Arc::clone(&cache))).unwrap();
    let one = first.memory_usage() as u64;
    assert!(one > 0);
    assert_eq!(cache.table_bytes(), one);
    let (second, _) = open_with(bytes, 81, Some(Arc::clone(&cache))).unwrap();
    assert_eq!(cache.table_bytes(), 2 * one);
    // Reading every block through the cache leaves blocks only what the tables left over.
    assert_eq!(collect_forward(&mut first.iter()).len(), entries.len());
    assert!(cache.used_bytes() + cache.table_bytes() <= cache.capacity());
    drop(first);
    assert_eq!(cache.table_bytes(), one, "a closed table still charged");
    drop(second);
    assert_eq!(cache.table_bytes(), 0);

    // A cache that does not charge tables gives blocks its whole capacity.
    let plain = Arc::new(BlockCache::new(1 << 20));
    let (bytes, _) = build(&entries, TableOptions::default());
    let (_table, _) = open_with(bytes, 82, Some(Arc::clone(&plain))).unwrap();
    assert_eq!(plain.table_bytes(), 0);
}

#[test]
fn compaction_reads_are_counted_apart_and_leave_the_cache_alone() {
    let entries = numbered_entries(2000);
    let (bytes, summary) = build(&entries, TableOptions::default());
    let cache = Arc::new(BlockCache::new(4 << 20));
    let (table, stats) = open_with(bytes, 79, Some(Arc::clone(&cache))).unwrap();
    let merged = collect_forward(&mut table.iter_for(ReadPurpose::Compaction));
    assert_eq!(merged.len(), entries.len());
    assert_eq!(
        Statistics::get(&stats.compaction_blocks_read),
        summary.data_blocks
    );
    assert_eq!(Statistics::get(&stats.blocks_read), 0);
    assert_eq!(Statistics::get(&stats.block_cache_misses), 0);
    assert_eq!(cache.used_bytes(), 0, "a compaction read filled the cache");

    // A scan fills the cache; a compaction then takes the cached blocks without reading.
    assert_eq!(collect_forward(&mut table.iter()).len(), entries.len());
    assert_eq!(Statistics::get(&stats.blocks_read), summary.data_blocks);
    let _ = collect_forward(&mut table.iter_for(ReadPurpose::Compaction));
    assert_eq!(
        Statistics::get(&stats.compaction_blocks_read),
        summary.data_blocks,
        "cached blocks were read again"
    );
}

#[test]
fn tables_are_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<BlockCache>();
    assert_send::<TableIterator>();
    assert_send::<TableBuilder>();

    let mut rng = StdRng::seed_from_u64(3);
    let entries = random_entries(&mut rng, 800);
    let (bytes, _) = build(
        &entries,
        TableOptions {
            compression: Compression::Lz4,
            ..TableOptions::default()
        },
    );
    let cache = Arc::new(BlockCache::new(256 << 10));
    let (table, _) = open_with(bytes, 5, Some(cache)).unwrap();
    let entries = Arc::new(entries);
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let table = Arc::clone(&table);
            let entries = Arc::clone(&entries);
            std::thread::spawn(move || {
                for (k, _) in entries.iter().skip(t).step_by(3) {
                    let user = &k[..k.len() - 8];
                    let got = table
                        .get(user, MAX_SEQNO)
                        .unwrap()
                        .map(|(s, k, v)| (s, k, v.to_vec()));
                    assert_eq!(got, model_get(&entries, user, MAX_SEQNO));
                }
                collect_forward(&mut table.iter()).len()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), entries.len());
    }
}
