//! Writes seed corpora for the fuzz targets with the engine's own writers:
//! `cargo run --manifest-path fuzz/Cargo.toml --example gen-seeds -- fuzz/corpus` (from the
//! repository root) fills `fuzz/corpus/<target>/` for every target but `workload_toml`, which gets its seeds
//! from `examples/workloads/*.toml`.
//! Corpora are data and stay out of git; this regenerates the seeds deterministically.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::iter::InternalIterator;
use strata_engine::key::{internal_key, ValueKind};
use strata_engine::log::LogReader;
use strata_engine::stats::Statistics;
use strata_engine::table::{KeptBlock, Table, TableBuilder, TableOptions};
use strata_engine::wal_chain::{encode_link, WalLink};
use strata_engine::{Compression, Db, Options, RecoveryMode, WriteBatch, WriteOptions};
use strata_fuzz::{
    decode_stored, donor_files, donor_table_bytes, footer_handles, index_handles, write_log,
    MemFile, VecFile, DONOR_FILE,
};

type Res<T> = Result<T, Box<dyn Error>>;

struct Out(PathBuf);

impl Out {
    fn put(&self, target: &str, name: &str, bytes: &[u8]) -> Res<()> {
        let dir = self.0.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
        println!("{target}/seed-{name}: {} bytes", bytes.len());
        Ok(())
    }
}

/// A table of `n` entries over 4-byte user keys (12-byte internal keys), a few user keys with
/// several versions and every fifth entry a tombstone.
fn build_table(n: usize, options: TableOptions) -> Res<Vec<u8>> {
    let file = VecFile::default();
    let mut builder = TableBuilder::new(Box::new(file.clone()), "seed.sst".into(), options);
    for i in 0..n {
        let user = format!("k{:03}", i / 2);
        let seq = 1000 - (i % 2) as u64;
        let kind = if i % 5 == 4 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let value = if kind == ValueKind::Put {
            format!("value-{i}-{}", "x".repeat(i % 7))
        } else {
            String::new()
        };
        builder.add(&internal_key(user.as_bytes(), seq, kind), value.as_bytes())?;
    }
    builder.finish()?;
    Ok(file.contents())
}

/// The stored blocks of a table: (what, type byte, stored contents).
fn table_blocks(table: &[u8]) -> Vec<(String, u8, Vec<u8>)> {
    let mut out = Vec::new();
    let Some(handles) = footer_handles(table) else {
        return out;
    };
    let stored = |(offset, size): (u64, u64)| {
        let (start, end) = (offset as usize, (offset + size) as usize);
        table
            .get(start..=end)
            .map(|b| (b[b.len() - 1], b[..b.len() - 1].to_vec()))
    };
    for (what, h) in ["index", "filter", "properties"].iter().zip(handles) {
        if h == (0, 0) {
            continue;
        }
        if let Some((t, contents)) = stored(h) {
            if *what == "index" {
                if let Some(index) = decode_stored(&contents, t) {
                    for (i, dh) in index_handles(&index).into_iter().enumerate().take(3) {
                        if let Some((t, c)) = stored(dh) {
                            out.push((format!("data{i}"), t, c));
                        }
                    }
                }
            }
            out.push((what.to_string(), t, contents));
        }
    }
    out
}

fn tables(out: &Out) -> Res<()> {
    let variants: Vec<(&str, usize, TableOptions)> = vec![
        ("default", 40, TableOptions::default()),
        (
            "lz4-small-blocks",
            120,
            TableOptions {
                block_size: 256,
                restart_interval: 4,
                compression: Compression::Lz4,
                ..TableOptions::default()
            },
        ),
        (
            "zstd-no-bloom",
            80,
            TableOptions {
                block_size: 512,
                compression: Compression::Zstd { level: 3 },
                bloom_bits_per_key: 0.0,
                ..TableOptions::default()
            },
        ),
        (
            "restart1-tiny-blocks",
            30,
            TableOptions {
                block_size: 64,
                restart_interval: 1,
                ..TableOptions::default()
            },
        ),
        ("empty", 0, TableOptions::default()),
    ];
    for (name, n, options) in variants {
        let table = build_table(n, options)?;
        out.put("table_reader", name, &table)?;
        for (what, block_type, contents) in table_blocks(&table) {
            // Seek targets: two 12-byte internal keys, one present and one between keys.
            let mut input = vec![block_type, 24];
            input.extend(internal_key(b"k005", 1000, ValueKind::Put));
            input.extend(internal_key(b"k00:", 7, ValueKind::Put));
            input.extend(&contents);
            out.put("block_decoder", &format!("{name}-{what}"), &input)?;
            // And without targets.
            let mut bare = vec![block_type, 0];
            bare.extend(&contents);
            out.put("block_decoder", &format!("{name}-{what}-bare"), &bare)?;
        }
    }
    Ok(())
}

/// Tables that keep blocks of the donor table (file 3) for `table_references`: their own
/// entries before, between and after the donor's blocks, and a chosen subset of the donor's
/// blocks referred to instead of written.
fn references(out: &Out) -> Res<()> {
    let donor = Arc::new(Table::open(
        Arc::new(MemFile(donor_table_bytes())),
        DONOR_FILE,
        "000003.sst".into(),
        None,
        Arc::new(Statistics::default()),
    )?);
    let mut entries = Vec::new();
    let mut it = donor.iter();
    it.seek_to_first()?;
    while it.valid() {
        entries.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    let ranges = donor.block_ranges();
    let variants: [(&str, fn(usize) -> bool); 3] = [
        ("all-kept", |_| true),
        ("every-other-kept", |i| i % 2 == 0),
        ("one-kept", |i| i == 1),
    ];
    for (name, keep) in variants {
        let file = VecFile::default();
        let options = TableOptions {
            block_size: 128,
            ..TableOptions::default()
        };
        let mut b = TableBuilder::new(Box::new(file.clone()), "seed.sst".into(), options);
        for i in 0..6 {
            b.add(
                &internal_key(format!("a{i:03}").as_bytes(), 900, ValueKind::Put),
                b"own",
            )?;
        }
        let mut at = 0usize;
        for (i, range) in ranges.iter().enumerate() {
            let block = &entries[at..at + range.entries as usize];
            at += range.entries as usize;
            if keep(i) {
                let kept = KeptBlock {
                    file_number: DONOR_FILE,
                    offset: range.offset,
                    size: range.size,
                    entries: range.entries,
                };
                b.add_kept_block(&kept, block.iter().map(|(k, v)| (&k[..], &v[..])))?;
            } else {
                for (k, v) in block {
                    b.add(k, v)?;
                }
            }
            // An own entry between this block and the next.
            let mut between = range.largest.to_vec();
            between.push(b'x');
            b.add(&internal_key(&between, 901, ValueKind::Put), b"between")?;
        }
        for i in 0..6 {
            b.add(
                &internal_key(format!("z{i:03}").as_bytes(), 902, ValueKind::Put),
                b"own",
            )?;
        }
        b.finish()?;
        // A seed is a valid table: it verifies, kept blocks read through the donor.
        let table = Table::open(
            Arc::new(MemFile(file.contents())),
            7,
            "seed.sst".into(),
            None,
            Arc::new(Statistics::default()),
        )?
        .with_block_files(donor_files());
        table.verify_checksums()?;
        out.put("table_references", name, &file.contents())?;
    }
    Ok(())
}

/// A WAL payload: `first_seq: u64 | count: u32 | records` (see `batch.rs`).
fn group(first_seq: u64, ops: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
    let mut p = first_seq.to_le_bytes().to_vec();
    p.extend((ops.len() as u32).to_le_bytes());
    let varint = |p: &mut Vec<u8>, mut v: usize| {
        while v >= 0x80 {
            p.push(v as u8 | 0x80);
            v >>= 7;
        }
        p.push(v as u8);
    };
    for (key, value) in ops {
        p.push(if value.is_some() { 1 } else { 0 });
        varint(&mut p, key.len());
        p.extend(*key);
        if let Some(v) = value {
            varint(&mut p, v.len());
            p.extend(*v);
        }
    }
    p
}

fn open_db(fs: &Arc<MemFs>, policy: &str) -> Res<Db> {
    let options = Options::new()
        .with_file_system(Arc::clone(fs) as Arc<dyn FileSystem>)
        .with_synchronous_compaction(true)
        .with_record_block_ranges(true)
        .with_policy_named(policy)?;
    Ok(Db::open("/db", options)?)
}

fn files_named(fs: &MemFs, f: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    fs.file_names()
        .into_iter()
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&f))
        .collect()
}

fn wals(out: &Out) -> Res<()> {
    let groups = [
        group(1, &[(b"k1", Some(b"v1")), (b"k2", None)]),
        group(3, &[(b"", Some(b"")), (b"k3", Some(&[7u8; 40]))]),
        group(5, &[]),
        group(6, &[(b"k1", None)]),
    ];
    let log = write_log(groups.iter().map(Vec::as_slice));
    out.put("wal_reader", "groups", &log)?;
    out.put("wal_reader", "torn-tail", &log[..log.len() - 5])?;
    let mut zeros = log.clone();
    zeros.extend([0u8; 24]);
    out.put("wal_reader", "zero-tail", &zeros)?;
    let mut middle = log.clone();
    middle[12] ^= 0x10;
    out.put("wal_reader", "damaged-middle", &middle)?;
    out.put(
        "wal_reader",
        "single",
        &write_log([group(1, &[(b"a", Some(b"b"))]).as_slice()]),
    )?;

    // A live database's WAL, written by the engine's commit path.
    let fs = Arc::new(MemFs::new());
    let db = open_db(&fs, "leveled")?;
    for i in 0..6 {
        let mut batch = WriteBatch::new();
        batch.put(format!("key{i}"), format!("value{i}"))?;
        if i % 2 == 1 {
            batch.delete(format!("key{}", i - 1))?;
        }
        db.write(&WriteOptions::synced(), batch)?;
    }
    for path in files_named(&fs, |n| n.ends_with(".log")) {
        let bytes = fs.read(&path)?;
        if !bytes.is_empty() {
            out.put("wal_reader", "db-wal", &bytes)?;
        }
    }
    db.close()?;

    // Chains of two WALs (`wal_chain` target: u32 LE length of WAL 5, WAL 5, WAL 6): linked,
    // unlinked, and with the older one cut short of the length the link records.
    let five = write_log([
        encode_link(None).as_slice(),
        group(1, &[(b"a", Some(b"1"))]).as_slice(),
        group(2, &[(b"b", Some(b"2")), (b"c", None)]).as_slice(),
    ]);
    let link = WalLink {
        number: 5,
        len: five.len() as u64,
    };
    let six = write_log([
        encode_link(Some(link)).as_slice(),
        group(4, &[(b"a", None)]).as_slice(),
    ]);
    let chain = |five: &[u8], six: &[u8]| {
        let mut bytes = (five.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(five);
        bytes.extend_from_slice(six);
        bytes
    };
    out.put("wal_chain", "linked", &chain(&five, &six))?;
    out.put(
        "wal_chain",
        "older-cut",
        &chain(&five[..five.len() - 9], &six),
    )?;
    out.put(
        "wal_chain",
        "newest-torn",
        &chain(&five, &six[..six.len() - 3]),
    )?;
    let unlinked = write_log([group(4, &[(b"a", None)]).as_slice()]);
    out.put("wal_chain", "unlinked", &chain(&five, &unlinked))?;
    // Write-batch payloads (`write_batch` target: an even selector byte, then the payload).
    for (i, g) in groups.iter().enumerate() {
        let mut bytes = vec![0u8];
        bytes.extend_from_slice(g);
        out.put("write_batch", &format!("payload-{i}"), &bytes)?;
    }
    // And a script (odd selector, sequence byte, then kind/key length/value length/bytes).
    let mut script = vec![1u8, 3];
    script.extend_from_slice(&[0, 2, 3]);
    script.extend_from_slice(b"k1v11");
    script.extend_from_slice(&[1, 2, 0]);
    script.extend_from_slice(b"k2");
    script.extend_from_slice(&[2, 0, 0, 0, 1, 0]);
    out.put("write_batch", "script", &script)?;
    Ok(())
}

fn manifests(out: &Out) -> Res<()> {
    for (name, policy, flushes) in [
        ("fresh", "leveled", 0),
        ("leveled", "leveled", 3),
        ("horizontal-tiered", "horizontal-tiered", 4),
    ] {
        let fs = Arc::new(MemFs::new());
        let db = open_db(&fs, policy)?;
        for f in 0..flushes {
            for i in 0..20 {
                db.put(format!("key{:03}", (i * 7 + f) % 50), format!("v{f}-{i}"))?;
            }
            db.delete(format!("key{:03}", f))?;
            db.flush()?;
        }
        db.close()?;
        for path in files_named(&fs, |n| n.starts_with("MANIFEST-")) {
            let bytes = fs.read(&path)?;
            out.put("manifest_decoder", &format!("{name}-log"), &bytes)?;
            // The same records as JSON lines, for the split-at-newlines variant.
            let mut reader = LogReader::new(bytes, "m".into(), RecoveryMode::AbsoluteConsistency);
            let mut lines = Vec::new();
            while let Some(record) = reader.next_record()? {
                lines.push(record);
            }
            out.put(
                "manifest_decoder",
                &format!("{name}-lines"),
                &lines.join(&b'\n'),
            )?;
        }
    }
    Ok(())
}

fn main() -> Res<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/corpus".to_string());
    let out = Out(Path::new(&dir).to_path_buf());
    tables(&out)?;
    references(&out)?;
    wals(&out)?;
    manifests(&out)?;
    Ok(())
}
