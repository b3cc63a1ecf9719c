//! Closed-form costs of a policy's tree in steady state: the first and cheapest stage of
//! `strata advise`, before the simulator. A policy describes its own
//! ([`crate::CompactionPolicy::cost_model`]) with the shapes here; the formulas and how far the
//! simulator is from them are in `docs/write-amplification.md`.
//!
//! Counts: `L` levels below the buffer, `L = ⌈log_T(N·E / B)⌉` at least 1, for data of `N·E`
//! bytes, buffers of `B` bytes and size ratio `T`. Write amplification counts the flush as one
//! write. A lookup's cost is in sorted runs probed: a filter's false positive costs a block
//! read in each run that does not hold the key, the run that holds it one more.

use serde::Serialize;

/// What a model is told about the data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelInput {
    /// Bytes of the live data (keys and values).
    pub data_bytes: u64,
    /// Bytes of a write buffer.
    pub buffer_bytes: u64,
}

/// A model's estimate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelEstimate {
    /// Table bytes written per user byte.
    pub write_amp: f64,
    /// Table bytes per live byte, at worst in steady state (obsolete versions not yet merged).
    pub space_amp: f64,
    /// Sorted runs a point lookup may probe (each costs a filter check; a false positive, a
    /// block read).
    pub runs: f64,
    /// The formula, for reports.
    pub formula: &'static str,
}

/// Levels below the buffer for size ratio `t`: `⌈log_t(data / buffer)⌉`, at least 1.
pub fn levels(t: f64, input: &ModelInput) -> f64 {
    let buffers = input.data_bytes as f64 / input.buffer_bytes.max(1) as f64;
    if buffers <= 1.0 || t <= 1.0 {
        return 1.0;
    }
    // A hair under the exact power counts as it (floating point).
    (buffers.ln() / t.ln() - 1e-9).ceil().max(1.0)
}

/// Leveling with file-granularity merges (Spooky eq. 5, plus the flush): every level one run,
/// each entry merged into each level about (T+1)/2 times.
pub fn leveling(t: f64, input: &ModelInput) -> ModelEstimate {
    let l = levels(t, input);
    ModelEstimate {
        write_amp: 1.0 + l * (t + 1.0) / 2.0,
        space_amp: 1.0 + 1.0 / (t - 1.0).max(1.0),
        runs: l,
        formula: "leveling: 1 + L(T+1)/2 (Spooky eq. 5)",
    }
}

/// Leveling with whole-level merges (Spooky eq. 4, plus the flush).
pub fn full_leveling(t: f64, input: &ModelInput) -> ModelEstimate {
    let l = levels(t, input);
    ModelEstimate {
        write_amp: 1.0 + l * (t - 1.0) / 2.0,
        formula: "full leveling: 1 + L(T-1)/2 (Spooky eq. 4)",
        ..leveling(t, input)
    }
}

/// Tiering: up to T runs per level, each entry written once per level.
pub fn tiering(t: f64, input: &ModelInput) -> ModelEstimate {
    let l = levels(t, input);
    ModelEstimate {
        write_amp: 1.0 + l,
        space_amp: t,
        runs: l * (t - 1.0).max(1.0),
        formula: "tiering: L + 1",
    }
}

/// Lazy leveling: tiering above, one leveled run at the last level. An entry is written by
/// the flush (into L1), once per tiered level below L1, and (T+1)/2 times at the last level.
pub fn lazy_leveling(t: f64, input: &ModelInput) -> ModelEstimate {
    let l = levels(t, input);
    ModelEstimate {
        write_amp: 1.0 + (l - 2.0).max(0.0) + (t + 1.0) / 2.0,
        space_amp: 1.0 + 1.0 / (t - 1.0).max(1.0),
        runs: (l - 1.0) * (t - 1.0).max(1.0) + 1.0,
        formula: "lazy leveling: 1 + (L-2) + (T+1)/2",
    }
}

/// Buckets that are never merged (Min-Max): written once; a lookup may probe every bucket whose
/// key range holds the key, `bucket_overlap` of them for the workload's key order.
pub fn buckets(bucket_overlap: f64) -> ModelEstimate {
    ModelEstimate {
        write_amp: 1.0,
        space_amp: 1.0,
        runs: bucket_overlap.max(1.0),
        formula: "buckets: written once, never merged",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_formulas_match_the_documented_table() {
        // N/B = T^3: three levels (docs/write-amplification.md, T = 10).
        let input = ModelInput {
            data_bytes: 1000 << 20,
            buffer_bytes: 1 << 20,
        };
        assert_eq!(levels(10.0, &input), 3.0);
        assert_eq!(full_leveling(10.0, &input).write_amp, 14.5);
        assert_eq!(leveling(10.0, &input).write_amp, 17.5);
        assert_eq!(tiering(10.0, &input).write_amp, 4.0);
        assert_eq!(lazy_leveling(10.0, &input).write_amp, 7.5);
        assert!(tiering(10.0, &input).runs > leveling(10.0, &input).runs);
        let tiny = ModelInput {
            data_bytes: 10,
            buffer_bytes: 1 << 20,
        };
        assert_eq!(levels(10.0, &tiny), 1.0);
    }
}
