//! Time spent deciding: a wrapper that measures how long a policy's calls take, so executors can
//! report the CPU share of compaction decisions (the partial-merge paper's range-selection
//! overhead) without each policy measuring itself. The engine and the simulator wrap every
//! policy they run in it.

use crate::context::{ManualRange, PickContext};
use crate::error::PolicyError;
use crate::model::{ModelEstimate, ModelInput};
use crate::plan::{FlushPlan, Plan};
use crate::policy::CompactionPolicy;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use strata_meta::Version;

/// A policy whose decisions are timed. It decides exactly as the policy it wraps.
#[derive(Debug)]
pub struct TimedPolicy {
    inner: Arc<dyn CompactionPolicy>,
    nanos: AtomicU64,
}

impl TimedPolicy {
    /// Wraps `policy`.
    pub fn new(policy: Arc<dyn CompactionPolicy>) -> Self {
        TimedPolicy {
            inner: policy,
            nanos: AtomicU64::new(0),
        }
    }

    /// Nanoseconds spent in the policy's calls so far (wall time of the calling thread, which
    /// runs nothing else meanwhile).
    pub fn nanos(&self) -> u64 {
        self.nanos.load(Ordering::Relaxed)
    }

    fn timed<T>(&self, call: impl FnOnce(&dyn CompactionPolicy) -> T) -> T {
        let started = Instant::now();
        let out = call(self.inner.as_ref());
        let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(spent, Ordering::Relaxed);
        out
    }
}

impl CompactionPolicy for TimedPolicy {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn plan_flush(
        &self,
        version: &Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        self.timed(|p| p.plan_flush(version, ctx))
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        self.timed(|p| p.pick(version, ctx))
    }

    fn plan_manual(
        &self,
        version: &Version,
        range: &ManualRange,
        ctx: &PickContext<'_>,
    ) -> Result<Option<Plan>, PolicyError> {
        self.timed(|p| p.plan_manual(version, range, ctx))
    }

    fn expected_level_bytes(&self, version: &Version) -> Vec<u64> {
        self.inner.expected_level_bytes(version)
    }

    fn hold_flushes(&self, version: &Version, ctx: &PickContext<'_>) -> Option<String> {
        self.timed(|p| p.hold_flushes(version, ctx))
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        self.inner.options()
    }

    fn cost_model(&self, input: &ModelInput) -> Option<ModelEstimate> {
        self.inner.cost_model(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::WorkloadStats;
    use crate::leases::Leases;

    #[test]
    fn decisions_are_the_inner_policys_and_their_time_adds_up() {
        let inner = crate::build_policy(&crate::PolicySpec::new("tiered")).unwrap_or_else(|e| {
            panic!("{e}");
        });
        let timed = TimedPolicy::new(Arc::clone(&inner));
        let (leases, stats) = (Leases::new(), WorkloadStats::default());
        let ctx = PickContext::new(&leases, &stats);
        let version = Version::new();
        assert_eq!(timed.pick(&version, &ctx), inner.pick(&version, &ctx));
        assert_eq!(timed.name(), inner.name());
        assert_eq!(timed.options(), inner.options());
        let before = timed.nanos();
        for _ in 0..1000 {
            let _ = timed.pick(&version, &ctx);
        }
        assert!(timed.nanos() > before, "1000 picks took no time");
    }
}
