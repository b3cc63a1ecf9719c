//! Runs a workload against an engine and measures it.

use crate::engines::KvEngine;
use crate::physical::{
    cpu_seconds, device_bytes_written, peak_rss_bytes, reset_peak_rss, rss_bytes,
};
use crate::results::{LatencySummary, PhaseBlocks, PhaseResult, RoundThroughput, RunResult};
use crate::workload::{
    encode_key, phase_seed, thread_seed, Arrivals, Generator, KeySpace, OpKind, PhaseSpec,
    WorkloadSpec,
};
use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Operations per window of the worst-window throughput (`docs/architecture.md`, measuring).
pub const WINDOW_OPS: u64 = 100_000;

/// How often the sampler records completed operations and disk usage.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);
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

/// The lowest throughput over any `window` consecutive operations, from (seconds, completed
/// operations) samples; the whole span's throughput when it holds fewer operations.
pub fn worst_window(samples: &[(f64, u64)], window: u64) -> f64 {
    let (Some(&(t0, c0)), Some(&(t_end, c_end))) = (samples.first(), samples.last()) else {
        return 0.0;
    };
    if c_end - c0 < window {
        return if t_end > t0 {
            (c_end - c0) as f64 / (t_end - t0)
        } else {
            0.0
        };
    }
    let mut worst = f64::INFINITY;
    let mut j = 0;
    for i in 0..samples.len() {
        let (t, c) = samples[i];
        if c - c0 < window {
            continue;
        }
        // The latest sample j with at least `window` operations between j and i.
        while j + 1 < i && c - samples[j + 1].1 >= window {
            j += 1;
        }
        let (tj, cj) = samples[j];
        if t > tj {
            worst = worst.min((c - cj) as f64 / (t - tj));
        }
    }
    if worst.is_finite() {
        worst
    } else {
        0.0
    }
}

/// Throughput over each interval between consecutive round ends, from cumulative (seconds,
/// completed operations) samples: operations counted at the first sample at or after each end.
fn round_throughput(samples: &[(f64, u64)], round_ends: &[f64]) -> Vec<RoundThroughput> {
    let completed_at = |t: f64| {
        let i = samples.partition_point(|&(s, _)| s < t);
        samples.get(i).or(samples.last()).map_or(0, |&(_, c)| c)
    };
    round_ends
        .windows(2)
        .filter(|w| w[1] > w[0])
        .map(|w| RoundThroughput {
            start_secs: w[0],
            end_secs: w[1],
            ops_per_sec: (completed_at(w[1]) - completed_at(w[0])) as f64 / (w[1] - w[0]),
        })
        .collect()
}

/// Throughput per `interval` seconds, from cumulative samples.
fn throughput_series(samples: &[(f64, u64)], interval: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let Some(&(mut last_t, mut last_c)) = samples.first() else {
        return out;
    };
    for &(t, c) in samples {
        if t - last_t >= interval {
            out.push((t, (c - last_c) as f64 / (t - last_t)));
            last_t = t;
            last_c = c;
        }
    }
    out
}

struct Histograms {
    by_kind: Vec<Option<Histogram<u64>>>,
}

impl Histograms {
    fn new() -> Self {
        Histograms {
            by_kind: (0..OpKind::ALL.len()).map(|_| None).collect(),
        }
    }

    fn record(&mut self, kind: OpKind, nanos: u64) {
        let h = self.by_kind[kind.index()].get_or_insert_with(new_histogram);
        // Values above the bound (an hour) saturate rather than fail.
        let _ = h.record(nanos.clamp(1, MAX_LATENCY_NANOS));
    }

    fn merge(&mut self, other: &Histograms) {
        for (mine, theirs) in self.by_kind.iter_mut().zip(&other.by_kind) {
            if let Some(t) = theirs {
                match mine {
                    Some(m) => {
                        let _ = m.add(t);
                    }
                    None => *mine = Some(t.clone()),
                }
            }
        }
    }
}

/// The largest latency recorded, in nanoseconds (one hour).
const MAX_LATENCY_NANOS: u64 = 3_600_000_000_000;

/// A latency histogram in nanoseconds with three significant figures.
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NANOS, 3)
        .expect("constant histogram bounds are valid")
}

fn summarize(h: &Histogram<u64>) -> LatencySummary {
    let us = |ns: u64| ns as f64 / 1000.0;
    LatencySummary {
        count: h.len(),
        mean_us: h.mean() / 1000.0,
        p50_us: us(h.value_at_quantile(0.5)),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        max_us: us(h.max()),
    }
}

/// Issues one operation.
fn execute(
    engine: &dyn KvEngine,
    op: &crate::workload::Op,
    key: &mut Vec<u8>,
    value: &mut [u8],
    key_size: usize,
    generator: &mut Generator,
) -> Result<()> {
    encode_key(key, op.key, key_size);
    match op.kind {
        OpKind::Insert | OpKind::Update => {
            generator.fill_value(value);
            engine.put(key, value)
        }
        OpKind::Delete => engine.delete(key),
        OpKind::Read => engine.get(key).map(|_| ()),
        OpKind::Scan | OpKind::LongScan => engine.scan(key, op.scan_length).map(|_| ()),
        OpKind::Rmw => {
            engine.get(key)?;
            generator.fill_value(value);
            engine.put(key, value)
        }
    }
}

/// Runs `spec` on `engine`, phase by phase.
pub fn run(
    engine: Arc<dyn KvEngine>,
    spec: &WorkloadSpec,
    label: &str,
    seed: u64,
    progress: bool,
) -> Result<RunResult> {
    let started = Instant::now();
    let cpu_start = cpu_seconds();
    let device_start = device_bytes_written();
    // In a process of its own the reset changes nothing; after other runs it drops their peak.
    reset_peak_rss();
    let space = KeySpace::new();
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
    let mut reads_measured = 0u64;
    let mut blocks_read_measured = 0u64;
    let mut probed_measured = 0u64;
    let mut filter_probes_measured = 0u64;
    let mut result = Ok(());
    for (i, phase) in spec.phases.iter().enumerate() {
        let before = engine.stats();
        match run_phase(
            &engine,
            spec,
            phase,
            &space,
            phase_seed(seed, i),
            progress,
            label,
        ) {
            Ok((mut p, written_bytes, reads)) => {
                user_bytes += written_bytes;
                total_ops += p.ops;
                let after = engine.stats();
                let since = |a: &[u64], b: Option<Vec<u64>>| -> Vec<u64> {
                    let b = b.unwrap_or_default();
                    a.iter()
                        .enumerate()
                        .map(|(l, n)| n - b.get(l).copied().unwrap_or(0))
                        .collect()
                };
                if let Some(a) = &after.data_blocks_written_per_level {
                    phase_blocks.push(PhaseBlocks {
                        name: phase.name.clone(),
                        ops: p.ops,
                        written: since(a, before.data_blocks_written_per_level.clone()),
                        preserved: after
                            .data_blocks_preserved_per_level
                            .as_deref()
                            .map(|a| since(a, before.data_blocks_preserved_per_level.clone()))
                            .unwrap_or_default(),
                    });
                }
                if phase.measured {
                    p.user_bytes = written_bytes;
                    p.write_amp = match (after.table_bytes_written, before.table_bytes_written) {
                        (Some(a), Some(b)) if written_bytes > 0 => {
                            Some((a - b) as f64 / written_bytes as f64)
                        }
                        _ => None,
                    };
                    // Counted blocks start out as no list at all (nothing written yet).
                    if let Some(a) = &after.data_blocks_written_per_level {
                        p.blocks_written_per_level =
                            since(a, before.data_blocks_written_per_level.clone());
                    }
                    if let Some(a) = &after.data_blocks_preserved_per_level {
                        p.blocks_preserved_per_level =
                            since(a, before.data_blocks_preserved_per_level.clone());
                    }
                    reads_measured += reads;
                    if let (Some(a), Some(b)) = (after.blocks_read, before.blocks_read) {
                        blocks_read_measured += a - b;
                        p.blocks_read = Some(a - b);
                    }
                    if let (Some(a), Some(b)) = (after.tables_probed, before.tables_probed) {
                        probed_measured += a - b;
                    }
                    if let (Some(a), Some(b)) = (after.filter_probes, before.filter_probes) {
                        filter_probes_measured += a - b;
                    }
                    phases.push(p);
                }
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
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
    let device_bytes = device_bytes_written()
        .zip(device_start)
        .map(|(after, before)| after.saturating_sub(before));
    let peak_rss = peak_rss_bytes();
    let live_bytes = space.live_keys() * (spec.key_size + spec.value_size) as u64;
    let peak_disk = disk_samples
        .iter()
        .map(|&(_, b)| b)
        .max()
        .unwrap_or(final_disk);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let table_bytes_written = match (stats.table_bytes_written, stats_start.table_bytes_written) {
        (Some(a), Some(b)) => Some(a - b),
        _ => None,
    };
    let main = phases.last().cloned().unwrap_or_default();
    let read_amp = stats
        .blocks_read
        .filter(|_| reads_measured > 0)
        .map(|_| blocks_read_measured as f64 / reads_measured as f64);
    let runs_probed = stats
        .tables_probed
        .filter(|_| reads_measured > 0)
        .map(|_| probed_measured as f64 / reads_measured as f64);
    let filter_probes = stats
        .filter_probes
        .filter(|_| reads_measured > 0)
        .map(|_| filter_probes_measured as f64 / reads_measured as f64);
    Ok(RunResult {
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
        read_amp,
        runs_probed_per_lookup: runs_probed,
        filter_probes_per_lookup: filter_probes,
        stall_seconds: stats.stall_micros.map(|m| m as f64 / 1e6),
        cpu_seconds: cpu_seconds() - cpu_start,
        policy_seconds: match (stats.policy_micros, stats_start.policy_micros) {
            (Some(a), Some(b)) => Some((a - b) as f64 / 1e6),
            _ => None,
        },
        wall_seconds: started.elapsed().as_secs_f64(),
        total_ops,
        device_bytes_written: device_bytes,
        peak_rss_bytes: peak_rss,
        memory_samples,
        user_bytes,
        table_bytes_written: table_bytes_written.unwrap_or(0),
        live_bytes,
        peak_disk_bytes: peak_disk,
        final_disk_bytes: final_disk,
        disk_samples,
        shape: stats.shape,
        policy_state: stats.policy_state,
        key_index: stats.key_index,
        phases,
        phase_blocks,
    })
}

/// What one worker thread measured.
struct WorkerOutput {
    histograms: Histograms,
    written_bytes: u64,
    reads: u64,
}

/// Runs one phase; returns its result, the user bytes it wrote and its point reads.
fn run_phase(
    engine: &Arc<dyn KvEngine>,
    spec: &WorkloadSpec,
    phase: &PhaseSpec,
    space: &Arc<KeySpace>,
    seed: u64,
    progress: bool,
    label: &str,
) -> Result<(PhaseResult, u64, u64)> {
    let completed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let bar = if progress {
        let bar = ProgressBar::new(phase.ops);
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>24} {bar:30} {pos}/{len} ops {per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(format!("{label} {}", phase.name));
        Some(bar)
    } else {
        None
    };
    let start = Instant::now();
    let deadline =
        (phase.duration_secs > 0.0).then(|| start + Duration::from_secs_f64(phase.duration_secs));
    let samples = Arc::new(Mutex::new(vec![(0.0, 0u64)]));
    // When each compaction round ended (seconds since the phase started), where the engine
    // counts rounds.
    let round_ends = Arc::new(Mutex::new(Vec::<f64>::new()));
    let sampler = {
        let (samples, round_ends, completed, stop, engine) = (
            Arc::clone(&samples),
            Arc::clone(&round_ends),
            Arc::clone(&completed),
            Arc::clone(&stop),
            Arc::clone(engine),
        );
        std::thread::spawn(move || {
            let mut rounds = engine.last_level_rewrites();
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(SAMPLE_EVERY);
                let at = start.elapsed().as_secs_f64();
                samples.lock().push((at, completed.load(Ordering::Relaxed)));
                let now = engine.last_level_rewrites();
                if now > rounds {
                    round_ends.lock().push(at);
                    rounds = now;
                }
            }
        })
    };
    let threads = phase.threads.max(1) as u64;
    let outputs: Vec<Result<WorkerOutput>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for t in 0..threads {
            let budget = if phase.ops == 0 {
                0
            } else {
                phase.ops / threads + u64::from(t < phase.ops % threads)
            };
            let (engine, completed, bar) =
                (Arc::clone(engine), Arc::clone(&completed), bar.clone());
            let mut generator = Generator::new(phase, Arc::clone(space), thread_seed(seed, t));
            let mut arrivals = phase
                .open_loop
                .as_ref()
                .map(|o| Arrivals::new(o, threads as usize, thread_seed(seed, t) ^ 0xa771_7a15));
            handles.push(s.spawn(move || -> Result<WorkerOutput> {
                let mut out = WorkerOutput {
                    histograms: Histograms::new(),
                    written_bytes: 0,
                    reads: 0,
                };
                let mut key = Vec::with_capacity(spec.key_size);
                let mut value = vec![0u8; spec.value_size];
                let started = Instant::now();
                let mut local = 0u64;
                while let Some(op) = generator.next_op(budget) {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        break;
                    }
                    // Open loop: wait for the scheduled arrival; latency counts from it, so
                    // queueing behind a slow operation shows.
                    let issued = match arrivals.as_mut() {
                        Some(arrivals) => {
                            let at = started + arrivals.next_arrival();
                            let now = Instant::now();
                            if at > now {
                                std::thread::sleep(at - now);
                            }
                            at
                        }
                        None => Instant::now(),
                    };
                    execute(
                        engine.as_ref(),
                        &op,
                        &mut key,
                        &mut value,
                        spec.key_size,
                        &mut generator,
                    )
                    .with_context(|| format!("{:?} of key {}", op.kind, op.key))?;
                    out.histograms
                        .record(op.kind, issued.elapsed().as_nanos() as u64);
                    out.written_bytes += match op.kind {
                        OpKind::Insert | OpKind::Update | OpKind::Rmw => {
                            (spec.key_size + spec.value_size) as u64
                        }
                        OpKind::Delete => spec.key_size as u64,
                        _ => 0,
                    };
                    out.reads += u64::from(matches!(op.kind, OpKind::Read | OpKind::Rmw));
                    local += 1;
                    if local.is_multiple_of(256) {
                        completed.fetch_add(256, Ordering::Relaxed);
                        if let Some(b) = &bar {
                            b.inc(256);
                        }
                    }
                }
                completed.fetch_add(local % 256, Ordering::Relaxed);
                Ok(out)
            }));
        }
        // Writers beside the main threads run until the main threads finish.
        let main_done = Arc::new(AtomicBool::new(false));
        let mut side = Vec::new();
        let side_writers: Vec<(crate::workload::Mix, Option<f64>)> = phase
            .writer
            .iter()
            .map(|w| (w.mix.clone(), Some(w.mib_per_sec)))
            .chain(phase.background_writer.iter().map(|m| (m.clone(), None)))
            .collect();
        for (n, (mix, rate)) in side_writers.into_iter().enumerate() {
            let mut writer_phase = phase.clone();
            writer_phase.mix = mix;
            writer_phase.open_loop = None;
            let mut generator =
                Generator::new(&writer_phase, Arc::clone(space), seed ^ (0xbeef + n as u64));
            let (engine, done) = (Arc::clone(engine), Arc::clone(&main_done));
            side.push(s.spawn(move || -> Result<u64> {
                let mut key = Vec::with_capacity(spec.key_size);
                let mut value = vec![0u8; spec.value_size];
                let per_op = (spec.key_size + spec.value_size) as f64;
                let begin = Instant::now();
                let mut written = 0u64;
                while !done.load(Ordering::Acquire) {
                    let Some(op) = generator.next_op(0) else {
                        break;
                    };
                    if let Some(mib) = rate {
                        // Hold the writer to its byte rate.
                        let due =
                            Duration::from_secs_f64(written as f64 * per_op / (mib * 1048576.0));
                        let elapsed = begin.elapsed();
                        if due > elapsed {
                            std::thread::sleep(due - elapsed);
                        }
                    }
                    execute(
                        engine.as_ref(),
                        &op,
                        &mut key,
                        &mut value,
                        spec.key_size,
                        &mut generator,
                    )?;
                    written += 1;
                }
                Ok(written * (spec.key_size + spec.value_size) as u64)
            }));
        }
        let results: Vec<Result<WorkerOutput>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker panicked")))
            })
            .collect();
        main_done.store(true, Ordering::Release);
        let mut side_bytes = 0;
        for h in side {
            match h.join() {
                Ok(Ok(b)) => side_bytes += b,
                Ok(Err(e)) => return vec![Err(e)],
                Err(_) => return vec![Err(anyhow::anyhow!("a writer panicked"))],
            }
        }
        let mut results = results;
        if let Some(Ok(first)) = results.first_mut() {
            first.written_bytes += side_bytes;
        }
        results
    });
    let seconds = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Release);
    let _ = sampler.join();
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut all = Histograms::new();
    let mut written = 0;
    let mut reads = 0;
    for o in outputs {
        let o = o?;
        all.merge(&o.histograms);
        written += o.written_bytes;
        reads += o.reads;
    }
    let total = completed.load(Ordering::Relaxed);
    let mut samples = std::mem::take(&mut *samples.lock());
    samples.push((seconds, total));
    let rounds = round_throughput(&samples, &round_ends.lock());
    let mut latency = BTreeMap::new();
    let mut combined: Option<Histogram<u64>> = None;
    for (kind, h) in OpKind::ALL.iter().zip(&all.by_kind) {
        if let Some(h) = h {
            latency.insert(kind.name().to_string(), summarize(h));
            match &mut combined {
                Some(c) => {
                    let _ = c.add(h);
                }
                None => combined = Some(h.clone()),
            }
        }
    }
    if let Some(c) = &combined {
        latency.insert("all".to_string(), summarize(c));
    }
    Ok((
        PhaseResult {
            name: phase.name.clone(),
            ops: total,
            seconds,
            ops_per_sec: if seconds > 0.0 {
                total as f64 / seconds
            } else {
                0.0
            },
            worst_window_ops_per_sec: worst_window(&samples, WINDOW_OPS),
            rounds,
            throughput_samples: throughput_series(&samples, 1.0),
            latency,
            user_bytes: written,
            write_amp: None,
            blocks_written_per_level: Vec::new(),
            blocks_preserved_per_level: Vec::new(),
            blocks_read: None,
        },
        written,
        reads,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_throughput_counts_the_operations_between_round_ends() {
        // 1,000 ops/s for 10 s, sampled every 0.5 s.
        let samples: Vec<(f64, u64)> = (0..=20).map(|i| (i as f64 * 0.5, i * 500)).collect();
        let rounds = round_throughput(&samples, &[2.0, 6.0, 6.0, 9.0]);
        assert_eq!(rounds.len(), 2, "an empty interval is no round");
        assert_eq!((rounds[0].start_secs, rounds[0].end_secs), (2.0, 6.0));
        assert!((rounds[0].ops_per_sec - 1000.0).abs() < 1e-9);
        assert!((rounds[1].ops_per_sec - 1000.0).abs() < 1e-9);
        // A single round end bounds no whole round.
        assert!(round_throughput(&samples, &[3.0]).is_empty());
    }

    #[test]
    fn worst_window_finds_the_slowest_stretch() {
        // 100k ops/s for 2 s, then 10k ops/s for 20 s, then fast again.
        let mut samples = vec![(0.0, 0u64)];
        let mut c = 0;
        for i in 1..=2000 {
            c += 100;
            samples.push((i as f64 * 0.001, c));
        }
        for i in 1..=20_000 {
            c += 10;
            samples.push((2.0 + i as f64 * 0.001, c));
        }
        let w = worst_window(&samples, 100_000);
        assert!((w - 10_000.0).abs() / 10_000.0 < 0.05, "{w}");
        // Fewer operations than a window: the whole span.
        assert_eq!(worst_window(&[(0.0, 0), (2.0, 1000)], 100_000), 500.0);
        assert_eq!(worst_window(&[], 10), 0.0);
    }

    #[test]
    fn throughput_series_reports_per_interval_rates() {
        let samples: Vec<(f64, u64)> = (0..=40).map(|i| (i as f64 * 0.25, i * 250)).collect();
        let series = throughput_series(&samples, 1.0);
        assert_eq!(series.len(), 10);
        assert!(series.iter().all(|&(_, r)| (r - 1000.0).abs() < 1e-6));
    }

    #[test]
    fn dir_size_counts_nested_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), vec![0u8; 1000]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b"), vec![0u8; 234]).unwrap();
        assert_eq!(dir_size(dir.path()), 1234);
    }
}
