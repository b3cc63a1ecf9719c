//! `strata advise`: which compaction policy, with which options, for a workload and an
//! objective. Three stages, cheapest first: the policies' closed-form cost models
//! (`strata_policy::model`), the simulator on the workload itself (the same operation stream
//! `strata bench` runs), and, if asked, short engine runs of the best few.

use crate::policies::{choose_policies, PolicyFlags};
use crate::workload_args::{size_arg, WorkloadArgs};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use strata_advise::measure::median;
use strata_advise::{
    estimate, simulated_memory_share, workload_like, Calibration, OperationMix, Regime,
    CALIBRATION_FILE,
};
use strata_bench::cgroup::Limit;
use strata_bench::engines::EngineSettings;
use strata_bench::{run_comparison, BenchConfig, RunLimits, StorageOptions};
use strata_engine::stats::LifetimeStats;
use strata_engine::{Db, Options};
use strata_policy::model::{ModelEstimate, ModelInput};
use strata_policy::{build_policy, registry, PolicySpec};
use strata_sim::{human_bytes, SimConfig, SimReport, Simulator};
use strata_workload::WorkloadSpec;

/// What to optimize.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Objective {
    /// Operations per second, by the cost model below (and by the engine with --verify).
    Throughput,
    /// Bytes written to tables per user byte.
    WriteAmp,
    /// Peak table bytes per live byte.
    SpaceAmp,
    /// Modelled I/Os per point lookup (and runs per range scan when the workload scans).
    ReadCost,
}

/// Options of `strata advise`.
#[derive(Args, Debug)]
pub struct AdviseArgs {
    /// The workload (shared with `strata bench` and `strata sim`).
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Take the workload from a database's recorded statistics instead (operation mix, key
    /// and value sizes, skew, live keys; `strata inspect DIR` shows them).
    #[arg(long, value_name = "DIR")]
    db: Option<PathBuf>,
    /// With --db: the keyspace whose recorded workload to advise on (`strata inspect DIR`
    /// lists them; each records its own).
    #[arg(long, default_value = "default", requires = "db")]
    keyspace: String,
    /// What to optimize.
    #[arg(long, value_enum, default_value_t = Objective::Throughput)]
    objective: Objective,
    /// Leave out configurations whose simulated peak space amplification is above this.
    #[arg(long, allow_negative_numbers = true)]
    max_space_amp: Option<f64>,
    /// Leave out configurations whose simulated write amplification is above this.
    #[arg(long, allow_negative_numbers = true)]
    max_write_amp: Option<f64>,
    /// Memory for write buffers and Bloom filters; configurations that need more are left
    /// out, and filters of 10, 6 and 3 bits per key are tried. With --device-read-us, also what
    /// is left of it for caching data (out of cache). [SIZE: 4K = 4KB = 4KiB]
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    max_memory: Option<u64>,
    /// The out-of-cache regime: microseconds the device takes for a block read that misses
    /// memory (its random-read time at queue depth 1; `strata bench --device-probe` measures
    /// it). Needs --max-memory. The throughput model then charges a block read this, except
    /// for the share of reads the memory left over by buffers and filters holds of the data (its
    /// size over the data's, at the simulated peak space amplification), which cost
    /// --block-read-us; and --verify runs each configuration under --memory-limit of
    /// --max-memory.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    device_read_us: Option<f64>,
    /// Tables are read and written with direct I/O (as `strata bench --direct-io`), in the
    /// --verify runs and in the model: out of cache the page cache then holds no tables, so the
    /// share of reads served from memory is the block cache's (--block-cache), not all the
    /// memory left.
    #[arg(long)]
    direct_io: bool,
    /// Block cache of the --verify runs (as `strata bench --block-cache`). With --max-memory it
    /// must fit beside the two write buffers. [SIZE: 4K = 4KB = 4KiB]
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "32MiB")]
    block_cache: u64,
    /// Policies to consider: comma-separated specifications or "all". Default: all.
    #[arg(long = "policies")]
    policies: Option<String>,
    /// Size ratios tried for policies that have one (and whose specification does not set it).
    #[arg(long, value_delimiter = ',', default_value = "4,10")]
    size_ratios: Vec<f64>,
    /// Write buffer size of every configuration. [SIZE]
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "4MiB")]
    write_buffer_size: u64,
    /// Simulate in scale mode (`strata sim --scale`): for workloads of hundreds of millions of
    /// entries.
    #[arg(long)]
    scale: bool,
    /// Run the best N configurations on the engine (`strata bench`, same workload) and rank
    /// those by what they measure. A configuration the estimate cannot tell from a better one
    /// of the same policy (other filters on a workload without reads) is passed over.
    #[arg(long, default_value_t = 0)]
    verify: usize,
    /// Runs of each --verify configuration, in rounds that each run every configuration once
    /// (in an order rotated by one per round); a configuration ranks by the median of its
    /// runs. One run of a phase of a few seconds moves by up to 1.4× out of cache, more than
    /// the candidates the model ranks together differ: 3 is the bench's convention. A
    /// configuration that fails any run (killed by the memory limit, an engine error) is left
    /// out.
    #[arg(long, default_value_t = 1, value_name = "N")]
    verify_rounds: usize,
    /// The --verify runs wait after each phase that wrote until its flushes and merges are done,
    /// and count the wait in the phase (as `strata bench --settle`): the measured phase then
    /// runs on the tree the load settled into, the steady state the model estimates, instead of
    /// beside the compaction debt the load left behind.
    #[arg(long)]
    settle: bool,
    /// The calibration that prices the throughput model (`strata calibrate` writes it). Default:
    /// CALIBRATION.json in --db's directory if there is one, else round figures
    /// (`strata_advise::Calibration::assumed`), which the output says were used.
    #[arg(long, value_name = "FILE")]
    calibration: Option<PathBuf>,
    /// Rows of the ranking to print.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// One configuration and what each stage said about it.
#[derive(Clone, Debug, Serialize)]
struct Candidate {
    /// The policy's name and the options advise chose (the grid's): for the table.
    label: String,
    /// The policy specification, every option the configuration sets.
    spec: String,
    /// Bloom bits per key.
    bloom_bits_per_key: f64,
    /// The closed-form model's estimate, if the policy has one.
    model: Option<ModelEstimate>,
    /// Simulated write amplification, peak space amplification, I/Os per lookup and runs per
    /// range scan.
    write_amp: f64,
    /// Simulated peak space amplification.
    space_amp: f64,
    /// Simulated I/Os per point lookup, averaged over the run.
    lookup_cost: f64,
    /// Sorted runs a range scan touches at the end.
    scan_runs: u64,
    /// Estimated operations per second (the throughput model).
    estimated_ops_per_sec: f64,
    /// Out of cache: the share of block reads the model serves from memory (the simulated block
    /// cache's hits on the workload's reads where it ran, else memory over the data).
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_share: Option<f64>,
    /// Measured operations per second (--verify): the median of its runs.
    measured_ops_per_sec: Option<f64>,
    /// Operations per second of each --verify run, in the order they ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    measured_runs: Vec<f64>,
    /// Measured write amplification (--verify).
    measured_write_amp: Option<f64>,
    /// The objective's value (lower is better; throughput is negated).
    score: f64,
    /// Why it was left out, if it was.
    excluded: Option<String>,
}

/// What `strata advise` prints as JSON: the candidates ranked, and the pick.
#[derive(Debug, Serialize)]
pub struct Advice {
    workload: String,
    objective: Objective,
    mix: OperationMix,
    /// Whether the calibration was measured (`strata calibrate`) or assumed.
    calibrated: bool,
    candidates: Vec<Candidate>,
    pick: Option<Pick>,
}

/// The chosen configuration, ready to use.
#[derive(Debug, Serialize)]
struct Pick {
    spec: String,
    reason: String,
    rust: String,
    bench_flags: String,
}

/// Runs `strata advise`.
pub fn run(args: AdviseArgs) -> Result<()> {
    if args.workload.list_if_asked() {
        return Ok(());
    }
    let advice = advise(&args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&advice)?);
    } else {
        print!("{}", text(&advice, args.top));
    }
    if advice.pick.is_none() {
        bail!("no configuration meets the constraints");
    }
    Ok(())
}

/// The advice `args` ask for: every candidate modelled, simulated and ranked (and the best
/// verified on the engine with `--verify`), and the pick, if one meets the constraints.
pub fn advise(args: &AdviseArgs) -> Result<Advice> {
    for (flag, value) in [
        ("--max-space-amp", args.max_space_amp),
        ("--max-write-amp", args.max_write_amp),
    ] {
        if let Some(v) = value {
            crate::checks::above(flag, v, 0.0)?;
        }
    }
    if let Some(us) = args.device_read_us {
        crate::checks::above("--device-read-us", us, 0.0)?;
        if args.max_memory.is_none() {
            bail!(
                "--device-read-us models reads that miss memory, so it needs the memory: give \
                 --max-memory too"
            );
        }
    }
    if let (Some(memory), Some(_), true) = (args.max_memory, args.device_read_us, args.verify > 0) {
        if args.block_cache + 2 * args.write_buffer_size > memory {
            bail!(
                "--block-cache {} and two write buffers of {} do not fit in --max-memory {}: the \
                 verify runs would be killed by their memory limit; lower --block-cache",
                strata_meta::format_size(args.block_cache),
                strata_meta::format_size(args.write_buffer_size),
                strata_meta::format_size(memory)
            );
        }
    }
    for &t in &args.size_ratios {
        crate::checks::above("--size-ratios", t, 1.0)?;
    }
    if args.verify_rounds == 0 {
        bail!("--verify-rounds must be at least 1: each verified configuration runs that often");
    }
    let spec = match &args.db {
        Some(dir) => workload_of_database(dir, &args.keyspace, &args.workload)?,
        None => args
            .workload
            .spec("ycsb-a", args.workload.entries.unwrap_or(1_000_000), None)?,
    };
    let mix = mix_of(&spec);
    let calibration = calibration_of(args)?;
    let entry_bytes = (spec.key_size + spec.value_size) as u64;
    let keys = spec
        .phases
        .iter()
        .map(|p| (p.ops as f64 * p.mix.insert) as u64)
        .sum::<u64>()
        .max(1);
    // Every configuration advise tries cuts its tables at the write buffer size (part of its
    // grid, as the size ratios and Bloom bits below are), so that small buffers still give
    // trees of many tables.
    let grid = PolicyFlags {
        target_file_size: Some(args.write_buffer_size),
        ..PolicyFlags::default()
    };
    let facts = [
        ("write_buffer_size", args.write_buffer_size.to_string()),
        ("expected_data_size", (keys * entry_bytes).to_string()),
    ];
    let chosen = choose_policies(args.policies.as_deref(), &spec, &[], &grid)?;
    let bases = (0..chosen.labels.len())
        .map(|i| chosen.spec(i, &facts))
        .collect::<Result<Vec<_>>>()?;
    let blooms: &[f64] = if args.max_memory.is_some() {
        &[10.0, 6.0, 3.0]
    } else {
        &[10.0]
    };
    let mut specs: Vec<(PolicySpec, f64, String)> = Vec::new();
    for base in &bases {
        let ratios: Vec<Option<f64>> =
            if has_option(&base.name, "size_ratio") && !base.is_set("size_ratio") {
                args.size_ratios.iter().copied().map(Some).collect()
            } else {
                vec![None]
            };
        for ratio in ratios {
            for &bloom in blooms {
                let mut s = base.clone();
                let mut label = base.name.clone();
                if let Some(t) = ratio {
                    s = s.with("size_ratio", t);
                    label.push_str(&format!(" T={t}"));
                }
                if has_option(&s.name, "bloom_bits_per_key") && !base.is_set("bloom_bits_per_key") {
                    s = s.with("bloom_bits_per_key", bloom);
                    if blooms.len() > 1 {
                        label.push_str(&format!(" bloom={bloom}"));
                    }
                }
                specs.push((s, bloom, label));
            }
        }
    }
    let input = ModelInput {
        data_bytes: keys * entry_bytes,
        buffer_bytes: args.write_buffer_size,
    };
    let mut candidates = Vec::with_capacity(specs.len());
    let progress = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(specs.len() as u64).with_style(
            ProgressStyle::with_template("simulating {pos}/{len} {bar:30} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        )
    };
    for (s, bloom, label) in &specs {
        let policy = build_policy(s).with_context(|| format!("the policy {s}"))?;
        progress.set_message(label.clone());
        let config = SimConfig {
            key_size: spec.key_size as u64,
            value_size: spec.value_size as u64,
            buffer_size: args.write_buffer_size,
            scale_keys: args.scale.then_some(strata_sim::DEFAULT_SCALE_KEYS),
            read_cache_bytes: memory_for_blocks(args, *bloom, keys),
            ..SimConfig::default()
        };
        let model = policy.cost_model(&input);
        let report = Simulator::run(policy, config, &spec, args.workload.seed)
            .with_context(|| format!("simulating {s}"))?;
        let data = DataShape { keys, entry_bytes };
        let priced = (&mix, &calibration);
        let mut c = candidate(s.to_string(), *bloom, model, &report, args, priced, data);
        c.label = label.clone();
        c.excluded = exclusion(&c, args, keys);
        candidates.push(c);
        progress.inc(1);
    }
    progress.finish_and_clear();
    rank(&mut candidates);
    if args.verify > 0 {
        verify(&mut candidates, &spec, args, &mix)?;
        rank(&mut candidates);
    }
    let pick = candidates
        .iter()
        .find(|c| c.excluded.is_none())
        .map(|c| pick_of(c, &candidates, args));
    Ok(Advice {
        workload: spec.name.clone(),
        objective: args.objective,
        mix,
        calibrated: calibration.is_measured(),
        candidates,
        pick,
    })
}

fn has_option(policy: &str, option: &str) -> bool {
    registry::lookup(policy).is_ok_and(|r| r.options.iter().any(|o| o.name == option))
}

/// The share of puts and deletes, point reads, and scans (short and long) among the operations
/// of the workload's last measured phase (its last phase where none is measured), and the mean
/// scan length. That phase is the one `strata bench` reports operations per
/// second for, and so what `--verify` compares: a load of many entries before a read-mostly
/// phase must not make the workload look write-bound.
fn mix_of(spec: &WorkloadSpec) -> OperationMix {
    let reported = spec
        .phases
        .iter()
        .rev()
        .find(|p| p.measured)
        .or(spec.phases.last());
    let Some(p) = reported else {
        return OperationMix::default();
    };
    // Weighted by the phase's operations, so that a phase bounded only by time (0 operations)
    // counts as no operations at all.
    let ops = p.ops as f64;
    let m = &p.mix;
    let writes = ops * (m.insert + m.update + m.delete + m.rmw);
    let reads = ops * (m.read + m.rmw);
    let scans = ops * (m.scan + m.long_scan);
    let scanned = ops * (m.scan * p.scan_length as f64 + m.long_scan * p.long_scan_length as f64);
    let total = ops * (m.insert + m.update + m.delete + m.rmw + m.read + m.scan + m.long_scan);
    let total = f64::max(total, 1.0);
    OperationMix {
        writes: writes / total,
        reads: reads / total,
        scans: scans / total,
        scan_length: scanned / f64::max(scans, 1.0),
    }
}

/// The data a workload leaves: its keys and their bytes each.
#[derive(Clone, Copy, Debug)]
struct DataShape {
    keys: u64,
    entry_bytes: u64,
}

/// Memory a configuration needs for two write buffers (the active one and one being flushed)
/// and every key's filter bits.
fn memory_needed(args: &AdviseArgs, bloom: f64, keys: u64) -> u64 {
    2 * args.write_buffer_size + (bloom * keys as f64 / 8.0) as u64
}

/// Out of cache, the share of block reads the model serves from memory: the memory left beside
/// buffers and filters (with `--direct-io`, the block cache within it) over the data at peak
/// space amplification `space_amp`. `None` in the cache.
fn memory_share(args: &AdviseArgs, bloom: f64, data: DataShape, space_amp: f64) -> Option<f64> {
    let left = memory_for_blocks(args, bloom, data.keys)? as f64;
    let stored = data.keys as f64 * data.entry_bytes as f64 * space_amp.max(1.0);
    Some((left / stored.max(1.0)).min(1.0))
}

/// Out of cache, the bytes of memory that hold data blocks: what is left beside buffers and
/// filters, and with `--direct-io` the block cache within it. The simulator runs a cache of this
/// size on the workload's reads; `None` in the cache.
fn memory_for_blocks(args: &AdviseArgs, bloom: f64, keys: u64) -> Option<u64> {
    let (memory, _) = args.max_memory.zip(args.device_read_us)?;
    let left = memory.saturating_sub(memory_needed(args, bloom, keys));
    // Direct I/O keeps tables out of the page cache: only the block cache holds them.
    Some(if args.direct_io {
        left.min(args.block_cache)
    } else {
        left
    })
}

/// The calibration `args` name, or the database's, or the assumed one; with `--device-read-us`
/// overriding the device's read time.
fn calibration_of(args: &AdviseArgs) -> Result<Calibration> {
    let mut calibration = match (&args.calibration, &args.db) {
        (Some(path), _) => Calibration::load(path).context("--calibration")?,
        (None, Some(dir)) if dir.join(CALIBRATION_FILE).exists() => {
            Calibration::load(dir).context("--db's calibration")?
        }
        _ => Calibration::assumed(),
    };
    if let Some(us) = args.device_read_us {
        calibration
            .device
            .get_or_insert_with(Calibration::assumed_device)
            .read_latency_us = us;
    }
    Ok(calibration)
}

fn candidate(
    spec: String,
    bloom: f64,
    model: Option<ModelEstimate>,
    r: &SimReport,
    args: &AdviseArgs,
    (mix, calibration): (&OperationMix, &Calibration),
    data: DataShape,
) -> Candidate {
    let uniform_share = memory_share(args, bloom, data, r.peak_space_amp);
    let regime = uniform_share.map_or(Regime::Cached, |memory_share| Regime::OutOfCache {
        memory_share,
    });
    let estimated = estimate(r, mix, data.entry_bytes, calibration, regime, 1.0);
    // Shown: what the simulated cache held of the workload's reads where it ran.
    let memory_share = uniform_share.map(|u| simulated_memory_share(r).unwrap_or(u));
    let mut c = Candidate {
        label: spec.clone(),
        spec,
        bloom_bits_per_key: bloom,
        model,
        write_amp: r.write_amp,
        space_amp: r.peak_space_amp,
        lookup_cost: r.avg_lookup_cost,
        scan_runs: r.range_scan_runs,
        estimated_ops_per_sec: estimated.ops_per_sec(),
        memory_share,
        measured_ops_per_sec: None,
        measured_runs: Vec::new(),
        measured_write_amp: None,
        score: 0.0,
        excluded: None,
    };
    c.score = score(&c, args.objective, mix);
    c
}

fn score(c: &Candidate, objective: Objective, mix: &OperationMix) -> f64 {
    match objective {
        Objective::Throughput => -c.measured_ops_per_sec.unwrap_or(c.estimated_ops_per_sec),
        Objective::WriteAmp => c.measured_write_amp.unwrap_or(c.write_amp),
        Objective::SpaceAmp => c.space_amp,
        // I/Os per lookup and runs per scan, weighed by the workload's shares of each.
        Objective::ReadCost => {
            let (reads, scans) = (mix.reads, mix.scans);
            if reads + scans > 0.0 {
                (c.lookup_cost * reads + c.scan_runs as f64 * scans) / (reads + scans)
            } else {
                c.lookup_cost
            }
        }
    }
}

fn exclusion(c: &Candidate, args: &AdviseArgs, keys: u64) -> Option<String> {
    if let Some(max) = args.max_space_amp.filter(|&m| c.space_amp > m) {
        return Some(format!(
            "peak space amplification {:.2} > {max}",
            c.space_amp
        ));
    }
    if let Some(max) = args.max_write_amp.filter(|&m| c.write_amp > m) {
        return Some(format!("write amplification {:.2} > {max}", c.write_amp));
    }
    if let Some(max) = args.max_memory {
        let need = memory_needed(args, c.bloom_bits_per_key, keys);
        if need > max {
            return Some(format!(
                "needs {} of buffers and filters",
                human_bytes(need)
            ));
        }
    }
    None
}

/// Best first: measured configurations before estimated ones, excluded ones last.
fn rank(candidates: &mut [Candidate]) {
    candidates.sort_by(|a, b| {
        (
            a.excluded.is_some(),
            a.measured_ops_per_sec.is_none() && a.measured_write_amp.is_none(),
        )
            .cmp(&(
                b.excluded.is_some(),
                b.measured_ops_per_sec.is_none() && b.measured_write_amp.is_none(),
            ))
            .then(a.score.total_cmp(&b.score))
    });
}

/// Runs the best `args.verify` configurations on the engine and records what they measure.
fn verify(
    candidates: &mut [Candidate],
    spec: &WorkloadSpec,
    args: &AdviseArgs,
    mix: &OperationMix,
) -> Result<()> {
    // The best N that the estimate tells apart: a variant of a chosen policy with the same
    // score (filters on a workload without reads) would measure the same configuration again.
    let mut chosen: Vec<usize> = Vec::with_capacity(args.verify);
    for (i, c) in candidates.iter().enumerate() {
        if chosen.len() == args.verify {
            break;
        }
        let tie = chosen.iter().any(|&j| {
            let other = &candidates[j];
            policy_name(&other.spec) == policy_name(&c.spec)
                && (other.score - c.score).abs() <= 1e-9 * other.score.abs().max(1.0)
        });
        if c.excluded.is_none() && !tie {
            chosen.push(i);
        }
    }
    // Out of cache, the runs get the memory the model gave them, page cache included.
    let limits = match (args.max_memory, args.device_read_us) {
        (Some(memory), Some(_)) => Some(
            RunLimits::discover(&[Limit::Memory(memory)])
                .context("--device-read-us: the verify runs' memory limit")?,
        ),
        _ => None,
    };
    let mut config = BenchConfig {
        workload: spec.clone(),
        policies: Vec::new(),
        peers: Vec::new(),
        baseline: None,
        settings: EngineSettings {
            write_buffer_size: args.write_buffer_size,
            target_file_size: Some(args.write_buffer_size),
            direct_io: args.direct_io,
            block_cache: args.block_cache,
            ..EngineSettings::default()
        },
        dir: None,
        seed: args.workload.seed,
        progress: !args.json,
        job_log: None,
        file_trace: None,
        // Each configuration in a process of its own, as `strata bench` runs them (when this
        // program can start itself), so no run inherits another's heap or caches.
        isolate: crate::bench::own_process_per_run()?,
        bandwidth_probe_bytes: 0,
        storage: StorageOptions {
            limits,
            ..StorageOptions::default()
        },
        settle_phases: args.settle,
    };
    let specs: Vec<String> = chosen.iter().map(|&i| candidates[i].spec.clone()).collect();
    let mut runs = VerifyRuns::default();
    for round in 0..args.verify_rounds {
        // Rotated each round, so that no configuration always runs first or last.
        config.policies = specs.clone();
        config.policies.rotate_left(round % specs.len().max(1));
        let comparison = run_comparison(&config)
            .with_context(|| format!("verifying on the engine (round {})", round + 1))?;
        runs.add(&comparison);
    }
    runs.record(candidates, args.verify_rounds, args.objective, mix);
    // Said on standard error: the ranking stands, but the user should know what it stands on.
    for (label, share) in &runs.disturbed {
        eprintln!(
            "warning: the hypervisor took {:.0}% of this machine's CPU time during a verify run of \
             {label} (steal): its measurement is not comparable with runs that had none",
            100.0 * share
        );
    }
    Ok(())
}

/// What the --verify rounds measured, per configuration.
#[derive(Default)]
struct VerifyRuns {
    /// Operations per second and write amplification of each run, in the order they ran.
    measured: Vec<(String, f64, f64)>,
    /// Runs that failed, and the first failure's error.
    failures: std::collections::BTreeMap<String, (usize, String)>,
    /// Runs during which the hypervisor took a noticeable share of the machine's CPU (steal),
    /// with that share.
    disturbed: Vec<(String, f64)>,
}

impl VerifyRuns {
    fn add(&mut self, comparison: &strata_bench::results::Comparison) {
        for run in &comparison.runs {
            self.measured
                .push((run.label.clone(), run.ops_per_sec, run.write_amp));
            if let Some(share) = run.noticeable_steal() {
                self.disturbed.push((run.label.clone(), share));
            }
        }
        for failed in &comparison.failed {
            let entry = self
                .failures
                .entry(failed.label.clone())
                .or_insert_with(|| (0, failed.error.clone()));
            entry.0 += 1;
        }
    }

    /// Gives each candidate the median of what it measured in `rounds` rounds and its score by
    /// it, and leaves out every candidate that failed a run.
    fn record(
        &self,
        candidates: &mut [Candidate],
        rounds: usize,
        objective: Objective,
        mix: &OperationMix,
    ) {
        for c in candidates.iter_mut() {
            let (ops, write_amps) = self.of(&c.spec);
            if let Some(ops_median) = median(&ops) {
                c.measured_ops_per_sec = Some(ops_median);
                c.measured_write_amp = median(&write_amps);
                c.measured_runs = ops;
            }
            if let Some((failures, error)) = self.failures.get(&c.spec) {
                c.excluded = Some(format!(
                    "failed {failures} of {rounds} verify runs: {error}"
                ));
            }
            c.score = score(c, objective, mix);
        }
    }

    /// The operations per second and write amplifications `spec` measured.
    fn of(&self, spec: &str) -> (Vec<f64>, Vec<f64>) {
        self.measured
            .iter()
            .filter(|(label, _, _)| label == spec)
            .map(|&(_, ops, wa)| (ops, wa))
            .unzip()
    }
}

/// The policy name of a specification (`name:option=value,...`).
fn policy_name(spec: &str) -> &str {
    spec.split(':').next().unwrap_or(spec)
}

fn pick_of(best: &Candidate, all: &[Candidate], args: &AdviseArgs) -> Pick {
    let runner_up = all.iter().filter(|c| c.excluded.is_none()).nth(1);
    let measured = best.measured_ops_per_sec.is_some();
    let what = match args.objective {
        Objective::Throughput => match best.measured_ops_per_sec {
            Some(ops) => match best.measured_runs.len() {
                n if n > 1 => format!("measured {ops:.0} ops/s, the median of {n} runs"),
                _ => format!("measured {ops:.0} ops/s"),
            },
            None => format!("estimated {:.0} ops/s", best.estimated_ops_per_sec),
        },
        Objective::WriteAmp => format!(
            "write amplification {:.2}",
            best.measured_write_amp.unwrap_or(best.write_amp)
        ),
        Objective::SpaceAmp => format!("peak space amplification {:.2}", best.space_amp),
        Objective::ReadCost => format!(
            "{:.2} I/Os per lookup, {} runs per scan",
            best.lookup_cost, best.scan_runs
        ),
    };
    let versus = runner_up.map_or(String::new(), |r| {
        format!(
            " (next: {}, score {:.3} vs {:.3})",
            r.label,
            r.score.abs(),
            best.score.abs()
        )
    });
    let reason = format!(
        "best {}{what}; simulated WA {:.2}, peak SA {:.2}, {:.2} I/Os per lookup{versus}",
        if measured {
            "on the engine: "
        } else {
            "by the simulator: "
        },
        best.write_amp,
        best.space_amp,
        best.lookup_cost
    );
    Pick {
        rust: format!(
            "strata_engine::Options::new()\n    .with_write_buffer_size({})\n    .with_policy_named({:?})?",
            args.write_buffer_size, best.spec
        ),
        bench_flags: format!(
            "--policies '{}' --write-buffer-size {}{}{}",
            best.spec,
            strata_meta::format_size(args.write_buffer_size),
            // Out of cache, the regime the model and the verify runs assumed.
            match (args.max_memory, args.device_read_us) {
                (Some(memory), Some(_)) => format!(
                    " --memory-limit {} --block-cache {}{}",
                    strata_meta::format_size(memory),
                    strata_meta::format_size(args.block_cache),
                    if args.direct_io { " --direct-io" } else { "" }
                ),
                _ => String::new(),
            },
            if args.settle { " --settle" } else { "" }
        ),
        spec: best.spec.clone(),
        reason,
    }
}

fn text(a: &Advice, top: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "workload {}: {:.0}% writes, {:.0}% point reads, {:.0}% scans; objective {:?}\n",
        a.workload,
        100.0 * a.mix.writes,
        100.0 * a.mix.reads,
        100.0 * a.mix.scans,
        a.objective
    );
    if let Some(shares) = a
        .candidates
        .iter()
        .map(|c| c.memory_share)
        .collect::<Option<Vec<f64>>>()
        .filter(|s| !s.is_empty())
    {
        let (low, high) = shares
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        let range = if (high - low) * 100.0 < 0.5 {
            format!("{:.0}%", 100.0 * low)
        } else {
            format!("{:.0}–{:.0}%", 100.0 * low, 100.0 * high)
        };
        let _ = writeln!(
            s,
            "out of cache: the model serves {range} of block reads from memory, the rest from \
             the device\n"
        );
    }
    let _ = writeln!(
        s,
        "{:>4}  {:<44} {:>8} {:>7} {:>7} {:>7} {:>6} {:>11} {:>11}",
        "rank",
        "policy",
        "model WA",
        "sim WA",
        "peak SA",
        "I/O/get",
        "runs",
        "est. ops/s",
        "meas. ops/s"
    );
    for (i, c) in a.candidates.iter().enumerate().take(top) {
        let _ = writeln!(
            s,
            "{:>4}  {:<44} {:>8} {:>7.2} {:>7.2} {:>7.3} {:>6} {:>11.0} {:>11}{}",
            i + 1,
            c.label,
            c.model
                .as_ref()
                .map_or("-".to_string(), |m| format!("{:.2}", m.write_amp)),
            c.write_amp,
            c.space_amp,
            c.lookup_cost,
            c.scan_runs,
            c.estimated_ops_per_sec,
            c.measured_ops_per_sec
                .map_or("-".to_string(), |o| format!("{o:.0}")),
            c.excluded
                .as_ref()
                .map_or(String::new(), |e| format!("  (left out: {e})"))
        );
    }
    // Every run, where a configuration ran more than once: the median alone hides the spread.
    let several: Vec<&Candidate> = a
        .candidates
        .iter()
        .filter(|c| c.measured_runs.len() > 1)
        .collect();
    if !several.is_empty() {
        let _ = writeln!(s, "\nverify runs (ops/s, in the order they ran):");
        for c in several {
            let runs: Vec<String> = c.measured_runs.iter().map(|o| format!("{o:.0}")).collect();
            let _ = writeln!(s, "  {:<44} {}", c.label, runs.join(", "));
        }
    }
    if let Some(p) = &a.pick {
        let _ = writeln!(s, "\npick: {}\nwhy:  {}", p.spec, p.reason);
        let _ = writeln!(
            s,
            "\nas Options:\n{}\n\nas strata bench flags:\n{}",
            p.rust, p.bench_flags
        );
    }
    s
}

/// A workload like the one the database at `dir` recorded: its mix of puts, deletes, reads and
/// scans, its key and value sizes, skewed (zipfian) when its flushes showed hot keys, loading
/// as many keys as it wrote (at most `--entries`, default 1,000,000, to keep the simulation
/// short).
fn workload_of_database(
    dir: &PathBuf,
    keyspace: &str,
    workload: &WorkloadArgs,
) -> Result<WorkloadSpec> {
    let db = Db::open_read_only(dir, Options::new())
        .with_context(|| format!("--db {}", dir.display()))?;
    let l: LifetimeStats = db
        .keyspace(keyspace)
        .with_context(|| format!("--keyspace {keyspace}"))?
        .lifetime_stats();
    db.close()?;
    if l.operations() == 0 {
        bail!(
            "--db {}: the database records no operations (statistics are recorded since this \
             version; write to it, or give a --workload)",
            dir.display()
        );
    }
    let whole_life = l.window_since(&LifetimeStats::default());
    let (key_size, value_size) = (whole_life.key_size(), whole_life.value_size());
    let entries = workload.entries.unwrap_or(1_000_000).min(l.puts.max(1));
    let ops = workload.ops.unwrap_or(entries);
    // As many keys as it wrote, up to `entries`. The shape's scaled buffer goes unused:
    // advise simulates with its own --write-buffer-size.
    let shape = workload_like(
        &whole_life,
        (key_size, value_size),
        entries * (key_size + value_size),
        1,
        (entries, ops),
    )
    .map_err(anyhow::Error::msg)?;
    let mut spec = shape.spec;
    spec.name = format!("recorded by {}", dir.display());
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_bench::results::{Comparison, FailedRun, RunResult};

    fn candidate(spec: &str, estimated: f64) -> Candidate {
        Candidate {
            label: spec.to_string(),
            spec: spec.to_string(),
            bloom_bits_per_key: 10.0,
            model: None,
            write_amp: 1.0,
            space_amp: 1.0,
            lookup_cost: 1.0,
            scan_runs: 1,
            estimated_ops_per_sec: estimated,
            memory_share: None,
            measured_ops_per_sec: None,
            measured_runs: Vec::new(),
            measured_write_amp: None,
            score: -estimated,
            excluded: None,
        }
    }

    fn run(label: &str, ops: f64) -> RunResult {
        RunResult {
            label: label.to_string(),
            ops_per_sec: ops,
            write_amp: ops / 1000.0,
            ..RunResult::default()
        }
    }

    #[test]
    fn verify_rounds_rank_by_the_median_and_leave_out_what_failed() {
        let mut runs = VerifyRuns::default();
        // "a" wins one round by far and loses the other two; "b" is steady; "c" is the fastest
        // where it finished but was killed once.
        let rounds = [
            (
                vec![run("a", 900.0), run("b", 500.0), run("c", 990.0)],
                None,
            ),
            (vec![run("a", 300.0), run("b", 520.0)], Some("c")),
            (
                vec![run("a", 310.0), run("b", 480.0), run("c", 980.0)],
                None,
            ),
        ];
        for (measured, failed) in rounds {
            runs.add(&Comparison {
                runs: measured,
                failed: failed
                    .map(|label| FailedRun {
                        label: label.to_string(),
                        error: "killed by the memory limit".to_string(),
                    })
                    .into_iter()
                    .collect(),
                ..Comparison::default()
            });
        }
        let mut candidates = vec![
            candidate("a", 3000.0),
            candidate("b", 2000.0),
            candidate("c", 1000.0),
            candidate("d", 4000.0),
        ];
        let mix = OperationMix::default();
        runs.record(&mut candidates, 3, Objective::Throughput, &mix);
        rank(&mut candidates);
        let order: Vec<&str> = candidates.iter().map(|c| c.spec.as_str()).collect();
        // Measured before estimated, the median decides, the failed one last.
        assert_eq!(order, ["b", "a", "d", "c"]);
        assert_eq!(candidates[0].measured_ops_per_sec, Some(500.0));
        assert_eq!(candidates[0].measured_runs, [500.0, 520.0, 480.0]);
        assert_eq!(candidates[0].measured_write_amp, Some(0.5));
        assert_eq!(candidates[1].measured_ops_per_sec, Some(310.0));
        let left_out = candidates[3].excluded.as_deref().unwrap();
        assert!(left_out.contains("failed 1 of 3 verify runs"), "{left_out}");
        assert!(left_out.contains("memory limit"), "{left_out}");
    }
}
