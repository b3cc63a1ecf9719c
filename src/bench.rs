//! `strata bench`: the benchmark tool's command line.

use crate::checks;
use crate::policies::{choose_policies, PolicyFlags};
use crate::workload_args::{
    ingest_bytes, show_size, size_arg, usize_arg, warn, warn_if_smaller_than_a_buffer, WorkloadArgs,
};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use strata_bench::cgroup::Limit;
use strata_bench::device_probe::{check_direct_io, ProbeSettings};
use strata_bench::engines::{available_peers, EngineSettings, Strata, AUTOPILOT, AUTOPILOT_START};
use strata_bench::physical::{check_drop_caches, DROP_CACHES_PATH};
use strata_bench::runner::WINDOW_OPS;
use strata_bench::workload::WorkloadSpec;
use strata_bench::{
    report, run_comparison, run_job, BenchConfig, ChildCommand, RunJob, RunLimits, StorageOptions,
};
use strata_policy::{build_policy, PolicySpec};
use strata_sim::human_bytes;

/// Options of `strata bench`. With none, it compares every built-in policy (and every peer the
/// build has) on the `mixed` workload and writes a report. Every flag, the workload and the
/// report and database directories are checked before the first run. A run that fails on its
/// way (killed by its memory limit, an engine error) is reported as FAILED and the others go on;
/// the command fails only when every run did. Sizes take units with one rule: binary, any case
/// (4K = 4KB = 4KiB = 4096).
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The workload (shared with `strata sim`).
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Render the table and report from a saved results.json instead of running anything.
    #[arg(long)]
    from_json: Option<PathBuf>,
    /// Strata policies to run: comma-separated names, each optionally with options
    /// (`leveled:level0_trigger=8,tiered`), "all" for every built-in policy, or "none";
    /// "autopilot" runs Strata choosing and switching its own policy
    /// (`Options::with_autopilot`, starting from `leveled`). Default: the workload file's
    /// `policies`, else all.
    #[arg(long, visible_alias = "policy")]
    policies: Option<String>,
    /// An option for every selected policy that declares it, as name=value (repeatable), e.g.
    /// `--policy-option num_levels=5`; `strata sim --list-policies` shows each policy's options.
    #[arg(long = "policy-option", value_name = "NAME=VALUE")]
    policy_options: Vec<String>,
    /// The calibration (`strata calibrate`) an "autopilot" run's advisor prices with.
    /// Default: round figures (`strata_advise::Calibration::assumed`).
    #[arg(long, value_name = "FILE")]
    calibration: Option<PathBuf>,
    /// Peers to run beside the policies, comma-separated: rocksdb, fjall, or "all" (needs a
    /// build with `--features peers`). Default: every peer the build has.
    #[arg(long)]
    peers: Option<String>,
    /// The run ratios are computed against: a run's label (`leveled:level0_trigger=8`), a
    /// policy name that only one run has, or a peer (default: the first run).
    #[arg(long)]
    baseline: Option<String>,
    /// The policy flags (shared with `strata sim`); the peers, configured like `leveled`, take
    /// them too, and where one is not given, the value `leveled` uses.
    #[command(flatten)]
    policy_flags: PolicyFlags,
    /// Block cache capacity. [SIZE: 4K = 4KB = 4KiB, any case]
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "32MiB",
        value_parser = size_arg,
        allow_hyphen_values = true
    )]
    block_cache: u64,
    /// Row cache capacity: what lookups found for a key in a table, kept by key, so that skewed
    /// reads of a tree larger than memory keep many more hot keys in memory than cached blocks
    /// hold. Strata: Options::with_row_cache_capacity; RocksDB: row_cache; fjall has none. 0
    /// (the default, as in both engines): none. Comes on top of --block-cache. [SIZE]
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "0",
        value_parser = size_arg,
        allow_hyphen_values = true
    )]
    row_cache: u64,
    /// Background jobs, at least 1. RocksDB: max_background_jobs.
    #[arg(long, default_value_t = 2, allow_negative_numbers = true, value_parser = usize_arg)]
    jobs: usize,
    /// Strata: record every table's data blocks (key range, size, entries) in the manifest and
    /// count the data blocks written into each level, per measured phase
    /// (`phases[].blocks_written_per_level` in the report): the partial-merge paper's metric.
    /// Makes the manifest larger. Peers do not count blocks.
    #[arg(long)]
    count_blocks: bool,
    /// Bytes per second flushes and compactions may write together (e.g. 64MiB); no limit when
    /// absent. Strata: Options::with_rate_limiter; RocksDB: rate_limiter; fjall has none.
    #[arg(long, value_parser = size_arg)]
    rate_limit: Option<u64>,
    /// Strata: threads besides --jobs that run only the plans a policy marks urgent (ecotune's
    /// top-to-main compactions). Options::with_reserved_jobs.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = usize_arg)]
    reserved_jobs: usize,
    /// Strata: keep an in-memory index of every key in this level's tables, so lookups there
    /// probe only the tables holding the key (ecotune's top level is 1).
    /// Options::with_key_index.
    #[arg(long, allow_negative_numbers = true, value_parser = usize_arg)]
    key_index: Option<usize>,
    /// Strata: read without the levels' interval indexes over runs (lookups visit every run,
    /// scans open every run overlapping their range at the start), to measure what they save.
    /// Options::with_interval_index(false).
    #[arg(long)]
    no_interval_index: bool,
    /// Strata: leave open tables' indexes and filters out of the block cache's budget, so that
    /// it holds --block-cache bytes of blocks as RocksDB's (whose default table keeps them
    /// outside its cache) does. Options::with_charge_tables_to_cache(false).
    #[arg(long)]
    no_table_charge: bool,
    /// Strata and RocksDB keep indexes and filters in the block cache with high priority
    /// (both engines' cache_index_and_filter_blocks); fjall has no such choice.
    #[arg(long)]
    cache_index_and_filter_blocks: bool,
    /// Strata and RocksDB commit write groups pipelined: the next group writes its WAL record
    /// while the one before it inserts into the memtable (both engines'
    /// enable_pipelined_write); fjall has no such choice. Applies with --engine-defaults too.
    #[arg(long)]
    enable_pipelined_write: bool,
    /// Strata and RocksDB leave every write out of the WAL (Strata's WriteOptions::disable_wal,
    /// RocksDB's disableWAL), as a bulk load may; the flush ending each phase makes the data
    /// durable. fjall has no such choice and writes its journal.
    #[arg(long)]
    disable_wal: bool,
    /// Strata spreads the keys over this many keyspaces (the default one, then ks1, ...), by a
    /// hash of the key, one writer's batches landing in whichever each key lives in; a scan
    /// reads the keyspace its first key lives in. The peers run one keyspace.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    keyspaces: u32,
    /// The policies of ks1, ks2, ... in turn, comma-separated (with --keyspaces); each takes
    /// the run's options as the configuration's policy does. Default: the configuration's
    /// policy in every keyspace.
    #[arg(long, value_delimiter = ',')]
    keyspace_policies: Vec<String>,
    /// After each phase that wrote, wait until flushes and compactions are done (each engine's
    /// flush and wait for compactions) and count that time and work in the phase: its ops/s is
    /// then the rate at which data reaches a settled tree, not the rate at which writes are
    /// accepted while a compaction debt builds up.
    #[arg(long)]
    settle: bool,
    /// Strata starts every data block on a 4 KiB page of its table file (Options::with_block_align),
    /// so a direct read of a 4 KiB block reads one page, not two. RocksDB: block_align, which the
    /// rocksdb crate cannot set, so RocksDB runs without it; fjall has no such choice.
    #[arg(long)]
    block_align: bool,
    /// How many microseconds Strata's read of a query's block that waits for the device checks
    /// for the answer before it sleeps, direct or buffered (Options::with_read_polling; default
    /// 150, 0 sleeps at once as RocksDB does; RocksDB and fjall have no such choice). Also
    /// accepted as --direct-read-poll-us, its name while only direct reads polled.
    #[arg(long, value_name = "MICROS", alias = "direct-read-poll-us")]
    read_poll_us: Option<u64>,
    /// Open every engine with its own defaults and ignore the engine and policy flags (buffer,
    /// file and cache sizes, size ratio, level base, Bloom bits, jobs): what a user who changes
    /// nothing gets. RocksDB gets its default block-based table with a 10-bit Bloom filter and
    /// no compression; Strata its `Options::new()` with each policy's own option defaults.
    #[arg(long)]
    engine_defaults: bool,
    /// Where the databases go (created if missing): each invocation works in a fresh
    /// strata-bench-* directory inside it and removes it at the end, even after a failure.
    /// Default: the system's temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The directory to write the report to (HTML, SVG charts, JSON, CSV); created, and checked
    /// to be writable, before the first run. Default: ./bench-report.
    #[arg(long, default_value = "bench-report")]
    report: PathBuf,
    /// Write a job log per Strata run into this directory (created if missing): one CSV row per
    /// flush and compaction with its levels, tables, bytes and the policy's reason, named after
    /// the run's label. `strata sim --job-log` writes the same format.
    #[arg(long)]
    job_log: Option<PathBuf>,
    /// Record each Strata run's device file trace into this directory (created if missing), as
    /// `<label>.trace`: every file the engine creates, appends to, cuts and deletes, for
    /// `strata sim --replay-trace FILE --ssd SIZE`. The directory should not be the database's.
    #[arg(long)]
    file_trace: Option<PathBuf>,
    /// Print the results as JSON (a list of runs) instead of the table.
    #[arg(long)]
    json: bool,
    /// Hide progress bars.
    #[arg(long)]
    quiet: bool,
    /// Run every configuration in this process instead of one process each. The default gives
    /// each run its own process, so peak memory, CPU time and device bytes are its own (a
    /// program calling `strata_cli::run` as a library always runs them in its own process).
    #[arg(long)]
    in_process: bool,
    /// Bytes written (and synced) before the runs to measure the device's sequential write
    /// bandwidth, which the report sets each run's device bytes per second against; 0 skips it.
    /// [SIZE: 4K = 4KB = 4KiB, any case]
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "256MiB",
        value_parser = size_arg
    )]
    bandwidth_probe: u64,
    /// Run each configuration's process in a memory cgroup of this size, page cache included
    /// (cgroup v2 memory.max with no swap, or v1 memory.limit_in_bytes), so data larger than
    /// it is read from the device. Needs root (or a delegated cgroup) and a process per run
    /// (not --in-process); checked before any run. A run the limit kills is reported as such.
    /// [SIZE: 4K = 4KB = 4KiB, any case]
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    memory_limit: Option<u64>,
    /// Cap each run's writes to the disk holding the databases at this many MiB per second
    /// (cgroup v2 io.max wbps, or v1 blkio.throttle.write_bps_device): a fast SSD made to write
    /// like a slow disk, where bytes written decide ingest speed. Needs root and a process per
    /// run. Under cgroup v1 only the writes a run submits or starts itself are throttled (direct
    /// I/O, fsync, sync_file_range: all of Strata's), not the kernel's own writeback of dirty
    /// pages, which an engine relying on it escapes without --direct-io.
    #[arg(long, value_name = "MiB/s", allow_negative_numbers = true)]
    device_write_limit: Option<f64>,
    /// Before each measured phase, write dirty pages back (sync) and drop the page cache
    /// (3 into /proc/sys/vm/drop_caches), so the phase starts cold. Machine-wide; needs root.
    #[arg(long)]
    drop_caches: bool,
    /// Read and write tables with direct I/O (O_DIRECT), around the page cache. Strata:
    /// Options::with_use_direct_reads and with_use_direct_io_for_flush_and_compaction; RocksDB:
    /// use_direct_reads and use_direct_io_for_flush_and_compaction. fjall has none and runs
    /// buffered (its results say direct I/O was off).
    #[arg(long)]
    direct_io: bool,
    /// Keep each configuration's database after its run in DIR/<label> (label made plain: ':',
    /// '=' and ',' become '_'), with DIR/<label>.bench-state beside it recording the sizes, the
    /// entries and which keys are live, for later runs with --use-existing-db DIR.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Run each configuration on the database kept earlier in DIR/<label> (db_bench's
    /// use_existing_db): the workload's load phases are skipped (the phases from the first that
    /// only insert: db_bench's fills, the unmeasured fillrandom before a first read phase, the
    /// YCSB and papers' loads), the other phases run as they would after them, the database is
    /// never deleted and its state file is updated after the run. A workload of other key or
    /// value sizes, entries or key numbering than the kept one is an error before any run.
    /// With --keep, give both the same DIR.
    #[arg(long, value_name = "DIR")]
    use_existing_db: Option<PathBuf>,
    /// Measure the device holding the databases before the runs: random 4 KiB direct reads per
    /// second at queue depth 1 and 32, and sequential read bandwidth; the report shows each
    /// run's and each phase's device reads per second against them.
    #[arg(long)]
    device_probe: bool,
    /// The device probe's file, written with random bytes and removed after; larger than the
    /// device's own cache. [SIZE: 4K = 4KB = 4KiB, any case]
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = size_arg)]
    device_probe_size: u64,
    /// Seconds each of the device probe's three measurements runs.
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true)]
    device_probe_seconds: f64,
}

/// How a comparison gives each configuration a process of its own: this same program again,
/// with the hidden `bench-run` command; `None` when this process was not started through
/// [`crate::main`] (called as a library), so runs stay in this process.
pub(crate) fn own_process_per_run() -> Result<Option<ChildCommand>> {
    if !crate::is_main() {
        return Ok(None);
    }
    Ok(Some(ChildCommand {
        program: std::env::current_exe().context("finding this program to run each run")?,
        args: vec!["bench-run".into()],
    }))
}

/// Arguments of the hidden `bench-run` command: one configuration of a comparison, in a process
/// of its own (what `strata bench` starts for each run).
#[derive(Args, Debug)]
pub struct BenchRunArgs {
    /// The job, as JSON (`strata_bench::RunJob`).
    job: PathBuf,
    /// Where the result goes, as JSON (`strata_bench::results::RunResult`).
    result: PathBuf,
}

/// Runs one job and writes its result.
pub fn run_one(args: BenchRunArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.job)
        .with_context(|| format!("reading {}", args.job.display()))?;
    let job: RunJob = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a benchmark job", args.job.display()))?;
    let result = run_job(&job)?;
    std::fs::write(&args.result, serde_json::to_vec(&result)?)
        .with_context(|| format!("writing {}", args.result.display()))?;
    Ok(())
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

impl BenchArgs {
    /// Checks the benchmark's own flags (the workload's are checked when it is built).
    fn check(&self) -> Result<()> {
        self.policy_flags.check()?;
        checks::at_least("--jobs", self.jobs as u64, 1)?;
        if self.device_probe {
            checks::size_at_least("--device-probe-size", self.device_probe_size, 1 << 20)?;
            checks::above("--device-probe-seconds", self.device_probe_seconds, 0.0)?;
        }
        if let Some(limit) = self.memory_limit {
            checks::size_at_least("--memory-limit", limit, MIN_MEMORY_LIMIT)?;
            if self.in_process {
                bail!(
                    "--memory-limit needs a process per run (each in its own memory cgroup); \
                     leave out --in-process"
                );
            }
        }
        if let Some(rate) = self.device_write_limit {
            checks::above("--device-write-limit", rate, 0.0)?;
            if self.in_process {
                bail!(
                    "--device-write-limit needs a process per run (each in cgroups of its own); \
                     leave out --in-process"
                );
            }
        }
        if let Some(dir) = &self.use_existing_db {
            if !dir.is_dir() {
                bail!(
                    "--use-existing-db {}: no such directory (keep databases there first with \
                     --keep {})",
                    dir.display(),
                    dir.display()
                );
            }
        }
        Ok(())
    }

    /// What the storage flags ask for, with everything they need checked: the cgroup (made and
    /// removed once), the right to drop caches, direct I/O in the databases' directory.
    fn storage(&self, settings: &EngineSettings, peers: &[String]) -> Result<StorageOptions> {
        // Where the databases (and the probe file) go.
        let data_dir = self
            .use_existing_db
            .clone()
            .or_else(|| self.keep.clone())
            .or_else(|| self.dir.clone())
            .unwrap_or_else(std::env::temp_dir);
        if (self.memory_limit.is_some() || self.device_write_limit.is_some())
            && own_process_per_run()?.is_none()
        {
            bail!(
                "--memory-limit and --device-write-limit need a process per run, which only the \
                 strata program (strata_cli::main) can start; called as a library, runs share a \
                 process"
            );
        }
        let mut limits = Vec::new();
        if let Some(bytes) = self.memory_limit {
            let engine_memory = settings
                .write_buffer_size
                .saturating_mul(2)
                .saturating_add(settings.block_cache)
                .saturating_add(settings.row_cache);
            if engine_memory >= bytes && !settings.engine_defaults {
                warn(&format!(
                    "--memory-limit {} leaves no room beside two write buffers of {} and a block \
                     cache of {}: expect the runs to be killed",
                    show_size(bytes),
                    show_size(settings.write_buffer_size),
                    show_size(settings.block_cache)
                ));
            }
            limits.push(Limit::Memory(bytes));
        }
        if let Some(rate) = self.device_write_limit {
            let bytes_per_second = (rate * (1u64 << 20) as f64).round() as u64;
            // The directory may not exist yet: its nearest existing ancestor is on the same
            // file system.
            let existing = data_dir
                .ancestors()
                .find(|dir| dir.exists())
                .unwrap_or(&data_dir);
            limits.push(Limit::device_write(existing, bytes_per_second)?);
            if !self.direct_io && !peers.is_empty() {
                warn(
                    "--device-write-limit without --direct-io: under cgroup v1 the kernel's own \
                     writeback of dirty pages is not throttled, only the writes a run submits or \
                     starts itself (Strata starts all of its own; a peer may leave some to the \
                     kernel)",
                );
            }
        }
        let limits = if limits.is_empty() {
            None
        } else {
            Some(RunLimits::discover(&limits)?)
        };
        if self.drop_caches {
            check_drop_caches().map_err(|e| {
                anyhow::anyhow!(
                    "--drop-caches: cannot write {DROP_CACHES_PATH} ({e}); dropping the page \
                     cache needs root and a writable /proc/sys"
                )
            })?;
        }
        if self.direct_io || self.device_probe {
            let flag = if self.direct_io {
                "--direct-io"
            } else {
                "--device-probe"
            };
            check_direct_io(&data_dir).map_err(|e| anyhow::anyhow!("{flag}: {e:#}"))?;
        }
        if self.direct_io && peers.iter().any(|p| p == "fjall") {
            warn(
                "--direct-io: fjall has no direct I/O; its runs read and write through the page \
                 cache, and their results say so",
            );
        }
        Ok(StorageOptions {
            limits,
            drop_caches: self.drop_caches,
            keep: self.keep.clone(),
            use_existing: self.use_existing_db.clone(),
            device_probe: self.device_probe.then_some(ProbeSettings {
                file_bytes: self.device_probe_size,
                seconds_each: self.device_probe_seconds,
            }),
        })
    }
}

/// The write buffer when `--write-buffer-size` is not given: smaller than the engine's 64 MiB, so
/// that a default-sized run has several levels to compact.
const DEFAULT_WRITE_BUFFER_SIZE: u64 = 8 << 20;

/// The smallest `--memory-limit`: a process of this program and an engine need some memory to
/// start at all.
const MIN_MEMORY_LIMIT: u64 = 16 << 20;

/// The label of the baseline run `--baseline` names: a label itself, or a policy name that
/// exactly one run has.
fn resolve_baseline(baseline: &str, labels: &[String]) -> Result<String> {
    // Labels are written specifications; writing the baseline the same way matches one whose
    // options are separated by ':' where labels use ','.
    let written = baseline
        .parse::<strata_policy::PolicySpec>()
        .map_or_else(|_| baseline.to_string(), |spec| spec.to_string());
    if labels.contains(&written) {
        return Ok(written);
    }
    let by_name: Vec<&String> = labels
        .iter()
        .filter(|l| l.split(':').next() == Some(baseline))
        .collect();
    match by_name.as_slice() {
        [one] => Ok(one.to_string()),
        [] => bail!(
            "--baseline {baseline:?} names none of the runs ({}); give one of them",
            labels.join(", ")
        ),
        several => bail!(
            "--baseline {baseline:?} matches several runs ({}); give the full label",
            several
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The peers `--peers` selects, each one this build can run.
fn peers(arg: Option<&str>) -> Result<Vec<String>> {
    let Some(arg) = arg else {
        return Ok(available_peers().iter().map(|s| s.to_string()).collect());
    };
    let names = list_names(arg, &["rocksdb", "fjall"]);
    for name in &names {
        if !["rocksdb", "fjall"].contains(&name.as_str()) {
            bail!("--peers: unknown peer {name:?}; peers are rocksdb and fjall");
        }
        if !available_peers().contains(&name.as_str()) {
            bail!(
                "--peers {name}: this build has no {name} peer; build with `--features peers` \
                 (or `--features {name}`)"
            );
        }
    }
    Ok(names)
}

/// Memory one round of operations may hold beyond the caches, from this machine's
/// MemAvailable (Linux): each thread's value buffer and the engine's copies of a value on its
/// way to a table (write-ahead log record, memtable entry), plus the write buffers and the
/// block cache. Errors when it cannot fit, naming the flags that set it.
fn check_memory(workload: &WorkloadSpec, settings: &EngineSettings) -> Result<()> {
    let Some(available) = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m
                .lines()
                .find(|l| l.starts_with("MemAvailable:"))?
                .to_string();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kib| kib.saturating_mul(1024))
    else {
        return Ok(());
    };
    let threads = workload
        .phases
        .iter()
        .map(|p| {
            p.threads as u64
                + u64::from(p.writer.is_some())
                + u64::from(p.background_writer.is_some())
        })
        .max()
        .unwrap_or(1);
    let entry = (workload.key_size + workload.value_size) as u64;
    let needed = threads
        .saturating_mul(entry)
        .saturating_mul(3)
        .saturating_add(settings.write_buffer_size.saturating_mul(2))
        .saturating_add(settings.block_cache)
        .saturating_add(settings.row_cache);
    if needed > available {
        bail!(
            "--value-size {} with {threads} thread(s) needs about {} of memory at once (each \
             thread's value and the engine's copies of it, two write buffers of {}, a block \
             cache of {}), more than the {} this machine has available; lower --value-size, \
             --threads, --write-buffer-size or --block-cache",
            show_size(workload.value_size as u64),
            human_bytes(needed),
            show_size(settings.write_buffer_size),
            show_size(settings.block_cache),
            human_bytes(available)
        );
    }
    Ok(())
}

/// Warns when the measured phases are too short for a worst-window throughput.
fn warn_if_too_short(workload: &WorkloadSpec) {
    let measured: Vec<_> = workload.phases.iter().filter(|p| p.measured).collect();
    // Phases bounded by time may run any number of operations.
    if measured.iter().any(|p| p.ops == 0) {
        return;
    }
    let longest = measured.iter().map(|p| p.ops).max().unwrap_or(0);
    if longest < WINDOW_OPS {
        warn(&format!(
            "the longest measured phase runs {longest} operation{}, fewer than one \
             worst-throughput window ({WINDOW_OPS} operations): the worst window is the whole \
             phase, and throughput, latency and ratios come from too few operations to \
             compare runs; raise --entries/--ops",
            if longest == 1 { "" } else { "s" }
        ));
    }
}

/// Runs `strata bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    if args.workload.list_if_asked() {
        return Ok(());
    }
    if let Some(path) = &args.from_json {
        checks::readable_file("--from-json", path)?;
        checks::writable_dir("--report", &args.report)?;
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
    // Everything is checked before the first run: flags, the workload, every policy as it will
    // be built, the peers, the baseline, then the directories (created here).
    args.check()?;
    let workload = args.workload.spec("mixed", 2_000_000, Some(2_000_000))?;
    // Runs are named after the policies as chosen; the engine settings fill the rest of each
    // policy's options when it opens.
    let (list, autopilot) = crate::policies::without_autopilot(args.policies.as_deref());
    let chosen = choose_policies(
        list.as_deref(),
        &workload,
        &args.policy_options,
        &args.policy_flags,
    )?;
    let mut policies: Vec<String> = chosen.labels.iter().map(ToString::to_string).collect();
    let peers = peers(args.peers.as_deref())?;
    // The peers take every policy flag, so none goes unused while they run; so does the
    // autopilot's start policy.
    if peers.is_empty() && !autopilot {
        chosen.warn_unused_flags();
    }
    if autopilot {
        policies.push(AUTOPILOT.to_string());
    }
    let labels: Vec<String> = policies.iter().chain(&peers).cloned().collect();
    if labels.is_empty() {
        bail!("--policies and --peers select nothing to run");
    }
    let baseline = args
        .baseline
        .as_deref()
        .map(|b| resolve_baseline(b, &labels))
        .transpose()?;
    let user_bytes = ingest_bytes(&workload);
    let flags = &args.policy_flags;
    let settings = EngineSettings {
        write_buffer_size: flags.write_buffer_size.unwrap_or(DEFAULT_WRITE_BUFFER_SIZE),
        target_file_size: flags.target_file_size,
        block_cache: args.block_cache,
        row_cache: args.row_cache,
        bloom_bits_per_key: flags.bloom_bits_per_key,
        size_ratio: flags.size_ratio,
        level_base: flags.max_bytes_for_level_base,
        background_jobs: args.jobs,
        expected_data_size: user_bytes.max(1),
        count_blocks: args.count_blocks,
        rate_limit: args.rate_limit,
        reserved_jobs: args.reserved_jobs,
        key_index_level: args.key_index,
        interval_index: !args.no_interval_index,
        charge_tables: !args.no_table_charge,
        cache_index_and_filter_blocks: args.cache_index_and_filter_blocks,
        pipelined_write: args.enable_pipelined_write,
        disable_wal: args.disable_wal,
        keyspaces: args.keyspaces as usize,
        keyspace_policies: args.keyspace_policies.clone(),
        block_align: args.block_align,
        read_poll_us: args.read_poll_us,
        file_trace: None,
        calibration: args.calibration.clone(),
        engine_defaults: args.engine_defaults,
        direct_io: args.direct_io,
    };
    // Each policy built as its run will build it, before any run; what it will run with is
    // printed below.
    let facts = [
        ("write_buffer_size", settings.write_buffer_size.to_string()),
        (
            "expected_data_size",
            settings.expected_data_size.to_string(),
        ),
    ];
    let mut built = Vec::with_capacity(policies.len());
    for (i, policy) in chosen.labels.iter().enumerate() {
        let spec = Strata::policy_spec(&policy.to_string(), &settings)?;
        let policy = build_policy(&spec).map_err(|e| chosen.blame(i, &facts, e))?;
        built.push(PolicySpec::of(policy.as_ref()));
    }
    if autopilot {
        // Its calibration is read now, so a bad file fails before any run.
        strata_bench::engines::autopilot_options(&settings)?;
        let start = build_policy(&Strata::policy_spec(AUTOPILOT_START, &settings)?)?;
        built.push(PolicySpec::of(start.as_ref()));
    }
    // The peers' shape, checked now and printed below.
    let peer_shape = (!peers.is_empty() && !settings.engine_defaults)
        .then(|| settings.peer_shape())
        .transpose()?;
    check_memory(&workload, &settings)?;
    if let Some(dir) = &args.dir {
        checks::writable_dir("--dir", dir)?;
    }
    checks::writable_dir("--report", &args.report)?;
    if let Some(dir) = &args.job_log {
        checks::writable_dir("--job-log", dir)?;
    }
    if let Some(dir) = &args.file_trace {
        checks::writable_dir("--file-trace", dir)?;
    }
    if let Some(dir) = &args.keep {
        checks::writable_dir("--keep", dir)?;
    }
    let storage = args.storage(&settings, &peers)?;
    warn_if_too_short(&workload);
    warn_if_smaller_than_a_buffer(&workload, settings.write_buffer_size);
    let config = BenchConfig {
        workload,
        policies,
        peers,
        baseline,
        settings,
        dir: args.dir.clone(),
        seed: args.workload.seed,
        progress: !args.quiet && !args.json,
        job_log: args.job_log.clone(),
        file_trace: args.file_trace.clone(),
        isolate: if args.in_process {
            None
        } else {
            own_process_per_run()?
        },
        bandwidth_probe_bytes: args.bandwidth_probe,
        storage,
        settle_phases: args.settle,
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
        let keyspaces = config.settings.keyspaces;
        if keyspaces > 1 {
            let policies: Vec<String> = (1..keyspaces)
                .map(|i| {
                    let own = &config.settings.keyspace_policies;
                    let policy = own
                        .get((i - 1) % own.len().max(1))
                        .map_or("the run's policy", String::as_str);
                    format!("ks{i} {policy}")
                })
                .collect();
            println!(
                "  Strata's keys spread over {keyspaces} keyspaces by hash: default the run's \
                 policy, {}; metrics and shape are the default keyspace's, WA the database's",
                policies.join(", ")
            );
        }
        if config.settings.engine_defaults {
            println!("every engine on its own defaults (--engine-defaults)");
        } else {
            for (label, spec) in config.policies.iter().zip(&built) {
                println!("  {label} runs as {spec}");
            }
            if let Some(shape) = &peer_shape {
                let shape: Vec<String> = shape
                    .options()
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                println!("  peers run with {}", shape.join(","));
            }
        }
    }
    let comparison = run_comparison(&config)?;
    let index = report::write_report(&comparison, &args.report)
        .with_context(|| format!("writing the report to {}", args.report.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&comparison.runs)?);
    } else {
        println!("\n{}", report::render_table(&comparison));
        // Policies that keep state (counters, rounds, tuning decisions) show where they ended.
        for run in &comparison.runs {
            if let Some(state) = &run.policy_state {
                println!("{} policy state: {state}", run.label);
            }
        }
        println!("report: {}", index.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::resolve_baseline;

    #[test]
    fn a_baseline_is_a_label_a_name_or_a_specification() {
        let labels = vec![
            "leveled".to_string(),
            "vertiorizon:horizontal_merge=leveling,horizontal_levels=2".to_string(),
        ];
        assert_eq!(resolve_baseline("leveled", &labels).unwrap(), "leveled");
        assert_eq!(resolve_baseline("vertiorizon", &labels).unwrap(), labels[1]);
        let colons = "vertiorizon:horizontal_merge=leveling:horizontal_levels=2";
        assert_eq!(resolve_baseline(colons, &labels).unwrap(), labels[1]);
        let other = "vertiorizon:horizontal_merge=tiering";
        let err = resolve_baseline(other, &labels).unwrap_err().to_string();
        assert!(err.contains("names none of the runs"), "{err}");
    }
}
