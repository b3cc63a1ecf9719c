//! Named workloads: db_bench phases, YCSB A–F, the papers' workloads, and the simulator's fills.

use crate::spec::{
    Burst, InsertOrder, KeyDist, Mix, OpenLoop, PhaseSpec, RateLimitedWriter, WorkloadSpec,
    MAX_READ_BATCH, MAX_THREADS,
};
use std::fmt;

/// Parameters the presets take from the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct PresetParams {
    /// Records loaded / entries of fill phases.
    pub entries: u64,
    /// Operations of run phases.
    pub ops: u64,
    /// Operations of db_bench's phases other than its fills (db_bench's `--reads` for every such
    /// phase); `None`: `entries`, as db_bench does without `--reads`.
    pub db_bench_ops: Option<u64>,
    /// Key bytes.
    pub key_size: usize,
    /// Value bytes.
    pub value_size: usize,
    /// Threads of run phases.
    pub threads: usize,
    /// Distribution override for YCSB and the papers' mixes ("uniform", "zipfian", "latest").
    pub distribution: Option<String>,
    /// Zipf exponent.
    pub theta: f64,
    /// EcoTune: writer rate in MiB/s.
    pub write_rate_mib: f64,
    /// EcoTune: query arrivals per second.
    pub query_rate: f64,
    /// EcoTune: share of queries that are long scans.
    pub long_scan_share: f64,
    /// EcoTune: chance that a query arrival is a burst (0: no bursts).
    pub burst_probability: f64,
    /// EcoTune: queries in a burst.
    pub burst_size: u32,
    /// Spooky: operations between moves of the hot set.
    pub hot_period_ops: u64,
    /// Nearly-sorted ingest: disorder window in keys.
    pub disorder: u64,
    /// multireadrandom: keys per batched read ([`PhaseSpec::read_batch`]), 1 to
    /// [`MAX_READ_BATCH`]. Default 32; db_bench's `--batch_size` defaults to 1, which makes its
    /// multireadrandom a readrandom through the MultiGet call.
    pub batch_size: usize,
    /// [`WorkloadSpec::compression_ratio`]. Default 1.
    pub compression_ratio: f64,
}

impl Default for PresetParams {
    fn default() -> Self {
        PresetParams {
            entries: 1_000_000,
            ops: 1_000_000,
            key_size: 16,
            value_size: 100,
            threads: 1,
            distribution: None,
            theta: 0.99,
            write_rate_mib: 4.0,
            query_rate: 5_000.0,
            long_scan_share: 0.3,
            burst_probability: 0.0,
            burst_size: 20,
            hot_period_ops: 100_000,
            disorder: 1_000,
            batch_size: DEFAULT_BATCH_SIZE,
            db_bench_ops: None,
            compression_ratio: 1.0,
        }
    }
}

/// [`PresetParams::batch_size`]'s default: a batch large enough for a batched read to keep a
/// device's queue busy (32 reads, the queue depth `strata bench --device-probe` measures).
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// A preset parameter out of range: which [`PresetParams`] field, and what is wrong with it. A
/// command line maps `param` to the flag that set it, so its message names what the user typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamError {
    /// The field of [`PresetParams`] (`entries`, `theta`, ...).
    pub param: &'static str,
    /// What is wrong, as a phrase that follows the name ("is 0; it must be at least 1").
    pub problem: String,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.param, self.problem)
    }
}

impl std::error::Error for ParamError {}

/// The distributions [`PresetParams::distribution`] may name.
pub const DISTRIBUTIONS: &[&str] = &["uniform", "zipfian", "latest"];

impl PresetParams {
    /// Checks every parameter, whether or not the preset uses it, so a bad value is caught
    /// before anything runs; the error names the first bad field.
    pub fn validate(&self) -> Result<(), ParamError> {
        let err = |param: &'static str, problem: String| Err(ParamError { param, problem });
        let count = |param: &'static str, value: u64| {
            if value == 0 {
                err(param, "is 0; it must be at least 1".to_string())
            } else {
                Ok(())
            }
        };
        let positive = |param: &'static str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                err(
                    param,
                    format!("is {value}; it must be a finite number above 0"),
                )
            }
        };
        count("entries", self.entries)?;
        count("ops", self.ops)?;
        let tracked = crate::keys::MAX_TRACKED_INDEX;
        for (param, value) in [("entries", self.entries), ("ops", self.ops)] {
            if value > tracked {
                return err(
                    param,
                    format!("is {value}, more than the {tracked} keys a workload can track"),
                );
            }
        }
        if self.key_size == 0 {
            return err("key_size", "is 0; keys need at least one byte".to_string());
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return err(
                "threads",
                format!(
                    "is {}; it must be between 1 and {MAX_THREADS}",
                    self.threads
                ),
            );
        }
        if let Some(d) = &self.distribution {
            if !DISTRIBUTIONS.contains(&d.as_str()) {
                return err(
                    "distribution",
                    format!("is {d:?}; use {}", DISTRIBUTIONS.join(", ")),
                );
            }
        }
        positive("theta", self.theta)?;
        positive("write_rate_mib", self.write_rate_mib)?;
        positive("query_rate", self.query_rate)?;
        let fraction = |param: &'static str, what: &str, value: f64| {
            if (0.0..=1.0).contains(&value) {
                Ok(())
            } else {
                err(
                    param,
                    format!("is {value}; it must be a {what} between 0 and 1"),
                )
            }
        };
        fraction("long_scan_share", "share", self.long_scan_share)?;
        fraction("burst_probability", "probability", self.burst_probability)?;
        count("burst_size", u64::from(self.burst_size))?;
        count("hot_period_ops", self.hot_period_ops)?;
        count("disorder", self.disorder)?;
        if self.batch_size == 0 || self.batch_size > MAX_READ_BATCH {
            return err(
                "batch_size",
                format!(
                    "is {}; it must be between 1 and {MAX_READ_BATCH}",
                    self.batch_size
                ),
            );
        }
        Ok(())
    }
}

/// Names of the presets, with one line each.
pub const PRESETS: &[(&str, &str)] = &[
    ("fillunique", "insert distinct keys in random order (YCSB's load phase; the simulator's default)"),
    ("updaterandom", "fillunique, then updates of uniformly chosen existing keys"),
    ("updatezipf", "fillunique, then zipfian updates (hot keys scattered over the key space)"),
    ("mixed", "load, then 50% reads, 35% updates, 10% inserts, 5% short scans (zipfian): the default comparison"),
    ("fillseq", "db_bench: insert keys in ascending order"),
    ("fillrandom", "db_bench: insert keys drawn uniformly from [0, entries) (repeats overwrite)"),
    ("overwrite", "db_bench: update uniformly chosen keys of a filled database"),
    ("readrandom", "db_bench: point reads of uniformly chosen keys (63% exist after fillrandom)"),
    ("multireadrandom", "db_bench: readrandom in batches of --batch-size keys through the engines' MultiGet (default 32; db_bench's is 1)"),
    ("readseq", "db_bench: read every entry in key order with one iterator"),
    ("seekrandom", "db_bench: seek to a random key and read 10 entries"),
    ("readwhilewriting", "db_bench: readrandom on the run threads while one writer overwrites at full speed"),
    ("deleterandom", "db_bench: delete uniformly chosen keys"),
    ("ycsb-a", "YCSB A: 50% reads, 50% updates, zipfian"),
    ("ycsb-b", "YCSB B: 95% reads, 5% updates, zipfian"),
    ("ycsb-c", "YCSB C: 100% reads, zipfian"),
    ("ycsb-d", "YCSB D: 95% reads, 5% inserts, latest"),
    ("ycsb-e", "YCSB E: 95% scans of 1-100 entries, 5% inserts, zipfian"),
    ("ycsb-f", "YCSB F: 50% reads, 50% read-modify-writes, zipfian"),
    ("vertiorizon-balanced", "Vertiorizon: bulk load, then 50% updates / 50% point lookups"),
    ("vertiorizon-write-heavy", "Vertiorizon: bulk load, then 90% updates / 10% point lookups"),
    ("vertiorizon-read-heavy", "Vertiorizon: bulk load, then 10% updates / 90% point lookups"),
    ("vertiorizon-range", "Vertiorizon: bulk load, then 75% updates / 25% range lookups (100 entries)"),
    ("ecotune", "EcoTune: rate-limited writer (MiB/s) beside an open-loop query stream with a long-scan share"),
    ("spooky-uniform", "Spooky: uniform fill, then a long phase of uniform updates"),
    ("spooky-zipf", "Spooky: uniform fill, then zipfian updates whose hot set moves every period"),
    ("partial-merge-uniform", "Partial merges: fill, then 50/50 inserts of new keys and deletes of live ones, uniform (unmeasured settle phase of 2 × ops first)"),
    ("partial-merge-normal", "Partial merges: 50/50 inserts and deletes, inserts from a shifting normal"),
    ("partial-merge-tpcc", "Partial merges: TPC-C NEW_ORDER-like inserts, deletes of the oldest orders"),
    ("nearly-sorted", "time-series ingest: ascending keys with bounded disorder (bucket ingestion)"),
    ("minmax-queries", "Min-Max: nearly sorted ingest, then the paper's five range queries Q1-Q5 (selectivity 0.003 to 0.05 of the entries), 20 each"),
    ("phase-change", "nearly sorted ingest, then zipfian point reads, then scans, then uniform updates: a workload whose best policy changes (--ops each phase, a tenth for scans)"),
];

/// The share of `--ops` the scan phase of `phase-change` runs: a scan of up to 100 entries
/// costs tens of point operations, and the phases should take times of one order.
pub const PHASE_CHANGE_SCAN_SHARE: f64 = 0.1;

/// The Min-Max paper's range queries Q1–Q5: the share of the keys each reads (Sec. 4).
pub const MINMAX_QUERY_SELECTIVITY: [f64; 5] = [0.003, 0.006, 0.015, 0.026, 0.05];

/// Queries per phase of the `minmax-queries` preset.
const MINMAX_QUERIES_PER_PHASE: u64 = 20;

impl WorkloadSpec {
    /// The preset `name` (see [`PRESETS`]); db_bench names may be comma-separated to run them in
    /// order on one database, like db_bench's `--benchmarks`. The parameters are checked first
    /// ([`PresetParams::validate`]).
    pub fn preset(name: &str, p: &PresetParams) -> Result<WorkloadSpec, String> {
        p.validate().map_err(|e| e.to_string())?;
        let names: Vec<&str> = name
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if names.len() > 1 || DB_BENCH.contains(&name) {
            return db_bench(&names, p);
        }
        let dist = |default: KeyDist| -> Result<KeyDist, String> {
            match p.distribution.as_deref() {
                None => Ok(default),
                Some("uniform") => Ok(KeyDist::Uniform),
                Some("zipfian") => Ok(KeyDist::Zipfian { theta: p.theta }),
                Some("latest") => Ok(KeyDist::Latest { theta: p.theta }),
                Some(other) => Err(format!(
                    "unknown distribution {other:?}; use uniform, zipfian or latest"
                )),
            }
        };
        let zipf = KeyDist::Zipfian { theta: p.theta };
        let load = |name: &str| PhaseSpec {
            name: name.to_string(),
            ops: p.entries,
            duration_secs: 0.0,
            threads: 1,
            mix: Mix {
                insert: 1.0,
                ..Mix::default()
            },
            keys: KeyDist::Uniform,
            inserts: InsertOrder::Random,
            scan_length: 10,
            long_scan_length: 100,
            random_scan_length: false,
            measured: true,
            open_loop: None,
            writer: None,
            background_writer: None,
            read_batch: 1,
        };
        let run = |mix: Mix, keys: KeyDist| PhaseSpec {
            name: "run".to_string(),
            ops: p.ops,
            threads: p.threads,
            mix,
            keys,
            ..load("run")
        };
        let m = |insert: f64, update: f64, read: f64, scan: f64, delete: f64, rmw: f64| Mix {
            insert,
            update,
            read,
            scan,
            long_scan: 0.0,
            delete,
            rmw,
        };
        let (description, phases) = match name {
            "fillunique" => ("distinct keys in random order", vec![load("load")]),
            "updaterandom" => (
                "fill, then uniform updates of existing keys",
                vec![load("load"), run(m(0.0, 1.0, 0.0, 0.0, 0.0, 0.0), dist(KeyDist::Uniform)?)],
            ),
            "updatezipf" => (
                "fill, then zipfian updates of existing keys",
                vec![load("load"), run(m(0.0, 1.0, 0.0, 0.0, 0.0, 0.0), dist(zipf)?)],
            ),
            "mixed" => (
                "load, then 50% reads / 35% updates / 10% inserts / 5% scans of 10 entries, zipfian",
                vec![load("load"), run(m(0.10, 0.35, 0.50, 0.05, 0.0, 0.0), dist(zipf)?)],
            ),
            "ycsb-a" => ("YCSB A", vec![load("load"), run(m(0.0, 0.5, 0.5, 0.0, 0.0, 0.0), dist(zipf)?)]),
            "ycsb-b" => ("YCSB B", vec![load("load"), run(m(0.0, 0.05, 0.95, 0.0, 0.0, 0.0), dist(zipf)?)]),
            "ycsb-c" => ("YCSB C", vec![load("load"), run(m(0.0, 0.0, 1.0, 0.0, 0.0, 0.0), dist(zipf)?)]),
            "ycsb-d" => (
                "YCSB D",
                vec![load("load"), run(m(0.05, 0.0, 0.95, 0.0, 0.0, 0.0), dist(KeyDist::Latest { theta: p.theta })?)],
            ),
            "ycsb-e" => {
                let mut r = run(m(0.05, 0.0, 0.0, 0.95, 0.0, 0.0), dist(zipf)?);
                r.scan_length = 100;
                r.random_scan_length = true;
                ("YCSB E", vec![load("load"), r])
            }
            "ycsb-f" => ("YCSB F", vec![load("load"), run(m(0.0, 0.0, 0.5, 0.0, 0.0, 0.5), dist(zipf)?)]),
            "vertiorizon-balanced" => (
                "Vertiorizon balanced: 50% updates, 50% point lookups",
                vec![load("load"), run(m(0.0, 0.5, 0.5, 0.0, 0.0, 0.0), dist(KeyDist::Uniform)?)],
            ),
            "vertiorizon-write-heavy" => (
                "Vertiorizon write-heavy: 90% updates, 10% point lookups",
                vec![load("load"), run(m(0.0, 0.9, 0.1, 0.0, 0.0, 0.0), dist(KeyDist::Uniform)?)],
            ),
            "vertiorizon-read-heavy" => (
                "Vertiorizon read-heavy: 10% updates, 90% point lookups",
                vec![load("load"), run(m(0.0, 0.1, 0.9, 0.0, 0.0, 0.0), dist(KeyDist::Uniform)?)],
            ),
            "vertiorizon-range" => {
                let mut r = run(m(0.0, 0.75, 0.0, 0.25, 0.0, 0.0), dist(KeyDist::Uniform)?);
                r.scan_length = 100;
                ("Vertiorizon range: 75% updates, 25% range lookups of 100 entries", vec![load("load"), r])
            }
            "ecotune" => {
                let r = p.long_scan_share.clamp(0.0, 1.0);
                let mut q = run(
                    Mix {
                        long_scan: r,
                        scan: (1.0 - r) / 2.0,
                        read: (1.0 - r) / 2.0,
                        ..Mix::default()
                    },
                    KeyDist::Uniform,
                );
                // EcoTune's "seek" is a bare seek; its long scan is seek + 100 next.
                q.scan_length = 1;
                q.long_scan_length = 100;
                q.open_loop = Some(OpenLoop {
                    queries_per_sec: p.query_rate,
                    burst: (p.burst_probability > 0.0).then_some(Burst {
                        probability: p.burst_probability,
                        size: p.burst_size,
                    }),
                });
                q.writer = Some(RateLimitedWriter {
                    mib_per_sec: p.write_rate_mib,
                    mix: Mix {
                        update: 1.0,
                        ..Mix::default()
                    },
                });
                ("EcoTune: rate-limited updates beside open-loop gets, seeks and long scans", vec![load("load"), q])
            }
            "spooky-uniform" => (
                "Spooky: uniform fill, then uniform updates",
                vec![load("load"), run(m(0.0, 1.0, 0.0, 0.0, 0.0, 0.0), KeyDist::Uniform)],
            ),
            "spooky-zipf" => (
                "Spooky: uniform fill, then zipfian updates with a moving hot set",
                vec![
                    load("load"),
                    run(
                        m(0.0, 1.0, 0.0, 0.0, 0.0, 0.0),
                        KeyDist::ShiftingZipfian {
                            theta: 1.0,
                            period_ops: p.hot_period_ops,
                        },
                    ),
                ],
            ),
            "partial-merge-uniform" | "partial-merge-normal" | "partial-merge-tpcc" => {
                // The paper's keys: 4-byte numbers in [0, 10^9].
                let domain = 1_000_000_000;
                let inserts = match name {
                    "partial-merge-uniform" => InsertOrder::UniformUnique { domain },
                    "partial-merge-normal" => InsertOrder::ShiftingNormal {
                        domain,
                        sigma: 0.005,
                        period_inserts: 10_000,
                    },
                    _ => InsertOrder::TpccNewOrder { warehouses: 10 },
                };
                let mut l = load("load");
                l.inserts = inserts.clone();
                let mut r = run(m(0.5, 0.0, 0.0, 0.0, 0.5, 0.0), KeyDist::Uniform);
                r.inserts = inserts;
                // The paper's runs are single-threaded; the key bookkeeping assumes it.
                r.threads = 1;
                // The paper measures in steady state, after the levels have turned over and
                // Mixed has learned: an unmeasured 50/50 phase of twice the length comes first.
                let mut settle = r.clone();
                settle.name = "settle".to_string();
                settle.measured = false;
                settle.ops = settle.ops.saturating_mul(2);
                (
                    "partial-merge steady state: 50% inserts, 50% deletes after twice as many unmeasured",
                    vec![l, settle, r],
                )
            }
            "nearly-sorted" => {
                let mut l = load("ingest");
                l.inserts = InsertOrder::NearlySorted { window: p.disorder };
                ("nearly sorted ingest with bounded disorder", vec![l])
            }
            "minmax-queries" => {
                let mut l = load("ingest");
                l.inserts = InsertOrder::NearlySorted { window: p.disorder };
                let mut phases = vec![l];
                for (i, selectivity) in MINMAX_QUERY_SELECTIVITY.iter().enumerate() {
                    // A query reads its share of the keys from a uniformly random start.
                    let mut q = run(m(0.0, 0.0, 0.0, 1.0, 0.0, 0.0), KeyDist::Uniform);
                    q.name = format!("q{}", i + 1);
                    q.ops = MINMAX_QUERIES_PER_PHASE;
                    q.threads = 1;
                    // The ingest's key numbering (not scrambled), so starts are stored keys.
                    q.inserts = InsertOrder::NearlySorted { window: p.disorder };
                    q.scan_length = ((p.entries as f64 * selectivity).round() as usize).max(1);
                    phases.push(q);
                }
                (
                    "nearly sorted ingest, then range queries Q1-Q5 reading 0.3% to 5% of the keys",
                    phases,
                )
            }
            "phase-change" => {
                let nearly_sorted = || InsertOrder::NearlySorted { window: p.disorder };
                let mut ingest = load("ingest");
                ingest.inserts = nearly_sorted();
                let phase = |name: &str, mix: Mix, keys: KeyDist, ops: u64| {
                    let mut phase = run(mix, keys);
                    phase.name = name.to_string();
                    phase.ops = ops;
                    // The ingest's key numbering, so reads and updates find stored keys.
                    phase.inserts = nearly_sorted();
                    phase
                };
                let mut scans = phase(
                    "scans",
                    m(0.0, 0.05, 0.0, 0.95, 0.0, 0.0),
                    zipf.clone(),
                    ((p.ops as f64 * PHASE_CHANGE_SCAN_SHARE) as u64).max(1),
                );
                scans.scan_length = 100;
                scans.random_scan_length = true;
                (
                    "nearly sorted ingest, then 95% zipfian point reads, then 95% scans of 1-100 \
                     entries, then uniform updates (5% updates beside the reads and the scans)",
                    vec![
                        ingest,
                        phase("reads", m(0.0, 0.05, 0.95, 0.0, 0.0, 0.0), zipf.clone(), p.ops),
                        scans,
                        phase("updates", m(0.0, 1.0, 0.0, 0.0, 0.0, 0.0), KeyDist::Uniform, p.ops),
                    ],
                )
            }
            other => {
                let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
                return Err(format!("unknown workload {other:?}; presets: {}", names.join(", ")));
            }
        };
        assemble(name.to_string(), description.to_string(), p, phases)
    }
}

/// A preset workload of `phases` with the parameters' key and value sizes, validated.
fn assemble(
    name: String,
    description: String,
    p: &PresetParams,
    phases: Vec<PhaseSpec>,
) -> Result<WorkloadSpec, String> {
    let spec = WorkloadSpec {
        name,
        description,
        key_size: p.key_size,
        value_size: p.value_size,
        compression_ratio: p.compression_ratio,
        phases,
        policies: Vec::new(),
        policy_options: Default::default(),
    };
    spec.validate()?;
    Ok(spec)
}

const DB_BENCH: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "multireadrandom",
    "readseq",
    "seekrandom",
    "readwhilewriting",
    "deleterandom",
];

/// db_bench phases in order on one database; a read, overwrite or delete phase that comes first
/// gets an unmeasured fillrandom before it (db_bench would read an empty database).
fn db_bench(names: &[&str], p: &PresetParams) -> Result<WorkloadSpec, String> {
    let domain = InsertOrder::UniformDomain {
        size: p.entries.max(1),
    };
    let base = PhaseSpec {
        name: String::new(),
        ops: p.entries,
        duration_secs: 0.0,
        threads: 1,
        mix: Mix::default(),
        keys: KeyDist::Uniform,
        inserts: domain.clone(),
        scan_length: 10,
        long_scan_length: 100,
        random_scan_length: false,
        measured: true,
        open_loop: None,
        writer: None,
        background_writer: None,
        read_batch: 1,
    };
    let mut phases = Vec::new();
    for (i, &n) in names.iter().enumerate() {
        if !DB_BENCH.contains(&n) {
            return Err(format!(
                "unknown db_bench phase {n:?}; expected one of {}",
                DB_BENCH.join(", ")
            ));
        }
        let mut ph = PhaseSpec {
            name: n.to_string(),
            ..base.clone()
        };
        if !matches!(n, "fillseq" | "fillrandom") {
            ph.ops = p.db_bench_ops.unwrap_or(p.entries);
        }
        match n {
            "fillseq" => {
                ph.mix.insert = 1.0;
                ph.inserts = InsertOrder::Sequential;
            }
            "fillrandom" => ph.mix.insert = 1.0,
            "overwrite" => ph.mix.update = 1.0,
            "readrandom" => ph.mix.read = 1.0,
            "multireadrandom" => {
                ph.mix.read = 1.0;
                ph.read_batch = p.batch_size;
            }
            "readseq" => {
                // One long scan over everything.
                ph.mix.long_scan = 1.0;
                ph.ops = 1;
                ph.long_scan_length = usize::MAX;
            }
            "seekrandom" => ph.mix.scan = 1.0,
            "readwhilewriting" => {
                ph.mix.read = 1.0;
                ph.background_writer = Some(Mix {
                    update: 1.0,
                    ..Mix::default()
                });
            }
            _ => ph.mix.delete = 1.0,
        }
        // Every phase runs on `--threads` threads, as db_bench's do: a fill's threads write
        // disjoint streams of keys (each takes the next key index from the shared key space),
        // so together they write each key once. readseq is one scan; the unmeasured fill that
        // precedes reads below stays on one thread, so the database they read is the same.
        if n != "readseq" {
            ph.threads = p.threads.max(1);
        }
        if i == 0 && !matches!(n, "fillseq" | "fillrandom") {
            phases.push(PhaseSpec {
                name: "fillrandom".to_string(),
                mix: Mix {
                    insert: 1.0,
                    ..Mix::default()
                },
                measured: false,
                ..base.clone()
            });
        }
        phases.push(ph);
    }
    assemble(
        names.join(","),
        format!("db_bench {}", names.join(",")),
        p,
        phases,
    )
}
