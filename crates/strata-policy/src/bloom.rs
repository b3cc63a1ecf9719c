//! Bloom-filter layouts: how many bits per key each output gets.
//!
//! - **Uniform** (the default of most policies): every output gets the policy's
//!   `bloom_bits_per_key`.
//! - **Dynamic** (Vertiorizon §5.4, allocated the way Monkey does): the same average,
//!   `bloom_bits_per_key`, is spread over the levels so that the sum of false-positive rates a
//!   zero-result lookup pays is smallest. A filter is only built when its table is written (a
//!   flush or a compaction, while the data passes through memory); nothing is rebuilt on its own,
//!   so each output gets the bits that are right for the tree it is written into.
//!
//! The allocation. Level j holds O_j bytes in r_j runs; a zero-result lookup probes every run
//! once, so with b_j bits per key at level j it pays Σ r_j·e^(−c·b_j), c = ln²2, against a memory
//! of Σ O_j·b_j (bytes stand in for keys). Minimizing the first with the second fixed at
//! b̄·Σ O_j (Lagrange) gives r_j·c·e^(−c·b_j) = λ·O_j, so a level's false-positive rate is
//! proportional to its run size O_j/r_j, and
//!
//! ```text
//! b_j = b̄ + (1/c) · ( Σ_k (O_k/O)·ln(O_k/r_k) − ln(O_j/r_j) ),   O = Σ_k O_k,
//! ```
//!
//! over the levels that get bits; a level whose b_j comes out negative gets none and the rest is
//! solved again without it. Bits are capped at [`MAX_BITS_PER_KEY`].
//!
//! O_j is the level's *occupancy*: its current bytes once the job in hand is installed (inputs
//! gone, the output projected at its inputs' size), or the bytes the policy expects the level to
//! hold ([`CompactionPolicy::expected_level_bytes`]), whichever is larger. Monkey takes every
//! level at capacity; with full merges a level swings from empty to full, so the current size is
//! what lookups pay for now, and the expected size keeps a level the policy is about to fill from
//! taking bits that its next data will need.

use crate::adjust::OutputAdjustment;
use crate::context::PickContext;
use crate::plan::{FlushPlan, OutputRun, Plan, PlanAction};
use crate::policy::CompactionPolicy;
use strata_meta::Version;

/// The most bits per key an allocation gives one level.
pub const MAX_BITS_PER_KEY: f64 = 64.0;

/// How Bloom bits are spread over levels.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BloomLayout {
    /// Every output gets the policy's bits per key.
    Uniform,
    /// Monkey-style allocation from current and expected occupancy (see the module docs).
    Dynamic,
}

impl BloomLayout {
    /// Parses "uniform" or "dynamic".
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "uniform" => Some(BloomLayout::Uniform),
            "dynamic" => Some(BloomLayout::Dynamic),
            _ => None,
        }
    }

    /// "uniform" or "dynamic".
    pub fn as_str(self) -> &'static str {
        match self {
            BloomLayout::Uniform => "uniform",
            BloomLayout::Dynamic => "dynamic",
        }
    }
}

/// What one level holds for the allocation.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct LevelOccupancy {
    /// Bytes O_j.
    pub bytes: f64,
    /// Runs r_j (at least 1 when `bytes` > 0).
    pub runs: f64,
}

/// Bits per key for each level under an average of `average_bits` per byte of occupancy (see the
/// module docs). Levels with no bytes get 0.
pub fn allocate_bits(levels: &[LevelOccupancy], average_bits: f64) -> Vec<f64> {
    let c = std::f64::consts::LN_2 * std::f64::consts::LN_2;
    let mut bits = vec![0.0; levels.len()];
    if average_bits <= 0.0 {
        return bits;
    }
    let budget: f64 = levels.iter().map(|l| l.bytes.max(0.0)).sum::<f64>() * average_bits;
    let mut active: Vec<usize> = (0..levels.len())
        .filter(|&j| levels[j].bytes > 0.0)
        .collect();
    let log_run = |j: usize| (levels[j].bytes / levels[j].runs.max(1.0)).ln();
    let mut capped: Vec<usize> = Vec::new();
    loop {
        let capped_bytes: f64 = capped.iter().map(|&j| levels[j].bytes).sum();
        let total: f64 = active.iter().map(|&j| levels[j].bytes).sum();
        if active.is_empty() || total <= 0.0 {
            break;
        }
        let mean_log: f64 = active
            .iter()
            .map(|&j| levels[j].bytes / total * log_run(j))
            .sum();
        let base = (budget - capped_bytes * MAX_BITS_PER_KEY) / total;
        for &j in &active {
            bits[j] = base + (mean_log - log_run(j)) / c;
        }
        // Drop the levels below zero first; then cap the ones above the maximum.
        let negative: Vec<usize> = active.iter().copied().filter(|&j| bits[j] < 0.0).collect();
        if !negative.is_empty() {
            for &j in &negative {
                bits[j] = 0.0;
            }
            active.retain(|j| !negative.contains(j));
            continue;
        }
        let over: Vec<usize> = active
            .iter()
            .copied()
            .filter(|&j| bits[j] > MAX_BITS_PER_KEY)
            .collect();
        if over.is_empty() {
            break;
        }
        for &j in &over {
            bits[j] = MAX_BITS_PER_KEY;
        }
        active.retain(|j| !over.contains(j));
        capped.extend(over);
    }
    bits
}

/// The occupancy of every level once a job is installed: `inputs` (level, bytes, whole runs
/// consumed) leave, `output_bytes` arrive at `output_level` (as a new run when `new_run`), and
/// each level holds at least the policy's expected bytes.
fn occupancy_after(
    version: &Version,
    removed: &[(usize, u64, usize)],
    output_level: usize,
    output_bytes: u64,
    new_run: bool,
    expected: &[u64],
) -> Vec<LevelOccupancy> {
    let count = version
        .levels()
        .len()
        .max(output_level + 1)
        .max(expected.len());
    (0..count)
        .map(|j| {
            let level = version.level(j);
            let mut bytes = level.size() as f64;
            let mut runs = level.runs().len() as f64;
            for &(l, b, whole_runs) in removed {
                if l == j {
                    bytes -= b as f64;
                    runs -= whole_runs as f64;
                }
            }
            if j == output_level {
                bytes += output_bytes as f64;
                if new_run {
                    runs += 1.0;
                }
            }
            let bytes = bytes.max(expected.get(j).copied().unwrap_or(0) as f64);
            LevelOccupancy {
                bytes: bytes.max(0.0),
                runs: runs.max(1.0),
            }
        })
        .collect()
}

/// The dynamic layout applied to a policy's outputs (an [`OutputAdjustment`]): each output's
/// bits per key replaced by the allocation for its level, using the bits the inner policy asked
/// for as the average; `bloom_layout=dynamic` is added to the options.
#[derive(Debug)]
pub struct DynamicBits;

impl DynamicBits {
    fn bits_for_plan(
        &self,
        inner: &dyn CompactionPolicy,
        version: &Version,
        plan: &Plan,
    ) -> Option<f64> {
        let output = plan.output.as_ref()?;
        if plan.action != PlanAction::Merge || output.bloom_bits_per_key <= 0.0 {
            return None;
        }
        let mut removed = Vec::new();
        for input in &plan.inputs {
            let run = version.run(input.level, input.run);
            let bytes: u64 = input
                .tables
                .iter()
                .filter_map(|&t| version.table(t))
                .map(|t| t.size)
                .sum();
            let whole = run.is_some_and(|r| r.tables().len() == input.tables.len());
            removed.push((input.level, bytes, usize::from(whole)));
        }
        let output_bytes = plan.input_size(version);
        let expected = inner.expected_level_bytes(version);
        let levels = occupancy_after(
            version,
            &removed,
            output.level,
            output_bytes,
            output.run == OutputRun::New,
            &expected,
        );
        Some(allocate_bits(&levels, output.bloom_bits_per_key)[output.level])
    }
}

impl OutputAdjustment for DynamicBits {
    fn adjust_flush(
        &self,
        inner: &dyn CompactionPolicy,
        version: &Version,
        ctx: &PickContext<'_>,
        plan: &mut FlushPlan,
    ) {
        let average = plan.output.bloom_bits_per_key;
        if average > 0.0 {
            let merged: Vec<(usize, u64, usize)> = plan
                .merge_with
                .iter()
                .filter_map(|&t| version.table(t))
                .map(|t| (plan.output.level, t.size, 0))
                .collect();
            let buffer = ctx.buffer.map_or(0, |b| b.bytes);
            let merged_bytes: u64 = merged.iter().map(|m| m.1).sum();
            let expected = inner.expected_level_bytes(version);
            let levels = occupancy_after(
                version,
                &merged,
                plan.output.level,
                buffer + merged_bytes,
                plan.output.run == OutputRun::New,
                &expected,
            );
            plan.output.bloom_bits_per_key = allocate_bits(&levels, average)[plan.output.level];
        }
    }

    fn adjust_plan(&self, inner: &dyn CompactionPolicy, version: &Version, plan: &mut Plan) {
        if let Some(bits) = self.bits_for_plan(inner, version, plan) {
            if let Some(output) = plan.output.as_mut() {
                output.bloom_bits_per_key = bits;
            }
        }
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        vec![("bloom_layout", BloomLayout::Dynamic.as_str().to_string())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(bytes: f64, runs: f64) -> LevelOccupancy {
        LevelOccupancy { bytes, runs }
    }

    #[test]
    fn equal_levels_share_equally() {
        let bits = allocate_bits(&[level(100.0, 1.0), level(100.0, 1.0)], 10.0);
        assert!((bits[0] - 10.0).abs() < 1e-9 && (bits[1] - 10.0).abs() < 1e-9);
    }

    #[test]
    fn smaller_runs_get_more_bits_and_the_budget_is_kept() {
        // A leveled tree with T = 10: Monkey gives each level ln(10)/ln²2 ≈ 4.79 more bits than
        // the level below it.
        let levels: Vec<LevelOccupancy> = (0..4).map(|i| level(10f64.powi(i), 1.0)).collect();
        let bits = allocate_bits(&levels, 8.0);
        for pair in bits.windows(2) {
            let step = pair[0] - pair[1];
            assert!((step - 10f64.ln() / std::f64::consts::LN_2.powi(2)).abs() < 1e-9);
        }
        let memory: f64 = levels.iter().zip(&bits).map(|(l, b)| l.bytes * b).sum();
        let budget: f64 = levels.iter().map(|l| l.bytes).sum::<f64>() * 8.0;
        assert!((memory - budget).abs() < 1e-6 * budget);
        // And the expected false positives are fewer than with the uniform layout.
        let fp = |b: &[f64]| -> f64 {
            b.iter()
                .map(|&x| (-x * std::f64::consts::LN_2.powi(2)).exp())
                .sum()
        };
        assert!(fp(&bits) < fp(&[8.0; 4]));
    }

    #[test]
    fn tiny_budgets_starve_the_largest_level_first() {
        let levels = [level(1.0, 1.0), level(10.0, 1.0), level(1000.0, 1.0)];
        // At half a bit per key the largest level still gets some (0.39); at 0.05 it gets none
        // and the two small levels share the whole budget.
        assert!(allocate_bits(&levels, 0.5)[2] > 0.0);
        let bits = allocate_bits(&levels, 0.05);
        assert_eq!(bits[2], 0.0);
        assert!(bits[0] > bits[1] && bits[1] > 0.0);
        let memory: f64 = levels.iter().zip(&bits).map(|(l, b)| l.bytes * b).sum();
        assert!((memory - 1011.0 * 0.05).abs() < 1e-6);
    }

    #[test]
    fn runs_of_a_tiered_level_count_separately() {
        // Two levels of the same bytes: the one split in 10 runs has 10× smaller runs, so more
        // bits per key.
        let bits = allocate_bits(&[level(100.0, 10.0), level(100.0, 1.0)], 6.0);
        assert!(bits[0] > bits[1]);
    }

    #[test]
    fn empty_levels_and_no_budget_get_nothing() {
        let bits = allocate_bits(&[level(0.0, 1.0), level(50.0, 1.0)], 7.0);
        assert_eq!(bits[0], 0.0);
        assert!((bits[1] - 7.0).abs() < 1e-9);
        assert_eq!(allocate_bits(&[level(50.0, 1.0)], 0.0), vec![0.0]);
    }

    #[test]
    fn the_cap_holds() {
        let levels = [level(1e-9, 1.0), level(1e9, 1.0)];
        let bits = allocate_bits(&levels, 10.0);
        assert_eq!(bits[0], MAX_BITS_PER_KEY);
    }
}
