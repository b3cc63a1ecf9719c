//! What a benchmark run measured: the data model shared by the runner, the terminal table, the
//! JSON/CSV files and the HTML report.

pub use crate::device_probe::DeviceProbe;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// Reads a number that JSON stores as `null` when it was not finite (serde_json writes NaN so).
fn nan_if_null<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Latency of one operation type over a phase, in microseconds (from an HDR histogram).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Operations measured.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Maximum.
    pub max_us: f64,
}

/// One measured phase of a workload (a load phase, a mixed phase, ...).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    /// Phase name (e.g. "load", "run", "fillrandom").
    pub name: String,
    /// Operations completed.
    pub ops: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// ops / seconds.
    pub ops_per_sec: f64,
    /// With `strata bench --settle`, seconds from the phase's last operation until its flushes
    /// and compactions were done; they are part of `seconds` and `ops_per_sec`, and the work
    /// is part of `write_amp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_seconds: Option<f64>,
    /// Lowest throughput over any window of 100,000 consecutive operations (or the whole phase
    /// when it has fewer operations).
    pub worst_window_ops_per_sec: f64,
    /// Throughput over time: (seconds since the phase started, ops/s in the preceding interval).
    pub throughput_samples: Vec<(f64, f64)>,
    /// Latency per operation type ("insert", "update", "read", "scan", "delete", "rmw", ...),
    /// plus "all".
    pub latency: BTreeMap<String, LatencySummary>,
    /// User key+value bytes the phase wrote.
    #[serde(default)]
    pub user_bytes: u64,
    /// Table bytes written during the phase (flushes and compactions, including work left over
    /// from the phase before) ÷ `user_bytes`; absent when the engine does not count table bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_amp: Option<f64>,
    /// Data blocks written into each level during the phase (index = level); empty unless the
    /// engine counts them (`strata bench --count-blocks`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks_written_per_level: Vec<u64>,
    /// Data blocks block-preserving merges kept in each level during the phase instead of
    /// rewriting them (index = level); empty unless counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks_preserved_per_level: Vec<u64>,
    /// Each compaction round that both began and ended inside the phase (a round ends with a
    /// merge that rewrites the whole deepest level), with the phase's throughput over it; empty
    /// for engines and policies without such merges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<RoundThroughput>,
    /// Data blocks the phase's queries read from storage (block-cache misses; compactions and
    /// table metadata not counted); absent when the engine does not count them. With a block
    /// cache too small to hold what a query reads, ÷ `ops` is the blocks a query touches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_read: Option<u64>,
    /// Index blocks the phase's queries read from storage, where the engine counts them
    /// (Strata: when the block cache holds indexes; RocksDB: index block-cache misses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_blocks_read: Option<u64>,
    /// Filter blocks the phase's queries read from storage, counted like `index_blocks_read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_blocks_read: Option<u64>,
    /// Threads that ran the phase's operations.
    #[serde(default = "one")]
    pub threads: usize,
    /// Keys per batched read (1: reads one at a time). A batch counts as this many
    /// operations in `ops` and `ops_per_sec`, which stay keys per second, and has one latency,
    /// under "multiread".
    #[serde(default = "one")]
    pub read_batch: usize,
    /// Keys the phase's point reads asked for (batched reads and read-modify-writes included).
    #[serde(default)]
    pub point_reads: u64,
    /// Of those, the keys found.
    #[serde(default)]
    pub point_reads_found: u64,
    /// Bytes fetched from storage for the process during the phase (`read_bytes` of
    /// `/proc/self/io`: page-cache misses and direct reads), where the platform reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_bytes_read: Option<u64>,
    /// Read requests the block device holding the database completed during the phase (its
    /// sysfs `stat`; every process's reads of the device count), where it has counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_reads: Option<u64>,
    /// Bytes those reads brought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_bytes_read: Option<u64>,
}

/// A count's default of one (threads, batch sizes).
fn one() -> usize {
    1
}

impl PhaseResult {
    /// Device read requests per second of the phase.
    pub fn device_reads_per_sec(&self) -> Option<f64> {
        let reads = self.device_reads? as f64;
        (self.seconds > 0.0).then(|| reads / self.seconds)
    }

    /// `count` per operation of the phase.
    pub fn per_op(&self, count: Option<u64>) -> Option<f64> {
        let count = count? as f64;
        (self.ops > 0).then(|| count / self.ops as f64)
    }

    /// The share of point reads that found their key.
    pub fn found_share(&self) -> Option<f64> {
        (self.point_reads > 0).then(|| self.point_reads_found as f64 / self.point_reads as f64)
    }

    /// How many reads the phase could have in flight at once: its threads times its batch
    /// size (a batch's reads may go to the device together, as RocksDB's MultiRead sends them).
    pub fn queue_depth(&self) -> usize {
        self.threads.max(1).saturating_mul(self.read_batch.max(1))
    }
}

/// The phase's throughput over one compaction round.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundThroughput {
    /// Seconds since the phase started when the round began (the previous round's end).
    pub start_secs: f64,
    /// Seconds since the phase started when it ended.
    pub end_secs: f64,
    /// Operations completed in it, per second.
    pub ops_per_sec: f64,
}

/// Shape of one level at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelShape {
    /// Level number.
    pub level: usize,
    /// Sorted runs.
    pub runs: usize,
    /// Table files.
    pub tables: usize,
    /// Bytes.
    pub bytes: u64,
}

/// Everything measured for one engine configuration (one policy, or one peer) on one workload.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Display label, unique within a comparison: the policy name for Strata, the peer name for
    /// peers ("rocksdb", "fjall").
    pub label: String,
    /// Engine: "strata", "rocksdb" or "fjall".
    pub engine: String,
    /// Compaction policy (for peers, their own style, e.g. "rocksdb-leveled").
    pub policy: String,
    /// Workload name.
    pub workload: String,
    /// Throughput of the main (last measured) phase.
    pub ops_per_sec: f64,
    /// Worst-window throughput of the main phase.
    pub worst_window_ops_per_sec: f64,
    /// p99 latency over all operations of the main phase, µs.
    pub p99_us: f64,
    /// Bytes written to table files by flushes and compactions ÷ user key+value bytes written.
    #[serde(deserialize_with = "nan_if_null")]
    pub write_amp: f64,
    /// Peak disk usage of the database directory (sampled) ÷ bytes of the live unique key+value
    /// set at the end.
    #[serde(deserialize_with = "nan_if_null")]
    pub peak_space_amp: f64,
    /// Disk usage at the end ÷ live bytes at the end.
    #[serde(deserialize_with = "nan_if_null")]
    pub final_space_amp: f64,
    /// Data blocks read from storage (block-cache misses) per point lookup in the measured phases,
    /// when the engine reports it.
    pub read_amp: Option<f64>,
    /// Index blocks read from storage per point lookup in the measured phases, when the engine
    /// reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_reads_per_lookup: Option<f64>,
    /// Filter blocks read from storage per point lookup in the measured phases, when the engine
    /// reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_reads_per_lookup: Option<f64>,
    /// Sorted runs (or tables) probed per point lookup, when the engine reports it.
    pub runs_probed_per_lookup: Option<f64>,
    /// Filter probes per point lookup, when the engine reports it (fewer than the runs probed
    /// where a key index answers instead, `--key-index`).
    #[serde(default)]
    pub filter_probes_per_lookup: Option<f64>,
    /// Seconds writers were stalled by the engine's write controller, when reported.
    pub stall_seconds: Option<f64>,
    /// CPU seconds the process used (user + system) during the run.
    pub cpu_seconds: f64,
    /// Seconds the compaction policy spent deciding (picks, flush plans, holds), a part of
    /// `cpu_seconds`; absent for peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_seconds: Option<f64>,
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
    /// The share of the machine's CPU time that the hypervisor gave to other guests while the
    /// run ran (steal, [`crate::physical::MachineCpu`]), where the platform reports it. The
    /// slowdown can be far larger than the share: on this project's 2-vCPU machine, runs during
    /// 22–27% steal took 1.5–2.2× the CPU seconds and ran at 0.35–0.59× the throughput of the
    /// same configurations without (docs/advise-and-switch.md). Such a run's timings say more
    /// about the neighbours than about the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_share: Option<f64>,
    /// Operations of every phase, loads and settling phases included (what `cpu_seconds` and
    /// `device_bytes_written` are spent on).
    #[serde(default)]
    pub total_ops: u64,
    /// Bytes the process sent to the storage device during the run (WAL, flushes, compactions,
    /// manifest; [`crate::physical::device_bytes_written`]), where the platform reports it.
    #[serde(default)]
    pub device_bytes_written: Option<u64>,
    /// Peak resident memory of the process during the run, where the platform reports it. Exact
    /// when the run had a process of its own (`strata bench`'s default); otherwise it includes
    /// memory earlier runs freed but the allocator kept.
    #[serde(default)]
    pub peak_rss_bytes: Option<u64>,
    /// Resident memory over time: (seconds since the run started, bytes), sampled with the
    /// disk usage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_samples: Vec<(f64, u64)>,
    /// User key+value bytes written.
    pub user_bytes: u64,
    /// Bytes written to table files by flushes and compactions.
    pub table_bytes_written: u64,
    /// Live unique key+value bytes at the end.
    pub live_bytes: u64,
    /// Peak sampled size of the database directory.
    pub peak_disk_bytes: u64,
    /// Size of the database directory at the end.
    pub final_disk_bytes: u64,
    /// Disk usage over time: (seconds since the run started, bytes).
    pub disk_samples: Vec<(f64, u64)>,
    /// The LSM shape at the end (Strata only).
    pub shape: Vec<LevelShape>,
    /// The autopilot's decisions, oldest first (runs labelled `autopilot` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub autopilot: Vec<strata_policy::autopilot::Decision>,
    /// The options that shaped the tree, by name (`KvEngine::options`): a Strata policy's as it
    /// was built, with the defaults it applied and the values it derived; a peer's matched
    /// shape. Empty for a run on the engine's own defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<(String, String)>,
    /// The compaction policy's persisted state at the end (Strata policies that keep one: their
    /// counters, rounds and tuning decisions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_state: Option<String>,
    /// Keys in the key index at the end and the bytes its hash tables hold (`--key-index`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_index: Option<(u64, u64)>,
    /// The phases, in order.
    pub phases: Vec<PhaseResult>,
    /// Data blocks written and kept per level in every phase, measured or not (empty unless
    /// counted, `strata bench --count-blocks`): windows longer than the measured phase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_blocks: Vec<PhaseBlocks>,
    /// The memory limit of the run's process, page cache included (`--memory-limit`: a
    /// cgroup's), if it had one.
    #[serde(default)]
    pub memory_limit: Option<u64>,
    /// The cap on the run's writes to the database's device, in bytes per second
    /// (`--device-write-limit`: a cgroup's), if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_write_limit: Option<u64>,
    /// Whether the engine read and wrote its tables with direct I/O (`--direct-io`; fjall has
    /// none, so its runs say false).
    #[serde(default)]
    pub direct_io: bool,
    /// The engine's block cache capacity; `None` when it ran with its own default
    /// (`--engine-defaults`).
    #[serde(default)]
    pub block_cache_bytes: Option<u64>,
    /// The engine's row cache capacity (`--row-cache`); `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_cache_bytes: Option<u64>,
    /// Where the engine's indexes and filters lived (`--no-table-charge`,
    /// `--cache-index-and-filter-blocks`), as a phrase, if the engine says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_and_filter: Option<String>,
    /// Whether the page cache was dropped before each measured phase (`--drop-caches`).
    #[serde(default)]
    pub drop_caches: bool,
    /// The load phases skipped because the run used a database kept earlier
    /// (`--use-existing-db`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_phases: Vec<String>,
    /// Bytes fetched from storage for the run's process (`read_bytes` of `/proc/self/io`),
    /// where the platform reports it.
    #[serde(default)]
    pub process_bytes_read: Option<u64>,
    /// Read requests the block device holding the database completed during the run (its
    /// sysfs counters, which count every process's reads of the device).
    #[serde(default)]
    pub device_reads: Option<u64>,
    /// Bytes those reads brought.
    #[serde(default)]
    pub device_bytes_read: Option<u64>,
    /// The block device holding the database, as `major:minor`, where it has counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

impl RunResult {
    /// Bytes sent to the device per second of the run (settling included).
    pub fn device_bytes_per_sec(&self) -> Option<f64> {
        let bytes = self.device_bytes_written? as f64;
        (self.wall_seconds > 0.0).then(|| bytes / self.wall_seconds)
    }

    /// The run's steal share where it is at least [`STEAL_WORTH_NOTING`]: reports and `strata
    /// advise` name such runs.
    ///
    /// [`STEAL_WORTH_NOTING`]: crate::physical::STEAL_WORTH_NOTING
    pub fn noticeable_steal(&self) -> Option<f64> {
        self.steal_share
            .filter(|&s| s >= crate::physical::STEAL_WORTH_NOTING)
    }

    /// CPU seconds per operation, over every phase.
    pub fn cpu_seconds_per_op(&self) -> Option<f64> {
        (self.total_ops > 0).then(|| self.cpu_seconds / self.total_ops as f64)
    }

    /// Device read requests per second of the run (settling included).
    pub fn device_reads_per_sec(&self) -> Option<f64> {
        let reads = self.device_reads? as f64;
        (self.wall_seconds > 0.0).then(|| reads / self.wall_seconds)
    }

    /// Bytes fetched from storage for the process per second of the run.
    pub fn process_read_bytes_per_sec(&self) -> Option<f64> {
        let bytes = self.process_bytes_read? as f64;
        (self.wall_seconds > 0.0).then(|| bytes / self.wall_seconds)
    }
}

/// The data blocks one phase wrote and kept, per level (index = level).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseBlocks {
    /// The phase's name.
    pub name: String,
    /// Operations it ran.
    pub ops: u64,
    /// Data blocks written into each level during the phase.
    pub written: Vec<u64>,
    /// Data blocks block-preserving merges kept in each level during the phase.
    pub preserved: Vec<u64>,
}

/// A comparison: several configurations on the same workload, one of them the baseline for
/// ratios.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Workload name.
    pub workload: String,
    /// A one-line description of the workload and its parameters.
    pub description: String,
    /// Label of the baseline run (ratios are run / baseline).
    pub baseline: String,
    /// The runs, in the order they ran.
    pub runs: Vec<RunResult>,
    /// Sequential write bandwidth of the device holding the databases, bytes/s, measured before
    /// the runs ([`crate::physical::sequential_write_bandwidth`]); what the runs' device bytes
    /// per second are set against.
    #[serde(default)]
    pub device_write_bandwidth: Option<f64>,
    /// The read performance of the device holding the databases, measured before the runs
    /// (`--device-probe`); what the runs' device reads per second are set against.
    #[serde(default)]
    pub device_probe: Option<DeviceProbe>,
    /// The runs that failed (a run killed by its memory limit, an engine error), in the order
    /// they ran; the comparison went on without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedRun>,
}

/// A run of a comparison that ended without a result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedRun {
    /// Policy specification or peer name.
    pub label: String,
    /// Why, with its causes.
    pub error: String,
}
