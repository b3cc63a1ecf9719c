//! `strata.Db`, `strata.WriteBatch`, `strata.Snapshot` and the iterators of `Db.range`: the
//! engine's API.
//!
//! Every call into the engine, and every drop of what holds engine state, releases the GIL
//! first: a background job asks a policy written in Python while it holds the engine's state
//! lock, taking the GIL to do so, so a caller that held the GIL while waiting for that lock
//! (reading the version, say) would wait forever. (A test of the engine running a Python
//! policy hung once in CI where it reads the version and the policy, which then held the GIL;
//! 20 runs here under load did not hang, before or after this rule, so that cause is a
//! reading of the code, not a measurement.)

use std::ops::Bound as KeyBound;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use strata_engine::{Compression, DbIterator, Options, ReadOptions, WriteOptions};

use crate::{bytes_of, engine_error, error, to_python};

/// An open database (`strata.Db`): `with strata.Db(path, policy="leveled") as db: ...`.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Db {
    /// `None` once closed.
    inner: RwLock<Option<Arc<strata_engine::Db>>>,
    path: String,
}

impl Drop for Db {
    /// A database left open closes when Python lets go of it, waiting for its jobs, so without
    /// the GIL.
    fn drop(&mut self) {
        drop_detached(self.inner.get_mut().take());
    }
}

impl Db {
    /// The open database, or an error once it is closed.
    fn db(&self) -> PyResult<Arc<strata_engine::Db>> {
        self.inner
            .read()
            .clone()
            .ok_or_else(|| error(format!("the database at {} is closed", self.path)))
    }
}

/// The keys a range or a manual compaction covers.
type KeyBounds = (KeyBound<Vec<u8>>, KeyBound<Vec<u8>>);

/// Key bounds from Python's `start` (inclusive) and `end` (exclusive), `None` for open.
fn key_bounds(
    start: Option<&Bound<'_, PyAny>>,
    end: Option<&Bound<'_, PyAny>>,
) -> PyResult<KeyBounds> {
    let start = match start {
        Some(s) => KeyBound::Included(bytes_of(s)?),
        None => KeyBound::Unbounded,
    };
    let end = match end {
        Some(e) => KeyBound::Excluded(bytes_of(e)?),
        None => KeyBound::Unbounded,
    };
    Ok((start, end))
}

/// The read options of a read at `snapshot`, or at the latest state.
fn read_options(snapshot: Option<&Snapshot>) -> PyResult<ReadOptions<'_>> {
    match snapshot {
        Some(s) => Ok(ReadOptions::at(s.engine_snapshot()?)),
        None => Ok(ReadOptions::default()),
    }
}

/// Drops `value` with the GIL released (see the module's docs).
fn drop_detached<T: Send>(value: T) {
    Python::attach(|py| py.detach(move || drop(value)));
}

#[pymethods]
impl Db {
    /// Opens (creating if missing) the database at `path`. `policy` is a policy specification
    /// (`"leveled"`, `"tiered:size_ratio=4"`; `strata.policies()` lists them); the other options
    /// are the engine's of the same names (`Options::with_*`), their defaults where `None`.
    #[new]
    #[pyo3(signature = (path, policy=None, *, write_buffer_size=None, block_cache_capacity=None, row_cache_capacity=None, compression=None))]
    fn open(
        py: Python<'_>,
        path: &str,
        policy: Option<&str>,
        write_buffer_size: Option<u64>,
        block_cache_capacity: Option<u64>,
        row_cache_capacity: Option<u64>,
        compression: Option<&str>,
    ) -> PyResult<Db> {
        let mut options = Options::new();
        if let Some(spec) = policy {
            options = options.with_policy_named(spec).map_err(engine_error)?;
        }
        if let Some(bytes) = write_buffer_size {
            options = options.with_write_buffer_size(bytes);
        }
        if let Some(bytes) = block_cache_capacity {
            options = options.with_block_cache_capacity(bytes);
        }
        if let Some(bytes) = row_cache_capacity {
            options = options.with_row_cache_capacity(bytes);
        }
        if let Some(codec) = compression {
            let codec = Compression::parse(codec).ok_or_else(|| {
                error(format!(
                    "compression {codec:?} is not a codec (none, lz4, zstd, zstd<level>, with \
                     +dict<size> for zstd)"
                ))
            })?;
            options = options.with_compression(codec);
        }
        let owned = path.to_string();
        let db = py
            .detach(move || strata_engine::Db::open(&owned, options))
            .map_err(engine_error)?;
        Ok(Db {
            inner: RwLock::new(Some(Arc::new(db))),
            path: path.to_string(),
        })
    }

    /// Stores `value` under `key`; `sync` waits for the WAL to reach storage.
    #[pyo3(signature = (key, value, *, sync=false))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let mut batch = strata_engine::WriteBatch::new();
        batch
            .put(bytes_of(key)?, bytes_of(value)?)
            .map_err(engine_error)?;
        self.apply(py, batch, sync)
    }

    /// Deletes `key`.
    #[pyo3(signature = (key, *, sync=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let mut batch = strata_engine::WriteBatch::new();
        batch.delete(bytes_of(key)?).map_err(engine_error)?;
        self.apply(py, batch, sync)
    }

    /// Deletes every key from `start` (included) to `end` (excluded).
    #[pyo3(signature = (start, end, *, sync=false))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let mut batch = strata_engine::WriteBatch::new();
        batch
            .delete_range(bytes_of(start)?, bytes_of(end)?)
            .map_err(engine_error)?;
        self.apply(py, batch, sync)
    }

    /// Applies `batch` atomically: all its writes or none. The batch stays as it was.
    #[pyo3(signature = (batch, *, sync=false))]
    fn write(&self, py: Python<'_>, batch: &WriteBatch, sync: bool) -> PyResult<()> {
        let batch = batch.inner.lock().clone();
        self.apply(py, batch, sync)
    }

    /// The value of `key` (at `snapshot`, or in the latest state), `None` if absent.
    #[pyo3(signature = (key, *, snapshot=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        snapshot: Option<&Snapshot>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let db = self.db()?;
        let key = bytes_of(key)?;
        let options = read_options(snapshot)?;
        let found = py
            .detach(|| db.get_with(&key, &options))
            .map_err(engine_error)?;
        Ok(found.map(|v| PyBytes::new(py, &v)))
    }

    /// The values of `keys`, in order, `None` where absent (one batched read: `multi_get`).
    #[pyo3(signature = (keys, *, snapshot=None))]
    fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<Bound<'py, PyAny>>,
        snapshot: Option<&Snapshot>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let db = self.db()?;
        let keys: Vec<Vec<u8>> = keys.iter().map(bytes_of).collect::<PyResult<_>>()?;
        let options = read_options(snapshot)?;
        let found = py
            .detach(|| db.multi_get_with(&keys, &options))
            .map_err(engine_error)?;
        Ok(found
            .into_iter()
            .map(|v| v.map(|v| PyBytes::new(py, &v)))
            .collect())
    }

    /// The `(key, value)` pairs from `start` (included) to `end` (excluded), in ascending key
    /// order, at `snapshot` or the latest state.
    #[pyo3(signature = (start=None, end=None, *, snapshot=None))]
    fn range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        snapshot: Option<&Snapshot>,
    ) -> PyResult<RangeIter> {
        self.iter(py, start, end, snapshot, false)
    }

    /// [`Db::range`] in descending key order.
    #[pyo3(signature = (start=None, end=None, *, snapshot=None))]
    fn range_rev(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        snapshot: Option<&Snapshot>,
    ) -> PyResult<RangeIter> {
        self.iter(py, start, end, snapshot, true)
    }

    /// A consistent view of the database as it is now: reads given it see nothing written
    /// later.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let db = self.db()?;
        let snapshot = py.detach(move || db.snapshot());
        Ok(Snapshot {
            inner: Some(snapshot),
        })
    }

    /// Writes the memtables to tables and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.db()?;
        py.detach(move || db.flush()).map_err(engine_error)
    }

    /// Compacts the keys from `start` to `end` (`None`: open) by hand and waits for it.
    #[pyo3(signature = (start=None, end=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let db = self.db()?;
        let bounds = key_bounds(start, end)?;
        py.detach(move || db.compact_range(bounds))
            .map_err(engine_error)
    }

    /// Waits until no flush or compaction is running or wanted by the policy.
    fn wait_for_compactions(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.db()?;
        py.detach(move || db.wait_for_compactions())
            .map_err(engine_error)
    }

    /// Counters since open and the tree's shape (`Db::metrics`), as a dict.
    fn metrics(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let db = self.db()?;
        let metrics = py.detach(move || db.metrics());
        to_python(py, &serde_json::to_value(metrics).map_err(error)?)
    }

    /// The specification of the policy the database runs, its options filled in.
    fn policy(&self, py: Python<'_>) -> PyResult<String> {
        let db = self.db()?;
        Ok(py.detach(move || strata_policy::PolicySpec::of(db.policy().as_ref()).to_string()))
    }

    /// The current version in the text format (`strata inspect`'s).
    fn version(&self, py: Python<'_>) -> PyResult<String> {
        let db = self.db()?;
        Ok(py.detach(move || db.version().to_string()))
    }

    /// Closes the database: waits for running jobs, syncs the WAL, releases the lock. Reads
    /// and writes afterwards raise `strata.Error`; closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(db) = self.inner.write().take() else {
            return Ok(());
        };
        match Arc::try_unwrap(db) {
            Ok(db) => py.detach(move || db.close()).map_err(engine_error),
            // Another Python thread is inside a call: the last one out closes it on drop.
            Err(_) => Ok(()),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.inner.read().is_some() {
            "open"
        } else {
            "closed"
        };
        format!("strata.Db({:?}, {state})", self.path)
    }
}

impl Db {
    /// Writes `batch`, the GIL released meanwhile.
    fn apply(&self, py: Python<'_>, batch: strata_engine::WriteBatch, sync: bool) -> PyResult<()> {
        let db = self.db()?;
        let options = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        py.detach(move || db.write(&options, batch))
            .map_err(engine_error)
    }

    fn iter(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        snapshot: Option<&Snapshot>,
        reverse: bool,
    ) -> PyResult<RangeIter> {
        let db = self.db()?;
        let bounds = key_bounds(start, end)?;
        let options = read_options(snapshot)?;
        let iter = py
            .detach(|| db.range_with(bounds, &options, reverse))
            .map_err(engine_error)?;
        Ok(RangeIter {
            inner: Mutex::new(Some(iter)),
        })
    }
}

/// An iterator over `(key, value)` pairs of bytes (`Db.range`, `Db.range_rev`).
#[pyclass(module = "strata", name = "Iter", frozen)]
pub(crate) struct RangeIter {
    /// `None` only while it is dropped.
    inner: Mutex<Option<DbIterator>>,
}

impl Drop for RangeIter {
    fn drop(&mut self) {
        drop_detached(self.inner.get_mut().take());
    }
}

#[pymethods]
impl RangeIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let next = py.detach(|| self.inner.lock().as_mut().and_then(Iterator::next));
        match next {
            None => Ok(None),
            Some(Ok((k, v))) => Ok(Some((PyBytes::new(py, &k), PyBytes::new(py, &v)))),
            Some(Err(e)) => Err(engine_error(e)),
        }
    }
}

/// Writes applied together by `Db.write` (`strata.WriteBatch`).
#[pyclass(module = "strata", frozen)]
#[derive(Default)]
pub(crate) struct WriteBatch {
    inner: Mutex<strata_engine::WriteBatch>,
}

#[pymethods]
impl WriteBatch {
    #[new]
    fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds a put of `value` under `key`.
    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (key, value) = (bytes_of(key)?, bytes_of(value)?);
        self.inner
            .lock()
            .put(key, value)
            .map(drop)
            .map_err(engine_error)
    }

    /// Adds a delete of `key`.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = bytes_of(key)?;
        self.inner
            .lock()
            .delete(key)
            .map(drop)
            .map_err(engine_error)
    }

    /// Adds a deletion of the keys from `start` (included) to `end` (excluded).
    fn delete_range(&self, start: &Bound<'_, PyAny>, end: &Bound<'_, PyAny>) -> PyResult<()> {
        let (start, end) = (bytes_of(start)?, bytes_of(end)?);
        self.inner
            .lock()
            .delete_range(start, end)
            .map(drop)
            .map_err(engine_error)
    }

    /// Writes in the batch.
    fn __len__(&self) -> usize {
        self.inner.lock().len()
    }
}

/// A consistent view of a database (`Db.snapshot`), for `get`, `multi_get` and `range`.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Snapshot {
    /// `None` only while it is dropped.
    inner: Option<strata_engine::Snapshot>,
}

impl Snapshot {
    fn engine_snapshot(&self) -> PyResult<&strata_engine::Snapshot> {
        self.inner
            .as_ref()
            .ok_or_else(|| error("the snapshot is released"))
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        drop_detached(self.inner.take());
    }
}

#[pymethods]
impl Snapshot {
    /// The sequence number it reads at.
    #[getter]
    fn sequence(&self) -> PyResult<u64> {
        Ok(self.engine_snapshot()?.sequence())
    }
}

/// Adds the classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Db>()?;
    m.add_class::<RangeIter>()?;
    m.add_class::<WriteBatch>()?;
    m.add_class::<Snapshot>()?;
    Ok(())
}
