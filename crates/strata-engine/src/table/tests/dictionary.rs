//! Zstandard dictionaries per table: trained on the table's blocks, stored with it, used by
//! every read, and left out where the table is too small to train one.

use super::*;
use crate::table::compress::TYPE_ZSTD_DICT;

/// `n` records of the kind a dictionary is for: JSON-like values made of a small vocabulary,
/// alike across blocks but varied within each.
fn records(n: u32) -> Vec<Entry> {
    const WORDS: [&str; 24] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra",
        "tango", "uniform", "victor", "whiskey", "xray",
    ];
    let mut rng = StdRng::seed_from_u64(7);
    let mut entries = Vec::with_capacity(n as usize);
    for i in 0..n {
        let words: Vec<&str> = (0..5)
            .map(|_| WORDS[rng.random_range(0..WORDS.len())])
            .collect();
        let value = format!(
            "{{\"id\":{i},\"name\":\"{} {}\",\"city\":\"{}\",\"tags\":[\"{}\",\"{}\"],\
             \"active\":{},\"score\":{}}}",
            words[0],
            words[1],
            words[2],
            words[3],
            words[4],
            i % 3 == 0,
            (u64::from(i) * 7919) % 1000
        );
        let key = internal_key(format!("user{i:08}").as_bytes(), 1, ValueKind::Put);
        entries.push((key, value.into_bytes()));
    }
    entries
}

fn with_dictionary(max_dict_bytes: u32) -> TableOptions {
    TableOptions {
        compression: Compression::Zstd {
            level: 3,
            max_dict_bytes,
        },
        block_size: 1024,
        ..TableOptions::default()
    }
}

/// The type byte of each data block, from the file.
fn block_types(bytes: &[u8]) -> Vec<u8> {
    let table = open(bytes.to_vec()).unwrap();
    table
        .index_blocks()
        .unwrap()
        .iter()
        .map(|b| bytes[(b.place.offset + b.place.size) as usize - BLOCK_TRAILER_LEN])
        .collect()
}

#[test]
fn a_table_trains_a_dictionary_and_every_read_uses_it() {
    let entries = records(20_000);
    let (plain, _) = build(
        &entries,
        TableOptions {
            compression: Compression::zstd(3),
            block_size: 1024,
            ..TableOptions::default()
        },
    );
    let (bytes, summary) = build(&entries, with_dictionary(8 << 10));
    let table = open(bytes.clone()).unwrap();
    let layout = table.layout().unwrap();
    assert_eq!(layout.format_version, FORMAT_VERSION);
    let dictionary = layout.compression_dictionary.expect("a dictionary");
    assert!(dictionary.size <= (8 << 10) + BLOCK_TRAILER_LEN as u64);
    let types = block_types(&bytes);
    assert_eq!(types.len() as u64, summary.data_blocks);
    assert!(
        types.iter().all(|&t| t == TYPE_ZSTD_DICT),
        "block types {types:?}"
    );
    // Small blocks of alike records: the dictionary carries what they share.
    assert!(
        (bytes.len() as f64) < plain.len() as f64 * 0.8,
        "{} bytes with the dictionary, {} without",
        bytes.len(),
        plain.len()
    );
    let mut it = table.iter();
    assert_eq!(collect_forward(&mut it), entries);
    assert_eq!(collect_backward(&mut it), entries);
    for (k, v) in entries.iter().step_by(101) {
        let got = table.get(&k[..k.len() - 8], MAX_SEQNO).unwrap().unwrap();
        assert_eq!(got.2, v.as_slice());
    }
    table.verify_checksums().unwrap();
}

#[test]
fn blocks_wait_for_the_dictionary_and_count_in_the_estimate() {
    // Training takes 100 times the dictionary: with 1 KiB, the first 100 KiB of blocks wait,
    // and the rest go out as they fill.
    let entries = records(5_000);
    let data = Arc::new(Mutex::new(Vec::new()));
    let file = VecWriter {
        data: Arc::clone(&data),
        synced: Arc::new(AtomicBool::new(false)),
    };
    let mut b = TableBuilder::new(Box::new(file), NAME.to_string(), with_dictionary(1 << 10));
    let mut written_before_training = 0;
    let mut last_estimate = 0;
    for (k, v) in &entries {
        b.add(k, v).unwrap();
        let raw_so_far = b.estimated_size();
        if data.lock().is_empty() {
            written_before_training += 1;
            // Held back, uncompressed: the estimate grows with every entry's bytes.
            assert!(raw_so_far >= last_estimate, "estimated size shrank");
        }
        last_estimate = raw_so_far;
    }
    let summary = b.finish().unwrap();
    let bytes = std::mem::take(&mut *data.lock());
    assert!(
        (500..entries.len()).contains(&written_before_training),
        "{written_before_training} entries added before the first block was written"
    );
    let table = open(bytes).unwrap();
    assert!(table.layout().unwrap().compression_dictionary.is_some());
    assert_eq!(table.properties().data_blocks, summary.data_blocks);
    assert_eq!(collect_forward(&mut table.iter()), entries);
}

#[test]
fn a_table_too_small_to_train_on_has_no_dictionary() {
    // 40 records, about 4 KiB: under 8 times the dictionary.
    let entries = records(40);
    let (bytes, _) = build(&entries, with_dictionary(1 << 10));
    let table = open(bytes.clone()).unwrap();
    let layout = table.layout().unwrap();
    assert_eq!(layout.compression_dictionary, None);
    assert_eq!(layout.format_version, FORMAT_WITHOUT_RANGE_DELETIONS);
    assert!(!block_types(&bytes).contains(&TYPE_ZSTD_DICT));
    // The codec recorded is still the one asked for.
    assert_eq!(
        table.properties().compression,
        with_dictionary(1 << 10).compression
    );
    assert_eq!(collect_forward(&mut table.iter()), entries);
}

#[test]
fn a_block_needing_a_dictionary_the_table_lacks_is_corruption() {
    let entries = records(2_000);
    let (bytes, _) = build(&entries, with_dictionary(1 << 10));
    let handle = open(bytes.clone())
        .unwrap()
        .properties()
        .compression_dictionary
        .unwrap();
    // The dictionary's contents replaced by another valid dictionary, checksum repaired: zstd
    // sees a different dictionary id, and the reads fail as corruption of this file.
    let (other, _) = build(&records(3_000)[1_000..], with_dictionary(1 << 10));
    let other_handle = open(other.clone())
        .unwrap()
        .properties()
        .compression_dictionary
        .unwrap();
    let (start, end) = (
        handle.offset as usize,
        (handle.offset + handle.size) as usize,
    );
    let other_dict = &other[other_handle.offset as usize..][..other_handle.size as usize];
    // (Trained on enough data, zstd fills the dictionary to its size.)
    assert_eq!(other_dict.len(), end - start);
    let mut swapped = bytes.clone();
    swapped[start..end].copy_from_slice(other_dict);
    let crc = block_crc(&swapped[start..end], swapped[end]);
    swapped[end + 1..end + BLOCK_TRAILER_LEN].copy_from_slice(&crc.to_le_bytes());
    let table = open(swapped).unwrap();
    let err = table.verify_checksums().unwrap_err();
    assert!(
        matches!(&err, Error::Corruption { file, .. } if file == NAME),
        "{err}"
    );
    // A flipped byte in the dictionary: its checksum fails at open.
    let mut flipped = bytes;
    flipped[start + 10] ^= 0x20;
    let err = open(flipped).unwrap_err();
    assert!(
        matches!(&err, Error::Corruption { file, .. } if file == NAME),
        "{err}"
    );
}
