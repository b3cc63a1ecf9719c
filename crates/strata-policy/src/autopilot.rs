//! The autopilot's rule: when a database hands its tree to another policy by itself.
//!
//! An [`Advisor`] predicts, for the workload of the last window, what an operation costs under
//! each candidate configuration and what handing the tree over to it would cost. A [`Pilot`]
//! turns a series of such predictions into decisions: it switches only when the predicted gain
//! over the horizon beats the handover's predicted cost by a margin, only after the same
//! candidate has won several windows in a row, never twice within a minimum interval, and never
//! beyond a budget of handover bytes per hour. The rule is a pure function of its inputs and its
//! own small history, so the engine and the simulator decide alike; every decision, kept or
//! switched, is a [`Decision`] the engine records in its manifest.

use crate::policy::CompactionPolicy;
use crate::registry::{build_policy, PolicySpec};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use strata_meta::Version;

/// The workload of one window: what the database was asked to do between two decisions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkloadWindow {
    /// Puts written.
    pub puts: u64,
    /// Deletes written.
    pub deletes: u64,
    /// Point lookups.
    pub point_reads: u64,
    /// Range scans started.
    pub scans: u64,
    /// Mean entries a scan returned (0 without scans).
    pub scan_length: f64,
    /// User key bytes of puts and deletes.
    pub key_bytes: u64,
    /// User value bytes of puts.
    pub value_bytes: u64,
    /// The skew estimate (the fraction of a flush made of hot keys), if one was made.
    pub skew: Option<f64>,
    /// How much of a flush's key range the previous flush's covered, if estimated: near 0 for
    /// ascending (nearly sorted) keys, near 1 for keys all over the key space.
    pub range_overlap: Option<f64>,
    /// Seconds the window lasted.
    pub seconds: f64,
}

impl WorkloadWindow {
    /// Every operation of the window.
    pub fn operations(&self) -> u64 {
        self.puts + self.deletes + self.point_reads + self.scans
    }

    /// Mean key bytes of a write, at least 1.
    pub fn key_size(&self) -> u64 {
        (self.key_bytes / (self.puts + self.deletes).max(1)).max(1)
    }

    /// Mean value bytes of a put.
    pub fn value_size(&self) -> u64 {
        self.value_bytes / self.puts.max(1)
    }
}

/// What an [`Advisor`] is asked: the workload of the last window and the tree it runs on.
#[derive(Clone, Copy, Debug)]
pub struct AdviceRequest<'a> {
    /// The workload since the last decision.
    pub window: &'a WorkloadWindow,
    /// The policy running now, as a specification (`name:option=value,...`).
    pub current: &'a str,
    /// The tree now: what a handover would start from.
    pub version: &'a Version,
    /// Bytes of live data, estimated (table bytes over space amplification, or the tables'
    /// bytes where nothing better is known).
    pub live_bytes: u64,
    /// The write buffer size.
    pub write_buffer_size: u64,
    /// Mean key bytes of the database's writes (the window may have none).
    pub key_size: u64,
    /// Mean value bytes of its puts.
    pub value_size: u64,
}

/// One candidate as an [`Advisor`] predicts it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The configuration, a policy specification.
    pub spec: String,
    /// Predicted nanoseconds per operation of the window's workload.
    pub ns_per_op: f64,
    /// Bytes a handover from the current tree to it would rewrite (0 for the current one).
    pub handover_bytes: u64,
    /// Predicted nanoseconds that handover takes.
    pub handover_ns: f64,
}

/// Predicts what each candidate configuration would cost on a window's workload. The engine
/// calls it from a background thread of its own, at most once per window; it may take seconds.
pub trait Advisor: Send + Sync {
    /// A name for the log and the manifest (`"simulator"`, `"fixed"`...).
    fn name(&self) -> &str;

    /// Every candidate's prediction, the current configuration's among them (with the same
    /// specification as `request.current`), in any order. An error is recorded as a decision
    /// to keep the current policy.
    fn predict(&self, request: &AdviceRequest<'_>) -> Result<Vec<Prediction>, String>;
}

/// When and how boldly the autopilot re-advises and switches. Every default is stated on its
/// builder.
#[derive(Clone)]
pub struct AutopilotOptions {
    advisor: Arc<dyn Advisor>,
    every_bytes: u64,
    every_seconds: f64,
    every_ops: u64,
    min_window_ops: u64,
    min_gain: f64,
    margin: f64,
    horizon_windows: f64,
    confirmations: usize,
    min_seconds_between_switches: f64,
    handover_bytes_per_hour: u64,
    max_advice_share: f64,
}

impl fmt::Debug for AutopilotOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AutopilotOptions")
            .field("advisor", &self.advisor.name())
            .field("every_bytes", &self.every_bytes)
            .field("every_seconds", &self.every_seconds)
            .field("every_ops", &self.every_ops)
            .field("min_window_ops", &self.min_window_ops)
            .field("min_gain", &self.min_gain)
            .field("margin", &self.margin)
            .field("horizon_windows", &self.horizon_windows)
            .field("confirmations", &self.confirmations)
            .field(
                "min_seconds_between_switches",
                &self.min_seconds_between_switches,
            )
            .field("handover_bytes_per_hour", &self.handover_bytes_per_hour)
            .field("max_advice_share", &self.max_advice_share)
            .finish()
    }
}

impl AutopilotOptions {
    /// The autopilot with `advisor` and the default schedule and rule.
    pub fn new(advisor: Arc<dyn Advisor>) -> Self {
        Self {
            advisor,
            every_bytes: 64 << 20,
            every_seconds: 30.0,
            every_ops: 0,
            min_window_ops: 10_000,
            min_gain: 0.1,
            margin: 2.0,
            horizon_windows: 4.0,
            confirmations: 2,
            min_seconds_between_switches: 60.0,
            handover_bytes_per_hour: 4 << 30,
            max_advice_share: 0.05,
        }
    }

    /// The advisor.
    pub fn advisor(&self) -> &Arc<dyn Advisor> {
        &self.advisor
    }

    /// A window closes once this many user bytes were written in it... Default: 64 MiB.
    pub fn with_every_bytes(mut self, bytes: u64) -> Self {
        self.every_bytes = bytes.max(1);
        self
    }

    /// ...or once it lasted this many seconds, whichever comes first. Default: 30.
    pub fn with_every_seconds(mut self, seconds: f64) -> Self {
        self.every_seconds = seconds.max(0.001);
        self
    }

    /// ...or once it holds this many operations (0: never), which closes windows of reads
    /// alone in a simulation without a clock. Default: 0.
    pub fn with_every_ops(mut self, ops: u64) -> Self {
        self.every_ops = ops;
        self
    }

    /// A window of fewer operations is too small to judge a workload by: it is extended
    /// instead of closed. Default: 10,000.
    pub fn with_min_window_ops(mut self, ops: u64) -> Self {
        self.min_window_ops = ops;
        self
    }

    /// The least predicted saving per operation, as a share of the current cost, worth a
    /// switch: predictions closer than this are noise. Default: 0.1.
    pub fn with_min_gain(mut self, share: f64) -> Self {
        self.min_gain = share.max(0.0);
        self
    }

    /// The predicted gain over the horizon must exceed the handover's predicted time this many
    /// times. Default: 2.
    pub fn with_margin(mut self, margin: f64) -> Self {
        self.margin = margin.max(0.0);
        self
    }

    /// The horizon a gain is counted over, in windows like the last: how long the autopilot
    /// expects the workload to stay as it is. Default: 4.
    pub fn with_horizon_windows(mut self, windows: f64) -> Self {
        self.horizon_windows = windows.max(0.0);
        self
    }

    /// How many decisions in a row must predict a candidate worth a switch (at least
    /// `min_gain` faster) before it is switched to (hysteresis: a window that looks different
    /// once does not move the tree). Default: 2.
    pub fn with_confirmations(mut self, decisions: usize) -> Self {
        self.confirmations = decisions.max(1);
        self
    }

    /// No switch within this many seconds of the last one. Default: 60.
    pub fn with_min_seconds_between_switches(mut self, seconds: f64) -> Self {
        self.min_seconds_between_switches = seconds.max(0.0);
        self
    }

    /// Handover bytes allowed in any hour (predicted, counting the switch being decided).
    /// Default: 4 GiB.
    pub fn with_handover_bytes_per_hour(mut self, bytes: u64) -> Self {
        self.handover_bytes_per_hour = bytes;
        self
    }

    /// The most of the time the advisor may take: a window lasts at least the last advice's
    /// time over this share, so advising takes no more than this share of a core, whatever the
    /// window settings. One window is exempt: the one after a decision that found a candidate
    /// worth a switch but not yet confirmed ([`AutopilotOptions::with_confirmations`]) closes on
    /// the schedule alone, so a switch the workload calls for waits one window, not one window
    /// twenty advices long; it is never two in a row, so advising takes at most about twice the
    /// share. Default: 0.05.
    pub fn with_max_advice_share(mut self, share: f64) -> Self {
        self.max_advice_share = share.clamp(1e-6, 1.0);
        self
    }

    /// Whether a window with `user_bytes` written, `ops` operations, open for `seconds`, is
    /// complete.
    pub fn window_is_due(&self, user_bytes: u64, ops: u64, seconds: f64) -> bool {
        ops >= self.min_window_ops
            && (user_bytes >= self.every_bytes
                || seconds >= self.every_seconds
                || (self.every_ops > 0 && ops >= self.every_ops))
    }
}

/// What a decision did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// The current policy stays.
    Keep,
    /// The tree is handed to this specification.
    Switch {
        /// The new policy's specification.
        to: String,
    },
}

/// One decision of the autopilot, with everything it was based on: the engine records each in
/// its manifest, and `strata inspect --history` prints them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Seconds since the database opened (the pilot's clock).
    pub at_seconds: f64,
    /// The workload of the window judged.
    pub window: WorkloadWindow,
    /// The policy that ran in it.
    pub current: String,
    /// The best candidates, best first, and the current one (at most [`Decision::KEPT`]).
    pub candidates: Vec<Prediction>,
    /// Seconds the advisor took to predict (its CPU time, on the autopilot's thread).
    #[serde(default)]
    pub advice_seconds: f64,
    /// What was done.
    pub action: Action,
    /// Why, in a sentence.
    pub reason: String,
}

impl Decision {
    /// Candidates a decision keeps: the best few and the current one.
    pub const KEPT: usize = 4;

    /// The policy a switch names, built from its specification (`None` when the decision keeps
    /// the policy): what the engine and the simulator hand their trees to.
    pub fn switch_policy(&self) -> Option<Result<Arc<dyn CompactionPolicy>, String>> {
        let Action::Switch { to } = &self.action else {
            return None;
        };
        Some(
            to.parse::<PolicySpec>()
                .and_then(|spec| build_policy(&spec))
                .map_err(|e| format!("the autopilot's advisor named {to:?}: {e}")),
        )
    }

    /// One line: the action and its reason.
    pub fn summary(&self) -> String {
        match &self.action {
            Action::Keep => format!("keep {}: {}", self.current, self.reason),
            Action::Switch { to } => format!("switch {} -> {to}: {}", self.current, self.reason),
        }
    }
}

/// The autopilot's memory between decisions: the candidates that have been worth a switch and
/// for how many decisions in a row, the switches of the last hour, and what the last advice
/// cost.
#[derive(Clone, Debug)]
pub struct Pilot {
    options: AutopilotOptions,
    /// Seconds the last advice took.
    last_advice_seconds: f64,
    /// The next window confirms a candidate the last decision found worth a switch: it closes
    /// on the schedule alone ([`AutopilotOptions::with_max_advice_share`]).
    confirming: bool,
    /// Candidates predicted worth a switch, and in how many decisions in a row.
    streaks: HashMap<String, usize>,
    /// Switches of the last hour: when, and their predicted handover bytes.
    switches: VecDeque<(f64, u64)>,
}

impl Pilot {
    /// A pilot that has decided nothing yet.
    pub fn new(options: AutopilotOptions) -> Self {
        Self {
            options,
            last_advice_seconds: 0.0,
            confirming: false,
            streaks: HashMap::new(),
            switches: VecDeque::new(),
        }
    }

    /// Its options.
    pub fn options(&self) -> &AutopilotOptions {
        &self.options
    }

    /// Whether a window is complete ([`AutopilotOptions::window_is_due`]) and has lasted long
    /// enough for the last advice's time to stay within
    /// [`AutopilotOptions::with_max_advice_share`] of it (unless it is a window that confirms a
    /// switch).
    pub fn window_is_due(&self, user_bytes: u64, ops: u64, seconds: f64) -> bool {
        self.options.window_is_due(user_bytes, ops, seconds)
            && (self.confirming
                || seconds * self.options.max_advice_share >= self.last_advice_seconds)
    }

    /// Asks the advisor about `request` at `now` (seconds) and decides.
    pub fn advise_and_decide(&mut self, now: f64, request: &AdviceRequest<'_>) -> Decision {
        let started = std::time::Instant::now();
        let predictions = self.options.advisor.predict(request);
        let advice_seconds = started.elapsed().as_secs_f64();
        self.last_advice_seconds = advice_seconds;
        let mut decision = self.decide(now, request.window, request.current, predictions);
        decision.advice_seconds = advice_seconds;
        decision
    }

    /// The decision on a window given the advisor's `predictions` (or its error).
    pub fn decide(
        &mut self,
        now: f64,
        window: &WorkloadWindow,
        current: &str,
        predictions: Result<Vec<Prediction>, String>,
    ) -> Decision {
        // Never two short windows in a row.
        let confirmed_last = std::mem::take(&mut self.confirming);
        let mut decision = Decision {
            at_seconds: now,
            window: window.clone(),
            current: current.to_string(),
            candidates: Vec::new(),
            advice_seconds: 0.0,
            action: Action::Keep,
            reason: String::new(),
        };
        let mut predictions = match predictions {
            Ok(p) => p,
            Err(e) => {
                self.streaks.clear();
                decision.reason = format!("the advisor failed: {e}");
                return decision;
            }
        };
        predictions.retain(|p| p.ns_per_op.is_finite() && p.ns_per_op > 0.0);
        predictions.sort_by(|a, b| a.ns_per_op.total_cmp(&b.ns_per_op));
        let Some(here) = predictions.iter().find(|p| p.spec == current).cloned() else {
            self.streaks.clear();
            decision.candidates = predictions.into_iter().take(Decision::KEPT).collect();
            decision.reason = "the advisor did not predict the current policy".to_string();
            return decision;
        };
        let best = predictions[0].clone();
        decision.candidates = predictions
            .iter()
            .take(Decision::KEPT - 1)
            .cloned()
            .collect();
        if !decision.candidates.iter().any(|p| p.spec == current) {
            decision.candidates.push(here.clone());
        }
        // Every candidate predicted at least `min_gain` faster, fastest first, counts one more
        // window in a row; every other candidate's count starts over.
        let o = &self.options;
        let share = |p: &Prediction| (here.ns_per_op - p.ns_per_op) / here.ns_per_op;
        let faster: Vec<&Prediction> = predictions
            .iter()
            .filter(|p| p.spec != current && share(p) >= o.min_gain)
            .collect();
        self.streaks
            .retain(|spec, _| faster.iter().any(|p| p.spec == *spec));
        for p in &faster {
            *self.streaks.entry(p.spec.clone()).or_default() += 1;
        }
        if best.spec == current {
            decision.reason = format!("it is predicted best ({:.0} ns/op)", here.ns_per_op);
            return decision;
        }
        let Some(leader) = faster.first() else {
            decision.reason = format!(
                "{} is predicted {:.1}% faster, under the {:.0}% worth a switch",
                best.spec,
                100.0 * share(&best),
                100.0 * o.min_gain
            );
            return decision;
        };
        // The fastest candidate that has been worth a switch for `confirmations` windows in a
        // row: near-equal candidates trading the first place do not reset the count.
        let confirmed = faster
            .iter()
            .find(|p| self.streaks.get(&p.spec).copied().unwrap_or(0) >= o.confirmations);
        let Some(&pick) = confirmed else {
            decision.reason = format!(
                "{} is predicted {:.1}% faster; waiting for {} decisions in a row ({} so far)",
                leader.spec,
                100.0 * share(leader),
                o.confirmations,
                self.streaks.get(&leader.spec).copied().unwrap_or(0)
            );
            self.confirming = !confirmed_last;
            return decision;
        };
        let pick = pick.clone();
        let saving = here.ns_per_op - pick.ns_per_op;
        let horizon_ops = window.operations() as f64 * o.horizon_windows;
        let gain_ns = saving * horizon_ops;
        while self
            .switches
            .front()
            .is_some_and(|&(t, _)| t <= now - 3600.0)
        {
            self.switches.pop_front();
        }
        let spent: u64 = self.switches.iter().map(|&(_, b)| b).sum();
        let last_switch = self.switches.back().map(|&(t, _)| t);
        let refusal = if gain_ns < o.margin * pick.handover_ns {
            Some(format!(
                "{} would save {:.2} s over the horizon, under {}× its handover's {:.2} s",
                pick.spec,
                gain_ns / 1e9,
                o.margin,
                pick.handover_ns / 1e9
            ))
        } else if let Some(t) = last_switch.filter(|&t| now - t < o.min_seconds_between_switches) {
            Some(format!(
                "{} is predicted {:.1}% faster, but the last switch was {:.0} s ago",
                pick.spec,
                100.0 * share(&pick),
                now - t
            ))
        } else if spent + pick.handover_bytes > o.handover_bytes_per_hour {
            Some(format!(
                "{} is predicted {:.1}% faster, but its handover of {} bytes would exceed the \
                 hour's budget ({spent} spent of {})",
                pick.spec,
                100.0 * share(&pick),
                pick.handover_bytes,
                o.handover_bytes_per_hour
            ))
        } else {
            None
        };
        match refusal {
            Some(reason) => decision.reason = reason,
            None => {
                self.streaks.clear();
                self.switches.push_back((now, pick.handover_bytes));
                decision.reason = format!(
                    "predicted {:.0} -> {:.0} ns/op ({:.1}% faster, {} windows in a row); {:.2} s \
                     saved over the horizon against a {:.2} s handover",
                    here.ns_per_op,
                    pick.ns_per_op,
                    100.0 * share(&pick),
                    o.confirmations,
                    gain_ns / 1e9,
                    pick.handover_ns / 1e9
                );
                decision.action = Action::Switch { to: pick.spec };
            }
        }
        decision
    }
}

/// An advisor that always predicts one policy twice as fast as whatever runs (and the policy
/// itself best once it runs), with a handover of a fixed size: for tests of what carries out the
/// pilot's decisions (engine, simulator, tools), where the prediction must not depend on a model.
#[derive(Clone, Debug)]
pub struct PreferPolicy {
    /// The policy predicted best, as a specification (its name is what the current policy is
    /// compared with).
    pub target: String,
    /// Bytes every handover to it is predicted to rewrite.
    pub handover_bytes: u64,
}

impl Advisor for PreferPolicy {
    fn name(&self) -> &str {
        "prefer-policy"
    }

    fn predict(&self, request: &AdviceRequest<'_>) -> Result<Vec<Prediction>, String> {
        let name = |spec: &str| spec.split(':').next().unwrap_or_default().to_string();
        let running = name(request.current) == name(&self.target);
        let prediction = |spec: &str, ns_per_op, handover_bytes| Prediction {
            spec: spec.to_string(),
            ns_per_op,
            handover_bytes,
            handover_ns: 0.0,
        };
        let mut out = vec![prediction(
            request.current,
            if running { 500.0 } else { 1000.0 },
            0,
        )];
        if !running {
            out.push(prediction(&self.target, 500.0, self.handover_bytes));
        }
        Ok(out)
    }
}

/// An advisor that always predicts the specification after the running one's (by name) in
/// `specs` twice as fast, for a handover of nothing, so the pilot switches at every window its
/// rule allows and walks the list: for tests that carry trees through many switches (the crash
/// test, the engine-against-simulator comparison).
#[derive(Clone, Debug)]
pub struct RotatePolicies {
    /// The specifications in the order they are handed the tree; a running policy not among
    /// them hands it to the first.
    pub specs: Vec<String>,
}

impl Advisor for RotatePolicies {
    fn name(&self) -> &str {
        "rotate-policies"
    }

    fn predict(&self, request: &AdviceRequest<'_>) -> Result<Vec<Prediction>, String> {
        let name = |spec: &str| spec.split(':').next().unwrap_or_default().to_string();
        let running = name(request.current);
        let next = match self.specs.iter().position(|s| name(s) == running) {
            Some(at) => &self.specs[(at + 1) % self.specs.len()],
            None => self.specs.first().ok_or("no policies to rotate through")?,
        };
        let prediction = |spec: &str, ns_per_op| Prediction {
            spec: spec.to_string(),
            ns_per_op,
            handover_bytes: 0,
            handover_ns: 0.0,
        };
        Ok(vec![
            prediction(request.current, 1000.0),
            prediction(next, 500.0),
        ])
    }
}

#[cfg(test)]
mod tests;
