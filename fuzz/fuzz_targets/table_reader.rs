//! `Table::open` on arbitrary bytes; if it opens: `verify_checksums`, a full walk forwards and
//! backwards, seeks to keys derived from the input and from the walk, and `get`s. The raw input
//! runs first, then a copy whose footer and block checksums were recomputed (see `src/lib.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_fuzz::fix_table_checksums;
use strata_fuzz::table_check::check_table;

fuzz_target!(|data: &[u8]| {
    check_table(data.to_vec(), data, None);
    let mut fixed = data.to_vec();
    if fix_table_checksums(&mut fixed) && fixed != data {
        check_table(fixed, data, None);
    }
});
