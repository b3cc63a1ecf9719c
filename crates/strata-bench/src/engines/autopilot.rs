//! The autopilot's options for an [`super::AUTOPILOT`] run: the simulating advisor priced with
//! the run's calibration, windows sized for benchmark runs.

use super::EngineSettings;
use anyhow::{Context, Result};
use std::sync::Arc;
use strata_advise::{Calibration, SimulatingAdvisor};
use strata_policy::autopilot::AutopilotOptions;

/// A window closes after this many write buffers of user bytes: a benchmark phase of a few
/// hundred megabytes gets several decisions, where the default (64 MiB) would give one or none.
const WINDOW_BUFFERS: u64 = 4;

/// ...or after this many seconds.
const WINDOW_SECONDS: f64 = 5.0;

/// The autopilot a run with `s` gets. With direct I/O the block cache is all the memory that
/// caches tables, so the advisor prices reads out of cache against it.
pub fn options(s: &EngineSettings) -> Result<AutopilotOptions> {
    let calibration = match &s.calibration {
        Some(path) => Calibration::load(path).context("the autopilot's calibration")?,
        None => Calibration::assumed(),
    };
    let advisor =
        SimulatingAdvisor::new(calibration).with_cache_bytes(s.direct_io.then_some(s.block_cache));
    Ok(AutopilotOptions::new(Arc::new(advisor))
        .with_every_bytes(WINDOW_BUFFERS * s.write_buffer_size)
        .with_every_seconds(WINDOW_SECONDS)
        .with_min_seconds_between_switches(WINDOW_SECONDS))
}
