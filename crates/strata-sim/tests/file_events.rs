//! The simulator's file events (`Simulator::with_file_sink`): in timed mode concurrent jobs
//! write their tables over their durations, so writes interleave on the device; synchronously
//! one table is written at a time.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use strata_exec::file_event::FileEvent;
use strata_policy::{build_policy, PolicySpec};
use strata_sim::{SimConfig, Simulator, Timing};

/// Events of a fill of `entries` random keys.
fn events(timing: Timing, entries: u64) -> Vec<FileEvent> {
    let spec: PolicySpec = "leveled:target_file_size=1MiB,write_buffer_size=1MiB"
        .parse()
        .unwrap();
    let config = SimConfig {
        buffer_size: 1 << 20,
        timing,
        ..SimConfig::default()
    };
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&log);
    let mut sim = Simulator::new(build_policy(&spec).unwrap(), config)
        .unwrap()
        .with_file_sink(move |e| sink.lock().unwrap().push(e));
    let mut rng = 9u64;
    for _ in 0..entries {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        sim.put(rng >> 1).unwrap();
    }
    drop(sim);
    let events = log.lock().unwrap().clone();
    events
}

/// Pairs of table files whose writes overlap in time (one is appended to between the other's
/// creation and last append), and a check that every file's appends follow its creation and
/// nothing is appended after its delete.
fn overlapping_tables(events: &[FileEvent]) -> usize {
    let mut first: HashMap<u64, usize> = HashMap::new();
    let mut last: HashMap<u64, usize> = HashMap::new();
    let mut deleted: HashMap<u64, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        match *e {
            FileEvent::Create(id) => {
                first.insert(id, i);
            }
            FileEvent::Append(id, _) => {
                assert!(
                    first.contains_key(&id),
                    "append to {id} before its creation"
                );
                assert!(
                    !deleted.contains_key(&id),
                    "append to {id} after its delete"
                );
                last.insert(id, i);
            }
            FileEvent::Delete(id) => {
                deleted.insert(id, i);
            }
            FileEvent::Truncate(..) => {}
        }
    }
    // Tables only (WALs are numbered from 2^62).
    let spans: Vec<(usize, usize)> = first
        .iter()
        .filter(|(id, _)| **id < 1 << 62)
        .filter_map(|(id, &f)| last.get(id).map(|&l| (f, l)))
        .collect();
    let mut overlaps = 0;
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if a.0 < b.1 && b.0 < a.1 {
                overlaps += 1;
            }
        }
    }
    overlaps
}

#[test]
fn timed_jobs_interleave_their_writes_and_synchronous_ones_do_not() {
    let synchronous = events(Timing::Synchronous, 200_000);
    assert_eq!(overlapping_tables(&synchronous), 0);
    let timed = events(
        Timing::Timed {
            ingest_bytes_per_sec: 20e6,
            job_bytes_per_sec: 10e6,
            max_jobs: 2,
            reserved_jobs: 0,
        },
        200_000,
    );
    assert!(
        overlapping_tables(&timed) > 10,
        "{}",
        overlapping_tables(&timed)
    );
    // The same tables end up written either way: every created table is appended to.
    let created = timed
        .iter()
        .filter(|e| matches!(e, FileEvent::Create(id) if *id < 1 << 62))
        .count();
    assert!(created > 20, "{created} tables");
}
