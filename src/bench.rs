//! `strata bench`: the benchmark tool's command line.

use crate::policies::policy_specs;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use strata_bench::engines::{available_peers, EngineSettings};
use strata_bench::workload::{PresetParams, WorkloadSpec, PRESETS};
use strata_bench::{report, run_comparison, BenchConfig};
use strata_meta::parse_size;

fn size_arg(text: &str) -> Result<u64, String> {
    parse_size(text)
}

/// Options of `strata bench`. With none, it compares every built-in policy (and every peer the
/// build has) on the `mixed` workload and writes a report.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// A preset (see --list), comma-separated db_bench phases, or a TOML workload file.
    #[arg(long, default_value = "mixed")]
    workload: String,
    /// List the workload presets and exit.
    #[arg(long)]
    list: bool,
    /// Render the table and report from a saved results.json instead of running anything.
    #[arg(long)]
    from_json: Option<PathBuf>,
    /// Strata policies to run: comma-separated names, each optionally with options
    /// (`leveled:level0_trigger=8,tiered`), "all" for every built-in policy, or "none".
    #[arg(long, default_value = "all")]
    policies: String,
    /// An option for every selected policy that declares it, as name=value (repeatable), e.g.
    /// `--policy-option num_levels=5`; `strata sim --list-policies` shows each policy's options.
    #[arg(long = "policy-option", value_name = "NAME=VALUE")]
    policy_options: Vec<String>,
    /// Peers to run beside the policies, comma-separated: rocksdb, fjall, or "all" (needs a
    /// build with `--features peers`). Default: every peer the build has.
    #[arg(long)]
    peers: Option<String>,
    /// Label ratios are computed against (default: the first run).
    #[arg(long)]
    baseline: Option<String>,
    /// Records loaded (entries of fill phases).
    #[arg(long, default_value_t = 2_000_000)]
    entries: u64,
    /// Operations of run phases.
    #[arg(long, default_value_t = 2_000_000)]
    ops: u64,
    /// Key bytes (at least 8).
    #[arg(long, default_value_t = 16)]
    key_size: usize,
    /// Value bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Threads of run phases.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Key distribution of YCSB and mixed workloads: uniform, zipfian, latest.
    #[arg(long)]
    distribution: Option<String>,
    /// Zipf exponent.
    #[arg(long, default_value_t = 0.99)]
    theta: f64,
    /// EcoTune: writer rate in MiB/s.
    #[arg(long, default_value_t = 4.0)]
    write_rate: f64,
    /// EcoTune: query arrivals per second.
    #[arg(long, default_value_t = 5000.0)]
    query_rate: f64,
    /// EcoTune: share of queries that are long scans (seek + 100 next).
    #[arg(long, default_value_t = 0.3)]
    long_scan_share: f64,
    /// Spooky: operations between moves of the zipfian hot set.
    #[arg(long, default_value_t = 100_000)]
    hot_period: u64,
    /// Nearly-sorted ingest: disorder window in keys.
    #[arg(long, default_value_t = 1000)]
    disorder: u64,
    /// Write buffer size. RocksDB: write_buffer_size (whose default is 64 MiB; the smaller
    /// default here gives a default-sized run several levels to compact).
    #[arg(long, default_value = "8MiB", value_parser = size_arg)]
    write_buffer_size: u64,
    /// Table target size. RocksDB: target_file_size_base.
    #[arg(long, default_value = "8MiB", value_parser = size_arg)]
    target_file_size: u64,
    /// Block cache capacity.
    #[arg(long, default_value = "32MiB", value_parser = size_arg)]
    block_cache: u64,
    /// Size ratio T. RocksDB: max_bytes_for_level_multiplier.
    #[arg(long, default_value_t = 10.0)]
    size_ratio: f64,
    /// Base level bound. RocksDB: max_bytes_for_level_base.
    #[arg(long, default_value = "32MiB", value_parser = size_arg)]
    level_base: u64,
    /// Bloom filter bits per key.
    #[arg(long, default_value_t = 10.0)]
    bloom_bits: f64,
    /// Background jobs. RocksDB: max_background_jobs.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Seed of the workload generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Parent directory for the databases (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Where to write the report (HTML, SVG charts, JSON, CSV). Default: ./bench-report.
    #[arg(long, default_value = "bench-report")]
    report: PathBuf,
    /// Print the results as JSON (a list of runs) instead of the table.
    #[arg(long)]
    json: bool,
    /// Hide progress bars.
    #[arg(long)]
    quiet: bool,
}

fn list_names(arg: &str, all: &[&str]) -> Vec<String> {
    match arg {
        "all" => all.iter().map(|s| s.to_string()).collect(),
        "none" | "" => Vec::new(),
        _ => arg
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    }
}

/// Runs `strata bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    if args.list {
        for (name, what) in PRESETS {
            println!("{name:<24} {what}");
        }
        return Ok(());
    }
    if let Some(path) = &args.from_json {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let comparison: strata_bench::results::Comparison = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a saved comparison", path.display()))?;
        let index = report::write_report(&comparison, &args.report)?;
        println!(
            "{}\nreport: {}",
            report::render_table(&comparison),
            index.display()
        );
        return Ok(());
    }
    let params = PresetParams {
        entries: args.entries,
        ops: args.ops,
        key_size: args.key_size,
        value_size: args.value_size,
        threads: args.threads,
        distribution: args.distribution.clone(),
        theta: args.theta,
        write_rate_mib: args.write_rate,
        query_rate: args.query_rate,
        long_scan_share: args.long_scan_share,
        hot_period_ops: args.hot_period,
        disorder: args.disorder,
    };
    let workload = if args.workload.ends_with(".toml") {
        let text = std::fs::read_to_string(&args.workload)
            .with_context(|| format!("reading workload file {}", args.workload))?;
        WorkloadSpec::from_toml(&text).map_err(anyhow::Error::msg)?
    } else {
        WorkloadSpec::preset(&args.workload, &params).map_err(anyhow::Error::msg)?
    };
    // Engine settings fill the rest of each policy's options when it opens.
    let policies: Vec<String> = policy_specs(&args.policies, &args.policy_options, &[])?
        .iter()
        .map(ToString::to_string)
        .collect();
    let peers = match &args.peers {
        None => available_peers().iter().map(|s| s.to_string()).collect(),
        Some(p) => list_names(p, &["rocksdb", "fjall"]),
    };
    let user_bytes: u64 = workload
        .phases
        .iter()
        .map(|p| p.ops * (workload.key_size + workload.value_size) as u64)
        .sum();
    let settings = EngineSettings {
        write_buffer_size: args.write_buffer_size,
        target_file_size: args.target_file_size,
        block_cache: args.block_cache,
        bloom_bits_per_key: args.bloom_bits,
        size_ratio: args.size_ratio,
        level_base: args.level_base,
        background_jobs: args.jobs,
        expected_data_size: user_bytes.max(1),
    };
    let config = BenchConfig {
        workload,
        policies,
        peers,
        baseline: args.baseline.clone(),
        settings,
        dir: args.dir.clone(),
        seed: args.seed,
        progress: !args.quiet && !args.json,
    };
    if !args.json {
        let w = &config.workload;
        println!(
            "workload {} ({}): {} phases, {}-byte keys, {}-byte values; runs: {}",
            w.name,
            w.description,
            w.phases.len(),
            w.key_size,
            w.value_size,
            config
                .policies
                .iter()
                .chain(&config.peers)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let comparison = run_comparison(&config)?;
    let index = report::write_report(&comparison, &args.report)
        .with_context(|| format!("writing the report to {}", args.report.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&comparison.runs)?);
    } else {
        println!("\n{}", report::render_table(&comparison));
        println!("report: {}", index.display());
    }
    Ok(())
}
