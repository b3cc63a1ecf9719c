//! Workloads: named presets (db_bench phases, YCSB A–F, the papers' workloads) and TOML files,
//! turned into per-thread operation generators.

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal, Zipf};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How existing keys are chosen for reads, updates, scans, deletes and read-modify-writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum KeyDist {
    /// Uniform over the keys inserted so far.
    Uniform,
    /// Zipfian with exponent `theta`, hot keys scattered over the key space (YCSB's scrambled
    /// zipfian).
    Zipfian {
        /// Exponent (YCSB uses 0.99).
        theta: f64,
    },
    /// Zipfian over recency: the most recently inserted keys are the hottest (YCSB "latest").
    Latest {
        /// Exponent.
        theta: f64,
    },
    /// Zipfian whose hot set moves to other keys every `period_ops` operations (Spooky).
    ShiftingZipfian {
        /// Exponent.
        theta: f64,
        /// Operations between moves of the hot set.
        period_ops: u64,
    },
}

/// How new keys are chosen by inserts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum InsertOrder {
    /// Unique keys in random order.
    #[default]
    Random,
    /// Unique keys in ascending order.
    Sequential,
    /// Ascending with bounded disorder: each key lands at most about `window` positions away
    /// from its sorted place (time series with late arrivals).
    NearlySorted {
        /// Disorder window, in keys.
        window: u64,
    },
    /// Keys drawn uniformly, with replacement, from a domain of `size` keys (db_bench's
    /// fillrandom: repeats are overwrites).
    UniformDomain {
        /// Domain size.
        size: u64,
    },
    /// Keys from a normal distribution over a domain whose mean jumps to a random place every
    /// `period_inserts` inserts (the partial-merge paper's Normal(σ, ω)).
    ShiftingNormal {
        /// Domain size.
        domain: u64,
        /// Standard deviation as a fraction of the domain.
        sigma: f64,
        /// Inserts between jumps of the mean.
        period_inserts: u64,
    },
    /// TPC-C NEW_ORDER-like keys: (warehouse, district, order id), order ids ascending per
    /// district; deletes remove a district's ten oldest orders.
    TpccNewOrder {
        /// Warehouses.
        warehouses: u64,
    },
}

/// Relative weights of operation types.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Mix {
    /// Inserts of new keys.
    pub insert: f64,
    /// Updates of existing keys.
    pub update: f64,
    /// Point reads.
    pub read: f64,
    /// Short scans (seek + `scan_length` next).
    pub scan: f64,
    /// Long scans (seek + `long_scan_length` next).
    pub long_scan: f64,
    /// Deletes of existing keys.
    pub delete: f64,
    /// Read-modify-writes.
    pub rmw: f64,
}

impl Mix {
    fn total(&self) -> f64 {
        self.insert + self.update + self.read + self.scan + self.long_scan + self.delete + self.rmw
    }
}

/// An open-loop query stream: arrivals at a fixed rate, latency counted from the arrival.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenLoop {
    /// Query arrivals per second, over all query threads.
    pub queries_per_sec: f64,
}

/// A background writer beside the main threads, at a fixed rate (EcoTune's rate-limited writer).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateLimitedWriter {
    /// User bytes per second.
    pub mib_per_sec: f64,
    /// What it writes.
    pub mix: Mix,
}

fn one() -> usize {
    1
}

fn yes() -> bool {
    true
}

fn default_scan() -> usize {
    10
}

fn default_long_scan() -> usize {
    100
}

/// One phase: a number of operations (or a duration) of a mix, on some threads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseSpec {
    /// Name shown in results.
    pub name: String,
    /// Operations over all threads (the phase ends at whichever of ops and duration comes first;
    /// 0 means no limit).
    #[serde(default)]
    pub ops: u64,
    /// Seconds (0 means no limit).
    #[serde(default)]
    pub duration_secs: f64,
    /// Threads issuing the mix.
    #[serde(default = "one")]
    pub threads: usize,
    /// The operation mix.
    pub mix: Mix,
    /// How existing keys are chosen.
    #[serde(default = "uniform")]
    pub keys: KeyDist,
    /// How inserted keys are chosen.
    #[serde(default)]
    pub inserts: InsertOrder,
    /// Entries read by a short scan.
    #[serde(default = "default_scan")]
    pub scan_length: usize,
    /// Entries read by a long scan.
    #[serde(default = "default_long_scan")]
    pub long_scan_length: usize,
    /// Short scans read a uniformly random length in 1..=scan_length (YCSB E).
    #[serde(default)]
    pub random_scan_length: bool,
    /// Whether the phase is reported (load phases usually are not the point).
    #[serde(default = "yes")]
    pub measured: bool,
    /// Open-loop arrivals for the main threads, if set.
    #[serde(default)]
    pub open_loop: Option<OpenLoop>,
    /// A rate-limited writer running beside the main threads, if set.
    #[serde(default)]
    pub writer: Option<RateLimitedWriter>,
    /// A writer thread running at full speed beside the main threads (db_bench's
    /// readwhilewriting), if set.
    #[serde(default)]
    pub background_writer: Option<Mix>,
}

fn uniform() -> KeyDist {
    KeyDist::Uniform
}

/// A workload: key and value sizes and phases run in order on one database.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSpec {
    /// Name.
    pub name: String,
    /// One line saying what it is.
    #[serde(default)]
    pub description: String,
    /// Key bytes (at least 8: the first 8 bytes are the key number, big-endian).
    #[serde(default = "default_key_size")]
    pub key_size: usize,
    /// Value bytes.
    #[serde(default = "default_value_size")]
    pub value_size: usize,
    /// Phases.
    pub phases: Vec<PhaseSpec>,
}

fn default_key_size() -> usize {
    16
}

fn default_value_size() -> usize {
    100
}

/// Parameters the presets take from the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct PresetParams {
    /// Records loaded / entries of fill phases.
    pub entries: u64,
    /// Operations of run phases.
    pub ops: u64,
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
    /// Spooky: operations between moves of the hot set.
    pub hot_period_ops: u64,
    /// Nearly-sorted ingest: disorder window in keys.
    pub disorder: u64,
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
            hot_period_ops: 100_000,
            disorder: 1_000,
        }
    }
}

/// Names of the presets, with one line each.
pub const PRESETS: &[(&str, &str)] = &[
    ("mixed", "load, then 50% reads, 35% updates, 10% inserts, 5% short scans (zipfian): the default comparison"),
    ("fillseq", "db_bench: insert keys in ascending order"),
    ("fillrandom", "db_bench: insert keys drawn uniformly from [0, entries) (repeats overwrite)"),
    ("overwrite", "db_bench: update uniformly chosen keys of a filled database"),
    ("readrandom", "db_bench: point reads of uniformly chosen keys (63% exist after fillrandom)"),
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
    ("partial-merge-uniform", "Partial merges: fill, then 50/50 inserts of new keys and deletes, uniform"),
    ("partial-merge-normal", "Partial merges: 50/50 inserts and deletes, inserts from a shifting normal"),
    ("partial-merge-tpcc", "Partial merges: TPC-C NEW_ORDER-like inserts, deletes of the oldest orders"),
    ("nearly-sorted", "time-series ingest: ascending keys with bounded disorder (bucket ingestion)"),
];

impl WorkloadSpec {
    /// Loads a workload from TOML text.
    pub fn from_toml(text: &str) -> Result<WorkloadSpec, String> {
        let spec: WorkloadSpec = toml::from_str(text).map_err(|e| format!("workload file: {e}"))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the parameters, naming the first problem.
    pub fn validate(&self) -> Result<(), String> {
        if self.key_size < 8 {
            return Err(format!(
                "key_size {} is below 8 (keys carry an 8-byte number)",
                self.key_size
            ));
        }
        if self.phases.is_empty() {
            return Err("a workload needs at least one phase".to_string());
        }
        for p in &self.phases {
            if p.ops == 0 && p.duration_secs <= 0.0 {
                return Err(format!(
                    "phase {:?} has neither ops nor duration_secs",
                    p.name
                ));
            }
            if p.mix.total().is_nan() || p.mix.total() <= 0.0 {
                return Err(format!(
                    "phase {:?} has no operation with a positive weight",
                    p.name
                ));
            }
            if p.threads == 0 {
                return Err(format!("phase {:?} has 0 threads", p.name));
            }
            for (what, theta) in match &p.keys {
                KeyDist::Zipfian { theta }
                | KeyDist::Latest { theta }
                | KeyDist::ShiftingZipfian { theta, .. } => {
                    vec![("theta", *theta)]
                }
                KeyDist::Uniform => vec![],
            } {
                if !(theta.is_finite() && theta > 0.0) {
                    return Err(format!("phase {:?}: {what} must be positive", p.name));
                }
            }
        }
        Ok(())
    }

    /// The preset `name` (see [`PRESETS`]); db_bench names may be comma-separated to run them in
    /// order on one database, like db_bench's `--benchmarks`.
    pub fn preset(name: &str, p: &PresetParams) -> Result<WorkloadSpec, String> {
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
                let domain = p.entries.saturating_mul(1000).max(1);
                let inserts = match name {
                    "partial-merge-uniform" => InsertOrder::UniformDomain { size: domain },
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
                ("partial-merge steady state: 50% inserts, 50% deletes", vec![l, r])
            }
            "nearly-sorted" => {
                let mut l = load("ingest");
                l.inserts = InsertOrder::NearlySorted { window: p.disorder };
                ("nearly sorted ingest with bounded disorder", vec![l])
            }
            other => {
                let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
                return Err(format!("unknown workload {other:?}; presets: {}", names.join(", ")));
            }
        };
        let spec = WorkloadSpec {
            name: name.to_string(),
            description: description.to_string(),
            key_size: p.key_size,
            value_size: p.value_size,
            phases,
        };
        spec.validate()?;
        Ok(spec)
    }
}

const DB_BENCH: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
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
        match n {
            "fillseq" => {
                ph.mix.insert = 1.0;
                ph.inserts = InsertOrder::Sequential;
            }
            "fillrandom" => ph.mix.insert = 1.0,
            "overwrite" => ph.mix.update = 1.0,
            "readrandom" => ph.mix.read = 1.0,
            "readseq" => {
                // One long scan over everything.
                ph.mix.long_scan = 1.0;
                ph.ops = 1;
                ph.long_scan_length = usize::MAX;
            }
            "seekrandom" => ph.mix.scan = 1.0,
            "readwhilewriting" => {
                ph.mix.read = 1.0;
                ph.threads = p.threads.max(1);
                ph.background_writer = Some(Mix {
                    update: 1.0,
                    ..Mix::default()
                });
            }
            _ => ph.mix.delete = 1.0,
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
    let spec = WorkloadSpec {
        name: names.join(","),
        description: format!("db_bench {}", names.join(",")),
        key_size: p.key_size,
        value_size: p.value_size,
        phases,
    };
    spec.validate()?;
    Ok(spec)
}

/// The kind of one operation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Insert of a new key.
    Insert,
    /// Update of an existing key.
    Update,
    /// Point read.
    Read,
    /// Short scan.
    Scan,
    /// Long scan.
    LongScan,
    /// Delete.
    Delete,
    /// Read-modify-write.
    Rmw,
}

impl OpKind {
    /// Every kind.
    pub const ALL: [OpKind; 7] = [
        OpKind::Insert,
        OpKind::Update,
        OpKind::Read,
        OpKind::Scan,
        OpKind::LongScan,
        OpKind::Delete,
        OpKind::Rmw,
    ];

    /// Name in results.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Insert => "insert",
            OpKind::Update => "update",
            OpKind::Read => "read",
            OpKind::Scan => "scan",
            OpKind::LongScan => "long_scan",
            OpKind::Delete => "delete",
            OpKind::Rmw => "rmw",
        }
    }

    /// Whether the operation writes.
    pub fn writes(self) -> bool {
        matches!(
            self,
            OpKind::Insert | OpKind::Update | OpKind::Delete | OpKind::Rmw
        )
    }

    /// Index into per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One operation to issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// What to do.
    pub kind: OpKind,
    /// The key number (see [`encode_key`]).
    pub key: u64,
    /// Entries to read, for scans.
    pub scan_length: usize,
}

/// Encodes key number `n` as `size` bytes: 8 bytes big-endian, then zero padding, so byte order
/// is numeric order.
pub fn encode_key(buf: &mut Vec<u8>, n: u64, size: usize) {
    buf.clear();
    buf.extend_from_slice(&n.to_be_bytes());
    buf.resize(size.max(8), 0);
}

/// A bijection on 64-bit numbers that spreads consecutive indexes over the key space.
pub fn scramble(index: u64) -> u64 {
    let mut x = index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    x
}

/// Key bookkeeping shared by a phase's threads: which keys exist, so reads hit, deletes remove
/// live keys, and space amplification knows the live set.
#[derive(Debug, Default)]
pub struct KeySpace {
    /// Keys inserted by index-based orders (indexes `0..inserted` map to keys).
    inserted: AtomicU64,
    /// Live flags per index, for index-based orders and for uniform domains.
    live_bits: parking_lot::RwLock<Vec<AtomicU64>>,
    live: AtomicU64,
    /// Live keys of value-based orders (shifting normal, TPC-C): single-threaded bookkeeping.
    values: parking_lot::Mutex<ValueKeys>,
}

#[derive(Debug, Default)]
struct ValueKeys {
    keys: Vec<u64>,
    position: HashMap<u64, usize>,
    /// TPC-C: (oldest live order, next order) per district.
    districts: HashMap<u64, (u64, u64)>,
}

impl KeySpace {
    /// An empty key space.
    pub fn new() -> Arc<KeySpace> {
        Arc::new(KeySpace::default())
    }

    /// Number of live keys.
    pub fn live_keys(&self) -> u64 {
        self.live.load(Ordering::Relaxed) + self.values.lock().keys.len() as u64
    }

    /// Keys inserted by index so far.
    pub fn inserted(&self) -> u64 {
        self.inserted.load(Ordering::Relaxed)
    }

    fn set_live(&self, index: u64, live: bool) {
        let word = (index / 64) as usize;
        let bit = 1u64 << (index % 64);
        {
            let bits = self.live_bits.read();
            if let Some(w) = bits.get(word) {
                let old = if live {
                    w.fetch_or(bit, Ordering::Relaxed)
                } else {
                    w.fetch_and(!bit, Ordering::Relaxed)
                };
                self.count_change(old & bit != 0, live);
                return;
            }
        }
        let mut bits = self.live_bits.write();
        while bits.len() <= word {
            let grow = bits.len().max(1024);
            bits.extend((0..grow).map(|_| AtomicU64::new(0)));
        }
        let old = if live {
            bits[word].fetch_or(bit, Ordering::Relaxed)
        } else {
            bits[word].fetch_and(!bit, Ordering::Relaxed)
        };
        self.count_change(old & bit != 0, live);
    }

    fn count_change(&self, was: bool, now: bool) {
        match (was, now) {
            (false, true) => {
                self.live.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    fn add_value(&self, key: u64) -> bool {
        let mut v = self.values.lock();
        if v.position.contains_key(&key) {
            return false;
        }
        let at = v.keys.len();
        v.keys.push(key);
        v.position.insert(key, at);
        true
    }

    fn remove_value(&self, key: u64) {
        let mut v = self.values.lock();
        if let Some(at) = v.position.remove(&key) {
            v.keys.swap_remove(at);
            if let Some(&moved) = v.keys.get(at) {
                v.position.insert(moved, at);
            }
        }
    }
}

/// Generates one thread's operations for a phase.
pub struct Generator {
    phase: PhaseSpec,
    space: Arc<KeySpace>,
    rng: Pcg64Mcg,
    zipf: Option<Zipf<f64>>,
    zipf_n: u64,
    cumulative: [f64; 7],
    issued: u64,
    /// Nearly-sorted ingest: pending keys with the step they became pending.
    pending: Vec<(u64, u64)>,
    normal_mean: f64,
}

impl Generator {
    /// A generator for `phase` with its own seed.
    pub fn new(phase: &PhaseSpec, space: Arc<KeySpace>, seed: u64) -> Generator {
        let m = &phase.mix;
        let weights = [
            m.insert,
            m.update,
            m.read,
            m.scan,
            m.long_scan,
            m.delete,
            m.rmw,
        ];
        let total: f64 = weights.iter().sum();
        let mut cumulative = [0.0; 7];
        let mut acc = 0.0;
        for (c, w) in cumulative.iter_mut().zip(weights) {
            acc += w / total;
            *c = acc;
        }
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let normal_mean = rng.random::<f64>();
        Generator {
            phase: phase.clone(),
            space,
            rng,
            zipf: None,
            zipf_n: 0,
            cumulative,
            issued: 0,
            pending: Vec::new(),
            normal_mean,
        }
    }

    fn pick_kind(&mut self) -> OpKind {
        let x: f64 = self.rng.random();
        let i = self.cumulative.iter().position(|&c| x < c).unwrap_or(6);
        OpKind::ALL[i]
    }

    /// A zipfian rank in [0, n), rebuilding the sampler when n has grown by more than 10%.
    fn zipf_rank(&mut self, n: u64, theta: f64) -> u64 {
        if self.zipf.is_none() || n > self.zipf_n + self.zipf_n / 10 || n < self.zipf_n {
            self.zipf = Zipf::new(n.max(1) as f64, theta).ok();
            self.zipf_n = n;
        }
        let rank = self.zipf.as_ref().map_or(1.0, |z| z.sample(&mut self.rng)) as u64;
        rank.saturating_sub(1).min(n.saturating_sub(1))
    }

    /// The index (in insertion order) of an existing key, by the phase's distribution.
    fn existing_index(&mut self) -> Option<u64> {
        let n = self.space.inserted();
        if n == 0 {
            return None;
        }
        Some(match self.phase.keys.clone() {
            KeyDist::Uniform => self.rng.random_range(0..n),
            KeyDist::Zipfian { theta } => {
                // Scatter hot ranks over the key space: a prime multiplier is a permutation.
                let r = self.zipf_rank(n, theta);
                ((u128::from(r) * 2_305_843_009_213_693_951u128) % u128::from(n)) as u64
            }
            KeyDist::Latest { theta } => n - 1 - self.zipf_rank(n, theta),
            KeyDist::ShiftingZipfian { theta, period_ops } => {
                let r = self.zipf_rank(n, theta);
                let epoch = self.issued / period_ops.max(1);
                let base = (u128::from(r) * 2_305_843_009_213_693_951u128) % u128::from(n);
                ((base + u128::from(scramble(epoch))) % u128::from(n)) as u64
            }
        })
    }

    fn key_of_index(&self, index: u64) -> u64 {
        match self.phase.inserts {
            InsertOrder::Random => scramble(index),
            _ => index,
        }
    }

    /// An existing key, and whether bookkeeping is by index (so it can be marked live/dead).
    fn existing_key(&mut self) -> Option<(u64, Option<u64>)> {
        match self.phase.inserts {
            InsertOrder::ShiftingNormal { .. } | InsertOrder::TpccNewOrder { .. } => {
                let v = self.space.values.lock();
                if v.keys.is_empty() {
                    return None;
                }
                let i = self.rng.random_range(0..v.keys.len());
                Some((v.keys[i], None))
            }
            InsertOrder::UniformDomain { size } => {
                let k = match &self.phase.keys {
                    KeyDist::Uniform => self.rng.random_range(0..size.max(1)),
                    _ => {
                        let i = self.existing_index()?;
                        i % size.max(1)
                    }
                };
                Some((k, Some(k)))
            }
            _ => {
                let i = self.existing_index()?;
                Some((self.key_of_index(i), Some(i)))
            }
        }
    }

    fn insert_key(&mut self) -> u64 {
        match self.phase.inserts.clone() {
            InsertOrder::Random | InsertOrder::Sequential => {
                let i = self.space.inserted.fetch_add(1, Ordering::Relaxed);
                self.space.set_live(i, true);
                self.key_of_index(i)
            }
            InsertOrder::NearlySorted { window } => {
                // Keep `window` pending keys and emit a random one, but never let a key wait
                // `window` steps or more: displacement stays within about the window.
                let window = window.max(1);
                while (self.pending.len() as u64) < window {
                    let i = self.space.inserted.fetch_add(1, Ordering::Relaxed);
                    self.pending.push((i, self.issued));
                }
                let oldest = self
                    .pending
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, &(_, since))| since)
                    .map_or(0, |(at, _)| at);
                let at = if self.issued - self.pending[oldest].1 >= window {
                    oldest
                } else {
                    self.rng.random_range(0..self.pending.len())
                };
                let (k, _) = self.pending.swap_remove(at);
                self.space.set_live(k, true);
                k
            }
            InsertOrder::UniformDomain { size } => {
                let k = self.rng.random_range(0..size.max(1));
                self.space.inserted.fetch_max(size, Ordering::Relaxed);
                self.space.set_live(k, true);
                k
            }
            InsertOrder::ShiftingNormal {
                domain,
                sigma,
                period_inserts,
            } => {
                if self.issued.is_multiple_of(period_inserts.max(1)) && self.issued > 0 {
                    self.normal_mean = self.rng.random::<f64>();
                }
                let d = domain.max(1) as f64;
                let normal = Normal::new(self.normal_mean * d, (sigma * d).max(1.0)).ok();
                let mut k;
                loop {
                    let x = normal.as_ref().map_or(0.0, |n| n.sample(&mut self.rng));
                    k = x.clamp(0.0, d - 1.0) as u64;
                    if self.space.add_value(k) {
                        break;
                    }
                    // Taken: the paper inserts keys not currently indexed.
                    if self.space.live_keys() >= domain {
                        break;
                    }
                }
                k
            }
            InsertOrder::TpccNewOrder { warehouses } => {
                let w = self.rng.random_range(0..warehouses.max(1));
                let d = self.rng.random_range(0..10u64);
                let district = w * 10 + d;
                let mut v = self.space.values.lock();
                let entry = v.districts.entry(district).or_insert((0, 0));
                let order = entry.1;
                entry.1 += 1;
                let key = (district << 40) | order;
                drop(v);
                self.space.add_value(key);
                key
            }
        }
    }

    /// The next operation, or `None` when the phase's operation budget (for this thread) is spent.
    pub fn next_op(&mut self, budget: u64) -> Option<Op> {
        if budget > 0 && self.issued >= budget {
            return None;
        }
        let mut kind = self.pick_kind();
        let key = loop {
            match kind {
                OpKind::Insert => break self.insert_key(),
                OpKind::Delete => {
                    if let InsertOrder::TpccNewOrder { warehouses } = self.phase.inserts {
                        // Delete the oldest live order of a random district (one at a time; the
                        // paper removes ten per transaction).
                        let district = self.rng.random_range(0..warehouses.max(1) * 10);
                        let mut v = self.space.values.lock();
                        let next = v.districts.get(&district).copied();
                        match next {
                            Some((oldest, next)) if oldest < next => {
                                if let Some(e) = v.districts.get_mut(&district) {
                                    e.0 += 1;
                                }
                                drop(v);
                                let key = (district << 40) | oldest;
                                self.space.remove_value(key);
                                break key;
                            }
                            _ => {
                                drop(v);
                                kind = OpKind::Insert;
                                continue;
                            }
                        }
                    }
                    match self.existing_key() {
                        Some((k, index)) => {
                            match index {
                                Some(i) => self.space.set_live(i, false),
                                None => self.space.remove_value(k),
                            }
                            break k;
                        }
                        None => {
                            kind = OpKind::Insert;
                            continue;
                        }
                    }
                }
                OpKind::Update | OpKind::Rmw => match self.existing_key() {
                    Some((k, index)) => {
                        if let Some(i) = index {
                            self.space.set_live(i, true);
                        }
                        break k;
                    }
                    None => {
                        kind = OpKind::Insert;
                        continue;
                    }
                },
                OpKind::Read | OpKind::Scan | OpKind::LongScan => match self.existing_key() {
                    Some((k, _)) => break k,
                    None => break 0,
                },
            }
        };
        let scan_length = match kind {
            OpKind::Scan if self.phase.random_scan_length => {
                self.rng.random_range(1..=self.phase.scan_length.max(1))
            }
            OpKind::Scan => self.phase.scan_length,
            OpKind::LongScan => self.phase.long_scan_length,
            _ => 0,
        };
        self.issued += 1;
        Some(Op {
            kind,
            key,
            scan_length,
        })
    }

    /// Fills `buf` with random value bytes.
    pub fn fill_value(&mut self, buf: &mut [u8]) {
        self.rng.fill(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn params() -> PresetParams {
        PresetParams {
            entries: 1000,
            ops: 2000,
            ..PresetParams::default()
        }
    }

    #[test]
    fn every_preset_builds_and_validates() {
        for (name, _) in PRESETS {
            let w = WorkloadSpec::preset(name, &params()).unwrap();
            assert!(!w.phases.is_empty(), "{name}");
        }
        assert!(WorkloadSpec::preset("fillrandom,readrandom,deleterandom", &params()).is_ok());
        assert!(WorkloadSpec::preset("nope", &params())
            .unwrap_err()
            .contains("presets"));
        let r = WorkloadSpec::preset("readrandom", &params()).unwrap();
        assert_eq!(r.phases.len(), 2, "reads get an unmeasured fill first");
        assert!(!r.phases[0].measured);
    }

    #[test]
    fn workloads_load_from_toml() {
        let text = r#"
            name = "mine"
            key_size = 24
            [[phases]]
            name = "load"
            ops = 100
            mix = { insert = 1.0 }
            [[phases]]
            name = "run"
            ops = 100
            threads = 2
            mix = { read = 0.9, update = 0.1 }
            keys = { kind = "zipfian", theta = 0.8 }
        "#;
        let w = WorkloadSpec::from_toml(text).unwrap();
        assert_eq!(w.key_size, 24);
        assert_eq!(w.phases[1].keys, KeyDist::Zipfian { theta: 0.8 });
        assert!(WorkloadSpec::from_toml("name = 1").is_err());
        let no_ops = "name = \"x\"\n[[phases]]\nname = \"p\"\nmix = { read = 1.0 }\n";
        assert!(WorkloadSpec::from_toml(no_ops)
            .unwrap_err()
            .contains("neither ops"));
    }

    #[test]
    fn random_inserts_are_unique_and_tracked_as_live() {
        let w = WorkloadSpec::preset("ycsb-a", &params()).unwrap();
        let space = KeySpace::new();
        let mut g = Generator::new(&w.phases[0], space.clone(), 1);
        let keys: HashSet<u64> = std::iter::from_fn(|| g.next_op(1000))
            .map(|o| o.key)
            .collect();
        assert_eq!(keys.len(), 1000);
        assert_eq!(space.live_keys(), 1000);
        // The run phase reads and updates only inserted keys.
        let mut r = Generator::new(&w.phases[1], space.clone(), 2);
        for _ in 0..2000 {
            let op = r.next_op(0).unwrap();
            assert!(keys.contains(&op.key), "{op:?}");
        }
    }

    #[test]
    fn zipfian_reads_concentrate_and_deletes_reduce_the_live_set() {
        let w = WorkloadSpec::preset("ycsb-c", &params()).unwrap();
        let space = KeySpace::new();
        let mut load = Generator::new(&w.phases[0], space.clone(), 1);
        while load.next_op(1000).is_some() {}
        let mut run = Generator::new(&w.phases[1], space.clone(), 3);
        let mut counts: HashMap<u64, u64> = HashMap::new();
        for _ in 0..5000 {
            *counts.entry(run.next_op(0).unwrap().key).or_default() += 1;
        }
        // Uniform picks would touch ~993 keys, the busiest ~15 times; zipf(0.99) puts about 13%
        // of picks on the hottest key.
        assert!(counts.len() < 900, "{} distinct keys", counts.len());
        assert!(
            counts.values().max().copied().unwrap_or(0) > 300,
            "{counts:?}"
        );
        let d = WorkloadSpec::preset("fillrandom,deleterandom", &params()).unwrap();
        let space = KeySpace::new();
        let mut fill = Generator::new(&d.phases[0], space.clone(), 1);
        while fill.next_op(1000).is_some() {}
        let filled = space.live_keys();
        assert!(
            filled > 500 && filled < 1000,
            "uniform-domain fill leaves repeats: {filled}"
        );
        let mut del = Generator::new(&d.phases[1], space.clone(), 2);
        while del.next_op(1000).is_some() {}
        assert!(space.live_keys() < filled / 2);
    }

    #[test]
    fn nearly_sorted_ingest_has_bounded_disorder_and_tpcc_deletes_oldest() {
        let mut p = params();
        p.disorder = 50;
        let w = WorkloadSpec::preset("nearly-sorted", &p).unwrap();
        let mut g = Generator::new(&w.phases[0], KeySpace::new(), 1);
        let keys: Vec<u64> = std::iter::from_fn(|| g.next_op(1000))
            .map(|o| o.key)
            .collect();
        assert!(keys
            .iter()
            .enumerate()
            .all(|(i, &k)| (k as i64 - i as i64).abs() < 200));
        assert!(keys.windows(2).any(|w| w[0] > w[1]), "some disorder");
        let t = WorkloadSpec::preset("partial-merge-tpcc", &params()).unwrap();
        let space = KeySpace::new();
        let mut load = Generator::new(&t.phases[0], space.clone(), 1);
        while load.next_op(1000).is_some() {}
        let mut run = Generator::new(&t.phases[1], space.clone(), 2);
        let deletes: Vec<u64> = (0..2000)
            .filter_map(|_| run.next_op(0))
            .filter(|o| o.kind == OpKind::Delete)
            .map(|o| o.key)
            .collect();
        assert!(!deletes.is_empty());
        // Order ids of each district are deleted in ascending order.
        let mut last: HashMap<u64, u64> = HashMap::new();
        for k in deletes {
            let (district, order) = (k >> 40, k & ((1 << 40) - 1));
            assert!(last.get(&district).is_none_or(|&o| order > o));
            last.insert(district, order);
        }
    }

    #[test]
    fn keys_encode_in_numeric_byte_order() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encode_key(&mut a, 255, 16);
        encode_key(&mut b, 256, 16);
        assert_eq!(a.len(), 16);
        assert!(a < b);
    }
}
