//! Opens a database, writes, reads, scans, and prints the engine's metrics.
//!
//! Run with `cargo run --release -p strata-engine --example basic [directory]`.

use strata_engine::{Db, Options, WriteBatch, WriteOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join(format!("strata-example-{}", std::process::id())),
    };
    // Small buffers and tables so a short run already flushes and compacts. The policy is
    // named with its options; its write buffer size is the database's.
    let db = Db::open(
        &dir,
        Options::new()
            .with_write_buffer_size(1 << 20)
            .with_policy_named("leveled:target_file_size=1MiB")?,
    )?;

    for i in 0..100_000u32 {
        db.put(format!("user:{i:08}"), format!("value of {i}"))?;
    }
    let mut batch = WriteBatch::new();
    batch
        .put("user:00000001", "updated")?
        .delete("user:00000002")?;
    db.write(&WriteOptions::synced(), batch)?;

    println!(
        "user:00000001 = {:?}",
        db.get("user:00000001")?
            .map(|v| String::from_utf8_lossy(&v).into_owned())
    );
    println!("user:00000002 = {:?}", db.get("user:00000002")?);

    let snapshot = db.snapshot();
    db.put("user:00000003", "after the snapshot")?;
    let first: Vec<String> = db
        .range("user:00000000".."user:00000005")?
        .map(|r| {
            r.map(|(k, v)| {
                format!(
                    "{} = {}",
                    String::from_utf8_lossy(&k),
                    String::from_utf8_lossy(&v)
                )
            })
        })
        .collect::<Result<_, _>>()?;
    println!("first keys: {first:#?}");
    let last = db.range_rev::<&str, _>(..)?.next().transpose()?;
    println!(
        "last key: {:?}",
        last.map(|(k, _)| String::from_utf8_lossy(&k).into_owned())
    );
    let at_snapshot = db.get_with("user:00000003", &strata_engine::ReadOptions::at(&snapshot))?;
    println!(
        "user:00000003 at the snapshot = {:?}",
        at_snapshot.map(|v| String::from_utf8_lossy(&v).into_owned())
    );
    drop(snapshot);

    db.flush()?;
    println!("\n{}", db.metrics());
    db.close()?;
    Ok(())
}
