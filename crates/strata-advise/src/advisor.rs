//! The advisor the autopilot asks by default: every candidate policy simulated on a workload
//! like the last window's, over a tree the size of the live one scaled down, and its time per
//! operation estimated with this machine's calibration.

use crate::calibration::Calibration;
use crate::estimate::{estimate, Regime};
use crate::workload::{workload_like, WorkloadShape};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use strata_exec::handover;
use strata_meta::parse_size;
use strata_policy::autopilot::{AdviceRequest, Advisor, Prediction, WorkloadWindow};
use strata_policy::{build_policy, registry, CompactionPolicy, OptionKind, PolicySpec};
use strata_sim::{SimConfig, Simulator};

/// Predicts every candidate by simulating it ([`Advisor`] for
/// [`strata_engine::Options::with_autopilot`]).
///
/// It simulates a window's workload in a quantized form ([`quantized`]: the tree's size in
/// steps of a quarter of a doubling, the operation mix in twentieths) and remembers each
/// candidate's estimate for that form, so that the windows of a steady workload cost a lookup
/// after the first. Why: a window must last 20 times the last advice (the autopilot's 5% budget),
/// and 22 simulations over a tree of a million entries took 0.27–0.39 s of a core, which made
/// windows of 5–8 s, longer than the phases of a benchmark (`docs/autopilot.md`).
#[derive(Clone, Debug)]
pub struct SimulatingAdvisor {
    calibration: Calibration,
    candidates: Vec<PolicySpec>,
    cache_bytes: Option<u64>,
    max_entries: u64,
    max_ops: u64,
    seed: u64,
    /// Estimates by candidate and quantized workload, shared by clones.
    estimates: Arc<Mutex<EstimateCache>>,
}

/// Remembered estimates ([`SimulatingAdvisor`]), and how many simulations ran.
#[derive(Debug, Default)]
struct EstimateCache {
    ns_per_op: HashMap<String, f64>,
    simulations: u64,
}

/// Estimates remembered at most: past it the cache starts again.
const CACHED_ESTIMATES: usize = 4096;

impl SimulatingAdvisor {
    /// Every built-in policy with its own defaults as candidates, priced with `calibration`,
    /// in the cached regime.
    pub fn new(calibration: Calibration) -> Self {
        Self {
            calibration,
            candidates: registry::builtin_names()
                .into_iter()
                .map(PolicySpec::new)
                .collect(),
            cache_bytes: None,
            max_entries: 20_000,
            max_ops: 20_000,
            seed: 42,
            estimates: Arc::default(),
        }
    }

    /// Simulations run so far (each candidate of each advice not answered from memory).
    pub fn simulations(&self) -> u64 {
        self.estimates.lock().map_or(0, |c| c.simulations)
    }

    /// Only these candidates (their options as given; the write buffer size and the data size
    /// are filled in where a policy declares them and they are unset). Default: every built-in.
    pub fn with_candidates(mut self, candidates: Vec<PolicySpec>) -> Self {
        self.candidates = candidates;
        self
    }

    /// Out of cache: the memory that caches table data (the block cache under direct I/O).
    /// Each candidate's reads are then served from memory in the share this holds of its
    /// tables (the live data at its simulated peak space amplification), and from the device
    /// otherwise (the calibration's device costs). `None`: everything cached. Default: `None`.
    pub fn with_cache_bytes(mut self, bytes: Option<u64>) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// The most entries and operations a simulation runs: a larger tree is simulated scaled
    /// down, write buffer included, so its shape (levels, runs) stays. Default: 20,000 each
    /// (every built-in policy in about 0.1 s of a core).
    pub fn with_simulation_size(mut self, entries: u64, ops: u64) -> Self {
        self.max_entries = entries.max(1000);
        self.max_ops = ops.max(1000);
        self
    }

    /// Its calibration.
    pub fn calibration(&self) -> &Calibration {
        &self.calibration
    }

    /// The estimated nanoseconds per operation of `spec` on `shape`'s workload, from memory if
    /// it was simulated before.
    fn simulate(&self, spec: &PolicySpec, shape: &WorkloadShape) -> Result<f64, String> {
        let key = format!("{spec}|{shape:?}");
        let remembered = self
            .estimates
            .lock()
            .ok()
            .and_then(|c| c.ns_per_op.get(&key).copied());
        if let Some(ns) = remembered {
            return Ok(ns);
        }
        let ns = self.simulate_now(spec, shape)?;
        if let Ok(mut cache) = self.estimates.lock() {
            if cache.ns_per_op.len() >= CACHED_ESTIMATES {
                cache.ns_per_op.clear();
            }
            cache.ns_per_op.insert(key, ns);
            cache.simulations += 1;
        }
        Ok(ns)
    }

    /// [`SimulatingAdvisor::simulate`], simulating.
    fn simulate_now(&self, spec: &PolicySpec, shape: &WorkloadShape) -> Result<f64, String> {
        let policy: Arc<dyn CompactionPolicy> =
            build_policy(spec).map_err(|e| format!("{spec}: {e}"))?;
        let config = SimConfig {
            key_size: shape.key_size,
            value_size: shape.value_size,
            buffer_size: shape.buffer_size,
            ..SimConfig::default()
        };
        let report = Simulator::run(policy, config, &shape.spec, self.seed)
            .map_err(|e| format!("simulating {spec}: {e}"))?;
        let regime = match self.cache_bytes {
            None => Regime::Cached,
            Some(cache) => {
                let stored =
                    shape.data_bytes() as f64 / shape.scale * report.peak_space_amp.max(1.0);
                Regime::OutOfCache {
                    memory_share: (cache as f64 / stored.max(1.0)).min(1.0),
                }
            }
        };
        Ok(estimate(
            &report,
            &shape.mix,
            shape.key_size + shape.value_size,
            &self.calibration,
            regime,
            shape.scale,
        )
        .ns_per_op)
    }
}

/// `window` and `live_bytes` in the steps the advisor simulates (see [`SimulatingAdvisor`]):
/// the live bytes rounded to a power of 2^(1/4), the operations to a power of 2^(1/4) with the
/// mix in twentieths of them, the scan length to a power of 2^(1/2), the key-range overlap to
/// fiftieths; the skew only matters on either side of [`crate::ZIPFIAN_ABOVE`].
fn quantized(window: &WorkloadWindow, live_bytes: u64) -> (WorkloadWindow, u64) {
    let steps = |x: f64, per_doubling: f64| {
        if x <= 0.0 {
            0.0
        } else {
            (x.log2() * per_doubling).round() / per_doubling
        }
        .exp2()
    };
    let total = steps(window.operations().max(1) as f64, 4.0);
    let share = |n: u64| {
        let twentieths = (n as f64 / window.operations().max(1) as f64 * 20.0).round();
        (twentieths / 20.0 * total).round() as u64
    };
    let quantized = WorkloadWindow {
        puts: share(window.puts),
        deletes: share(window.deletes),
        point_reads: share(window.point_reads),
        scans: share(window.scans),
        scan_length: if window.scan_length > 0.0 {
            steps(window.scan_length, 2.0)
        } else {
            0.0
        },
        skew: window
            .skew
            .map(|a| if a > crate::ZIPFIAN_ABOVE { 1.0 } else { 0.0 }),
        range_overlap: window.range_overlap.map(|o| (o * 50.0).round() / 50.0),
        ..window.clone()
    };
    (quantized, steps(live_bytes.max(1) as f64, 4.0) as u64)
}

/// The smallest size option a scaled-down simulation gives a policy.
const MIN_SCALED_SIZE: u64 = 4 << 10;

/// The options a simulation's facts fill: its write buffer and its data size.
const FACTS: [&str; 2] = ["write_buffer_size", "expected_data_size"];

/// `spec` for the scaled-down simulation of `shape`: every size option the policy declares
/// (tables, buckets, level bounds; set or defaulted) scaled like the data, so the simulated tree
/// keeps the real one's proportions, and the write buffer and data size the simulation's.
fn filled(spec: &PolicySpec, shape: &WorkloadShape) -> Result<PolicySpec, String> {
    let registration = registry::lookup(&spec.name).map_err(|e| format!("{spec}: {e}"))?;
    let mut scaled = spec.clone();
    scaled.options.retain(|(k, _)| !FACTS.contains(&k.as_str()));
    for option in registration.options {
        if option.kind != OptionKind::Size || FACTS.contains(&option.name) {
            continue;
        }
        let given = spec
            .options
            .iter()
            .rev()
            .find(|(k, _)| k == option.name)
            .map(|(_, v)| v.as_str());
        // An empty default is derived from other options, which are scaled themselves.
        let Some(text) = given.or((!option.default.is_empty()).then_some(option.default)) else {
            continue;
        };
        let bytes = parse_size(text).map_err(|e| format!("{spec}: {}: {e}", option.name))?;
        let bytes = ((bytes as f64 * shape.scale) as u64).max(MIN_SCALED_SIZE);
        scaled = scaled.with(option.name, bytes);
    }
    scaled
        .fill_defaults([
            ("write_buffer_size", shape.buffer_size.to_string()),
            ("expected_data_size", shape.data_bytes().to_string()),
        ])
        .map_err(|e| format!("{spec}: {e}"))?;
    Ok(scaled)
}

impl Advisor for SimulatingAdvisor {
    fn name(&self) -> &str {
        "simulator"
    }

    fn predict(&self, request: &AdviceRequest<'_>) -> Result<Vec<Prediction>, String> {
        let (window, live_bytes) = quantized(request.window, request.live_bytes);
        let shape = workload_like(
            &window,
            (request.key_size, request.value_size),
            live_bytes,
            request.write_buffer_size,
            (self.max_entries, self.max_ops),
        )?;
        let current: PolicySpec = request
            .current
            .parse()
            .map_err(|e| format!("the current policy {}: {e}", request.current))?;
        // The current policy is simulated as it runs, scaled like the others.
        let mut predictions = vec![Prediction {
            spec: request.current.to_string(),
            ns_per_op: self.simulate(&filled(&current, &shape)?, &shape)?,
            handover_bytes: 0,
            handover_ns: 0.0,
        }];
        // A handover's entries are merged on a core of its own, and out of cache read and
        // written on the device.
        let entry_bytes = (shape.key_size + shape.value_size) as f64;
        let device = match (self.cache_bytes, &self.calibration.device) {
            (Some(_), Some(d)) => {
                entry_bytes * 1e9 * (1.0 / d.write_bytes_per_sec + 1.0 / d.read_bytes_per_sec)
            }
            _ => 0.0,
        };
        let handover_ns_per_entry = self.calibration.cpu.merge_ns_per_entry + device;
        for candidate in self.candidates.iter().filter(|c| c.name != current.name) {
            let spec = filled(candidate, &shape)?;
            // The handover is priced on the real tree, with the real policy's entry level.
            let mut real = candidate.clone();
            real.fill_defaults([
                ("write_buffer_size", request.write_buffer_size.to_string()),
                ("expected_data_size", request.live_bytes.to_string()),
            ])
            .map_err(|e| format!("{candidate}: {e}"))?;
            let policy = build_policy(&real).map_err(|e| format!("{real}: {e}"))?;
            let bytes =
                handover::rewrite_bound(request.version, handover::Entry::of(policy.as_ref()));
            predictions.push(Prediction {
                spec: real.to_string(),
                ns_per_op: self.simulate(&spec, &shape)?,
                handover_bytes: bytes,
                handover_ns: bytes as f64 / entry_bytes * handover_ns_per_entry,
            });
        }
        Ok(predictions)
    }
}

/// A window of a benchmark or simulated run closes after this many write buffers of user
/// bytes: a phase of a few hundred megabytes gets several decisions, where the default
/// (64 MiB) would give one or none...
pub const RUN_WINDOW_BUFFERS: u64 = 4;

/// ...or after this many seconds...
pub const RUN_WINDOW_SECONDS: f64 = 5.0;

/// ...or after this many operations (phases of reads alone write nothing).
pub const RUN_WINDOW_OPS: u64 = 100_000;

/// The autopilot of a `strata bench` or `strata sim` run with `write_buffer_size` buffers:
/// the simulating advisor priced with `calibration` (out of cache against `cache_bytes`, see
/// [`SimulatingAdvisor::with_cache_bytes`]), windows sized for runs of minutes, and switches at
/// most one window apart.
pub fn run_autopilot(
    calibration: Calibration,
    write_buffer_size: u64,
    cache_bytes: Option<u64>,
) -> strata_policy::autopilot::AutopilotOptions {
    let advisor = SimulatingAdvisor::new(calibration).with_cache_bytes(cache_bytes);
    strata_policy::autopilot::AutopilotOptions::new(Arc::new(advisor))
        .with_every_bytes(RUN_WINDOW_BUFFERS * write_buffer_size)
        .with_every_seconds(RUN_WINDOW_SECONDS)
        .with_every_ops(RUN_WINDOW_OPS)
        .with_min_seconds_between_switches(RUN_WINDOW_SECONDS)
}
