//! The compaction-policy trait.

use crate::context::PickContext;
use crate::plan::{FlushPlan, Plan};
use std::fmt;
use strata_meta::{TableId, Version};
use thiserror::Error;

/// Why a policy could not decide, or why a plan is unusable.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PolicyError {
    /// An option value is out of range.
    #[error("invalid option {option}: {reason}")]
    InvalidOption {
        /// The option's name.
        option: &'static str,
        /// What is wrong with the value.
        reason: String,
    },
    /// The policy state stored in the version cannot be read by this policy.
    #[error("policy state {state:?} cannot be read by policy {policy}: {reason}")]
    BadState {
        /// The policy.
        policy: &'static str,
        /// The stored state.
        state: String,
        /// The decoding error.
        reason: String,
    },
    /// A plan does not fit the version it is applied to.
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    /// A plan's input is leased by a running job.
    #[error("table {0} is leased by a running job")]
    Leased(TableId),
    /// No built-in policy has this name.
    #[error("unknown policy {name:?}; built-in policies are: {known}")]
    UnknownPolicy {
        /// The name asked for.
        name: String,
        /// Comma-separated list of names.
        known: String,
    },
}

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
/// The same policy object drives the real engine and the simulator.
pub trait CompactionPolicy: Send + Sync + fmt::Debug {
    /// The policy's name, as accepted by [`crate::build_policy`].
    fn name(&self) -> &'static str;

    /// Decides where the next buffer flush goes. `ctx.buffer` describes the buffer.
    fn plan_flush(
        &self,
        version: &Version,
        ctx: &PickContext<'_>,
    ) -> Result<FlushPlan, PolicyError>;

    /// Picks the next compaction, or `None` when nothing needs doing now.
    fn pick(&self, version: &Version, ctx: &PickContext<'_>) -> Result<Option<Plan>, PolicyError>;

    /// The policy's options as (name, value) pairs, for reports.
    fn options(&self) -> Vec<(&'static str, String)>;
}
