//! Closed-form cost formulas and the combinatorics behind the horizontal schemes (Vertiorizon).
//!
//! Counts are in buffers (flushes). Binomials saturate at `u128::MAX` instead of overflowing.

/// The binomial coefficient C(n, k), saturating.
pub fn binomial(n: u64, k: u64) -> u128 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut result: u128 = 1;
    for i in 0..k {
        // result * (n - i) / (i + 1) stays exact because result is C(n, i) * ... at every step.
        result = match result.checked_mul(u128::from(n - i)) {
            Some(v) => v / u128::from(i + 1),
            None => return u128::MAX,
        };
    }
    result
}

/// The smallest k ≥ 1 with C(k + ℓ − 1, ℓ) ≥ `flushes`: the initial counter value of horizontal
/// tiering (Vertiorizon Algorithm 2) for a phase of `flushes` buffers over ℓ = `levels` levels.
pub fn horizontal_tiering_k(flushes: u64, levels: usize) -> u64 {
    let l = levels as u64;
    let mut k = 1;
    while binomial(k + l - 1, l) < u128::from(flushes) {
        k += 1;
    }
    k
}

/// The integer m with C(m, ℓ) ≤ n < C(m + 1, ℓ) (Vertiorizon §5.2; at a boundary n = C(m+1, ℓ)
/// either choice gives the same costs, this returns the larger).
pub fn level_index_m(n: u64, levels: usize) -> u64 {
    let l = levels as u64;
    let mut m = l;
    while binomial(m + 1, l) <= u128::from(n) {
        m += 1;
    }
    m
}

/// τ(n, ℓ)/r of Lemma 9.4: the minimum, over compaction schedules of n flushes into ℓ tiered
/// levels, of the number of sorted runs alive summed over the n − 1 intervals between flushes.
pub fn tiering_read_cost(n: u64, levels: usize) -> u128 {
    if n <= 1 {
        return 0;
    }
    let l = levels as u64;
    let m = level_index_m(n, levels);
    u128::from(l) * binomial(m, l + 1) + u128::from(m - l + 1) * (u128::from(n) - binomial(m, l))
}

/// τ(n, ℓ)/r computed by the dynamic program of Lemma 9.2 (O(n²·ℓ)); a check on the closed form.
pub fn tiering_read_cost_dp(n: u64, levels: usize) -> u128 {
    let n = n as usize;
    // tau[l][i] for l in 1..=levels, i in 1..=n.
    let mut tau = vec![vec![0u128; n + 1]; levels + 1];
    for (i, cell) in tau[1].iter_mut().enumerate().skip(1) {
        *cell = binomial(i as u64, 2);
    }
    for l in 2..=levels {
        for total in 2..=n {
            tau[l][total] = (1..total)
                .map(|i| tau[l - 1][i] + (total - i) as u128 + tau[l][total - i])
                .min()
                .unwrap_or(0);
        }
    }
    if n == 0 {
        0
    } else {
        tau[levels][n]
    }
}

/// Vertiorizon Lemma 5.2 times P: write cost per entry of horizontal leveling with ℓ levels and a
/// horizontal part of n buffers, in units of one write per entry.
pub fn horizontal_leveling_write_cost(n: u64, levels: usize) -> f64 {
    let l = levels as f64;
    let m = level_index_m(n, levels);
    let nf = n as f64;
    (l * binomial(m + 1, levels as u64 + 1) as f64
        + (m as f64 + 1.0) * (nf - binomial(m, levels as u64) as f64)
        - (l - 1.0) * nf)
        / nf
}

/// Vertiorizon Lemma 5.1 divided by f: runs probed per lookup of horizontal tiering.
pub fn horizontal_tiering_runs_per_lookup(n: u64, levels: usize) -> f64 {
    tiering_read_cost(n, levels) as f64 / n as f64
}

/// The skew threshold δ of Vertiorizon eq. 6: the largest integer with α/(1−α) ≥ δ(δ+1)/2, where
/// α is the hot-set size as a fraction of the buffer. Returns 0 for α outside (0, 1).
pub fn skew_delta(alpha: f64) -> u32 {
    if !(alpha > 0.0 && alpha < 1.0) {
        return 0;
    }
    let ratio = alpha / (1.0 - alpha);
    let mut delta = 0u32;
    // A small tolerance so that exact boundaries such as α = 0.75 (ratio 3 = 2·3/2) count.
    while ratio + 1e-9 >= f64::from(delta + 1) * f64::from(delta + 2) / 2.0 {
        delta += 1;
    }
    delta
}

/// False-positive rate of a Bloom filter with `bits` bits per key and the optimal number of hash
/// functions: e^(−bits·ln²2). No filter (0 bits) means every probe reads.
pub fn bloom_fpr(bits: f64) -> f64 {
    if bits <= 0.0 {
        1.0
    } else {
        (-bits * std::f64::consts::LN_2 * std::f64::consts::LN_2).exp()
    }
}

/// How the levels of a horizontal part merge (Vertiorizon §4): leveling keeps one run per level
/// (Algorithm 1), tiering keeps several (Algorithm 2).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HorizontalMerge {
    /// One run per level; flushes merge into level 1.
    Leveling,
    /// Several runs per level; flushes add a run to level 1.
    Tiering,
}

impl HorizontalMerge {
    /// "leveling" or "tiering".
    pub fn as_str(self) -> &'static str {
        match self {
            HorizontalMerge::Leveling => "leveling",
            HorizontalMerge::Tiering => "tiering",
        }
    }
}

/// The operation mix of Vertiorizon eq. 5: fractions of updates w, point lookups r and range
/// lookups q, summing to 1 (or all 0 when nothing has been measured).
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkloadMix {
    /// Fraction of writes (puts and deletes), w.
    pub writes: f64,
    /// Fraction of point lookups, r.
    pub point_reads: f64,
    /// Fraction of range lookups, q.
    pub range_reads: f64,
}

impl WorkloadMix {
    /// The mix of the given operation counts; balanced (½ writes, ½ point reads) when all are 0,
    /// the paper's default workload.
    pub fn from_counts(writes: u64, point_reads: u64, range_reads: u64) -> Self {
        let total = (writes + point_reads + range_reads) as f64;
        if total == 0.0 {
            return WorkloadMix {
                writes: 0.5,
                point_reads: 0.5,
                range_reads: 0.0,
            };
        }
        WorkloadMix {
            writes: writes as f64 / total,
            point_reads: point_reads as f64 / total,
            range_reads: range_reads as f64 / total,
        }
    }
}

/// The modelled per-operation cost of one horizontal-part configuration (Vertiorizon §5.2), in
/// I/Os: W per update, R per point lookup (zero-result, so every probe is a false positive), Q per
/// range lookup (one I/O per run), and ζ = w·W + r·R + q·Q.
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HorizontalCost {
    /// Leveling or tiering.
    pub merge: HorizontalMerge,
    /// Number of levels ℓ.
    pub levels: usize,
    /// W: writes per update.
    pub write: f64,
    /// R: I/Os per point lookup.
    pub point_read: f64,
    /// Q: I/Os per range lookup.
    pub range_read: f64,
    /// ζ = w·W + r·R + q·Q.
    pub total: f64,
}

/// The cost of a horizontal part of `n` buffers with `levels` levels, for a lookup false-positive
/// rate `fpr` and `page_entries` entries per page P:
/// - leveling: W = Lemma 5.2 / P, R = ℓ·f, Q = ℓ;
/// - tiering: W = ℓ/P, R = Lemma 5.1 (runs per lookup · f), Q = R/f.
pub fn horizontal_cost(
    merge: HorizontalMerge,
    n: u64,
    levels: usize,
    mix: WorkloadMix,
    fpr: f64,
    page_entries: f64,
) -> HorizontalCost {
    let l = levels as f64;
    let (write, runs) = match merge {
        HorizontalMerge::Leveling => (horizontal_leveling_write_cost(n, levels) / page_entries, l),
        HorizontalMerge::Tiering => (
            l / page_entries,
            horizontal_tiering_runs_per_lookup(n, levels),
        ),
    };
    let point_read = runs * fpr;
    let range_read = runs;
    HorizontalCost {
        merge,
        levels,
        write,
        point_read,
        range_read,
        total: mix.writes * write + mix.point_reads * point_read + mix.range_reads * range_read,
    }
}

/// Vertiorizon's self-tuning (§5.2): the configuration with the smallest ζ among `merges` and
/// ℓ ∈ [2, min(n, `max_levels`)] (or ℓ = `fixed_levels` alone when set). The paper searches ℓ by
/// bisection on the claim that ζ is convex in ℓ; this evaluates every ℓ, which is exact whether or
/// not the claim holds and costs O(n) closed-form evaluations. Ties keep the first candidate
/// (leveling before tiering when both are listed, then the smaller ℓ). `None` when no candidate
/// exists (`merges` empty).
pub fn tune_horizontal(
    n: u64,
    merges: &[HorizontalMerge],
    fixed_levels: Option<usize>,
    max_levels: usize,
    mix: WorkloadMix,
    fpr: f64,
    page_entries: f64,
) -> Option<HorizontalCost> {
    let levels: Vec<usize> = match fixed_levels {
        Some(l) => vec![l],
        None => {
            let top = (n.min(max_levels as u64) as usize).max(2);
            (2..=top).collect()
        }
    };
    let mut best: Option<HorizontalCost> = None;
    for &merge in merges {
        for &l in &levels {
            let cost = horizontal_cost(merge, n.max(1), l, mix, fpr, page_entries);
            if best.is_none_or(|b| cost.total < b.total) {
                best = Some(cost);
            }
        }
    }
    best
}

/// Write amplification of Vertiorizon's two vertical levels (§5.1, eq. 2): moving the horizontal
/// part into V1 at ratio T' costs T', and V1→V2 partial compaction at ratio T²/T' costs on
/// average (T²/T' + 1)/2, so the sum is T' + (T²/T' + 1)/2 for a largest level of n·T²·B.
pub fn vertical_write_cost(size_ratio: f64, first_ratio: f64) -> f64 {
    first_ratio + (size_ratio * size_ratio / first_ratio + 1.0) / 2.0
}

/// The T' minimizing [`vertical_write_cost`] (AM–GM on eq. 2): T/√2, which makes the V1→V2
/// ratio √2·T and the cost √2·T + ½.
pub fn optimal_first_vertical_ratio(size_ratio: f64) -> f64 {
    size_ratio / std::f64::consts::SQRT_2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_fpr_matches_the_formula() {
        assert!((bloom_fpr(10.0) - 0.00819).abs() < 1e-4);
        assert_eq!(bloom_fpr(0.0), 1.0);
    }

    #[test]
    fn vertical_cost_of_eq2() {
        // T = 6: equal ratios cost 6 + 3.5; T' = T/√2 costs √2·6 + ½ ≈ 8.985.
        assert!((vertical_write_cost(6.0, 6.0) - 9.5).abs() < 1e-12);
        let best = optimal_first_vertical_ratio(6.0);
        assert!((best - 4.2426).abs() < 1e-4);
        let cost = vertical_write_cost(6.0, best);
        assert!((cost - 8.985).abs() < 1e-3, "{cost}");
        // It is the minimum: nudging T' either way costs more.
        assert!(vertical_write_cost(6.0, best * 1.05) > cost);
        assert!(vertical_write_cost(6.0, best * 0.95) > cost);
    }

    /// The worked example of the Vertiorizon notes (§1.5): 5 bits per key, P = 4, n = 116.
    #[test]
    fn self_tuning_picks_the_worked_examples() {
        let fpr = bloom_fpr(5.0);
        assert!((fpr - 0.0905).abs() < 1e-3, "{fpr}");
        let both = [HorizontalMerge::Leveling, HorizontalMerge::Tiering];
        let pick = |w: u64, r: u64, q: u64| {
            let mix = WorkloadMix::from_counts(w, r, q);
            let best = tune_horizontal(116, &both, None, 116, mix, fpr, 4.0).unwrap();
            (best.merge, best.levels)
        };
        use HorizontalMerge::*;
        assert_eq!(pick(50, 50, 0), (Tiering, 3), "balanced");
        assert_eq!(pick(90, 10, 0), (Tiering, 2), "90% writes");
        assert_eq!(pick(10, 90, 0), (Tiering, 7), "90% reads");
        assert_eq!(pick(75, 0, 25), (Tiering, 4), "75% updates, 25% ranges");
        // Read-heavy with leveling only: ℓ = 3, close to tiering's best as the notes say.
        let mix = WorkloadMix::from_counts(10, 90, 0);
        let leveling = tune_horizontal(116, &[Leveling], None, 116, mix, fpr, 4.0).unwrap();
        assert_eq!(leveling.levels, 3);
        // A fixed ℓ is honoured; a cap on ℓ is honoured.
        let fixed = tune_horizontal(116, &both, Some(2), 116, mix, fpr, 4.0).unwrap();
        assert_eq!(fixed.levels, 2);
        let capped = tune_horizontal(116, &[Tiering], None, 5, mix, fpr, 4.0).unwrap();
        assert_eq!(capped.levels, 5);
    }

    #[test]
    fn zeta_is_unimodal_in_levels_for_the_examples() {
        // The paper's claim behind its bisection; checked here for the four mixes.
        let fpr = bloom_fpr(5.0);
        for (w, r, q) in [(50, 50, 0), (90, 10, 0), (10, 90, 0), (75, 0, 25)] {
            let mix = WorkloadMix::from_counts(w, r, q);
            for merge in [HorizontalMerge::Leveling, HorizontalMerge::Tiering] {
                let costs: Vec<f64> = (2..=40)
                    .map(|l| horizontal_cost(merge, 116, l, mix, fpr, 4.0).total)
                    .collect();
                let turn = costs.windows(2).position(|p| p[1] > p[0]);
                if let Some(t) = turn {
                    assert!(
                        costs[t..].windows(2).all(|p| p[1] >= p[0] - 1e-12),
                        "{merge:?} {w}/{r}/{q}: {costs:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn binomials() {
        assert_eq!(binomial(5, 2), 10);
        assert_eq!(binomial(4, 2), 6);
        assert_eq!(binomial(5, 3), 10);
        assert_eq!(binomial(3, 5), 0);
        assert_eq!(binomial(0, 0), 1);
        assert_eq!(binomial(200, 100), u128::MAX);
    }

    #[test]
    fn k_is_the_smallest_binomial_cover() {
        assert_eq!(horizontal_tiering_k(6, 2), 3);
        assert_eq!(horizontal_tiering_k(7, 2), 4);
        assert_eq!(horizontal_tiering_k(10, 3), 3);
        assert_eq!(horizontal_tiering_k(1, 3), 1);
    }

    #[test]
    fn closed_form_matches_the_dynamic_program() {
        for levels in 1..=5 {
            for n in 1..60 {
                assert_eq!(
                    tiering_read_cost(n, levels),
                    tiering_read_cost_dp(n, levels),
                    "n={n} levels={levels}"
                );
            }
        }
    }

    #[test]
    fn leveling_tiering_duality_holds() {
        // W_l·P = R_t/f + 1 (Vertiorizon notes, n = 116).
        for (levels, w, r) in [
            (2, 10.17, 9.17),
            (3, 6.19, 5.19),
            (4, 4.91, 3.91),
            (6, 3.97, 2.97),
        ] {
            let wl = horizontal_leveling_write_cost(116, levels);
            let rt = horizontal_tiering_runs_per_lookup(116, levels);
            assert!((wl - w).abs() < 0.01, "W_l({levels}) = {wl}");
            assert!((rt - r).abs() < 0.01, "R_t({levels}) = {rt}");
            assert!((wl - rt - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn skew_delta_follows_eq6() {
        assert_eq!(skew_delta(0.3), 0);
        assert_eq!(skew_delta(0.49), 0);
        assert_eq!(skew_delta(0.5), 1);
        assert_eq!(skew_delta(0.75), 2);
        assert_eq!(skew_delta(6.0 / 7.0), 3);
        assert_eq!(skew_delta(1.0), 0);
    }
}
