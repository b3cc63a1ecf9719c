//! The workload options `strata sim` and `strata bench` share: one workload definition
//! (`strata-workload`), chosen and parameterized the same way in both.

use anyhow::{Context, Result};
use clap::Args;
use strata_workload::{PresetParams, WorkloadSpec, PRESETS};

/// Which workload to run, and the parameters presets take.
#[derive(Args, Debug)]
pub struct WorkloadArgs {
    /// A preset (see --list), comma-separated db_bench phases, or a TOML workload file.
    /// Default: `mixed` for bench, `fillunique` for sim.
    #[arg(long)]
    pub workload: Option<String>,
    /// List the workload presets and exit.
    #[arg(long)]
    pub list: bool,
    /// Records loaded (entries of fill phases). Default: 2,000,000 for bench, 10,000,000 for
    /// sim.
    #[arg(long)]
    pub entries: Option<u64>,
    /// Operations of run phases. Default: bench 2,000,000, sim --entries.
    #[arg(long)]
    pub ops: Option<u64>,
    /// Key bytes (at least 8).
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value bytes.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Threads of run phases (the simulator replays one stream: thread 0's).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Key distribution of YCSB and mixed workloads: uniform, zipfian, latest.
    #[arg(long)]
    pub distribution: Option<String>,
    /// Zipf exponent.
    #[arg(long, default_value_t = 0.99)]
    pub theta: f64,
    /// EcoTune: writer rate in MiB/s.
    #[arg(long, default_value_t = 4.0)]
    pub write_rate: f64,
    /// EcoTune: query arrivals per second.
    #[arg(long, default_value_t = 5000.0)]
    pub query_rate: f64,
    /// EcoTune: share of queries that are long scans (seek + 100 next).
    #[arg(long, default_value_t = 0.3)]
    pub long_scan_share: f64,
    /// Spooky: operations between moves of the zipfian hot set.
    #[arg(long, default_value_t = 100_000)]
    pub hot_period: u64,
    /// Nearly-sorted ingest: disorder window in keys.
    #[arg(long, default_value_t = 1000)]
    pub disorder: u64,
    /// Seed of the workload generators: the same workload and seed give the same keys in sim
    /// and bench.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

impl WorkloadArgs {
    /// Prints the presets when `--list` was given; whether it did.
    pub fn list_if_asked(&self) -> bool {
        if self.list {
            for (name, what) in PRESETS {
                println!("{name:<24} {what}");
            }
        }
        self.list
    }

    /// The workload: `--workload` (or `default`), with `entries` and `ops` defaulting to the
    /// command's own defaults.
    pub fn spec(&self, default: &str, entries: u64, ops: Option<u64>) -> Result<WorkloadSpec> {
        let entries = self.entries.unwrap_or(entries);
        let params = PresetParams {
            entries,
            ops: self.ops.or(ops).unwrap_or(entries),
            key_size: self.key_size,
            value_size: self.value_size,
            threads: self.threads,
            distribution: self.distribution.clone(),
            theta: self.theta,
            write_rate_mib: self.write_rate,
            query_rate: self.query_rate,
            long_scan_share: self.long_scan_share,
            hot_period_ops: self.hot_period,
            disorder: self.disorder,
        };
        let name = self.workload.as_deref().unwrap_or(default);
        if name.ends_with(".toml") {
            let text = std::fs::read_to_string(name)
                .with_context(|| format!("reading workload file {name}"))?;
            WorkloadSpec::from_toml(&text).map_err(anyhow::Error::msg)
        } else {
            WorkloadSpec::preset(name, &params).map_err(anyhow::Error::msg)
        }
    }
}

/// User key+value bytes a workload writes, counting every operation of every phase as a write
/// (an upper bound for mixes with reads).
pub fn ingest_bytes(spec: &WorkloadSpec) -> u64 {
    spec.phases
        .iter()
        .map(|p| {
            p.ops
                .saturating_mul((spec.key_size + spec.value_size) as u64)
        })
        .fold(0, u64::saturating_add)
}
