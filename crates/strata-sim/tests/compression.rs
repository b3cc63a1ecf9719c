//! Compression in the simulator: the engine's codecs measured on the workload's values, and a
//! plan's codec shrinking the tables it writes by the measured ratio.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_sim::engine_format::measure_compression_ratios;
use strata_sim::{SimConfig, Simulator};

#[test]
fn the_engines_codecs_shrink_values_as_compressible_as_the_workload_says() {
    let random = measure_compression_ratios(16, 100, 1.0, 4096);
    // Random values do not shrink; only keys and block structure do, a little.
    assert!(random.lz4 > 0.85 && random.zstd > 0.8, "{random:?}");
    let half = measure_compression_ratios(16, 100, 0.5, 4096);
    assert!(half.lz4 < 0.8 && half.lz4 > 0.4, "{half:?}");
    assert!(half.zstd <= half.lz4, "{half:?}");
    // A dictionary's bytes are counted in its table: on values as varied as these it may
    // save a little or cost a little, never much either way.
    assert!(
        (half.zstd_dictionary / half.zstd - 1.0).abs() < 0.05,
        "{half:?}"
    );
}

#[test]
fn a_compressing_level_writes_smaller_tables_by_the_measured_ratio() {
    let run = |spec: &str| {
        let config = SimConfig {
            key_size: 16,
            value_size: 100,
            buffer_size: 256 << 10,
            value_compression_ratio: 0.5,
            ..SimConfig::default()
        }
        .with_measured_compression();
        let ratios = config.compression_ratios;
        let spec: strata_policy::PolicySpec = spec.parse().unwrap();
        let mut sim = Simulator::new(strata_policy::build_policy(&spec).unwrap(), config).unwrap();
        for k in 0..40_000u64 {
            sim.put(k.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000)
                .unwrap();
        }
        (sim.finish().unwrap(), ratios)
    };
    let (plain, _) = run("leveled:size_ratio=4");
    let (zstd, ratios) = run("leveled:size_ratio=4,compression_per_level=zstd");
    // Every table is compressed, so the tree's bytes and what was written shrink by about the
    // ratio (the same plans: sizes only steer cutting).
    let bytes = |r: &strata_sim::SimReport| r.flush_bytes + r.compaction_bytes_written;
    let shrink = bytes(&zstd) as f64 / bytes(&plain) as f64;
    assert!(
        (shrink - ratios.zstd).abs() < 0.1,
        "written {shrink:.3} of uncompressed, zstd's ratio {:.3}",
        ratios.zstd
    );
    assert_eq!(
        zstd.policy_options.get("compression_per_level").unwrap(),
        "zstd"
    );
}
