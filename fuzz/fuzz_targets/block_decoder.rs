//! The table block decoder: decompression, the restart array, entries walked both ways, seeks,
//! and the same bytes read as a properties block and a Bloom filter, through
//! `strata_engine::table::fuzz_decode_block`.
//!
//! Input: `block type: u8 | n: u8 | n bytes of seek targets (12-byte internal keys, up to 4) |
//! stored block contents` (what precedes the 5-byte trailer in a table file).
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::table::fuzz_decode_block;

/// The engine's bound on a compressed block's claimed size, relative to its stored size.
const MAX_EXPANSION: usize = 255;

fuzz_target!(|data: &[u8]| {
    let Some((&block_type, rest)) = data.split_first() else {
        return;
    };
    let Some((&n, rest)) = rest.split_first() else {
        return;
    };
    let (targets, stored) = rest.split_at(usize::from(n).min(rest.len()));
    let targets: Vec<&[u8]> = targets.chunks(12).take(4).collect();
    let Ok(walk) = fuzz_decode_block(block_type, stored, &targets) else {
        return;
    };
    assert!(
        walk.decoded_len <= stored.len().saturating_mul(MAX_EXPANSION),
        "a block of {} stored bytes decoded to {}",
        stored.len(),
        walk.decoded_len
    );
    // Every entry takes at least three header bytes.
    assert!(walk.forward.len() <= walk.decoded_len / 3);
    let mut backward = walk.backward.clone();
    backward.reverse();
    assert_eq!(
        walk.forward, backward,
        "a block that decodes both ways without error yields different entries each way"
    );
    if walk.sorted {
        assert_eq!(
            walk.seeks, walk.expected_seeks,
            "a seek in a sorted block missed the first entry at or after its target"
        );
    }
});
