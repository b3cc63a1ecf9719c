//! Presets, TOML files, generators and the operation stream.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::collections::{HashMap, HashSet};
use strata_workload::*;

fn params() -> PresetParams {
    PresetParams {
        entries: 1000,
        ops: 2000,
        ..PresetParams::default()
    }
}

#[test]
fn every_preset_builds_and_validates() {
    for (name, _) in PRESETS {
        let w = WorkloadSpec::preset(name, &params()).unwrap();
        assert!(!w.phases.is_empty(), "{name}");
    }
    assert!(WorkloadSpec::preset("fillrandom,readrandom,deleterandom", &params()).is_ok());
    assert!(WorkloadSpec::preset("nope", &params())
        .unwrap_err()
        .contains("presets"));
    let r = WorkloadSpec::preset("readrandom", &params()).unwrap();
    assert_eq!(r.phases.len(), 2, "reads get an unmeasured fill first");
    assert!(!r.phases[0].measured);
}

#[test]
fn db_bench_phases_run_on_the_threads_asked_for() {
    let four = PresetParams {
        threads: 4,
        ..params()
    };
    let w = WorkloadSpec::preset(
        "fillrandom,readrandom,overwrite,seekrandom,deleterandom,readseq",
        &four,
    )
    .unwrap();
    let threads: Vec<(&str, usize)> = w
        .phases
        .iter()
        .map(|p| (p.name.as_str(), p.threads))
        .collect();
    assert_eq!(
        threads,
        [
            ("fillrandom", 4),
            ("readrandom", 4),
            ("overwrite", 4),
            ("seekrandom", 4),
            ("deleterandom", 4),
            ("readseq", 1)
        ]
    );
    // The fill a read-only list gets first stays on one thread.
    let r = WorkloadSpec::preset("readrandom", &four).unwrap();
    assert_eq!((r.phases[0].threads, r.phases[1].threads), (1, 4));
}

#[test]
fn db_bench_phases_after_the_fill_run_their_own_count_of_operations() {
    let p = PresetParams {
        entries: 1000,
        db_bench_ops: Some(70),
        ..params()
    };
    let w = WorkloadSpec::preset("fillrandom,readrandom,multireadrandom,readseq", &p).unwrap();
    let ops: Vec<(&str, u64)> = w.phases.iter().map(|p| (p.name.as_str(), p.ops)).collect();
    assert_eq!(
        ops,
        [
            ("fillrandom", 1000),
            ("readrandom", 70),
            ("multireadrandom", 70),
            ("readseq", 1)
        ]
    );
    // Without a count, every phase runs --entries operations, as db_bench without --reads; a
    // read phase first gets a fill of --entries whatever the count.
    let w = WorkloadSpec::preset(
        "readrandom",
        &PresetParams {
            entries: 1000,
            ..params()
        },
    )
    .unwrap();
    assert_eq!(w.phases[0].ops, 1000);
    assert_eq!(w.phases[1].ops, 1000);
    let w = WorkloadSpec::preset("readrandom", &p).unwrap();
    assert_eq!((w.phases[0].ops, w.phases[1].ops), (1000, 70));
}

#[test]
fn workloads_load_from_toml() {
    let text = r#"
        name = "mine"
        key_size = 24
        [[phases]]
        name = "load"
        ops = 100
        mix = { insert = 1.0 }
        [[phases]]
        name = "run"
        ops = 100
        threads = 2
        mix = { read = 0.9, update = 0.1 }
        keys = { kind = "zipfian", theta = 0.8 }
    "#;
    let w = WorkloadSpec::from_toml(text).unwrap();
    assert_eq!(w.key_size, 24);
    assert!(w.policies.is_empty() && w.policy_options.is_empty());
    // A file can name policies and options for them.
    let with_policies = r#"
        name = "tuned"
        policies = ["leveled:level0_trigger=8", "tiered"]
        [policy_options]
        size_ratio = 6
        target_file_size = "8MiB"
        dynamic_level_bytes = true
        [[phases]]
        name = "load"
        ops = 100
        mix = { insert = 1.0 }
    "#;
    let p = WorkloadSpec::from_toml(with_policies).unwrap();
    assert_eq!(p.policies, vec!["leveled:level0_trigger=8", "tiered"]);
    assert_eq!(
        p.policy_option_args(),
        vec![
            "dynamic_level_bytes=true",
            "size_ratio=6",
            "target_file_size=8MiB"
        ]
    );
    assert_eq!(w.phases[1].keys, KeyDist::Zipfian { theta: 0.8 });
    assert!(WorkloadSpec::from_toml("name = 1").is_err());
    let no_ops = "name = \"x\"\n[[phases]]\nname = \"p\"\nmix = { read = 1.0 }\n";
    assert!(WorkloadSpec::from_toml(no_ops)
        .unwrap_err()
        .contains("neither ops"));
}

#[test]
fn random_inserts_are_unique_and_tracked_as_live() {
    let w = WorkloadSpec::preset("ycsb-a", &params()).unwrap();
    let space = KeySpace::new();
    let mut g = Generator::new(&w.phases[0], space.clone(), 1);
    let keys: HashSet<u64> = std::iter::from_fn(|| g.next_op(1000))
        .map(|o| o.key)
        .collect();
    assert_eq!(keys.len(), 1000);
    assert_eq!(space.live_keys(), 1000);
    // The run phase reads and updates only inserted keys.
    let mut r = Generator::new(&w.phases[1], space.clone(), 2);
    for _ in 0..2000 {
        let op = r.next_op(0).unwrap();
        assert!(keys.contains(&op.key), "{op:?}");
    }
}

#[test]
fn the_threads_of_a_random_fill_draw_disjoint_keys() {
    let w = WorkloadSpec::preset("fillrandom", &params()).unwrap();
    let space = KeySpace::new();
    let mut seen: HashMap<u64, u64> = HashMap::new();
    for t in 0..3u64 {
        let mut g = Generator::new(&w.phases[0], space.clone(), 10 + t).with_insert_stream(t, 3);
        for _ in 0..500 {
            let key = g.next_op(1000).unwrap().key;
            assert!(key < 1000);
            assert_eq!(key % 3, t, "thread {t} drew {key}");
            *seen.entry(key).or_default() += 1;
        }
    }
    // Every residue class is reached, and a stream of one draws what a plain generator draws.
    assert!(seen.len() > 600, "{} distinct keys", seen.len());
    let mut one = Generator::new(&w.phases[0], KeySpace::new(), 5).with_insert_stream(0, 1);
    let mut plain = Generator::new(&w.phases[0], KeySpace::new(), 5);
    for _ in 0..100 {
        assert_eq!(one.next_op(1000), plain.next_op(1000));
    }
}

#[test]
fn zipfian_reads_concentrate_and_deletes_reduce_the_live_set() {
    let w = WorkloadSpec::preset("ycsb-c", &params()).unwrap();
    let space = KeySpace::new();
    let mut load = Generator::new(&w.phases[0], space.clone(), 1);
    while load.next_op(1000).is_some() {}
    let mut run = Generator::new(&w.phases[1], space.clone(), 3);
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for _ in 0..5000 {
        *counts.entry(run.next_op(0).unwrap().key).or_default() += 1;
    }
    // Uniform picks would touch ~993 keys, the busiest ~15 times; zipf(0.99) puts about 13%
    // of picks on the hottest key.
    assert!(counts.len() < 900, "{} distinct keys", counts.len());
    assert!(
        counts.values().max().copied().unwrap_or(0) > 300,
        "{counts:?}"
    );
    let d = WorkloadSpec::preset("fillrandom,deleterandom", &params()).unwrap();
    let space = KeySpace::new();
    let mut fill = Generator::new(&d.phases[0], space.clone(), 1);
    while fill.next_op(1000).is_some() {}
    let filled = space.live_keys();
    assert!(
        filled > 500 && filled < 1000,
        "uniform-domain fill leaves repeats: {filled}"
    );
    let mut del = Generator::new(&d.phases[1], space.clone(), 2);
    while del.next_op(1000).is_some() {}
    assert!(space.live_keys() < filled / 2);
}

#[test]
fn nearly_sorted_ingest_has_bounded_disorder_and_tpcc_deletes_oldest() {
    let mut p = params();
    p.disorder = 50;
    let w = WorkloadSpec::preset("nearly-sorted", &p).unwrap();
    let mut g = Generator::new(&w.phases[0], KeySpace::new(), 1);
    let keys: Vec<u64> = std::iter::from_fn(|| g.next_op(1000))
        .map(|o| o.key)
        .collect();
    assert!(keys
        .iter()
        .enumerate()
        .all(|(i, &k)| (k as i64 - i as i64).abs() < 200));
    assert!(keys.windows(2).any(|w| w[0] > w[1]), "some disorder");
    let t = WorkloadSpec::preset("partial-merge-tpcc", &params()).unwrap();
    let space = KeySpace::new();
    let mut load = Generator::new(&t.phases[0], space.clone(), 1);
    while load.next_op(1000).is_some() {}
    let mut run = Generator::new(&t.phases[1], space.clone(), 2);
    let deletes: Vec<u64> = (0..2000)
        .filter_map(|_| run.next_op(0))
        .filter(|o| o.kind == OpKind::Delete)
        .map(|o| o.key)
        .collect();
    assert!(!deletes.is_empty());
    // Order ids of each district are deleted in ascending order.
    let mut last: HashMap<u64, u64> = HashMap::new();
    for k in deletes {
        let (district, order) = (k >> TPCC_ORDER_BITS, k & ((1 << TPCC_ORDER_BITS) - 1));
        assert!(last.get(&district).is_none_or(|&o| order > o));
        last.insert(district, order);
    }
}

#[test]
fn uniform_unique_inserts_new_keys_and_deletes_live_ones() {
    // The partial-merge paper's Uniform: a 50/50 mix keeps the tree's size, since every insert
    // adds a key that is not live and every delete removes one that is.
    let w = WorkloadSpec::preset("partial-merge-uniform", &params()).unwrap();
    assert_eq!(w.key_size, PresetParams::default().key_size);
    let ops: Vec<Op> = OpStream::new(&w, 3).unwrap().collect();
    let mut live = HashSet::new();
    for op in &ops {
        match op.kind {
            OpKind::Insert => assert!(live.insert(op.key), "insert of live key {}", op.key),
            OpKind::Delete => assert!(live.remove(&op.key), "delete of absent key {}", op.key),
            other => panic!("unexpected {other:?}"),
        }
        assert!(op.key < 1_000_000_000);
    }
    // 1000 loaded, then 4000 settling and 2000 measured operations, half of them deletes.
    assert_eq!(ops.len(), 7000);
    let deletes = ops.iter().filter(|o| o.kind == OpKind::Delete).count();
    assert!((2400..3600).contains(&deletes), "{deletes} deletes of 6000");
    assert_eq!(live.len(), 7000 - 2 * deletes);
}

#[test]
fn keys_encode_in_numeric_byte_order() {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    encode_key(&mut a, 255, 16);
    encode_key(&mut b, 256, 16);
    assert_eq!(a.len(), 16);
    assert!(a < b);
    // Four-byte keys keep the order of numbers below 2^32.
    let (mut c, mut d) = (Vec::new(), Vec::new());
    encode_key(&mut c, 255, 4);
    encode_key(&mut d, u64::from(u32::MAX), 4);
    assert_eq!(c, [0, 0, 0, 255]);
    assert_eq!(d, [255; 4]);
    encode_key(&mut a, 256, 4);
    assert!(c < a && a < d);
}

#[test]
fn the_stream_replays_the_phases_in_order_like_thread_zero_of_a_run() {
    let w = WorkloadSpec::preset("updatezipf", &params()).unwrap();
    let ops: Vec<Op> = OpStream::new(&w, 9).unwrap().collect();
    assert_eq!(ops.len(), 3000);
    assert!(ops[..1000].iter().all(|o| o.kind == OpKind::Insert));
    assert!(ops[1000..].iter().all(|o| o.kind == OpKind::Update));
    // The same operations as generators seeded like a benchmark run's thread 0.
    let space = KeySpace::new();
    let mut expected = Vec::new();
    for (i, phase) in w.phases.iter().enumerate() {
        let mut g = Generator::new(phase, space.clone(), thread_seed(phase_seed(9, i), 0));
        expected.extend(std::iter::from_fn(|| g.next_op(phase.ops)));
    }
    assert_eq!(ops, expected);
    // Workloads that need a clock are refused, naming the phase.
    let eco = WorkloadSpec::preset("ecotune", &params()).unwrap();
    assert!(OpStream::new(&eco, 1).err().unwrap().contains("writer"));
}

#[test]
fn fillunique_inserts_the_scrambled_indexes_in_order() {
    let w = WorkloadSpec::preset("fillunique", &params()).unwrap();
    let keys: Vec<u64> = OpStream::new(&w, 3).unwrap().map(|o| o.key).collect();
    let expected: Vec<u64> = (0..1000).map(scramble).collect();
    assert_eq!(keys, expected);
    assert!(keys.iter().all(|&k| k <= MAX_KEY));
}

#[test]
fn scramble_is_injective_and_stays_below_2_to_the_63() {
    let keys: HashSet<u64> = (0..100_000).map(scramble).collect();
    assert_eq!(keys.len(), 100_000);
    assert!(keys.iter().all(|&k| k <= MAX_KEY));
    // Not the identity and not monotone: consecutive indexes land far apart.
    assert!((0..100).filter(|&i| scramble(i) < scramble(i + 1)).count() < 90);
}

#[test]
fn arrivals_without_bursts_are_evenly_spaced_per_thread() {
    let stream = OpenLoop {
        queries_per_sec: 1000.0,
        burst: None,
    };
    // Two threads share the rate: each sees one arrival every 2 ms.
    let mut a = Arrivals::new(&stream, 2, 7);
    let times: Vec<u128> = (0..4).map(|_| a.next_arrival().as_micros()).collect();
    assert_eq!(times, vec![0, 2000, 4000, 6000]);
}

#[test]
fn a_burst_brings_its_queries_at_one_instant() {
    let stream = OpenLoop {
        queries_per_sec: 100.0,
        burst: Some(Burst {
            probability: 1.0,
            size: 3,
        }),
    };
    let mut a = Arrivals::new(&stream, 1, 7);
    let times: Vec<u128> = (0..7).map(|_| a.next_arrival().as_millis()).collect();
    assert_eq!(times, vec![0, 0, 0, 10, 10, 10, 20]);
}

#[test]
fn the_paper_burst_test_nearly_doubles_the_base_rate() {
    // EcoTune's burst test: a base of 15,000 arrivals per second, each with a 5% chance of being
    // 20 queries: 15,000 × (1 + 0.05 × 19) = 29,250 queries per second on average.
    let stream = OpenLoop {
        queries_per_sec: 15_000.0,
        burst: Some(Burst {
            probability: 0.05,
            size: 20,
        }),
    };
    let mut a = Arrivals::new(&stream, 1, 42);
    let queries = 200_000;
    let mut last = std::time::Duration::ZERO;
    for _ in 0..queries {
        last = a.next_arrival();
    }
    let rate = queries as f64 / last.as_secs_f64();
    assert!((27_500.0..31_000.0).contains(&rate), "{rate}");
    // The same seed gives the same stream.
    let mut b = Arrivals::new(&stream, 1, 42);
    let mut c = Arrivals::new(&stream, 1, 42);
    assert!((0..1000).all(|_| b.next_arrival() == c.next_arrival()));
}

#[test]
fn the_ecotune_preset_carries_bursts_only_when_asked() {
    let plain = WorkloadSpec::preset("ecotune", &params()).unwrap();
    let open = plain
        .phases
        .iter()
        .find_map(|p| p.open_loop.clone())
        .unwrap();
    assert_eq!(open.burst, None);
    let bursty = PresetParams {
        burst_probability: 0.05,
        ..params()
    };
    let spec = WorkloadSpec::preset("ecotune", &bursty).unwrap();
    let open = spec
        .phases
        .iter()
        .find_map(|p| p.open_loop.clone())
        .unwrap();
    assert_eq!(
        open.burst,
        Some(Burst {
            probability: 0.05,
            size: 20
        })
    );
    let bad = PresetParams {
        burst_probability: 1.5,
        ..params()
    };
    assert_eq!(bad.validate().unwrap_err().param, "burst_probability");
}

/// The op stream's live-key count (what space amplification divides by) equals the keys its
/// operations leave live, counted in a set: inserts and updates make a key live, deletes dead.
/// Covers the single-writer key space's shortcut for updates while nothing was ever deleted.
#[test]
fn the_stream_counts_live_keys_as_its_operations_leave_them() {
    let p = PresetParams {
        entries: 20_000,
        ops: 20_000,
        ..PresetParams::default()
    };
    for name in [
        "updaterandom",
        "updatezipf",
        "deleterandom",
        "deleterandom,overwrite",
        "nearly-sorted",
        "ycsb-d",
    ] {
        let spec = WorkloadSpec::preset(name, &p).unwrap();
        let mut stream = OpStream::new(&spec, 3).unwrap();
        let mut live = HashSet::new();
        let mut ops = 0u64;
        while let Some(op) = stream.next() {
            match op.kind {
                OpKind::Insert | OpKind::Update | OpKind::Rmw => {
                    live.insert(op.key);
                }
                OpKind::Delete => {
                    live.remove(&op.key);
                }
                _ => {}
            }
            ops += 1;
            if ops.is_multiple_of(5_000) {
                assert_eq!(
                    stream.live_keys(),
                    live.len() as u64,
                    "{name} after {ops} ops"
                );
            }
        }
        assert_eq!(stream.live_keys(), live.len() as u64, "{name} at the end");
    }
}

/// multireadrandom is readrandom whose reads go in batches of `batch_size`: the same keys (a
/// stream replays a batch's reads one by one), an unmeasured fill first when it leads, and a
/// batch size checked like every parameter.
#[test]
fn multireadrandom_is_readrandom_in_batches() {
    let four = PresetParams {
        threads: 4,
        batch_size: 16,
        ..params()
    };
    let multi = WorkloadSpec::preset("multireadrandom", &four).unwrap();
    let names: Vec<&str> = multi.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["fillrandom", "multireadrandom"]);
    assert!(!multi.phases[0].measured);
    assert_eq!(
        multi.phases[0].read_batch, 1,
        "the fill writes one key at a time"
    );
    let batched = &multi.phases[1];
    assert_eq!((batched.read_batch, batched.threads), (16, 4));
    assert_eq!(batched.mix.read, 1.0);
    assert_eq!(batched.ops, params().entries);
    // The default batch is 32 (db_bench's is 1).
    let default = WorkloadSpec::preset("fillrandom,multireadrandom", &params()).unwrap();
    assert_eq!(default.phases[1].read_batch, DEFAULT_BATCH_SIZE);
    assert_eq!(DEFAULT_BATCH_SIZE, 32);
    // Batching changes how reads are issued, not which: the streams are identical.
    let mut single = multi.clone();
    single.phases[1].read_batch = 1;
    let keys = |spec: &WorkloadSpec| -> Vec<(OpKind, u64)> {
        OpStream::new(spec, 9)
            .unwrap()
            .map(|op| (op.kind, op.key))
            .collect()
    };
    assert_eq!(keys(&multi), keys(&single));
    for bad in [0, MAX_READ_BATCH + 1] {
        let p = PresetParams {
            batch_size: bad,
            ..params()
        };
        assert_eq!(p.validate().unwrap_err().param, "batch_size");
    }
}

/// The load a run on a kept database skips, and the entries two workloads must agree on.
#[test]
fn load_phases_and_entries_describe_what_a_workload_stores() {
    let p = params();
    let fill = WorkloadSpec::preset("fillrandom", &p).unwrap();
    assert_eq!((fill.load_phases(), fill.entries()), (1, Some(1000)));
    let read = WorkloadSpec::preset("readrandom", &p).unwrap();
    assert_eq!((read.load_phases(), read.entries()), (1, Some(1000)));
    let both = WorkloadSpec::preset("fillseq,fillrandom,readrandom", &p).unwrap();
    assert_eq!(both.load_phases(), 2);
    let ycsb = WorkloadSpec::preset("ycsb-a", &p).unwrap();
    assert_eq!((ycsb.load_phases(), ycsb.entries()), (1, Some(1000)));
    // A writer beside the inserts is more than a load.
    let eco = WorkloadSpec::preset("ecotune", &p).unwrap();
    assert_eq!(eco.load_phases(), 1);
    let mut timed = eco.clone();
    timed.phases.remove(0);
    assert_eq!(timed.load_phases(), 0);
    assert_eq!(timed.entries(), None);
}

#[test]
fn the_phase_change_preset_reads_scans_and_updates_what_it_ingested() {
    // A disorder window much smaller than the ingest, as in any real use: keys still pending
    // in the window at its end were never written, and reads of them miss.
    let mut p = params();
    p.disorder = 10;
    let w = WorkloadSpec::preset("phase-change", &p).unwrap();
    let names: Vec<&str> = w.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["ingest", "reads", "scans", "updates"]);
    assert!(w.phases.iter().all(|p| p.measured));
    assert_eq!(w.phases[2].ops, 200, "a tenth of --ops for scans");
    let space = KeySpace::new();
    let mut ingest = Generator::new(&w.phases[0], space.clone(), 1);
    let mut ingested = HashSet::new();
    while let Some(op) = ingest.next_op(w.phases[0].ops) {
        assert_eq!(op.kind, OpKind::Insert);
        ingested.insert(op.key);
    }
    // The share of the phase's operations of `kind`, and of its keys that were ingested.
    let shares = |phase: usize, kind: OpKind| {
        let mut g = Generator::new(&w.phases[phase], space.clone(), 3);
        let (mut total, mut of_kind, mut stored) = (0, 0, 0);
        while let Some(op) = g.next_op(w.phases[phase].ops) {
            total += 1;
            of_kind += usize::from(op.kind == kind);
            stored += usize::from(ingested.contains(&op.key));
        }
        (of_kind as f64 / total as f64, stored as f64 / total as f64)
    };
    let (reads, stored) = shares(1, OpKind::Read);
    assert!(reads > 0.9 && stored > 0.95, "{reads} {stored}");
    let (scans, stored) = shares(2, OpKind::Scan);
    assert!(scans > 0.9 && stored > 0.95, "{scans} {stored}");
    let (updates, stored) = shares(3, OpKind::Update);
    assert!(updates == 1.0 && stored > 0.95, "{updates} {stored}");
}
