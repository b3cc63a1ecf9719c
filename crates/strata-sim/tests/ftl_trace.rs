//! The engine's file trace (`strata_engine::fs::RecordingFs`) replayed by the FTL model: what
//! the model holds live at the end is exactly what the database directory holds.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use strata_engine::fs::{FileSystem, MemFs, RecordingFs};
use strata_engine::{Db, Options};
use strata_sim::ftl::{Ftl, FtlConfig, VictimPolicy};

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_replayed_engine_trace_holds_what_the_directory_holds() {
    let mem = MemFs::new();
    let trace = Shared::default();
    let fs = RecordingFs::new(Arc::new(mem.clone()), Box::new(trace.clone()));
    let db = Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::new(fs.clone()))
            .with_write_buffer_size(64 << 10)
            .with_policy_named("leveled:target_file_size=64KiB")
            .unwrap(),
    )
    .unwrap();
    let mut rng = 3u64;
    for i in 0..60_000u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        db.put(format!("k{:08}", rng % 20_000), format!("value {i:>40}"))
            .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    db.close().unwrap();
    fs.flush_trace().unwrap();
    assert_eq!(fs.trace_error(), None);

    let page = 4096;
    let mut ftl = Ftl::new(FtlConfig {
        capacity: 512 * 16 * page,
        over_provisioning: 0.07,
        erase_block: 16 * page,
        page_size: page,
        gc_free_blocks: 2,
        victim: VictimPolicy::Greedy,
    })
    .unwrap();
    let text = trace.0.lock().unwrap().clone();
    ftl.replay(&text[..], |_| {}).unwrap();

    let names = mem.list(Path::new("/db")).unwrap();
    let sizes: Vec<u64> = names
        .iter()
        .map(|n| mem.file_size(&Path::new("/db").join(n)).unwrap())
        .collect();
    let pages: u64 = sizes.iter().map(|s| s.div_ceil(page)).sum();
    let stats = ftl.stats();
    assert_eq!(stats.valid_pages, pages, "{} files: {sizes:?}", names.len());
    // The workload wrote many times the final data: tables merged away were trimmed.
    assert!(stats.host_pages > 3 * pages, "{stats:?}");
    assert!(stats.gc_write_amp() >= 1.0);
}

/// The FTL model fed by the simulator's own file events and by the engine's recorded trace of
/// the same workload: the same host pages and GC write amplification, within what the engine's
/// WAL framing and manifest add (measured: 12,768 host pages and GC WA 1.139 from the engine,
/// 12,229 and 1.047 from the simulator; the manifest's long-lived pages, which the simulator
/// does not write, sit among short-lived table pages).
#[test]
fn the_simulators_file_events_match_the_engines_trace() {
    const KEY: usize = 8;
    const VALUE: usize = 100;
    const BUFFER: u64 = 64 << 10;
    let page = 4096;
    let device = || {
        Ftl::new(FtlConfig {
            // 5 MiB of flash for about 2-3 MiB of live data: GC has work to do.
            capacity: 80 * 16 * page,
            over_provisioning: 0.07,
            erase_block: 16 * page,
            page_size: page,
            gc_free_blocks: 2,
            victim: VictimPolicy::Greedy,
        })
        .unwrap()
    };
    let keys: Vec<u64> = {
        let mut rng = 17u64;
        (0..60_000)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % 15_000
            })
            .collect()
    };
    // The buffer size too: the engine fills it in from its options, the simulator does not.
    let policy = "leveled:target_file_size=16KiB,size_ratio=4,write_buffer_size=64KiB";

    // The engine, recorded.
    let trace = Shared::default();
    let fs = RecordingFs::new(Arc::new(MemFs::new()), Box::new(trace.clone()));
    let db = Db::open(
        "/db",
        Options::new()
            .with_file_system(Arc::new(fs))
            .with_write_buffer_size(BUFFER)
            .with_block_size(4096)
            .with_synchronous_compaction(true)
            .with_policy_named(policy)
            .unwrap(),
    )
    .unwrap();
    let value = vec![b'v'; VALUE];
    let mut key = Vec::new();
    for &k in &keys {
        strata_workload::encode_key(&mut key, k, KEY);
        db.put(&key, &value).unwrap();
    }
    let engine_write_amp = db.metrics().write_amp;
    db.close().unwrap();
    let mut engine = device();
    let text = trace.0.lock().unwrap().clone();
    engine.replay(&text[..], |_| {}).unwrap();

    // The simulator, its events applied to a model directly.
    let model = Arc::new(Mutex::new(device()));
    let sink_model = Arc::clone(&model);
    let config = strata_sim::SimConfig {
        key_size: KEY as u64,
        value_size: VALUE as u64,
        buffer_size: BUFFER,
        final_flush: false,
        ..strata_sim::SimConfig::default()
    }
    .with_engine_format(4096);
    let spec: strata_policy::PolicySpec = policy.parse().unwrap();
    let mut sim = strata_sim::Simulator::new(strata_policy::build_policy(&spec).unwrap(), config)
        .unwrap()
        .with_file_sink(move |event| sink_model.lock().unwrap().apply(event).unwrap());
    for &k in &keys {
        sim.put(k).unwrap();
    }
    let report = sim.finish().unwrap();
    // The same compactions on both sides (what the differential test checks in detail).
    assert_eq!(
        format!("{engine_write_amp:.4}"),
        format!("{:.4}", report.write_amp)
    );
    let sim = model.lock().unwrap();

    let (e, s) = (engine.stats(), sim.stats());
    let host = e.host_pages as f64 / s.host_pages as f64;
    assert!(
        (0.95..1.25).contains(&host),
        "host pages: engine {e:?}, simulator {s:?}"
    );
    // The engine's GC write amplification runs ~9% above the simulator's here (its extra
    // copies are an open question, docs/scale.md), and on a device this small it is chaotic:
    // the manifest's lifetime statistics (+10 host pages of 12,778, 0.08%) moved the ratio from
    // 1.087 to 1.103. The bound catches a model that is off, not that noise.
    let gc = e.gc_write_amp() / s.gc_write_amp();
    assert!(
        (0.9..1.15).contains(&gc),
        "GC WA: engine {e:?}, simulator {s:?}"
    );
}
