//! Why a policy could not be built or could not decide, or why a plan is unusable.

use strata_meta::TableId;
use thiserror::Error;

/// Why a policy could not be built or could not decide, or why a plan is unusable.
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
    /// An option the policy does not declare.
    #[error("policy {policy} has no option {option:?}; its options are: {known}")]
    UnknownOption {
        /// The policy.
        policy: String,
        /// The option asked for.
        option: String,
        /// Comma-separated names of the options it has.
        known: String,
    },
    /// An option value that does not parse as the option's type.
    #[error("policy {policy}: option {option} = {value:?} is not {expected}")]
    BadOptionValue {
        /// The policy.
        policy: String,
        /// The option.
        option: String,
        /// The text given.
        value: String,
        /// What the option takes (e.g. "a size such as 64MiB").
        expected: String,
    },
    /// A policy specification (`name:option=value,...`) that does not parse.
    #[error("bad policy specification {spec:?}: {reason}")]
    BadSpec {
        /// The text given.
        spec: String,
        /// What is wrong.
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
    /// No registered policy has this name.
    #[error("unknown policy {name:?}; registered policies are: {known}")]
    UnknownPolicy {
        /// The name asked for.
        name: String,
        /// Comma-separated list of names.
        known: String,
    },
    /// A second registration under a name already taken.
    #[error("a policy named {0:?} is already registered")]
    DuplicatePolicy(String),
}
