//! `strata-stress run`, the child: verify the database against the side logs, then run the random
//! workload of several worker threads until killed or done.

use crate::expiry::{removable, Expiry, FastClock, RemoveMarked, REMOVABLE};
use crate::keyspaces::Router;
use crate::side_log::{replay, side_log_dir, Intent, SideLog};
use crate::verify::verify;
use anyhow::{bail, Context, Result};
use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_engine::filename::{classify, FileKind};
use strata_engine::{
    AppendOperator, Db, EventListener, Options, PolicySwitch, ReadOptions, WriteBatch, WriteOptions,
};
use strata_policy::autopilot::{AutopilotOptions, RotatePolicies};
use strata_policy::{testing, PolicySpec};

#[derive(Parser, Clone)]
pub(crate) struct RunArgs {
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
    /// Leave some writes out of the WAL (`WriteOptions::disable_wal`): a kill may lose those
    /// not yet in a table, which verification accepts key by key.
    #[arg(long)]
    unlogged_writes: bool,
    /// Keyspaces the keys are spread over (the default one and `ks1`..; see `keyspaces.rs`).
    #[arg(long, default_value_t = 1)]
    pub(crate) keyspaces: usize,
    /// Run the autopilot (`Options::with_autopilot`) with an advisor that always predicts the
    /// next policy of the test list twice as fast, so it switches every few hundred
    /// milliseconds; the database is reopened with the policy it records (the autopilot's
    /// last switch), `--policy` only creating it. Each switch prints `AUTOPILOT_SWITCH`.
    #[arg(long)]
    autopilot: bool,
    /// Entries expire this many seconds after their write, on a clock ten times the system's
    /// (`crate::expiry`), with periodic compaction at the same period; reads and verification
    /// accept a value as gone only where it may have expired. Merges and writes left out of
    /// the WAL are off (the logs could not name what they leave behind an expiry).
    #[arg(long)]
    pub(crate) ttl: Option<u64>,
    /// A compaction filter removes the values ending in `x` (one put in 8 writes one): a key
    /// holding one may read absent, never an older value.
    #[arg(long)]
    filter: bool,
}

impl RunArgs {
    /// What expires in this run.
    pub(crate) fn expiry(&self) -> Expiry {
        Expiry::new(self.ttl)
    }
}

/// The write buffer of every child: small, so a short run flushes and compacts many times.
const BUFFER: u64 = 64 << 10;

/// `policy` with the crash test's small tables.
pub(crate) fn policy_spec(policy: &str) -> Result<PolicySpec> {
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
/// and written with direct I/O if `direct_io`, their data blocks then aligned to pages.
pub(crate) fn options(policy: &str, direct_io: bool) -> Result<Options> {
    Ok(recorded_policy_options(direct_io).with_policy_spec(policy_spec(policy)?)?)
}

/// [`options`] without a policy: the database's recorded one applies.
fn recorded_policy_options(direct_io: bool) -> Options {
    Options::new()
        .with_use_direct_reads(direct_io)
        .with_use_direct_io_for_flush_and_compaction(direct_io)
        .with_block_align(direct_io)
        .with_write_buffer_size(BUFFER)
        .with_block_size(1024)
        .with_max_background_jobs(3)
        // Lookups in level 1 (where most policies flush) go through the key index, so the
        // crash test's reads check it under every policy.
        .with_key_index(Some(1))
        // The workers' lookups and snapshot reads go through a row cache that evicts.
        .with_row_cache_capacity(64 << 10)
        .with_merge_operator(Arc::new(AppendOperator::with_separator(",")))
        // A TTL no entry outlives: the ages it samples go into the manifest between the kills,
        // and every read and merge checks them.
        .with_ttl(Some(std::time::Duration::from_secs(24 * 3600)))
}

/// What the child opens with: [`options`] of `--policy`, except that with `--autopilot` an
/// existing database keeps the policy it records (the autopilot's last switch); with `--ttl`,
/// that TTL on the fast clock, and periodic compaction at the same period.
fn child_options(args: &RunArgs) -> Result<Options> {
    let options = if args.autopilot && args.dir.join("CURRENT").exists() {
        recorded_policy_options(args.direct_io)
    } else {
        options(&args.policy, args.direct_io)?
    };
    let options = if args.filter {
        options.with_compaction_filter(Arc::new(RemoveMarked))
    } else {
        options
    };
    Ok(match args.ttl {
        Some(ttl) => {
            let ttl = Some(std::time::Duration::from_secs(ttl));
            options
                .with_clock(Arc::new(FastClock))
                .with_ttl(ttl)
                .with_periodic_compaction(ttl)
        }
        None => options,
    })
}

/// Prints `AUTOPILOT_SWITCH` for each switch the autopilot makes, for the driver to count.
struct SwitchPrinter;

impl EventListener for SwitchPrinter {
    fn on_policy_switch(&self, switch: &PolicySwitch) {
        if !switch.at_open {
            println!("AUTOPILOT_SWITCH {}", switch.to);
        }
    }
}

/// The autopilot of `--autopilot`: small windows, a switch as soon as one window agrees, to
/// the next policy of the test list each time.
fn autopilot() -> Result<AutopilotOptions> {
    let specs = testing::policies_to_test()
        .into_iter()
        .map(|name| {
            let mut spec = policy_spec(name)?;
            spec.fill_defaults([("write_buffer_size", BUFFER)])?;
            Ok(spec.to_string())
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(AutopilotOptions::new(Arc::new(RotatePolicies { specs }))
        .with_every_bytes(128 << 10)
        .with_every_seconds(0.2)
        .with_min_window_ops(100)
        .with_confirmations(1)
        .with_min_seconds_between_switches(0.2))
}

fn key_name(thread: usize, k: u64) -> String {
    format!("t{thread:02}-k{k:06}")
}

/// Merge keys per thread: written by merges and the puts that restart them, nothing else.
const MERGE_KEYS: u64 = 200;

/// A thread's merge key: after its other keys, so their scans and range deletions miss it.
fn merge_key_name(thread: usize, k: u64) -> String {
    format!("t{thread:02}-m{k:06}")
}

fn is_merge_key(key: &str) -> bool {
    key.get(3..5) == Some("-m")
}

/// One worker: random operations on its own keys, checked against its own model.
fn worker(
    db: Arc<Db>,
    router: Arc<Router>,
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
    let mut written = r.written;
    let expiry = args.expiry();
    let mut seq = r.next_seq;
    let mut log = SideLog::open(&path)?;
    let mut rng = Pcg64Mcg::seed_from_u64(args.seed ^ (thread as u64).wrapping_mul(0x9E37_79B9));
    let mut ops = 0u64;
    while Instant::now() < deadline {
        let k = rng.random_range(0..args.keys);
        let key = key_name(thread, k);
        match rng.random_range(0..100) {
            0..=54 => {
                // A put, a delete, a batch of up to 8 writes of this thread's keys, or a range
                // deletion of up to 40 of them (logged as a delete of each key the model has
                // in the range: the thread's keys are written by it alone).
                let mut range = None;
                let mut operand = None;
                let writes: Vec<(String, Option<String>)> = match rng.random_range(0..12) {
                    // A merge operand appended to one of the thread's merge keys (logged as the
                    // value it makes, which the model knows), or, once the value is long, a put
                    // that starts it again. Not with a TTL: an expired base would leave a value
                    // of operands alone, which the model cannot name.
                    11 if !expiry.is_on() => {
                        let mkey = merge_key_name(thread, k % MERGE_KEYS);
                        let current = model.get(&mkey).cloned().flatten();
                        match current {
                            Some(v) if v.len() > 200 => {
                                vec![(mkey, Some(format!("t{thread}s{seq}r")))]
                            }
                            current => {
                                let op = format!("s{seq}");
                                let value = match current {
                                    Some(v) => format!("{v},{op}"),
                                    None => op.clone(),
                                };
                                operand = Some((mkey.clone(), op));
                                vec![(mkey, Some(value))]
                            }
                        }
                    }
                    10 => {
                        let end = key_name(thread, k + rng.random_range(1..40));
                        let covered = model
                            .range(key.clone()..end.clone())
                            .map(|(k, _)| (k.clone(), None))
                            .collect();
                        range = Some((key.clone(), end));
                        covered
                    }
                    0..=4 | 11 => {
                        let mark = if args.filter && rng.random_bool(0.125) {
                            String::from(REMOVABLE)
                        } else {
                            String::new()
                        };
                        let value = format!("t{thread}s{seq}v{}{mark}", rng.random::<u32>());
                        vec![(key.clone(), Some(value))]
                    }
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
                let intent = Intent {
                    seq,
                    writes,
                    second: expiry.now(),
                };
                let sync = rng.random_bool(0.1);
                // Merge keys are written to the WAL always: an operand on a base a kill rolled
                // back would make a value the model cannot name.
                let disable_wal = args.unlogged_writes
                    && !expiry.is_on()
                    && !sync
                    && rng.random_bool(0.15)
                    && !intent.writes.iter().any(|(k, _)| is_merge_key(k));
                log.intent(&intent, disable_wal)?;
                let mut batch = WriteBatch::new();
                match (&range, &operand) {
                    (Some((start, end)), _) => router.add_range_deletion(&mut batch, start, end)?,
                    (_, Some((mkey, op))) => router.add_merge(&mut batch, mkey, op)?,
                    _ => {
                        for (k, v) in &intent.writes {
                            router.add(&mut batch, k, v.as_deref())?;
                        }
                    }
                }
                db.write(&WriteOptions { sync, disable_wal }, batch)?;
                log.line(&format!("A {seq}"))?;
                for (k, v) in intent.writes {
                    written.insert(k.clone(), intent.second);
                    model.insert(k, v);
                }
                seq += 1;
            }
            55..=84 => {
                let got = router.get(&key)?;
                let want = model.get(&key).cloned().flatten();
                let expired = got.is_none()
                    && (expiry.key_may_be_gone(&written, &key) || removable(want.as_deref()));
                if got != want && !expired {
                    bail!("thread {thread}: get {key} = {got:?}, expected {want:?}");
                }
            }
            85..=94 => {
                // A scan over this thread's keys from `key`, checked against the model.
                let end = format!("t{thread:02}-l");
                let got: Vec<(String, String)> =
                    router.range(&key, &end)?.into_iter().take(20).collect();
                // Every value found is the model's; every value of the model up to the last
                // found (or the end) is found, unless it may have expired.
                let reached = match got.last() {
                    Some((last, _)) if got.len() == 20 => format!("{last}\0"),
                    _ => end.clone(),
                };
                let now = expiry.now();
                let found: BTreeMap<&String, &String> = got.iter().map(|(k, v)| (k, v)).collect();
                let stray = got
                    .iter()
                    .find(|(k, v)| model.get(k).cloned().flatten().as_ref() != Some(v));
                let missing = model
                    .range(key.clone()..reached)
                    .filter(|(_, v)| v.is_some())
                    .find(|(k, v)| {
                        !found.contains_key(k)
                            && !removable(v.as_deref())
                            && !written.get(*k).is_some_and(|&w| expiry.may_be_gone(w, now))
                    });
                if stray.is_some() || missing.is_some() {
                    bail!(
                        "thread {thread}: scan from {key} disagrees with the model: found \
                         {stray:?}, missed {missing:?}"
                    );
                }
            }
            _ => {
                // A snapshot stays frozen while this thread writes again.
                let snap = db.snapshot();
                let space = router.of(&key);
                let before = space.get_with(&key, &ReadOptions::at(&snap))?;
                let mut b = WriteBatch::new();
                let v = format!("t{thread}s{seq}v{}", rng.random::<u32>());
                router.add(&mut b, &key, Some(&v))?;
                let intent = Intent {
                    seq,
                    writes: vec![(key.clone(), Some(v))],
                    second: expiry.now(),
                };
                log.intent(&intent, false)?;
                db.write(&WriteOptions::default(), b)?;
                log.line(&format!("A {seq}"))?;
                // The snapshot's value may expire meanwhile; nothing else changes it.
                let expired = expiry.key_may_be_gone(&written, &key);
                model.insert(key.clone(), intent.writes[0].1.clone());
                written.insert(key.clone(), intent.second);
                seq += 1;
                let after = space.get_with(&key, &ReadOptions::at(&snap))?;
                if before != after && !(after.is_none() && expired) {
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
    let options = child_options(args)?.with_synchronous_compaction(true);
    let db = Db::open(&args.dir, options).context("opening to check the table files")?;
    let needed = Router::open(&db, args.keyspaces, policy_spec)?.table_files();
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

pub(crate) fn run(args: RunArgs) -> Result<()> {
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
    let mut options = child_options(&args)?
        .with_rate_limiter(args.rate_limit)
        .with_enable_pipelined_write(args.pipelined_write);
    if args.autopilot {
        options = options
            .with_autopilot(autopilot()?)
            .with_event_listener(Arc::new(SwitchPrinter));
    }
    let db = Arc::new(Db::open(&args.dir, options).context("reopening after the crash")?);
    let router = Arc::new(Router::open(&db, args.keyspaces, policy_spec)?);
    let verified =
        verify(&router, &logs, args.threads, args.expiry()).context("verifying after the crash")?;
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
            let (db, router) = (Arc::clone(&db), Arc::clone(&router));
            let (logs, args) = (logs.clone(), args.clone());
            std::thread::spawn(move || worker(db, router, logs, t, args, deadline))
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
