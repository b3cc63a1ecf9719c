//! Step 4: the partitioned merges below level X. A *round* merges levels X..z into z one piece
//! at a time, in key order; with `partial_last_level` the last level is instead fed by partial
//! merges of one piece of L−1 at a time, the piece with the most L−1 data per last-level byte.

use super::{Layout, Shape, Spooky, NAME};
use crate::error::PolicyError;
use crate::pieces::{Pieces, Placement};
use crate::plan::{OutputRun, Plan, PlanAction, PlanOutput, Priority};
use serde::{Deserialize, Serialize};
use strata_meta::{format_key, format_size, parse_key, Bytes, Version};

/// Persisted state: the partitioned merge in progress, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpookyState {
    /// The round in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<Round>,
}

/// A partitioned merge in progress: one plan per piece, in key order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Round {
    /// The highest level merged down (X, or L for a tiered level-count change).
    pub from: usize,
    /// The level written (z).
    pub into: usize,
    /// The level whose oldest run's table boundaries define the pieces.
    pub partition_level: usize,
    /// Smallest key of the next piece to consider, as `strata_meta::format_key` writes it;
    /// absent before the first piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

impl Round {
    /// A round from level `from` into `into`, partitioned by `partition_level`, before its
    /// first piece.
    pub(super) fn starting(from: usize, into: usize, partition_level: usize) -> Self {
        Round {
            from,
            into,
            partition_level,
            next: None,
        }
    }

    /// The position: the smallest key of the next piece to consider.
    fn cursor(&self) -> Result<Option<Bytes>, PolicyError> {
        self.next
            .as_deref()
            .map(|key| {
                parse_key(key).map_err(|reason| PolicyError::BadState {
                    policy: NAME,
                    state: key.to_string(),
                    reason,
                })
            })
            .transpose()
    }
}

/// The pieces a version is partitioned into: by the oldest run of the round's partition level
/// (the last level when no round runs), with the round's position as one more boundary, so that
/// nothing written during a round straddles the pieces it has already merged.
pub(super) fn pieces(
    version: &Version,
    round: Option<&Round>,
    last: usize,
) -> Result<Pieces, PolicyError> {
    let level = round.map_or(last, |r| r.partition_level);
    let cursor = round.map(Round::cursor).transpose()?.flatten();
    Ok(Pieces::of(version, level, cursor))
}

impl Spooky {
    /// The deepest level a round writes: the last level, or L−1 when the last level is fed by
    /// partial merges.
    pub(super) fn rounds_reach(&self, shape: &Shape) -> usize {
        if self.partial_last_level {
            shape.last - 1
        } else {
            shape.last
        }
    }

    /// Step 4: start a round when level X reaches its capacity.
    pub(super) fn start_round(
        &self,
        version: &Version,
        shape: &Shape,
    ) -> Result<Option<Plan>, PolicyError> {
        let (x, reach) = (shape.x, self.rounds_reach(shape));
        let n_x = version.level(x).size();
        if x >= reach || (n_x as f64) < shape.caps[x] {
            return Ok(None);
        }
        let mut into = reach;
        if self.layout == Layout::Leveled {
            let mut total = n_x;
            for z in x + 1..reach {
                total += version.level(z).size();
                if (total as f64) < shape.caps[z] {
                    into = z;
                    break;
                }
            }
        }
        let round = Round::starting(x, into, shape.last);
        let why = format!(
            "L{x} holds {} >= its capacity {}",
            format_size(n_x),
            format_size(shape.caps[x] as u64)
        );
        self.round_plan(version, shape, round, &why)
    }

    /// The plan for the next piece of `round` (or the state update that ends it).
    pub(super) fn round_plan(
        &self,
        version: &Version,
        shape: &Shape,
        round: Round,
        why: &str,
    ) -> Result<Option<Plan>, PolicyError> {
        let pieces = pieces(version, Some(&round), shape.last)?;
        let n = pieces.count();
        // Levels whose tables the round moves down, and whether the target's run is merged into
        // (leveled) or written beside (tiered).
        let into_is_leveled = !(self.layout == Layout::Tiered && round.into >= shape.last);
        let input_levels = if into_is_leveled {
            round.from..=round.into
        } else {
            // Into a run being written: the levels above it, or its own level when the runs of
            // the last level merge in place (the run being written holds only merged pieces).
            round.from..=round.into.saturating_sub(1).max(round.from)
        };
        let mut has_new = vec![false; n];
        for t in version.level(round.from).tables() {
            let (a, b) = pieces.span(&t.smallest, &t.largest);
            has_new[a..=b].iter_mut().for_each(|p| *p = true);
        }
        let start = round.cursor()?.map_or(0, |key| pieces.of_key(&key));
        let Some(first) = (start..n).find(|&p| has_new[p]) else {
            let state = self.store(&SpookyState { round: None })?;
            return Ok(Some(Plan {
                action: PlanAction::UpdateState,
                inputs: Vec::new(),
                output: None,
                policy_state: Some(state),
                reason: format!(
                    "no piece after the last one merged holds L{} data: the round into L{} ends",
                    round.from, round.into
                ),
                priority: Priority::Normal,
            }));
        };
        let placement = Placement::of(version, input_levels.clone(), &pieces);
        let (lo, mut hi) = placement.close(first, first);
        let into_last = round.into == shape.last && into_is_leveled;
        if into_last {
            hi = placement.coalesce(lo, hi, n, shape.file_max);
        }
        let target_runs = version.level(round.into).runs();
        let run = if into_is_leveled {
            match target_runs {
                [only] => OutputRun::Existing(only.id()),
                _ => OutputRun::New,
            }
        } else if round.next.is_some() {
            // The run the round's first piece created: run ids only grow, and nothing else
            // writes a new run into this level while the round lasts.
            match target_runs.iter().max_by_key(|r| r.id()) {
                Some(newest) => OutputRun::Existing(newest.id()),
                None => OutputRun::New,
            }
        } else {
            OutputRun::New
        };
        let split = (round.into >= shape.last).then_some(shape.file_max);
        let boundaries = if into_last {
            Vec::new()
        } else {
            pieces.inner(lo, hi)
        };
        let more = (hi + 1..n).any(|p| has_new[p]);
        let next_round = more.then(|| Round {
            next: Some(format_key(&pieces.bounds[hi])),
            ..round.clone()
        });
        let state = self.store(&SpookyState { round: next_round })?;
        Ok(Some(Plan {
            action: PlanAction::Merge,
            inputs: placement.inputs(lo, hi),
            output: Some(PlanOutput {
                level: round.into,
                run,
                cut: self.cut(boundaries, split),
                bloom_bits_per_key: self.bloom_bits_per_key,
                compression: None,
                preserve_blocks: None,
            }),
            policy_state: Some(state),
            reason: format!(
                "{why}; partitioned merge L{}..L{} into L{}, keys {}{}",
                round.from,
                input_levels.end(),
                round.into,
                pieces.describe(lo, hi),
                if more {
                    ""
                } else {
                    " (the last piece with new data)"
                }
            ),
            priority: Priority::Normal,
        }))
    }

    /// With `partial_last_level`, once L−1 reaches its capacity: merge the piece whose L−1
    /// tables are largest against its last-level table into the last level, so that L−1 stays
    /// full and each merge moves the densest piece (the least rewritten per byte moved), as
    /// partial merges pick by least overlap. Levels X..L−1 are cut at the last level's table
    /// boundaries, so a piece's L−1 tables meet one last-level table.
    pub(super) fn partial_last_plan(&self, version: &Version, shape: &Shape) -> Option<Plan> {
        let (last, upper) = (shape.last, shape.last.checked_sub(1)?);
        if !self.partial_last_level || upper < shape.x.max(1) {
            return None;
        }
        let n_upper = version.level(upper).size();
        if (n_upper as f64) < shape.caps[upper] {
            return None;
        }
        let pieces = Pieces::of(version, last, None);
        let n = pieces.count();
        let placement = Placement::of(version, upper..=last, &pieces);
        let (mut moved, mut kept) = (vec![0u64; n], vec![0u64; n]);
        for t in placement.tables() {
            let bytes = if t.level == upper {
                &mut moved
            } else {
                &mut kept
            };
            bytes[t.first] += t.table.size;
        }
        // The densest piece: most L−1 bytes per last-level byte; ties go to the smallest key.
        let densest = (0..n).filter(|&p| moved[p] > 0).max_by(|&a, &b| {
            let density = |p: usize| moved[p] as f64 / (kept[p] + 1) as f64;
            density(a).total_cmp(&density(b)).then(b.cmp(&a))
        })?;
        let (lo, hi) = placement.close(densest, densest);
        let hi = placement.coalesce(lo, hi, n, shape.file_max);
        let run = match version.level(last).runs() {
            [only] => OutputRun::Existing(only.id()),
            _ => OutputRun::New,
        };
        Some(Plan {
            action: PlanAction::Merge,
            inputs: placement.inputs(lo, hi),
            output: Some(PlanOutput {
                level: last,
                run,
                cut: self.cut(Vec::new(), Some(shape.file_max)),
                bloom_bits_per_key: self.bloom_bits_per_key,
                compression: None,
                preserve_blocks: None,
            }),
            policy_state: None,
            reason: format!(
                "L{upper} holds {} >= its capacity {}: partial merge of its densest piece, keys {} \
                 ({} of L{upper} against {} of L{last})",
                format_size(n_upper),
                format_size(shape.caps[upper] as u64),
                pieces.describe(lo, hi),
                format_size(moved[lo..=hi].iter().sum()),
                format_size(kept[lo..=hi].iter().sum()),
            ),
            priority: Priority::Normal,
        })
    }
}
