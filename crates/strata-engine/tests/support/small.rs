//! The small trees of the model-checked tests (`oracle.rs`, `keyspace_oracle.rs`): 4 KiB tables
//! and a size ratio of 3, so a few thousand steps flush, compact and deepen the tree many times.

use strata_policy::PolicySpec;

/// `policy` with small tables and levels, where it does not set them itself.
pub fn small_tree(policy: &str) -> PolicySpec {
    let mut spec: PolicySpec = policy.parse().unwrap();
    spec.fill_defaults([
        ("size_ratio", "3"),
        ("target_file_size", "4KiB"),
        ("expected_data_size", "1MiB"),
        ("levels", "3"),
        ("num_levels", "5"),
        // Min-Max flushes a quarter of the buffer at a time, so reads meet buffered remainders.
        ("bucket_size", "2KiB"),
    ])
    .unwrap();
    spec
}
