//! `strata checkpoint`: an openable copy of a closed database in a new directory
//! (`strata_engine::Db::checkpoint`).

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use strata_engine::{Db, Options};
use strata_sim::human_bytes;

/// Options of `strata checkpoint`.
#[derive(Args, Debug)]
pub struct CheckpointArgs {
    /// The database directory (no other process may have it open).
    dir: PathBuf,
    /// Where the copy goes: a directory that does not exist yet, or an empty one. Table files
    /// are hard-linked when it is on the same file system, else copied.
    dest: PathBuf,
}

/// Runs `strata checkpoint`.
pub fn run(args: CheckpointArgs) -> Result<()> {
    if !args.dir.is_dir() {
        bail!("{} is not a directory", args.dir.display());
    }
    // Opened for writing, as RocksDB's `ldb checkpoint` does: the open replays the WALs and
    // holds the directory's lock while the copy is taken.
    let db = Db::open(&args.dir, Options::new())
        .with_context(|| format!("opening {}", args.dir.display()))?;
    // The engine's errors name the directory and what is wrong with it.
    let summary = db.checkpoint(&args.dest);
    let closed = db.close();
    let summary = summary?;
    closed.with_context(|| format!("closing {}", args.dir.display()))?;
    println!(
        "checkpoint {}: {} tables ({}) linked or copied, {} WALs ({}) copied",
        args.dest.display(),
        summary.tables,
        human_bytes(summary.table_bytes),
        summary.wals,
        human_bytes(summary.wal_bytes)
    );
    Ok(())
}
