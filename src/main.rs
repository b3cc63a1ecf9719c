//! `strata`: the Strata command-line tool.

mod bench;
mod policies;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use policies::policy_specs;
use std::io::Write as _;
use std::time::Instant;
use strata_meta::parse_size;
use strata_policy::{build_policy, registry};
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
    /// Policies to compare: comma-separated names, each optionally with options
    /// (`leveled:level0_trigger=1,tiered`), or "all" for every built-in policy.
    #[arg(long, default_value = "all")]
    policy: String,
    /// An option for every selected policy that declares it, as name=value (repeatable), e.g.
    /// `--policy-option levels=3`. `strata sim --list-policies` shows each policy's options.
    #[arg(long = "policy-option", value_name = "NAME=VALUE")]
    policy_options: Vec<String>,
    /// Print every registered policy with its options, and exit.
    #[arg(long)]
    list_policies: bool,
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
    /// Write buffer (memtable) size; also every policy's write_buffer_size unless set.
    /// RocksDB: write_buffer_size.
    #[arg(long, default_value = "4MiB", value_parser = size_arg)]
    buffer_size: u64,
    /// Size ratio T of every policy that has one, unless set. RocksDB:
    /// max_bytes_for_level_multiplier.
    #[arg(long, default_value_t = 10.0)]
    size_ratio: f64,
    /// Output table size of every policy, unless set. RocksDB: target_file_size_base.
    /// Default: the buffer size.
    #[arg(long, value_parser = size_arg)]
    target_file_size: Option<u64>,
    /// Bloom filter bits per key of every policy, unless set.
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
    if args.list_policies {
        print!("{}", registry::describe_policies());
        return Ok(());
    }
    let ops = args.ops.unwrap_or(args.entries);
    let workload = WorkloadSpec {
        kind: args.workload,
        entries: args.entries,
        ops,
        zipf_theta: args.zipf_theta,
        mix: args.mix,
        seed: args.seed,
    };
    workload.validate().map_err(anyhow::Error::msg)?;
    let ingest_bytes = workload
        .total_ops()
        .saturating_mul(args.key_size + args.value_size);
    let specs = policy_specs(
        &args.policy,
        &args.policy_options,
        &[
            ("write_buffer_size", args.buffer_size.to_string()),
            ("size_ratio", args.size_ratio.to_string()),
            (
                "target_file_size",
                args.target_file_size
                    .unwrap_or(args.buffer_size)
                    .to_string(),
            ),
            ("bloom_bits_per_key", args.bloom_bits.to_string()),
            ("expected_data_size", ingest_bytes.max(1).to_string()),
        ],
    )?;
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
            workload.kind,
            workload.entries,
            if workload.total_ops() > workload.entries { format!(" + {ops} ops") } else { String::new() },
            args.key_size,
            args.value_size,
            human_bytes(ingest_bytes),
            human_bytes(args.buffer_size),
            args.size_ratio,
            if args.timed { "timed" } else { "synchronous" }
        );
    }
    let mut reports = Vec::new();
    for spec in &specs {
        let name = &spec.name;
        let policy = build_policy(spec).with_context(|| format!("building {spec}"))?;
        let start = Instant::now();
        let mut report = Simulator::run(policy, config.clone(), &workload)
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
