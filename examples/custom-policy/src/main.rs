//! The `strata` command line with the size-tiered policy registered:
//!
//! ```sh
//! cargo run --release -p strata-example-custom-policy -- sim --policy size-tiered,tiered
//! cargo run --release -p strata-example-custom-policy -- bench --policies size-tiered:min_threshold=3
//! ```

fn main() -> anyhow::Result<()> {
    strata_example_custom_policy::register();
    strata_cli::main()
}
