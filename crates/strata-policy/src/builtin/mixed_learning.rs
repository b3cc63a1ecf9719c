//! Mixed's online learning of its thresholds τ_i and β (the partial-merge paper's §1.4), as a
//! state machine the policy carries in its persisted state and advances with every plan it
//! picks. Nothing here reads a clock or the data: costs are estimated from the plans themselves.
//!
//! - **Cost** of a merge into level j ≥ 1: the bytes it wrote, read from the version the next
//!   plan is picked from (the merge's state travels with its result, so that version holds its
//!   output): the growth of each level from 1 down plus what the merge took from it. Its inputs'
//!   bytes would overstate a merge whose tombstones cancel puts, and differently for whole and
//!   partial merges into the bottom. Moves cost nothing. **Inflow:** bytes merged from level 0
//!   into level 1, the paper's "records merged into L1".
//! - **Steady state:** the live-record estimate (puts less tombstones, summed over tables) moves
//!   by at most 5% while `K_{h−2}` bytes flow into level 1. A fill (inserts only) grows it by
//!   about the inflow, so learning waits for the 50/50 mix.
//! - **τ_t** (2 ≤ t ≤ h − 2), top-down: merges out of level t are forced whole, so each cycle of
//!   level t runs from empty to full; one cycle per candidate τ = 0, 0.1, …, 1 (the paper's
//!   domain, scanned linearly since it is small), stopping at the first candidate costlier than
//!   the one before. C(τ) = cost of merges into levels 1..=t over inflow, for the cycle.
//! - **β**, last: β = false first, from its first partial merge into the bottom (level h − 2 is
//!   full from then on): `K_{h−2}` bytes of inflow to warm up, then as much measured; then
//!   β = true over one cycle of level h − 2, between two whole merges into the bottom, the first
//!   of which comes as soon as that level, left full, overflows. This order needs about two and a
//!   half cycles where the other needs four (a wait for a cycle to start, the cycle, a refill, a
//!   warm-up, a measurement). C counts merges into every level.
//! - **Re-learning:** when the tree's height changes, or the bottom level's size moves by more
//!   than 25% from what it was when learning ended (the optimum depends on it). The live-record
//!   estimate is not used here: tombstones whose puts were cancelled above the bottom count
//!   against it until they reach the bottom, so it swings by more than that within a cycle of
//!   whole merges (seen in the engine's format at 200 MiB). β keeps its learned value while it is
//!   learned again. A shift of the key distribution alone at the same size is not detected.

use serde::{Deserialize, Serialize};
use strata_meta::Version;

use crate::plan::{Plan, PlanAction};

/// Candidates for τ: 0, 0.1, …, 1.
const THRESHOLD_STEPS: usize = 10;
/// Steady when the live estimate moves by at most this fraction over a window.
const STEADY_CHANGE: f64 = 0.05;
/// Re-learn when the bottom level's size moves by more than this fraction from learning's end.
const RELEARN_CHANGE: f64 = 0.25;

/// What the learner is doing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Waiting for a steady state.
    WaitSteady {
        /// Inflow and live estimate at the window's start.
        mark: Option<(u64, i64)>,
    },
    /// Learning τ of `level`, trying candidate `step` / 10.
    Threshold {
        /// The level.
        level: usize,
        /// Candidate index (τ = step / 10).
        step: usize,
        /// Inflow and cost at the start of the running cycle, once one has started.
        mark: Option<(u64, u64)>,
    },
    /// Learning β, trying `full` (false first, then true).
    Bottom {
        /// The candidate.
        full: bool,
        /// Inflow and cost at the start of the measurement (or of β = false's warm-up), once it
        /// has started.
        mark: Option<(u64, u64)>,
        /// β = false: the warm-up is over and `mark` starts the measurement.
        #[serde(default)]
        warmed: bool,
    },
    /// Done: the learned values are in use.
    Done,
}

/// One measurement: the parameter, its candidate value and the cost found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// `tau2`, `tau3`, … or `beta`.
    pub parameter: String,
    /// The candidate (β: 1 for true, 0 for false).
    pub value: f64,
    /// Cost per byte of inflow.
    pub cost: f64,
    /// Inflow the measurement covered, in bytes.
    pub inflow: u64,
}

/// Mixed's learning state (part of the policy's persisted state).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Learner {
    /// Tree height (levels including level 0) the values are learned for.
    pub height: usize,
    /// Learned τ_2, τ_3, … so far.
    pub thresholds: Vec<f64>,
    /// Learned β, once known.
    pub bottom_full: Option<bool>,
    /// What it is doing.
    pub stage: Stage,
    /// Bytes merged from level 0 into level 1 since the learner was created.
    pub inflow: u64,
    /// Bytes written by merges into each level (index = level) since then.
    pub cost: Vec<u64>,
    /// The last merge, whose output the next observation measures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingMerge>,
    /// Every measurement, in order.
    pub measurements: Vec<Measurement>,
    /// Flushes and inflow when learning started and ended (the learning time).
    pub started_at_flush: Option<u64>,
    /// See `started_at_flush`.
    pub finished_at_flush: Option<u64>,
    /// Inflow when learning started.
    pub started_at_inflow: u64,
    /// Inflow when learning ended.
    pub finished_at_inflow: u64,
    /// Bytes of the bottom level when learning ended.
    pub bottom_bytes_at_finish: u64,
}

/// A merge picked but not yet measured: the sizes of the levels when it was picked and the bytes
/// it took from each (index = level), both in bytes of the tables' own files
/// ([`strata_meta::Level::file_bytes`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingMerge {
    /// Output level.
    pub into: usize,
    /// Level file bytes when it was picked.
    pub sizes: Vec<u64>,
    /// Input file bytes per level.
    pub taken: Vec<u64>,
}

/// The parameters a merge decision uses now.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// τ for each level (index = level; levels 0 and 1 unused).
    pub thresholds: Vec<f64>,
    /// β.
    pub bottom_full: bool,
    /// A level whose merges out of it are forced whole (learning its τ).
    pub forced_full_out_of: Option<usize>,
}

/// Live-record estimate of a version: puts less tombstones, over every table.
pub fn live_estimate(version: &Version) -> i64 {
    version
        .tables()
        .map(|(_, _, t)| t.entries as i64 - 2 * t.tombstones as i64)
        .sum()
}

impl Learner {
    /// A learner for a tree of `height` levels, waiting for a steady state.
    pub fn new(height: usize) -> Self {
        Learner {
            height,
            thresholds: Vec::new(),
            bottom_full: None,
            stage: Stage::WaitSteady { mark: None },
            inflow: 0,
            cost: Vec::new(),
            pending: None,
            measurements: Vec::new(),
            started_at_flush: None,
            finished_at_flush: None,
            started_at_inflow: 0,
            finished_at_inflow: 0,
            bottom_bytes_at_finish: 0,
        }
    }

    fn cost_into(&self, levels: std::ops::RangeInclusive<usize>) -> u64 {
        levels.filter_map(|l| self.cost.get(l)).sum()
    }

    /// The parameters for the next decision: learned values, the candidate under measurement,
    /// and `defaults` (τ per level, β) for what is not learned yet.
    pub fn params(&self, default_threshold: impl Fn(usize) -> f64, default_bottom: bool) -> Params {
        let levels = self.height.max(3);
        let mut thresholds: Vec<f64> = (0..levels).map(&default_threshold).collect();
        for (i, t) in self.thresholds.iter().enumerate() {
            if let Some(slot) = thresholds.get_mut(i + 2) {
                *slot = *t;
            }
        }
        let mut params = Params {
            thresholds,
            bottom_full: self.bottom_full.unwrap_or(default_bottom),
            forced_full_out_of: None,
        };
        match &self.stage {
            Stage::Threshold { level, step, .. } => {
                if let Some(slot) = params.thresholds.get_mut(*level) {
                    *slot = *step as f64 / THRESHOLD_STEPS as f64;
                }
                params.forced_full_out_of = Some(*level);
            }
            Stage::Bottom { full, .. } => params.bottom_full = *full,
            Stage::WaitSteady { .. } | Stage::Done => {}
        }
        params
    }

    /// What the learner is doing, for reasons.
    pub fn describe(&self) -> String {
        match &self.stage {
            Stage::WaitSteady { .. } => "learning: waiting for a steady state".to_string(),
            Stage::Threshold { level, step, mark } => format!(
                "learning τ_{level}: trying {:.1}{}",
                *step as f64 / THRESHOLD_STEPS as f64,
                if mark.is_some() {
                    ""
                } else {
                    " (cycle not started)"
                }
            ),
            Stage::Bottom { full, mark, .. } => format!(
                "learning β: trying {full}{}",
                if mark.is_some() { "" } else { " (not started)" }
            ),
            Stage::Done => format!(
                "learned τ = {:?}, β = {}",
                self.thresholds,
                self.bottom_full.map_or("-".to_string(), |b| b.to_string())
            ),
        }
    }

    /// Advances with `plan`, picked from `version` (a tree of `height` levels) with the
    /// parameters [`Learner::params`] gave; `capacity` gives a level's capacity in bytes.
    pub fn observe(
        &mut self,
        version: &Version,
        plan: &Plan,
        height: usize,
        capacity: impl Fn(usize) -> u64,
    ) {
        if let Some(p) = self.pending.take() {
            // What the last merge wrote: every level's growth plus what it took from there, in
            // bytes of the tables' own files (blocks a merge kept elsewhere cost no write).
            let written: u64 = (1..version.num_levels())
                .map(|l| {
                    let before = p.sizes.get(l).copied().unwrap_or(0);
                    let taken = p.taken.get(l).copied().unwrap_or(0);
                    (version.level(l).file_bytes() + taken).saturating_sub(before)
                })
                .sum();
            if self.cost.len() <= p.into {
                self.cost.resize(p.into + 1, 0);
            }
            self.cost[p.into] += written;
        }
        if height != self.height {
            // A new level changes what every threshold means: start over.
            *self = Learner {
                inflow: self.inflow,
                cost: std::mem::take(&mut self.cost),
                ..Learner::new(height)
            };
        }
        let Some(output) = &plan.output else {
            return;
        };
        let into = output.level;
        let from_above: u64 = plan
            .inputs
            .iter()
            .filter(|i| i.level + 1 == into)
            .flat_map(|i| &i.tables)
            .filter_map(|&id| version.table(id))
            .map(|t| t.size)
            .sum();
        if into == 1 {
            self.inflow += from_above;
        }
        if plan.action == PlanAction::Merge && into >= 1 {
            let mut taken = vec![0u64; version.num_levels()];
            for input in &plan.inputs {
                for t in input.tables.iter().filter_map(|&id| version.table(id)) {
                    if let Some(slot) = taken.get_mut(input.level) {
                        *slot += t.file_bytes();
                    }
                }
            }
            self.pending = Some(PendingMerge {
                into,
                sizes: (0..version.num_levels())
                    .map(|l| version.level(l).file_bytes())
                    .collect(),
                taken,
            });
        }
        // Whether the plan empties level `into - 1` into `into`.
        let whole = into >= 1 && {
            let above = version.level(into - 1);
            let taken: usize = plan
                .inputs
                .iter()
                .filter(|i| i.level + 1 == into)
                .map(|i| i.tables.len())
                .sum();
            taken > 0 && taken == above.table_count()
        };
        let bottom = height - 1;
        let flushes = version.flushes();
        match self.stage.clone() {
            Stage::WaitSteady { mark } => {
                if height < 3 {
                    return;
                }
                let live = live_estimate(version);
                let window = capacity(height - 2);
                match mark {
                    None => {
                        self.stage = Stage::WaitSteady {
                            mark: Some((self.inflow, live)),
                        }
                    }
                    Some((start, start_live)) if self.inflow - start >= window => {
                        let change = (live - start_live).unsigned_abs() as f64;
                        if change <= STEADY_CHANGE * live.max(1) as f64 {
                            self.started_at_flush = Some(flushes);
                            self.started_at_inflow = self.inflow;
                            self.stage = self.first_stage(height);
                        } else {
                            self.stage = Stage::WaitSteady {
                                mark: Some((self.inflow, live)),
                            };
                        }
                    }
                    Some(_) => {}
                }
            }
            Stage::Threshold { level, step, mark } => {
                // A cycle of `level` runs between two whole merges out of it.
                if !(whole && into == level + 1) {
                    return;
                }
                let now = (self.inflow, self.cost_into(1..=level));
                let Some((start_inflow, start_cost)) = mark else {
                    self.stage = Stage::Threshold {
                        level,
                        step,
                        mark: Some(now),
                    };
                    return;
                };
                let value = step as f64 / THRESHOLD_STEPS as f64;
                let parameter = format!("tau{level}");
                let previous = self
                    .measurements
                    .last()
                    .filter(|m| m.parameter == parameter)
                    .cloned();
                let cost = self.record(parameter, value, (start_inflow, start_cost), now);
                let chosen = match previous {
                    Some(p) if cost > p.cost => Some(p.value),
                    _ if step == THRESHOLD_STEPS => Some(value),
                    _ => None,
                };
                match chosen {
                    Some(tau) => {
                        self.thresholds.push(tau);
                        self.stage = if level + 1 < bottom {
                            Stage::Threshold {
                                level: level + 1,
                                step: 0,
                                mark: None,
                            }
                        } else {
                            Stage::Bottom {
                                full: false,
                                mark: None,
                                warmed: false,
                            }
                        };
                    }
                    // This cycle's end starts the next candidate's.
                    None => {
                        self.stage = Stage::Threshold {
                            level,
                            step: step + 1,
                            mark: Some(now),
                        }
                    }
                }
            }
            Stage::Bottom {
                full: false,
                mark,
                warmed,
            } => {
                let now = (self.inflow, self.cost_into(1..=bottom));
                let Some((start_inflow, start_cost)) = mark else {
                    // β = false starts once the level above the bottom is full, which its first
                    // partial merge into the bottom shows.
                    if into == bottom && !whole && plan.action == PlanAction::Merge {
                        self.stage = Stage::Bottom {
                            full: false,
                            mark: Some(now),
                            warmed: false,
                        };
                    }
                    return;
                };
                // No cycle here: the level above stays full. Its capacity's worth of inflow
                // warms up (partial merges live on the skew they build in the level they read,
                // which a level just filled does not have yet: measured at once, β = false cost
                // 9.17 bytes per byte of inflow at 800 MiB where ChooseBest's steady state
                // costs about 6.5), then as much again is measured.
                let inflow = now.0 - start_inflow;
                if inflow < capacity(bottom - 1) {
                    return;
                }
                if !warmed {
                    self.stage = Stage::Bottom {
                        full: false,
                        mark: Some(now),
                        warmed: true,
                    };
                    return;
                }
                self.record("beta".to_string(), 0.0, (start_inflow, start_cost), now);
                self.stage = Stage::Bottom {
                    full: true,
                    mark: None,
                    warmed: false,
                };
            }
            Stage::Bottom {
                full: true, mark, ..
            } => {
                // A cycle of the level above the bottom runs between two whole merges of it
                // into the bottom; the first comes as soon as that level, full after β = false,
                // overflows.
                if !(whole && into == bottom) {
                    return;
                }
                let now = (self.inflow, self.cost_into(1..=bottom));
                let Some((start_inflow, start_cost)) = mark else {
                    self.stage = Stage::Bottom {
                        full: true,
                        mark: Some(now),
                        warmed: false,
                    };
                    return;
                };
                let cost = self.record("beta".to_string(), 1.0, (start_inflow, start_cost), now);
                let partial_cost = self
                    .measurements
                    .iter()
                    .rev()
                    .find(|m| m.parameter == "beta" && m.value == 0.0)
                    .map_or(f64::INFINITY, |m| m.cost);
                self.bottom_full = Some(cost <= partial_cost);
                self.stage = Stage::Done;
                self.finished_at_flush = Some(flushes);
                self.finished_at_inflow = self.inflow;
                self.bottom_bytes_at_finish = version.level(bottom).size();
            }
            Stage::Done => {
                let size = version.level(bottom).size();
                let change = size.abs_diff(self.bottom_bytes_at_finish) as f64;
                if change > RELEARN_CHANGE * self.bottom_bytes_at_finish.max(1) as f64 {
                    *self = Learner {
                        inflow: self.inflow,
                        cost: std::mem::take(&mut self.cost),
                        measurements: std::mem::take(&mut self.measurements),
                        bottom_full: self.bottom_full,
                        ..Learner::new(height)
                    };
                }
            }
        }
    }

    /// Records the cost per byte of inflow between `start` and `now` (inflow, cost) as a
    /// measurement of `parameter` at `value`, and returns it.
    fn record(&mut self, parameter: String, value: f64, start: (u64, u64), now: (u64, u64)) -> f64 {
        let inflow = now.0 - start.0;
        let cost = (now.1 - start.1) as f64 / inflow.max(1) as f64;
        self.measurements.push(Measurement {
            parameter,
            value,
            cost,
            inflow,
        });
        cost
    }

    fn first_stage(&self, height: usize) -> Stage {
        if height >= 4 {
            Stage::Threshold {
                level: 2,
                step: 0,
                mark: None,
            }
        } else {
            Stage::Bottom {
                full: false,
                mark: None,
                warmed: false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helpers::merge_levels;
    use crate::plan::CutRule;

    fn version(text: &str) -> Version {
        Version::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_merge_costs_what_it_wrote_not_what_it_read() {
        // L1 (10 MiB) merges whole into L2 (20 MiB); its tombstones cancel 5 MiB of puts, so
        // the next version holds 25 MiB in L2 and the merge wrote 25 MiB, not 30.
        let before = version(
            "L1:\n  run 1:\n    table 1 [a, m] size=10MiB\nL2:\n  run 2:\n    table 2 [a, z] size=20MiB\n",
        );
        let plan = merge_levels(&before, 1..=1, 2, true, CutRule::single_table(), 0.0);
        let mut learner = Learner::new(3);
        learner.observe(&before, &plan, 3, |_| 1 << 30);
        assert!(
            learner.cost.iter().all(|&c| c == 0),
            "measured before the result"
        );
        let after = version("L2:\n  run 3:\n    table 3 [a, z] size=25MiB\n");
        let next = merge_levels(&after, 2..=2, 2, true, CutRule::single_table(), 0.0);
        learner.observe(&after, &next, 3, |_| 1 << 30);
        assert_eq!(learner.cost.get(2).copied(), Some(25 << 20));
        assert_eq!(learner.cost.get(1).copied().unwrap_or(0), 0);
    }
}
