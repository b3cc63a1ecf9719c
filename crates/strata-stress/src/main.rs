//! `strata-stress`: a crash test for Strata.
//!
//! `strata-stress run` opens a database, first checks it against the side logs of every earlier
//! run, then issues random puts, deletes, batches (some synced), point reads, scans and snapshot
//! reads from several threads. Each thread owns its keys, logs every write's intent before
//! issuing it and its acknowledgement after, one `write(2)` per line (so a SIGKILL loses at most
//! the line being written, never reorders), and checks every read against its own model.
//!
//! `strata-stress crash` is the driver: it starts `run` as a child process, kills it with
//! SIGKILL after a random delay, and repeats; every child begins by verifying what the previous
//! one left behind:
//! - every acknowledged write is present (a process crash loses nothing the OS has: the engine
//!   hands each WAL record to the OS before acknowledging it);
//! - a write that was in flight at the kill is either wholly present or wholly absent (batches
//!   are atomic);
//! - no key holds a value that was never written, and no key outside the logs exists;
//! - the table files on disk are exactly those the recovered version needs, its tables' own and
//!   those kept for blocks its tables refer to (no dangling reference, no leaked file).
//! - with `--ttl` or `--filter`, a key reads absent only where its value may have expired or the
//!   compaction filter removes it (`expiry.rs`), never an older value in its place.

mod crash;
mod expiry;
mod keyspaces;
mod run;
mod side_log;
mod verify;

use anyhow::Result;
use clap::{Parser, Subcommand};
use crash::{crash, CrashArgs};
use run::{run, RunArgs};

#[derive(Parser)]
#[command(name = "strata-stress", about = "Crash and stress test for Strata")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Verify the database against the side logs, then run a random workload until killed or done.
    Run(RunArgs),
    /// Repeatedly start `run` and kill it with SIGKILL, for every policy; print a JSON summary.
    Crash(CrashArgs),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Run(a) => run(a),
        Cmd::Crash(a) => crash(a),
    }
}
