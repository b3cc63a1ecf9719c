//! The `strata` command-line tool as a library: [`run`] parses arguments and runs `strata sim`,
//! `strata bench`, `strata inspect`, `strata switch-policy` or `strata checkpoint`. A program
//! that registers policies of its own (`strata_policy::registry::register`) and then calls
//! [`run`] offers the same commands with those policies selectable by name, as
//! `examples/custom-policy` shows.

mod advise;
mod bench;
mod calibrate;
mod checkpoint;
mod checks;
mod inspect;
mod policies;
mod sim;
mod switch;
mod workload_args;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Parser)]
#[command(
    name = "strata",
    version,
    about = "Strata: an LSM-tree engine with pluggable compaction policies"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmark compaction policies (and peers) on a workload, side by side, with a report.
    Bench(bench::BenchArgs),
    /// Simulate compaction policies on a workload (metadata only, no data written).
    Sim(sim::SimArgs),
    /// Which compaction policy, with which options, for a workload and an objective: cost
    /// models, then the simulator, then (--verify) the engine.
    Advise(advise::AdviseArgs),
    /// Measure this machine's and its device's costs per unit of engine work, for `strata
    /// advise` and the autopilot.
    Calibrate(calibrate::CalibrateArgs),
    /// Describe a database directory, a table file or a WAL file, and check them for damage.
    Inspect(inspect::InspectArgs),
    /// Hand a closed database's tree to another compaction policy, without a full rewrite.
    SwitchPolicy(switch::SwitchArgs),
    /// Copy a closed database into a new directory, hard-linking its tables (RocksDB: `ldb
    /// checkpoint`).
    Checkpoint(checkpoint::CheckpointArgs),
    /// One run of `strata bench`, in a process of its own (started by `strata bench`).
    #[command(hide = true)]
    BenchRun(bench::BenchRunArgs),
}

/// Set by [`main`]: this process is a program whose arguments [`run`] parses, so `strata bench`
/// may start it again to run each configuration in a process of its own.
static IS_MAIN: AtomicBool = AtomicBool::new(false);

/// [`run`] on this process's arguments, for a program's `main` (the `strata` binary's, or one
/// that registers policies first). Unlike a bare [`run`], it lets `strata bench` give each run a
/// process of its own by starting this same program again (the hidden `bench-run` command),
/// which is what makes each run's peak memory, CPU time and device bytes its own.
pub fn main() -> Result<()> {
    IS_MAIN.store(true, Ordering::Relaxed);
    init_tracing()?;
    run(std::env::args_os())
}

/// The environment variable whose filter (`tracing_subscriber::EnvFilter`'s syntax, e.g.
/// `strata=info`) prints the engine's events to standard error. Unset: nothing is printed.
pub const LOG_ENV: &str = "STRATA_LOG";

/// Prints the engine's events to standard error as `STRATA_LOG` asks.
fn init_tracing() -> Result<()> {
    let Some(filter) = std::env::var_os(LOG_ENV) else {
        return Ok(());
    };
    let filter = filter.to_string_lossy();
    let filter = tracing_subscriber::EnvFilter::try_new(filter.as_ref())
        .map_err(|e| anyhow::anyhow!("{LOG_ENV}={filter} is not a tracing filter: {e}"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    Ok(())
}

/// Whether [`main`] started this process (so it can run `bench-run` jobs).
fn is_main() -> bool {
    IS_MAIN.load(Ordering::Relaxed)
}

/// `strata advise` with `flags` (its command-line flags, after the command's name), returning
/// what it prints with `--json` (the candidates ranked, and the pick; `null` when none meets
/// the constraints) instead of printing it: the advice for a program, such as the Python
/// package's `strata.advise`.
pub fn advise(
    flags: impl IntoIterator<Item = impl Into<OsString> + Clone>,
) -> Result<serde_json::Value> {
    let argv = ["strata", "advise", "--json"]
        .into_iter()
        .map(OsString::from)
        .chain(flags.into_iter().map(Into::into));
    match Cli::try_parse_from(argv)?.command {
        Command::Advise(args) => Ok(serde_json::to_value(advise::advise(&args)?)?),
        _ => anyhow::bail!("the advise command's flags parsed as another command"),
    }
}

/// Runs the command `args` names (`args[0]` is the program name, as in `std::env::args_os`).
/// Bad arguments print clap's message and exit the process, as a command-line tool does. Called
/// as a library (not through [`main`]), `strata bench` runs every configuration in this process.
pub fn run(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> Result<()> {
    let cli = Cli::parse_from(args);
    match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Advise(args) => advise::run(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::SwitchPolicy(args) => switch::run(args),
        Command::Checkpoint(args) => checkpoint::run(args),
        Command::BenchRun(args) => bench::run_one(args),
    }
}
