//! The compaction-policy trait.

use crate::context::{ManualRange, PickContext};
use crate::error::PolicyError;
use crate::helpers;
use crate::model::{ModelEstimate, ModelInput};
use crate::plan::{FlushPlan, Plan};
use std::fmt;
use strata_meta::Version;

/// A compaction policy: a deterministic function from (version, context) to a plan.
///
/// Contract:
/// - No clock, randomness or I/O inside: everything a decision depends on is in the version
///   (including the policy's own persisted state, [`Version::policy_state`]) or the context.
///   Asking twice with the same inputs gives the same answer.
/// - State changes travel inside plans ([`Plan::policy_state`], [`FlushPlan::policy_state`]) and
///   are installed by the executor through a version edit; recovery restores them without calling
///   the policy.
/// - [`CompactionPolicy::pick`] must eventually return `None` when called repeatedly on the
///   versions its plans produce, with no flush in between (compaction converges).
/// - Picks must respect the context's leases: a plan never takes a leased table as input.
///
/// The same policy object drives the real engine and the simulator. To make a policy selectable
/// by name (`strata sim --policy`, `strata bench --policies`, `Options::with_policy_named`),
/// register it with [`crate::registry::register`].
pub trait CompactionPolicy: Send + Sync + fmt::Debug {
    /// The policy's name, as registered.
    fn name(&self) -> &'static str;

    /// Decides where the next buffer flush goes. `ctx.buffer` describes the buffer.
    fn plan_flush(
        &self,
        version: &Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError>;

    /// Picks the next compaction, or `None` when nothing needs doing now.
    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError>;

    /// Plans a manual compaction of the keys in `range` (RocksDB: `CompactRange`), or `None`
    /// when no table touches it. The default merges every table overlapping the range into the
    /// deepest level ([`helpers::range_merge`]), cutting output at the largest input table's size
    /// with the largest input Bloom setting; the built-in policies pass their own output settings.
    fn plan_manual(
        &self,
        version: &Version,
        range: &ManualRange,
        _ctx: &PickContext<'_>,
    ) -> Result<Option<Plan>, PolicyError> {
        Ok(helpers::range_merge(version, range, None))
    }

    /// Bytes the policy expects each level (indexed by level) to hold soon, used by the dynamic
    /// Bloom layout ([`crate::bloom`]) where it exceeds the level's current size. The default,
    /// empty, means no expectation beyond the current sizes.
    fn expected_level_bytes(&self, _version: &Version) -> Vec<u64> {
        Vec::new()
    }

    /// Why flushes should wait for running compactions, or `None` (the default) when they need
    /// not. Policies whose schedule does not keep level 0 as its entrance cannot lean on the
    /// level-0 write stalls, so this is how they say their compaction debt is too large (RocksDB
    /// stalls writes on pending compaction bytes for the same reason). The executor holds the
    /// next flush while this says so and a compaction is running (never otherwise, so nothing
    /// deadlocks); writers stall once the memtables fill. The synchronous simulator runs every
    /// compaction before the next flush and never holds one.
    fn hold_flushes(&self, _version: &Version, _ctx: &PickContext<'_>) -> Option<String> {
        None
    }

    /// The policy's options as (name, value) pairs, for reports.
    fn options(&self) -> Vec<(&'static str, String)>;

    /// Closed-form costs of this policy's tree in steady state ([`crate::model`]), if it has a
    /// model: `strata advise` ranks with them before it simulates. Default: none.
    fn cost_model(&self, _input: &ModelInput) -> Option<ModelEstimate> {
        None
    }
}
