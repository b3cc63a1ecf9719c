//! The autopilot's options for an [`super::AUTOPILOT`] run.

use super::EngineSettings;
use anyhow::{Context, Result};
use strata_advise::{run_autopilot, Calibration};
use strata_policy::autopilot::AutopilotOptions;

/// The autopilot a run with `s` gets ([`strata_advise::run_autopilot`]), priced with the
/// settings' calibration. With direct I/O the block cache is all the memory that caches
/// tables, so the advisor prices reads out of cache against it.
pub fn options(s: &EngineSettings) -> Result<AutopilotOptions> {
    let calibration = match &s.calibration {
        Some(path) => Calibration::load(path).context("the autopilot's calibration")?,
        None => Calibration::assumed(),
    };
    Ok(run_autopilot(
        calibration,
        s.write_buffer_size,
        s.direct_io.then_some(s.block_cache),
    ))
}
