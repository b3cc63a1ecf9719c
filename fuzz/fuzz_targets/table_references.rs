//! Tables whose index refers to data blocks in another file (format version 3, written by
//! block-preserving merges): the input is opened as table 7, whose entries may name file 3, a
//! fixed donor table (`strata_fuzz::donor_table_bytes`), and is checked as `table_reader`
//! checks a table: verified, walked both ways, sought and read. Seeds from `gen-seeds` refer to
//! the donor's real blocks; mutations move references to other offsets, sizes and files, which
//! must read as errors, never as panics or wrong answers. The raw input runs first, then a copy
//! with its own checksums recomputed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_fuzz::table_check::check_table;
use strata_fuzz::{donor_files, fix_table_checksums};

fuzz_target!(|data: &[u8]| {
    check_table(data.to_vec(), data, Some(donor_files()));
    let mut fixed = data.to_vec();
    if fix_table_checksums(&mut fixed) && fixed != data {
        check_table(fixed, data, Some(donor_files()));
    }
});
