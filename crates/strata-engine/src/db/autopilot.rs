//! The autopilot's thread ([`crate::Options::with_autopilot`]): it closes windows of the default
//! keyspace's workload, has the pilot decide on each (`strata_policy::autopilot`), records
//! every decision in the manifest, and carries out switches through [`Engine::set_policy`].

use super::engine::Engine;
use crate::error::Result;
use crate::manifest::ManifestRecord;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_policy::autopilot::{Action, AdviceRequest, AutopilotOptions, Decision, Pilot};
use strata_policy::{build_policy, PolicySpec};

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
        let request = AdviceRequest {
            window: &window,
            current: &current,
            version: &version,
            live_bytes: version.size(),
            write_buffer_size: tree.options.write_buffer_size,
            key_size: (now.key_bytes / (now.puts + now.deletes).max(1)).max(1),
            value_size: now.value_bytes / now.puts.max(1),
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
        let action = decision.action.clone();
        let mut decisions = self.decisions.lock();
        if decisions.len() == KEPT_DECISIONS {
            // The manifest keeps them all; memory keeps the latest.
            decisions.remove(0);
        }
        decisions.push(decision);
        drop(decisions);
        if let Action::Switch { to } = action {
            let policy = to
                .parse::<PolicySpec>()
                .and_then(|spec| build_policy(&spec))
                .map_err(|e| {
                    crate::error::Error::InvalidArgument(format!(
                        "the autopilot's advisor named {to:?}: {e}"
                    ))
                })?;
            self.set_policy(policy)?;
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
