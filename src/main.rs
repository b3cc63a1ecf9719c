//! `strata`: the Strata command-line tool.

mod bench;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use std::io::Write as _;
use std::time::Instant;
use strata_meta::parse_size;
use strata_policy::{build_policy, PolicyOptions, BUILTIN_POLICIES};
use strata_sim::{
    comparison_table, human_bytes, Mix, SimConfig, SimReport, Simulator, Timing, WorkloadKind,
    WorkloadSpec,
};

#[derive(Parser)]
#[command(
    name = "strata",
    version,
    about = "Strata: an LSM-tree engine with pluggable compaction policies"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmark compaction policies (and peers) on a workload, side by side, with a report.
    Bench(bench::BenchArgs),
    /// Simulate compaction policies on a workload (metadata only, no data written).
    Sim(SimArgs),
}

fn size_arg(text: &str) -> Result<u64, String> {
    parse_size(text)
}

#[derive(Args, Debug)]
struct SimArgs {
    /// Policies to compare, comma-separated, or "all".
    #[arg(long, default_value = "all")]
    policy: String,
    /// Workload: fillrandom, fillseq, updaterandom, updatezipf, deleterandom, mixed.
    #[arg(long, default_value = "fillrandom")]
    workload: WorkloadKind,
    /// Keys inserted by the fill phase.
    #[arg(long, default_value_t = 10_000_000)]
    entries: u64,
    /// Operations after the fill (update, delete and mixed workloads). Default: --entries.
    #[arg(long)]
    ops: Option<u64>,
    /// Key size in bytes.
    #[arg(long, default_value = "16", value_parser = size_arg)]
    key_size: u64,
    /// Value size in bytes.
    #[arg(long, default_value = "100", value_parser = size_arg)]
    value_size: u64,
    /// Write buffer (memtable) size. RocksDB: write_buffer_size.
    #[arg(long, default_value = "4MiB", value_parser = size_arg)]
    buffer_size: u64,
    /// Size ratio T. RocksDB: max_bytes_for_level_multiplier.
    #[arg(long, default_value_t = 10.0)]
    size_ratio: f64,
    /// Output table size. RocksDB: target_file_size_base. Default: the buffer size.
    #[arg(long, value_parser = size_arg)]
    target_file_size: Option<u64>,
    /// L0 runs that trigger an L0 merge. RocksDB: level0_file_num_compaction_trigger.
    /// Default: 4 for leveled, 1 for leveled-full.
    #[arg(long)]
    l0_trigger: Option<usize>,
    /// Levels including L0 for leveled. RocksDB: num_levels.
    #[arg(long, default_value_t = 7)]
    num_levels: usize,
    /// Upper bound of the base level's size. RocksDB: max_bytes_for_level_base.
    /// Default: size ratio × buffer size.
    #[arg(long, value_parser = size_arg)]
    max_bytes_for_level_base: Option<u64>,
    /// Dynamic level sizes for leveled-full (leveled always uses them).
    /// RocksDB: level_compaction_dynamic_level_bytes.
    #[arg(long)]
    dynamic_level_bytes: Option<bool>,
    /// Levels ℓ of horizontal-leveled and horizontal-tiered.
    #[arg(long, default_value_t = 3)]
    levels: usize,
    /// Expected data size N for horizontal-tiered. Default: the workload's ingested bytes.
    #[arg(long, value_parser = size_arg)]
    expected_data_size: Option<u64>,
    /// Bloom filter bits per key.
    #[arg(long, default_value_t = 10.0)]
    bloom_bits: f64,
    /// Zipf exponent of updatezipf.
    #[arg(long, default_value_t = 0.99)]
    zipf_theta: f64,
    /// Operation mix of the mixed workload, e.g. insert=0.5,delete=0.5.
    #[arg(long, default_value = "insert=0.5,delete=0.5")]
    mix: Mix,
    /// Seed of the workload's random stream.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Model time: writes arrive at --ingest-rate and compactions run at --compaction-rate on
    /// --jobs workers (default: synchronous, every compaction finishes at once).
    #[arg(long)]
    timed: bool,
    /// User bytes per simulated second (timed mode).
    #[arg(long, default_value = "64MiB", value_parser = size_arg)]
    ingest_rate: u64,
    /// Bytes one compaction writes per simulated second (timed mode).
    #[arg(long, default_value = "256MiB", value_parser = size_arg)]
    compaction_rate: u64,
    /// Compactions that may run at once (timed mode). RocksDB: max_background_compactions.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Print JSON (one object for one policy, an array for several) instead of a table.
    #[arg(long)]
    json: bool,
    /// Timeline samples kept in the JSON output (one per flush before thinning).
    #[arg(long, default_value_t = 200)]
    timeline_points: usize,
    /// Write the full per-flush timeline of every policy as CSV to this file.
    #[arg(long)]
    timeline_csv: Option<std::path::PathBuf>,
}

/// Peak resident set size of this process, from /proc (Linux only).
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn policy_names(arg: &str) -> Result<Vec<String>> {
    if arg == "all" {
        return Ok(BUILTIN_POLICIES.iter().map(|s| s.to_string()).collect());
    }
    let names: Vec<String> = arg
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if names.is_empty() {
        bail!("--policy needs at least one policy name");
    }
    Ok(names)
}

fn write_timeline_csv(path: &std::path::Path, reports: &[SimReport]) -> Result<()> {
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    writeln!(out, "policy,flush,seconds,level,runs,space_amp,lookup_cost")?;
    for r in reports {
        for s in &r.timeline {
            for (level, runs) in s.runs_per_level.iter().enumerate() {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{}",
                    r.policy, s.flush, s.seconds, level, runs, s.space_amp, s.lookup_cost
                )?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

fn run_sim(args: SimArgs) -> Result<()> {
    let names = policy_names(&args.policy)?;
    let ops = args.ops.unwrap_or(args.entries);
    let spec = WorkloadSpec {
        kind: args.workload,
        entries: args.entries,
        ops,
        zipf_theta: args.zipf_theta,
        mix: args.mix,
        seed: args.seed,
    };
    spec.validate().map_err(anyhow::Error::msg)?;
    let ingest_bytes = spec
        .total_ops()
        .saturating_mul(args.key_size + args.value_size);
    let options = PolicyOptions {
        size_ratio: args.size_ratio,
        write_buffer_size: args.buffer_size,
        target_file_size: args.target_file_size.unwrap_or(args.buffer_size),
        level0_trigger: args.l0_trigger,
        max_bytes_for_level_base: args.max_bytes_for_level_base,
        num_levels: args.num_levels,
        dynamic_level_bytes: args.dynamic_level_bytes,
        bloom_bits_per_key: args.bloom_bits,
        horizontal_levels: args.levels,
        expected_data_size: args.expected_data_size.unwrap_or(ingest_bytes.max(1)),
    };
    let timing = if args.timed {
        Timing::Timed {
            ingest_bytes_per_sec: args.ingest_rate as f64,
            job_bytes_per_sec: args.compaction_rate as f64,
            max_jobs: args.jobs,
        }
    } else {
        Timing::Synchronous
    };
    let config = SimConfig {
        key_size: args.key_size,
        value_size: args.value_size,
        buffer_size: args.buffer_size,
        timing,
        ..SimConfig::default()
    };
    if !args.json {
        println!(
            "workload {} : {} entries{}, {}-byte keys, {}-byte values ({} ingested), buffer {}, T = {}, {}",
            spec.kind,
            spec.entries,
            if spec.total_ops() > spec.entries { format!(" + {ops} ops") } else { String::new() },
            args.key_size,
            args.value_size,
            human_bytes(ingest_bytes),
            human_bytes(args.buffer_size),
            args.size_ratio,
            if args.timed { "timed" } else { "synchronous" }
        );
    }
    let mut reports = Vec::new();
    for name in &names {
        let policy = build_policy(name, &options)?;
        let start = Instant::now();
        let mut report = Simulator::run(policy, config.clone(), &spec)
            .with_context(|| format!("simulating {name}"))?;
        report.wall_seconds = start.elapsed().as_secs_f64();
        if !args.json {
            println!(
                "\n{name}: WA {:.2}, peak SA {:.2}, {:.1}s; final shape:",
                report.write_amp, report.peak_space_amp, report.wall_seconds
            );
            print!("{}", report.shape());
        }
        reports.push(report);
    }
    if let Some(path) = &args.timeline_csv {
        write_timeline_csv(path, &reports)?;
    }
    let rss = peak_rss_bytes();
    if args.json {
        let mut values = Vec::new();
        for mut r in reports {
            r.thin_timeline(args.timeline_points);
            let mut v = serde_json::to_value(&r)?;
            if let (Some(obj), Some(rss)) = (v.as_object_mut(), rss) {
                obj.insert("process_peak_rss_bytes".to_string(), rss.into());
            }
            values.push(v);
        }
        let out = if values.len() == 1 {
            values.pop().unwrap_or_default()
        } else {
            serde_json::Value::Array(values)
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("\n{}", comparison_table(&reports));
        if let Some(rss) = rss {
            println!("process peak RSS: {}", human_bytes(rss));
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Sim(args) => run_sim(args),
    }
}
