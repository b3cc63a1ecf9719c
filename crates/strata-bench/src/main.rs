//! `strata-bench`: db_bench-style fillrandom and readrandom against Strata and, when built with
//! `--features rocksdb`, RocksDB with matching options, side by side in one run.

use anyhow::{bail, Context, Result};
use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser, Debug, Clone)]
#[command(about = "fillrandom / readrandom on Strata and peers with matched options")]
struct Args {
    /// Engines to run, comma-separated: strata, rocksdb (the latter needs --features rocksdb).
    #[arg(long, default_value = "strata")]
    engines: String,
    /// Phases, comma-separated: fillrandom, readrandom.
    #[arg(long, default_value = "fillrandom,readrandom")]
    benchmarks: String,
    /// Entries written by fillrandom (keys drawn uniformly from [0, entries)).
    #[arg(long, default_value_t = 5_000_000)]
    entries: u64,
    /// Lookups by readrandom. Default: --entries.
    #[arg(long)]
    reads: Option<u64>,
    /// Key size in bytes (keys are zero-padded decimal numbers).
    #[arg(long, default_value_t = 16)]
    key_size: usize,
    /// Value size in bytes (random, incompressible).
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Write buffer size in MiB. RocksDB: write_buffer_size.
    #[arg(long, default_value_t = 64)]
    write_buffer_mib: u64,
    /// Block cache in MiB.
    #[arg(long, default_value_t = 32)]
    block_cache_mib: u64,
    /// Base level size bound in MiB. RocksDB: max_bytes_for_level_base.
    #[arg(long, default_value_t = 256)]
    level_base_mib: u64,
    /// Directory for the databases (a fresh subdirectory per engine). Default: a temporary one.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seed for keys and values.
    #[arg(long, default_value_t = 301)]
    seed: u64,
    /// Print each engine's own statistics after every phase.
    #[arg(long)]
    verbose: bool,
}

/// What a benchmark needs from an engine.
trait Engine {
    fn name(&self) -> &'static str;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    fn get(&self, key: &[u8]) -> Result<bool>;
    /// Flushes memtables and waits until background compaction is idle.
    fn settle(&self) -> Result<()>;
    /// Bytes written to table files by flushes and compactions.
    fn table_bytes_written(&self) -> Result<u64>;
    /// The engine's own statistics, printed with --verbose.
    fn report(&self) -> String;
}

struct Strata {
    db: strata_engine::Db,
}

impl Strata {
    fn open(path: &Path, a: &Args) -> Result<Strata> {
        let policy_options = strata_policy::PolicyOptions {
            write_buffer_size: a.write_buffer_mib << 20,
            target_file_size: 64 << 20,
            max_bytes_for_level_base: Some(a.level_base_mib << 20),
            ..strata_policy::PolicyOptions::default()
        };
        let options = strata_engine::Options::new()
            .with_write_buffer_size(a.write_buffer_mib << 20)
            .with_block_cache_capacity(a.block_cache_mib << 20)
            .with_policy_named("leveled", &policy_options)?;
        Ok(Strata {
            db: strata_engine::Db::open(path, options)?,
        })
    }
}

impl Engine for Strata {
    fn name(&self) -> &'static str {
        "strata"
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put(key, value)?)
    }
    fn get(&self, key: &[u8]) -> Result<bool> {
        Ok(self.db.get(key)?.is_some())
    }
    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        Ok(self.db.wait_for_compactions()?)
    }
    fn table_bytes_written(&self) -> Result<u64> {
        let m = self.db.metrics();
        Ok(m.flush_bytes + m.compaction_bytes_written)
    }
    fn report(&self) -> String {
        self.db.metrics().to_string()
    }
}

#[cfg(feature = "rocksdb")]
mod rocks {
    use super::{Args, Engine};
    use anyhow::{Context, Result};
    use std::path::Path;

    /// RocksDB configured like Strata's `leveled` defaults in this benchmark: 64 MiB write
    /// buffers (2 of them), L0 triggers 4/20/36, dynamic level sizes, T = 10, 64 MiB target
    /// files, 4 KiB blocks, a 10-bit Bloom filter, an LRU block cache of the same size, no
    /// compression, WAL on without sync, 2 background jobs.
    pub struct Rocks {
        db: rocksdb::DB,
        options: rocksdb::Options,
    }

    impl Rocks {
        pub fn open(path: &Path, a: &Args) -> Result<Rocks> {
            let mut o = rocksdb::Options::default();
            o.create_if_missing(true);
            o.set_write_buffer_size((a.write_buffer_mib << 20) as usize);
            o.set_max_write_buffer_number(2);
            o.set_level_zero_file_num_compaction_trigger(4);
            o.set_level_zero_slowdown_writes_trigger(20);
            o.set_level_zero_stop_writes_trigger(36);
            o.set_level_compaction_dynamic_level_bytes(true);
            o.set_max_bytes_for_level_base(a.level_base_mib << 20);
            o.set_max_bytes_for_level_multiplier(10.0);
            o.set_target_file_size_base(64 << 20);
            o.set_num_levels(7);
            o.set_max_background_jobs(2);
            o.set_compression_type(rocksdb::DBCompressionType::None);
            o.enable_statistics();
            let mut t = rocksdb::BlockBasedOptions::default();
            t.set_block_size(4096);
            t.set_bloom_filter(10.0, false);
            t.set_block_cache(&rocksdb::Cache::new_lru_cache(
                (a.block_cache_mib << 20) as usize,
            ));
            o.set_block_based_table_factory(&t);
            let db = rocksdb::DB::open(&o, path).context("opening RocksDB")?;
            Ok(Rocks { db, options: o })
        }

        fn ticker(&self, name: &str) -> u64 {
            let stats = self.options.get_statistics().unwrap_or_default();
            stats
                .lines()
                .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
                .and_then(|l| l.rsplit(':').next())
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        }
    }

    impl Engine for Rocks {
        fn name(&self) -> &'static str {
            "rocksdb"
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            Ok(self.db.put(key, value)?)
        }
        fn get(&self, key: &[u8]) -> Result<bool> {
            Ok(self.db.get_pinned(key)?.is_some())
        }
        fn settle(&self) -> Result<()> {
            self.db.flush()?;
            loop {
                let pending = self
                    .db
                    .property_int_value("rocksdb.compaction-pending")?
                    .unwrap_or(0);
                let running = self
                    .db
                    .property_int_value("rocksdb.num-running-compactions")?
                    .unwrap_or(0);
                let flushing = self
                    .db
                    .property_int_value("rocksdb.num-running-flushes")?
                    .unwrap_or(0);
                if pending == 0 && running == 0 && flushing == 0 {
                    return Ok(());
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        fn table_bytes_written(&self) -> Result<u64> {
            Ok(self.ticker("rocksdb.flush.write.bytes")
                + self.ticker("rocksdb.compact.write.bytes"))
        }
        fn report(&self) -> String {
            self.db
                .property_value("rocksdb.stats")
                .ok()
                .flatten()
                .unwrap_or_default()
        }
    }
}

fn make_key(buf: &mut Vec<u8>, n: u64, size: usize) {
    buf.clear();
    let digits = format!("{n}");
    buf.resize(size.saturating_sub(digits.len()), b'0');
    buf.extend_from_slice(digits.as_bytes());
}

struct PhaseResult {
    ops: u64,
    seconds: f64,
    found: u64,
}

fn fillrandom(engine: &dyn Engine, a: &Args) -> Result<PhaseResult> {
    let mut rng = Pcg64Mcg::seed_from_u64(a.seed);
    let mut key = Vec::with_capacity(a.key_size);
    let mut value = vec![0u8; a.value_size];
    let start = Instant::now();
    for _ in 0..a.entries {
        make_key(&mut key, rng.random_range(0..a.entries), a.key_size);
        rng.fill(&mut value[..]);
        engine.put(&key, &value)?;
    }
    Ok(PhaseResult {
        ops: a.entries,
        seconds: start.elapsed().as_secs_f64(),
        found: 0,
    })
}

fn readrandom(engine: &dyn Engine, a: &Args) -> Result<PhaseResult> {
    let mut rng = Pcg64Mcg::seed_from_u64(a.seed ^ 0x5eed);
    let reads = a.reads.unwrap_or(a.entries);
    let mut key = Vec::with_capacity(a.key_size);
    let mut found = 0;
    let start = Instant::now();
    for _ in 0..reads {
        make_key(&mut key, rng.random_range(0..a.entries), a.key_size);
        found += u64::from(engine.get(&key)?);
    }
    Ok(PhaseResult {
        ops: reads,
        seconds: start.elapsed().as_secs_f64(),
        found,
    })
}

fn open_engine(name: &str, path: &Path, a: &Args) -> Result<Box<dyn Engine>> {
    match name {
        "strata" => Ok(Box::new(Strata::open(path, a)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocks::Rocks::open(path, a)?)),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => bail!("this build has no RocksDB; rebuild with --features rocksdb"),
        other => bail!("unknown engine {other:?}; expected strata or rocksdb"),
    }
}

fn main() -> Result<()> {
    let a = Args::parse();
    let temp = tempfile::tempdir().context("creating a temporary directory")?;
    let base = a.dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let engines: Vec<&str> = a
        .engines
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let phases: Vec<&str> = a
        .benchmarks
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let user_bytes = a.entries * (a.key_size + a.value_size) as u64;
    println!(
        "{} entries, {}-byte keys, {}-byte values ({:.1} MiB), {} MiB buffers, {} MiB block cache",
        a.entries,
        a.key_size,
        a.value_size,
        user_bytes as f64 / (1u64 << 20) as f64,
        a.write_buffer_mib,
        a.block_cache_mib
    );
    println!(
        "{:<8} {:<11} {:>12} {:>10} {:>10} {:>8}",
        "engine", "phase", "ops/s", "seconds", "found", "WA"
    );
    for name in engines {
        let path = base.join(name);
        if path.exists() {
            bail!("{} already exists; pick an empty --dir", path.display());
        }
        let engine = open_engine(name, &path, &a)?;
        for phase in &phases {
            let r = match *phase {
                "fillrandom" => fillrandom(engine.as_ref(), &a)?,
                "readrandom" => readrandom(engine.as_ref(), &a)?,
                other => bail!("unknown benchmark {other:?}; expected fillrandom or readrandom"),
            };
            let wa = if *phase == "fillrandom" {
                // Write amplification of the fill, counted once compaction has caught up.
                engine.settle()?;
                format!(
                    "{:.2}",
                    engine.table_bytes_written()? as f64 / user_bytes as f64
                )
            } else {
                String::from("-")
            };
            println!(
                "{:<8} {:<11} {:>12.0} {:>10.2} {:>10} {:>8}",
                engine.name(),
                phase,
                r.ops as f64 / r.seconds,
                r.seconds,
                r.found,
                wa
            );
            if a.verbose {
                println!("{}", engine.report());
            }
        }
    }
    Ok(())
}
