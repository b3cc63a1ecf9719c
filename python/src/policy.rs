//! Policies written in Python: a subclass of `strata.Policy` registered by name
//! (`strata.register_policy`) runs wherever a built-in one does, the simulator and the engine,
//! through [`PythonPolicy`], which calls its `plan_flush` and `pick` holding the GIL. The
//! version and the context reach Python as the read-only views below; plans come back as the
//! plan classes of `strata/policy.py`, read by attribute.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use strata_meta::{PolicyState, RunId, TableId};
use strata_policy::registry;
use strata_policy::{
    BufferSelection, CompactionPolicy, CutRule, FlushPlan, Leases, OptionKind, OptionSpec,
    OutputRun, PickContext, Plan, PlanAction, PlanInput, PlanOutput, PolicyConfig, PolicyError,
    PolicyRegistration, Priority,
};

use crate::error;

/// The Python classes registered as policies, by name.
fn classes() -> &'static Mutex<HashMap<&'static str, Py<PyAny>>> {
    static CLASSES: OnceLock<Mutex<HashMap<&'static str, Py<PyAny>>>> = OnceLock::new();
    CLASSES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Registers `cls`, a subclass of `strata.Policy`, under its `name`, with the options of its
/// `options` dict (name to default; the default's type is the option's: float, int, bool or
/// str), for this process: specifications name it like any policy (`"my-policy:ratio=4"`).
#[pyfunction]
fn register_policy(cls: Bound<'_, PyAny>) -> PyResult<()> {
    let name: String = cls.getattr("name")?.extract()?;
    let summary: String = cls.getattr("summary")?.extract()?;
    let declared = cls.getattr("options")?;
    let declared = declared.cast::<PyDict>()?;
    let mut options = Vec::new();
    for (option, default) in declared.iter() {
        let option: String = option.extract()?;
        // bool before int: Python's bools are ints.
        let (kind, text) = if let Ok(b) = default.extract::<bool>() {
            (OptionKind::Bool, b.to_string())
        } else if let Ok(i) = default.extract::<u64>() {
            (OptionKind::Integer, i.to_string())
        } else if let Ok(f) = default.extract::<f64>() {
            (OptionKind::Float, f.to_string())
        } else {
            (OptionKind::Text, default.str()?.to_string())
        };
        options.push(OptionSpec {
            name: leak(option),
            kind,
            default: leak(text),
            rocksdb: None,
            doc: "an option of a policy written in Python",
        });
    }
    // A registration lives as long as the process (the registry holds `'static` text).
    let name: &'static str = leak(name);
    registry::register(PolicyRegistration {
        name,
        summary: leak(summary),
        options: Box::leak(options.into_boxed_slice()),
        build: build_python_policy,
    })
    .map_err(error)?;
    classes()
        .lock()
        .map_err(|_| error("the policy registry is poisoned"))?
        .insert(name, cls.unbind());
    Ok(())
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// Builds a registered Python policy: its class called with the options as keyword arguments,
/// each of its declared type.
fn build_python_policy(config: &PolicyConfig) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    let name = config.policy_name();
    let registration = registry::lookup(name)?;
    Python::attach(|py| {
        let cls = classes()
            .lock()
            .map_err(|_| PolicyError::InvalidPlan("the policy registry is poisoned".into()))?
            .get(name)
            .map(|c| c.clone_ref(py))
            .ok_or_else(|| PolicyError::InvalidPlan(format!("{name} is not a Python policy")))?;
        let kwargs = PyDict::new(py);
        let mut recorded = Vec::new();
        for spec in registration.options {
            let Some(text) = config.text(spec.name)? else {
                continue;
            };
            let set = match spec.kind {
                OptionKind::Bool => kwargs.set_item(spec.name, config.bool(spec.name)?),
                OptionKind::Integer => kwargs.set_item(spec.name, config.u64(spec.name)?),
                OptionKind::Float => kwargs.set_item(spec.name, config.f64(spec.name)?),
                OptionKind::Size => kwargs.set_item(spec.name, config.size(spec.name)?),
                OptionKind::Text => kwargs.set_item(spec.name, text),
            };
            set.map_err(|e| python_failed(name, "building it", &e))?;
            recorded.push((spec.name, text.to_string()));
        }
        let object = cls
            .call(py, (), Some(&kwargs))
            .map_err(|e| python_failed(name, "building it", &e))?;
        Ok(Arc::new(PythonPolicy {
            name,
            object,
            options: recorded,
        }) as Arc<dyn CompactionPolicy>)
    })
}

fn python_failed(policy: &str, doing: &str, e: &PyErr) -> PolicyError {
    PolicyError::InvalidPlan(format!("Python policy {policy}, {doing}: {e}"))
}

/// A policy object of Python, asked holding the GIL.
struct PythonPolicy {
    name: &'static str,
    object: Py<PyAny>,
    options: Vec<(&'static str, String)>,
}

impl std::fmt::Debug for PythonPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PythonPolicy")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl CompactionPolicy for PythonPolicy {
    fn name(&self) -> &'static str {
        self.name
    }

    fn plan_flush(
        &self,
        version: &strata_meta::Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        Python::attach(|py| {
            let plan = self.call(py, "plan_flush", version, ctx)?;
            flush_plan_of(&plan).map_err(|e| python_failed(self.name, "reading its flush plan", &e))
        })
    }

    fn pick(
        &self,
        version: &strata_meta::Version,
        ctx: &PickContext<'_>,
    ) -> Result<Option<Plan>, PolicyError> {
        Python::attach(|py| {
            let plan = self.call(py, "pick", version, ctx)?;
            if plan.is_none() {
                return Ok(None);
            }
            plan_of(&plan)
                .map(Some)
                .map_err(|e| python_failed(self.name, "reading its plan", &e))
        })
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        self.options.clone()
    }
}

impl PythonPolicy {
    /// Calls the object's `method` with views of `version` and `ctx`.
    fn call<'py>(
        &self,
        py: Python<'py>,
        method: &str,
        version: &strata_meta::Version,
        ctx: &PickContext<'_>,
    ) -> Result<Bound<'py, PyAny>, PolicyError> {
        let version_view = Version::of(version);
        let context = Context::of(ctx);
        self.object
            .bind(py)
            .call_method1(method, (version_view, context))
            .map_err(|e| python_failed(self.name, method, &e))
    }
}

/// A `strata.PlanOutput` (or any object with its attributes) as the plan vocabulary's.
fn output_of(output: &Bound<'_, PyAny>) -> PyResult<PlanOutput> {
    let run: Option<u64> = output.getattr("run")?.extract()?;
    let target: Option<u64> = output.getattr("target_file_size")?.extract()?;
    Ok(PlanOutput {
        level: output.getattr("level")?.extract()?,
        run: run.map_or(OutputRun::New, |id| OutputRun::Existing(RunId(id))),
        cut: target.map_or_else(CutRule::single_table, CutRule::target_size),
        bloom_bits_per_key: output.getattr("bloom_bits_per_key")?.extract()?,
        compression: None,
        preserve_blocks: None,
    })
}

fn state_of(plan: &Bound<'_, PyAny>) -> PyResult<Option<PolicyState>> {
    let state: Option<String> = plan.getattr("policy_state")?.extract()?;
    state
        .map(|s| PolicyState::from_json(&s).map_err(error))
        .transpose()
}

/// A `strata.FlushPlan` as the plan vocabulary's.
fn flush_plan_of(plan: &Bound<'_, PyAny>) -> PyResult<FlushPlan> {
    let merge_with: Vec<u64> = plan.getattr("merge_with")?.extract()?;
    Ok(FlushPlan {
        output: output_of(&plan.getattr("output")?)?,
        merge_with: merge_with.into_iter().map(TableId).collect(),
        selection: BufferSelection::All,
        policy_state: state_of(plan)?,
        reason: plan.getattr("reason")?.extract()?,
    })
}

/// A `strata.Plan` as the plan vocabulary's.
fn plan_of(plan: &Bound<'_, PyAny>) -> PyResult<Plan> {
    let action: String = plan.getattr("action")?.extract()?;
    let action = match action.as_str() {
        "merge" => PlanAction::Merge,
        "move" => PlanAction::Move,
        "drop" => PlanAction::Drop,
        "update_state" => PlanAction::UpdateState,
        other => {
            return Err(error(format!(
                "plan action {other:?} is none of merge, move, drop, update_state"
            )))
        }
    };
    let mut inputs = Vec::new();
    for input in plan.getattr("inputs")?.try_iter()? {
        let input = input?;
        let tables: Vec<u64> = input.getattr("tables")?.extract()?;
        inputs.push(PlanInput {
            level: input.getattr("level")?.extract()?,
            run: RunId(input.getattr("run")?.extract()?),
            tables: tables.into_iter().map(TableId).collect(),
        });
    }
    let output = plan.getattr("output")?;
    let urgent: bool = plan.getattr("urgent")?.extract()?;
    Ok(Plan {
        action,
        inputs,
        output: if output.is_none() {
            None
        } else {
            Some(output_of(&output)?)
        },
        policy_state: state_of(plan)?,
        priority: if urgent {
            Priority::Urgent
        } else {
            Priority::Normal
        },
        reason: plan.getattr("reason")?.extract()?,
    })
}

/// The version a policy decides on (`strata.Version`): levels of runs of tables, read-only.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Version {
    inner: strata_meta::Version,
}

impl Version {
    fn of(version: &strata_meta::Version) -> Version {
        Version {
            inner: version.clone(),
        }
    }
}

#[pymethods]
impl Version {
    /// Levels, counting level 0.
    #[getter]
    fn num_levels(&self) -> usize {
        self.inner.num_levels()
    }

    /// Level `level`'s runs, newest first (none past the levels the version has: a plan may
    /// write into any level, and the version grows to hold it).
    fn runs(&self, level: usize) -> Vec<Run> {
        if level >= self.inner.num_levels() {
            return Vec::new();
        }
        self.inner
            .level(level)
            .runs()
            .iter()
            .map(|r| Run {
                inner: Arc::clone(r),
            })
            .collect()
    }

    /// Bytes of level `level`'s tables.
    fn level_bytes(&self, level: usize) -> u64 {
        if level < self.inner.num_levels() {
            self.inner.level(level).size()
        } else {
            0
        }
    }

    /// Bytes of every table.
    #[getter]
    fn bytes(&self) -> u64 {
        self.inner.size()
    }

    /// The policy's own state, as its last plan installed it (JSON text; empty if none).
    #[getter]
    fn policy_state(&self) -> String {
        self.inner.policy_state().as_str().to_string()
    }

    /// The version in the text format (`strata inspect`'s).
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
}

/// A sorted run (`strata.Run`): tables of disjoint key ranges in key order.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Run {
    inner: Arc<strata_meta::Run>,
}

#[pymethods]
impl Run {
    /// Its id, which plans name.
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id().0
    }

    /// Its tables in key order.
    #[getter]
    fn tables(&self) -> Vec<Table> {
        self.inner
            .tables()
            .iter()
            .map(|t| Table {
                inner: Arc::clone(t),
            })
            .collect()
    }

    /// Bytes of its tables.
    #[getter]
    fn bytes(&self) -> u64 {
        self.inner.size()
    }
}

/// A table (`strata.Table`): its id, key range, size and counts.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Table {
    inner: Arc<strata_meta::TableMeta>,
}

#[pymethods]
impl Table {
    /// Its id, which plans name.
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id.0
    }
    /// Its smallest user key.
    #[getter]
    fn smallest<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.smallest)
    }
    /// Its largest user key.
    #[getter]
    fn largest<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.largest)
    }
    /// Bytes of its file.
    #[getter]
    fn size(&self) -> u64 {
        self.inner.size
    }
    /// Entries (puts and tombstones).
    #[getter]
    fn entries(&self) -> u64 {
        self.inner.entries
    }
    /// Tombstones.
    #[getter]
    fn tombstones(&self) -> u64 {
        self.inner.tombstones
    }
    /// Its smallest and largest sequence numbers.
    #[getter]
    fn seqnos(&self) -> (u64, u64) {
        (self.inner.seqnos.smallest, self.inner.seqnos.largest)
    }

    /// Its data blocks, where the executor records them (block-preserving merges and
    /// ChooseBest windows read them): each a dict of `smallest`, `largest` (keys), `size`,
    /// `entries`, `file` (the table file holding it: another table's for a kept block) and
    /// `offset`; `None` where blocks are not recorded.
    #[getter]
    fn blocks<'py>(&self, py: Python<'py>) -> PyResult<Option<Vec<Bound<'py, PyDict>>>> {
        let Some(blocks) = &self.inner.blocks else {
            return Ok(None);
        };
        blocks
            .iter()
            .map(|b| {
                let d = PyDict::new(py);
                d.set_item("smallest", PyBytes::new(py, &b.smallest))?;
                d.set_item("largest", PyBytes::new(py, &b.largest))?;
                d.set_item("size", b.size)?;
                d.set_item("entries", b.entries)?;
                d.set_item("file", b.file.0)?;
                d.set_item("offset", b.offset)?;
                Ok(d)
            })
            .collect::<PyResult<Vec<_>>>()
            .map(Some)
    }
}

/// What a policy knows beside the version (`strata.Context`): which tables running jobs hold,
/// the buffer being flushed, the clock.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Context {
    leases: Leases,
    buffer: Option<(u64, u64)>,
    now_nanos: u64,
}

impl Context {
    fn of(ctx: &PickContext<'_>) -> Context {
        Context {
            // The running jobs' leases, not a scan of the version's tables for them: a few
            // entries, copied once per call.
            leases: ctx.leases.clone(),
            buffer: ctx.buffer.map(|b| (b.entries, b.bytes)),
            now_nanos: ctx.now_nanos,
        }
    }
}

#[pymethods]
impl Context {
    /// Whether a running job holds table `table` (a plan may not take it).
    fn is_leased(&self, table: u64) -> bool {
        self.leases.is_table_leased(TableId(table))
    }

    /// The buffer being flushed, as `(entries, bytes)`, when a flush is being planned.
    #[getter]
    fn buffer(&self) -> Option<(u64, u64)> {
        self.buffer
    }

    /// The executor's clock in nanoseconds (the simulator's is simulated).
    #[getter]
    fn now_nanos(&self) -> u64 {
        self.now_nanos
    }
}

/// Adds the function and classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(register_policy, m)?)?;
    m.add_class::<Version>()?;
    m.add_class::<Run>()?;
    m.add_class::<Table>()?;
    m.add_class::<Context>()?;
    Ok(())
}
