//! Strata's advisor: which compaction policy a workload should run, predicted rather than
//! measured.
//!
//! - [`Calibration`]: what this machine and its device cost per unit of engine work, measured by
//!   [`measure`] (`strata calibrate`) and kept in a small file;
//! - [`estimate`]: a configuration's time per operation from the counts the simulator reports
//!   for it, priced with a calibration, cached or out of cache;
//! - [`SimulatingAdvisor`]: the autopilot's advisor
//!   ([`strata_engine::Options::with_autopilot`]), which simulates every candidate policy on a
//!   workload like the database's last window and predicts each;
//! - [`workload_like`]: that workload.
//!
//! `strata advise` ranks configurations with the same estimate; `docs/autopilot.md` has the
//! model, its measured accuracy, and the autopilot's rule.

mod advisor;
pub mod calibration;
pub mod estimate;
pub mod measure;
mod workload;

pub use advisor::{
    run_autopilot, SimulatingAdvisor, RUN_WINDOW_BUFFERS, RUN_WINDOW_OPS, RUN_WINDOW_SECONDS,
};
pub use calibration::{Calibration, CalibrationError, CpuCosts, DeviceCosts, CALIBRATION_FILE};
pub use estimate::{estimate, simulated_memory_share, Estimate, OperationMix, Regime};
pub use workload::{workload_like, WorkloadShape, ASCENDING_BELOW, ZIPFIAN_ABOVE};
