//! What a simulation measured.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Running counters inside the simulator.
#[derive(Clone, Debug, Default)]
pub(crate) struct Metrics {
    pub flush_bytes: u64,
    pub flush_read_bytes: u64,
    pub window_held_bytes: u64,
    pub tables_written: u64,
    pub compaction_bytes: u64,
    pub compaction_read_bytes: u64,
    pub compactions: u64,
    pub trivial_moves: u64,
    pub drops: u64,
    pub max_sorted_runs: u64,
    pub max_tables: u64,
    pub max_tables_written_concurrently: u64,
    pub max_concurrent_jobs: u64,
    pub stall_seconds: f64,
    pub peak_space_amp: f64,
    pub peak_durable_space_amp: f64,
    pub peak_transient_space_amp: f64,
    pub peak_space_bytes: u64,
    pub bytes_written_per_level: Vec<u64>,
    pub blocks_written_per_level: Vec<u64>,
    pub blocks_preserved_per_level: Vec<u64>,
    pub weighted_lookup_cost: f64,
    pub weighted_range_runs: f64,
    pub weighted_runs_probed: f64,
    pub weight: f64,
}

/// Shape of one level at the end of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LevelReport {
    /// Level number.
    pub level: usize,
    /// Sorted runs.
    pub runs: usize,
    /// Tables.
    pub tables: usize,
    /// Bytes.
    pub bytes: u64,
}

/// The tree's shape after one flush and the compactions it triggered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineSample {
    /// Flushes so far.
    pub flush: u64,
    /// Simulated seconds (0 in synchronous mode).
    pub seconds: f64,
    /// Sorted runs in each level, from L0.
    pub runs_per_level: Vec<u32>,
    /// Durable space amplification at this point.
    pub space_amp: f64,
    /// Modelled point-lookup cost at this point.
    pub lookup_cost: f64,
}

/// One workload phase of a simulation.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    /// The phase's name in the workload.
    pub name: String,
    /// Write requests (puts and deletes) during the phase.
    pub write_ops: u64,
    /// Flushes installed before the phase began.
    pub flushes_before: u64,
    /// User key+value bytes ingested during the phase.
    pub user_bytes: u64,
    /// Bytes written by flushes and compactions during the phase (the buffer left over from the
    /// phase before is flushed in this one).
    pub bytes_written: u64,
    /// `bytes_written / user_bytes`.
    pub write_amp: f64,
    /// Bytes flushes and compactions read from tables during the phase (the inputs they merge).
    pub bytes_read: u64,
    /// User bytes window flushes left held in the buffer during the phase (see
    /// [`SimReport::window_held_bytes`]).
    pub window_held_bytes: u64,
    /// Tables flushes and compactions wrote during the phase.
    pub tables_written: u64,
    /// Bytes written into each level during the phase (index = level).
    pub bytes_written_per_level: Vec<u64>,
    /// Data blocks written into each level during the phase (index = level; empty unless
    /// blocks are recorded, see [`crate::SimConfig::block_size`]).
    pub blocks_written_per_level: Vec<u64>,
    /// Data blocks block-preserving merges kept in each level during the phase instead of
    /// rewriting them (index = level).
    pub blocks_preserved_per_level: Vec<u64>,
    /// Peak bytes of tables plus in-flight outputs during the phase.
    pub peak_space_bytes: u64,
    /// `peak_space_bytes` / live bytes at the phase's end.
    pub peak_space_over_live: f64,
}

/// What the simulated block cache of the workload's reads counted
/// ([`crate::SimConfig::read_cache_bytes`]), over the last workload phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReadCacheReport {
    /// The cache's size in bytes.
    pub capacity_bytes: u64,
    /// Point lookups (the reads of read-modify-writes among them).
    pub lookups: u64,
    /// Of them, answered by the write buffer, reading no block.
    pub lookups_in_buffer: u64,
    /// Data blocks lookups read: one per lookup whose key a run holds.
    pub lookup_blocks: u64,
    /// Of them, found in the cache.
    pub lookup_block_hits: u64,
    /// Range scans.
    pub scans: u64,
    /// Data blocks scans read, every run's.
    pub scan_blocks: u64,
    /// Of them, found in the cache.
    pub scan_block_hits: u64,
}

/// The result of one simulation. Amplifications follow the measuring conventions of
/// `docs/architecture.md`: write amplification is bytes written by flushes and compactions over
/// user bytes ingested; space amplification is
/// table bytes over the bytes of the live unique key set, with durable (the tree's own tables) and
/// transient (outputs of running compactions beside their inputs) reported apart.
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    /// Policy name.
    pub policy: String,
    /// The simulated SSD's run (`strata sim --ssd`), if any; `total_write_amp` =
    /// `write_amp` × its GC write amplification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssd: Option<crate::ftl::FtlReport>,
    /// The simulated block cache's counts over the last workload phase
    /// ([`crate::SimConfig::read_cache_bytes`]), if one ran on every key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_cache: Option<ReadCacheReport>,
    /// Scale mode's sample rate: tables kept one key in this many (1: the exact simulator).
    pub sample_one_in: u64,
    /// Policy options.
    pub policy_options: BTreeMap<String, String>,
    /// The policy's persisted state at the end (its decisions so far, e.g. what Mixed learned),
    /// empty when it keeps none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub policy_state: String,
    /// Workload name.
    pub workload: String,
    /// Keys the workload inserted (insert operations).
    pub entries: u64,
    /// Operations issued in total.
    pub ops: u64,
    /// Key bytes.
    pub key_size: u64,
    /// Value bytes.
    pub value_size: u64,
    /// Buffer bytes.
    pub buffer_size: u64,
    /// User key+value bytes ingested.
    pub user_bytes: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Bytes written by compactions.
    pub compaction_bytes_written: u64,
    /// Bytes read by compactions and by flushes that merge into a run.
    pub compaction_bytes_read: u64,
    /// User bytes that flushes writing only a window of the buffer left held in it, summed
    /// over those flushes: what later windows pass over again (the engine merges over the held
    /// memtables for each window, `docs/minmax.md`), work a policy causes that writes no table.
    pub window_held_bytes: u64,
    /// Tables flushes and compactions wrote (each costs a file's creation, index, filter and
    /// sync whatever its size).
    pub tables_written: u64,
    /// (flush + compaction bytes written) / user bytes.
    pub write_amp: f64,
    /// Peak of (tables + in-flight compaction outputs) / live bytes.
    pub peak_space_amp: f64,
    /// Peak of tables / live bytes.
    pub peak_durable_space_amp: f64,
    /// Peak of in-flight compaction outputs / live bytes.
    pub peak_transient_space_amp: f64,
    /// Tables / live bytes at the end.
    pub final_space_amp: f64,
    /// Peak bytes of tables plus in-flight outputs over the whole run.
    pub peak_space_bytes: u64,
    /// `peak_space_bytes` / live bytes at the end: the Vertiorizon and Spooky way of measuring a
    /// fill, where early ratios of small trees do not matter.
    pub peak_space_over_final_live: f64,
    /// Bytes written by flushes and compactions into each level (index = level).
    pub bytes_written_per_level: Vec<u64>,
    /// Data blocks written by flushes and compactions into each level (index = level; empty
    /// unless blocks are recorded, see [`crate::SimConfig::block_size`]). Blocks a table refers
    /// to in another file are not written.
    pub blocks_written_per_level: Vec<u64>,
    /// Data blocks block-preserving merges kept in each level instead of rewriting them (index
    /// = level).
    pub blocks_preserved_per_level: Vec<u64>,
    /// Buffer flushes.
    pub flushes: u64,
    /// Merges executed.
    pub compactions: u64,
    /// Tables moved without rewriting (counted per plan).
    pub trivial_moves: u64,
    /// Most sorted runs alive at once.
    pub max_sorted_runs: u64,
    /// Sorted runs at the end.
    pub final_sorted_runs: u64,
    /// Most tables alive at once.
    pub max_tables: u64,
    /// Tables at the end.
    pub final_tables: u64,
    /// Most tables being written at the same moment (flush plus one per running compaction; only
    /// above 1 in timed mode, where compactions overlap).
    pub max_tables_written_concurrently: u64,
    /// Most compactions running at once.
    pub max_concurrent_jobs: u64,
    /// Simulated seconds the writer waited for compactions.
    pub stall_seconds: f64,
    /// Simulated seconds elapsed (0 in synchronous mode).
    pub simulated_seconds: f64,
    /// Each workload phase on its own (empty when the operations were fed one by one without
    /// [`crate::Simulator::begin_phase`]): a fill's write amplification does not hide the
    /// steady state's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseReport>,
    /// Modelled I/Os per point lookup at the end: Σ over runs of the run's Bloom false-positive
    /// rate, plus 1.
    pub lookup_cost: f64,
    /// The same, averaged over the run (each flush interval weighted by the bytes ingested in it).
    pub avg_lookup_cost: f64,
    /// Bloom filter bits per key over every table at the end (entries-weighted): the filter
    /// memory the lookup cost was bought with.
    pub filter_bits_per_key: f64,
    /// Runs whose key range holds a random key (of the tree's key range), averaged over the
    /// run like `avg_lookup_cost`: the runs a point lookup consults, filters and all.
    pub avg_runs_probed: f64,
    /// Sorted runs a range scan touches at the end (every run).
    pub range_scan_runs: u64,
    /// The same, averaged over the run.
    pub avg_range_scan_runs: f64,
    /// Per-level shape at the end.
    pub levels: Vec<LevelReport>,
    /// Shape after every flush.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelineSample>,
    /// Wall-clock seconds the simulation took (set by the caller).
    pub wall_seconds: f64,
    /// Seconds spent in the policy's decisions (picks, flush plans, holds), a part of
    /// `wall_seconds`.
    pub policy_seconds: f64,
    /// The autopilot's decisions, oldest first ([`crate::Simulator::with_autopilot`]; empty
    /// without it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub autopilot: Vec<strata_policy::autopilot::Decision>,
    /// Every flush and plan in the order they were installed, when [`crate::SimConfig::trace`]
    /// is on (empty otherwise).
    #[serde(skip)]
    pub trace: Vec<crate::TraceEvent>,
}

impl SimReport {
    /// Keeps at most `points` timeline samples, evenly spaced, always including the last.
    pub fn thin_timeline(&mut self, points: usize) {
        let n = self.timeline.len();
        if points == 0 {
            self.timeline.clear();
            return;
        }
        if n <= points {
            return;
        }
        let step = n.div_ceil(points);
        let last = self.timeline.last().cloned();
        let mut kept: Vec<TimelineSample> = self.timeline.iter().step_by(step).cloned().collect();
        if kept.last() != last.as_ref() {
            kept.extend(last);
        }
        self.timeline = kept;
    }

    /// The run's shape at the end, one level per line.
    pub fn shape(&self) -> String {
        let mut out = String::new();
        for l in &self.levels {
            let _ = writeln!(
                out,
                "  L{}: {} runs, {} tables, {}",
                l.level,
                l.runs,
                l.tables,
                human_bytes(l.bytes)
            );
        }
        out
    }
}

/// Bytes in a compact human form (binary units, one decimal).
pub fn human_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes >= 1 << 30 {
        format!("{:.1}GiB", b / (1u64 << 30) as f64)
    } else if bytes >= 1 << 20 {
        format!("{:.1}MiB", b / (1u64 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.1}KiB", b / 1024.0)
    } else {
        format!("{bytes}B")
    }
}

/// A side-by-side table of reports, one row per policy. "peak SA", "durable" and "transient" are
/// peaks of ratios over the run (which a fill reaches early, while the tree is small);
/// "peak/final" is the peak of table bytes over the final live bytes.
pub fn comparison_table(reports: &[SimReport]) -> String {
    // With several phases (a fill, then updates), the last phase's write amplification is the
    // steady state the fill's would hide.
    let last_phase = reports
        .iter()
        .find(|r| r.phases.len() > 1)
        .and_then(|r| r.phases.last())
        .map(|p| format!("WA {}", p.name));
    let mut header = vec![
        "policy",
        "WA",
        "peak SA",
        "durable",
        "transient",
        "peak/final",
        "flushes",
        "merges",
        "moves",
        "max runs",
        "lookup",
        "avg lookup",
        "wall s",
    ];
    if let Some(name) = &last_phase {
        header.insert(2, name);
    }
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let mut row = vec![
                r.policy.clone(),
                format!("{:.2}", r.write_amp),
                format!("{:.2}", r.peak_space_amp),
                format!("{:.2}", r.peak_durable_space_amp),
                format!("{:.2}", r.peak_transient_space_amp),
                format!("{:.2}", r.peak_space_over_final_live),
                r.flushes.to_string(),
                r.compactions.to_string(),
                r.trivial_moves.to_string(),
                r.max_sorted_runs.to_string(),
                format!("{:.3}", r.lookup_cost),
                format!("{:.3}", r.avg_lookup_cost),
                format!("{:.1}", r.wall_seconds),
            ];
            if last_phase.is_some() {
                let wa = r.phases.last().filter(|_| r.phases.len() > 1);
                row.insert(
                    2,
                    wa.map_or("-".to_string(), |p| format!("{:.2}", p.write_amp)),
                );
            }
            row
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c == 0 {
                    format!("{s:<w$}", w = widths[c])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(header.clone(), &mut out);
    for r in &rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}
