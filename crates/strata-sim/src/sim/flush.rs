//! Flushing the buffer: the policy picks where it goes (waiting while the tables it would merge
//! with are being compacted), then the buffer, or a window of it, is merged and installed.

use super::ranges::InputRanges;
use super::{SimError, Simulator, TraceEvent};
use crate::keys::{key_at_or_after, key_bytes, key_of};
use crate::merge::{keep_tombstones_where, merge_runs, sort_buffer, RunCursor};
use std::sync::Arc;
use strata_exec::handover;
use strata_exec::pick::flush_may_start;
use strata_exec::range_del::widened;
use strata_exec::skew::FlushKeySample;
use strata_exec::sources::flush_merge_tables;
use strata_exec::window::{key_position, most_compact_window};
use strata_exec::{flush_edit, JobKind, OlderTables};
use strata_meta::KeyRange;
use strata_policy::{BufferSelection, BufferSummary, CompactionPolicy, PickContext, Priority};

impl Simulator {
    /// Flushes the buffer now (if it holds anything). A flush that writes only a window of the
    /// buffer keeps the rest buffered.
    pub fn flush(&mut self) -> Result<(), SimError> {
        if self.buffer_entries == 0 {
            return Ok(());
        }
        if let Some(files) = self.files.as_mut() {
            files.end_wal();
        }
        let raw = std::mem::take(&mut self.buffer);
        let raw_seqnos = std::mem::take(&mut self.buffer_entry_seqnos);
        let mut ages = self.buffer_ages(&raw, &raw_seqnos);
        let written_entries = std::mem::take(&mut self.buffer_entries);
        let written_bytes = std::mem::take(&mut self.buffer_user_bytes);
        // The buffer's keys as the engine's memtables report them: every entry buffered (those
        // a range deletion covers too) and the range deletions' bounds.
        let entry_range = raw
            .iter()
            .map(|&e| key_of(e))
            .min()
            .zip(raw.iter().map(|&e| key_of(e)).max())
            .map(|(a, b)| KeyRange::new(key_bytes(a), key_bytes(b)));
        // The engine samples the keys of every entry its flush reads, covered ones too.
        let sampled = (!self.buffer_ranges.is_empty()).then(|| sort_buffer(raw.clone()));
        let (buffer_ranges, raw) = self.take_buffer_ranges(raw);
        let buffer_range = widened(entry_range, &buffer_ranges);
        let sorted = sort_buffer(raw);
        let buffer_seqnos = self.buffer_seqnos.take().unwrap_or_default();
        let (smallest, largest) = buffer_range
            .clone()
            .map_or_else(|| (key_bytes(0), key_bytes(0)), |r| (r.smallest, r.largest));
        let summary = BufferSummary {
            smallest,
            largest,
            entries: written_entries,
            bytes: written_bytes,
        };
        let plan = loop {
            let ctx = PickContext {
                leases: &self.leases,
                stats: &self.stats,
                buffer: Some(&summary),
                now_nanos: self.now_nanos(),
                urgent_only: false,
            };
            let plan = handover::flush_plan(self.policy.as_ref(), &self.version, &ctx)
                .map_err(|e| self.policy_error(e))?;
            // The engine's rule, and in timed mode a stop at level0_stop_runs (RocksDB's
            // level0_stop_writes_trigger): a flush into L0 waits for a running job.
            let blocked = !flush_may_start(
                self.policy.as_ref(),
                &self.version,
                &ctx,
                &plan,
                &summary,
                // The scheduler starts every compaction that can start as soon as it can, so
                // one ready to start is already running.
                || !self.running.is_empty(),
                self.state_change_running(),
            ) || (plan.output.level == 0
                && self.version.level(0).runs().len() >= self.cfg.level0_stop_runs
                && !self.running.is_empty());
            if !blocked {
                break plan;
            }
            let Some(next) = self.running.iter().map(|j| j.end).reduce(f64::min) else {
                return Err(SimError::Deadlock {
                    policy: self.policy.name(),
                });
            };
            self.metrics.stall_seconds += (next - self.now).max(0.0);
            self.advance_to(next)?;
        };
        plan.output
            .cut
            .validate()
            .map_err(|e| self.policy_error(e))?;

        // A buffer holding range deletions or merge operands is written whole, as the engine
        // writes it.
        let holds_operands = std::mem::take(&mut self.buffer_holds_operands);
        let selection = if buffer_ranges.is_empty() && !holds_operands {
            plan.selection
        } else {
            BufferSelection::All
        };
        let (entries, keep) = match selection {
            BufferSelection::All => (sorted, Vec::new()),
            BufferSelection::MostCompactWindow { entries } => {
                let positions: Vec<u128> = sorted
                    .iter()
                    .map(|&e| key_position(&key_of(e).to_be_bytes()))
                    .collect();
                let entries = entries.div_ceil(self.sample_one_in);
                let window = most_compact_window(&positions, entries as usize);
                let mut keep = sorted[..window.start].to_vec();
                keep.extend_from_slice(&sorted[window.end..]);
                (sorted[window].to_vec(), keep)
            }
        };
        // Scale mode: the flushed entries weigh the buffer's distinct keys over the sample's,
        // as counted over every key, or the sample's rate when a window flush is involved.
        let distinct = self
            .buffer_distinct
            .as_mut()
            .map(|c| c.take_distinct(written_entries));
        let windowed = std::mem::replace(&mut self.buffer_windowed, !keep.is_empty());
        // Only scale mode weighs by sample bytes (`sizer_for`); the exact simulator skips the pass.
        let scale = self.cfg.scale_keys.is_some();
        let sample = if scale {
            self.sample_bytes(&entries)
        } else {
            0
        };
        let per_kept = match distinct {
            Some(d) if !windowed && keep.is_empty() && !entries.is_empty() => {
                d as f64 / entries.len() as f64
            }
            _ => self.sample_one_in as f64,
        };
        let (mut input_bytes, mut input_sample_bytes) =
            ((sample as f64 * per_kept).round() as u64, sample);
        if keep.is_empty() {
            self.buffer_bytes = 0;
        } else {
            // What stays is deduplicated; in scale mode each kept entry stands for its share.
            let weight = self.sample_one_in;
            self.buffer_user_bytes = self.sample_bytes(&keep) * weight;
            self.buffer_entries = keep.len() as u64 * weight;
            self.buffer_bytes =
                self.buffer_user_bytes + self.buffer_entries * self.cfg.buffer_entry_overhead;
            self.metrics.window_held_bytes += self.buffer_user_bytes;
            self.keep_buffer_seqnos(&keep, ages.as_ref());
            self.buffer = keep;
            self.buffer_seqnos = Some(buffer_seqnos);
        }
        let mut key_sample = FlushKeySample::new();
        for &e in sampled.as_ref().unwrap_or(&entries) {
            key_sample.add(&key_of(e).to_be_bytes());
        }
        let range = match (entries.first(), entries.last()) {
            _ if !buffer_ranges.is_empty() => buffer_range,
            (Some(&a), Some(&b)) => Some(KeyRange::new(key_bytes(key_of(a)), key_bytes(key_of(b)))),
            _ => None,
        };
        let merge_with = flush_merge_tables(&self.version, &plan, range.as_ref())
            .map_err(|e| self.policy_error(e))?;
        self.note_older_tables(ages.as_mut(), merge_with.iter())?;
        let mut merge_arrays = Vec::with_capacity(merge_with.len());
        let mut read_bytes = 0;
        let mut seqnos = buffer_seqnos;
        // The buffer counts as one input for the cutter's projection, at its smallest key.
        let buffer_smallest = match &range {
            Some(r) if !buffer_ranges.is_empty() => key_at_or_after(&r.smallest),
            _ => key_of(entries.first().copied().unwrap_or(0)),
        };
        let mut projection = vec![(buffer_smallest, written_bytes)];
        for t in &merge_with {
            read_bytes += t.size;
            seqnos = seqnos.union(t.seqnos);
            projection.push((key_at_or_after(&t.smallest), t.size));
            let array = self.table_array(t.id)?;
            input_bytes += t.size;
            if scale {
                input_sample_bytes += self.sample_bytes(&array);
            }
            merge_arrays.push(array);
        }
        let older = OlderTables::below(
            &self.version,
            plan.output.level,
            plan.output.run,
            &plan.merge_with,
        );
        let input_ranges = InputRanges::of(vec![buffer_ranges, self.ranges_of(&merge_with)]);
        // A flush drops nothing by age, as the engine's does.
        let ranges_to_write = input_ranges
            .as_ref()
            .map(|r| r.to_write(&older, 0))
            .unwrap_or_default();
        if let Some(ranges) = &input_ranges {
            for array in &mut merge_arrays {
                *array = ranges.uncovered(1, array);
            }
        }
        let rule = self.tombstone_rule(older, std::slice::from_ref(&merge_with));
        let mut runs = vec![RunCursor::new(vec![Arc::from(entries)])];
        if !merge_arrays.is_empty() {
            runs.push(RunCursor::new(merge_arrays));
        }
        let merged = merge_runs(
            runs,
            keep_tombstones_where(|k| self.tombstone_needed(&rule, k)),
        );
        let outputs = self.write_tables(
            &merged,
            self.sizer_for(input_bytes, input_sample_bytes),
            &plan.output,
            seqnos,
            ages.as_ref(),
            &projection,
            ranges_to_write,
        );
        let written: u64 = outputs.iter().map(|(meta, _)| meta.size).sum();
        if self.cfg.trace {
            self.trace.push(TraceEvent {
                flush: self.stats.flushes,
                kind: JobKind::Flush,
                input_levels: plan.input_levels(),
                input_tables: plan.merge_with.len(),
                output_level: Some(plan.output.level),
                output_tables: outputs.len(),
                bytes_written: written,
                reason: plan.reason.clone(),
                priority: Priority::Normal,
                started_nanos: self.now_nanos(),
                finished_nanos: self.now_nanos(),
            });
        }
        let (metas, arrays) = outputs.into_iter().unzip();
        let edit = flush_edit(&self.version, &plan, metas).map_err(|e| self.policy_error(e))?;
        let applied = self.version.apply(&edit).map_err(|source| SimError::Edit {
            policy: self.policy.name(),
            source,
            plan: plan.to_string(),
        })?;
        self.install(applied, &edit, arrays);
        self.metrics.flush_bytes += written;
        self.count_level_write(plan.output.level, written);
        self.metrics.flush_read_bytes += read_bytes;
        self.stats.flushes += 1;
        self.skew.observe(key_sample);
        if let Some((low, high)) = self.fresh_range.take() {
            self.skew.observe_range(&key_bytes(low), &key_bytes(high));
        }
        self.stats.skew = self.skew.alpha();
        if let Some(previous) = self.last_flush_time {
            self.stats.flush_interval_nanos = Some(((self.now - previous) * 1e9) as u64);
        }
        self.last_flush_time = Some(self.now);
        self.plans_since_flush = 0;
        self.metrics.max_tables_written_concurrently = self
            .metrics
            .max_tables_written_concurrently
            .max(1 + self.running.iter().filter(|j| j.output_bytes > 0).count() as u64);
        self.sample_space(0);
        self.schedule()?;
        self.sample_timeline();
        Ok(())
    }
}
