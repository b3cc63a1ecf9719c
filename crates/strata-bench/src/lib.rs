//! Strata's benchmark tool: db_bench phases, YCSB and the papers' workloads against Strata's
//! policies and, behind cargo features, RocksDB and fjall, with amplification, latency and
//! worst-window measurements, terminal tables, JSON/CSV files and an HTML report with charts.

pub mod engines;
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
        let dir_name: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let dir = base.join(dir_name);
        // Two labels may map to one name; the earlier run's directory is gone by now.
        if dir.exists() {
            bail!("{} already exists", dir.display());
        }
        let engine: Arc<dyn KvEngine> = if *is_policy {
            Arc::new(
                Strata::open(&dir, label, &config.settings)
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
