//! Where a random fill's resident memory goes: loads `--entries` random 16-byte keys with
//! 100-byte values (the bench-peers settings: 64 MiB buffers and files, 256 MiB level base,
//! 32 MiB block cache, `leveled`) while a second thread samples the process's resident set
//! (`/proc/self/status`) and the engine's own accounting (memtables, block cache) every 5 ms.
//! Prints the sample at the peak and the ten largest samples, so a peak can be attributed
//! (BENCHMARKS.md, section 'Fifth pass: memory at memtable switches').
//!
//! `cargo run --release -p strata-engine --example fill_memory -- DIR [--entries N]`

use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_engine::{CompletedJob, Db, EventListener, JobKind, Options};

/// Collects each flush's duration in milliseconds.
#[derive(Default)]
struct FlushTimes(parking_lot::Mutex<Vec<f64>>);

impl EventListener for FlushTimes {
    fn on_job_completed(&self, job: &CompletedJob) {
        if job.kind == JobKind::Flush {
            let ms = job.finished.duration_since(job.started).as_secs_f64() * 1e3;
            self.0.lock().push(ms);
        }
    }
}

/// One sample: seconds since start, then KiB of `VmRSS`, `RssAnon`, `RssFile`, and bytes of
/// memtables and block cache (data blocks, tables charged to it).
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    at: f64,
    rss_kib: u64,
    anon_kib: u64,
    file_kib: u64,
    memtable: u64,
    cache_data: u64,
    cache_tables: u64,
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: fill_memory DIR [--entries N]")?;
    let mut entries: u64 = 2_000_000;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--entries" => entries = args.next().ok_or("--entries needs N")?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let flushes = Arc::new(FlushTimes::default());
    let db = Arc::new(Db::open(
        &dir,
        Options::new()
            .with_write_buffer_size(64 << 20)
            .with_block_cache_capacity(32 << 20)
            .with_max_background_jobs(2)
            .with_bytes_per_sync(
                std::env::var("BYTES_PER_SYNC")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1 << 20),
            )
            .with_event_listener(Arc::clone(&flushes) as Arc<dyn EventListener>)
            .with_policy_named(
                "leveled:write_buffer_size=64MiB,target_file_size=64MiB,\
                 max_bytes_for_level_base=256MiB",
            )?,
    )?);
    let done = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let sampler = {
        let (db, done) = (Arc::clone(&db), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let m = db.metrics();
                samples.push(Sample {
                    at: start.elapsed().as_secs_f64(),
                    rss_kib: status_kib("VmRSS:"),
                    anon_kib: status_kib("RssAnon:"),
                    file_kib: status_kib("RssFile:"),
                    memtable: m.memtable_bytes,
                    cache_data: m.block_cache_bytes,
                    cache_tables: m.block_cache_table_bytes,
                });
                std::thread::sleep(Duration::from_millis(5));
            }
            samples
        })
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let value = [0x5au8; 100];
    for _ in 0..entries {
        let key: [u8; 16] = rng.random();
        db.put(key, value)?;
    }
    let load = start.elapsed().as_secs_f64();
    db.flush()?;
    db.wait_for_compactions()?;
    done.store(true, Ordering::Relaxed);
    let mut samples = sampler.join().map_err(|_| "sampler panicked")?;
    println!(
        "{entries} entries in {load:.2} s ({:.0} ops/s); peak VmHWM {} KiB",
        entries as f64 / load,
        status_kib("VmHWM:")
    );
    let times = flushes.0.lock().clone();
    println!(
        "flushes (ms): {}",
        times
            .iter()
            .map(|t| format!("{t:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    if std::env::var_os("FILL_MEMORY_TRACE").is_some() {
        for s in &samples {
            eprintln!(
                "{:.3} rss {:.1} mem {:.1}",
                s.at,
                s.rss_kib as f64 / 1024.0,
                s.memtable as f64 / 1048576.0
            );
        }
    }
    samples.sort_by_key(|s| std::cmp::Reverse(s.rss_kib));
    println!("at_s rss_mib anon_mib file_mib memtables_mib cache_data_mib cache_tables_mib other_anon_mib");
    for s in samples.iter().take(10) {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let other =
            mib(s.anon_kib << 10) - mib(s.memtable) - mib(s.cache_data) - mib(s.cache_tables);
        println!(
            "{:.3} {:.1} {:.1} {:.1} {:.1} {:.1} {:.1} {:.1}",
            s.at,
            mib(s.rss_kib << 10),
            mib(s.anon_kib << 10),
            mib(s.file_kib << 10),
            mib(s.memtable),
            mib(s.cache_data),
            mib(s.cache_tables),
            other
        );
    }
    Ok(())
}
