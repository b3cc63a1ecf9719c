//! `strata-stress crash`, the driver: start `run` children, kill them with SIGKILL, damage a WAL
//! now and then (in `wal_damage`), and sum up what the children verified.

use crate::side_log::side_log_dir;
use anyhow::{bail, Context, Result};
use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use strata_policy::testing;

mod wal_damage;

use wal_damage::damage_case;

#[derive(Parser)]
pub(crate) struct CrashArgs {
    /// Parent directory of the databases (one per policy).
    #[arg(long)]
    dir: PathBuf,
    /// Kill/restart cycles in total, spread over the policies.
    #[arg(long, default_value_t = 12)]
    cycles: u64,
    /// Policies, comma-separated, or "all".
    #[arg(long, default_value = "all")]
    policies: String,
    /// Longest time a child runs before the kill, in seconds (each cycle draws a delay up to it).
    #[arg(long, default_value_t = 2.0)]
    max_seconds: f64,
    /// Worker threads per child.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Keys per worker thread of each child (more keys, bigger trees, longer handovers).
    #[arg(long, default_value_t = 2000)]
    keys: u64,
    /// Seed of the driver.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Policy switches: every cycle works on one database, opens it with a policy other than
    /// the last cycle's (a switch at open) and switches again while it writes (`Db::set_policy`),
    /// so kills land in handovers.
    #[arg(long)]
    switching: bool,
    /// The autopilot switching: every cycle works on one database, created with the first
    /// policy and reopened with the one it records, while the children's autopilot (an advisor
    /// that always prefers the next policy of the list) switches every few hundred
    /// milliseconds, so kills land in handovers and between decisions and their switches.
    #[arg(long, conflicts_with = "switching")]
    autopilot: bool,
    /// Every this many cycles (0: never), damage a WAL after the kill: cut the end off an older
    /// WAL or flip a byte before the newest WAL's last record. A default open must refuse it as
    /// corruption naming the file, a point-in-time open (of a copy) must hold a prefix of every
    /// thread's history, and after the damage is undone the next cycle verifies everything.
    #[arg(long, default_value_t = 0)]
    wal_damage_every: u64,
    /// Children read and write table files with direct I/O.
    #[arg(long)]
    direct_io: bool,
    /// Children write everything through the WAL. Otherwise some writes leave it out
    /// (`WriteOptions::disable_wal`), except with `--wal-damage-every`, whose point-in-time
    /// check wants every thread's history as a log.
    #[arg(long)]
    all_logged: bool,
    /// Keyspaces each child spreads its keys over (the default one and `ks1`.. with Min-Max,
    /// partial-mixed and tiered in turn): batches then span keyspaces, and every kill checks
    /// that each is whole.
    #[arg(long, default_value_t = 1)]
    keyspaces: usize,
    /// Before each child, copy its database and side logs to `<dir>.prev` and `<dir>.prev.log`:
    /// after a failure, the state the failing child recovered from, to replay by hand (the
    /// run stops at the first failure).
    #[arg(long)]
    keep_previous: bool,
    /// Children run with this TTL, in seconds of a clock ten times the system's, and periodic
    /// compaction (`strata-stress run --ttl`): entries expire within a cycle and across the
    /// kills, and every check accepts a value as gone only where it may have expired.
    #[arg(long, conflicts_with = "wal_damage_every")]
    ttl: Option<u64>,
    /// Children run a compaction filter that removes the values ending in `x`, which one put
    /// in 8 writes (`strata-stress run --filter`): a key holding one may read absent, never an
    /// older value.
    #[arg(long)]
    filter: bool,
}

/// What the crash driver measured.
#[derive(Debug, Default, Serialize)]
struct CrashSummary {
    cycles: u64,
    kills: u64,
    clean_exits: u64,
    failures: u64,
    keys_checked: u64,
    acked_writes_verified: u64,
    in_flight_applied: u64,
    in_flight_absent: u64,
    /// Keys written without the WAL whose value verification settled.
    unlogged_keys_settled: u64,
    /// ... of which a kill rolled back.
    unlogged_keys_rolled_back: u64,
    /// Keys whose value verification found gone by expiry (`--ttl`).
    keys_expired: u64,
    /// ... or removed by the compaction filter (`--filter`).
    keys_filtered: u64,
    per_policy_cycles: BTreeMap<String, u64>,
    /// Cycles that found the database in a handover the kill had cut short (`--switching`,
    /// `--autopilot`).
    recovered_in_handover: u64,
    /// Switches the children's autopilot made (`--autopilot`).
    autopilot_switches: u64,
    /// WAL damage cases made (`--wal-damage-every`).
    wal_damage_cases: u64,
    /// ... of which an older WAL lost its end.
    wal_damage_older_truncated: u64,
    /// ... of which the older WAL held bytes past the length its successor vouches for (a torn
    /// tail an earlier open dropped): the cut went past them into the history.
    wal_damage_older_past_history: u64,
    /// Cases with two WALs or more where the newest one's link did not vouch for the one before
    /// (a kill right after creating the newest): the newest was damaged instead.
    wal_damage_older_unvouched: u64,
    /// Cases a default open refused as corruption naming the damaged WAL.
    wal_damage_detected: u64,
    /// Acknowledged writes a point-in-time open left out (after its stop), over all cases.
    point_in_time_writes_dropped: u64,
    /// Cycles where no WAL could be damaged (none with enough records).
    wal_damage_skipped: u64,
    /// Point-in-time opens that refused because a dropped WAL held re-logged entries.
    point_in_time_refused: u64,
    /// Where the last point-in-time open stopped (for a failure's report).
    #[serde(skip)]
    last_stop: Option<String>,
    seconds: f64,
    /// Every failure, in order (the first decides the exit message).
    failure_messages: Vec<String>,
}

impl CrashSummary {
    /// Counts a failure and keeps its message.
    fn fail(&mut self, message: String) {
        self.failures += 1;
        self.failure_messages.push(message);
    }
}

pub(crate) fn crash(args: CrashArgs) -> Result<()> {
    let policies: Vec<String> = if args.policies == "all" {
        testing::policies_to_test()
            .into_iter()
            .map(String::from)
            .collect()
    } else {
        args.policies
            .split(',')
            .map(|s| s.trim().to_string())
            .collect()
    };
    let exe = std::env::current_exe().context("finding this executable")?;
    let mut rng = Pcg64Mcg::seed_from_u64(args.seed);
    let mut s = CrashSummary::default();
    let start = Instant::now();
    let mut last: Option<String> = None;
    for cycle in 0..args.cycles {
        let mut policy = &policies[(cycle % policies.len() as u64) as usize];
        let mut dir = args.dir.join(policy);
        let run_for = rng.random_range(0.05..args.max_seconds.max(0.06));
        let mut switch = Vec::new();
        if args.switching {
            // One database; each cycle opens it with another policy, then switches again.
            let pick = |rng: &mut Pcg64Mcg, not: Option<&String>| loop {
                let p = &policies[rng.random_range(0..policies.len())];
                if Some(p) != not || policies.len() == 1 {
                    break p;
                }
            };
            policy = pick(&mut rng, last.as_ref());
            let to = pick(&mut rng, Some(policy));
            dir = args.dir.join("switching");
            switch = vec![
                // Slow background writes: handovers outlast the time before the kill.
                "--rate-limit".to_string(),
                (1u64 << 20).to_string(),
                "--switch-to".to_string(),
                to.clone(),
                "--switch-after".to_string(),
                // Late in the run, so that the kill often lands in the handover.
                format!("{:.3}", run_for * rng.random_range(0.7..1.0)),
            ];
            last = Some(to.clone());
        }
        if args.autopilot {
            // One database; its policy is whatever the autopilot last switched to.
            policy = &policies[0];
            dir = args.dir.join("autopilot");
            switch = vec![
                // Slow background writes: handovers outlast the time before the kill.
                "--rate-limit".to_string(),
                (1u64 << 20).to_string(),
            ];
        }
        if args.keep_previous {
            keep_previous(&dir)?;
        }
        let mut child = child_run(&exe, policy, &args, &dir)
            .args(["--seed", &rng.random::<u64>().to_string()])
            .args(&switch)
            // Every other round over the policies commits pipelined, so that WALs written one
            // way are recovered and written on the other.
            .args(((cycle / policies.len() as u64) % 2 == 1).then_some("--pipelined-write"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting a child")?;
        std::thread::sleep(Duration::from_secs_f64(run_for));
        // SIGKILL: no destructor, no flush, no close.
        let killed = child.kill().is_ok();
        let out = child.wait_with_output().context("waiting for the child")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let verified_line = stdout.lines().find_map(|l| l.strip_prefix("VERIFIED "));
        if stdout.lines().any(|l| l == "IN_HANDOVER true") {
            s.recovered_in_handover += 1;
        }
        s.autopilot_switches += stdout
            .lines()
            .filter(|l| l.starts_with("AUTOPILOT_SWITCH "))
            .count() as u64;
        match verified_line.and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
            Some(v) => {
                let n = |f: &str| v.get(f).and_then(serde_json::Value::as_u64).unwrap_or(0);
                s.keys_checked += n("keys_checked");
                s.acked_writes_verified += n("acked_writes");
                s.in_flight_applied += n("in_flight_applied");
                s.in_flight_absent += n("in_flight_absent");
                s.unlogged_keys_settled += n("unlogged_keys_settled");
                s.unlogged_keys_rolled_back += n("unlogged_keys_rolled_back");
                s.keys_expired += n("keys_expired");
                s.keys_filtered += n("keys_filtered");
            }
            None if !stderr.trim().is_empty() || out.status.code().is_some_and(|c| c != 0) => {
                s.fail(format!("cycle {cycle} ({policy}): {}", stderr.trim()));
            }
            None => {}
        }
        if !stderr.trim().is_empty()
            && verified_line.is_some()
            && out.status.code().is_some_and(|c| c != 0)
        {
            // Verification passed, then the workload itself found a disagreement.
            s.fail(format!("cycle {cycle} ({policy}): {}", stderr.trim()));
        }
        if args.wal_damage_every > 0 && cycle % args.wal_damage_every == args.wal_damage_every - 1 {
            if let Err(e) =
                damage_case(&dir, policy, args.threads, args.keyspaces, &mut rng, &mut s)
            {
                s.fail(format!("cycle {cycle} ({policy}), WAL damage: {e:#}"));
            }
        }
        if killed && out.status.code().is_none() {
            s.kills += 1;
        } else {
            s.clean_exits += 1;
        }
        s.cycles += 1;
        *s.per_policy_cycles.entry(policy.clone()).or_default() += 1;
        if args.keep_previous && s.failures > 0 {
            // The copy is of the state the failure came from: keep it.
            break;
        }
    }
    // A last verification per policy (of the one database when switching), without a kill
    // after it.
    let finals: Vec<(&String, PathBuf)> = if args.switching {
        vec![(&policies[0], args.dir.join("switching"))]
    } else if args.autopilot {
        vec![(&policies[0], args.dir.join("autopilot"))]
    } else {
        policies.iter().map(|p| (p, args.dir.join(p))).collect()
    };
    for (policy, dir) in finals {
        let out = child_run(&exe, policy, &args, &dir)
            .args(["--seconds", "0"])
            .output()
            .context("running the final verification")?;
        if !out.status.success() {
            s.fail(format!(
                "final check ({policy}): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    s.seconds = start.elapsed().as_secs_f64();
    println!("{}", serde_json::to_string_pretty(&s)?);
    if s.failures > 0 {
        bail!(
            "{} failures; first: {}",
            s.failures,
            s.failure_messages.first().cloned().unwrap_or_default()
        );
    }
    Ok(())
}

/// Copies the database in `dir` and its side logs beside them, as `<dir>.prev` and
/// `<dir>.prev.log` (see `--keep-previous`).
fn keep_previous(dir: &Path) -> Result<()> {
    let prev = dir.with_extension("prev");
    for (from, to) in [
        (dir.to_path_buf(), prev.clone()),
        (side_log_dir(dir), side_log_dir(&prev)),
    ] {
        let _ = std::fs::remove_dir_all(&to);
        if !from.exists() {
            continue;
        }
        std::fs::create_dir_all(&to)?;
        for entry in std::fs::read_dir(&from)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::copy(entry.path(), to.join(entry.file_name()))
                    .with_context(|| format!("copying {}", entry.path().display()))?;
            }
        }
    }
    Ok(())
}

/// A child `run` of `policy` on the database in `dir`, with the driver's threads, keys and
/// direct I/O; the caller adds what differs (seed, switches, pipelining, or a run of no time).
fn child_run(exe: &Path, policy: &str, args: &CrashArgs, dir: &Path) -> Command {
    let mut command = Command::new(exe);
    command
        .args(["run", "--policy", policy])
        .args(["--threads", &args.threads.to_string()])
        .args(["--keys", &args.keys.to_string()])
        .args(["--keyspaces", &args.keyspaces.to_string()])
        .args(args.direct_io.then_some("--direct-io"))
        .args(args.autopilot.then_some("--autopilot"))
        .args(args.ttl.map(|ttl| format!("--ttl={ttl}")))
        .args(args.filter.then_some("--filter"))
        .args((!args.all_logged && args.wal_damage_every == 0).then_some("--unlogged-writes"))
        .arg("--dir")
        .arg(dir);
    command
}
