//! The entry point of the `block_decoder` fuzz target (`fuzz/` at the repository root). Not part
//! of the API: the block decoder is crate-private, and this is the one way in from outside.

use std::cmp::Ordering;

use bytes::Bytes;
use xxhash_rust::xxh3::xxh3_64;

use super::block::{cmp_to_target, split_internal_key, Block, Cursor, DecodeError};
use super::bloom::BloomFilter;
use super::compress::decode_contents;
use super::format::TableProperties;

/// What [`fuzz_decode_block`] saw, for the fuzz target to check. Entries are identified by a
/// hash of their key and value, so that a block whose keys grow quadratically (every entry
/// sharing all of the previous key) costs no memory here.
#[doc(hidden)]
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FuzzBlockWalk {
    /// Bytes of the decoded (decompressed) block.
    pub decoded_len: usize,
    /// Each entry visited by `seek_to_first` then `next`, in order.
    pub forward: Vec<u64>,
    /// Each entry visited by `seek_to_last` then `prev`, in order.
    pub backward: Vec<u64>,
    /// Whether the forward walk found the keys strictly increasing (internal-key order).
    pub sorted: bool,
    /// For each target: the entry a seek landed on (`None`: past the end).
    pub seeks: Vec<Option<u64>>,
    /// For each target: the first entry of the forward walk at or after it.
    pub expected_seeks: Vec<Option<u64>>,
}

/// Fuzzing entry point (not a stable API): decodes `stored` as the contents of a block of
/// compression type `block_type` whose trailer checksum already matched, checks its restart
/// array, seeks to each of `targets` (internal keys), walks every entry forwards and backwards,
/// and also decodes the block as a properties block and as a Bloom filter (probing `targets`).
/// Returns the decoder's reason for the first failure. Whatever the input, the result is `Ok`
/// or `Err`: a panic is a bug.
#[doc(hidden)]
pub fn fuzz_decode_block(
    block_type: u8,
    stored: &[u8],
    targets: &[&[u8]],
) -> Result<FuzzBlockWalk, String> {
    let why = |e: DecodeError| format!("{} at byte {}", e.reason, e.offset);
    let data = Bytes::from(decode_contents(stored.to_vec(), block_type, None)?);
    if let Ok(filter) = BloomFilter::decode(data.clone()) {
        for target in targets {
            filter.may_contain(target);
        }
    }
    let block = Block::new(data).map_err(why)?;
    // Only properties blocks decode; the point is that nothing else panics.
    let _ = TableProperties::decode(&block);
    let mut walk = FuzzBlockWalk {
        decoded_len: block.data().len(),
        sorted: true,
        ..FuzzBlockWalk::default()
    };
    let hash = |c: &Cursor| xxh3_64(c.key()) ^ xxh3_64(c.value(&block)).rotate_left(1);
    let mut c = Cursor::default();
    for target in targets {
        let (user, trailer) = split_internal_key(target);
        c.seek(&block, user, trailer).map_err(why)?;
        walk.seeks.push(c.valid().then(|| hash(&c)));
    }
    walk.expected_seeks = vec![None; targets.len()];
    let mut previous: Vec<u8> = Vec::new();
    c.seek_to_first(&block).map_err(why)?;
    while c.valid() {
        let (prev_user, prev_trailer) = split_internal_key(&previous);
        if !walk.forward.is_empty()
            && cmp_to_target(c.key(), prev_user, prev_trailer) != Ordering::Greater
        {
            walk.sorted = false;
        }
        for (target, expected) in targets.iter().zip(&mut walk.expected_seeks) {
            let (user, trailer) = split_internal_key(target);
            if expected.is_none() && cmp_to_target(c.key(), user, trailer) != Ordering::Less {
                *expected = Some(hash(&c));
            }
        }
        walk.forward.push(hash(&c));
        previous.clear();
        previous.extend_from_slice(c.key());
        c.next(&block).map_err(why)?;
    }
    c.seek_to_last(&block).map_err(why)?;
    while c.valid() {
        walk.backward.push(hash(&c));
        c.prev(&block).map_err(why)?;
    }
    Ok(walk)
}
