//! Puts from many threads at once into one database: random 16-byte keys with 100-byte values,
//! `--puts` per thread (default 250,000), 64 MiB write buffers; prints puts per second and the
//! writers per commit group. It shows what commit groups cost beyond the inserts, with and
//! without pipelined writes (docs/concurrency.md); `perf stat -e context-switches` beside it
//! counts the writers' sleeps.
//!
//! `cargo run --release -p strata-engine --example write_threads -- DIR THREADS [--pipelined]
//! [--puts N]` (DIR is created and emptied first.)

use std::error::Error;
use std::time::Instant;
use strata_engine::{Db, Options};

fn main() -> Result<(), Box<dyn Error>> {
    let usage = "usage: write_threads DIR THREADS [--pipelined] [--puts N]";
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or(usage)?;
    let threads: u64 = args.next().ok_or(usage)?.parse()?;
    let (mut pipelined, mut puts) = (false, 250_000u64);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--pipelined" => pipelined = true,
            "--puts" => puts = args.next().ok_or(usage)?.parse()?,
            _ => return Err(usage.into()),
        }
    }
    if threads == 0 {
        return Err("THREADS must be positive".into());
    }
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    let options = Options::new()
        .with_write_buffer_size(64 << 20)
        .with_enable_pipelined_write(pipelined);
    let db = Db::open(&dir, options)?;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = &db;
            s.spawn(move || {
                let mut x = t + 1;
                for _ in 0..puts {
                    // xorshift: a key per put without a shared generator.
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let key = format!("{x:016x}");
                    db.put(key, [7u8; 100]).expect("put");
                }
            });
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let m = db.metrics();
    println!(
        "threads {threads} pipelined {pipelined}: {:.0} puts/s, {:.2} writers per group",
        (threads * puts) as f64 / seconds,
        m.batches as f64 / m.write_groups.max(1) as f64,
    );
    if let Some(timing) = strata_engine::write_timing::take_report() {
        println!("{timing}");
    }
    db.close()?;
    Ok(())
}
