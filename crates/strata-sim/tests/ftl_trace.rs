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
