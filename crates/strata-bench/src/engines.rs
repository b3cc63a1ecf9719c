//! The engines a benchmark can drive: Strata with any policy, and (behind cargo features) RocksDB
//! and fjall with options matched to Strata's as closely as their APIs allow.

use crate::results::LevelShape;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_policy::PolicySpec;

/// Counters an engine reports (cumulative since open).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineStats {
    /// Bytes written to table files by flushes and compactions, if known.
    pub table_bytes_written: Option<u64>,
    /// Data blocks read from storage (cache misses), if known.
    pub blocks_read: Option<u64>,
    /// Index blocks read from storage by queries, if known.
    pub index_blocks_read: Option<u64>,
    /// Filter blocks read from storage by queries, if known.
    pub filter_blocks_read: Option<u64>,
    /// Tables probed by point lookups, if known.
    pub tables_probed: Option<u64>,
    /// Filter probes by point lookups, if known.
    pub filter_probes: Option<u64>,
    /// Keys in the key index and the bytes it holds, if the engine keeps one.
    pub key_index: Option<(u64, u64)>,
    /// Microseconds writers were stalled, if known.
    pub stall_micros: Option<u64>,
    /// The LSM shape, if known.
    pub shape: Vec<LevelShape>,
    /// The compaction policy's persisted state (its decisions so far), if it has one.
    pub policy_state: Option<String>,
    /// Data blocks written into each level (index = level), if counted
    /// ([`EngineSettings::count_blocks`]).
    pub data_blocks_written_per_level: Option<Vec<u64>>,
    /// Data blocks block-preserving merges kept in each level instead of rewriting them, counted
    /// alongside `data_blocks_written_per_level`.
    pub data_blocks_preserved_per_level: Option<Vec<u64>>,
    /// Microseconds the compaction policy spent deciding, if known.
    pub policy_micros: Option<u64>,
    /// The autopilot's decisions, if it ran ([`AUTOPILOT`]).
    pub autopilot: Vec<strata_policy::autopilot::Decision>,
}

/// What the benchmark needs from an engine. Implementations must be usable from many threads.
pub trait KvEngine: Send + Sync {
    /// Engine name ("strata", "rocksdb", "fjall").
    fn engine(&self) -> &'static str;
    /// Compaction policy or style.
    fn policy(&self) -> String;
    /// Writes a key.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Deletes a key.
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Reads a key; whether it was found.
    fn get(&self, key: &[u8]) -> Result<bool>;
    /// Reads the `keys` as one batch; how many were found. The default reads them one by one
    /// (for an engine without a batched read, such as fjall); engines that have one use it.
    fn multi_get(&self, keys: &[&[u8]]) -> Result<usize> {
        let mut found = 0;
        for key in keys {
            found += usize::from(self.get(key)?);
        }
        Ok(found)
    }
    /// Reads up to `n` entries from `start` on; how many were read.
    fn scan(&self, start: &[u8], n: usize) -> Result<usize>;
    /// Whether the engine reads and writes its tables with direct I/O
    /// ([`EngineSettings::direct_io`] where it can).
    fn direct_io(&self) -> bool {
        false
    }
    /// The block cache capacity it runs with, if set by the settings (not its own default).
    fn block_cache_bytes(&self) -> Option<u64> {
        None
    }
    /// The row cache capacity it runs with, if it has one ([`EngineSettings::row_cache`]).
    fn row_cache_bytes(&self) -> Option<u64> {
        None
    }
    /// Where its tables' indexes and filters live, as a phrase for the report ("outside the
    /// block cache", ...), if the engine says.
    fn index_and_filter(&self) -> Option<&'static str> {
        None
    }
    /// The options that shaped its tree, by name: a Strata policy's as built (derived values
    /// included), the peers' [`PeerShape`]; empty when it ran on its own defaults.
    fn options(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Flushes memtables and waits until background compaction is idle.
    fn settle(&self) -> Result<()>;
    /// Counters since open.
    fn stats(&self) -> EngineStats;
    /// Merges so far that rewrote every table of the deepest level (the ends of compaction
    /// rounds), if the engine counts them; cheap enough to sample every few milliseconds.
    fn last_level_rewrites(&self) -> Option<u64> {
        None
    }
    /// The database directory (its size is sampled).
    fn dir(&self) -> &Path;
}

/// Settings shared by every engine of a comparison, so they run with matched options.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EngineSettings {
    /// Memtable size; also the `write_buffer_size` of every Strata policy that has one and
    /// whose specification leaves it unset, as `strata_engine::Options::with_policy_named` does.
    pub write_buffer_size: u64,
    /// Table target size given for every run; `None`: each Strata policy's own, and for the
    /// peers, `leveled`'s ([`EngineSettings::peer_shape`]).
    pub target_file_size: Option<u64>,
    /// Block cache capacity.
    pub block_cache: u64,
    /// Row cache capacity, 0 for none (both engines' default): Strata's
    /// `Options::with_row_cache_capacity`, RocksDB's `row_cache`; fjall has none. Applies with
    /// [`EngineSettings::engine_defaults`] too.
    #[serde(default)]
    pub row_cache: u64,
    /// Bloom bits per key given for every run; `None`: each policy's own (peers: `leveled`'s).
    pub bloom_bits_per_key: Option<f64>,
    /// Size ratio given for every run; `None`: each policy's own (peers: `leveled`'s).
    pub size_ratio: Option<f64>,
    /// `max_bytes_for_level_base` given for every run; `None`: each policy's own (peers:
    /// `leveled`'s, size ratio × write buffer size).
    pub level_base: Option<u64>,
    /// Background jobs.
    pub background_jobs: usize,
    /// Expected data size (for horizontal-tiered).
    pub expected_data_size: u64,
    /// Record every table's data blocks in the manifest and count the data blocks written per
    /// level (Strata only; `Options::with_record_block_ranges`).
    pub count_blocks: bool,
    /// Bytes per second flushes and compactions may write together, if limited (Strata's
    /// `Options::with_rate_limiter`, RocksDB's `rate_limiter`).
    #[serde(default)]
    pub rate_limit: Option<u64>,
    /// Strata: threads that run only urgent plans, besides `background_jobs`
    /// (`Options::with_reserved_jobs`).
    #[serde(default = "default_reserved_jobs")]
    pub reserved_jobs: usize,
    /// Strata: the level an in-memory key index covers, if any (`Options::with_key_index`).
    #[serde(default)]
    pub key_index_level: Option<usize>,
    /// Strata: whether reads use the levels' interval indexes over runs
    /// (`Options::with_interval_index`).
    #[serde(default = "default_interval_index")]
    pub interval_index: bool,
    /// Strata: record the device's file trace (`strata_engine::fs::RecordingFs`) into this
    /// file, for `strata sim --replay-trace`.
    #[serde(default)]
    pub file_trace: Option<PathBuf>,
    /// The calibration the autopilot's advisor prices with (`strata calibrate`); `None`: the
    /// assumed one ([`AUTOPILOT`] runs only).
    #[serde(default)]
    pub calibration: Option<PathBuf>,
    /// Ignore every other setting: open each engine with its own defaults, as a user who
    /// changes nothing would (RocksDB with its default block-based table given a 10-bit Bloom
    /// filter and no compression, as its documentation recommends for point lookups; Strata's
    /// policy with its own option defaults). [`EngineSettings::direct_io`] still applies.
    #[serde(default)]
    pub engine_defaults: bool,
    /// Read and write tables with direct I/O (`O_DIRECT`), around the page cache: Strata's
    /// `Options::with_use_direct_reads` and `with_use_direct_io_for_flush_and_compaction`,
    /// RocksDB's `use_direct_reads` and `use_direct_io_for_flush_and_compaction`. fjall has no
    /// direct I/O and runs buffered (its results say so).
    #[serde(default)]
    pub direct_io: bool,
    /// Strata: charge open tables' indexes and filters to the block cache
    /// (`Options::with_charge_tables_to_cache`, Strata's default), so that blocks and tables
    /// together stay within `block_cache`. Off, the block cache holds `block_cache` bytes of
    /// blocks beside the tables' own memory, as RocksDB's default table (indexes and filters
    /// outside its cache, `cache_index_and_filter_blocks` off) does.
    #[serde(default = "default_charge_tables")]
    pub charge_tables: bool,
    /// Both engines keep indexes and filters in the block cache, with high priority (Strata's
    /// `Options::with_cache_index_and_filter_blocks`, RocksDB's
    /// `cache_index_and_filter_blocks`; fjall has no such choice).
    #[serde(default)]
    pub cache_index_and_filter_blocks: bool,
    /// Commit groups pipelined: the next group writes its WAL record while the one before it
    /// inserts into the memtable (Strata's `Options::with_enable_pipelined_write`, RocksDB's
    /// `enable_pipelined_write`; fjall has no such choice). Applies with
    /// [`EngineSettings::engine_defaults`] too.
    #[serde(default)]
    pub pipelined_write: bool,
    /// Strata's data blocks start on 4 KiB pages (`Options::with_block_align`, RocksDB's
    /// `block_align`, which the rocksdb crate 0.25 cannot set: RocksDB runs without it; fjall
    /// has no such choice).
    #[serde(default)]
    pub block_align: bool,
    /// Strata's reads of a query's block that wait for the device poll for it this many
    /// microseconds before they sleep (`Options::with_read_polling`); `None`: Strata's default.
    /// RocksDB and fjall have no such choice. Results written while only direct reads polled
    /// name it `direct_read_poll_us`.
    #[serde(default, alias = "direct_read_poll_us")]
    pub read_poll_us: Option<u64>,
    /// Every write of the run leaves the WAL out (Strata's `WriteOptions::disable_wal`,
    /// RocksDB's `WriteOptions::disableWAL`); the engines make the data durable at the
    /// flush that ends a phase. fjall has no such choice and writes its journal.
    #[serde(default)]
    pub disable_wal: bool,
    /// Strata spreads the keys over this many keyspaces (the default one, then `ks1`, ...), by
    /// a hash of the key; the peers run one keyspace whatever it says.
    #[serde(default = "one_keyspace")]
    pub keyspaces: usize,
    /// The policies of `ks1`, `ks2`, ... in turn (each filled like the configuration's);
    /// empty: the configuration's policy for every keyspace.
    #[serde(default)]
    pub keyspace_policies: Vec<String>,
}

fn one_keyspace() -> usize {
    1
}

fn default_charge_tables() -> bool {
    true
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            write_buffer_size: 64 << 20,
            target_file_size: None,
            block_cache: 32 << 20,
            row_cache: 0,
            bloom_bits_per_key: None,
            size_ratio: None,
            level_base: None,
            background_jobs: 2,
            expected_data_size: 1 << 30,
            count_blocks: false,
            rate_limit: None,
            reserved_jobs: default_reserved_jobs(),
            key_index_level: None,
            interval_index: true,
            file_trace: None,
            calibration: None,
            engine_defaults: false,
            direct_io: false,
            charge_tables: true,
            cache_index_and_filter_blocks: false,
            pipelined_write: false,
            block_align: false,
            read_poll_us: None,
            disable_wal: false,
            keyspaces: 1,
            keyspace_policies: Vec::new(),
        }
    }
}

/// Strata's default (`Options::with_reserved_jobs`).
fn default_interval_index() -> bool {
    true
}

fn default_reserved_jobs() -> usize {
    1
}

/// Strata with one policy (or, with [`EngineSettings::keyspaces`], one per keyspace).
pub struct Strata {
    db: strata_engine::Db,
    /// Every keyspace, the default one first, when there are several.
    keyspaces: Vec<strata_engine::Keyspace>,
    policy: String,
    dir: PathBuf,
    direct_io: bool,
    block_cache: Option<u64>,
    row_cache: Option<u64>,
    index_and_filter: &'static str,
    write: strata_engine::WriteOptions,
}

/// The report's phrase for indexes and filters kept in the block cache with high priority
/// (`--cache-index-and-filter-blocks`), in Strata and RocksDB alike.
const INDEXES_IN_CACHE: &str = "indexes and filters in the block cache, high priority";

/// Where Strata's indexes and filters live under `s`.
fn strata_index_and_filter(s: &EngineSettings) -> &'static str {
    match (s.cache_index_and_filter_blocks, s.charge_tables) {
        (true, _) => INDEXES_IN_CACHE,
        (false, true) => "indexes and filters held by tables, charged to the block cache",
        (false, false) => "indexes and filters held by tables, outside the block cache",
    }
}

impl Strata {
    /// Opens Strata in `dir` (a fresh directory, or a database kept earlier) running `policy`,
    /// a policy specification (`name` or `name:option=value,...`). The settings fill the
    /// options the policy declares and the specification leaves unset: size ratio, buffer size,
    /// target file size, level base, Bloom bits and expected data size.
    pub fn open(dir: &Path, policy: &str, s: &EngineSettings) -> Result<Strata> {
        Strata::open_with_listener(dir, policy, s, None)
    }

    /// [`Strata::open`], with `listener` told of every flush and compaction.
    pub fn open_with_listener(
        dir: &Path,
        policy: &str,
        s: &EngineSettings,
        listener: Option<Arc<dyn strata_engine::EventListener>>,
    ) -> Result<Strata> {
        let (policy, autopilot) = match policy {
            AUTOPILOT => (AUTOPILOT_START, Some(autopilot::options(s)?)),
            policy => (policy, None),
        };
        let mut options = if s.engine_defaults {
            strata_engine::Options::new().with_policy_named(policy)?
        } else {
            // Built once here; the database records what it was built from.
            let built = strata_policy::build_policy(&Strata::policy_spec(policy, s)?)?;
            strata_engine::Options::new()
                .with_write_buffer_size(s.write_buffer_size)
                .with_block_cache_capacity(s.block_cache)
                .with_max_background_jobs(s.background_jobs)
                .with_reserved_jobs(s.reserved_jobs)
                .with_rate_limiter(s.rate_limit)
                .with_key_index(s.key_index_level)
                .with_interval_index(s.interval_index)
                .with_record_block_ranges(s.count_blocks)
                .with_policy(built)
        };
        if s.direct_io {
            options = options
                .with_use_direct_reads(true)
                .with_use_direct_io_for_flush_and_compaction(true);
        }
        if let Some(micros) = s.read_poll_us {
            options = options.with_read_polling(std::time::Duration::from_micros(micros));
        }
        options = options
            .with_row_cache_capacity(s.row_cache)
            .with_enable_pipelined_write(s.pipelined_write)
            .with_block_align(s.block_align)
            .with_charge_tables_to_cache(s.charge_tables)
            .with_cache_index_and_filter_blocks(s.cache_index_and_filter_blocks);
        if let Some(listener) = listener {
            options = options.with_event_listener(listener);
        }
        if let Some(autopilot) = autopilot {
            options = options.with_autopilot(autopilot);
        }
        if let Some(path) = &s.file_trace {
            let sink = std::fs::File::create(path)
                .with_context(|| format!("creating the file trace {}", path.display()))?;
            let fs = strata_engine::fs::RecordingFs::new(
                Arc::new(strata_engine::fs::StdFs),
                Box::new(std::io::BufWriter::new(sink)),
            );
            options = options.with_file_system(Arc::new(fs));
        }
        let db = strata_engine::Db::open(dir, options)?;
        let keyspaces = Strata::keyspaces(&db, policy, s)?;
        Ok(Strata {
            db,
            keyspaces,
            policy: policy.to_string(),
            dir: dir.to_path_buf(),
            direct_io: s.direct_io,
            block_cache: (!s.engine_defaults).then_some(s.block_cache),
            row_cache: s.row_cache_bytes(),
            index_and_filter: strata_index_and_filter(s),
            write: strata_engine::WriteOptions {
                disable_wal: s.disable_wal,
                ..Default::default()
            },
        })
    }
}

impl Strata {
    /// The keyspaces `s` asks for beside `db`'s default one, created where a kept database
    /// lacks them; none when it asks for one.
    fn keyspaces(
        db: &strata_engine::Db,
        policy: &str,
        s: &EngineSettings,
    ) -> Result<Vec<strata_engine::Keyspace>> {
        if s.keyspaces <= 1 {
            return Ok(Vec::new());
        }
        let mut keyspaces = vec![db.keyspace("default")?];
        for i in 1..s.keyspaces {
            let name = format!("ks{i}");
            let keyspace = match db.keyspace(&name) {
                Ok(keyspace) => keyspace,
                Err(_) => {
                    let own = s
                        .keyspace_policies
                        .get((i - 1) % s.keyspace_policies.len().max(1))
                        .map_or(policy, String::as_str);
                    let options = strata_engine::KeyspaceOptions::new()
                        .with_policy_spec(Strata::policy_spec(own, s)?)?;
                    db.create_keyspace(&name, options)?
                }
            };
            keyspaces.push(keyspace);
        }
        Ok(keyspaces)
    }

    /// The index in `keyspaces` of the keyspace `key` lives in (0 with one keyspace).
    fn keyspace_index(&self, key: &[u8]) -> usize {
        // FNV-1a: the same key goes to the same keyspace in every run and build.
        let hash = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        (hash % self.keyspaces.len().max(1) as u64) as usize
    }

    /// The keyspace `key` lives in, when there are several.
    fn keyspace_of(&self, key: &[u8]) -> Option<&strata_engine::Keyspace> {
        (self.keyspaces.len() > 1).then(|| &self.keyspaces[self.keyspace_index(key)])
    }

    /// The policy specification [`Strata::open`] builds `policy` from: `policy` with the options
    /// the settings give ([`EngineSettings::given_policy_options`]), then the write buffer size
    /// and the expected data size, filling the options it declares and leaves unset. Every other
    /// option keeps the policy's own default.
    pub fn policy_spec(policy: &str, s: &EngineSettings) -> Result<PolicySpec> {
        let mut spec: PolicySpec = policy.parse()?;
        spec.fill_defaults(s.given_policy_options())?;
        spec.fill_defaults([
            ("write_buffer_size", s.write_buffer_size.to_string()),
            ("expected_data_size", s.expected_data_size.to_string()),
        ])?;
        Ok(spec)
    }
}

/// The tree shape the peers run with: what the settings give, else what Strata's `leveled`
/// (RocksDB-style leveling, which the peers are configured like) uses with the same write
/// buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerShape {
    /// Size ratio between levels (RocksDB: `max_bytes_for_level_multiplier`).
    pub size_ratio: f64,
    /// Table target size (RocksDB: `target_file_size_base`).
    pub target_file_size: u64,
    /// Base level bound (RocksDB: `max_bytes_for_level_base`).
    pub level_base: u64,
    /// Bloom bits per key.
    pub bloom_bits_per_key: f64,
}

impl PeerShape {
    /// The shape as option text, for the run's record.
    pub fn options(&self) -> Vec<(String, String)> {
        vec![
            ("size_ratio".into(), self.size_ratio.to_string()),
            (
                "target_file_size".into(),
                strata_policy::strata_meta::format_size(self.target_file_size),
            ),
            (
                "max_bytes_for_level_base".into(),
                strata_policy::strata_meta::format_size(self.level_base),
            ),
            (
                "bloom_bits_per_key".into(),
                self.bloom_bits_per_key.to_string(),
            ),
        ]
    }
}

impl EngineSettings {
    /// The row cache's capacity, `None` for none ([`EngineSettings::row_cache`] of 0).
    pub fn row_cache_bytes(&self) -> Option<u64> {
        (self.row_cache > 0).then_some(self.row_cache)
    }

    /// The policy options these settings give every run (those that are `Some`), by name.
    pub fn given_policy_options(&self) -> Vec<(&'static str, String)> {
        [
            ("size_ratio", self.size_ratio.map(|t| t.to_string())),
            (
                "target_file_size",
                self.target_file_size.map(|b| b.to_string()),
            ),
            (
                "max_bytes_for_level_base",
                self.level_base.map(|b| b.to_string()),
            ),
            (
                "bloom_bits_per_key",
                self.bloom_bits_per_key.map(|b| b.to_string()),
            ),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect()
    }

    /// The shape the peers run with ([`PeerShape`]): `leveled` built from these settings, read
    /// back from the options it reports.
    pub fn peer_shape(&self) -> Result<PeerShape> {
        let spec = Strata::policy_spec("leveled", self)?;
        let leveled = strata_policy::build_policy(&spec)?;
        let options = leveled.options();
        let text = |name: &str| {
            options
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.clone())
                .with_context(|| format!("leveled reports no {name}"))
        };
        let size = |name: &str| -> Result<u64> {
            let value = text(name)?;
            strata_policy::strata_meta::parse_size(&value)
                .map_err(|e| anyhow::anyhow!("leveled's {name} {value:?}: {e}"))
        };
        let float = |name: &str| -> Result<f64> {
            let value = text(name)?;
            value
                .parse()
                .with_context(|| format!("leveled's {name} {value:?}"))
        };
        Ok(PeerShape {
            size_ratio: float("size_ratio")?,
            target_file_size: size("target_file_size")?,
            level_base: size("max_bytes_for_level_base")?,
            bloom_bits_per_key: float("bloom_bits_per_key")?,
        })
    }
}

impl KvEngine for Strata {
    fn engine(&self) -> &'static str {
        "strata"
    }
    fn policy(&self) -> String {
        self.policy.clone()
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut batch = strata_engine::WriteBatch::new();
        match self.keyspace_of(key) {
            Some(keyspace) => batch.put_in(keyspace, key, value)?,
            None => batch.put(key, value)?,
        };
        Ok(self.db.write(&self.write, batch)?)
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        let mut batch = strata_engine::WriteBatch::new();
        match self.keyspace_of(key) {
            Some(keyspace) => batch.delete_in(keyspace, key)?,
            None => batch.delete(key)?,
        };
        Ok(self.db.write(&self.write, batch)?)
    }
    fn get(&self, key: &[u8]) -> Result<bool> {
        Ok(match self.keyspace_of(key) {
            Some(keyspace) => keyspace.get(key)?,
            None => self.db.get(key)?,
        }
        .is_some())
    }
    fn multi_get(&self, keys: &[&[u8]]) -> Result<usize> {
        if self.keyspaces.len() <= 1 {
            let values = self.db.multi_get(keys)?;
            return Ok(values.iter().filter(|v| v.is_some()).count());
        }
        // One batch per keyspace.
        let mut per_keyspace: Vec<Vec<&[u8]>> = vec![Vec::new(); self.keyspaces.len()];
        for &key in keys {
            per_keyspace[self.keyspace_index(key)].push(key);
        }
        let mut found = 0;
        for (keyspace, keys) in self.keyspaces.iter().zip(&per_keyspace) {
            found += keyspace
                .multi_get(keys)?
                .iter()
                .filter(|v| v.is_some())
                .count();
        }
        Ok(found)
    }
    fn direct_io(&self) -> bool {
        self.direct_io
    }
    fn block_cache_bytes(&self) -> Option<u64> {
        self.block_cache
    }
    fn row_cache_bytes(&self) -> Option<u64> {
        self.row_cache
    }
    fn index_and_filter(&self) -> Option<&'static str> {
        Some(self.index_and_filter)
    }
    fn options(&self) -> Vec<(String, String)> {
        self.db
            .policy()
            .options()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }
    fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
        // The lending cursor, as RocksDB's raw iterator: every engine's scan touches each key
        // and value where it lies, and none copies them.
        // With keyspaces, the keyspace `start` lives in: a scan reads that keyspace's keys.
        let mut it = match self.keyspace_of(start) {
            Some(keyspace) => keyspace.range(start..)?,
            None => self.db.range(start..)?,
        };
        let mut read = 0;
        while read < n && it.advance()? {
            std::hint::black_box((it.key(), it.value()));
            read += 1;
        }
        Ok(read)
    }
    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        for keyspace in self.keyspaces.iter().skip(1) {
            keyspace.flush()?;
            keyspace.wait_for_compactions()?;
        }
        Ok(self.db.wait_for_compactions()?)
    }
    fn last_level_rewrites(&self) -> Option<u64> {
        let counter = &self.db.statistics().last_level_rewrites;
        Some(strata_engine::stats::Statistics::get(counter))
    }
    fn stats(&self) -> EngineStats {
        let m = self.db.metrics();
        EngineStats {
            table_bytes_written: Some(m.flush_bytes + m.compaction_bytes_written),
            blocks_read: Some(m.block_cache_misses),
            index_blocks_read: Some(m.index_blocks_read),
            filter_blocks_read: Some(m.filter_blocks_read),
            tables_probed: Some(m.get_tables_probed),
            filter_probes: Some(m.bloom_checks),
            key_index: (m.key_index_entries > 0)
                .then_some((m.key_index_entries, m.key_index_bytes)),
            stall_micros: Some(m.stall_micros),
            shape: m
                .levels
                .iter()
                .map(|l| LevelShape {
                    level: l.level,
                    runs: l.runs,
                    tables: l.tables,
                    bytes: l.bytes,
                })
                .collect(),
            policy_state: {
                let version = self.db.version();
                let state = version.policy_state().as_str();
                (!state.is_empty()).then(|| state.to_string())
            },
            data_blocks_written_per_level: (!m.data_blocks_written_per_level.is_empty())
                .then(|| m.data_blocks_written_per_level.clone()),
            data_blocks_preserved_per_level: (!m.data_blocks_written_per_level.is_empty())
                .then(|| m.data_blocks_preserved_per_level.clone()),
            policy_micros: Some(m.policy_micros),
            autopilot: self.db.autopilot_decisions(),
        }
    }
    fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(feature = "rocksdb")]
mod rocks {
    use super::{EngineSettings, EngineStats, KvEngine};
    use anyhow::{Context, Result};
    use std::path::{Path, PathBuf};

    /// RocksDB configured like Strata's `leveled`: the same write buffer size (2 buffers), L0
    /// triggers 4/20/36, dynamic level sizes, size ratio, `max_bytes_for_level_base`, target
    /// file size, 7 levels, 4 KiB blocks, a full Bloom filter with the same bits per key, an LRU
    /// block cache of the same capacity, no compression, WAL on without sync, the same number
    /// of background jobs.
    pub struct Rocks {
        db: rocksdb::DB,
        options: rocksdb::Options,
        write: rocksdb::WriteOptions,
        dir: PathBuf,
        direct_io: bool,
        block_cache: Option<u64>,
        row_cache: Option<u64>,
        cache_index_and_filter_blocks: bool,
        shape: Vec<(String, String)>,
    }

    impl Rocks {
        /// Opens RocksDB in `dir`: a fresh directory, or a database kept earlier.
        pub fn open(dir: &Path, s: &EngineSettings) -> Result<Rocks> {
            if s.engine_defaults {
                let mut o = rocksdb::Options::default();
                o.create_if_missing(true);
                o.set_compression_type(rocksdb::DBCompressionType::None);
                o.enable_statistics();
                Rocks::set_direct_io(&mut o, s.direct_io);
                o.set_enable_pipelined_write(s.pipelined_write);
                Rocks::set_row_cache(&mut o, s);
                let mut t = rocksdb::BlockBasedOptions::default();
                t.set_bloom_filter(10.0, false);
                o.set_block_based_table_factory(&t);
                let db = Rocks::open_db(&o, dir)?;
                return Ok(Rocks {
                    db,
                    options: o,
                    write: Rocks::write_options(s),
                    dir: dir.to_path_buf(),
                    direct_io: s.direct_io,
                    block_cache: None,
                    row_cache: s.row_cache_bytes(),
                    cache_index_and_filter_blocks: false,
                    shape: Vec::new(),
                });
            }
            let shape = s.peer_shape()?;
            let mut o = rocksdb::Options::default();
            o.create_if_missing(true);
            o.set_write_buffer_size(s.write_buffer_size as usize);
            o.set_max_write_buffer_number(2);
            o.set_level_zero_file_num_compaction_trigger(4);
            o.set_level_zero_slowdown_writes_trigger(20);
            o.set_level_zero_stop_writes_trigger(36);
            o.set_level_compaction_dynamic_level_bytes(true);
            o.set_max_bytes_for_level_base(shape.level_base);
            o.set_max_bytes_for_level_multiplier(shape.size_ratio);
            o.set_target_file_size_base(shape.target_file_size);
            o.set_num_levels(7);
            o.set_max_background_jobs(s.background_jobs as i32);
            if let Some(rate) = s.rate_limit {
                // Refill every 100 ms with fairness 10, RocksDB's defaults.
                o.set_ratelimiter(i64::try_from(rate).unwrap_or(i64::MAX), 100_000, 10);
            }
            o.set_compression_type(rocksdb::DBCompressionType::None);
            o.enable_statistics();
            Rocks::set_direct_io(&mut o, s.direct_io);
            o.set_enable_pipelined_write(s.pipelined_write);
            Rocks::set_row_cache(&mut o, s);
            let mut t = rocksdb::BlockBasedOptions::default();
            t.set_block_size(4096);
            t.set_bloom_filter(shape.bloom_bits_per_key, false);
            t.set_block_cache(&rocksdb::Cache::new_lru_cache(s.block_cache as usize));
            if s.cache_index_and_filter_blocks {
                t.set_cache_index_and_filter_blocks(true);
                t.set_cache_index_and_filter_blocks_with_high_priority(true);
            }
            o.set_block_based_table_factory(&t);
            let db = Rocks::open_db(&o, dir)?;
            Ok(Rocks {
                db,
                options: o,
                write: Rocks::write_options(s),
                dir: dir.to_path_buf(),
                direct_io: s.direct_io,
                block_cache: Some(s.block_cache),
                row_cache: s.row_cache_bytes(),
                cache_index_and_filter_blocks: s.cache_index_and_filter_blocks,
                shape: shape.options(),
            })
        }

        /// Gives `o` an LRU row cache of [`EngineSettings::row_cache`] bytes, if any.
        fn set_row_cache(o: &mut rocksdb::Options, s: &EngineSettings) {
            if let Some(bytes) = s.row_cache_bytes() {
                o.set_row_cache(&rocksdb::Cache::new_lru_cache(bytes as usize));
            }
        }

        /// Opens the database with its default column family named, so that
        /// `cf_handle("default")` finds it for the batched MultiGet (`DB::open` leaves it out of
        /// the handles it keeps); the family gets `o`'s options, as `DB::open` would give it.
        fn open_db(o: &rocksdb::Options, dir: &Path) -> Result<rocksdb::DB> {
            let default = rocksdb::ColumnFamilyDescriptor::new(
                rocksdb::DEFAULT_COLUMN_FAMILY_NAME,
                o.clone(),
            );
            rocksdb::DB::open_cf_descriptors(o, dir, [default]).context("opening RocksDB")
        }

        /// The options of every write: the WAL left out with `s.disable_wal`.
        fn write_options(s: &EngineSettings) -> rocksdb::WriteOptions {
            let mut w = rocksdb::WriteOptions::default();
            w.disable_wal(s.disable_wal);
            w
        }

        /// Direct reads and direct flush and compaction writes, as Strata's pair of options.
        fn set_direct_io(o: &mut rocksdb::Options, on: bool) {
            o.set_use_direct_reads(on);
            o.set_use_direct_io_for_flush_and_compaction(on);
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

    impl KvEngine for Rocks {
        fn engine(&self) -> &'static str {
            "rocksdb"
        }
        fn policy(&self) -> String {
            "rocksdb-leveled".to_string()
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            Ok(self.db.put_opt(key, value, &self.write)?)
        }
        fn delete(&self, key: &[u8]) -> Result<()> {
            Ok(self.db.delete_opt(key, &self.write)?)
        }
        fn get(&self, key: &[u8]) -> Result<bool> {
            Ok(self.db.get_pinned(key)?.is_some())
        }
        fn multi_get(&self, keys: &[&[u8]]) -> Result<usize> {
            // The batched MultiGet: it groups the keys by table and reads each table's blocks
            // together through the file system's MultiRead (io_uring with the `io-uring`
            // feature), as db_bench's multireadrandom does.
            let cf = self
                .db
                .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
                .context("RocksDB has no default column family")?;
            let mut found = 0;
            for value in self
                .db
                .batched_multi_get_cf(cf, keys.iter().copied(), false)
            {
                found += usize::from(value?.is_some());
            }
            Ok(found)
        }
        fn direct_io(&self) -> bool {
            self.direct_io
        }
        fn block_cache_bytes(&self) -> Option<u64> {
            self.block_cache
        }
        fn row_cache_bytes(&self) -> Option<u64> {
            self.row_cache
        }
        fn index_and_filter(&self) -> Option<&'static str> {
            Some(if self.cache_index_and_filter_blocks {
                super::INDEXES_IN_CACHE
            } else {
                "indexes and filters outside the block cache"
            })
        }
        fn options(&self) -> Vec<(String, String)> {
            self.shape.clone()
        }
        fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
            let mut it = self.db.raw_iterator();
            it.seek(start);
            let mut read = 0;
            while it.valid() && read < n {
                std::hint::black_box((it.key(), it.value()));
                read += 1;
                it.next();
            }
            it.status()?;
            Ok(read)
        }
        fn settle(&self) -> Result<()> {
            self.db.flush()?;
            loop {
                let prop = |p: &str| self.db.property_int_value(p).ok().flatten().unwrap_or(0);
                if prop("rocksdb.compaction-pending") == 0
                    && prop("rocksdb.num-running-compactions") == 0
                    && prop("rocksdb.num-running-flushes") == 0
                {
                    return Ok(());
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        fn stats(&self) -> EngineStats {
            EngineStats {
                table_bytes_written: Some(
                    self.ticker("rocksdb.flush.write.bytes")
                        + self.ticker("rocksdb.compact.write.bytes"),
                ),
                blocks_read: Some(self.ticker("rocksdb.block.cache.data.miss")),
                // Misses only where the cache holds index and filter blocks; otherwise the
                // table readers hold them from open on and these stay 0.
                index_blocks_read: Some(self.ticker("rocksdb.block.cache.index.miss")),
                filter_blocks_read: Some(self.ticker("rocksdb.block.cache.filter.miss")),
                tables_probed: None,
                filter_probes: None,
                key_index: None,
                stall_micros: Some(self.ticker("rocksdb.stall.micros")),
                // Block counts per level and policy time are Strata's own.
                ..EngineStats::default()
            }
        }
        fn dir(&self) -> &Path {
            &self.dir
        }
    }
}

#[cfg(feature = "fjall")]
mod fjall_peer;

mod autopilot;
pub use autopilot::options as autopilot_options;

/// The run label of Strata choosing its own policy ([`strata_engine::Options::with_autopilot`],
/// starting from [`AUTOPILOT_START`]), as `--policies autopilot` names it.
pub const AUTOPILOT: &str = "autopilot";

/// The policy an autopilot run starts with: the engine's default.
pub const AUTOPILOT_START: &str = "leveled";

/// Peers this build can run.
pub fn available_peers() -> Vec<&'static str> {
    let mut peers = Vec::new();
    if cfg!(feature = "rocksdb") {
        peers.push("rocksdb");
    }
    if cfg!(feature = "fjall") {
        peers.push("fjall");
    }
    peers
}

/// Opens a peer by name in `dir` (a fresh directory, or a database the peer kept earlier).
pub fn open_peer(name: &str, dir: &Path, s: &EngineSettings) -> Result<Arc<dyn KvEngine>> {
    let _ = (dir, s);
    match name {
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Arc::new(rocks::Rocks::open(dir, s)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Arc::new(fjall_peer::Fjall::open(dir, s)?)),
        other if ["rocksdb", "fjall"].contains(&other) => bail!(
            "this build has no {other} peer; build with `--features peers` (or `--features {other}`)"
        ),
        other => bail!("unknown peer {other:?}; peers are rocksdb and fjall"),
    }
}
