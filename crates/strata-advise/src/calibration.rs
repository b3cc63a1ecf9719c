//! What this machine and its storage cost: the numbers that turn a simulation's counts (entries
//! flushed and merged, tables written, runs probed, blocks read) into time. Measured by
//! [`crate::measure`] (`strata calibrate`) and kept in a small JSON file the advisor reads.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file name a calibration is kept under, in a database directory or wherever
/// `strata calibrate --output` puts it.
pub const CALIBRATION_FILE: &str = "CALIBRATION.json";

/// The format version this build writes and reads.
pub const CALIBRATION_FORMAT: u32 = 1;

/// Errors reading or writing a calibration.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The file is not a calibration this build reads.
    #[error("{path}: not a calibration this build reads: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A measurement failed.
    #[error("measuring {what}: {reason}")]
    Measurement {
        /// What was being measured.
        what: &'static str,
        /// Why it failed.
        reason: String,
    },
}

/// CPU nanoseconds per unit of work of the engine, each measured on its own with the data in
/// memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuCosts {
    /// A put: its WAL record and its memtable insert.
    pub write_ns: f64,
    /// Each entry a flush writes to a table (sorting is the memtable's; this is encoding,
    /// compressing, filtering and writing).
    pub flush_ns_per_entry: f64,
    /// Each input entry a merge reads, compares and writes out.
    pub merge_ns_per_entry: f64,
    /// Each table written, whatever its size: creating, indexing, syncing the file and
    /// recording it.
    pub table_ns: f64,
    /// A point lookup that finds its key in the first run it probes, blocks cached.
    pub lookup_ns: f64,
    /// Each further run a point lookup probes without finding the key (its filter says no).
    pub run_probe_ns: f64,
    /// Positioning a range scan in one run.
    pub seek_ns_per_run: f64,
    /// Each entry a range scan returns, reading one run.
    pub scan_ns_per_entry: f64,
    /// What each further run a scan merges adds to each entry it returns (the merging
    /// iterator's comparisons).
    pub scan_ns_per_entry_per_run: f64,
}

/// What the storage device costs, out of the page cache (direct reads and writes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceCosts {
    /// A random 4 KiB read, one at a time, in microseconds.
    pub read_latency_us: f64,
    /// Sequential reads, bytes per second.
    pub read_bytes_per_sec: f64,
    /// Sequential writes, synced, bytes per second.
    pub write_bytes_per_sec: f64,
}

/// A machine's calibration: its CPU costs, its device's (when measured), and its cores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The format version ([`CALIBRATION_FORMAT`]).
    pub format: u32,
    /// Unix seconds of the measurement (0 for [`Calibration::assumed`]).
    pub measured_at: u64,
    /// Cores the process could run on: background work runs beside the writer on the others.
    pub cores: usize,
    /// CPU costs.
    pub cpu: CpuCosts,
    /// Device costs, if measured (a file system without direct I/O has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceCosts>,
}

impl Calibration {
    /// Round figures for a machine nobody measured: 2 cores, costs of the order this engine
    /// shows on a current x86 core, a device of 100 µs reads and 500 MB/s. The advisor works
    /// with them, and says so; `strata calibrate` replaces them with this machine's.
    pub fn assumed() -> Self {
        Self {
            format: CALIBRATION_FORMAT,
            measured_at: 0,
            cores: 2,
            cpu: CpuCosts {
                write_ns: 700.0,
                flush_ns_per_entry: 150.0,
                merge_ns_per_entry: 250.0,
                table_ns: 1_000_000.0,
                lookup_ns: 1_000.0,
                run_probe_ns: 100.0,
                seek_ns_per_run: 500.0,
                scan_ns_per_entry: 30.0,
                scan_ns_per_entry_per_run: 10.0,
            },
            device: Some(Self::assumed_device()),
        }
    }

    /// The device of [`Calibration::assumed`]: 100 µs reads, 500 MB/s each way.
    pub fn assumed_device() -> DeviceCosts {
        DeviceCosts {
            read_latency_us: 100.0,
            read_bytes_per_sec: 500e6,
            write_bytes_per_sec: 500e6,
        }
    }

    /// Whether it was measured rather than [`Calibration::assumed`].
    pub fn is_measured(&self) -> bool {
        self.measured_at > 0
    }

    /// Reads a calibration from `path` (a file, or a directory holding [`CALIBRATION_FILE`]).
    pub fn load(path: &Path) -> Result<Self, CalibrationError> {
        let path = if path.is_dir() {
            path.join(CALIBRATION_FILE)
        } else {
            path.to_path_buf()
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|source| CalibrationError::Io {
            path: shown.clone(),
            source,
        })?;
        let calibration: Calibration =
            serde_json::from_str(&text).map_err(|e| CalibrationError::Invalid {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
        calibration
            .check()
            .map_err(|reason| CalibrationError::Invalid {
                path: shown,
                reason,
            })?;
        Ok(calibration)
    }

    /// Writes it to `path` (a file, or a directory to hold [`CALIBRATION_FILE`]), through a
    /// temporary file renamed over the old one.
    pub fn save(&self, path: &Path) -> Result<(), CalibrationError> {
        let path = if path.is_dir() {
            path.join(CALIBRATION_FILE)
        } else {
            path.to_path_buf()
        };
        let io = |source| CalibrationError::Io {
            path: path.display().to_string(),
            source,
        };
        let text = serde_json::to_string_pretty(self).map_err(|e| CalibrationError::Invalid {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let temporary = path.with_extension("json.tmp");
        std::fs::write(&temporary, text + "\n").map_err(io)?;
        std::fs::rename(&temporary, &path).map_err(io)
    }

    /// Every cost positive and finite, a known format, at least one core.
    pub fn check(&self) -> Result<(), String> {
        if self.format != CALIBRATION_FORMAT {
            return Err(format!(
                "format {} (this build reads {CALIBRATION_FORMAT})",
                self.format
            ));
        }
        if self.cores == 0 {
            return Err("cores is 0".to_string());
        }
        let c = &self.cpu;
        let mut costs = vec![
            ("cpu.write_ns", c.write_ns),
            ("cpu.flush_ns_per_entry", c.flush_ns_per_entry),
            ("cpu.merge_ns_per_entry", c.merge_ns_per_entry),
            ("cpu.table_ns", c.table_ns),
            ("cpu.lookup_ns", c.lookup_ns),
            ("cpu.run_probe_ns", c.run_probe_ns),
            ("cpu.seek_ns_per_run", c.seek_ns_per_run),
            ("cpu.scan_ns_per_entry", c.scan_ns_per_entry),
            ("cpu.scan_ns_per_entry_per_run", c.scan_ns_per_entry_per_run),
        ];
        if let Some(d) = &self.device {
            costs.extend([
                ("device.read_latency_us", d.read_latency_us),
                ("device.read_bytes_per_sec", d.read_bytes_per_sec),
                ("device.write_bytes_per_sec", d.write_bytes_per_sec),
            ]);
        }
        match costs.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            Some((name, v)) => Err(format!("{name} is {v}; every cost must be above 0")),
            None => Ok(()),
        }
    }
}
