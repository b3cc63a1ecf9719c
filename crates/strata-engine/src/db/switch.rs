//! Live policy switches ([`crate::Db::set_policy`]): the tree is handed to another policy
//! without a rewrite (see [`strata_exec::handover`]).

use super::engine::Engine;
use super::install::BufferChange;
use crate::error::{Error, Result};
use crate::listener::PolicySwitch;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use strata_exec::handover;
use strata_policy::{CompactionPolicy, TimedPolicy};

impl Engine {
    /// Hands the tree to `policy`: stops starting jobs, waits for the running ones (the old
    /// policy's plans, and the state they carry, are its own), then records the switch in the
    /// manifest, in one record, and replaces the policy. The handover runs as ordinary jobs
    /// afterwards. On a read-only or failed database nothing changes.
    pub fn set_policy(&self, policy: Arc<dyn CompactionPolicy>) -> Result<()> {
        self.check_open()?;
        let mut state = self.state.lock();
        self.check_background_error()?;
        if self.shared.read_only {
            return Err(Error::ReadOnly(
                "the database was opened read-only; a policy switch writes the manifest"
                    .to_string(),
            ));
        }
        if state.switching {
            return Err(Error::InvalidArgument(
                "another policy switch is under way".to_string(),
            ));
        }
        state.switching = true;
        let drained = loop {
            if let Err(e) = self
                .check_background_error()
                .and_then(|()| self.check_open())
            {
                break Err(e);
            }
            if !state.flush_running && state.running_compactions == 0 {
                break Ok(());
            }
            self.background_work
                .wait_for(&mut state, Duration::from_millis(20));
        };
        let switched = drained.and_then(|()| {
            let from = state.version.policy().map(str::to_string);
            let edit = handover::switch_edit(policy.as_ref());
            self.install(&mut state, edit, &[], BufferChange::default())?;
            self.shared.events.policy_switch(&PolicySwitch {
                from,
                to: self.recorded_policy(&state),
                at_open: false,
            });
            self.entry_level.store(
                handover::Entry::of(policy.as_ref()).pack(),
                Ordering::Relaxed,
            );
            *self.policy.write() = Arc::new(TimedPolicy::new(policy));
            Ok(())
        });
        state.switching = false;
        self.wake_workers();
        switched?;
        if self.options.synchronous_compaction {
            self.run_inline(&mut state)?;
        }
        Ok(())
    }
}

impl Engine {
    /// The policy's specification as the version records it, or its name if none is recorded.
    pub fn recorded_policy(&self, state: &super::engine::EngineState) -> String {
        state
            .version
            .policy()
            .map_or_else(|| self.policy().name().to_string(), str::to_string)
    }
}
