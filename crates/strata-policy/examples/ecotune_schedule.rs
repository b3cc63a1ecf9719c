//! Solves EcoTune's round (Algorithm 2, or Algorithm 1 with `--no-pending`) and prints the
//! schedule as the paper's Tables 5 to 8 do, with the time the solver took.
//!
//! ```text
//! cargo run --release -p strata-policy --example ecotune_schedule -- \
//!     --units 29 --size-cap 3 --long-scan-ratio 0.3 --rewrite-ratio 0.21 \
//!     --merge-slowdown 0.5 --false-positive-rate 0.001 [--no-pending] [--repeat 5]
//! ```
//!
//! `--rewrite-ratio` is T_c / T_w (the solution depends on the two only through it).

use std::process::ExitCode;
use std::time::Instant;
use strata_policy::ecotune_dp::{format_layout, solve, solve_without_pending, RoundModel};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ecotune_schedule: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut model = RoundModel {
        units: 29,
        size_cap: 3,
        arrival_interval: 1.0,
        rewrite_time: 0.21,
        long_scan_ratio: 0.3,
        false_positive_rate: 0.001,
        merge_slowdown: 0.5,
    };
    let mut pending = true;
    let mut repeat = 5usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--no-pending" {
            pending = false;
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |what: &str| {
            value
                .parse::<f64>()
                .map_err(|e| format!("{what} {value:?}: {e}"))
        };
        match flag.as_str() {
            "--units" => model.units = number("--units")? as u32,
            "--size-cap" => model.size_cap = number("--size-cap")? as u32,
            "--long-scan-ratio" => model.long_scan_ratio = number("--long-scan-ratio")?,
            "--rewrite-ratio" => model.rewrite_time = number("--rewrite-ratio")?,
            "--merge-slowdown" => model.merge_slowdown = number("--merge-slowdown")?,
            "--false-positive-rate" => model.false_positive_rate = number("--false-positive-rate")?,
            "--repeat" => repeat = (number("--repeat")? as usize).max(1),
            other => return Err(format!("unknown option {other}")),
        }
    }
    let mut times = Vec::new();
    let mut schedule = None;
    for _ in 0..repeat {
        let start = Instant::now();
        let s = if pending {
            solve(&model)?
        } else {
            solve_without_pending(&model)?
        };
        times.push(start.elapsed().as_secs_f64() * 1e3);
        schedule = Some(s);
    }
    let Some(schedule) = schedule else {
        return Err("nothing solved".into());
    };
    times.sort_by(f64::total_cmp);
    println!(
        "Algorithm {}: R = {}, C = {}, r = {}, T_c/T_w = {}, beta = {}, f = {}",
        if pending { 2 } else { 1 },
        model.units,
        model.size_cap,
        model.long_scan_ratio,
        model.rewrite_time,
        model.merge_slowdown,
        model.false_positive_rate
    );
    println!(
        "solved in {:.1} ms (median of {repeat}; min {:.1}, max {:.1}); score {:.3}",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        schedule.score
    );
    for event in schedule.merges() {
        println!("  {event}");
    }
    let last = schedule.targets().pop().unwrap_or_default();
    println!(
        "  layout before the global compaction: {}",
        format_layout(&last)
    );
    Ok(())
}
