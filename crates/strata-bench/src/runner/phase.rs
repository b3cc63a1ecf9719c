//! One phase: its threads issue their operations (point reads in batches where the phase asks
//! for them), writers run beside them, and a sampler records the completed operations.

use super::measure::{round_throughput, throughput_series, worst_window, Histograms, Timed};
use super::WINDOW_OPS;
use crate::engines::KvEngine;
use crate::results::PhaseResult;
use crate::workload::{
    encode_key, thread_seed, Arrivals, Generator, KeySpace, Op, OpKind, PhaseSpec, WorkloadSpec,
};
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the sampler records completed operations.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// Operations a thread completes between updates of the shared count.
const REPORT_EVERY: u64 = 256;

/// Issues one operation; the point reads among it that found their key (0 or 1).
fn execute(
    engine: &dyn KvEngine,
    op: &Op,
    key: &mut Vec<u8>,
    value: &mut [u8],
    key_size: usize,
    generator: &mut Generator,
) -> Result<u64> {
    encode_key(key, op.key, key_size);
    match op.kind {
        OpKind::Insert | OpKind::Update => {
            generator.fill_value(value);
            engine.put(key, value).map(|()| 0)
        }
        OpKind::Delete => engine.delete(key).map(|()| 0),
        OpKind::Read => engine.get(key).map(u64::from),
        OpKind::Scan | OpKind::LongScan => engine.scan(key, op.scan_length).map(|_| 0),
        OpKind::Rmw => {
            let found = engine.get(key)?;
            generator.fill_value(value);
            engine.put(key, value)?;
            Ok(u64::from(found))
        }
    }
}

/// What one worker thread measured.
pub(super) struct WorkerOutput {
    histograms: Histograms,
    written_bytes: u64,
    /// Keys point reads asked for (read-modify-writes included).
    reads: u64,
    /// Of those, the ones found.
    found: u64,
}

/// The point reads a worker has gathered for its next batch.
struct Batch {
    /// Key numbers, in the order drawn.
    keys: Vec<u64>,
    /// Their encodings (buffers reused from batch to batch).
    encoded: Vec<Vec<u8>>,
}

/// One main thread of a phase: it draws operations, gathers point reads into batches where the
/// phase batches them, and measures each operation (or batch).
struct Worker<'a> {
    engine: &'a dyn KvEngine,
    spec: &'a WorkloadSpec,
    generator: Generator,
    key: Vec<u8>,
    value: Vec<u8>,
    batch: Batch,
    batch_size: usize,
    out: WorkerOutput,
    completed: &'a AtomicU64,
    bar: Option<ProgressBar>,
    /// Operations done, and those already added to `completed`.
    local: u64,
    reported: u64,
}

impl Worker<'_> {
    /// Counts `n` completed operations, telling the shared count every [`REPORT_EVERY`].
    fn count(&mut self, n: u64) {
        self.local += n;
        let pending = self.local - self.reported;
        if pending >= REPORT_EVERY {
            self.completed.fetch_add(pending, Ordering::Relaxed);
            if let Some(b) = &self.bar {
                b.inc(pending);
            }
            self.reported = self.local;
        }
    }

    /// Sends the gathered batch, if any, as one `multi_get`: it counts as its keys' operations
    /// and one latency under [`super::measure::BATCH_LATENCY`].
    fn flush(&mut self) -> Result<()> {
        let n = self.batch.keys.len();
        if n == 0 {
            return Ok(());
        }
        for (buffer, &number) in self.batch.encoded.iter_mut().zip(&self.batch.keys) {
            encode_key(buffer, number, self.spec.key_size);
        }
        let keys: Vec<&[u8]> = self.batch.encoded[..n].iter().map(Vec::as_slice).collect();
        let issued = Instant::now();
        let found = self.engine.multi_get(&keys).with_context(|| {
            format!("a batched read of {n} keys from key {}", self.batch.keys[0])
        })?;
        self.out
            .histograms
            .record(Timed::Batch, issued.elapsed().as_nanos() as u64);
        self.out.reads += n as u64;
        self.out.found += found as u64;
        self.batch.keys.clear();
        self.count(n as u64);
        Ok(())
    }

    /// Issues `op` now (issued at `issued`: its arrival in an open loop), or gathers it into
    /// the batch.
    fn issue(&mut self, op: &Op, issued: Option<Instant>) -> Result<()> {
        if self.batch_size > 1 && op.kind == OpKind::Read {
            self.batch.keys.push(op.key);
            if self.batch.keys.len() >= self.batch_size {
                self.flush()?;
            }
            return Ok(());
        }
        // Reads gathered before any other operation go first, so the order holds.
        self.flush()?;
        let issued = issued.unwrap_or_else(Instant::now);
        let found = execute(
            self.engine,
            op,
            &mut self.key,
            &mut self.value,
            self.spec.key_size,
            &mut self.generator,
        )
        .with_context(|| format!("{:?} of key {}", op.kind, op.key))?;
        self.out
            .histograms
            .record(Timed::Op(op.kind), issued.elapsed().as_nanos() as u64);
        self.out.written_bytes += match op.kind {
            OpKind::Insert | OpKind::Update | OpKind::Rmw => {
                (self.spec.key_size + self.spec.value_size) as u64
            }
            OpKind::Delete => self.spec.key_size as u64,
            _ => 0,
        };
        if matches!(op.kind, OpKind::Read | OpKind::Rmw) {
            self.out.reads += 1;
            self.out.found += found;
        }
        self.count(1);
        Ok(())
    }
}

/// What [`run_phase`] measured beyond the phase's result.
pub(super) struct PhaseTotals {
    /// User key+value bytes written (side writers included).
    pub written_bytes: u64,
    /// Keys point reads asked for.
    pub reads: u64,
    /// Of those, the ones found.
    pub found: u64,
}

/// Runs one phase; returns its result and its totals.
pub(super) fn run_phase(
    engine: &Arc<dyn KvEngine>,
    spec: &WorkloadSpec,
    phase: &PhaseSpec,
    space: &Arc<KeySpace>,
    seed: u64,
    progress: bool,
    label: &str,
) -> Result<(PhaseResult, PhaseTotals)> {
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
    // Only the phase's own writes in the engine's write-path timing, where it is built.
    let _ = strata_engine::write_timing::take_report();
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
    let batch_size = phase.read_batch.max(1);
    let outputs: Vec<Result<WorkerOutput>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for t in 0..threads {
            let budget = if phase.ops == 0 {
                0
            } else {
                phase.ops / threads + u64::from(t < phase.ops % threads)
            };
            let (engine, completed, bar) = (Arc::clone(engine), &completed, bar.clone());
            let generator = Generator::new(phase, Arc::clone(space), thread_seed(seed, t))
                .with_insert_stream(t, threads)
                .with_compression_ratio(spec.compression_ratio);
            let mut arrivals = phase
                .open_loop
                .as_ref()
                .map(|o| Arrivals::new(o, threads as usize, thread_seed(seed, t) ^ 0xa771_7a15));
            handles.push(s.spawn(move || -> Result<WorkerOutput> {
                let mut worker = Worker {
                    engine: engine.as_ref(),
                    spec,
                    generator,
                    key: Vec::with_capacity(spec.key_size),
                    value: vec![0u8; spec.value_size],
                    batch: Batch {
                        keys: Vec::with_capacity(batch_size),
                        encoded: (0..batch_size)
                            .map(|_| Vec::with_capacity(spec.key_size))
                            .collect(),
                    },
                    batch_size,
                    out: WorkerOutput {
                        histograms: Histograms::new(),
                        written_bytes: 0,
                        reads: 0,
                        found: 0,
                    },
                    completed,
                    bar,
                    local: 0,
                    reported: 0,
                };
                let started = Instant::now();
                while let Some(op) = worker.generator.next_op(budget) {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        break;
                    }
                    // Open loop: wait for the scheduled arrival; latency counts from it, so
                    // queueing behind a slow operation shows.
                    let issued = arrivals.as_mut().map(|arrivals| {
                        let at = started + arrivals.next_arrival();
                        let now = Instant::now();
                        if at > now {
                            std::thread::sleep(at - now);
                        }
                        at
                    });
                    worker.issue(&op, issued)?;
                }
                // The reads gathered when the budget or the time ran out.
                worker.flush()?;
                let pending = worker.local - worker.reported;
                completed.fetch_add(pending, Ordering::Relaxed);
                if let Some(b) = &worker.bar {
                    b.inc(pending);
                }
                Ok(worker.out)
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
                Generator::new(&writer_phase, Arc::clone(space), seed ^ (0xbeef + n as u64))
                    .with_compression_ratio(spec.compression_ratio);
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
    if let Some(timing) = strata_engine::write_timing::take_report() {
        eprintln!("{label} {}, {seconds:.3} s: {timing}", phase.name);
    }
    stop.store(true, Ordering::Release);
    let _ = sampler.join();
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut all = Histograms::new();
    let mut totals = PhaseTotals {
        written_bytes: 0,
        reads: 0,
        found: 0,
    };
    for o in outputs {
        let o = o?;
        all.merge(&o.histograms);
        totals.written_bytes += o.written_bytes;
        totals.reads += o.reads;
        totals.found += o.found;
    }
    let total = completed.load(Ordering::Relaxed);
    let mut samples = std::mem::take(&mut *samples.lock());
    samples.push((seconds, total));
    let rounds = round_throughput(&samples, &round_ends.lock());
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
            latency: all.summaries(),
            user_bytes: totals.written_bytes,
            threads: phase.threads.max(1),
            read_batch: batch_size,
            point_reads: totals.reads,
            point_reads_found: totals.found,
            ..PhaseResult::default()
        },
        totals,
    ))
}
