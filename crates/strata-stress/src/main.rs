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

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_engine::log::LogReader;
use strata_engine::manifest::{classify, FileKind};
use strata_engine::{Db, Options, ReadOptions, RecoveryMode, WriteBatch, WriteOptions};
use strata_policy::{testing, PolicySpec};

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

#[derive(Parser, Clone)]
struct RunArgs {
    /// Database directory (side logs live beside it, in `<dir>.log/`).
    #[arg(long)]
    dir: PathBuf,
    /// Compaction policy.
    #[arg(long, default_value = "leveled")]
    policy: String,
    /// Worker threads (each owns its own keys).
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Keys per thread.
    #[arg(long, default_value_t = 2000)]
    keys: u64,
    /// Stop after this many seconds (the driver usually kills earlier).
    #[arg(long, default_value_t = 3600.0)]
    seconds: f64,
    /// Seed (each run should get a new one).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Hand the tree to this policy (`Db::set_policy`) while the workers write, after
    /// `--switch-after` seconds.
    #[arg(long)]
    switch_to: Option<String>,
    /// Seconds before the switch.
    #[arg(long, default_value_t = 0.0)]
    switch_after: f64,
    /// Limit flush and compaction writes to this many bytes per second (so that handovers
    /// take long enough for kills to land in them).
    #[arg(long)]
    rate_limit: Option<u64>,
    /// Read and write table files with direct I/O (`Options::with_use_direct_reads` and
    /// `with_use_direct_io_for_flush_and_compaction`).
    #[arg(long)]
    direct_io: bool,
    /// Commit groups pipelined (`Options::with_enable_pipelined_write`).
    #[arg(long)]
    pipelined_write: bool,
}

#[derive(Parser)]
struct CrashArgs {
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
    /// Every this many cycles (0: never), damage a WAL after the kill: cut the end off an older
    /// WAL or flip a byte before the newest WAL's last record. A default open must refuse it as
    /// corruption naming the file, a point-in-time open (of a copy) must hold a prefix of every
    /// thread's history, and after the damage is undone the next cycle verifies everything.
    #[arg(long, default_value_t = 0)]
    wal_damage_every: u64,
    /// Children read and write table files with direct I/O.
    #[arg(long)]
    direct_io: bool,
}

/// The write buffer of every child: small, so a short run flushes and compacts many times.
const BUFFER: u64 = 64 << 10;

/// `policy` with the crash test's small tables.
fn policy_spec(policy: &str) -> Result<PolicySpec> {
    testing::register();
    let mut spec: PolicySpec = policy.parse()?;
    spec.fill_defaults([
        ("size_ratio", "4"),
        ("target_file_size", "32KiB"),
        ("expected_data_size", "16MiB"),
        // Min-Max flushes a quarter of the buffer, so kills fall between windows.
        ("bucket_size", "16KiB"),
    ])?;
    Ok(spec)
}

/// Small buffers and tables, so a short run flushes and compacts many times; table files read
/// and written with direct I/O if `direct_io`.
fn options(policy: &str, direct_io: bool) -> Result<Options> {
    let spec = policy_spec(policy)?;
    Ok(Options::new()
        .with_use_direct_reads(direct_io)
        .with_use_direct_io_for_flush_and_compaction(direct_io)
        .with_write_buffer_size(BUFFER)
        .with_block_size(1024)
        .with_max_background_jobs(3)
        // Lookups in level 1 (where most policies flush) go through the key index, so the
        // crash test's reads check it under every policy.
        .with_key_index(Some(1))
        .with_policy_spec(spec)?)
}

fn key_name(thread: usize, k: u64) -> String {
    format!("t{thread:02}-k{k:06}")
}

/// One write intent: its keys and new values (`None` = delete).
#[derive(Clone, Debug, PartialEq)]
struct Intent {
    seq: u64,
    writes: Vec<(String, Option<String>)>,
}

/// A thread's side log: intents, acknowledgements and resolutions, one line each.
struct SideLog {
    file: File,
}

impl SideLog {
    fn open(path: &Path) -> Result<SideLog> {
        // A kill can cut even a one-line write short where the file crosses a page boundary
        // (the kernel stops between pages once a fatal signal is pending). Replay ignores such
        // a torn last line; drop it before appending, or the next line is glued to it (seen
        // as "A 1X 15254" after a kill cut "A 15254" at "A 1").
        match std::fs::read(path) {
            Ok(text) => {
                let keep = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                if keep < text.len() {
                    OpenOptions::new()
                        .write(true)
                        .open(path)
                        .and_then(|f| f.set_len(keep as u64))
                        .with_context(|| format!("cutting the torn tail of {}", path.display()))?;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening side log {}", path.display()))?;
        Ok(SideLog { file })
    }

    /// Appends one line with a single write, so a kill cannot interleave or reorder lines.
    fn line(&mut self, text: &str) -> Result<()> {
        let mut buf = text.as_bytes().to_vec();
        buf.push(b'\n');
        self.file.write_all(&buf).context("writing the side log")
    }

    fn intent(&mut self, i: &Intent) -> Result<()> {
        let parts: Vec<String> = i
            .writes
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("~")))
            .collect();
        self.line(&format!("I {} {}", i.seq, parts.join(";")))
    }
}

/// What a side log says about one thread's keys.
#[derive(Debug, Default)]
struct Replayed {
    /// Value of each key after every acknowledged write.
    model: BTreeMap<String, Option<String>>,
    /// The last intent, if it was never acknowledged nor resolved.
    in_flight: Option<Intent>,
    /// Next sequence number to use.
    next_seq: u64,
    /// Acknowledged writes in the log.
    acked: u64,
    /// The acknowledged writes in order (a thread waits for each before the next).
    history: Vec<Intent>,
}

fn parse_intent(rest: &str) -> Option<Intent> {
    let (seq, body) = rest.split_once(' ')?;
    let seq = seq.parse().ok()?;
    let mut writes = Vec::new();
    for part in body.split(';').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=')?;
        writes.push((k.to_string(), (v != "~").then(|| v.to_string())));
    }
    Some(Intent { seq, writes })
}

/// Replays a side log. A last line without a newline was cut by the kill and is ignored: its
/// intent was never issued (intents are logged before the write starts).
fn replay(path: &Path) -> Result<Replayed> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let mut r = Replayed::default();
    let mut pending: HashMap<u64, Intent> = HashMap::new();
    for line in complete.lines() {
        let (tag, rest) = line.split_at(line.len().min(2));
        match tag.trim() {
            "I" => {
                let i = parse_intent(rest).with_context(|| format!("bad intent line {line:?}"))?;
                r.next_seq = r.next_seq.max(i.seq + 1);
                pending.insert(i.seq, i);
            }
            "A" => {
                let seq: u64 = rest
                    .trim()
                    .parse()
                    .with_context(|| format!("bad line {line:?}"))?;
                if let Some(i) = pending.remove(&seq) {
                    for (k, v) in &i.writes {
                        r.model.insert(k.clone(), v.clone());
                    }
                    r.acked += 1;
                    r.history.push(i);
                }
            }
            "X" => {
                let seq: u64 = rest
                    .trim()
                    .parse()
                    .with_context(|| format!("bad line {line:?}"))?;
                pending.remove(&seq);
            }
            _ => bail!("unexpected side-log line {line:?} in {}", path.display()),
        }
    }
    if pending.len() > 1 {
        bail!(
            "{} has {} unresolved intents; a thread has at most one in flight",
            path.display(),
            pending.len()
        );
    }
    r.in_flight = pending.into_values().next();
    Ok(r)
}

fn side_log_dir(dir: &Path) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(".log");
    PathBuf::from(s)
}

/// Verification counts of one restart.
#[derive(Debug, Default, Serialize, Clone, Copy)]
struct Verified {
    keys_checked: u64,
    acked_writes: u64,
    in_flight_applied: u64,
    in_flight_absent: u64,
}

/// Checks the database against every thread's side log and resolves in-flight intents.
fn verify(db: &Db, logs: &Path, threads: usize) -> Result<Verified> {
    let mut v = Verified::default();
    let mut all_expected: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut in_flight_keys: HashMap<String, Option<String>> = HashMap::new();
    for t in 0..threads {
        let path = logs.join(format!("thread-{t:02}.log"));
        let r = replay(&path)?;
        v.acked_writes += r.acked;
        let mut log = SideLog::open(&path)?;
        if let Some(i) = &r.in_flight {
            // All or nothing: count the keys showing the intent's value where it differs from
            // the acknowledged state.
            let mut shows_new = 0;
            let mut distinguishable = 0;
            for (k, new) in &i.writes {
                let old = r.model.get(k).cloned().flatten();
                if &old == new {
                    continue;
                }
                distinguishable += 1;
                let actual = db.get(k)?.map(|b| String::from_utf8_lossy(&b).into_owned());
                if &actual == new {
                    shows_new += 1;
                } else if actual != old {
                    bail!("key {k}: value {actual:?} is neither the acknowledged {old:?} nor the in-flight {new:?}");
                }
            }
            let applied = shows_new > 0;
            if applied && shows_new != distinguishable {
                bail!("in-flight batch {} applied to {shows_new} of {distinguishable} keys: not atomic", i.seq);
            }
            if applied {
                v.in_flight_applied += 1;
                log.line(&format!("A {}", i.seq))?;
            } else {
                v.in_flight_absent += 1;
                log.line(&format!("X {}", i.seq))?;
            }
            for (k, new) in &i.writes {
                in_flight_keys.insert(
                    k.clone(),
                    if applied {
                        new.clone()
                    } else {
                        r.model.get(k).cloned().flatten()
                    },
                );
            }
        }
        for (k, val) in r.model {
            all_expected.insert(k, val);
        }
    }
    for (k, val) in in_flight_keys {
        all_expected.insert(k, val);
    }
    // Every key: exactly the expected value.
    for (k, want) in &all_expected {
        let got = db.get(k)?.map(|b| String::from_utf8_lossy(&b).into_owned());
        if &got != want {
            bail!("key {k}: found {got:?}, expected {want:?} (an acknowledged write was lost or a stale value resurfaced)");
        }
        v.keys_checked += 1;
    }
    // And nothing else: a full scan holds exactly the live expected keys.
    let live: Vec<(&String, &String)> = all_expected
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
        .collect();
    let mut scanned = 0usize;
    for entry in db.range::<&str, _>(..)? {
        let (k, val) = entry?;
        let (k, val) = (
            String::from_utf8_lossy(&k).into_owned(),
            String::from_utf8_lossy(&val).into_owned(),
        );
        match all_expected.get(&k) {
            Some(Some(want)) if *want == val => scanned += 1,
            other => bail!(
                "scan found {k} = {val:?}, which the logs do not explain (expected {other:?})"
            ),
        }
    }
    if scanned != live.len() {
        bail!("scan found {scanned} keys, the logs expect {}", live.len());
    }
    Ok(v)
}

/// One worker: random operations on its own keys, checked against its own model.
fn worker(
    db: Arc<Db>,
    logs: PathBuf,
    thread: usize,
    args: RunArgs,
    deadline: Instant,
) -> Result<u64> {
    let path = logs.join(format!("thread-{thread:02}.log"));
    let r = replay(&path)?;
    if r.in_flight.is_some() {
        bail!("thread {thread}: unresolved intent after verification");
    }
    let mut model = r.model;
    let mut seq = r.next_seq;
    let mut log = SideLog::open(&path)?;
    let mut rng = Pcg64Mcg::seed_from_u64(args.seed ^ (thread as u64).wrapping_mul(0x9E37_79B9));
    let mut ops = 0u64;
    while Instant::now() < deadline {
        let k = rng.random_range(0..args.keys);
        let key = key_name(thread, k);
        match rng.random_range(0..100) {
            0..=54 => {
                // A put, a delete, or a batch of up to 8 writes of this thread's keys.
                let writes: Vec<(String, Option<String>)> = match rng.random_range(0..10) {
                    0..=4 => vec![(
                        key.clone(),
                        Some(format!("t{thread}s{seq}v{}", rng.random::<u32>())),
                    )],
                    // A value larger than a block: blocks of one entry, which block-preserving
                    // merges keep, so kills meet tables that refer to other files.
                    5 => vec![(
                        key.clone(),
                        Some(format!(
                            "t{thread}s{seq}v{}{}",
                            rng.random::<u32>(),
                            "p".repeat(1100)
                        )),
                    )],
                    6..=7 => vec![(key.clone(), None)],
                    _ => {
                        let mut w = BTreeMap::new();
                        for _ in 0..rng.random_range(2..8) {
                            let k = key_name(thread, rng.random_range(0..args.keys));
                            let v = rng
                                .random_bool(0.8)
                                .then(|| format!("t{thread}s{seq}v{}", rng.random::<u32>()));
                            w.insert(k, v);
                        }
                        w.into_iter().collect()
                    }
                };
                let intent = Intent { seq, writes };
                log.intent(&intent)?;
                let mut batch = WriteBatch::new();
                for (k, v) in &intent.writes {
                    match v {
                        Some(v) => batch.put(k, v)?,
                        None => batch.delete(k)?,
                    };
                }
                let sync = rng.random_bool(0.1);
                db.write(&WriteOptions { sync }, batch)?;
                log.line(&format!("A {seq}"))?;
                for (k, v) in intent.writes {
                    model.insert(k, v);
                }
                seq += 1;
            }
            55..=84 => {
                let got = db
                    .get(&key)?
                    .map(|b| String::from_utf8_lossy(&b).into_owned());
                let want = model.get(&key).cloned().flatten();
                if got != want {
                    bail!("thread {thread}: get {key} = {got:?}, expected {want:?}");
                }
            }
            85..=94 => {
                // A scan over this thread's keys from `key`, checked against the model.
                let end = format!("t{thread:02}-l");
                let got: Vec<(String, String)> = db
                    .range(key.as_str()..end.as_str())?
                    .take(20)
                    .map(|e| {
                        e.map(|(k, v)| {
                            (
                                String::from_utf8_lossy(&k).into_owned(),
                                String::from_utf8_lossy(&v).into_owned(),
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?;
                let want: Vec<(String, String)> = model
                    .range(key.clone()..end.clone())
                    .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
                    .take(20)
                    .collect();
                if got != want {
                    bail!("thread {thread}: scan from {key} disagrees with the model");
                }
            }
            _ => {
                // A snapshot stays frozen while this thread writes again.
                let snap = db.snapshot();
                let before = db.get_with(&key, &ReadOptions::at(&snap))?;
                let mut b = WriteBatch::new();
                let v = format!("t{thread}s{seq}v{}", rng.random::<u32>());
                b.put(&key, &v)?;
                let intent = Intent {
                    seq,
                    writes: vec![(key.clone(), Some(v))],
                };
                log.intent(&intent)?;
                db.write(&WriteOptions::default(), b)?;
                log.line(&format!("A {seq}"))?;
                model.insert(key.clone(), intent.writes[0].1.clone());
                seq += 1;
                let after = db.get_with(&key, &ReadOptions::at(&snap))?;
                if before != after {
                    bail!("thread {thread}: a snapshot read of {key} changed");
                }
            }
        }
        ops += 1;
    }
    Ok(ops)
}

/// Opens the database with synchronous compaction (no background job adds files meanwhile)
/// and checks that its table files are exactly those the recovered version needs: its tables'
/// own and those kept for the blocks its tables refer to. A kill must leave neither a dangling
/// reference (open fails on a missing file) nor, after open's cleanup, a leaked file.
fn check_table_files(args: &RunArgs) -> Result<()> {
    let options = options(&args.policy, args.direct_io)?.with_synchronous_compaction(true);
    let db = Db::open(&args.dir, options).context("opening to check the table files")?;
    let version = db.version();
    let needed: std::collections::BTreeSet<u64> = version
        .tables()
        .map(|(_, _, t)| t.id.0)
        .chain(version.retained_files().map(|(f, _)| f.0))
        .collect();
    let mut on_disk = std::collections::BTreeSet::new();
    for entry in
        std::fs::read_dir(&args.dir).with_context(|| format!("listing {}", args.dir.display()))?
    {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(FileKind::Table(n)) = classify(&name) {
            on_disk.insert(n);
        }
    }
    db.close().context("closing after the file check")?;
    if on_disk != needed {
        let leaked: Vec<_> = on_disk.difference(&needed).collect();
        let missing: Vec<_> = needed.difference(&on_disk).collect();
        bail!("table files leaked {leaked:?}, missing {missing:?} after reopening");
    }
    Ok(())
}

fn run(args: RunArgs) -> Result<()> {
    let logs = side_log_dir(&args.dir);
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    if args.dir.join("CURRENT").exists() {
        // Whether the kill cut a handover short: the recovered version says so.
        let reader = Db::open_read_only(&args.dir, Options::new())
            .context("reading the recovered version")?;
        println!("IN_HANDOVER {}", reader.version().in_handover());
        reader.close()?;
        check_table_files(&args)?;
    }
    let db = Arc::new(
        Db::open(
            &args.dir,
            options(&args.policy, args.direct_io)?
                .with_rate_limiter(args.rate_limit)
                .with_enable_pipelined_write(args.pipelined_write),
        )
        .context("reopening after the crash")?,
    );
    let verified = verify(&db, &logs, args.threads).context("verifying after the crash")?;
    println!("VERIFIED {}", serde_json::to_string(&verified)?);
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
    let switcher = match &args.switch_to {
        Some(to) => {
            let mut spec = policy_spec(to)?;
            spec.fill_defaults([("write_buffer_size", BUFFER)])?;
            let policy = strata_policy::build_policy(&spec)?;
            let (db, after) = (Arc::clone(&db), args.switch_after);
            Some(std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs_f64(after));
                db.set_policy(policy)
            }))
        }
        None => None,
    };
    let handles: Vec<_> = (0..args.threads)
        .map(|t| {
            let (db, logs, args) = (Arc::clone(&db), logs.clone(), args.clone());
            std::thread::spawn(move || worker(db, logs, t, args, deadline))
        })
        .collect();
    let mut ops = 0;
    for h in handles {
        ops += h
            .join()
            .map_err(|_| anyhow::anyhow!("a worker panicked"))??;
    }
    if let Some(h) = switcher {
        h.join()
            .map_err(|_| anyhow::anyhow!("the policy switch panicked"))?
            .context("switching the policy")?;
    }
    println!("DONE {ops}");
    Ok(())
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
    per_policy_cycles: BTreeMap<String, u64>,
    /// Cycles that found the database in a handover the kill had cut short (`--switching`).
    recovered_in_handover: u64,
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

/// WAL files of `dir`, by number: (number, path).
fn wal_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut wals = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(FileKind::Wal(n)) = classify(&name) {
            wals.push((n, entry.path()));
        }
    }
    wals.sort();
    Ok(wals)
}

/// For a failure's report: each WAL's number, size, complete records and link.
fn describe_wals(wals: &[(u64, PathBuf)]) -> String {
    let describe = |(number, path): &(u64, PathBuf)| {
        let data = std::fs::read(path).unwrap_or_default();
        format!(
            "{number}: {} bytes, {} records, link {:?}",
            data.len(),
            record_offsets(&data).len(),
            strata_engine::wal_chain::link_of(&data)
        )
    };
    wals.iter().map(describe).collect::<Vec<_>>().join("; ")
}

/// Offsets at which the complete records of a log start.
fn record_offsets(data: &[u8]) -> Vec<u64> {
    let mut reader = LogReader::new(
        data.to_vec(),
        String::new(),
        RecoveryMode::TolerateCorruptedTail,
    );
    let mut offsets = Vec::new();
    while let Ok(Some(_)) = reader.next_record() {
        offsets.push(reader.last_record_offset());
    }
    offsets
}

/// One WAL damage case on the database a kill just left in `dir` (see `--wal-damage-every`).
/// The damage is undone before returning, whatever happened.
fn damage_case(
    dir: &Path,
    policy: &str,
    threads: usize,
    rng: &mut Pcg64Mcg,
    s: &mut CrashSummary,
) -> Result<()> {
    // Only WALs recovery replays: one below the manifest's log number is obsolete (a kill may
    // come between the manifest record and its deletion), and damage there is harmless.
    let log_number = strata_engine::manifest::recover(&strata_engine::fs::StdFs, dir)
        .context("reading the manifest")?
        .log_number;
    let wals: Vec<_> = wal_files(dir)?
        .into_iter()
        .filter(|(n, _)| *n >= log_number)
        .collect();
    // An older WAL is damaged by cutting its end (synced history lost), the newest by a flipped
    // byte before its last record (a torn tail there would be legitimate). Only a WAL the next
    // one's link vouches for has a history recovery can know was lost: a kill between creating
    // a WAL and writing its link leaves it empty, and then the WAL before it is the last of the
    // chain, whose end recovery cannot tell from a torn tail.
    let vouched = match wals.as_slice() {
        [.., (older, _), (_, newest)] => std::fs::read(newest)
            .ok()
            .and_then(|data| strata_engine::wal_chain::link_of(&data))
            .filter(|link| link.number == *older)
            .map(|link| link.len),
        _ => None,
    };
    if wals.len() >= 2 && vouched.is_none() {
        s.wal_damage_older_unvouched += 1;
    }
    let older = vouched.is_some() && rng.random_bool(0.5);
    let (number, path) = if older {
        wals[wals.len() - 2].clone()
    } else {
        // The newest WAL holding a record (an empty newest one is not part of the chain).
        let holds_records =
            |path: &Path| std::fs::read(path).is_ok_and(|data| !record_offsets(&data).is_empty());
        match wals.iter().rev().find(|(_, path)| holds_records(path)) {
            Some(w) => w.clone(),
            None => {
                s.wal_damage_skipped += 1;
                return Ok(());
            }
        }
    };
    let original = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let offsets = record_offsets(&original);
    // The link record and at least two more: there is something before the last to damage.
    if offsets.len() < 3 {
        s.wal_damage_skipped += 1;
        return Ok(());
    }
    let mut damaged = original.clone();
    if older {
        // Bytes past the vouched length are a torn tail an earlier open dropped (recovery
        // ignores them): the cut must reach into the history.
        let history = vouched.unwrap_or(0).min(original.len() as u64);
        let past_history = original.len() as u64 - history;
        if past_history > 0 {
            s.wal_damage_older_past_history += 1;
        }
        let lo = past_history + 1;
        let cut = rng.random_range(lo..=lo + (history / 2).clamp(1, 50_000) - 1);
        damaged.truncate(original.len() - cut as usize);
        s.wal_damage_older_truncated += 1;
    } else {
        let record = rng.random_range(1..offsets.len() - 1);
        let (start, end) = (offsets[record], offsets[record + 1]);
        let at = rng.random_range(start..end) as usize;
        damaged[at] ^= 1 << rng.random_range(0..8);
    }
    std::fs::write(&path, &damaged)?;
    s.wal_damage_cases += 1;
    let what = if older {
        format!(
            "older-WAL cut to {} of {} bytes, {} vouched",
            damaged.len(),
            original.len(),
            vouched.unwrap_or(0)
        )
    } else {
        "byte flip".to_string()
    };
    let result = check_damage(dir, policy, threads, number, &what, s);
    // Undo the damage: the next child verifies everything, as after any kill.
    std::fs::write(&path, &original).with_context(|| format!("restoring {}", path.display()))?;
    result
}

/// What a damaged WAL must give: corruption naming it from a default open, with every WAL
/// still there, and a consistent prefix from a point-in-time open of a copy. `what` describes
/// the damage, for messages.
fn check_damage(
    dir: &Path,
    policy: &str,
    threads: usize,
    number: u64,
    what: &str,
    s: &mut CrashSummary,
) -> Result<()> {
    let name = format!("{number:06}.log");
    let wals_before = wal_files(dir)?;
    // Described now: an open that accepts the damage may replay and delete them.
    let described = describe_wals(&wals_before);
    // WAL damage is the point here: table files go through the page cache.
    match Db::open(dir, options(policy, false)?) {
        Ok(_) => bail!(
            "a default open accepted damaged {name} ({what}): a silent hole; WALs before the \
             open: {}",
            described
        ),
        Err(e @ strata_engine::Error::Corruption { .. }) if e.to_string().contains(&name) => {
            s.wal_damage_detected += 1;
        }
        Err(e) => bail!("a default open of damaged {name} failed otherwise: {e}"),
    }
    if wal_files(dir)? != wals_before {
        bail!("a failed open changed the WALs");
    }
    let copy = dir.with_extension("pit");
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name()))?;
        }
    }
    let result = (|| {
        let opened = Db::open(
            &copy,
            options(policy, false)?.with_wal_recovery_mode(RecoveryMode::PointInTime),
        );
        let db = match opened {
            // Window flushes re-logged older entries after the damage: no prefix exists, and
            // point-in-time recovery must say so rather than open with a hole.
            Err(e @ strata_engine::Error::Corruption { .. })
                if e.to_string().contains("re-logged") =>
            {
                s.point_in_time_refused += 1;
                return Ok(());
            }
            other => other.context("a point-in-time open")?,
        };
        match db.recovery_stop() {
            Some(stop) if stop.file == name => {
                s.last_stop = Some(format!("{stop:?}"));
            }
            other => bail!("point-in-time recovery stopped at {other:?}, not in {name}"),
        }
        s.point_in_time_writes_dropped += verify_prefix(&db, &side_log_dir(dir), threads)
            .with_context(|| {
                format!(
                    "{what} damage, stop {}",
                    s.last_stop.clone().unwrap_or_default()
                )
            })?;
        db.close()?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&copy);
    result
}

/// Checks that `db` holds, for every thread, exactly the state after some prefix of the
/// thread's acknowledged writes (and possibly its in-flight one): what point-in-time recovery
/// must leave, since a thread issues a write only after the previous one was acknowledged.
/// Returns the acknowledged writes past the prefixes found. Writes nothing to the side logs.
fn verify_prefix(db: &Db, logs: &Path, threads: usize) -> Result<u64> {
    let mut dropped = 0;
    for t in 0..threads {
        let r = replay(&logs.join(format!("thread-{t:02}.log")))?;
        let (start, end) = (format!("t{t:02}-"), format!("t{t:02}-l"));
        let mut actual: BTreeMap<String, String> = BTreeMap::new();
        for entry in db.range(start.as_str()..end.as_str())? {
            let (k, v) = entry?;
            actual.insert(
                String::from_utf8_lossy(&k).into_owned(),
                String::from_utf8_lossy(&v).into_owned(),
            );
        }
        // Walk the history, keeping the number of keys whose state differs from the database.
        let mut state: HashMap<String, Option<String>> = HashMap::new();
        let mut differing = actual.len();
        let mut longest = (differing == 0).then_some(0usize);
        let steps = r.history.iter().chain(&r.in_flight);
        for (i, intent) in steps.enumerate() {
            for (k, v) in &intent.writes {
                let found = actual.get(k);
                let before = state.get(k).cloned().flatten();
                let was_equal = before.as_ref() == found;
                let is_equal = v.as_ref() == found;
                state.insert(k.clone(), v.clone());
                match (was_equal, is_equal) {
                    (true, false) => differing += 1,
                    (false, true) => differing -= 1,
                    _ => {}
                }
            }
            if differing == 0 {
                longest = Some(i + 1);
            }
        }
        let Some(prefix) = longest else {
            bail!(
                "thread {t}: the database matches no prefix of its history: a hole ({})",
                explain_mismatch(&actual, &r)
            );
        };
        dropped += (r.history.len() as u64).saturating_sub(prefix as u64);
    }
    Ok(dropped)
}

/// For a failed [`verify_prefix`]: the closest prefix and a few keys that differ there, with
/// the step of the history that wrote the value found.
fn explain_mismatch(actual: &BTreeMap<String, String>, r: &Replayed) -> String {
    let steps: Vec<&Intent> = r.history.iter().chain(&r.in_flight).collect();
    let state_after = |n: usize| {
        let mut state: BTreeMap<String, Option<String>> = BTreeMap::new();
        for intent in &steps[..n] {
            for (k, v) in &intent.writes {
                state.insert(k.clone(), v.clone());
            }
        }
        state
    };
    let differing = |state: &BTreeMap<String, Option<String>>| -> Vec<String> {
        let keys: std::collections::BTreeSet<&String> = state.keys().chain(actual.keys()).collect();
        keys.into_iter()
            .filter(|k| state.get(*k).cloned().flatten().as_ref() != actual.get(*k))
            .cloned()
            .collect()
    };
    let (best, diff) = (0..=steps.len())
        .map(|n| (n, differing(&state_after(n))))
        .min_by_key(|(_, d)| d.len())
        .unwrap_or_default();
    let state = state_after(best);
    let samples: Vec<String> = diff
        .iter()
        .take(3)
        .map(|k| {
            let found = actual.get(k);
            let wrote = steps.iter().position(|i| {
                i.writes
                    .iter()
                    .any(|(wk, wv)| wk == k && wv.as_ref() == found)
            });
            format!(
                "{k}: found {found:?} (written at step {wrote:?}), prefix has {:?}",
                state.get(k).cloned().flatten()
            )
        })
        .collect();
    format!(
        "{} steps, closest prefix {best} differs in {} keys: {}",
        steps.len(),
        diff.len(),
        samples.join("; ")
    )
}

fn crash(args: CrashArgs) -> Result<()> {
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
        let mut child = Command::new(&exe)
            .args([
                "run",
                "--policy",
                policy,
                "--threads",
                &args.threads.to_string(),
                "--keys",
                &args.keys.to_string(),
                "--seed",
                &rng.random::<u64>().to_string(),
            ])
            .args(&switch)
            .args(args.direct_io.then_some("--direct-io"))
            // Every other round over the policies commits pipelined, so that WALs written one
            // way are recovered and written on the other.
            .args(((cycle / policies.len() as u64) % 2 == 1).then_some("--pipelined-write"))
            .arg("--dir")
            .arg(&dir)
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
        match verified_line.and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
            Some(v) => {
                let n = |f: &str| v.get(f).and_then(serde_json::Value::as_u64).unwrap_or(0);
                s.keys_checked += n("keys_checked");
                s.acked_writes_verified += n("acked_writes");
                s.in_flight_applied += n("in_flight_applied");
                s.in_flight_absent += n("in_flight_absent");
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
            if let Err(e) = damage_case(&dir, policy, args.threads, &mut rng, &mut s) {
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
    }
    // A last verification per policy (of the one database when switching), without a kill
    // after it.
    let finals: Vec<(&String, PathBuf)> = if args.switching {
        vec![(&policies[0], args.dir.join("switching"))]
    } else {
        policies.iter().map(|p| (p, args.dir.join(p))).collect()
    };
    for (policy, dir) in finals {
        let out = Command::new(&exe)
            .args([
                "run",
                "--policy",
                policy,
                "--threads",
                &args.threads.to_string(),
                "--keys",
                &args.keys.to_string(),
                "--seconds",
                "0",
            ])
            .args(args.direct_io.then_some("--direct-io"))
            .arg("--dir")
            .arg(&dir)
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

fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Run(a) => run(a),
        Cmd::Crash(a) => crash(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_side_log_line_is_cut_before_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("thread-00.log");
        // A kill cut "A 15254" short after "A 1".
        std::fs::write(&path, "I 15254 k=~\nA 1").unwrap();
        let mut log = SideLog::open(&path).unwrap();
        log.line("X 15254").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "I 15254 k=~\nX 15254\n"
        );
        let replayed = replay(&path).unwrap();
        assert_eq!(replayed.acked, 0, "the cut acknowledgement does not count");
        // A log that ends with a whole line is left alone.
        drop(log);
        SideLog::open(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "I 15254 k=~\nX 15254\n"
        );
    }
}
