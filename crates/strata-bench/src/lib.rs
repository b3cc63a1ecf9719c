//! Strata's benchmark tool: db_bench phases, YCSB and the papers' workloads against Strata's
//! policies and, behind cargo features, RocksDB and fjall, with amplification, latency and
//! worst-window measurements, terminal tables, JSON/CSV files and an HTML report with charts.

pub mod cgroup;
pub mod device_probe;
pub mod engines;
pub mod job_recorder;
pub mod kept;
pub mod physical;
pub mod report;
pub mod results;
pub mod runner;

/// Workloads come from `strata-workload`, shared with the simulator.
pub use strata_workload as workload;

/// The engine's limits on key and value sizes, so a command line can refuse a workload the
/// engine would fail on before any run starts.
pub use strata_engine::{MAX_KEY_SIZE, MAX_VALUE_SIZE};

use anyhow::{bail, Context, Result};
use cgroup::{Cgroups, Limit, RunCgroups};
use device_probe::ProbeSettings;
use engines::{open_peer, EngineSettings, KvEngine, Strata};
use kept::KeptState;
use results::{Comparison, FailedRun, RunResult};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use workload::{KeySpace, WorkloadSpec};

/// A comparison to run: one workload over several policies and peers, each in a fresh directory.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The workload.
    pub workload: WorkloadSpec,
    /// Strata policies to run, as policy specifications (`name` or `name:option=value,...`).
    pub policies: Vec<String>,
    /// Peers to run ("rocksdb", "fjall").
    pub peers: Vec<String>,
    /// Label of the baseline (default: the first run).
    pub baseline: Option<String>,
    /// Matched engine settings.
    pub settings: EngineSettings,
    /// Where the databases go: each comparison makes a fresh `strata-bench-*` directory in it
    /// (created if missing; the system's temporary directory when `None`) and removes it when it
    /// ends, whether its runs succeeded or not, so a failed or interrupted comparison never
    /// blocks the next one.
    pub dir: Option<PathBuf>,
    /// Seed of every generator.
    pub seed: u64,
    /// Show progress bars.
    pub progress: bool,
    /// Write each Strata run's job log ([`strata_exec::job_log`]) into this directory, as
    /// [`strata_exec::job_log::job_log_file_name`] of the run's label.
    pub job_log: Option<PathBuf>,
    /// Record each Strata run's device file trace into this directory, as `<label>.trace`
    /// (`strata_engine::fs::RecordingFs`; `strata sim --replay-trace` replays it).
    pub file_trace: Option<PathBuf>,
    /// Run each configuration in a process of its own, started with this command, so that its
    /// peak memory, CPU time and device bytes are its own and no engine inherits another's
    /// heap or page-cache state; `None` runs them all in this process.
    pub isolate: Option<ChildCommand>,
    /// Bytes written to measure the device's sequential write bandwidth before the runs
    /// ([`physical::sequential_write_bandwidth`]); 0 skips the measurement.
    pub bandwidth_probe_bytes: u64,
    /// Memory limits, page-cache drops, kept databases and the device probe: what measuring
    /// engines out of cache takes.
    pub storage: StorageOptions,
    /// After each phase that wrote, wait until flushes and compactions are done and count the
    /// wait in the phase: a phase's rate is then that of data reaching a settled tree, and an
    /// engine that leaves a compaction debt behind pays it where it was made.
    pub settle_phases: bool,
}

/// How a comparison treats memory and storage beyond the engines' settings (`strata bench
/// --memory-limit`, `--drop-caches`, `--keep`, `--use-existing-db`, `--device-probe`). The
/// default changes nothing.
#[derive(Clone, Debug, Default)]
pub struct StorageOptions {
    /// Run each configuration's process in cgroups of its own with these limits (memory, page
    /// cache included; device writes per second); needs [`BenchConfig::isolate`].
    pub limits: Option<RunLimits>,
    /// Write dirty pages back and drop the page cache before each measured phase (needs root).
    pub drop_caches: bool,
    /// Keep each configuration's fresh database in `DIR/<plain label>` after its run, with its
    /// state beside it ([`kept`]).
    pub keep: Option<PathBuf>,
    /// Run each configuration on the database kept earlier in `DIR/<plain label>` ([`kept`]):
    /// the workload's load phases are skipped, the database is never removed, and its state is
    /// brought up to date after the run. With `keep`, both must name the same directory.
    pub use_existing: Option<PathBuf>,
    /// Measure the read performance of the device holding the databases before the runs
    /// ([`device_probe::probe_device`]): in the kept databases' directory when there is one,
    /// else in the comparison's own directory.
    pub device_probe: Option<ProbeSettings>,
}

/// Limits on each run's process, and where the cgroups that enforce them go.
#[derive(Clone, Debug)]
pub struct RunLimits {
    /// Bytes of memory, page cache included.
    pub memory: Option<u64>,
    /// Bytes per second written to the device holding the databases.
    pub device_write: Option<u64>,
    /// Where each run's cgroups are made ([`Cgroups::discover`]).
    pub cgroups: Cgroups,
}

impl RunLimits {
    /// The limits `limits` asks for, with a parent cgroup found for each
    /// ([`Cgroups::discover`]).
    pub fn discover(limits: &[Limit]) -> Result<RunLimits> {
        Ok(RunLimits {
            memory: limits.iter().find_map(|l| match l {
                Limit::Memory(bytes) => Some(*bytes),
                _ => None,
            }),
            device_write: limits.iter().find_map(|l| match l {
                Limit::DeviceWrite {
                    bytes_per_second, ..
                } => Some(*bytes_per_second),
                _ => None,
            }),
            cgroups: Cgroups::discover(limits)?,
        })
    }
}

/// What a run does with its database directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DatabaseUse {
    /// A fresh directory, removed when the run ends.
    #[default]
    Temporary,
    /// A fresh directory, kept after the run with its state written to `state`.
    Keep {
        /// The state file ([`kept::state_path`]).
        state: PathBuf,
    },
    /// A database kept earlier, with its state in `state`: the load phases are skipped, the
    /// database stays, and the state is rewritten after a successful run.
    Existing {
        /// The state file ([`kept::state_path`]).
        state: PathBuf,
    },
}

/// A size for messages: whole GiB, MiB or KiB where it is one, else bytes.
pub fn show_bytes(bytes: u64) -> String {
    for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes} bytes")
}

/// A command that runs one [`RunJob`]: `program args… <job file> <result file>`. The program
/// reads the job, calls [`run_job`], and writes the result as JSON (`strata bench`'s hidden
/// `bench-run` command does exactly this).
#[derive(Clone, Debug)]
pub struct ChildCommand {
    /// The program (usually `std::env::current_exe()`).
    pub program: PathBuf,
    /// Arguments before the two file names.
    pub args: Vec<OsString>,
}

/// One configuration of a comparison, run on its own: what a child process needs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunJob {
    /// The workload.
    pub workload: WorkloadSpec,
    /// Policy specification or peer name.
    pub label: String,
    /// Whether `label` is a Strata policy (otherwise a peer).
    pub is_policy: bool,
    /// Matched engine settings.
    pub settings: EngineSettings,
    /// The database directory: one that does not exist yet, or with
    /// [`DatabaseUse::Existing`] a database kept earlier.
    pub dir: PathBuf,
    /// Seed of every generator.
    pub seed: u64,
    /// Show progress bars.
    pub progress: bool,
    /// Where the run's job log goes, if anywhere (see [`BenchConfig::job_log`]).
    pub job_log: Option<PathBuf>,
    /// The cgroups to run in: the process running the job moves itself into each first
    /// ([`cgroup::join`]), so a job with any must run in a process of its own.
    #[serde(default)]
    pub cgroups: Vec<PathBuf>,
    /// Their memory limit, recorded in the result.
    #[serde(default)]
    pub memory_limit: Option<u64>,
    /// Their device write limit in bytes per second, recorded in the result.
    #[serde(default)]
    pub device_write_limit: Option<u64>,
    /// Drop the page cache before each measured phase.
    #[serde(default)]
    pub drop_caches: bool,
    /// Settle after each phase that wrote ([`BenchConfig::settle_phases`]).
    #[serde(default)]
    pub settle_phases: bool,
    /// What becomes of the database directory.
    #[serde(default)]
    pub database: DatabaseUse,
}

/// Runs one configuration in this process: joins its cgroups if it has any, opens the
/// engine in `job.dir` (restoring a kept database's key space), runs the workload, writes the
/// job log if asked, and removes the database or saves its state.
pub fn run_job(job: &RunJob) -> Result<RunResult> {
    // First, before the engine allocates anything the limit should cover.
    for dir in &job.cgroups {
        cgroup::join(dir)?;
    }
    let (earlier, space, skip_phases) = match &job.database {
        DatabaseUse::Existing { state } => {
            let (kept, space) = kept::load(state)?;
            let skip = kept.check(&job.workload, &job.dir)?;
            (Some(kept), space, skip)
        }
        _ => (None, KeySpace::new(), 0),
    };
    let recorder = Arc::new(job_recorder::JobRecorder::default());
    let label = &job.label;
    let engine: Arc<dyn KvEngine> = if job.is_policy {
        let listener = job
            .job_log
            .as_ref()
            .map(|_| Arc::clone(&recorder) as Arc<dyn strata_engine::EventListener>);
        Arc::new(
            Strata::open_with_listener(&job.dir, label, &job.settings, listener)
                .with_context(|| format!("opening Strata with {label}"))?,
        )
    } else {
        open_peer(label, &job.dir, &job.settings)?
    };
    let options = runner::RunOptions {
        seed: job.seed,
        progress: job.progress,
        drop_caches: job.drop_caches,
        space: Arc::clone(&space),
        skip_phases,
        settle_phases: job.settle_phases,
    };
    let result = runner::run(Arc::clone(&engine), &job.workload, label, &options)
        .with_context(|| format!("running {} on {label}", job.workload.name));
    let (direct_io, block_cache) = (engine.direct_io(), engine.block_cache_bytes());
    let row_cache = engine.row_cache_bytes();
    let index_and_filter = engine.index_and_filter();
    let engine_options = engine.options();
    drop(engine);
    match &job.database {
        // Free the disk before the next configuration runs, whatever happened.
        DatabaseUse::Temporary => {
            let _ = std::fs::remove_dir_all(&job.dir);
        }
        DatabaseUse::Keep { state } | DatabaseUse::Existing { state } => {
            if result.is_ok() {
                let kept = KeptState::after_run(
                    earlier.as_ref(),
                    label,
                    &job.workload,
                    skip_phases,
                    job.seed,
                );
                kept::save(state, &kept, &space)?;
            }
        }
    }
    let mut result = result?;
    result.memory_limit = job.memory_limit;
    result.device_write_limit = job.device_write_limit;
    result.direct_io = direct_io;
    result.block_cache_bytes = block_cache;
    result.row_cache_bytes = row_cache;
    result.index_and_filter = index_and_filter.map(str::to_string);
    result.options = engine_options;
    if let (Some(log_dir), true) = (&job.job_log, job.is_policy) {
        let path = log_dir.join(strata_exec::job_log::job_log_file_name(label));
        strata_exec::job_log::write_job_log(&path, label, &recorder.jobs())?;
    }
    Ok(result)
}

/// Runs `job` in a child process started with `child` (in `cgroup`, if given), and reads back
/// its result. A child the kernel killed for memory is reported as such.
fn run_job_in_child(
    child: &ChildCommand,
    job: &RunJob,
    scratch: &Path,
    cgroups: Option<&RunCgroups>,
) -> Result<RunResult> {
    let job_file = scratch.join("job.json");
    let result_file = scratch.join("result.json");
    let _ = std::fs::remove_file(&result_file);
    std::fs::write(&job_file, serde_json::to_vec(job)?)
        .with_context(|| format!("writing {}", job_file.display()))?;
    let status = std::process::Command::new(&child.program)
        .args(&child.args)
        .arg(&job_file)
        .arg(&result_file)
        .status()
        .with_context(|| format!("starting {} for {}", child.program.display(), job.label))?;
    if !status.success() {
        // The child printed its error; make sure a temporary database does not outlive it.
        if job.database == DatabaseUse::Temporary {
            let _ = std::fs::remove_dir_all(&job.dir);
        }
        use std::os::unix::process::ExitStatusExt;
        let oom_killed = cgroups.and_then(RunCgroups::oom_kills).unwrap_or(0) > 0;
        let killed = status.signal() == Some(libc::SIGKILL);
        if let (Some(limit), true) = (job.memory_limit, oom_killed || killed) {
            bail!(
                "the run of {} was killed by the memory limit of {} ({status}{}); raise \
                 --memory-limit or lower the engines' memory (--block-cache, \
                 --write-buffer-size)",
                job.label,
                show_bytes(limit),
                if oom_killed {
                    ", the cgroup counts an OOM kill"
                } else {
                    ""
                }
            );
        }
        bail!(
            "the run of {} failed in its own process ({status}); its error is printed above",
            job.label
        );
    }
    let text = std::fs::read_to_string(&result_file).with_context(|| {
        format!(
            "{} exited without writing {}'s result: it must run `strata_cli::main`, whose \
             hidden bench-run command runs a job",
            child.program.display(),
            job.label
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}'s result", job.label))
}

/// Where each configuration's database goes and what becomes of it, checked before any run:
/// with `--use-existing-db`, each database and its state exist and fit the workload; with
/// `--keep`, none exists yet; `None` entries get a temporary directory.
fn database_plans(
    config: &BenchConfig,
    labels: &[(String, bool)],
) -> Result<Vec<Option<(PathBuf, DatabaseUse)>>> {
    let storage = &config.storage;
    let mut names = std::collections::BTreeMap::new();
    if storage.keep.is_some() || storage.use_existing.is_some() {
        for (label, _) in labels {
            if let Some(other) = names.insert(strata_exec::job_log::plain_name(label), label) {
                bail!(
                    "the runs {other} and {label} would keep their databases in the same \
                     directory ({}); run them in separate comparisons",
                    strata_exec::job_log::plain_name(label)
                );
            }
        }
    }
    match (&storage.keep, &storage.use_existing) {
        (Some(keep), Some(existing)) => {
            let same = keep.canonicalize().ok().zip(existing.canonicalize().ok());
            if same.is_none_or(|(a, b)| a != b) {
                bail!(
                    "--keep {} and --use-existing-db {} name different directories: a kept \
                     database is used in place, so give both the same directory (or only \
                     --use-existing-db, which keeps it too)",
                    keep.display(),
                    existing.display()
                );
            }
            existing_plans(config, labels, existing)
        }
        (None, Some(existing)) => existing_plans(config, labels, existing),
        (Some(keep), None) => {
            std::fs::create_dir_all(keep)
                .with_context(|| format!("--keep {}: creating it", keep.display()))?;
            labels
                .iter()
                .map(|(label, _)| {
                    let dir = kept::database_dir(keep, label);
                    let state = kept::state_path(keep, label);
                    if dir.exists() || state.exists() {
                        bail!(
                            "--keep {}: {} already exists; remove it, or run on it with \
                             --use-existing-db {}",
                            keep.display(),
                            if dir.exists() { &dir } else { &state }.display(),
                            keep.display()
                        );
                    }
                    Ok(Some((dir, DatabaseUse::Keep { state })))
                })
                .collect()
        }
        (None, None) => Ok(labels.iter().map(|_| None).collect()),
    }
}

/// The kept databases in `dir` for every label, each checked against the workload.
fn existing_plans(
    config: &BenchConfig,
    labels: &[(String, bool)],
    dir: &Path,
) -> Result<Vec<Option<(PathBuf, DatabaseUse)>>> {
    labels
        .iter()
        .map(|(label, _)| {
            let db = kept::database_dir(dir, label);
            if !db.is_dir() {
                bail!(
                    "--use-existing-db {}: there is no database of {label} at {} (keep one \
                     first with --keep {})",
                    dir.display(),
                    db.display(),
                    dir.display()
                );
            }
            let state = kept::state_path(dir, label);
            let (kept, _) = kept::load(&state)
                .with_context(|| format!("--use-existing-db {}", dir.display()))?;
            kept.check(&config.workload, &db)?;
            Ok(Some((db, DatabaseUse::Existing { state })))
        })
        .collect()
}

/// Runs every configuration of `config` and collects the results. The baseline, the memory
/// limit's need for a process per run and the kept databases ([`StorageOptions`]) are checked
/// before the first run; the device is measured next where asked; then each run gets its
/// cgroups (removed after it) and its database, which is removed when the run ends unless
/// it is kept, as the comparison's directory is when the comparison ends (see
/// [`BenchConfig::dir`]). A run that fails is recorded in [`Comparison::failed`] and the
/// comparison goes on; it is an error only when every run failed.
pub fn run_comparison(config: &BenchConfig) -> Result<Comparison> {
    let mut labels: Vec<(String, bool)> =
        config.policies.iter().map(|p| (p.clone(), true)).collect();
    labels.extend(config.peers.iter().map(|p| (p.clone(), false)));
    if labels.is_empty() {
        bail!("nothing to run: give at least one policy or peer");
    }
    let baseline = config
        .baseline
        .clone()
        .unwrap_or_else(|| labels[0].0.clone());
    if !labels.iter().any(|(l, _)| *l == baseline) {
        bail!(
            "baseline {baseline:?} is not among the runs ({})",
            labels
                .iter()
                .map(|(l, _)| l.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if config.storage.limits.is_some() && config.isolate.is_none() {
        bail!(
            "--memory-limit and --device-write-limit need a process per run (each in cgroups of \
             its own), and this comparison runs in one process (--in-process, or called as a \
             library)"
        );
    }
    let plans = database_plans(config, &labels)?;
    // A fresh directory per comparison, even inside a given --dir: dropping it (at the end, or on
    // the first error) removes whatever the runs left, and leftovers of a killed comparison
    // never collide with the next one's.
    let mut builder = tempfile::Builder::new();
    builder.prefix("strata-bench-");
    let temp = match &config.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the database directory {}", dir.display()))?;
            builder.tempdir_in(dir)
        }
        None => builder.tempdir(),
    }
    .context("creating the comparison's database directory")?;
    let base = temp.path().to_path_buf();
    let device_write_bandwidth = if config.bandwidth_probe_bytes > 0 {
        let bandwidth =
            physical::sequential_write_bandwidth(&base, config.bandwidth_probe_bytes)
                .with_context(|| format!("measuring the write bandwidth of {}", base.display()))?;
        Some(bandwidth)
    } else {
        None
    };
    let device_probe = match &config.storage.device_probe {
        Some(settings) => {
            let dir = config
                .storage
                .use_existing
                .as_ref()
                .or(config.storage.keep.as_ref())
                .unwrap_or(&base);
            Some(
                device_probe::probe_device(dir, settings)
                    .with_context(|| format!("probing the device holding {}", dir.display()))?,
            )
        }
        None => None,
    };
    let scratch = base.join("jobs");
    if config.isolate.is_some() {
        std::fs::create_dir(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    }
    let (mut runs, mut failed) = (Vec::new(), Vec::new());
    for (n, ((label, is_policy), plan)) in labels.iter().zip(plans).enumerate() {
        // Policy specifications may hold ':', '=' and ','; keep directory names plain.
        let (dir, database) = plan.unwrap_or_else(|| {
            (
                base.join(strata_exec::job_log::plain_name(label)),
                DatabaseUse::Temporary,
            )
        });
        // Two labels may map to one name; the earlier run's directory is gone by now.
        if database == DatabaseUse::Temporary && dir.exists() {
            bail!("{} already exists", dir.display());
        }
        let mut settings = config.settings.clone();
        if let (Some(traces), true) = (&config.file_trace, *is_policy) {
            settings.file_trace =
                Some(traces.join(format!("{}.trace", strata_exec::job_log::plain_name(label))));
        }
        let mut job = RunJob {
            workload: config.workload.clone(),
            label: label.clone(),
            is_policy: *is_policy,
            settings,
            dir,
            seed: config.seed,
            progress: config.progress,
            job_log: config.job_log.clone(),
            cgroups: Vec::new(),
            memory_limit: None,
            device_write_limit: None,
            drop_caches: config.storage.drop_caches,
            settle_phases: config.settle_phases,
            database,
        };
        let cgroups = match &config.storage.limits {
            Some(limits) => {
                let name = format!("strata-bench-{}-{n}", std::process::id());
                let cgroups = limits
                    .cgroups
                    .create(&name)
                    .with_context(|| format!("making the cgroups of {label}'s run"))?;
                job.cgroups = cgroups.dirs();
                job.memory_limit = limits.memory;
                job.device_write_limit = limits.device_write;
                Some(cgroups)
            }
            None => None,
        };
        let result = match &config.isolate {
            Some(child) => run_job_in_child(child, &job, &scratch, cgroups.as_ref()),
            None => run_job(&job),
        };
        if let Some(cgroups) = cgroups {
            // A cgroup left behind costs nothing but a directory; the run's result stands.
            if let Err(e) = cgroups.remove() {
                eprintln!("warning: removing the cgroups of {label}'s run: {e:#}");
            }
        }
        match result {
            Ok(run) => runs.push(run),
            // One run's failure (its memory limit, its engine) says nothing about the others:
            // report it and go on.
            Err(e) => {
                eprintln!("warning: the run of {label} failed, and the comparison goes on: {e:#}");
                failed.push(FailedRun {
                    label: label.clone(),
                    error: format!("{e:#}"),
                });
            }
        }
    }
    if runs.is_empty() {
        bail!(
            "every run failed: {}",
            failed
                .iter()
                .map(|f| format!("{}: {}", f.label, f.error))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(Comparison {
        workload: config.workload.name.clone(),
        description: config.workload.description.clone(),
        baseline,
        runs,
        device_write_bandwidth,
        device_probe,
        failed,
    })
}
