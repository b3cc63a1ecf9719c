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

#[cfg(test)]
mod tests {
    use super::*;

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
