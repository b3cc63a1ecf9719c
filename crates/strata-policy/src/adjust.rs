//! A policy whose plans keep their inner policy's choices and get their outputs' settings
//! rewritten: the Bloom layout ([`crate::bloom::DynamicBits`]) and compression per level
//! ([`crate::compression::LevelCodecs`]), which the registry applies around every policy. One
//! wrapper forwards everything else, so a setting is an [`OutputAdjustment`] alone.

use crate::context::{ManualRange, PickContext};
use crate::error::PolicyError;
use crate::model::{ModelEstimate, ModelInput};
use crate::plan::{FlushPlan, Plan};
use crate::policy::CompactionPolicy;
use std::fmt::Debug;
use std::sync::Arc;
use strata_meta::Version;

/// What an [`AdjustedOutputs`] changes in its inner policy's plans: their outputs' settings,
/// never which inputs a plan takes or where its output goes.
pub trait OutputAdjustment: Debug + Send + Sync {
    /// Adjusts the output of `plan`, a flush `inner` planned on `version`.
    fn adjust_flush(
        &self,
        inner: &dyn CompactionPolicy,
        version: &Version,
        ctx: &PickContext<'_>,
        plan: &mut FlushPlan,
    );

    /// Adjusts the output of `plan`, a compaction `inner` picked (or planned for a manual
    /// compaction) on `version`.
    fn adjust_plan(&self, inner: &dyn CompactionPolicy, version: &Version, plan: &mut Plan);

    /// The options the adjustment sets: they replace the inner policy's of the same names.
    fn options(&self) -> Vec<(&'static str, String)>;
}

/// `inner` with `adjustment` applied to the outputs of its plans. Everything else (name, state,
/// expectations, holds, cost model) is the inner policy's.
#[derive(Debug)]
pub struct AdjustedOutputs<A> {
    inner: Arc<dyn CompactionPolicy>,
    adjustment: A,
}

impl<A: OutputAdjustment> AdjustedOutputs<A> {
    /// `inner` with `adjustment`.
    pub fn new(inner: Arc<dyn CompactionPolicy>, adjustment: A) -> Self {
        AdjustedOutputs { inner, adjustment }
    }

    fn adjusted(&self, version: &Version, plan: Option<Plan>) -> Option<Plan> {
        plan.map(|mut plan| {
            self.adjustment
                .adjust_plan(self.inner.as_ref(), version, &mut plan);
            plan
        })
    }
}

impl<A: OutputAdjustment> CompactionPolicy for AdjustedOutputs<A> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn plan_flush(
        &self,
        version: &Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError> {
        let mut plan = self.inner.plan_flush(version, ctx)?;
        self.adjustment
            .adjust_flush(self.inner.as_ref(), version, ctx, &mut plan);
        Ok(plan)
    }

    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError> {
        Ok(self.adjusted(version, self.inner.pick(version, ctx)?))
    }

    fn plan_manual(
        &self,
        version: &Version,
        range: &ManualRange,
        ctx: &PickContext<'_>,
    ) -> Result<Option<Plan>, PolicyError> {
        Ok(self.adjusted(version, self.inner.plan_manual(version, range, ctx)?))
    }

    fn expected_level_bytes(&self, version: &Version) -> Vec<u64> {
        self.inner.expected_level_bytes(version)
    }

    fn hold_flushes(&self, version: &Version, ctx: &PickContext<'_>) -> Option<String> {
        self.inner.hold_flushes(version, ctx)
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        let ours = self.adjustment.options();
        let mut options = self.inner.options();
        options.retain(|(name, _)| !ours.iter().any(|(set, _)| set == name));
        options.extend(ours);
        options
    }

    fn cost_model(&self, input: &ModelInput) -> Option<ModelEstimate> {
        self.inner.cost_model(input)
    }
}
