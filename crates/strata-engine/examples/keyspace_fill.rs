//! Fill rate of one keyspace against two keyspaces written at once (one thread each):
//! `cargo run --release -p strata-engine --example keyspace_fill -- DIR [ENTRIES] [ROUNDS]
//! [CASE] [--pipelined]`, where CASE (to profile one case alone) is `one`, `two` or `shared`;
//! without it every round runs all three.
//! Random 16-byte keys and 100-byte values, default options (leveled, 64 MiB buffers, WAL on,
//! no sync), with `Options::with_enable_pipelined_write` on in every case under `--pipelined`. Prints each round's rates and each keyspace's rate over the single keyspace's,
//! beside two threads writing into one keyspace (the same two writers without keyspaces).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use strata_engine::{Db, Keyspace, KeyspaceOptions, Options};

mod common;

use common::next;

/// Puts `entries` random entries into `keyspace`; returns entries per second.
fn fill(keyspace: &Keyspace, entries: u64, seed: u64) -> strata_engine::Result<f64> {
    let mut state = seed;
    let value = [b'v'; 100];
    let start = Instant::now();
    for _ in 0..entries {
        let key = format!("{:016x}", next(&mut state));
        keyspace.put(key, value)?;
    }
    Ok(entries as f64 / start.elapsed().as_secs_f64())
}

fn main() -> strata_engine::Result<()> {
    let mut args: Vec<String> = std::env::args().collect();
    let pipelined = args.iter().any(|a| a == "--pipelined");
    args.retain(|a| a != "--pipelined");
    let options = Options::new().with_enable_pipelined_write(pipelined);
    let dir = Path::new(args.get(1).map_or("keyspace-fill", String::as_str)).to_path_buf();
    let entries: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    if let Some(case) = args.get(4) {
        for round in 1..=rounds {
            let rates = match case.as_str() {
                "one" => vec![one_keyspace(&dir, &options, entries, round)?],
                "two" => two_keyspaces(&dir, &options, entries, round)?.to_vec(),
                "shared" => two_writers(&dir, &options, entries, round)?.to_vec(),
                other => {
                    return Err(strata_engine::Error::InvalidArgument(format!(
                        "unknown case {other:?}: one, two or shared"
                    )))
                }
            };
            println!("round {round}: {case}: {rates:.0?} puts/s");
        }
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }
    for round in 1..=rounds {
        let one = one_keyspace(&dir, &options, entries, round)?;
        let [first, second] = two_keyspaces(&dir, &options, entries, round)?;
        let [shared_first, shared_second] = two_writers(&dir, &options, entries, round)?;
        println!(
            "round {round}: one keyspace {one:.0} puts/s; two keyspaces at once {first:.0} and \
             {second:.0} ({:.2} and {:.2} of one); two threads into one keyspace {shared_first:.0} \
             and {shared_second:.0} ({:.2} and {:.2})",
            first / one,
            second / one,
            shared_first / one,
            shared_second / one
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// One writer into the default keyspace.
fn one_keyspace(
    dir: &Path,
    options: &Options,
    entries: u64,
    round: u64,
) -> strata_engine::Result<f64> {
    let _ = std::fs::remove_dir_all(dir);
    let db = Db::open(dir, options.clone())?;
    let one = fill(&db.keyspace("default")?, entries, round)?;
    report("one", &db);
    db.close()?;
    Ok(one)
}

/// Two keyspaces written at once, by a thread each.
fn two_keyspaces(
    dir: &Path,
    options: &Options,
    entries: u64,
    round: u64,
) -> strata_engine::Result<[f64; 2]> {
    let _ = std::fs::remove_dir_all(dir);
    let db = Arc::new(Db::open(dir, options.clone())?);
    let a = db.create_keyspace("a", KeyspaceOptions::new())?;
    let b = db.create_keyspace("b", KeyspaceOptions::new())?;
    let other = std::thread::spawn(move || fill(&b, entries, round + 1000));
    let first = fill(&a, entries, round)?;
    let second = other.join().expect("the second writer panicked")?;
    drop(a);
    report("two", &db);
    Arc::into_inner(db).expect("no other handle").close()?;
    Ok([first, second])
}

/// Two threads into one keyspace: what two writers cost without keyspaces.
fn two_writers(
    dir: &Path,
    options: &Options,
    entries: u64,
    round: u64,
) -> strata_engine::Result<[f64; 2]> {
    let _ = std::fs::remove_dir_all(dir);
    let db = Arc::new(Db::open(dir, options.clone())?);
    let default = db.keyspace("default")?;
    let again = default.clone();
    let other = std::thread::spawn(move || fill(&again, entries, round + 2000));
    let first = fill(&default, entries, round + 3000)?;
    let second = other.join().expect("the second writer panicked")?;
    drop(default);
    report("shared", &db);
    Arc::into_inner(db).expect("no other handle").close()?;
    Ok([first, second])
}

/// What the case's writers waited for, on standard error: stalls and how many batches a commit
/// group held.
fn report(case: &str, db: &Db) {
    let m = db.metrics();
    eprintln!(
        "{case}: stalled {} ms, {:.2} batches per group, {} flushes, {} compactions",
        m.stall_micros / 1000,
        m.batches as f64 / m.write_groups.max(1) as f64,
        m.flushes,
        m.compactions
    );
}
