//! Workload descriptions: phases of operation mixes over key distributions, loaded from presets
//! or TOML files.
//!
//! Every struct a TOML file deserializes into refuses keys it does not know, so a misspelled key
//! (`writ = 3.0`, `thread = 8`) is an error naming the key, its line and its column instead of a
//! setting silently ignored. `examples/workloads/` has a commented file for each group of keys.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// How existing keys are chosen for reads, updates, scans, deletes and read-modify-writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    from = "KeyDistFile",
    deny_unknown_fields
)]
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
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    from = "InsertOrderFile",
    deny_unknown_fields
)]
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
    /// Keys drawn uniformly from those of a domain that are not live; deletes and reads take a
    /// uniformly random live key (the partial-merge paper's Uniform, whose tree keeps its size
    /// under a 50/50 mix).
    UniformUnique {
        /// Domain size.
        domain: u64,
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

// What a file may write for a `KeyDist` or an `InsertOrder`: the same variants, each a struct, so
// that `deny_unknown_fields` also refuses extra keys beside the field-less kinds
// (`{ kind = "uniform", theta = 0.9 }`), which serde accepts silently for unit variants.

/// [`KeyDist`] as a file spells it.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
enum KeyDistFile {
    Uniform {},
    Zipfian { theta: f64 },
    Latest { theta: f64 },
    ShiftingZipfian { theta: f64, period_ops: u64 },
}

impl From<KeyDistFile> for KeyDist {
    fn from(file: KeyDistFile) -> KeyDist {
        match file {
            KeyDistFile::Uniform {} => KeyDist::Uniform,
            KeyDistFile::Zipfian { theta } => KeyDist::Zipfian { theta },
            KeyDistFile::Latest { theta } => KeyDist::Latest { theta },
            KeyDistFile::ShiftingZipfian { theta, period_ops } => {
                KeyDist::ShiftingZipfian { theta, period_ops }
            }
        }
    }
}

/// [`InsertOrder`] as a file spells it.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
enum InsertOrderFile {
    Random {},
    Sequential {},
    NearlySorted {
        window: u64,
    },
    UniformDomain {
        size: u64,
    },
    UniformUnique {
        domain: u64,
    },
    ShiftingNormal {
        domain: u64,
        sigma: f64,
        period_inserts: u64,
    },
    TpccNewOrder {
        warehouses: u64,
    },
}

impl InsertOrder {
    /// One past the largest key number the order produces, or `None` when keys are spread over
    /// 64 bits or grow with the number of inserts.
    pub fn key_bound(&self) -> Option<u64> {
        match self {
            InsertOrder::Random | InsertOrder::Sequential | InsertOrder::NearlySorted { .. } => {
                None
            }
            InsertOrder::UniformDomain { size: domain }
            | InsertOrder::UniformUnique { domain }
            | InsertOrder::ShiftingNormal { domain, .. } => Some(*domain),
            InsertOrder::TpccNewOrder { warehouses } => warehouses
                .checked_mul(10)
                .and_then(|d| d.checked_mul(1 << TPCC_ORDER_BITS)),
        }
    }
}

/// Bits of a TPC-C order key that hold the order number; the district is above them. 2^24
/// orders per district keeps ten warehouses' keys within four bytes.
pub const TPCC_ORDER_BITS: u32 = 24;

impl From<InsertOrderFile> for InsertOrder {
    fn from(file: InsertOrderFile) -> InsertOrder {
        match file {
            InsertOrderFile::Random {} => InsertOrder::Random,
            InsertOrderFile::Sequential {} => InsertOrder::Sequential,
            InsertOrderFile::NearlySorted { window } => InsertOrder::NearlySorted { window },
            InsertOrderFile::UniformDomain { size } => InsertOrder::UniformDomain { size },
            InsertOrderFile::UniformUnique { domain } => InsertOrder::UniformUnique { domain },
            InsertOrderFile::ShiftingNormal {
                domain,
                sigma,
                period_inserts,
            } => InsertOrder::ShiftingNormal {
                domain,
                sigma,
                period_inserts,
            },
            InsertOrderFile::TpccNewOrder { warehouses } => {
                InsertOrder::TpccNewOrder { warehouses }
            }
        }
    }
}

/// Relative weights of operation types.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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

    /// The weights by their TOML names.
    fn weights(&self) -> [(&'static str, f64); 7] {
        [
            ("insert", self.insert),
            ("update", self.update),
            ("read", self.read),
            ("scan", self.scan),
            ("long_scan", self.long_scan),
            ("delete", self.delete),
            ("rmw", self.rmw),
        ]
    }

    /// Checks that every weight is a finite number, not negative, and that some weight is
    /// positive; `at` names the mix in the error (`mix`, `writer.mix`).
    fn validate(&self, at: &str) -> Result<(), String> {
        for (name, weight) in self.weights() {
            if !(weight.is_finite() && weight >= 0.0) {
                return Err(format!(
                    "{at}.{name} is {weight}; a weight must be a finite number, 0 or more"
                ));
            }
        }
        if self.total() <= 0.0 {
            return Err(format!(
                "{at} has no operation with a positive weight (give e.g. {at} = {{ insert = 1.0 }})"
            ));
        }
        Ok(())
    }
}

/// An open-loop query stream: arrivals at a fixed rate, latency counted from the arrival.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenLoop {
    /// Arrivals per second, over all query threads (with bursts, of arrival instants: each may
    /// bring a burst of queries).
    pub queries_per_sec: f64,
    /// Bursts, if any: EcoTune's burst test (a base rate where each arrival has a 5% chance of
    /// being 20 queries at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<Burst>,
}

/// Bursts of an open-loop stream: each arrival is, with probability `probability`, `size`
/// queries arriving together instead of one. The mean rate is the base rate times
/// `1 + probability·(size − 1)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Burst {
    /// Chance that an arrival is a burst, in [0, 1].
    pub probability: f64,
    /// Queries in a burst, at least 1.
    pub size: u32,
}

/// One query thread's arrival times in an open-loop stream, as offsets from when the thread
/// starts: its share of the base rate, each arrival a burst with the stream's probability
/// (drawn from the thread's own seeded generator, so a run is repeatable).
#[derive(Clone, Debug)]
pub struct Arrivals {
    interval: std::time::Duration,
    burst: Option<Burst>,
    rng: rand_pcg::Pcg64Mcg,
    next: std::time::Duration,
    current: std::time::Duration,
    left_in_burst: u32,
}

impl Arrivals {
    /// The arrivals of one of `threads` threads sharing `stream`.
    pub fn new(stream: &OpenLoop, threads: usize, seed: u64) -> Self {
        let per_thread = stream.queries_per_sec.max(1e-3) / threads.max(1) as f64;
        Arrivals {
            interval: std::time::Duration::from_secs_f64(1.0 / per_thread),
            burst: stream.burst,
            rng: rand::SeedableRng::seed_from_u64(seed),
            next: std::time::Duration::ZERO,
            current: std::time::Duration::ZERO,
            left_in_burst: 0,
        }
    }

    /// When the next query arrives.
    pub fn next_arrival(&mut self) -> std::time::Duration {
        if self.left_in_burst > 0 {
            self.left_in_burst -= 1;
            return self.current;
        }
        self.current = self.next;
        self.next += self.interval;
        if let Some(b) = self.burst {
            if rand::Rng::random_bool(&mut self.rng, b.probability.clamp(0.0, 1.0)) {
                self.left_in_burst = b.size.saturating_sub(1);
            }
        }
        self.current
    }
}

/// A background writer beside the main threads, at a fixed rate (EcoTune's rate-limited writer).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
    /// Point reads go to the engine in batches of this many keys, 1 to [`MAX_READ_BATCH`]
    /// (db_bench's multireadrandom and its `--batch_size`; the benchmark's
    /// `KvEngine::multi_get`): consecutive reads of a thread's stream are gathered, and any
    /// other operation sends the batch gathered so far first, so the order holds. 1 (the
    /// default) reads one key at a time. The operations themselves do not change: a replay
    /// (the simulator, [`crate::OpStream`]) issues a batch's reads one by one, in order.
    #[serde(default = "one")]
    pub read_batch: usize,
}

fn uniform() -> KeyDist {
    KeyDist::Uniform
}

/// A workload: key and value sizes and phases run in order on one database.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Name.
    pub name: String,
    /// One line saying what it is.
    #[serde(default)]
    pub description: String,
    /// Key bytes: the key number, big-endian, in 8 bytes then zero padding, or in its low bytes
    /// when fewer than 8 (every insert order must then have a domain that fits).
    #[serde(default = "default_key_size")]
    pub key_size: usize,
    /// Value bytes.
    #[serde(default = "default_value_size")]
    pub value_size: usize,
    /// What a value shrinks to when compressed, as a fraction of its size: each value is that
    /// share of random bytes, repeated to fill it (db_bench's `--compression_ratio`, whose
    /// default is 0.5). Default 1: random values, which no codec shrinks.
    #[serde(default = "default_compression_ratio")]
    pub compression_ratio: f64,
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

impl PhaseSpec {
    /// Whether the phase only inserts: a mix of inserts alone with no writer beside it (a
    /// fill, a load).
    pub fn only_inserts(&self) -> bool {
        let m = &self.mix;
        m.insert > 0.0
            && [m.update, m.read, m.scan, m.long_scan, m.delete, m.rmw]
                .iter()
                .all(|w| *w == 0.0)
            && self.writer.is_none()
            && self.background_writer.is_none()
    }
}

impl WorkloadSpec {
    /// How many phases, from the first, only insert ([`PhaseSpec::only_inserts`]): the
    /// workload's load (db_bench's fills, the unmeasured fill db_bench phases get before a
    /// first read, YCSB's and the papers' load phases). A run on a database loaded earlier
    /// (`strata bench --use-existing-db`) skips them.
    pub fn load_phases(&self) -> usize {
        self.phases.iter().take_while(|p| p.only_inserts()).count()
    }

    /// The number of entries the workload is built around: the domain of its first
    /// uniform-domain insert order (db_bench's phases draw every key from `[0, entries)`), else
    /// the operations of its load phases ([`WorkloadSpec::load_phases`]: YCSB's and the papers'
    /// loads insert `entries` keys); `None` when it has neither. Two workloads with the same
    /// entries, key size and insert order address the same keys.
    pub fn entries(&self) -> Option<u64> {
        let domain = self.phases.iter().find_map(|p| match p.inserts {
            InsertOrder::UniformDomain { size } => Some(size),
            _ => None,
        });
        domain.or_else(|| {
            let loaded: u64 = self.phases[..self.load_phases()]
                .iter()
                .map(|p| p.ops)
                .sum();
            (loaded > 0).then_some(loaded)
        })
    }
}

fn default_key_size() -> usize {
    16
}

fn default_value_size() -> usize {
    100
}

fn default_compression_ratio() -> f64 {
    1.0
}

/// The most threads a phase may run: far more than the cores of any machine the benchmark
/// targets, and few enough that a typo (`threads = 80000`) is an error rather than an attempt to
/// spawn them.
pub const MAX_THREADS: usize = 1024;

/// The most keys one batched read may hold ([`PhaseSpec::read_batch`]): well above the batches
/// databases tune MultiGet for (RocksDB's own tests use up to a few hundred), and small enough
/// that a typo is an error rather than a batch that holds a phase's every read.
pub const MAX_READ_BATCH: usize = 4096;

/// Where byte `offset` of `text` is: "line L, column C" (both from 1, the column in characters)
/// and the line itself, so that an error about a value names the key it belongs to.
fn position(text: &str, offset: usize) -> String {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    let source = text[line_start..].lines().next().unwrap_or("").trim();
    if source.is_empty() {
        format!("line {line}, column {column}")
    } else {
        let shown: String = source.chars().take(80).collect();
        let more = if shown.len() < source.len() {
            "..."
        } else {
            ""
        };
        format!("line {line}, column {column} (`{shown}{more}`)")
    }
}

impl WorkloadSpec {
    /// Loads a workload from TOML text and validates it ([`WorkloadSpec::validate`]). A syntax
    /// error, an unknown key or a value of the wrong type is reported with its line, column and
    /// source line (``line 7, column 1 (`writ = 3.0`): unknown field `writ`, expected one of
    /// ...``).
    pub fn from_toml(text: &str) -> Result<WorkloadSpec, String> {
        let spec: WorkloadSpec = toml::from_str(text).map_err(|e| {
            // serde's wording for a key beside a kind that takes none.
            let message = e
                .message()
                .trim_end()
                .replace(", there are no fields", ": this kind takes no other keys");
            match e.span() {
                Some(span) => format!("{}: {message}", position(text, span.start)),
                None => message.to_string(),
            }
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the parameters, naming the first problem by its TOML key (`phase "run":
    /// mix.read is -1; ...`). Presets and files go through the same checks.
    pub fn validate(&self) -> Result<(), String> {
        if self.key_size == 0 {
            return Err("key_size 0: keys need at least one byte".to_string());
        }
        if !(self.compression_ratio > 0.0 && self.compression_ratio <= 1.0) {
            return Err(format!(
                "compression_ratio {}: it must be above 0 and at most 1 (the share of a value \
                 that is random bytes)",
                self.compression_ratio
            ));
        }
        if self.phases.is_empty() {
            return Err("a workload needs at least one phase ([[phases]])".to_string());
        }
        if self.key_size < 8 {
            // Short keys hold the low bytes of the key number, so every number must fit.
            let bits = 8 * self.key_size as u32;
            for p in &self.phases {
                match p.inserts.key_bound() {
                    Some(bound) if bound <= 1u64 << bits => {}
                    Some(bound) => {
                        return Err(format!(
                            "key_size {} holds key numbers below 2^{bits}, but phase {:?} \
                             draws keys below {bound}: use a key_size of 8 or more",
                            self.key_size, p.name
                        ))
                    }
                    None => {
                        return Err(format!(
                            "key_size {} holds key numbers below 2^{bits}, but phase {:?} \
                             inserts keys spread over 64 bits: key sizes below 8 need an \
                             insert order with a domain (uniform-domain, uniform-unique, \
                             shifting-normal, tpcc-new-order)",
                            self.key_size, p.name
                        ))
                    }
                }
            }
        }
        for p in &self.phases {
            p.validate()
                .map_err(|e| format!("phase {:?}: {e}", p.name))?;
        }
        if let Some(empty) = self.policies.iter().position(|p| p.trim().is_empty()) {
            return Err(format!("policies[{empty}] is empty"));
        }
        Ok(())
    }
}

/// Errors unless `value` is finite and above zero; `what` names it.
fn positive(what: &str, value: f64) -> Result<(), String> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "{what} is {value}; it must be a finite number above 0"
        ))
    }
}

/// Errors when a count is zero; `what` names it.
fn at_least_one(what: &str, value: u64) -> Result<(), String> {
    if value == 0 {
        Err(format!("{what} is 0; it must be at least 1"))
    } else {
        Ok(())
    }
}

impl PhaseSpec {
    /// Checks one phase, naming the first problem by its TOML key.
    fn validate(&self) -> Result<(), String> {
        let tracked = crate::keys::MAX_TRACKED_INDEX;
        if self.ops > tracked {
            return Err(format!(
                "ops {} is more than the {tracked} keys the workload can track",
                self.ops
            ));
        }
        if !(self.duration_secs.is_finite() && self.duration_secs >= 0.0) {
            return Err(format!(
                "duration_secs is {}; it must be a finite number of seconds, 0 or more",
                self.duration_secs
            ));
        }
        if self.ops == 0 && self.duration_secs == 0.0 {
            return Err("has neither ops nor duration_secs (give either, or both)".to_string());
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(format!(
                "threads is {}; it must be between 1 and {MAX_THREADS}",
                self.threads
            ));
        }
        self.mix.validate("mix")?;
        if self.read_batch == 0 || self.read_batch > MAX_READ_BATCH {
            return Err(format!(
                "read_batch is {}; it must be between 1 and {MAX_READ_BATCH}",
                self.read_batch
            ));
        }
        if self.read_batch > 1 && self.mix.read <= 0.0 {
            return Err(format!(
                "read_batch is {} but the mix has no point reads (mix.read) to batch",
                self.read_batch
            ));
        }
        if self.read_batch > 1 && self.open_loop.is_some() {
            return Err(format!(
                "read_batch is {} with open_loop: open-loop arrivals are single operations, \
                 so a phase takes one or the other",
                self.read_batch
            ));
        }
        if self.mix.scan > 0.0 {
            at_least_one("scan_length", self.scan_length as u64)?;
        }
        if self.mix.long_scan > 0.0 {
            at_least_one("long_scan_length", self.long_scan_length as u64)?;
        }
        match &self.keys {
            KeyDist::Uniform => {}
            KeyDist::Zipfian { theta } | KeyDist::Latest { theta } => {
                positive("keys.theta", *theta)?
            }
            KeyDist::ShiftingZipfian { theta, period_ops } => {
                positive("keys.theta", *theta)?;
                at_least_one("keys.period_ops", *period_ops)?;
            }
        }
        match &self.inserts {
            InsertOrder::Random | InsertOrder::Sequential => {}
            InsertOrder::NearlySorted { window } => at_least_one("inserts.window", *window)?,
            InsertOrder::UniformDomain { size } => {
                at_least_one("inserts.size", *size)?;
                if *size > tracked {
                    return Err(format!(
                        "inserts.size {size} is more than the {tracked} keys the workload can track"
                    ));
                }
            }
            InsertOrder::UniformUnique { domain } => at_least_one("inserts.domain", *domain)?,
            InsertOrder::ShiftingNormal {
                domain,
                sigma,
                period_inserts,
            } => {
                at_least_one("inserts.domain", *domain)?;
                positive("inserts.sigma", *sigma)?;
                at_least_one("inserts.period_inserts", *period_inserts)?;
            }
            InsertOrder::TpccNewOrder { warehouses } => {
                at_least_one("inserts.warehouses", *warehouses)?
            }
        }
        if let Some(o) = &self.open_loop {
            positive("open_loop.queries_per_sec", o.queries_per_sec)?;
            if let Some(b) = &o.burst {
                if !(0.0..=1.0).contains(&b.probability) {
                    return Err(format!(
                        "open_loop.burst.probability is {}; it must be between 0 and 1",
                        b.probability
                    ));
                }
                at_least_one("open_loop.burst.size", u64::from(b.size))?;
            }
        }
        if let Some(w) = &self.writer {
            positive("writer.mib_per_sec", w.mib_per_sec)?;
            w.mix.validate("writer.mix")?;
        }
        if let Some(m) = &self.background_writer {
            m.validate("background_writer")?;
        }
        Ok(())
    }
}
