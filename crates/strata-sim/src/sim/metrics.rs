//! What the simulator measures as the tree changes: bytes written per level, peak space, the
//! modelled lookup cost and the timeline of samples.

use super::Simulator;
use crate::keys::key_from_bytes;
use crate::report::TimelineSample;
use strata_policy::math::bloom_fpr;

impl Simulator {
    pub(super) fn count_level_write(&mut self, level: usize, bytes: u64) {
        let per_level = &mut self.metrics.bytes_written_per_level;
        if per_level.len() <= level {
            per_level.resize(level + 1, 0);
        }
        per_level[level] += bytes;
    }

    pub(super) fn sample_space(&mut self, in_flight: u64) {
        let durable = self.version.disk_bytes();
        self.metrics.peak_space_bytes = self.metrics.peak_space_bytes.max(durable + in_flight);
        if let Some(phase) = &mut self.phase {
            phase.peak_space_bytes = phase.peak_space_bytes.max(durable + in_flight);
        }
        let live = self.live_entries * (self.cfg.key_size + self.cfg.value_size);
        if live == 0 {
            return;
        }
        let m = &mut self.metrics;
        m.peak_durable_space_amp = m.peak_durable_space_amp.max(durable as f64 / live as f64);
        m.peak_transient_space_amp = m
            .peak_transient_space_amp
            .max(in_flight as f64 / live as f64);
        m.peak_space_amp = m
            .peak_space_amp
            .max((durable + in_flight) as f64 / live as f64);
    }

    /// Modelled lookup cost of the current version: runs probed × their filters' false-positive
    /// rate, plus the one read that finds the key.
    pub(super) fn lookup_cost(&self) -> f64 {
        let mut cost = 1.0;
        for level in self.version.levels() {
            for run in level.runs() {
                let total: u64 = run.tables().iter().map(|t| t.size).sum();
                let fpr: f64 = run
                    .tables()
                    .iter()
                    .map(|t| bloom_fpr(t.bloom_bits_per_key) * t.size as f64)
                    .sum::<f64>()
                    / total.max(1) as f64;
                cost += fpr;
            }
        }
        cost
    }

    /// Runs whose key range holds a key drawn uniformly from the tree's key range, on average:
    /// the runs a point lookup (or a scan's seek) has to consult. Every run of a leveled tree
    /// spans the key space; Min-Max's buckets of nearly sorted data each span a sliver of it.
    pub(super) fn runs_probed(&self) -> f64 {
        let spans: Vec<(u64, u64)> = self
            .version
            .levels()
            .iter()
            .flat_map(|level| level.runs())
            .filter_map(|run| {
                let first = run.tables().first()?;
                let last = run.tables().last()?;
                Some((
                    key_from_bytes(&first.smallest),
                    key_from_bytes(&last.largest),
                ))
            })
            .collect();
        let low = spans.iter().map(|s| s.0).min().unwrap_or(0);
        let high = spans.iter().map(|s| s.1).max().unwrap_or(0);
        let width = high.saturating_sub(low) as f64 + 1.0;
        spans
            .iter()
            .map(|&(a, b)| (b.saturating_sub(a) as f64 + 1.0) / width)
            .sum()
    }

    pub(super) fn sample_timeline(&mut self) {
        let cost = self.lookup_cost();
        let probed = self.runs_probed();
        let runs = self.version.run_count() as f64;
        let weight = (self.stats.bytes_ingested - self.last_sample_bytes) as f64;
        self.last_sample_bytes = self.stats.bytes_ingested;
        let m = &mut self.metrics;
        m.weighted_lookup_cost += cost * weight;
        m.weighted_range_runs += runs * weight;
        m.weighted_runs_probed += probed * weight;
        m.weight += weight;
        let live = self.live_entries * (self.cfg.key_size + self.cfg.value_size);
        self.timeline.push(TimelineSample {
            flush: self.stats.flushes,
            seconds: self.now,
            runs_per_level: self
                .version
                .levels()
                .iter()
                .map(|l| l.runs().len() as u32)
                .collect(),
            space_amp: if live > 0 {
                self.version.disk_bytes() as f64 / live as f64
            } else {
                0.0
            },
            lookup_cost: cost,
        });
    }
}
