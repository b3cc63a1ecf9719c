//! Strata's benchmark tool: db_bench phases, YCSB and the papers' workloads against Strata's
//! policies and, behind cargo features, RocksDB and fjall, with amplification, latency and
//! worst-window measurements, terminal tables, JSON/CSV files and an HTML report with charts.

pub mod engines;
pub mod job_log;
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
use engines::{open_peer, EngineSettings, KvEngine, Strata};
use results::{Comparison, RunResult};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use workload::WorkloadSpec;

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
    /// Write each Strata run's job log ([`job_log`]) into this directory, as
    /// [`job_log::job_log_file_name`] of the run's label.
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
    /// The database directory (must not exist yet; removed when the run ends).
    pub dir: PathBuf,
    /// Seed of every generator.
    pub seed: u64,
    /// Show progress bars.
    pub progress: bool,
    /// Where the run's job log goes, if anywhere (see [`BenchConfig::job_log`]).
    pub job_log: Option<PathBuf>,
}

/// Runs one configuration in this process: opens the engine in `job.dir`, runs the workload,
/// writes the job log if asked, and removes the database.
pub fn run_job(job: &RunJob) -> Result<RunResult> {
    let recorder = Arc::new(job_log::JobRecorder::default());
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
    let result = runner::run(
        Arc::clone(&engine),
        &job.workload,
        label,
        job.seed,
        job.progress,
    )
    .with_context(|| format!("running {} on {label}", job.workload.name));
    drop(engine);
    // Free the disk before the next configuration runs, whatever happened.
    let _ = std::fs::remove_dir_all(&job.dir);
    let result = result?;
    if let (Some(log_dir), true) = (&job.job_log, job.is_policy) {
        let path = log_dir.join(job_log::job_log_file_name(label));
        job_log::write_job_log(&path, label, &recorder.jobs())?;
    }
    Ok(result)
}

/// Runs `job` in a child process started with `child`, and reads back its result.
fn run_job_in_child(child: &ChildCommand, job: &RunJob, scratch: &Path) -> Result<RunResult> {
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
        // The child printed its error; make sure its database does not outlive it.
        let _ = std::fs::remove_dir_all(&job.dir);
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

/// Runs every configuration of `config` and collects the results. The baseline is checked before
/// the first run; each run's database is removed when the run ends, and the comparison's
/// directory when the comparison ends (see [`BenchConfig::dir`]).
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
    let scratch = base.join("jobs");
    if config.isolate.is_some() {
        std::fs::create_dir(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    }
    let mut runs = Vec::new();
    for (label, is_policy) in &labels {
        // Policy specifications may hold ':', '=' and ','; keep directory names plain.
        let dir = base.join(job_log::plain_name(label));
        // Two labels may map to one name; the earlier run's directory is gone by now.
        if dir.exists() {
            bail!("{} already exists", dir.display());
        }
        let mut settings = config.settings.clone();
        if let (Some(traces), true) = (&config.file_trace, *is_policy) {
            settings.file_trace =
                Some(traces.join(format!("{}.trace", job_log::plain_name(label))));
        }
        let job = RunJob {
            workload: config.workload.clone(),
            label: label.clone(),
            is_policy: *is_policy,
            settings,
            dir,
            seed: config.seed,
            progress: config.progress,
            job_log: config.job_log.clone(),
        };
        let result = match &config.isolate {
            Some(child) => run_job_in_child(child, &job, &scratch)?,
            None => run_job(&job)?,
        };
        runs.push(result);
    }
    Ok(Comparison {
        workload: config.workload.name.clone(),
        description: config.workload.description.clone(),
        baseline,
        runs,
        device_write_bandwidth,
    })
}
