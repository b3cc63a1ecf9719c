//! Runs a workload against an engine and measures it.

mod measure;
mod phase;

pub use measure::{worst_window, BATCH_LATENCY};

use crate::engines::{EngineStats, KvEngine};
use crate::physical::{
    cpu_seconds, device_bytes_written, drop_page_cache, peak_rss_bytes, process_bytes_read,
    reset_peak_rss, rss_bytes, BlockDevice, BlockDeviceStat, MachineCpu,
};
use crate::results::{PhaseBlocks, RunResult};
use crate::workload::{phase_seed, KeySpace, WorkloadSpec};
use anyhow::Result;
use parking_lot::Mutex;
use phase::run_phase;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Operations per window of the worst-window throughput (`docs/architecture.md`, measuring).
pub const WINDOW_OPS: u64 = 100_000;

/// How often the sampler records disk usage and resident memory.
const DISK_SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Total bytes of the files under `dir` (recursively).
pub fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// How a run goes, beyond the workload itself.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Seed of every generator.
    pub seed: u64,
    /// Show progress bars.
    pub progress: bool,
    /// Write dirty pages back and drop the page cache before each measured phase
    /// ([`drop_page_cache`]), so it starts reading from the device.
    pub drop_caches: bool,
    /// The keys the database holds when the run starts: empty for a fresh database, a kept
    /// one's for a database kept earlier. The run changes it as its operations do.
    pub space: Arc<KeySpace>,
    /// Phases to skip from the first (a kept database's load, [`WorkloadSpec::load_phases`]);
    /// the others keep the seeds they have in a whole run.
    pub skip_phases: usize,
    /// After each phase that wrote, wait until the engine's flushes and compactions are done
    /// ([`KvEngine::settle`]) and count that time and work in the phase
    /// ([`PhaseResult::settle_seconds`]).
    pub settle_phases: bool,
}

impl RunOptions {
    /// A run of every phase on a fresh database.
    pub fn new(seed: u64, progress: bool) -> RunOptions {
        RunOptions {
            seed,
            progress,
            drop_caches: false,
            space: KeySpace::new(),
            skip_phases: 0,
            settle_phases: false,
        }
    }
}

/// The read counters at one moment: this process's and the block device's.
#[derive(Clone, Copy, Debug, Default)]
struct IoSnapshot {
    process_bytes_read: Option<u64>,
    device: Option<BlockDeviceStat>,
}

impl IoSnapshot {
    fn take(device: Option<&BlockDevice>) -> IoSnapshot {
        IoSnapshot {
            process_bytes_read: process_bytes_read(),
            device: device.and_then(BlockDevice::stat),
        }
    }

    /// Bytes this process had read, device reads and device bytes read since `earlier`.
    fn since(&self, earlier: &IoSnapshot) -> (Option<u64>, Option<u64>, Option<u64>) {
        let process = self
            .process_bytes_read
            .zip(earlier.process_bytes_read)
            .map(|(a, b)| a.saturating_sub(b));
        let device = self.device.zip(earlier.device).map(|(a, b)| a.since(&b));
        (
            process,
            device.map(|d| d.reads),
            device.map(|d| d.bytes_read()),
        )
    }
}

/// `after - before` of a counter both reported.
fn delta(after: Option<u64>, before: Option<u64>) -> Option<u64> {
    after.zip(before).map(|(a, b)| a.saturating_sub(b))
}

/// Per-level block counts since `before`.
fn since_per_level(after: &[u64], before: Option<&Vec<u64>>) -> Vec<u64> {
    after
        .iter()
        .enumerate()
        .map(|(l, n)| n.saturating_sub(before.and_then(|b| b.get(l)).copied().unwrap_or(0)))
        .collect()
}

/// Counts summed over the measured phases, for the run's per-lookup figures.
#[derive(Default)]
struct Measured {
    reads: u64,
    blocks_read: u64,
    index_blocks_read: u64,
    filter_blocks_read: u64,
    probed: u64,
    filter_probes: u64,
}

impl Measured {
    /// `total` per point lookup, where the engine reports the counter and lookups ran.
    fn per_lookup(&self, reported: Option<u64>, total: u64) -> Option<f64> {
        reported
            .filter(|_| self.reads > 0)
            .map(|_| total as f64 / self.reads as f64)
    }
}

/// Runs `spec` on `engine`, phase by phase (from `options.skip_phases` on).
pub fn run(
    engine: Arc<dyn KvEngine>,
    spec: &WorkloadSpec,
    label: &str,
    options: &RunOptions,
) -> Result<RunResult> {
    let started = Instant::now();
    let cpu_start = cpu_seconds();
    let machine_start = MachineCpu::now();
    let device_start = device_bytes_written();
    let block_device = BlockDevice::holding(engine.dir());
    let io_start = IoSnapshot::take(block_device.as_ref());
    // In a process of its own the reset changes nothing; after other runs it drops their peak.
    reset_peak_rss();
    let space = &options.space;
    let stats_start = engine.stats();
    let disk = Arc::new(Mutex::new(Vec::<(f64, u64)>::new()));
    let memory = Arc::new(Mutex::new(Vec::<(f64, u64)>::new()));
    let stop_disk = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (disk, memory, stop, dir, engine_dir) = (
            Arc::clone(&disk),
            Arc::clone(&memory),
            Arc::clone(&stop_disk),
            started,
            engine.dir().to_path_buf(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                let bytes = dir_size(&engine_dir);
                let at = dir.elapsed().as_secs_f64();
                disk.lock().push((at, bytes));
                if let Some(rss) = rss_bytes() {
                    memory.lock().push((at, rss));
                }
                std::thread::sleep(DISK_SAMPLE_EVERY);
            }
        })
    };
    let mut phases = Vec::new();
    let mut phase_blocks = Vec::new();
    let mut user_bytes = 0u64;
    let mut total_ops = 0u64;
    let mut measured = Measured::default();
    let mut result = Ok(());
    for (i, phase) in spec.phases.iter().enumerate().skip(options.skip_phases) {
        if phase.measured && options.drop_caches {
            if let Err(e) = drop_page_cache() {
                result = Err(anyhow::Error::new(e).context(format!(
                    "dropping the page cache before phase {} (--drop-caches)",
                    phase.name
                )));
                break;
            }
        }
        let before = engine.stats();
        let io_before = IoSnapshot::take(block_device.as_ref());
        let outcome = run_phase(
            &engine,
            spec,
            phase,
            space,
            phase_seed(options.seed, i),
            options.progress,
            label,
        );
        let (mut p, totals) = match outcome {
            Ok(done) => done,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        if options.settle_phases && totals.written_bytes > 0 {
            let settling = Instant::now();
            if let Err(e) = engine.settle() {
                result = Err(e.context(format!("settling after phase {}", phase.name)));
                break;
            }
            let settle = settling.elapsed().as_secs_f64();
            p.settle_seconds = Some(settle);
            p.seconds += settle;
            p.ops_per_sec = p.ops as f64 / p.seconds;
        }
        let io = IoSnapshot::take(block_device.as_ref()).since(&io_before);
        user_bytes += totals.written_bytes;
        total_ops += p.ops;
        let after = engine.stats();
        if let Some(a) = &after.data_blocks_written_per_level {
            phase_blocks.push(PhaseBlocks {
                name: phase.name.clone(),
                ops: p.ops,
                written: since_per_level(a, before.data_blocks_written_per_level.as_ref()),
                preserved: after
                    .data_blocks_preserved_per_level
                    .as_deref()
                    .map(|a| since_per_level(a, before.data_blocks_preserved_per_level.as_ref()))
                    .unwrap_or_default(),
            });
        }
        if !phase.measured {
            continue;
        }
        p.write_amp = match (after.table_bytes_written, before.table_bytes_written) {
            (Some(a), Some(b)) if totals.written_bytes > 0 => {
                Some(a.saturating_sub(b) as f64 / totals.written_bytes as f64)
            }
            _ => None,
        };
        // Counted blocks start out as no list at all (nothing written yet).
        if let Some(a) = &after.data_blocks_written_per_level {
            p.blocks_written_per_level =
                since_per_level(a, before.data_blocks_written_per_level.as_ref());
        }
        if let Some(a) = &after.data_blocks_preserved_per_level {
            p.blocks_preserved_per_level =
                since_per_level(a, before.data_blocks_preserved_per_level.as_ref());
        }
        (p.process_bytes_read, p.device_reads, p.device_bytes_read) = io;
        p.blocks_read = delta(after.blocks_read, before.blocks_read);
        p.index_blocks_read = delta(after.index_blocks_read, before.index_blocks_read);
        p.filter_blocks_read = delta(after.filter_blocks_read, before.filter_blocks_read);
        measured.reads += totals.reads;
        measured.blocks_read += p.blocks_read.unwrap_or(0);
        measured.index_blocks_read += p.index_blocks_read.unwrap_or(0);
        measured.filter_blocks_read += p.filter_blocks_read.unwrap_or(0);
        measured.probed += delta(after.tables_probed, before.tables_probed).unwrap_or(0);
        measured.filter_probes += delta(after.filter_probes, before.filter_probes).unwrap_or(0);
        phases.push(p);
    }
    let settled = result.and_then(|()| engine.settle());
    let final_disk = dir_size(engine.dir());
    stop_disk.store(true, Ordering::Release);
    let _ = sampler.join();
    settled?;
    let mut disk_samples = std::mem::take(&mut *disk.lock());
    disk_samples.push((started.elapsed().as_secs_f64(), final_disk));
    let memory_samples = std::mem::take(&mut *memory.lock());
    let stats = engine.stats();
    let (process_read, device_reads, device_read_bytes) =
        IoSnapshot::take(block_device.as_ref()).since(&io_start);
    let mut run = finish(
        Finished {
            engine: engine.as_ref(),
            spec,
            label,
            options,
            stats,
            stats_start,
            measured,
            phases,
            phase_blocks,
            user_bytes,
            total_ops,
            disk_samples,
            memory_samples,
            final_disk,
        },
        started,
        cpu_start,
        device_start,
    );
    run.process_bytes_read = process_read;
    run.device_reads = device_reads;
    run.device_bytes_read = device_read_bytes;
    run.device = block_device.map(|d| format!("{}:{}", d.major, d.minor));
    run.steal_share = MachineCpu::now()
        .zip(machine_start)
        .and_then(|(now, start)| now.steal_share_since(&start));
    Ok(run)
}

/// What a run gathered, for [`finish`] to sum up.
struct Finished<'a> {
    engine: &'a dyn KvEngine,
    spec: &'a WorkloadSpec,
    label: &'a str,
    options: &'a RunOptions,
    stats: EngineStats,
    stats_start: EngineStats,
    measured: Measured,
    phases: Vec<crate::results::PhaseResult>,
    phase_blocks: Vec<PhaseBlocks>,
    user_bytes: u64,
    total_ops: u64,
    disk_samples: Vec<(f64, u64)>,
    memory_samples: Vec<(f64, u64)>,
    final_disk: u64,
}

/// The run's result from what it gathered.
fn finish(
    f: Finished<'_>,
    started: Instant,
    cpu_start: f64,
    device_start: Option<u64>,
) -> RunResult {
    let Finished {
        engine,
        spec,
        label,
        options,
        stats,
        stats_start,
        measured,
        phases,
        phase_blocks,
        user_bytes,
        total_ops,
        disk_samples,
        memory_samples,
        final_disk,
    } = f;
    let device_bytes = device_bytes_written()
        .zip(device_start)
        .map(|(after, before)| after.saturating_sub(before));
    let live_bytes = options.space.live_keys() * (spec.key_size + spec.value_size) as u64;
    let peak_disk = disk_samples
        .iter()
        .map(|&(_, b)| b)
        .max()
        .unwrap_or(final_disk);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let table_bytes_written = delta(stats.table_bytes_written, stats_start.table_bytes_written);
    let main = phases.last().cloned().unwrap_or_default();
    RunResult {
        label: label.to_string(),
        engine: engine.engine().to_string(),
        policy: engine.policy(),
        workload: spec.name.clone(),
        ops_per_sec: main.ops_per_sec,
        worst_window_ops_per_sec: main.worst_window_ops_per_sec,
        p99_us: main.latency.get("all").map_or(0.0, |l| l.p99_us),
        write_amp: table_bytes_written.map_or(f64::NAN, |w| ratio(w as f64, user_bytes as f64)),
        peak_space_amp: ratio(peak_disk as f64, live_bytes as f64),
        final_space_amp: ratio(final_disk as f64, live_bytes as f64),
        read_amp: measured.per_lookup(stats.blocks_read, measured.blocks_read),
        index_reads_per_lookup: measured
            .per_lookup(stats.index_blocks_read, measured.index_blocks_read),
        filter_reads_per_lookup: measured
            .per_lookup(stats.filter_blocks_read, measured.filter_blocks_read),
        runs_probed_per_lookup: measured.per_lookup(stats.tables_probed, measured.probed),
        filter_probes_per_lookup: measured.per_lookup(stats.filter_probes, measured.filter_probes),
        stall_seconds: stats.stall_micros.map(|m| m as f64 / 1e6),
        cpu_seconds: cpu_seconds() - cpu_start,
        policy_seconds: delta(stats.policy_micros, stats_start.policy_micros)
            .map(|m| m as f64 / 1e6),
        wall_seconds: started.elapsed().as_secs_f64(),
        total_ops,
        device_bytes_written: device_bytes,
        peak_rss_bytes: peak_rss_bytes(),
        memory_samples,
        user_bytes,
        table_bytes_written: table_bytes_written.unwrap_or(0),
        live_bytes,
        peak_disk_bytes: peak_disk,
        final_disk_bytes: final_disk,
        disk_samples,
        shape: stats.shape,
        autopilot: stats.autopilot,
        policy_state: stats.policy_state,
        key_index: stats.key_index,
        phases,
        phase_blocks,
        drop_caches: options.drop_caches,
        skipped_phases: spec.phases[..options.skip_phases.min(spec.phases.len())]
            .iter()
            .map(|p| p.name.clone())
            .collect(),
        ..RunResult::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_size_counts_nested_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), vec![0u8; 1000]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b"), vec![0u8; 234]).unwrap();
        assert_eq!(dir_size(dir.path()), 1234);
    }
}
