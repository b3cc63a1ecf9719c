//! The autopilot in the simulator, the engine's twin: the same rule
//! (`strata_policy::autopilot::Pilot`) decides on windows of the simulated workload and
//! switches through [`Simulator::set_policy`], so a policy-changing workload can be studied at
//! any scale before it runs on the engine ([`crate::SimReport::autopilot`] keeps every
//! decision).

use super::{SimError, Simulator};
use strata_policy::autopilot::{AdviceRequest, AutopilotOptions, Decision, Pilot, WorkloadWindow};
use strata_policy::PolicySpec;

/// What an operation adds to the autopilot's window.
pub(super) enum Counted {
    /// A put (a merge operand counts as one) or a delete (a range deletion counts as one).
    Write {
        /// Whether it is a delete.
        delete: bool,
        /// Its key bytes (a range deletion's two bounds).
        key_bytes: u64,
        /// Its value bytes.
        value_bytes: u64,
    },
    /// A point read.
    Read,
    /// A scan of this many entries.
    Scan(u64),
}

/// The autopilot's state in a simulation: the pilot, the window being counted, the decisions.
pub(super) struct SimAutopilot {
    pilot: Pilot,
    window: WorkloadWindow,
    /// Entries the window's scans asked for.
    scanned: u64,
    /// The simulated clock when the window opened.
    opened_at: f64,
    pub(super) decisions: Vec<Decision>,
}

impl Simulator {
    /// Runs the autopilot over what the simulator is asked to do: the engine's rule with
    /// `options`' advisor, deciding in the write that completes a window. Without a clock
    /// (synchronous mode) windows close by bytes written and by operations
    /// ([`AutopilotOptions::with_every_ops`]), as in an engine that compacts synchronously.
    pub fn with_autopilot(mut self, options: AutopilotOptions) -> Self {
        self.autopilot = Some(SimAutopilot {
            pilot: Pilot::new(options),
            window: WorkloadWindow::default(),
            scanned: 0,
            opened_at: self.now,
            decisions: Vec::new(),
        });
        self
    }

    /// Counts an operation in the autopilot's window. Only writes close a window
    /// ([`Simulator::autopilot_after_write`]), as in an engine that compacts synchronously.
    pub(super) fn autopilot_count(&mut self, count: Counted) {
        let Some(a) = self.autopilot.as_mut() else {
            return;
        };
        let w = &mut a.window;
        match count {
            Counted::Write {
                delete,
                key_bytes,
                value_bytes,
            } => {
                if delete {
                    w.deletes += 1;
                } else {
                    w.puts += 1;
                }
                w.key_bytes += key_bytes;
                w.value_bytes += value_bytes;
            }
            Counted::Read => w.point_reads += 1,
            Counted::Scan(entries) => {
                w.scans += 1;
                a.scanned += entries;
            }
        }
    }

    /// After a write: decides if the window is due, by bytes and operations (and by simulated
    /// time, in a timed simulation).
    pub(super) fn autopilot_after_write(&mut self) -> Result<(), SimError> {
        let now = self.now;
        let Some(a) = self.autopilot.as_mut() else {
            return Ok(());
        };
        let w = &mut a.window;
        w.seconds = now - a.opened_at;
        let due =
            a.pilot
                .options()
                .window_is_due(w.key_bytes + w.value_bytes, w.operations(), w.seconds);
        if due {
            self.autopilot_decide()?;
        }
        Ok(())
    }

    fn autopilot_decide(&mut self) -> Result<(), SimError> {
        let Some(mut a) = self.autopilot.take() else {
            return Ok(());
        };
        let mut window = std::mem::take(&mut a.window);
        window.scan_length = a.scanned as f64 / window.scans.max(1) as f64;
        window.skew = self.stats.skew;
        window.range_overlap = self.skew.range_overlap();
        a.scanned = 0;
        a.opened_at = self.now;
        let current = self.version.policy().map_or_else(
            || PolicySpec::of(self.policy.as_ref()).to_string(),
            str::to_string,
        );
        let entry = self.cfg.key_size + self.cfg.value_size;
        let decision = if self.version.in_handover() {
            None
        } else {
            let request = AdviceRequest {
                window: &window,
                current: &current,
                version: &self.version,
                live_bytes: self.live_entries * entry,
                write_buffer_size: self.cfg.buffer_size,
                key_size: self.cfg.key_size,
                value_size: self.cfg.value_size,
            };
            Some(a.pilot.advise_and_decide(self.now, &request))
        };
        let switch = decision.as_ref().and_then(Decision::switch_policy);
        a.decisions.extend(decision);
        self.autopilot = Some(a);
        if let Some(policy) = switch {
            self.set_policy(policy.map_err(SimError::Config)?)?;
        }
        Ok(())
    }
}
