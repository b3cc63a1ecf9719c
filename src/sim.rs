//! `strata sim`: the simulator's command line.

use crate::checks;
use crate::policies::{choose_policies, without_autopilot, PolicyFlags};
use crate::workload_args::{
    count_arg, ingest_bytes, size_arg, usize_arg, warn, warn_if_smaller_than_a_buffer, WorkloadArgs,
};
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use strata_advise::{run_autopilot, Calibration};
use strata_bench::engines::{AUTOPILOT, AUTOPILOT_START};
use strata_exec::job_log::{job_log_file_name, write_job_log, JobRecord};
use strata_policy::autopilot::Action;
use strata_policy::{registry, PolicySpec};
use strata_sim::ftl::{replay_events, Ftl, FtlConfig, FtlRecorder, FtlReport, VictimPolicy};
use strata_sim::{
    comparison_table, human_bytes, SimConfig, SimReport, Simulator, Timing, TraceEvent,
    DEFAULT_SCALE_KEYS,
};
use strata_workload::OpStream;

/// Options of `strata sim`. Sizes take units with one rule: binary, any case (4K = 4KB = 4KiB =
/// 4096).
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Policies to compare: comma-separated names, each optionally with options
    /// (`leveled:level0_trigger=1,tiered`), or "all" for every built-in policy; "autopilot"
    /// simulates the autopilot, starting from `leveled` (the engine's twin,
    /// `Simulator::with_autopilot`). Default: the workload file's `policies`, else all.
    #[arg(long = "policies", visible_alias = "policy", value_name = "POLICIES")]
    policy: Option<String>,
    /// The calibration (`strata calibrate`) the "autopilot" run's advisor prices with.
    /// Default: round figures (`strata_advise::Calibration::assumed`).
    #[arg(long, value_name = "FILE")]
    calibration: Option<PathBuf>,
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
    /// The policy flags (shared with `strata bench`).
    #[command(flatten)]
    policy_flags: PolicyFlags,
    /// Model time: writes arrive at --ingest-rate and compactions run at --compaction-rate on
    /// --jobs workers (default: synchronous, every compaction finishes at once).
    #[arg(long)]
    timed: bool,
    /// User bytes per simulated second (timed mode). [SIZE: 4K = 4KB = 4KiB, any case]
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "64MiB",
        value_parser = size_arg,
        allow_hyphen_values = true
    )]
    ingest_rate: u64,
    /// Bytes one compaction writes per simulated second (timed mode). [SIZE: 4K = 4KB = 4KiB,
    /// any case]
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "256MiB",
        value_parser = size_arg,
        allow_hyphen_values = true
    )]
    compaction_rate: u64,
    /// Compactions that may run at once (timed mode), at least 1. RocksDB:
    /// max_background_compactions.
    #[arg(long, default_value_t = 2, allow_negative_numbers = true, value_parser = usize_arg)]
    jobs: usize,
    /// Workers besides --jobs that run only the plans a policy marks urgent (timed mode), as
    /// the engine's Options::with_reserved_jobs.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = usize_arg)]
    reserved_jobs: usize,
    /// Expire entries this many seconds of simulated time after they were written, as the
    /// engine's Options::with_ttl: merges drop them and tables holding nothing else go whole.
    /// Needs --timed, whose ingest moves the clock. Space amplification still divides by the
    /// workload's live keys, expired ones included, so it reads low. Default: none.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = count_arg)]
    ttl: Option<u64>,
    /// With --ttl: rewrite a table once an entry of it expired this many seconds ago, as the
    /// engine's Options::with_periodic_compaction. Default: none.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = count_arg)]
    periodic_compaction: Option<u64>,
    /// Print JSON (one object for one policy, an array for several) instead of a table.
    #[arg(long)]
    json: bool,
    /// Timeline samples kept in the JSON output (one per flush before thinning).
    #[arg(long, default_value_t = 200, allow_negative_numbers = true, value_parser = usize_arg)]
    timeline_points: usize,
    /// Write the full per-flush timeline of every policy as CSV to this file (its directory must
    /// exist).
    #[arg(long)]
    timeline_csv: Option<std::path::PathBuf>,
    /// Write a job log per policy into this directory (created if missing): one CSV row per
    /// flush and plan, in the format and with the file names of `strata bench --job-log`.
    #[arg(long)]
    job_log: Option<std::path::PathBuf>,
    /// Cut each table into data blocks of this size, as the engine does, so the report counts
    /// the data blocks written into each level (`blocks_written_per_level` in the JSON).
    /// RocksDB: block_size. Default: off. [SIZE: 4K = 4KB = 4KiB, any case]
    #[arg(long, value_name = "SIZE", value_parser = size_arg, allow_hyphen_values = true)]
    block_size: Option<u64>,
    /// Run a block cache of this size on the workload's point lookups and scans, each finding
    /// its keys where the simulated tree holds them, and report its hits (`read_cache` in the
    /// JSON): what a memory of this size would serve of the reads, out of cache. Not with
    /// --scale. Default: off. [SIZE]
    #[arg(long, value_name = "SIZE", value_parser = size_arg, allow_hyphen_values = true)]
    read_cache: Option<u64>,
    /// Simulate the engine's format: tables and data blocks (of --block-size, default 4KiB) sized
    /// by the engine's own table encoder, the memtable's per-entry overhead counted in the
    /// buffer, tombstones dropped by the engine's key-range rule; `strata bench` then writes
    /// the same tables. Slower. Default: raw key and value bytes.
    #[arg(long)]
    engine_format: bool,
    /// With --engine-format: start every data block on a 4 KiB page, padded, as the engine's
    /// Options::with_block_align does; the padding counts in the bytes written and stored.
    /// RocksDB: block_align. Default: off.
    #[arg(long)]
    block_align: bool,
    /// Scale mode: keep at most KEYS keys. Past them the simulator keeps one key in 2, 4, ...
    /// (chosen by a hash of the key), each standing for that many entries, so a tree of billions
    /// of entries runs in fixed memory (docs/scale.md). `--scale` alone: 4,194,304 keys
    /// (32 MiB). Not with --block-size or --engine-format. Default: off, every key kept.
    #[arg(long, value_name = "KEYS", num_args = 0..=1, value_parser = count_arg)]
    scale: Option<Option<u64>>,
    /// Put the tree on a simulated SSD of this many bytes: a page-mapped FTL with garbage
    /// collection replays every table and WAL the simulation writes and deletes, and the report
    /// adds GC write amplification and total WA (= WA × GC WA). [SIZE: 4K = 4KB = 4KiB]
    #[arg(long, value_name = "SIZE", value_parser = size_arg, allow_hyphen_values = true)]
    ssd: Option<u64>,
    /// --ssd: the share of the flash hidden from the host, 0 to 1.
    #[arg(long, default_value_t = 0.07, allow_negative_numbers = true)]
    over_provisioning: f64,
    /// --ssd: bytes of one erase block (a superblock across the dies). [SIZE]
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = size_arg, allow_hyphen_values = true)]
    erase_block: u64,
    /// --ssd: bytes of one mapping page (LSM files are written whole, so coarse pages change
    /// little and keep a terabyte's map small). [SIZE]
    #[arg(long, value_name = "SIZE", default_value = "64KiB", value_parser = size_arg, allow_hyphen_values = true)]
    ftl_page: u64,
    /// --ssd: how GC picks the block to clean: greedy (fewest valid pages) or cost-benefit.
    #[arg(long, default_value = "greedy", value_parser = ["greedy", "cost-benefit"])]
    gc_victim: String,
    /// --ssd: write the device's timelines into this directory (created if missing):
    /// ssd-timeline.csv (policy, host bytes, GC WA so far and over the interval, utilization)
    /// and the charts gc-write-amp.svg and utilization.svg, in `strata bench`'s report style.
    #[arg(long, value_name = "DIR")]
    ssd_report: Option<std::path::PathBuf>,
    /// Replay a device file trace (`strata bench --file-trace`) on the --ssd device instead of
    /// simulating a workload, and report its GC write amplification.
    #[arg(long, value_name = "FILE")]
    replay_trace: Option<std::path::PathBuf>,
}

impl SimArgs {
    /// Checks the simulator's own flags (the workload's are checked when it is built).
    fn check(&self) -> Result<()> {
        self.policy_flags.check()?;
        if let Some(b) = self.block_size {
            checks::size_at_least("--block-size", b, 1)?;
        }
        checks::size_at_least("--ingest-rate", self.ingest_rate, 1)?;
        checks::size_at_least("--compaction-rate", self.compaction_rate, 1)?;
        checks::at_least("--jobs", self.jobs as u64, 1)?;
        if let Some(path) = &self.timeline_csv {
            checks::creatable_file("--timeline-csv", path)?;
        }
        if let Some(dir) = &self.job_log {
            checks::writable_dir("--job-log", dir)?;
        }
        if let Some(ttl) = self.ttl {
            checks::at_least("--ttl", ttl, 1)?;
            if !self.timed {
                anyhow::bail!(
                    "--ttl needs --timed: a synchronous simulation has no clock to age entries by"
                );
            }
        }
        if self.periodic_compaction.is_some() && self.ttl.is_none() {
            anyhow::bail!("--periodic-compaction reclaims what --ttl expired: it needs --ttl");
        }
        if self.block_align && !self.engine_format {
            anyhow::bail!("--block-align needs --engine-format, which sizes the engine's blocks");
        }
        if let Some(keys) = self.scale_keys() {
            checks::at_least("--scale", keys, 1)?;
            if self.read_cache.is_some() {
                anyhow::bail!(
                    "--read-cache finds each read's key in the tables, which --scale keeps a \
                     sample of: drop one of them"
                );
            }
            if self.block_size.is_some() || self.engine_format {
                anyhow::bail!(
                    "--scale sizes tables by key and value bytes; drop --block-size and \
                     --engine-format, which need every entry"
                );
            }
        }
        if self.ssd.is_some() {
            // The model checks the rest and names the setting.
            self.ftl_config()?;
        }
        if let Some(dir) = &self.ssd_report {
            if self.ssd.is_none() {
                anyhow::bail!("--ssd-report needs a device: --ssd SIZE");
            }
            checks::writable_dir("--ssd-report", dir)?;
        }
        Ok(())
    }

    /// Scale mode's key budget: `--scale KEYS`, or the default for `--scale` alone.
    fn scale_keys(&self) -> Option<u64> {
        self.scale.map(|keys| keys.unwrap_or(DEFAULT_SCALE_KEYS))
    }

    /// The simulated device, if `--ssd` asks for one.
    fn ftl_config(&self) -> Result<Option<FtlConfig>> {
        let Some(capacity) = self.ssd else {
            return Ok(None);
        };
        let config = FtlConfig {
            capacity,
            over_provisioning: self.over_provisioning,
            erase_block: self.erase_block,
            page_size: self.ftl_page,
            gc_free_blocks: 2,
            victim: if self.gc_victim == "cost-benefit" {
                VictimPolicy::CostBenefit
            } else {
                VictimPolicy::Greedy
            },
        };
        Ftl::new(config.clone()).map_err(|e| anyhow::anyhow!("--ssd: {e}"))?;
        Ok(Some(config))
    }
}

/// The `--ssd-report` files: the timelines as CSV and two charts.
fn write_ssd_report(dir: &std::path::Path, devices: &[(String, &FtlReport)]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut csv =
        String::from("policy,host_bytes,gc_write_amp,interval_gc_write_amp,utilization\n");
    for (label, ssd) in devices {
        for s in &ssd.timeline {
            csv.push_str(&format!(
                "{label},{},{:.4},{:.4},{:.4}\n",
                s.host_bytes, s.gc_write_amp, s.interval_gc_write_amp, s.utilization
            ));
        }
    }
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text)
            .with_context(|| format!("writing {}", dir.join(name).display()))
    };
    write("ssd-timeline.csv", &csv)?;
    /// A timeline value to chart.
    type Metric = fn(&strata_sim::ftl::FtlSample) -> f64;
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let series = |value: Metric| -> Vec<(String, Vec<(f64, f64)>)> {
        devices
            .iter()
            .map(|(label, ssd)| {
                (
                    label.clone(),
                    ssd.timeline
                        .iter()
                        .map(|s| (gib(s.host_bytes), value(s)))
                        .collect(),
                )
            })
            .collect()
    };
    let charts: [(&str, &str, &str, Metric); 2] = [
        (
            "gc-write-amp.svg",
            "GC write amplification over each erase block of host writes",
            "NAND ÷ host bytes",
            |s| s.interval_gc_write_amp,
        ),
        (
            "utilization.svg",
            "Live bytes ÷ the device's logical bytes",
            "utilization",
            |s| s.utilization,
        ),
    ];
    for (file, caption, y_desc, value) in charts {
        let svg =
            strata_bench::report::series_svg(caption, "host GiB written", y_desc, &series(value))?;
        write(file, &svg)?;
    }
    Ok(())
}

/// `strata sim --replay-trace FILE --ssd SIZE`: the trace on the device, and what GC added.
fn replay_trace(args: &SimArgs, path: &std::path::Path) -> Result<()> {
    let Some(device) = args.ftl_config()? else {
        anyhow::bail!("--replay-trace needs a device: --ssd SIZE");
    };
    let file = std::fs::File::open(path)
        .with_context(|| format!("--replay-trace: opening {}", path.display()))?;
    let mut recorder = FtlRecorder::new(Ftl::new(device)?);
    let start = Instant::now();
    replay_events(std::io::BufReader::new(file), |event| recorder.apply(event))
        .with_context(|| format!("--replay-trace {}", path.display()))?;
    let mut report = recorder.finish()?;
    if args.json {
        report.timeline = thin(report.timeline, args.timeline_points);
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} on SSD {} ({:.0}% spare, {} blocks, {} GC): GC WA {:.3}, {} written by the host, {} programmed, {} erases, utilization {:.0}% at the end ({:.1}s)",
            path.display(),
            human_bytes(report.capacity),
            report.over_provisioning * 100.0,
            human_bytes(report.erase_block),
            report.victim,
            report.gc_write_amp,
            human_bytes(report.host_bytes),
            human_bytes(report.nand_bytes),
            report.erases,
            report.utilization * 100.0,
            start.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// Every k-th of `samples`, so at most about `points` remain (the last always).
fn thin<T: Copy>(samples: Vec<T>, points: usize) -> Vec<T> {
    if points == 0 || samples.len() <= points {
        return samples;
    }
    let step = samples.len().div_ceil(points);
    let last = samples.last().copied();
    let mut out: Vec<T> = samples.into_iter().step_by(step).collect();
    if let Some(last) = last {
        out.push(last);
    }
    out
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

/// The simulator's write buffer when `--write-buffer-size` is not given: small, so that the
/// default workload makes hundreds of flushes and a tree of several levels.
const DEFAULT_WRITE_BUFFER_SIZE: u64 = 4 << 20;

/// Runs `strata sim`.
pub fn run(args: SimArgs) -> Result<()> {
    if args.list_policies {
        print!("{}", registry::describe_policies());
        return Ok(());
    }
    if args.workload.list_if_asked() {
        return Ok(());
    }
    // Everything is checked before the first simulation: flags, the workload, every policy.
    args.check()?;
    if let Some(trace) = &args.replay_trace {
        return replay_trace(&args, trace);
    }
    let workload = args.workload.spec("fillunique", 10_000_000, None)?;
    OpStream::new(&workload, args.workload.seed).map_err(|e| {
        anyhow::anyhow!(
            "--workload {}: the simulator cannot replay it: {e}",
            args.workload.workload.as_deref().unwrap_or(&workload.name)
        )
    })?;
    let ingest_bytes = ingest_bytes(&workload);
    let (key_size, value_size) = (workload.key_size as u64, workload.value_size as u64);
    let buffer_size = args
        .policy_flags
        .write_buffer_size
        .unwrap_or(DEFAULT_WRITE_BUFFER_SIZE);
    let (list, autopilot) = without_autopilot(args.policy.as_deref());
    let mut chosen = choose_policies(
        list.as_deref(),
        &workload,
        &args.policy_options,
        &args.policy_flags,
    )?;
    if chosen.labels.is_empty() && !autopilot {
        anyhow::bail!("--policies names no policy; nothing to simulate");
    }
    // The autopilot starts from its start policy, which takes the flags like any other.
    let autopilot = match autopilot {
        true => {
            let start = choose_policies(
                Some(AUTOPILOT_START),
                &workload,
                &args.policy_options,
                &args.policy_flags,
            )?;
            chosen.labels.extend(start.labels);
            let calibration = match &args.calibration {
                Some(path) => Calibration::load(path).context("--calibration")?,
                None => Calibration::assumed(),
            };
            Some(run_autopilot(calibration, buffer_size, None))
        }
        false => None,
    };
    chosen.warn_unused_flags();
    // Each policy built once, with the facts of this run its model must agree with.
    let facts = [
        ("write_buffer_size", buffer_size.to_string()),
        ("expected_data_size", ingest_bytes.max(1).to_string()),
    ];
    let policies = (0..chosen.labels.len())
        .map(|i| chosen.build(i, &facts).map(|(_, policy)| policy))
        .collect::<Result<Vec<_>>>()?;
    warn_if_smaller_than_a_buffer(&workload, buffer_size);
    let timing = if args.timed {
        Timing::Timed {
            ingest_bytes_per_sec: args.ingest_rate as f64,
            job_bytes_per_sec: args.compaction_rate as f64,
            max_jobs: args.jobs,
            reserved_jobs: args.reserved_jobs,
        }
    } else {
        Timing::Synchronous
    };
    let config = SimConfig {
        key_size,
        value_size,
        buffer_size,
        timing,
        trace: args.job_log.is_some(),
        block_size: args.block_size,
        value_compression_ratio: workload.compression_ratio,
        ttl_seconds: args.ttl,
        periodic_compaction_seconds: args.periodic_compaction,
        read_cache_bytes: args.read_cache,
        ..SimConfig::default()
    };
    // Tables a plan compresses (`compression_per_level`) shrink by what the engine's codecs
    // make of this workload's values.
    let config = SimConfig {
        scale_keys: args.scale_keys(),
        ..config
    }
    .with_measured_compression();
    let config = if args.engine_format {
        let block = args.block_size.unwrap_or(4096);
        config.with_engine_blocks(
            usize::try_from(block).unwrap_or(usize::MAX),
            args.block_align,
        )
    } else {
        config
    };
    // Job logs are named after the policies as chosen, before the flags and facts fill them,
    // as `strata bench` names its runs.
    let mut labels: Vec<String> = chosen.labels.iter().map(ToString::to_string).collect();
    if autopilot.is_some() {
        if let Some(last) = labels.last_mut() {
            *last = AUTOPILOT.to_string();
        }
    }
    if !args.json {
        println!(
            "workload {} ({} ops in {} phases), {}-byte keys, {}-byte values ({} ingested), buffer {}, {}",
            workload.name,
            workload.phases.iter().map(|p| p.ops).sum::<u64>(),
            workload.phases.len(),
            key_size,
            value_size,
            human_bytes(ingest_bytes),
            human_bytes(buffer_size),
            if args.timed { "timed" } else { "synchronous" }
        );
        if let Some(keys) = config.scale_keys {
            println!(
                "scale mode: at most {keys} keys kept (past them, one in 2, 4, ... chosen by hash)"
            );
        }
    }
    let mut reports = Vec::new();
    let count = labels.len();
    for (i, (policy, label)) in policies.into_iter().zip(&labels).enumerate() {
        let name = label;
        let used = PolicySpec::of(policy.as_ref());
        let start = Instant::now();
        let mut sim =
            Simulator::new(policy, config.clone()).with_context(|| format!("simulating {name}"))?;
        if let Some(options) = autopilot.as_ref().filter(|_| i + 1 == count) {
            sim = sim.with_autopilot(options.clone());
        }
        let mut report = match args.ftl_config()? {
            None => sim
                .run_workload(&workload, args.workload.seed)
                .with_context(|| format!("simulating {name}"))?,
            Some(device) => {
                let recorder = Arc::new(Mutex::new(FtlRecorder::new(Ftl::new(device)?)));
                let sink = Arc::clone(&recorder);
                let sim = sim.with_file_sink(move |event| {
                    if let Ok(mut r) = sink.lock() {
                        // A refused event stops the device; `finish` reports why.
                        let _ = r.apply(event);
                    }
                });
                let mut report = sim
                    .run_workload(&workload, args.workload.seed)
                    .with_context(|| format!("simulating {name}"))?;
                let recorder = Arc::try_unwrap(recorder)
                    .map_err(|_| anyhow::anyhow!("the device is still in use"))?
                    .into_inner()
                    .map_err(|_| anyhow::anyhow!("the device model panicked"))?;
                // A device too small for the policy's space is a result (Spooky's paper saw
                // such runs crash), not an error of the command.
                match recorder.finish() {
                    Ok(ssd) => report.ssd = Some(ssd),
                    Err(e) => warn(&format!("{name} on the simulated SSD: {e}")),
                }
                report
            }
        };
        report.wall_seconds = start.elapsed().as_secs_f64();
        if !report.autopilot.is_empty() || label == AUTOPILOT {
            // Named by the run, not by the policy it ended with.
            report.policy = AUTOPILOT.to_string();
        }
        if let Some(dir) = &args.job_log {
            let jobs: Vec<JobRecord> = std::mem::take(&mut report.trace)
                .iter()
                .map(TraceEvent::record)
                .collect();
            write_job_log(&dir.join(job_log_file_name(label)), label, &jobs)
                .context("--job-log")?;
        }
        if !args.json {
            println!(
                "\n{name}: WA {:.2}, peak SA {:.2}, {:.1}s; final shape:",
                report.write_amp, report.peak_space_amp, report.wall_seconds
            );
            println!("  ran as {used}");
            for d in &report.autopilot {
                if d.action != Action::Keep {
                    println!("  autopilot: {}", d.summary());
                }
            }
            print!("{}", report.shape());
            if let Some(ssd) = &report.ssd {
                println!(
                    "  SSD {} ({:.0}% spare, {} blocks, {} GC): GC WA {:.2}, total WA {:.2}, {} written by the host, {} programmed, utilization {:.0}% at the end",
                    human_bytes(ssd.capacity),
                    ssd.over_provisioning * 100.0,
                    human_bytes(ssd.erase_block),
                    ssd.victim,
                    ssd.gc_write_amp,
                    report.write_amp * ssd.gc_write_amp,
                    human_bytes(ssd.host_bytes),
                    human_bytes(ssd.nand_bytes),
                    ssd.utilization * 100.0
                );
            }
        }
        reports.push(report);
    }
    if let Some(path) = &args.timeline_csv {
        write_timeline_csv(path, &reports)?;
    }
    if let Some(dir) = &args.ssd_report {
        let devices: Vec<(String, &FtlReport)> = labels
            .iter()
            .zip(&reports)
            .filter_map(|(label, r)| r.ssd.as_ref().map(|s| (label.clone(), s)))
            .collect();
        write_ssd_report(dir, &devices)?;
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
