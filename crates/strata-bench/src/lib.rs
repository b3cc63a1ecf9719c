//! Strata's benchmark tool: db_bench phases, YCSB and the papers' workloads against Strata's
//! policies and, behind cargo features, RocksDB and fjall, with amplification, latency and
//! worst-window measurements, terminal tables, JSON/CSV files and an HTML report with charts.

pub mod engines;
pub mod job_log;
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
use results::Comparison;
use std::path::PathBuf;
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
    let mut runs = Vec::new();
    for (label, is_policy) in &labels {
        // Policy specifications may hold ':', '=' and ','; keep directory names plain.
        let dir_name = job_log::plain_name(label);
        let dir = base.join(dir_name);
        // Two labels may map to one name; the earlier run's directory is gone by now.
        if dir.exists() {
            bail!("{} already exists", dir.display());
        }
        let recorder = Arc::new(job_log::JobRecorder::default());
        let engine: Arc<dyn KvEngine> = if *is_policy {
            let listener = config
                .job_log
                .as_ref()
                .map(|_| Arc::clone(&recorder) as Arc<dyn strata_engine::EventListener>);
            Arc::new(
                Strata::open_with_listener(&dir, label, &config.settings, listener)
                    .with_context(|| format!("opening Strata with {label}"))?,
            )
        } else {
            open_peer(label, &dir, &config.settings)?
        };
        let result = runner::run(
            Arc::clone(&engine),
            &config.workload,
            label,
            config.seed,
            config.progress,
        )
        .with_context(|| format!("running {} on {label}", config.workload.name))?;
        drop(engine);
        if let (Some(log_dir), true) = (&config.job_log, *is_policy) {
            let path = log_dir.join(job_log::job_log_file_name(label));
            job_log::write_job_log(&path, label, &recorder.jobs())?;
        }
        // Free the disk before the next configuration runs.
        let _ = std::fs::remove_dir_all(&dir);
        runs.push(result);
    }
    Ok(Comparison {
        workload: config.workload.name.clone(),
        description: config.workload.description.clone(),
        baseline,
        runs,
    })
}
