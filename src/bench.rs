//! `strata bench`: the benchmark tool's command line.

use crate::policies::policy_specs;
use crate::workload_args::{ingest_bytes, WorkloadArgs};
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use strata_bench::engines::{available_peers, EngineSettings};
use strata_bench::{report, run_comparison, BenchConfig};
use strata_meta::parse_size;

fn size_arg(text: &str) -> Result<u64, String> {
    parse_size(text)
}

/// Options of `strata bench`. With none, it compares every built-in policy (and every peer the
/// build has) on the `mixed` workload and writes a report.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The workload (shared with `strata sim`).
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Render the table and report from a saved results.json instead of running anything.
    #[arg(long)]
    from_json: Option<PathBuf>,
    /// Strata policies to run: comma-separated names, each optionally with options
    /// (`leveled:level0_trigger=8,tiered`), "all" for every built-in policy, or "none".
    /// Default: the workload file's `policies`, else all.
    #[arg(long)]
    policies: Option<String>,
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
    if args.workload.list_if_asked() {
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
    let workload = args.workload.spec("mixed", 2_000_000, Some(2_000_000))?;
    // Engine settings fill the rest of each policy's options when it opens.
    let policies: Vec<String> = policy_specs(
        args.policies.as_deref(),
        &workload,
        &args.policy_options,
        &[],
    )?
    .iter()
    .map(ToString::to_string)
    .collect();
    let peers = match &args.peers {
        None => available_peers().iter().map(|s| s.to_string()).collect(),
        Some(p) => list_names(p, &["rocksdb", "fjall"]),
    };
    let user_bytes = ingest_bytes(&workload);
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
        seed: args.workload.seed,
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
