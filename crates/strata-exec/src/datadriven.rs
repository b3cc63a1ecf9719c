//! The data-driven policy test harness (feature `datadriven`): a text LSM shape in, the policy's
//! decision out, the way Pebble tests its compaction picker. The built-in policies' tests
//! (`crates/strata-policy/testdata/`) and a policy written outside the workspace
//! (`examples/custom-policy`) run their files through [`run_policy_tests`].
//!
//! Directives:
//!
//! - `define policy=NAME [option=value ...]` with a version in the text form as input: sets the
//!   policy and the current version. Options are the policy's registered options (`strata sim
//!   --list-policies`); `write_buffer_size` and `target_file_size` default to 1MiB here.
//! - `flush smallest=K largest=K [size=S]`: prints the flush plan for a buffer with that range.
//! - `pick [leased=ID | leased=(ID,ID,...)] [urgent=true]`: prints the next plan (validated against the
//!   version) or `none`; with `urgent=true` the policy is asked for a worker reserved for urgent
//!   plans, and a normal plan it returns anyway prints as `not urgent:` (no executor starts it).
//! - `targets`: prints the dynamic level targets (leveled only).
//! - `apply-flush smallest=K largest=K size=S` and `apply [leased=...]`: execute the flush plan or
//!   the picked plan on the shape only, through the shared executor's edits (`strata_exec`): a
//!   merge writes one table per piece between its cut rule's boundaries, each covering the
//!   inputs' keys in that piece (ending at the largest input endpoint inside it) with the inputs'
//!   sizes shared evenly among the pieces each spans; a piece above `split_above` is split at
//!   input endpoints into as many equal parts as the rule asks, where endpoints allow. Target
//!   table sizes are not modelled (shapes know no keys). Prints the plan and the new version.
//! - `run flushes=N smallest=K largest=K size=S`: N times, flush and then pick and apply until the
//!   policy returns none; prints one line per plan and the final version.
//! - `stats [puts=N] [point_reads=N] [scans=N] [bytes=S] [skew=α]`: sets the workload statistics
//!   later directives pass to the policy (all zero, no skew estimate, until set; `define` resets
//!   them).
//!
//! Run with `REWRITE=1` to regenerate expectations (then read the diff).

// A test harness: a failed expectation or a malformed file is a test failure, reported by panic.
#![allow(clippy::unwrap_used)]

use crate::edit::{compaction_edit, flush_edit};
use std::sync::Arc;
use strata_meta::{parse_key, parse_size, Bytes, TableId, TableMeta, Version};
use strata_policy::{
    build_policy, registry, BufferSummary, CompactionPolicy, CutRule, FlushPlan, Leases, Leveled,
    PickContext, Plan, PlanAction, PolicySpec, Priority, WorkloadStats,
};

struct State {
    policy: Option<Arc<dyn CompactionPolicy>>,
    spec: PolicySpec,
    version: Version,
    stats: WorkloadStats,
}

/// The value of option `name` in `spec`, or its registered default.
fn option(spec: &PolicySpec, name: &str) -> String {
    spec.options
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| {
            let registration = registry::lookup(&spec.name).expect("registered");
            let declared = registration.options.iter().find(|o| o.name == name);
            declared.expect("declared option").default.to_string()
        })
}

fn arg<T: std::str::FromStr>(tc: &mut datadriven::TestCase, name: &str) -> Option<T> {
    tc.try_take_arg::<String>(name).ok().flatten().map(|v| {
        v.parse::<T>()
            .unwrap_or_else(|_| panic!("bad value {v:?} for {name}"))
    })
}

fn size_arg(tc: &mut datadriven::TestCase, name: &str) -> Option<u64> {
    tc.try_take_arg::<String>(name)
        .ok()
        .flatten()
        .map(|v| parse_size(&v).unwrap_or_else(|e| panic!("{name}: {e}")))
}

fn buffer(tc: &mut datadriven::TestCase) -> BufferSummary {
    let smallest = parse_key(&arg::<String>(tc, "smallest").expect("smallest=")).expect("key");
    let largest = parse_key(&arg::<String>(tc, "largest").expect("largest=")).expect("key");
    let bytes = size_arg(tc, "size").unwrap_or(1 << 20);
    BufferSummary {
        smallest,
        largest,
        entries: bytes / 100,
        bytes,
    }
}

fn leases_arg(tc: &mut datadriven::TestCase, version: &Version) -> Leases {
    let mut leases = Leases::new();
    let ids = tc.try_take_args::<u64>("leased").expect("table ids");
    if let Some(ids) = ids {
        for id in ids {
            let id = TableId(id);
            let loc = version.table_location(id).expect("leased table exists");
            // Lease the table through a throwaway plan that only takes it as input.
            let plan = Plan {
                action: PlanAction::Drop,
                inputs: vec![strata_policy::PlanInput {
                    level: loc.level,
                    run: loc.run,
                    tables: vec![id],
                }],
                output: None,
                policy_state: None,
                reason: String::new(),
                priority: Priority::Normal,
            };
            leases.acquire(&plan, version).expect("lease");
        }
    }
    leases
}

/// Executes `plan` on the shape through the shared executor (see the module documentation for
/// how a merge's output is shaped).
fn apply_plan(version: &Version, plan: &Plan) -> Version {
    let mut outputs = Vec::new();
    if let (PlanAction::Merge, Some(output)) = (plan.action, &plan.output) {
        let inputs: Vec<TableMeta> = plan
            .input_tables()
            .map(|t| version.table(t).expect("input exists").as_ref().clone())
            .collect();
        outputs = cut_shape(version.next_table_id(), &inputs, &output.cut);
        for t in &mut outputs {
            t.bloom_bits_per_key = output.bloom_bits_per_key;
        }
    }
    let edit = compaction_edit(version, plan, outputs)
        .unwrap_or_else(|e| panic!("plan has no edit: {e}\n{plan}"));
    version
        .apply(&edit)
        .unwrap_or_else(|e| panic!("plan does not apply: {e}\n{plan}"))
}

/// The tables a merge of `inputs` writes under `rule`, on shapes (module documentation).
fn cut_shape(first_id: u64, inputs: &[TableMeta], rule: &CutRule) -> Vec<TableMeta> {
    let all = combined(first_id, inputs.iter());
    let cuts: Vec<&Bytes> = rule
        .boundaries
        .iter()
        .filter(|b| all.smallest < **b && **b <= all.largest)
        .collect();
    let piece_of = |key: &Bytes| cuts.partition_point(|b| *b <= key);
    let mut endpoints: Vec<&Bytes> = inputs
        .iter()
        .flat_map(|t| [&t.smallest, &t.largest])
        .collect();
    endpoints.sort();
    endpoints.dedup();
    let mut outputs: Vec<TableMeta> = Vec::new();
    for piece in 0..=cuts.len() {
        let low = if piece == 0 {
            &all.smallest
        } else {
            cuts[piece - 1]
        };
        let high = cuts.get(piece).copied();
        let mut share = 0.0f64;
        for t in inputs {
            let (a, b) = (piece_of(&t.smallest), piece_of(&t.largest));
            if (a..=b).contains(&piece) {
                share += t.size as f64 / (b - a + 1) as f64;
            }
        }
        if share == 0.0 {
            continue;
        }
        // Split points: input endpoints inside the piece, evenly chosen.
        let inside: Vec<&Bytes> = endpoints
            .iter()
            .copied()
            .filter(|e| *e > low && high.is_none_or(|h| *e < h))
            .collect();
        let parts = match rule.split_above {
            Some(limit) if share > limit as f64 => (share / limit as f64).ceil() as usize,
            _ => 1,
        }
        .min(inside.len() + 1);
        let mut starts = vec![low];
        for j in 1..parts {
            starts.push(inside[j * inside.len() / parts]);
        }
        starts.dedup();
        for (j, start) in starts.iter().enumerate() {
            let end = starts.get(j + 1).copied().or(high);
            let largest = endpoints
                .iter()
                .copied()
                .filter(|e| *e >= *start && end.is_none_or(|h| *e < h))
                .max()
                .unwrap_or(start);
            let size = (share / starts.len() as f64).round() as u64;
            let mut t = all.clone();
            t.id = TableId(first_id + outputs.len() as u64);
            t.smallest = (*start).clone();
            t.largest = largest.clone();
            t.size = size;
            t.entries = (all.entries as f64 * size as f64 / all.size.max(1) as f64) as u64;
            t.tombstones = 0;
            outputs.push(t);
        }
    }
    outputs
}

fn combined<'a>(id: u64, tables: impl Iterator<Item = &'a TableMeta>) -> TableMeta {
    let mut out: Option<TableMeta> = None;
    for t in tables {
        out = Some(match out {
            None => TableMeta {
                id: TableId(id),
                ..t.clone()
            },
            Some(mut o) => {
                o.smallest = o.smallest.min(t.smallest.clone());
                o.largest = o.largest.max(t.largest.clone());
                o.size += t.size;
                o.entries += t.entries;
                o.tombstones += t.tombstones;
                o.seqnos = o.seqnos.union(t.seqnos);
                o
            }
        });
    }
    out.expect("at least one table")
}

fn apply_flush(version: &Version, plan: &FlushPlan, buffer: &BufferSummary) -> Version {
    let mut flushed = TableMeta::new(
        version.next_table_id(),
        buffer.smallest.clone(),
        buffer.largest.clone(),
        buffer.bytes,
    );
    flushed.entries = buffer.entries;
    // Sequence numbers continue from the newest already in the tree, one per entry, as the
    // engine's and the simulator's do (policies that place runs in time read them).
    let newest = version
        .levels()
        .iter()
        .flat_map(|l| l.tables())
        .map(|t| t.seqnos.largest)
        .max()
        .unwrap_or(0);
    flushed.seqnos = strata_meta::SeqRange {
        smallest: newest + 1,
        largest: newest + buffer.entries.max(1),
    };
    flushed.bloom_bits_per_key = plan.output.bloom_bits_per_key;
    let mut parts = vec![flushed];
    for &t in &plan.merge_with {
        parts.push(
            version
                .table(t)
                .expect("merge_with table exists")
                .as_ref()
                .clone(),
        );
    }
    let mut tables = cut_shape(version.next_table_id(), &parts, &plan.output.cut);
    for t in &mut tables {
        t.bloom_bits_per_key = plan.output.bloom_bits_per_key;
    }
    let edit = flush_edit(version, plan, tables)
        .unwrap_or_else(|e| panic!("flush has no edit: {e}\n{plan}"));
    version
        .apply(&edit)
        .unwrap_or_else(|e| panic!("flush does not apply: {e}\n{plan}"))
}

fn pick(
    policy: &dyn CompactionPolicy,
    version: &Version,
    leases: &Leases,
    stats: &WorkloadStats,
) -> Result<Option<Plan>, String> {
    pick_for(policy, version, leases, stats, false)
}

/// [`pick`] for a worker reserved for urgent plans (`urgent_only`) or an ordinary one.
fn pick_for(
    policy: &dyn CompactionPolicy,
    version: &Version,
    leases: &Leases,
    stats: &WorkloadStats,
    urgent_only: bool,
) -> Result<Option<Plan>, String> {
    let ctx = PickContext {
        urgent_only,
        ..PickContext::new(leases, stats)
    };
    let plan = policy
        .pick(version, &ctx)
        .map_err(|e| format!("error: {e}\n"))?;
    if let Some(p) = &plan {
        p.validate(version, |t| leases.is_table_leased(t))
            .map_err(|e| format!("{p}invalid: {e}\n"))?;
    }
    Ok(plan)
}

fn one_line(plan: &Plan) -> String {
    let text = plan.to_string();
    let first = text.lines().next().unwrap_or_default().to_string();
    format!("{first}  # {}", plan.reason)
}

/// Runs every data-driven file under `path` (a file or a directory), as described in the
/// module documentation. Policies must be registered first; `REWRITE=1` rewrites expectations.
/// Panics, naming the file and line, when an expectation differs: it is a test harness.
pub fn run_policy_tests(path: &str) {
    datadriven::walk(path, |file| {
        let mut state = State {
            policy: None,
            spec: PolicySpec::new("leveled"),
            version: Version::new(),
            stats: WorkloadStats::default(),
        };
        file.run(|tc| -> String {
            match tc.directive.as_str() {
                "define" => {
                    let name: String = arg(tc, "policy").expect("policy=");
                    let mut spec = PolicySpec::new(name);
                    let mut names: Vec<String> = tc.args.keys().cloned().collect();
                    names.sort();
                    for key in names {
                        let value: String = arg(tc, &key).expect("a value");
                        spec = spec.with(key, value);
                    }
                    let built = spec
                        .fill_defaults([
                            ("write_buffer_size", "1MiB"),
                            ("target_file_size", "1MiB"),
                        ])
                        .and_then(|()| build_policy(&spec));
                    match (built, Version::parse(&tc.input)) {
                        (Ok(p), Ok(v)) => {
                            state.policy = Some(p);
                            state.spec = spec;
                            state.version = v;
                            state.stats = WorkloadStats::default();
                            "ok\n".to_string()
                        }
                        (Err(e), _) => format!("error: {e}\n"),
                        (_, Err(e)) => format!("error: {e}\n"),
                    }
                }
                "flush" | "apply-flush" => {
                    let policy = state.policy.clone().expect("define first");
                    let buf = buffer(tc);
                    let leases = Leases::new();
                    let ctx = PickContext::new(&leases, &state.stats).with_buffer(&buf);
                    match policy.plan_flush(&state.version, &ctx) {
                        Err(e) => format!("error: {e}\n"),
                        Ok(plan) if tc.directive == "flush" => plan.to_string(),
                        Ok(plan) => {
                            state.version = apply_flush(&state.version, &plan, &buf);
                            format!("{plan}{}", state.version)
                        }
                    }
                }
                "pick" | "apply" => {
                    let policy = state.policy.clone().expect("define first");
                    let leases = leases_arg(tc, &state.version);
                    let urgent = arg::<bool>(tc, "urgent").unwrap_or(false);
                    let version = &state.version;
                    match pick_for(policy.as_ref(), version, &leases, &state.stats, urgent) {
                        Err(e) => e,
                        Ok(None) => "none\n".to_string(),
                        Ok(Some(plan)) if !crate::sources::may_run_on(plan.priority, urgent) => {
                            format!("not urgent: {plan}")
                        }
                        Ok(Some(plan)) if tc.directive == "pick" => plan.to_string(),
                        Ok(Some(plan)) => {
                            state.version = apply_plan(&state.version, &plan);
                            format!("{plan}{}", state.version)
                        }
                    }
                }
                "targets" => {
                    let spec = &state.spec;
                    let size = |name| parse_size(&option(spec, name)).expect("a size");
                    let mut leveled = Leveled::new()
                        .with_size_ratio(option(spec, "size_ratio").parse().expect("a ratio"))
                        .with_num_levels(option(spec, "num_levels").parse().expect("levels"))
                        .with_write_buffer_size(size("write_buffer_size"));
                    let base = option(spec, "max_bytes_for_level_base");
                    if !base.is_empty() {
                        leveled = leveled
                            .with_max_bytes_for_level_base(Some(size("max_bytes_for_level_base")));
                    }
                    let t = leveled.level_targets(&state.version);
                    let mut out = format!("base level: L{}\n", t.base_level);
                    for (l, target) in t.targets.iter().enumerate().skip(1) {
                        out.push_str(&format!("L{l}: {target:.0}\n"));
                    }
                    out
                }
                "run" => {
                    let policy = state.policy.clone().expect("define first");
                    let flushes: u64 = arg(tc, "flushes").expect("flushes=");
                    let buf = buffer(tc);
                    let mut out = String::new();
                    let leases = Leases::new();
                    for n in 1..=flushes {
                        let ctx = PickContext::new(&leases, &state.stats).with_buffer(&buf);
                        let plan = match policy.plan_flush(&state.version, &ctx) {
                            Ok(p) => p,
                            Err(e) => return format!("{out}flush {n}: error: {e}\n"),
                        };
                        state.version = apply_flush(&state.version, &plan, &buf);
                        for _ in 0..1000 {
                            match pick(policy.as_ref(), &state.version, &leases, &state.stats) {
                                Err(e) => return format!("{out}flush {n}: {e}\n"),
                                Ok(None) => break,
                                Ok(Some(p)) => {
                                    out.push_str(&format!("flush {n}: {}\n", one_line(&p)));
                                    state.version = apply_plan(&state.version, &p);
                                }
                            }
                        }
                    }
                    out.push_str(&state.version.to_string());
                    out
                }
                "stats" => {
                    let count = |tc: &mut datadriven::TestCase, name| arg::<u64>(tc, name);
                    let s = &mut state.stats;
                    s.puts = count(tc, "puts").unwrap_or(s.puts);
                    s.point_reads = count(tc, "point_reads").unwrap_or(s.point_reads);
                    if let Some(scans) = count(tc, "scans") {
                        // Scans of one entry: the harness needs a count, not lengths.
                        s.scans = strata_policy::ScanLengths::default();
                        s.scans.add_to_bucket(1, scans);
                    }
                    s.bytes_ingested = size_arg(tc, "bytes").unwrap_or(s.bytes_ingested);
                    if let Some(alpha) = arg::<f64>(tc, "skew") {
                        s.skew = Some(alpha);
                    }
                    format!("{s:?}\n")
                }
                other => panic!("unknown directive {other}"),
            }
        })
    });
}
