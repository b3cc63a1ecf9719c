//! A whole workload as one ordered stream of operations.

use crate::generator::{phase_seed, thread_seed, Generator, Op};
use crate::keys::KeySpace;
use crate::spec::{PhaseSpec, WorkloadSpec};
use std::sync::Arc;

/// A workload's operations in order, on one thread: each phase's `ops` operations of its mix.
/// This is how the simulator and the engine's differential test replay a workload. Its
/// generators are seeded like thread 0 of a benchmark run of the same workload and seed, so a
/// benchmark run with one thread per phase issues exactly these operations, key by key.
pub struct OpStream {
    phases: Vec<PhaseSpec>,
    seed: u64,
    space: Arc<KeySpace>,
    phase: usize,
    generator: Option<Generator>,
}

impl OpStream {
    /// A stream of `spec` seeded with `seed`. Fails, naming the phase, when a phase has no
    /// operation count (it runs for a duration) or a writer beside its main threads: those
    /// need a clock, which a stream of operations does not have.
    pub fn new(spec: &WorkloadSpec, seed: u64) -> Result<OpStream, String> {
        spec.validate()?;
        for p in &spec.phases {
            if p.ops == 0 {
                return Err(format!(
                    "phase {:?} of {} runs for a duration, not a number of operations; \
                     an operation stream needs ops",
                    p.name, spec.name
                ));
            }
            if p.writer.is_some() || p.background_writer.is_some() {
                return Err(format!(
                    "phase {:?} of {} has a writer running beside its main threads; \
                     an operation stream runs one thread",
                    p.name, spec.name
                ));
            }
        }
        Ok(OpStream {
            phases: spec.phases.clone(),
            seed,
            // The stream's generators run one at a time, on the caller's thread.
            space: KeySpace::single_writer(),
            phase: 0,
            generator: None,
        })
    }

    /// Distinct keys currently live.
    pub fn live_keys(&self) -> u64 {
        self.space.live_keys()
    }

    /// Operations the whole stream issues.
    pub fn total_ops(&self) -> u64 {
        self.phases.iter().map(|p| p.ops).sum()
    }

    /// Index of the phase the last operation returned came from (of the next one, before the
    /// first).
    pub fn phase_index(&self) -> usize {
        self.phase
    }

    /// The phase the next operation comes from, if any is left.
    pub fn phase(&self) -> Option<&PhaseSpec> {
        self.phases.get(self.phase)
    }
}

impl Iterator for OpStream {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        loop {
            let phase = self.phases.get(self.phase)?;
            let generator = self.generator.get_or_insert_with(|| {
                Generator::new(
                    phase,
                    Arc::clone(&self.space),
                    thread_seed(phase_seed(self.seed, self.phase), 0),
                )
            });
            if let Some(op) = generator.next_op(phase.ops) {
                return Some(op);
            }
            self.phase += 1;
            self.generator = None;
        }
    }
}
