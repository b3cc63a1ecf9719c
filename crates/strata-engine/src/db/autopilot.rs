//! The autopilot's thread ([`crate::Options::with_autopilot`]): it closes windows of the default
//! keyspace's workload, has the pilot decide on each (`strata_policy::autopilot`), records
//! every decision in the manifest, and carries out switches through [`Engine::set_policy`].

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

/// Runs the autopilot of the database whose default keyspace is `tree` until it closes.
pub(crate) fn run(tree: Arc<Engine>, options: AutopilotOptions) {
    let mut pilot = Pilot::new(options);
    let started = Instant::now();
    let mut since = tree.lifetime_stats();
    while !tree.stop_requested() {
        std::thread::sleep(TICK);
        let now = tree.lifetime_stats();
        let window = now.window_since(&since);
        let due = pilot.window_is_due(
            window.key_bytes + window.value_bytes,
            window.operations(),
            window.seconds,
        );
        if !due || tree.shared.failed.load(Ordering::Acquire) {
            continue;
        }
        since = now.clone();
        let (version, current) = {
            let state = tree.state.lock();
            (Arc::clone(&state.version), tree.recorded_policy(&state))
        };
        if version.in_handover() {
            // The tree is in no policy's shape until the handover ends: judge the next window.
            continue;
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
        let decision = pilot.advise_and_decide(started.elapsed().as_secs_f64(), &request);
        if let Err(e) = tree.carry_out(decision) {
            // A failed switch or record leaves the database as it was (or read-only, with the
            // error recorded); the next window is judged as usual.
            tracing::warn!(error = %e, "autopilot: decision not carried out");
        }
    }
}

impl Engine {
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
