//! The autopilot ([`crate::Options::with_autopilot`]): it closes windows of the default
//! keyspace's workload, has the pilot decide on each (`strata_policy::autopilot`), records
//! every decision in the manifest, and carries out switches through [`Engine::set_policy`].
//!
//! With background threads it runs on a thread of its own that looks at the counters every
//! [`TICK`]. A database that compacts synchronously has no clock to keep: the write that
//! completes a window (by bytes or operations) decides, as the simulator's twin does
//! (`strata_sim::Simulator::with_autopilot`), so the two can be compared decision by decision.

use super::engine::Engine;
use crate::error::{Error, Result};
use crate::manifest::ManifestRecord;
use crate::stats::LifetimeStats;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_policy::autopilot::{AdviceRequest, AutopilotOptions, Decision, Pilot};

/// How often the thread looks at the counters: windows close within this of being due, and a
/// closing database waits at most this long for the thread.
const TICK: Duration = Duration::from_millis(20);

/// Decisions kept in memory ([`crate::Db::autopilot_decisions`]): days of the default schedule.
const KEPT_DECISIONS: usize = 10_000;

/// The autopilot's state between windows.
pub(crate) struct Autopilot {
    pilot: Pilot,
    /// The counters when the window opened.
    since: LifetimeStats,
    started: Instant,
    /// Whether windows close by time too, and wait for the last advice's share
    /// ([`Pilot::window_is_due`]); without a clock only bytes and operations close them.
    clock: bool,
}

impl Autopilot {
    /// The autopilot of `tree`, its first window opening now.
    pub(crate) fn new(tree: &Engine, options: AutopilotOptions, clock: bool) -> Self {
        Self {
            pilot: Pilot::new(options),
            since: tree.lifetime_stats(),
            started: Instant::now(),
            clock,
        }
    }

    /// Decides if the window is due, and carries the decision out.
    pub(crate) fn step(&mut self, tree: &Engine) {
        let now = tree.lifetime_stats();
        let window = now.window_since(&self.since);
        let user_bytes = window.key_bytes + window.value_bytes;
        let due = if self.clock {
            self.pilot
                .window_is_due(user_bytes, window.operations(), window.seconds)
        } else {
            self.pilot
                .options()
                .window_is_due(user_bytes, window.operations(), 0.0)
        };
        if !due || tree.shared.failed.load(Ordering::Acquire) {
            return;
        }
        self.since = now.clone();
        let (version, current) = {
            let state = tree.state.lock();
            (Arc::clone(&state.version), tree.recorded_policy(&state))
        };
        if version.in_handover() {
            // The tree is in no policy's shape until the handover ends: judge the next window.
            return;
        }
        // Entry sizes over the database's life: a window of reads alone has none.
        let life = now.window_since(&LifetimeStats::default());
        let request = AdviceRequest {
            window: &window,
            current: &current,
            version: &version,
            live_bytes: version.size(),
            write_buffer_size: tree.options.write_buffer_size,
            key_size: life.key_size(),
            value_size: life.value_size(),
        };
        let decision = self
            .pilot
            .advise_and_decide(self.started.elapsed().as_secs_f64(), &request);
        if let Err(e) = tree.carry_out(decision) {
            // A failed switch or record leaves the database as it was (or read-only, with the
            // error recorded); the next window is judged as usual.
            tracing::warn!(error = %e, "autopilot: decision not carried out");
        }
    }
}

/// Runs the autopilot of the database whose default keyspace is `tree` until it closes.
pub(crate) fn run(tree: Arc<Engine>, options: AutopilotOptions) {
    let mut autopilot = Autopilot::new(&tree, options, true);
    while !tree.stop_requested() {
        std::thread::sleep(TICK);
        autopilot.step(&tree);
    }
}

impl Engine {
    /// After a write of a database that compacts synchronously: the autopilot's step, if it
    /// runs in the writes ([`Autopilot`]).
    pub(crate) fn autopilot_after_write(&self) {
        if let Some(autopilot) = self.inline_autopilot.lock().as_mut() {
            autopilot.step(self);
        }
    }

    /// Records `decision` (manifest, memory, log) and, if it is a switch, makes it.
    fn carry_out(&self, decision: Decision) -> Result<()> {
        tracing::info!(
            keyspace = %self.definition.name,
            decision = %decision.summary(),
            "autopilot"
        );
        self.record_decision(&decision)?;
        let switch = decision.switch_policy();
        {
            let mut decisions = self.decisions.lock();
            if decisions.len() == KEPT_DECISIONS {
                // The manifest keeps them all; memory keeps the latest.
                decisions.pop_front();
            }
            decisions.push_back(decision);
        }
        if let Some(policy) = switch {
            self.set_policy(policy.map_err(Error::InvalidArgument)?)?;
        }
        Ok(())
    }

    /// Appends `decision` to the manifest, as a record of its own.
    fn record_decision(&self, decision: &Decision) -> Result<()> {
        self.append_record(ManifestRecord {
            autopilot: Some(decision.clone()),
            ..ManifestRecord::default()
        })
    }
}
