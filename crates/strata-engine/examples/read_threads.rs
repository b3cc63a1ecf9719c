//! Point reads on many threads at once, each answered from the memtable, so that a read costs
//! little beyond what readers share (the super version, the statistics counters): gets per
//! second over two seconds, on 1 to N threads. How far they scale shows how much the threads
//! wait for each other's cache lines (docs/concurrency.md). With `--tables` the keys are
//! flushed first, so reads go through the table cache, the filters and the block cache.
//!
//! `cargo run --release -p strata-engine --example read_threads -- DIR [--tables] [THREADS...]`
//! (DIR is created and emptied first; THREADS default to 1 and 2.)

use std::error::Error;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use strata_engine::{Db, Options};

const KEYS: u64 = 10_000;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .ok_or("usage: read_threads DIR [--tables] [THREADS...]")?;
    let rest: Vec<String> = args.collect();
    let tables = rest.iter().any(|a| a == "--tables");
    let mut counts: Vec<usize> = rest
        .iter()
        .filter(|a| *a != "--tables")
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    if counts.is_empty() {
        counts = vec![1, 2];
    }
    if counts.contains(&0) {
        return Err("thread counts must be positive".into());
    }
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    let db = Db::open(&dir, Options::new())?;
    for i in 0..KEYS {
        db.put(format!("key{i:08}"), [7u8; 100])?;
    }
    if tables {
        db.flush()?;
        db.wait_for_compactions()?;
    }
    for threads in counts {
        let stop = AtomicBool::new(false);
        let total = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (db, stop, total) = (&db, &stop, &total);
                s.spawn(move || {
                    let mut key = *b"key00000000";
                    let (mut n, mut x) = (0u64, t as u64 + 1);
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..256 {
                            // xorshift: a key per read without a shared generator.
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let mut k = x % KEYS;
                            for digit in key[3..].iter_mut().rev() {
                                *digit = b'0' + (k % 10) as u8;
                                k /= 10;
                            }
                            std::hint::black_box(db.get(key).expect("read"));
                            n += 1;
                        }
                    }
                    total.fetch_add(n, Ordering::Relaxed);
                });
            }
            std::thread::sleep(Duration::from_secs(2));
            stop.store(true, Ordering::Relaxed);
        });
        println!(
            "{threads} threads: {:.0} gets/s",
            total.load(Ordering::Relaxed) as f64 / 2.0
        );
    }
    db.close()?;
    Ok(())
}
