//! The `strata` command-line tool as a library: [`run`] parses arguments and runs `strata sim`
//! or `strata bench`. A program that registers policies of its own
//! (`strata_policy::registry::register`) and then calls [`run`] offers the same commands with
//! those policies selectable by name, as `examples/custom-policy` shows.

mod bench;
mod checks;
mod policies;
mod sim;
mod workload_args;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::ffi::OsString;

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
}

/// Runs the command `args` names (`args[0]` is the program name, as in `std::env::args_os`).
/// Bad arguments print clap's message and exit the process, as a command-line tool does.
pub fn run(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> Result<()> {
    let cli = Cli::parse_from(args);
    match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Sim(args) => sim::run(args),
    }
}
