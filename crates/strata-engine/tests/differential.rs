//! The engine (with synchronous compaction) and the simulator, given the same workload and the
//! same policy, make the same decisions: the same sequence of compaction plans, writing the same
//! bytes, and the same write amplification.
//!
//! To compare byte for byte, the simulator sizes tables with the engine's own table encoder
//! (`EngineSizer`), counts the memtable's per-entry overhead in its buffer, and drops tombstones
//! by the engine's key-range rule. Output tables are not cut by size (the engine cuts on its
//! builder's running estimate, which the simulator does not model).

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::{Arc, Mutex};
use strata_engine::fs::{MemFs, WritableFile};
use strata_engine::key::{internal_key, ValueKind, TRAILER_LEN};
use strata_engine::memtable::ENTRY_OVERHEAD;
use strata_engine::table::{Compression, TableBuilder, TableOptions};
use strata_engine::{CompletedJob, Db, EventListener, JobKind, Options};
use strata_meta::SeqRange;
use strata_policy::{build_policy, PlanAction, PolicyOptions, BUILTIN_POLICIES};
use strata_sim::{
    is_tombstone, key_of, Mix, Op, SimConfig, Simulator, TableSizer, Workload, WorkloadKind,
    WorkloadSpec,
};

const KEY: u64 = 8;
const VALUE: u64 = 100;
const BUFFER: u64 = 64 << 10;
const BLOCK: usize = 4096;

/// Counts bytes instead of storing them.
struct CountingFile(u64);

impl WritableFile for CountingFile {
    fn append(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.0 += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0
    }
}

/// Sizes a simulated table by encoding it with the engine's table builder.
#[derive(Debug)]
struct EngineSizer;

impl TableSizer for EngineSizer {
    fn table_size(&self, entries: &[u64], bloom_bits_per_key: f64, seqnos: SeqRange) -> u64 {
        let options = TableOptions {
            block_size: BLOCK,
            restart_interval: 16,
            compression: Compression::None,
            bloom_bits_per_key,
            record_block_ranges: false,
        };
        let mut b = TableBuilder::new(Box::new(CountingFile(0)), "sizer".into(), options);
        let value = vec![b'v'; VALUE as usize];
        for (i, &e) in entries.iter().enumerate() {
            // Sequence numbers only reach the table through its properties (min and max).
            let seq = if i == 0 {
                seqnos.smallest
            } else {
                seqnos.largest
            };
            let (kind, v) = if is_tombstone(e) {
                (ValueKind::Delete, &[][..])
            } else {
                (ValueKind::Put, &value[..])
            };
            b.add(&internal_key(&key_of(e).to_be_bytes(), seq, kind), v)
                .unwrap();
        }
        b.finish().unwrap().file_size
    }
}

/// (flushes before, action, input levels, output level, bytes written) of each compaction.
type Step = (u64, PlanAction, Vec<usize>, Option<usize>, u64);

#[derive(Default)]
struct Recorder(Mutex<Vec<Step>>);

impl EventListener for Recorder {
    fn on_job_completed(&self, job: &CompletedJob) {
        if let JobKind::Compaction(action) = job.kind {
            self.0.lock().unwrap().push((
                job.flushes_before,
                action,
                job.input_levels.clone(),
                job.output_level,
                job.bytes_written,
            ));
        }
    }
}

fn policy_options() -> PolicyOptions {
    PolicyOptions {
        size_ratio: 4.0,
        write_buffer_size: BUFFER,
        // No size-based cuts: see the module comment.
        target_file_size: 1 << 40,
        horizontal_levels: 3,
        expected_data_size: 8 << 20,
        num_levels: 5,
        ..PolicyOptions::default()
    }
}

fn workload() -> WorkloadSpec {
    WorkloadSpec {
        kind: WorkloadKind::Mixed,
        entries: 40_000,
        ops: 40_000,
        zipf_theta: 0.99,
        mix: Mix {
            insert: 0.3,
            update: 0.5,
            delete: 0.2,
            read: 0.0,
        },
        seed: 7,
    }
}

fn run_engine(policy: &str) -> (Vec<Step>, f64) {
    let recorder = Arc::new(Recorder::default());
    let options = Options::new()
        .with_file_system(Arc::new(MemFs::default()))
        .with_write_buffer_size(BUFFER)
        .with_block_size(BLOCK)
        .with_synchronous_compaction(true)
        .with_policy(build_policy(policy, &policy_options()).unwrap())
        .with_event_listener(recorder.clone());
    let db = Db::open("/db", options).unwrap();
    let value = vec![b'v'; VALUE as usize];
    for op in Workload::new(workload()).unwrap() {
        match op {
            Op::Put(k) => db.put(k.to_be_bytes(), &value).unwrap(),
            Op::Delete(k) => db.delete(k.to_be_bytes()).unwrap(),
            Op::Read(_) => {}
        }
    }
    db.flush().unwrap();
    let wa = db.metrics().write_amp;
    db.close().unwrap();
    let steps = recorder.0.lock().unwrap().clone();
    (steps, wa)
}

fn run_sim(policy: &str) -> (Vec<Step>, f64) {
    let config = SimConfig {
        key_size: KEY,
        value_size: VALUE,
        buffer_size: BUFFER,
        buffer_entry_overhead: TRAILER_LEN as u64 + ENTRY_OVERHEAD,
        sizer: Some(Arc::new(EngineSizer)),
        exact_tombstone_drop: false,
        trace: true,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(build_policy(policy, &policy_options()).unwrap(), config).unwrap();
    for op in Workload::new(workload()).unwrap() {
        match op {
            Op::Put(k) => sim.put(k).unwrap(),
            Op::Delete(k) => sim.delete(k).unwrap(),
            Op::Read(k) => sim.read(k),
        }
    }
    sim.flush().unwrap();
    let steps = sim
        .trace()
        .iter()
        .map(|e| {
            (
                e.flush,
                e.action,
                e.input_levels.clone(),
                e.output_level,
                e.bytes_written,
            )
        })
        .collect();
    let report = sim.finish().unwrap();
    (steps, report.write_amp)
}

#[test]
fn engine_and_simulator_make_the_same_plans() {
    for policy in BUILTIN_POLICIES {
        let (engine_steps, engine_wa) = run_engine(policy);
        let (sim_steps, sim_wa) = run_sim(policy);
        assert!(
            !engine_steps.is_empty(),
            "{policy}: no compaction ran; the test is too small"
        );
        let first_difference = engine_steps
            .iter()
            .zip(&sim_steps)
            .position(|(a, b)| a != b)
            .map(|i| {
                format!(
                    "first difference at step {i}: engine {:?} vs simulator {:?}",
                    engine_steps[i], sim_steps[i]
                )
            });
        assert_eq!(
            engine_steps.len(),
            sim_steps.len(),
            "{policy}: {} engine steps vs {} simulator steps; {first_difference:?}",
            engine_steps.len(),
            sim_steps.len()
        );
        assert!(first_difference.is_none(), "{policy}: {first_difference:?}");
        let deviation = (engine_wa - sim_wa).abs() / sim_wa;
        assert!(
            deviation < 0.02,
            "{policy}: engine WA {engine_wa:.4} vs simulator {sim_wa:.4}"
        );
        eprintln!(
            "{policy}: {} plans identical; WA engine {engine_wa:.4}, simulator {sim_wa:.4}",
            engine_steps.len()
        );
    }
}
