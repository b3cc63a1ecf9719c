//! Workloads for Strata, defined once for the benchmark tool (`strata bench`) and the simulator
//! (`strata sim`): the same workload name and seed drive the same key stream in both, so a
//! simulated run and an engine run are comparable key by key.
//!
//! - [`spec`]: a workload is phases, each a number of operations (or a duration) of a [`Mix`] over
//!   a key distribution ([`KeyDist`]) and an insert order ([`InsertOrder`]), optionally open-loop
//!   or with a writer beside it; [`WorkloadSpec::from_toml`] reads one from a file.
//! - [`presets`]: named workloads ([`PRESETS`]): db_bench phases, YCSB A–F, the papers' workloads.
//! - [`keys`]: key numbers become bytes with [`encode_key`]; [`scramble`] spreads indexes over
//!   the key space; [`KeySpace`] knows which keys are live.
//! - [`generator`]: a [`Generator`] issues one thread's operations of a phase.
//! - [`OpStream`]: a whole workload as one ordered stream, for single-threaded replay.

pub mod generator;
pub mod keys;
pub mod presets;
pub mod spec;
mod stream;

pub use generator::{compressible_value, phase_seed, thread_seed, Generator, Op, OpKind};
pub use keys::{encode_key, scramble, KeySpace, MAX_KEY};
pub use presets::{ParamError, PresetParams, DEFAULT_BATCH_SIZE, DISTRIBUTIONS, PRESETS};
pub use spec::{
    Arrivals, Burst, InsertOrder, KeyDist, Mix, OpenLoop, OptionValue, PhaseSpec,
    RateLimitedWriter, WorkloadSpec, MAX_READ_BATCH, MAX_THREADS, TPCC_ORDER_BITS,
};
pub use stream::OpStream;
