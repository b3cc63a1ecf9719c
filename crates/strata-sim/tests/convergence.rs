//! Every policy, on random workloads and shapes, converges and keeps the tree correct: after any
//! sequence of flushes and compactions a reader sees exactly the keys a plain set model holds.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use proptest::prelude::*;
use std::collections::BTreeSet;
use strata_policy::{build_policy, testing, PolicySpec};
use strata_sim::{SimConfig, Simulator, Timing};

#[derive(Clone, Debug)]
enum TestOp {
    Put(u64),
    Delete(u64),
}

fn ops(max_key: u64) -> impl Strategy<Value = Vec<TestOp>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0..max_key).prop_map(TestOp::Put),
            1 => (0..max_key).prop_map(TestOp::Delete),
        ],
        1..600,
    )
}

fn timing() -> impl Strategy<Value = Timing> {
    prop_oneof![
        Just(Timing::Synchronous),
        (1.0f64..50.0, 1usize..4, 0usize..3).prop_map(|(speed, jobs, reserved)| Timing::Timed {
            ingest_bytes_per_sec: 1000.0,
            job_bytes_per_sec: 1000.0 * speed,
            max_jobs: jobs,
            reserved_jobs: reserved,
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_policy_converges_and_keeps_the_right_keys(
        policy_index in 0..testing::policies_to_test().len(),
        size_ratio in 2.0f64..6.0,
        buffer_entries in 1u64..12,
        table_entries in 1u64..8,
        levels in 1usize..5,
        l0_trigger in prop::option::of(1usize..5),
        dynamic in any::<bool>(),
        timing in timing(),
        ops in ops(300),
    ) {
        let entry = 116;
        let name = testing::policies_to_test()[policy_index];
        // Every policy takes the options it declares.
        let mut spec: PolicySpec = name.parse().unwrap();
        let mut options = vec![
            ("size_ratio", size_ratio.to_string()),
            ("write_buffer_size", (buffer_entries * entry).to_string()),
            ("target_file_size", (table_entries * entry).to_string()),
            ("num_levels", "5".to_string()),
            ("dynamic_level_bytes", dynamic.to_string()),
            ("levels", levels.to_string()),
            ("expected_data_size", (ops.len() as u64 * entry / 3).max(1).to_string()),
        ];
        if let Some(trigger) = l0_trigger {
            options.push(("level0_trigger", trigger.to_string()));
        }
        spec.fill_defaults(options).unwrap();
        let policy = build_policy(&spec).unwrap();
        let config = SimConfig {
            buffer_size: buffer_entries * entry,
            timing,
            check_invariants: true,
            max_plans_per_flush: 10_000,
            ..SimConfig::default()
        };
        let mut sim = Simulator::new(policy, config).unwrap();
        let mut model = BTreeSet::new();
        for (i, op) in ops.iter().enumerate() {
            match *op {
                TestOp::Put(k) => {
                    sim.put(k).unwrap();
                    model.insert(k);
                }
                TestOp::Delete(k) => {
                    sim.delete(k).unwrap();
                    model.remove(&k);
                }
            }
            sim.set_live_entries(model.len() as u64);
            if i % 97 == 0 {
                prop_assert_eq!(&sim.live_keys(), &model, "{} after {} ops", name, i + 1);
            }
        }
        sim.flush().unwrap();
        prop_assert_eq!(&sim.live_keys(), &model, "{} at the end", name);
        let report = sim.finish().unwrap();
        prop_assert!(report.write_amp >= 0.0);
        prop_assert!(report.flushes >= 1);
    }
}
