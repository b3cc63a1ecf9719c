//! The workload options `strata sim` and `strata bench` share: one workload definition
//! (`strata-workload`), chosen and parameterized the same way in both, and checked the same way
//! before anything runs.

use anyhow::{bail, Result};
use clap::Args;
use strata_bench::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
use strata_meta::{format_size, parse_size};
use strata_workload::{ParamError, PresetParams, WorkloadSpec, PRESETS};

/// Parses a size flag with [`parse_size`]'s rule (binary units, any case).
pub fn size_arg(text: &str) -> Result<u64, String> {
    parse_size(text)
}

/// Parses a count flag: a whole number, 0 or more (ranges are checked with the other flags).
pub fn count_arg(text: &str) -> Result<u64, String> {
    let text = text.trim();
    text.parse().map_err(|_| {
        if text.starts_with('-') {
            format!("{text} is negative; give a whole number, 0 or more")
        } else {
            format!("{text:?} is not a whole number")
        }
    })
}

/// [`count_arg`] for counts held as `usize`.
pub fn usize_arg(text: &str) -> Result<usize, String> {
    let n = count_arg(text)?;
    usize::try_from(n).map_err(|_| format!("{n} is too large"))
}

/// The smallest key: the first 8 bytes are the key number.
const MIN_KEY_SIZE: u64 = 1;

/// Which workload to run, and the parameters presets take. Sizes take units with one rule:
/// binary, any case (4K = 4KB = 4KiB = 4096).
#[derive(Args, Debug)]
pub struct WorkloadArgs {
    /// A preset (see --list), comma-separated db_bench phases, or a TOML workload file (*.toml;
    /// examples/workloads/ has one per group of keys). Default: `mixed` for bench, `fillunique`
    /// for sim.
    #[arg(long)]
    pub workload: Option<String>,
    /// List the workload presets and exit.
    #[arg(long)]
    pub list: bool,
    /// Records loaded (entries of fill phases), at least 1. Default: 2,000,000 for bench,
    /// 10,000,000 for sim.
    #[arg(long, allow_negative_numbers = true, value_parser = count_arg)]
    pub entries: Option<u64>,
    /// Operations of run phases, at least 1, and of db_bench's phases other than fills
    /// (db_bench's `--reads`). Default: bench 2,000,000, sim --entries; db_bench phases
    /// --entries.
    #[arg(long, allow_negative_numbers = true, value_parser = count_arg)]
    pub ops: Option<u64>,
    /// Key bytes, 1 to 64KiB (the engine's limit); below 8 only for workloads whose keys have a domain that fits, such as the partial-merge presets. Default 16. [SIZE: 4K = 4KB = 4KiB, any case]
    #[arg(long, value_name = "SIZE", value_parser = size_arg, allow_hyphen_values = true)]
    pub key_size: Option<u64>,
    /// Value bytes, up to 256MiB (the engine's limit). Default 100. [SIZE: 4K = 4KB = 4KiB, any
    /// case]
    #[arg(long, value_name = "SIZE", value_parser = size_arg, allow_hyphen_values = true)]
    pub value_size: Option<u64>,
    /// What values compress to, as a fraction of their size, above 0 and at most 1: each value
    /// is that share of random bytes repeated (db_bench's --compression_ratio). Default 1:
    /// random values.
    #[arg(long, value_name = "RATIO")]
    pub compression_ratio: Option<f64>,
    /// Threads of run phases and of db_bench's fills (fillseq, fillrandom: disjoint keys per
    /// thread), 1 to 1024 (the simulator replays one stream: thread 0's). Default 1.
    #[arg(long, allow_negative_numbers = true, value_parser = usize_arg)]
    pub threads: Option<usize>,
    /// Key distribution of YCSB and mixed workloads: uniform, zipfian, latest.
    #[arg(long)]
    pub distribution: Option<String>,
    /// Zipf exponent, above 0. Default 0.99.
    #[arg(
        long = "zipf-theta",
        visible_alias = "theta",
        allow_negative_numbers = true
    )]
    pub theta: Option<f64>,
    /// EcoTune: writer rate in MiB/s, above 0. Default 4.
    #[arg(long, allow_negative_numbers = true)]
    pub write_rate: Option<f64>,
    /// EcoTune: query arrivals per second, above 0. Default 5000.
    #[arg(long, allow_negative_numbers = true)]
    pub query_rate: Option<f64>,
    /// EcoTune: share of queries that are long scans (seek + 100 next), 0 to 1. Default 0.3.
    #[arg(long, allow_negative_numbers = true)]
    pub long_scan_share: Option<f64>,
    /// EcoTune: chance that a query arrival is a burst of `--burst-size` queries at once, 0 to 1
    /// (the paper's burst test: 0.05). Default 0, no bursts.
    #[arg(long, allow_negative_numbers = true)]
    pub burst_probability: Option<f64>,
    /// EcoTune: queries in a burst, at least 1. Default 20.
    #[arg(long, allow_negative_numbers = true)]
    pub burst_size: Option<u32>,
    /// Spooky: operations between moves of the zipfian hot set, at least 1. Default 100,000.
    #[arg(long, allow_negative_numbers = true, value_parser = count_arg)]
    pub hot_period: Option<u64>,
    /// Nearly-sorted ingest: disorder window in keys, at least 1. Default 1000.
    #[arg(long, allow_negative_numbers = true, value_parser = count_arg)]
    pub disorder: Option<u64>,
    /// multireadrandom: keys per batched read (db_bench's --batch_size, whose default is 1;
    /// here 32), 1 to 4096. A batch counts as that many operations (ops/s stays keys per
    /// second) and has one latency, "multiread". Only for workloads with a multireadrandom
    /// phase (a workload file sets `read_batch` per phase instead); `strata sim` replays a
    /// batch's reads one by one.
    #[arg(long, allow_negative_numbers = true, value_parser = usize_arg)]
    pub batch_size: Option<usize>,
    /// Seed of the workload generators: the same workload and seed give the same keys in sim
    /// and bench.
    #[arg(long, default_value_t = 42, allow_negative_numbers = true, value_parser = count_arg)]
    pub seed: u64,
}

/// The flag that sets a [`PresetParams`] field, for error messages.
fn flag_of(param: &str) -> &'static str {
    match param {
        "entries" => "--entries",
        "ops" => "--ops",
        "key_size" => "--key-size",
        "value_size" => "--value-size",
        "threads" => "--threads",
        "distribution" => "--distribution",
        "theta" => "--zipf-theta (--theta)",
        "write_rate_mib" => "--write-rate",
        "query_rate" => "--query-rate",
        "long_scan_share" => "--long-scan-share",
        "burst_probability" => "--burst-probability",
        "burst_size" => "--burst-size",
        "hot_period_ops" => "--hot-period",
        "disorder" => "--disorder",
        "batch_size" => "--batch-size",
        _ => "a workload option",
    }
}

/// A size for messages: `64KiB` when it is a small whole number of a unit, else `N bytes` (so
/// 100000000000 does not read as 97656250KiB).
pub fn show_size(bytes: u64) -> String {
    let text = format_size(bytes);
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits < text.len() && digits <= 4 {
        text
    } else {
        format!("{bytes} bytes")
    }
}

/// Prints a warning on stderr: something that does not stop the run but makes its numbers
/// suspect, or a flag that has no effect.
pub fn warn(message: &str) {
    eprintln!("warning: {message}");
}

/// Errors unless `bytes` (from the flag or file key `what`) is within `min..=max`.
fn check_size(what: &str, bytes: u64, min: u64, max: u64) -> Result<()> {
    if bytes < min {
        // Only keys have a minimum: one byte.
        bail!("{what} {bytes} is below {min} (keys need at least one byte)");
    }
    if bytes > max {
        bail!(
            "{what} {} is above the engine's limit of {} ({max} bytes)",
            show_size(bytes),
            format_size(max)
        );
    }
    Ok(())
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

    /// The preset parameters given on the command line, by flag.
    fn preset_flags(&self) -> Vec<&'static str> {
        [
            (self.entries.is_some(), "--entries"),
            (self.ops.is_some(), "--ops"),
            (self.key_size.is_some(), "--key-size"),
            (self.value_size.is_some(), "--value-size"),
            (self.compression_ratio.is_some(), "--compression-ratio"),
            (self.threads.is_some(), "--threads"),
            (self.distribution.is_some(), "--distribution"),
            (self.theta.is_some(), "--zipf-theta"),
            (self.write_rate.is_some(), "--write-rate"),
            (self.query_rate.is_some(), "--query-rate"),
            (self.long_scan_share.is_some(), "--long-scan-share"),
            (self.burst_probability.is_some(), "--burst-probability"),
            (self.burst_size.is_some(), "--burst-size"),
            (self.hot_period.is_some(), "--hot-period"),
            (self.disorder.is_some(), "--disorder"),
            (self.batch_size.is_some(), "--batch-size"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect()
    }

    /// The workload: `--workload` (or `default`), with `entries` and `ops` defaulting to the
    /// command's own defaults. Every flag and the file are checked here, before anything runs;
    /// errors name the flag, or the file with the key's line and column.
    pub fn spec(&self, default: &str, entries: u64, ops: Option<u64>) -> Result<WorkloadSpec> {
        let name = self.workload.as_deref().unwrap_or(default);
        if name.ends_with(".toml") {
            let text = std::fs::read_to_string(name)
                .map_err(|e| anyhow::anyhow!("--workload {name}: cannot read the file: {e}"))?;
            let spec = WorkloadSpec::from_toml(&text)
                .map_err(|e| anyhow::anyhow!("workload file {name}: {e}"))?;
            check_size(
                &format!("workload file {name}: key_size"),
                spec.key_size as u64,
                MIN_KEY_SIZE,
                MAX_KEY_SIZE as u64,
            )?;
            check_size(
                &format!("workload file {name}: value_size"),
                spec.value_size as u64,
                0,
                MAX_VALUE_SIZE as u64,
            )?;
            let ignored = self.preset_flags();
            if !ignored.is_empty() {
                warn(&format!(
                    "{} ignored: the workload file {name} sets its own sizes, phases and \
                     distributions",
                    ignored.join(", ")
                ));
            }
            return Ok(spec);
        }
        let defaults = PresetParams::default();
        let key_size = self.key_size.unwrap_or(defaults.key_size as u64);
        let value_size = self.value_size.unwrap_or(defaults.value_size as u64);
        check_size("--key-size", key_size, MIN_KEY_SIZE, MAX_KEY_SIZE as u64)?;
        check_size("--value-size", value_size, 0, MAX_VALUE_SIZE as u64)?;
        let entries = self.entries.unwrap_or(entries);
        let params = PresetParams {
            entries,
            ops: self.ops.or(ops).unwrap_or(entries),
            // Both are at most MAX_VALUE_SIZE, which fits in usize.
            key_size: key_size as usize,
            value_size: value_size as usize,
            compression_ratio: self.compression_ratio.unwrap_or(defaults.compression_ratio),
            threads: self.threads.unwrap_or(defaults.threads),
            distribution: self.distribution.clone(),
            theta: self.theta.unwrap_or(defaults.theta),
            write_rate_mib: self.write_rate.unwrap_or(defaults.write_rate_mib),
            query_rate: self.query_rate.unwrap_or(defaults.query_rate),
            long_scan_share: self.long_scan_share.unwrap_or(defaults.long_scan_share),
            burst_probability: self.burst_probability.unwrap_or(defaults.burst_probability),
            burst_size: self.burst_size.unwrap_or(defaults.burst_size),
            hot_period_ops: self.hot_period.unwrap_or(defaults.hot_period_ops),
            disorder: self.disorder.unwrap_or(defaults.disorder),
            batch_size: self.batch_size.unwrap_or(defaults.batch_size),
            db_bench_ops: self.ops,
        };
        params.validate().map_err(|ParamError { param, problem }| {
            anyhow::anyhow!("{} {problem}", flag_of(param))
        })?;
        let spec =
            WorkloadSpec::preset(name, &params).map_err(|e| anyhow::anyhow!("--workload: {e}"))?;
        // A batch size nothing uses would leave the user believing reads were batched.
        let batched = spec.phases.iter().any(|p| p.name == "multireadrandom");
        if self.batch_size.is_some() && !batched {
            bail!(
                "--batch-size applies to multireadrandom phases only, and --workload {name} has \
                 none; add multireadrandom to --workload or leave --batch-size out"
            );
        }
        Ok(spec)
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

/// Warns when `spec` writes less than one write buffer of `buffer` bytes: amplification is then
/// measured on one flush at most, not on compaction.
pub fn warn_if_smaller_than_a_buffer(spec: &WorkloadSpec, buffer: u64) {
    // Phases bounded only by time may write any amount.
    if spec.phases.iter().any(|p| p.ops == 0) {
        return;
    }
    let bytes = ingest_bytes(spec);
    if bytes < buffer {
        warn(&format!(
            "the workload writes at most {} ({} operations of {} bytes), less than one write \
             buffer ({}): nothing is compacted, so write and space amplification will not mean \
             much; raise --entries/--ops or lower --write-buffer-size",
            show_size(bytes),
            spec.phases.iter().map(|p| p.ops).sum::<u64>(),
            spec.key_size + spec.value_size,
            show_size(buffer)
        ));
    }
}
