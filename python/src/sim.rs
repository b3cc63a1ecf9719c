//! `strata.simulate`, `strata.bench`, `strata.workloads` and `strata.policies`: the simulator
//! and the engine on a named workload, and the registry of policies with their options.

use pyo3::prelude::*;
use strata_policy::{build_policy, registry, PolicySpec};
use strata_sim::{SimConfig, Simulator};
use strata_workload::{PresetParams, WorkloadSpec, PRESETS};

use crate::{error, to_python};

/// The buffer a simulation flushes at when neither the call nor the policy names one: the
/// `strata sim` command's.
const DEFAULT_WRITE_BUFFER_SIZE: u64 = 4 << 20;

/// The workload preset `workload` with `entries` loaded and `ops` operations run (`None`: as
/// many as `entries`) of keys and values of the sizes given.
fn preset(
    workload: &str,
    entries: u64,
    ops: Option<u64>,
    key_size: usize,
    value_size: usize,
) -> PyResult<WorkloadSpec> {
    let params = PresetParams {
        entries,
        ops: ops.unwrap_or(entries),
        key_size,
        value_size,
        ..PresetParams::default()
    };
    WorkloadSpec::preset(workload, &params).map_err(error)
}

/// Simulates `policy` (a specification, as `strata.policies()` lists them) on the workload
/// preset `workload` (`strata.workloads()`), returning the simulator's report (`strata sim
/// --json`'s fields: write, space and read amplification, flushes, compactions, phases, ...)
/// as a dict. The simulation is a pure function of its arguments: the same ones give the same
/// report.
#[pyfunction]
#[pyo3(signature = (policy, workload="fillunique", *, entries=100_000, ops=None, key_size=16, value_size=100, write_buffer_size=None, block_size=None, seed=42))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments, one per setting.
fn simulate(
    py: Python<'_>,
    policy: &str,
    workload: &str,
    entries: u64,
    ops: Option<u64>,
    key_size: usize,
    value_size: usize,
    write_buffer_size: Option<u64>,
    block_size: Option<u64>,
    seed: u64,
) -> PyResult<Py<PyAny>> {
    let spec = preset(workload, entries, ops, key_size, value_size)?;
    let mut policy_spec: PolicySpec = policy.parse().map_err(error)?;
    let buffer = write_buffer_size.unwrap_or(DEFAULT_WRITE_BUFFER_SIZE);
    // The facts a policy's model must agree with, as `strata sim` gives them.
    let data_bytes = entries
        .saturating_mul((key_size + value_size) as u64)
        .max(1);
    policy_spec
        .fill_defaults([
            ("write_buffer_size", buffer.to_string()),
            ("expected_data_size", data_bytes.to_string()),
        ])
        .map_err(error)?;
    let built = build_policy(&policy_spec).map_err(error)?;
    let config = SimConfig {
        key_size: key_size as u64,
        value_size: value_size as u64,
        buffer_size: buffer,
        // Tables cut into data blocks of this size, which policies then see.
        block_size,
        value_compression_ratio: spec.compression_ratio,
        ..SimConfig::default()
    };
    let report = py
        .detach(move || Simulator::new(built, config)?.run_workload(&spec, seed))
        .map_err(error)?;
    to_python(py, &serde_json::to_value(&report).map_err(error)?)
}

/// The workload presets `simulate` takes: `(name, what it does)`.
#[pyfunction]
fn workloads() -> Vec<(&'static str, &'static str)> {
    PRESETS.to_vec()
}

/// Every registered policy as a dict: `name`, `summary`, and `options`, each a dict of `name`,
/// `type`, `default` (text; empty where derived from other options), `rocksdb` (the RocksDB
/// option it corresponds to, or `None`) and `doc`.
#[pyfunction]
fn policies(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let listed: Vec<serde_json::Value> = registry::registered()
        .iter()
        .map(|r| {
            let options: Vec<serde_json::Value> = r
                .options
                .iter()
                .map(|o| {
                    serde_json::json!({
                        "name": o.name,
                        "type": o.kind.name(),
                        "default": o.default,
                        "rocksdb": o.rocksdb,
                        "doc": o.doc,
                    })
                })
                .collect();
            serde_json::json!({"name": r.name, "summary": r.summary, "options": options})
        })
        .collect();
    to_python(py, &serde_json::Value::Array(listed))
}

/// Runs the engine on the workload preset `workload` once per policy in `policies` (each in a
/// fresh database under `dir`, the system's temporary directory by default, removed at the
/// end), as `strata bench` does, and returns its comparison (`strata bench --json`'s runs:
/// throughput, latency percentiles, write, space and read amplification, per phase) as a dict.
/// The engines keep their defaults but for `write_buffer_size`.
#[pyfunction(name = "bench")]
#[pyo3(signature = (policies, workload="mixed", *, entries=100_000, ops=None, key_size=16, value_size=100, write_buffer_size=None, dir=None, seed=42))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments, one per setting.
fn run_bench(
    py: Python<'_>,
    policies: Vec<String>,
    workload: &str,
    entries: u64,
    ops: Option<u64>,
    key_size: usize,
    value_size: usize,
    write_buffer_size: Option<u64>,
    dir: Option<std::path::PathBuf>,
    seed: u64,
) -> PyResult<Py<PyAny>> {
    let mut settings = strata_bench::engines::EngineSettings {
        expected_data_size: entries.saturating_mul((key_size + value_size) as u64),
        ..strata_bench::engines::EngineSettings::default()
    };
    if let Some(bytes) = write_buffer_size {
        settings.write_buffer_size = bytes;
    }
    let config = strata_bench::BenchConfig {
        workload: preset(workload, entries, ops, key_size, value_size)?,
        policies,
        peers: Vec::new(),
        baseline: None,
        settings,
        dir,
        seed,
        progress: false,
        job_log: None,
        file_trace: None,
        isolate: None,
        bandwidth_probe_bytes: 0,
        storage: strata_bench::StorageOptions::default(),
        settle_phases: false,
    };
    let comparison = py
        .detach(move || strata_bench::run_comparison(&config))
        .map_err(error)?;
    to_python(py, &serde_json::to_value(&comparison).map_err(error)?)
}

/// `strata advise` with `flags`, its command-line flags (`["--workload", "ycsb-a",
/// "--objective", "write-amp"]`; `strata.advise` makes them from keyword arguments): the candidate
/// configurations ranked, and the pick (`None` when none meets the constraints), as a dict.
#[pyfunction]
fn advise_flags(py: Python<'_>, flags: Vec<String>) -> PyResult<Py<PyAny>> {
    let advice = py
        .detach(move || strata_cli::advise(flags))
        .map_err(|e| error(format!("{e:#}")))?;
    to_python(py, &advice)
}

/// Adds the functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(advise_flags, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(run_bench, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    Ok(())
}
