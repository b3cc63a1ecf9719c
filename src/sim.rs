//! `strata sim`: the simulator's command line.

use crate::policies::policy_specs;
use crate::workload_args::{ingest_bytes, WorkloadArgs};
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write as _;
use std::time::Instant;
use strata_meta::parse_size;
use strata_policy::{build_policy, registry};
use strata_sim::{comparison_table, human_bytes, SimConfig, SimReport, Simulator, Timing};

fn size_arg(text: &str) -> Result<u64, String> {
    parse_size(text)
}

/// Options of `strata sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Policies to compare: comma-separated names, each optionally with options
    /// (`leveled:level0_trigger=1,tiered`), or "all" for every built-in policy.
    #[arg(long)]
    policy: Option<String>,
    /// An option for every selected policy that declares it, as name=value (repeatable), e.g.
    /// `--policy-option levels=3`. `strata sim --list-policies` shows each policy's options.
    #[arg(long = "policy-option", value_name = "NAME=VALUE")]
    policy_options: Vec<String>,
    /// Print every registered policy with its options, and exit.
    #[arg(long)]
    list_policies: bool,
    /// The workload (shared with `strata bench`).
    #[command(flatten)]
    workload: WorkloadArgs,
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

/// Runs `strata sim`.
pub fn run(args: SimArgs) -> Result<()> {
    if args.list_policies {
        print!("{}", registry::describe_policies());
        return Ok(());
    }
    if args.workload.list_if_asked() {
        return Ok(());
    }
    let workload = args.workload.spec("fillunique", 10_000_000, None)?;
    let ingest_bytes = ingest_bytes(&workload);
    let (key_size, value_size) = (workload.key_size as u64, workload.value_size as u64);
    let specs = policy_specs(
        args.policy.as_deref(),
        &workload,
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
        key_size,
        value_size,
        buffer_size: args.buffer_size,
        timing,
        ..SimConfig::default()
    };
    if !args.json {
        println!(
            "workload {} ({} ops in {} phases), {}-byte keys, {}-byte values ({} ingested), buffer {}, T = {}, {}",
            workload.name,
            workload.phases.iter().map(|p| p.ops).sum::<u64>(),
            workload.phases.len(),
            key_size,
            value_size,
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
        let mut report = Simulator::run(policy, config.clone(), &workload, args.workload.seed)
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
