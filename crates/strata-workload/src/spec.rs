//! Workload descriptions: phases of operation mixes over key distributions, loaded from presets
//! or TOML files.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

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
    /// Policies to run, as policy specifications (`leveled:level0_trigger=8`), when the command
    /// line names none.
    #[serde(default)]
    pub policies: Vec<String>,
    /// Options for every selected policy that declares them, like `--policy-option` (which
    /// wins over these).
    #[serde(default)]
    pub policy_options: BTreeMap<String, OptionValue>,
}

/// An option value in a workload file: a boolean, a number or text, handed to the policy
/// registry as text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OptionValue {
    /// `true` or `false`.
    Bool(bool),
    /// An integer.
    Integer(i64),
    /// A decimal number.
    Float(f64),
    /// Text, such as a size (`"64MiB"`).
    Text(String),
}

impl fmt::Display for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionValue::Bool(b) => write!(f, "{b}"),
            OptionValue::Integer(i) => write!(f, "{i}"),
            OptionValue::Float(x) => write!(f, "{x}"),
            OptionValue::Text(t) => f.write_str(t),
        }
    }
}

impl WorkloadSpec {
    /// The file's policy options as `name=value` text, as `--policy-option` takes them.
    pub fn policy_option_args(&self) -> Vec<String> {
        self.policy_options
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }
}

fn default_key_size() -> usize {
    16
}

fn default_value_size() -> usize {
    100
}

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
            let tracked = crate::keys::MAX_TRACKED_INDEX;
            let domain = match p.inserts {
                InsertOrder::UniformDomain { size } => size,
                _ => 0,
            };
            if p.ops > tracked || domain > tracked {
                return Err(format!(
                    "phase {:?}: {} keys are more than the {tracked} the workload can track",
                    p.name,
                    p.ops.max(domain)
                ));
            }
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
}
