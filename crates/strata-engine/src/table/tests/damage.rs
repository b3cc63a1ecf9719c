//! Corruption and truncation: flipped bytes, truncated files, other format versions, and
//! decoders fed random or damaged bytes behind valid checksums.

use super::*;

/// The footer and the handles of every block of a table file.
fn layout(bytes: &[u8]) -> (Footer, Vec<BlockHandle>) {
    let at = bytes.len() - FOOTER_LEN;
    let footer = Footer::decode(bytes[at..].try_into().unwrap(), NAME, at as u64).unwrap();
    let table = open(bytes.to_vec()).unwrap();
    let data = table
        .block_ranges()
        .unwrap()
        .iter()
        .map(|r| BlockHandle {
            offset: r.offset,
            size: r.size,
        })
        .collect();
    (footer, data)
}

fn is_corruption_of_this_file(e: &Error) -> bool {
    matches!(e, Error::Corruption { file, .. } if file == NAME)
}

/// Runs every read path over `table`, returning the first error (panics propagate).
fn exercise(table: &Arc<Table>, probes: &[Vec<u8>]) -> crate::Result<()> {
    let mut first_err = None;
    let mut note = |r: crate::Result<()>| {
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    };
    for p in probes {
        note(table.get(p, MAX_SEQNO).map(drop));
        let _ = table.may_contain(p);
    }
    let mut it = table.iter();
    note(it.seek_to_first());
    let mut steps = 0;
    while it.valid() && steps < 10_000 {
        let _ = (it.key(), it.value());
        note(it.next());
        steps += 1;
    }
    note(it.seek_to_last());
    steps = 0;
    while it.valid() && steps < 10_000 {
        note(it.prev());
        steps += 1;
    }
    for p in probes {
        note(it.seek(&seek_key(p, MAX_SEQNO)));
        note(it.seek_for_prev(&seek_key(p, 0)));
    }
    note(table.verify_checksums());
    note(table.block_ranges().map(drop));
    first_err.map_or(Ok(()), Err)
}

/// Zstandard with the smallest dictionary, which [`sample_table`]'s 400 entries train.
const DICTIONARY: Compression = Compression::Zstd {
    level: 3,
    max_dict_bytes: strata_policy::MIN_DICT_BYTES,
};

/// The table's dictionary block, if it has one.
fn dictionary_block(bytes: &[u8]) -> Option<BlockHandle> {
    open(bytes.to_vec())
        .unwrap()
        .properties()
        .compression_dictionary
}

fn sample_table(compression: Compression) -> (Vec<Entry>, Vec<u8>) {
    let entries: Vec<Entry> = (0..400u32)
        .map(|i| {
            let kind = if i.is_multiple_of(5) {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            (
                internal_key(format!("user{i:04}").as_bytes(), u64::from(i) + 1, kind),
                format!("value-{i}-{}", "x".repeat(i as usize % 40)).into_bytes(),
            )
        })
        .collect();
    let (bytes, _) = build(
        &entries,
        TableOptions {
            compression,
            block_size: 512,
            ..TableOptions::default()
        },
    );
    (entries, bytes)
}

#[test]
fn a_flipped_byte_in_any_block_or_the_footer_is_reported_as_corruption() {
    for compression in [
        Compression::None,
        Compression::Lz4,
        Compression::zstd(3),
        DICTIONARY,
    ] {
        let (entries, bytes) = sample_table(compression);
        let (footer, data) = layout(&bytes);
        let dictionary = dictionary_block(&bytes);
        assert_eq!(dictionary.is_some(), compression == DICTIONARY);
        let probes: Vec<Vec<u8>> = entries
            .iter()
            .map(|(k, _)| k[..k.len() - 8].to_vec())
            .collect();

        // Data blocks are read lazily: open works, the reads touching the block fail.
        for (n, h) in data.iter().enumerate().step_by(5) {
            for pos in [
                h.offset,
                h.offset + h.size / 2,
                h.offset + h.size,
                h.offset + h.size + 3,
            ] {
                let mut bad = bytes.clone();
                bad[pos as usize] ^= 0x10;
                let table = open(bad).unwrap();
                let err = exercise(&table, &probes).unwrap_err();
                assert!(
                    is_corruption_of_this_file(&err),
                    "data block {n} byte {pos}: {err}"
                );
                assert!(table.verify_checksums().is_err());
            }
        }
        // Meta blocks are read at open.
        let meta = [
            Some(footer.index),
            footer.filter,
            Some(footer.properties),
            dictionary,
        ];
        for h in meta.into_iter().flatten() {
            for pos in [
                h.offset,
                h.offset + h.size / 2,
                h.offset + h.size,
                h.offset + h.size + 4,
            ] {
                let mut bad = bytes.clone();
                bad[pos as usize] ^= 0x01;
                let err = open(bad).unwrap_err();
                assert!(
                    is_corruption_of_this_file(&err),
                    "meta block at {}: {err}",
                    h.offset
                );
            }
        }
        // Any footer byte, the version field's included: corruption (the checksum covers it).
        let footer_at = bytes.len() - FOOTER_LEN;
        for pos in footer_at..bytes.len() {
            for flip in [0x01, 0x80] {
                let mut bad = bytes.clone();
                bad[pos] ^= flip;
                let e = open(bad).unwrap_err();
                assert!(is_corruption_of_this_file(&e), "footer byte {pos}: {e}");
            }
        }
    }
}

#[test]
fn newer_format_versions_are_refused() {
    let (_, mut bytes) = sample_table(Compression::None);
    // A newer writer keeps the footer checksum (the frozen part of the footer) valid.
    let footer = bytes.len() - FOOTER_LEN;
    let newer = FORMAT_VERSION + 1;
    bytes[footer + 48..footer + 52].copy_from_slice(&newer.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[footer..footer + 52]);
    bytes[footer + 52..footer + 56].copy_from_slice(&crc.to_le_bytes());
    assert!(
        matches!(open(bytes).unwrap_err(), Error::UnsupportedFormat { found, supported, ref file } if found == newer && supported == FORMAT_VERSION && file == NAME)
    );
}

#[test]
fn truncated_files_are_corruption() {
    let (_, bytes) = sample_table(Compression::Lz4);
    let mut cuts: Vec<usize> = vec![
        0,
        1,
        7,
        63,
        64,
        65,
        bytes.len() - 1,
        bytes.len() - 8,
        bytes.len() - 64,
    ];
    cuts.extend((0..bytes.len()).step_by(97));
    for cut in cuts {
        let err = open(bytes[..cut].to_vec()).unwrap_err();
        assert!(is_corruption_of_this_file(&err), "cut at {cut}: {err}");
    }
    // A file that lost its tail but kept a valid footer elsewhere is impossible to build by
    // truncation; a footer pointing past the end is caught by the handle checks instead.
    let (footer, _) = layout(&bytes);
    let mut shifted = bytes[..footer.properties.offset as usize].to_vec();
    shifted.extend_from_slice(&bytes[bytes.len() - FOOTER_LEN..]);
    assert!(is_corruption_of_this_file(&open(shifted).unwrap_err()));
}

/// The entries of `bytes`'s (version 4, uncompressed) index: each block's last internal key
/// and its value (`first_key` empty: version 4 keeps none).
fn index_entries(bytes: &[u8]) -> Vec<(Vec<u8>, IndexValue)> {
    let (footer, _) = layout(bytes);
    let h = footer.index;
    let contents = &bytes[h.offset as usize..(h.offset + h.size) as usize];
    let mut out = Vec::new();
    decode_index(contents, |e| {
        out.push((
            e.last_key.to_vec(),
            IndexValue {
                file_number: e.file_number,
                handle: e.handle,
                entries: e.entries,
                first_key: (0, 0),
            },
        ));
        Ok::<(), ()>(())
    })
    .unwrap()
    .unwrap();
    out
}

/// `bytes` with a new index block appended after the properties block, holding `raw`, and a
/// new footer of `format_version` pointing at it.
fn replace_index(bytes: &[u8], raw: &[u8], format_version: u32) -> Vec<u8> {
    let (footer, _) = layout(bytes);
    let mut out = bytes[..bytes.len() - FOOTER_LEN].to_vec();
    let index = BlockHandle {
        offset: out.len() as u64,
        size: raw.len() as u64,
    };
    out.extend_from_slice(raw);
    out.push(0);
    out.extend_from_slice(&block_crc(raw, 0).to_le_bytes());
    let footer = Footer {
        index,
        format_version,
        ..footer
    };
    out.extend_from_slice(&footer.encode());
    out
}

/// Re-encodes `bytes` with the index rewritten by `edit`.
fn rewrite_index(bytes: &[u8], edit: impl Fn(usize, &mut IndexValue)) -> Vec<u8> {
    let mut index = IndexWriter::default();
    for (i, (key, mut v)) in index_entries(bytes).into_iter().enumerate() {
        edit(i, &mut v);
        index.add(&key, v.file_number, v.handle, v.entries);
    }
    replace_index(bytes, &index.finish(), FORMAT_VERSION)
}

/// Re-encodes `bytes`'s index in the layout of format versions 2 and 3 (a restart per entry,
/// each value holding a first user key) under footer version `version`; `entry(i, last_key,
/// value)` gives each block's file number and first user key.
fn encode_legacy_index(
    bytes: &[u8],
    version: u32,
    entry: impl Fn(usize, &[u8], &IndexValue) -> (u64, Vec<u8>),
) -> Vec<u8> {
    let mut builder = BlockBuilder::new(1);
    let mut value = Vec::new();
    for (i, (key, v)) in index_entries(bytes).into_iter().enumerate() {
        let (file, first_user_key) = entry(i, &key, &v);
        value.clear();
        IndexValue::encode(&mut value, file, v.handle, v.entries, &first_user_key);
        builder.add(&key, &value);
    }
    replace_index(bytes, builder.finish(), version)
}

/// Re-encodes `bytes` as format version `version` (2 or 3), faithfully: each block's first
/// user key from the table's block ranges.
fn legacy_index(bytes: &[u8], version: u32) -> Vec<u8> {
    let ranges = open(bytes.to_vec()).unwrap().block_ranges().unwrap();
    encode_legacy_index(bytes, version, |i, _, v| {
        (v.file_number, ranges[i].smallest.to_vec())
    })
}

#[test]
fn tables_of_format_versions_2_and_3_still_read() {
    let (entries, bytes) = sample_table(Compression::None);
    let expected = open(bytes.clone()).unwrap().block_ranges().unwrap();
    for version in [2, 3] {
        let table = open(legacy_index(&bytes, version)).unwrap();
        assert_eq!(table.format_version(), version);
        assert_eq!(collect_forward(&mut table.iter()), entries);
        for (k, v) in entries.iter().step_by(11) {
            let got = table.get(&k[..k.len() - 8], MAX_SEQNO).unwrap().unwrap();
            assert_eq!(&got.2[..], &v[..]);
        }
        assert_eq!(table.block_ranges().unwrap(), expected);
        table.verify_checksums().unwrap();
    }
    // A version-2 index whose first key lies after its last key is corruption.
    let inverted = encode_legacy_index(&bytes, 2, |_, _, _| (0, b"\xff\xff\xff".to_vec()));
    let err = open(inverted).unwrap_err();
    assert!(is_corruption_of_this_file(&err), "{err}");
}

#[test]
fn the_compact_index_is_about_half_the_legacy_one() {
    let (_, bytes) = sample_table(Compression::None);
    let (footer, _) = layout(&bytes);
    let legacy = legacy_index(&bytes, 2);
    let (legacy_footer, _) = layout(&legacy);
    assert!(
        footer.index.size * 10 <= legacy_footer.index.size * 7,
        "version 4 index {} bytes, version 2 {}",
        footer.index.size,
        legacy_footer.index.size
    );
}

#[test]
fn blocks_in_other_files_are_refused_until_they_can_be_resolved() {
    let (entries, bytes) = sample_table(Compression::None);
    // The rewrite itself is faithful.
    let same = rewrite_index(&bytes, |_, _| {});
    assert_eq!(collect_forward(&mut open(same).unwrap().iter()), entries);

    // Version 4 may refer to another file; a table opened on its own cannot read it.
    let foreign = rewrite_index(&bytes, |i, v| {
        if i == 2 {
            v.file_number = 17;
        }
    });
    let table = open(foreign).unwrap();
    let err = exercise(&table, &[]).unwrap_err();
    assert!(err.to_string().contains("17"), "{err}");
    // Version 2 may not: refused at open.
    let foreign_v2 = encode_legacy_index(&bytes, 2, |i, key, _| {
        (if i == 2 { 17 } else { 0 }, key[..key.len() - 8].to_vec())
    });
    let err = open(foreign_v2).unwrap_err();
    assert!(is_corruption_of_this_file(&err));
    assert!(err.to_string().contains("file 17"), "{err}");

    // Handles that overlap or leave the data area, and empty blocks, are refused too.
    for edit in [
        // Each block one byte longer: the last one overruns the data area.
        (|_, v: &mut IndexValue| v.handle.size += 1) as fn(usize, &mut IndexValue),
        |_, v| v.handle.size = u64::MAX - 2,
        |_, v| v.entries = 0,
        // (Version 4 cannot express overlapping blocks of the file: each starts where the
        // previous one ends.)
    ] {
        assert!(is_corruption_of_this_file(
            &open(rewrite_index(&bytes, edit)).unwrap_err()
        ));
    }
    // An entry count the properties disagree with.
    let miscounted = rewrite_index(&bytes, |i, v| {
        if i == 0 {
            v.entries += 1
        }
    });
    assert!(is_corruption_of_this_file(&open(miscounted).unwrap_err()));
}

/// Every block of an undamaged table: data blocks, then the meta blocks.
fn all_blocks(bytes: &[u8]) -> Vec<BlockHandle> {
    let (footer, mut blocks) = layout(bytes);
    blocks.extend(
        [
            Some(footer.index),
            footer.filter,
            Some(footer.properties),
            dictionary_block(bytes),
        ]
        .into_iter()
        .flatten(),
    );
    blocks
}

/// Overwrites `bytes[pos]` and, when it lies in one of `blocks` (or its type byte), recomputes
/// that block's checksum, or the footer's, so the damage reaches the decoders behind them.
fn mutate_with_valid_checksums(bytes: &mut [u8], pos: usize, value: u8, blocks: &[BlockHandle]) {
    let footer_at = bytes.len() - FOOTER_LEN;
    bytes[pos] = value;
    if pos >= footer_at {
        let crc = crc32c::crc32c(&bytes[footer_at..footer_at + 52]);
        bytes[footer_at + 52..footer_at + 56].copy_from_slice(&crc.to_le_bytes());
        return;
    }
    for h in blocks {
        let (start, end) = (h.offset as usize, (h.offset + h.size) as usize);
        if (start..=end).contains(&pos) {
            let crc = block_crc(&bytes[start..end], bytes[end]);
            bytes[end + 1..end + BLOCK_TRAILER_LEN].copy_from_slice(&crc.to_le_bytes());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_table_open(
        data in proptest::collection::vec(any::<u8>(), 0..2048),
        meta in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..400), 0u8..3), 3),
        with_filter in any::<bool>(),
    ) {
        // Raw random bytes.
        if let Ok(table) = open(data.clone()) {
            let _ = exercise(&table, &[b"a".to_vec(), Vec::new()]);
        }
        // Random data area, then random index, filter and properties blocks behind valid
        // trailers and a valid footer, so the meta-block decoders see the random bytes.
        let mut bytes = data;
        let mut handles = Vec::new();
        for (contents, block_type) in &meta {
            handles.push(BlockHandle { offset: bytes.len() as u64, size: contents.len() as u64 });
            bytes.extend_from_slice(contents);
            bytes.push(*block_type);
            bytes.extend_from_slice(&block_crc(contents, *block_type).to_le_bytes());
        }
        let footer = Footer {
            index: handles[0],
            filter: with_filter.then_some(handles[1]),
            properties: handles[2],
            format_version: 2,
        };
        bytes.extend_from_slice(&footer.encode());
        if let Ok(table) = open(bytes) {
            let _ = exercise(&table, &[b"a".to_vec(), Vec::new()]);
        }
    }

    #[test]
    fn damage_behind_valid_checksums_never_panics(
        positions in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        codec in 0..3usize,
    ) {
        let compression = [Compression::None, Compression::Lz4, DICTIONARY][codec];
        let (entries, bytes) = sample_table(compression);
        let blocks = all_blocks(&bytes);
        let mut bad = bytes.clone();
        for (pos, value) in &positions {
            let pos = pos.index(bad.len());
            mutate_with_valid_checksums(&mut bad, pos, *value, &blocks);
        }
        let probes: Vec<Vec<u8>> = entries.iter().step_by(13).map(|(k, _)| k[..k.len() - 8].to_vec()).collect();
        match open(bad) {
            Ok(table) => {
                let _ = exercise(&table, &probes);
            }
            Err(e) => prop_assert!(
                matches!(&e, Error::Corruption { file, .. } | Error::UnsupportedFormat { file, .. } if file == NAME),
                "{e}"
            ),
        }
    }
}

#[test]
fn index_and_filter_blocks_of_a_large_table_are_read_into_mappings_and_checked() {
    // 120,000 keys in 256-byte blocks: a ~150 KB filter and a ~700 KB index, both above
    // MAPPED_BLOCK.
    let entries: Vec<Entry> = (0..120_000u32)
        .map(|i| {
            let key = internal_key(format!("k{i:07}").as_bytes(), 1, ValueKind::Put);
            (key, vec![b'v'; 20])
        })
        .collect();
    let options = TableOptions {
        block_size: 256,
        ..TableOptions::default()
    };
    let (bytes, _) = build(&entries, options);
    let (footer, _) = layout(&bytes);
    let filter = footer.filter.unwrap();
    assert!(
        filter.size as usize >= super::file::MAPPED_BLOCK,
        "{filter:?}"
    );
    assert!(footer.index.size as usize >= super::file::MAPPED_BLOCK);
    let table = open(bytes.clone()).unwrap();
    for (k, v) in entries.iter().step_by(997) {
        let (user, _) = super::block::split_internal_key(k);
        assert_eq!(table.get(user, MAX_SEQNO).unwrap().unwrap().2, v.as_slice());
    }
    assert!(table.get(b"absent", MAX_SEQNO).unwrap().is_none());
    // A flipped byte in either mapped block is a corruption of this file, found at open.
    for handle in [filter, footer.index] {
        let mut damaged = bytes.clone();
        damaged[handle.offset as usize + 100] ^= 0x40;
        let err = open(damaged).unwrap_err();
        assert!(is_corruption_of_this_file(&err), "{err}");
    }
}
