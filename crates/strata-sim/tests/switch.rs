//! Live policy switches (`Simulator::set_policy`, the engine's `Db::set_policy`): every
//! built-in policy hands the tree it built to every other, which takes it over from the shape
//! it finds and keeps every key.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::sync::Arc;
use strata_policy::{build_policy, registry, CompactionPolicy, PolicySpec};
use strata_sim::{SimConfig, Simulator};
use strata_workload::{PresetParams, WorkloadSpec};

const BUFFER: u64 = 64 << 10;
const KEYS: u64 = 20_000;

fn policy(name: &str) -> Arc<dyn CompactionPolicy> {
    let mut spec = PolicySpec::new(name);
    spec.fill_defaults([
        ("write_buffer_size", BUFFER.to_string()),
        ("target_file_size", BUFFER.to_string()),
        ("expected_data_size", (KEYS * 116).to_string()),
    ])
    .unwrap();
    build_policy(&spec).unwrap()
}

fn ops(sim: &mut Simulator, rng: &mut StdRng, model: &mut BTreeSet<u64>, n: usize) {
    for _ in 0..n {
        let key = rng.random_range(0..KEYS);
        if rng.random_ratio(1, 5) {
            sim.delete(key).unwrap();
            model.remove(&key);
        } else {
            sim.put(key).unwrap();
            model.insert(key);
        }
    }
}

#[test]
fn every_policy_takes_over_every_other_policys_tree() {
    let names = registry::builtin_names();
    let mut failures = Vec::new();
    for (i, from) in names.iter().enumerate() {
        for to in &names {
            if from == to {
                continue;
            }
            let config = SimConfig {
                buffer_size: BUFFER,
                check_invariants: true,
                trace: true,
                ..SimConfig::default()
            };
            let mut sim = Simulator::new(policy(from), config).unwrap();
            let mut rng = StdRng::seed_from_u64(i as u64);
            let mut model = BTreeSet::new();
            ops(&mut sim, &mut rng, &mut model, 25_000);
            let before = sim.version().run_count();
            let tree_bytes = sim.version().size();
            let traced = sim.trace().len();
            if let Err(e) = sim.set_policy(policy(to)) {
                failures.push(format!("{from} -> {to}: switch: {e}"));
                continue;
            }
            // Synchronously, the handover is over when the switch returns, and the new policy
            // has started. The handover rewrote each byte twice at most (down into the entry
            // level, then joined there).
            let v = sim.version();
            assert_eq!(v.policy().map(|p| p.split(':').next().unwrap()), Some(*to));
            let handover_bytes: u64 = sim.trace()[traced..]
                .iter()
                .filter(|e| e.reason.starts_with("handover"))
                .map(|e| e.bytes_written)
                .sum();
            if v.in_handover() || handover_bytes > 2 * tree_bytes {
                failures.push(format!(
                    "{from} -> {to}: handover left {v} after writing {handover_bytes} of a \
                     {tree_bytes}-byte tree"
                ));
            }
            ops(&mut sim, &mut rng, &mut model, 25_000);
            if let Err(e) = sim.flush() {
                failures.push(format!("{from} -> {to}: after: {e}"));
                continue;
            }
            if sim.live_keys() != model {
                failures.push(format!("{from} -> {to}: keys differ"));
            }
            eprintln!(
                "{from:>20} -> {to:<20} runs {before:>4} -> {:>4}, handover wrote {:.2} of the tree",
                sim.version().run_count(),
                handover_bytes as f64 / tree_bytes.max(1) as f64
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// In timed mode a switch waits for the old policy's running jobs, and the handover runs as
/// jobs among flushes: a chain of switches through every built-in policy keeps every key.
#[test]
fn a_chain_of_switches_in_timed_mode_keeps_every_key() {
    let names = registry::builtin_names();
    let config = SimConfig {
        buffer_size: BUFFER,
        check_invariants: true,
        timing: strata_sim::Timing::Timed {
            ingest_bytes_per_sec: 4e6,
            job_bytes_per_sec: 8e6,
            max_jobs: 2,
            reserved_jobs: 1,
        },
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(policy(names[0]), config).unwrap();
    let mut rng = StdRng::seed_from_u64(99);
    let mut model = BTreeSet::new();
    for name in names.iter().skip(1).chain(names.first()) {
        ops(&mut sim, &mut rng, &mut model, 8_000);
        sim.set_policy(policy(name)).unwrap();
        assert_eq!(
            sim.version().policy().map(|p| p.split(':').next().unwrap()),
            Some(*name)
        );
        assert_eq!(sim.live_keys(), model, "switching to {name}");
    }
    ops(&mut sim, &mut rng, &mut model, 8_000);
    sim.flush().unwrap();
    assert_eq!(sim.live_keys(), model);
}

/// The autopilot's twin: the pilot's rule deciding on the simulated workload's windows and
/// switching through `set_policy`, with every decision in the report.
#[test]
fn the_autopilot_switches_when_its_advisor_says_so() {
    use strata_policy::autopilot::{Action, AutopilotOptions, PreferPolicy};
    let options = AutopilotOptions::new(std::sync::Arc::new(PreferPolicy {
        target: "tiered".to_string(),
        handover_bytes: 0,
    }))
    .with_every_bytes(u64::MAX)
    .with_every_ops(5_000)
    .with_min_window_ops(1_000);
    let params = PresetParams {
        entries: 20_000,
        ops: 20_000,
        ..PresetParams::default()
    };
    let workload = WorkloadSpec::preset("phase-change", &params).unwrap();
    let config = SimConfig {
        buffer_size: 64 << 10,
        check_invariants: true,
        ..SimConfig::default()
    };
    let sim = Simulator::new(build_policy(&PolicySpec::new("leveled")).unwrap(), config)
        .unwrap()
        .with_autopilot(options);
    let report = sim.run_workload(&workload, 3).unwrap();
    let switches: Vec<_> = report
        .autopilot
        .iter()
        .filter(|d| matches!(d.action, Action::Switch { .. }))
        .collect();
    // Two windows in a row agree, then one switch; once tiered runs it is predicted best.
    assert_eq!(switches.len(), 1, "{:#?}", report.autopilot);
    assert_eq!(report.autopilot[0].action, Action::Keep);
    assert!(report.autopilot.len() >= 10, "{}", report.autopilot.len());
    assert!(report.policy_options.keys().any(|k| k == "size_ratio"));
    assert_eq!(report.policy, "tiered");
}
