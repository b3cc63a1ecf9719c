//! The arithmetic of a run's measurements: worst windows, throughput over time and per
//! compaction round, and latency histograms.

use crate::results::{LatencySummary, RoundThroughput};
use crate::workload::OpKind;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// The lowest throughput over any `window` consecutive operations, from (seconds, completed
/// operations) samples; the whole span's throughput when it holds fewer operations.
pub fn worst_window(samples: &[(f64, u64)], window: u64) -> f64 {
    let (Some(&(t0, c0)), Some(&(t_end, c_end))) = (samples.first(), samples.last()) else {
        return 0.0;
    };
    if c_end - c0 < window {
        return if t_end > t0 {
            (c_end - c0) as f64 / (t_end - t0)
        } else {
            0.0
        };
    }
    let mut worst = f64::INFINITY;
    let mut j = 0;
    for i in 0..samples.len() {
        let (t, c) = samples[i];
        if c - c0 < window {
            continue;
        }
        // The latest sample j with at least `window` operations between j and i.
        while j + 1 < i && c - samples[j + 1].1 >= window {
            j += 1;
        }
        let (tj, cj) = samples[j];
        if t > tj {
            worst = worst.min((c - cj) as f64 / (t - tj));
        }
    }
    if worst.is_finite() {
        worst
    } else {
        0.0
    }
}

/// Throughput over each interval between consecutive round ends, from cumulative (seconds,
/// completed operations) samples: operations counted at the first sample at or after each end.
pub(super) fn round_throughput(samples: &[(f64, u64)], round_ends: &[f64]) -> Vec<RoundThroughput> {
    let completed_at = |t: f64| {
        let i = samples.partition_point(|&(s, _)| s < t);
        samples.get(i).or(samples.last()).map_or(0, |&(_, c)| c)
    };
    round_ends
        .windows(2)
        .filter(|w| w[1] > w[0])
        .map(|w| RoundThroughput {
            start_secs: w[0],
            end_secs: w[1],
            ops_per_sec: (completed_at(w[1]) - completed_at(w[0])) as f64 / (w[1] - w[0]),
        })
        .collect()
}

/// Throughput per `interval` seconds, from cumulative samples.
pub(super) fn throughput_series(samples: &[(f64, u64)], interval: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let Some(&(mut last_t, mut last_c)) = samples.first() else {
        return out;
    };
    for &(t, c) in samples {
        if t - last_t >= interval {
            out.push((t, (c - last_c) as f64 / (t - last_t)));
            last_t = t;
            last_c = c;
        }
    }
    out
}

/// The name under which batched reads record their latency, one value per batch
/// ([`crate::workload::PhaseSpec::read_batch`]).
pub const BATCH_LATENCY: &str = "multiread";

/// What a latency was measured for: one operation of a kind, or one batch of point reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timed {
    /// A single operation.
    Op(OpKind),
    /// A batch of point reads, timed as a whole.
    Batch,
}

impl Timed {
    /// The histogram slot: one per operation kind, then the batches'.
    fn slot(self) -> usize {
        match self {
            Timed::Op(kind) => kind.index(),
            Timed::Batch => OpKind::ALL.len(),
        }
    }

    /// Every slot's name, in slot order.
    fn names() -> impl Iterator<Item = &'static str> {
        OpKind::ALL
            .iter()
            .map(|k| k.name())
            .chain(std::iter::once(BATCH_LATENCY))
    }
}

/// Latency histograms of one thread or phase, one per [`Timed`] slot.
pub(super) struct Histograms {
    by_kind: Vec<Option<Histogram<u64>>>,
}

impl Histograms {
    pub(super) fn new() -> Self {
        Histograms {
            by_kind: (0..=OpKind::ALL.len()).map(|_| None).collect(),
        }
    }

    pub(super) fn record(&mut self, what: Timed, nanos: u64) {
        let h = self.by_kind[what.slot()].get_or_insert_with(new_histogram);
        // Values above the bound (an hour) saturate rather than fail.
        let _ = h.record(nanos.clamp(1, MAX_LATENCY_NANOS));
    }

    /// The summaries by name, plus "all" over every slot.
    pub(super) fn summaries(&self) -> BTreeMap<String, LatencySummary> {
        let mut latency = BTreeMap::new();
        let mut combined: Option<Histogram<u64>> = None;
        for (name, h) in Timed::names().zip(&self.by_kind) {
            if let Some(h) = h {
                latency.insert(name.to_string(), summarize(h));
                match &mut combined {
                    Some(c) => {
                        let _ = c.add(h);
                    }
                    None => combined = Some(h.clone()),
                }
            }
        }
        if let Some(c) = &combined {
            latency.insert("all".to_string(), summarize(c));
        }
        latency
    }

    pub(super) fn merge(&mut self, other: &Histograms) {
        for (mine, theirs) in self.by_kind.iter_mut().zip(&other.by_kind) {
            if let Some(t) = theirs {
                match mine {
                    Some(m) => {
                        let _ = m.add(t);
                    }
                    None => *mine = Some(t.clone()),
                }
            }
        }
    }
}

/// The largest latency recorded, in nanoseconds (one hour).
const MAX_LATENCY_NANOS: u64 = 3_600_000_000_000;

/// A latency histogram in nanoseconds with three significant figures.
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NANOS, 3)
        .expect("constant histogram bounds are valid")
}

fn summarize(h: &Histogram<u64>) -> LatencySummary {
    let us = |ns: u64| ns as f64 / 1000.0;
    LatencySummary {
        count: h.len(),
        mean_us: h.mean() / 1000.0,
        p50_us: us(h.value_at_quantile(0.5)),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        max_us: us(h.max()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_throughput_counts_the_operations_between_round_ends() {
        // 1,000 ops/s for 10 s, sampled every 0.5 s.
        let samples: Vec<(f64, u64)> = (0..=20).map(|i| (i as f64 * 0.5, i * 500)).collect();
        let rounds = round_throughput(&samples, &[2.0, 6.0, 6.0, 9.0]);
        assert_eq!(rounds.len(), 2, "an empty interval is no round");
        assert_eq!((rounds[0].start_secs, rounds[0].end_secs), (2.0, 6.0));
        assert!((rounds[0].ops_per_sec - 1000.0).abs() < 1e-9);
        assert!((rounds[1].ops_per_sec - 1000.0).abs() < 1e-9);
        // A single round end bounds no whole round.
        assert!(round_throughput(&samples, &[3.0]).is_empty());
    }

    #[test]
    fn worst_window_finds_the_slowest_stretch() {
        // 100k ops/s for 2 s, then 10k ops/s for 20 s, then fast again.
        let mut samples = vec![(0.0, 0u64)];
        let mut c = 0;
        for i in 1..=2000 {
            c += 100;
            samples.push((i as f64 * 0.001, c));
        }
        for i in 1..=20_000 {
            c += 10;
            samples.push((2.0 + i as f64 * 0.001, c));
        }
        let w = worst_window(&samples, 100_000);
        assert!((w - 10_000.0).abs() / 10_000.0 < 0.05, "{w}");
        // Fewer operations than a window: the whole span.
        assert_eq!(worst_window(&[(0.0, 0), (2.0, 1000)], 100_000), 500.0);
        assert_eq!(worst_window(&[], 10), 0.0);
    }

    #[test]
    fn throughput_series_reports_per_interval_rates() {
        let samples: Vec<(f64, u64)> = (0..=40).map(|i| (i as f64 * 0.25, i * 250)).collect();
        let series = throughput_series(&samples, 1.0);
        assert_eq!(series.len(), 10);
        assert!(series.iter().all(|&(_, r)| (r - 1000.0).abs() < 1e-6));
    }

    #[test]
    fn batches_get_their_own_latency_beside_single_operations() {
        let mut h = Histograms::new();
        h.record(Timed::Op(OpKind::Read), 1_000);
        h.record(Timed::Batch, 40_000);
        h.record(Timed::Batch, 50_000);
        let s = h.summaries();
        assert_eq!(s["read"].count, 1);
        assert_eq!(s[BATCH_LATENCY].count, 2);
        assert_eq!(s["all"].count, 3);
        assert!(!s.contains_key("update"));
    }
}
