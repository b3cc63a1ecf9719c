//! A time to live in the simulator (`SimConfig::ttl_seconds`): writes are dated by the
//! simulated clock, expired entries read absent and leave merges, wholly expired tables are
//! dropped, partly expired ones are rewritten after the periodic-compaction period, in exact,
//! timed and scale mode. `differential.rs` checks that the engine decides the same.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::collections::BTreeSet;
use strata_policy::{build_policy, PolicySpec};
use strata_sim::{SimConfig, SimError, Simulator, Timing};
use strata_workload::{PresetParams, WorkloadSpec};

const BUFFER: u64 = 64 << 10;
const TTL: u64 = 10;

/// Spreads small numbers over the key space, as workloads' keys are.
fn key(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 1
}

fn policy(name: &str) -> PolicySpec {
    let mut spec = PolicySpec::new(name);
    spec.fill_defaults([
        ("write_buffer_size", BUFFER.to_string()),
        ("target_file_size", (BUFFER / 2).to_string()),
        ("expected_data_size", "8MiB".to_string()),
    ])
    .unwrap();
    spec
}

fn config(ttl: Option<u64>, period: Option<u64>) -> SimConfig {
    SimConfig {
        buffer_size: BUFFER,
        ttl_seconds: ttl,
        periodic_compaction_seconds: period,
        ..SimConfig::default()
    }
}

fn simulator(name: &str, config: SimConfig) -> Simulator {
    Simulator::new(build_policy(&policy(name)).unwrap(), config).unwrap()
}

fn put_all(sim: &mut Simulator, keys: impl Iterator<Item = u64>) -> BTreeSet<u64> {
    keys.map(|i| {
        sim.put(key(i)).unwrap();
        key(i)
    })
    .collect()
}

#[test]
fn settings_a_ttl_cannot_have_are_refused() {
    let refused =
        |config: SimConfig| match Simulator::new(build_policy(&policy("leveled")).unwrap(), config)
        {
            Err(SimError::Config(message)) => message,
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("accepted"),
        };
    assert!(refused(config(Some(0), None)).contains("TTL"));
    assert!(refused(config(None, Some(5))).contains("needs a TTL"));
    let mut sim = simulator("leveled", config(Some(TTL), None));
    assert!(matches!(sim.pass_time(-1.0), Err(SimError::Config(_))));
    assert!(matches!(sim.pass_time(f64::NAN), Err(SimError::Config(_))));
}

/// Entries live a TTL of the simulated clock, then read absent; a tree whose entries all
/// expired is dropped table by table, writing nothing, and the policy works on.
#[test]
fn expired_entries_read_absent_and_expired_tables_go_whole() {
    for name in ["leveled", "tiered", "vertiorizon", "partial-rr", "minmax"] {
        let mut sim = simulator(name, config(Some(TTL), None));
        let old = put_all(&mut sim, 0..6_000);
        sim.pass_time(6.0).unwrap();
        let young = put_all(&mut sim, 6_000..8_000);
        assert_eq!(sim.live_keys().len(), 8_000, "{name}");
        // The old keys are 10 seconds old, the young ones 4.
        sim.pass_time(4.0).unwrap();
        assert_eq!(sim.live_keys(), young, "{name}: the old keys read absent");
        sim.pass_time(TTL as f64).unwrap();
        assert!(sim.live_keys().is_empty(), "{name}");
        // Expired tables went without a merge: nothing but buffers was written since.
        let written = sim.table_bytes_written();
        let tables = sim.version().table_count();
        assert_eq!(
            tables, 0,
            "{name}: {tables} tables left after everything expired"
        );
        let again = put_all(&mut sim, 0..3_000);
        sim.flush().unwrap();
        assert!(sim.table_bytes_written() > written, "{name}");
        assert_eq!(
            sim.live_keys(),
            again,
            "{name}: the keys written again live"
        );
        let report = sim.finish().unwrap();
        assert!(
            report.compaction_bytes_written > 0 || name == "minmax",
            "{name}"
        );
        drop(old);
    }
}

/// Partly expired tables are rewritten once an entry of theirs expired a period ago, even
/// where no merge the policy chooses would reach them: less space than without the period.
#[test]
fn periodic_compaction_reclaims_partly_expired_tables() {
    let run = |period: Option<u64>| {
        let mut sim = simulator("leveled", config(Some(TTL), period));
        // Old and young keys interleave, so every table holds both.
        put_all(&mut sim, (0..20_000).filter(|i| i % 2 == 0));
        sim.pass_time(6.0).unwrap();
        put_all(&mut sim, (0..20_000).filter(|i| i % 2 == 1));
        sim.flush().unwrap();
        // The old keys expired 5 seconds ago, a period; the young ones live a second more.
        sim.pass_time(9.0).unwrap();
        let live = sim.live_keys().len();
        let disk = sim.version().disk_bytes();
        (live, disk, sim.finish().unwrap().compactions)
    };
    let (live, kept, merges) = run(None);
    let (live_periodic, reclaimed, merges_periodic) = run(Some(5));
    assert_eq!((live, live_periodic), (10_000, 10_000));
    assert!(
        merges_periodic > merges && reclaimed * 10 < kept * 7,
        "with the period: {merges_periodic} merges, {reclaimed} bytes; without: {merges}, {kept}"
    );
}

/// In timed mode the clock the TTL reads is the ingest's: a workload longer than the TTL
/// writes less and keeps less than without it, also in scale mode, which keeps the sampled
/// entries' ages through every halving of the sample.
#[test]
fn timed_and_scale_mode_expire_by_the_ingest_clock() {
    let params = PresetParams {
        entries: 100_000,
        ops: 100_000,
        ..PresetParams::default()
    };
    let spec = WorkloadSpec::preset("updaterandom", &params).unwrap();
    // 23 MB of writes at 2 MB/s: 11.6 simulated seconds, the TTL 4.
    let timed = SimConfig {
        timing: Timing::Timed {
            ingest_bytes_per_sec: 2e6,
            job_bytes_per_sec: 50e6,
            max_jobs: 2,
            reserved_jobs: 0,
        },
        ..config(None, None)
    };
    for base in [timed.clone(), timed.with_scale(20_000)] {
        let mode = if base.scale_keys.is_some() {
            "scale"
        } else {
            "timed"
        };
        let run = |ttl_seconds| {
            let config = SimConfig {
                ttl_seconds,
                ..base.clone()
            };
            Simulator::run(build_policy(&policy("leveled")).unwrap(), config, &spec, 1).unwrap()
        };
        let (without, with) = (run(None), run(Some(4)));
        let bytes = |r: &strata_sim::SimReport| r.levels.iter().map(|l| l.bytes).sum::<u64>();
        assert!(
            with.compaction_bytes_written < without.compaction_bytes_written
                && bytes(&with) < bytes(&without),
            "{mode}: with the TTL {} written, {} kept; without {} written, {} kept",
            with.compaction_bytes_written,
            bytes(&with),
            without.compaction_bytes_written,
            bytes(&without)
        );
        assert!(
            mode == "timed" || with.sample_one_in > 1,
            "the sample never halved"
        );
    }
}
