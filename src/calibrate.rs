//! `strata calibrate`: measures what this machine and its device cost per unit of engine work
//! (`strata_advise::Calibration`) and writes it where `strata advise --calibration` and the
//! autopilot's advisor read it.

use crate::workload_args::size_arg;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use strata_advise::measure::{cores, measure_cpu, MeasureSettings};
use strata_advise::{Calibration, DeviceCosts, CALIBRATION_FILE};
use strata_bench::device_probe::{check_direct_io, probe_device, ProbeSettings};
use strata_bench::physical::sequential_write_bandwidth;

/// Options of `strata calibrate`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// A directory on the storage the databases use (a database directory, for one): the
    /// measurements write scratch files there and remove them.
    #[arg(long, value_name = "DIR", default_value = ".")]
    dir: PathBuf,
    /// Where to write the calibration. Default: DIR/CALIBRATION.json.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Measure the CPU costs only (a file system without direct I/O, such as tmpfs, has no
    /// device to measure; this is then the default).
    #[arg(long)]
    no_device: bool,
    /// The device measurement's file: larger than the device's own cache. [SIZE]
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = size_arg)]
    device_probe_size: u64,
    /// Seconds each device measurement runs.
    #[arg(long, default_value_t = 2.0)]
    device_probe_seconds: f64,
    /// Entries written in each CPU measurement.
    #[arg(long, default_value_t = 200_000)]
    entries: u64,
    /// Print the calibration as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `strata calibrate`.
pub fn run(args: CalibrateArgs) -> Result<()> {
    crate::checks::at_least("--entries", args.entries, 10_000)?;
    crate::checks::size_at_least("--device-probe-size", args.device_probe_size, 1 << 20)?;
    crate::checks::above("--device-probe-seconds", args.device_probe_seconds, 0.0)?;
    std::fs::create_dir_all(&args.dir).with_context(|| format!("--dir {}", args.dir.display()))?;
    let settings = MeasureSettings {
        entries: args.entries,
        ..MeasureSettings::default()
    };
    let cpu = measure_cpu(&args.dir, &settings)?;
    let device = if args.no_device {
        None
    } else if let Err(e) = check_direct_io(&args.dir) {
        eprintln!(
            "calibrate: no device costs ({e:#}); the advisor's out-of-cache estimates need them"
        );
        None
    } else {
        let probe = probe_device(
            &args.dir,
            &ProbeSettings {
                file_bytes: args.device_probe_size,
                seconds_each: args.device_probe_seconds,
            },
        )
        .context("measuring the device")?;
        let write = sequential_write_bandwidth(&args.dir, args.device_probe_size)
            .context("measuring the device's write bandwidth")?;
        Some(DeviceCosts {
            read_latency_us: 1e6 / probe.random_read_iops_qd1.max(1e-9),
            read_bytes_per_sec: probe.sequential_read_bytes_per_sec,
            write_bytes_per_sec: write,
        })
    };
    let calibration = Calibration {
        measured_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs().max(1)),
        cores: cores(),
        cpu,
        device,
        ..Calibration::assumed()
    };
    calibration.check().map_err(anyhow::Error::msg)?;
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| args.dir.join(CALIBRATION_FILE));
    calibration.save(&output)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&calibration)?);
    } else {
        print!("{}", text(&calibration));
        println!("written to {}", output.display());
    }
    Ok(())
}

fn text(c: &Calibration) -> String {
    let p = &c.cpu;
    let mut s = format!(
        "cores {}\n\
         put (WAL + memtable)        {:>10.0} ns\n\
         flush, per entry            {:>10.0} ns\n\
         merge, per input entry      {:>10.0} ns\n\
         table written, fixed        {:>10.0} ns\n\
         lookup, found in one run    {:>10.0} ns\n\
         each other run probed       {:>10.0} ns\n\
         scan, seek per run          {:>10.0} ns\n\
         scan, per entry             {:>10.0} ns\n\
         scan, per entry, each run   {:>10.1} ns\n",
        c.cores,
        p.write_ns,
        p.flush_ns_per_entry,
        p.merge_ns_per_entry,
        p.table_ns,
        p.lookup_ns,
        p.run_probe_ns,
        p.seek_ns_per_run,
        p.scan_ns_per_entry,
        p.scan_ns_per_entry_per_run
    );
    if let Some(d) = &c.device {
        s.push_str(&format!(
            "device read, 4 KiB random   {:>10.1} µs\n\
             device read, sequential     {:>10.0} MB/s\n\
             device write, sequential    {:>10.0} MB/s\n",
            d.read_latency_us,
            d.read_bytes_per_sec / 1e6,
            d.write_bytes_per_sec / 1e6
        ));
    }
    s
}
