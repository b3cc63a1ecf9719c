//! fjall as a peer (the `fjall` feature).

use super::{EngineSettings, EngineStats, KvEngine};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// fjall 3 (one keyspace) configured like Strata's `leveled` where its API allows: the same
/// memtable size, table target size, block size (4 KiB), Bloom bits per key, block cache
/// capacity, no compression, its own leveled strategy (L0 threshold 4, ratio 10), the
/// journal handed to the operating system on every write without a sync (fjall's default,
/// as Strata's WAL without `sync`). Not matchable: dynamic level sizes and
/// `max_bytes_for_level_base`, background job counts (fjall uses its own worker pool), the
/// total write-buffer budget (fjall 3 hides that option), and statistics (fjall reports no
/// write bytes, so its write amplification is unknown), direct I/O (fjall has none: a run
/// with `--direct-io` reads and writes fjall's files through the page cache, and its result
/// says `direct_io: false`), and batched reads (fjall has no MultiGet: a batch is a loop of
/// gets, [`KvEngine::multi_get`]'s default).
pub struct Fjall {
    database: fjall::Database,
    keyspace: fjall::Keyspace,
    dir: PathBuf,
    block_cache: Option<u64>,
    shape: Vec<(String, String)>,
}

impl Fjall {
    /// Opens fjall in `dir`: a fresh directory, or a database kept earlier.
    pub fn open(dir: &Path, s: &EngineSettings) -> Result<Fjall> {
        if s.engine_defaults {
            let database = fjall::Database::builder(dir).open()?;
            let keyspace = database.keyspace("bench", fjall::KeyspaceCreateOptions::default)?;
            return Ok(Fjall {
                database,
                keyspace,
                dir: dir.to_path_buf(),
                block_cache: None,
                shape: Vec::new(),
            });
        }
        use fjall::config::{
            BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy,
            FilterPolicyEntry,
        };
        let database = fjall::Database::builder(dir)
            .cache_size(s.block_cache)
            .open()?;
        let shape = s.peer_shape()?;
        let strategy =
            fjall::compaction::Leveled::default().with_table_target_size(shape.target_file_size);
        let bloom = FilterPolicyEntry::Bloom(BloomConstructionPolicy::BitsPerKey(
            shape.bloom_bits_per_key as f32,
        ));
        let options = move || {
            fjall::KeyspaceCreateOptions::default()
                .max_memtable_size(s.write_buffer_size)
                .data_block_size_policy(BlockSizePolicy::all(4096))
                .filter_policy(FilterPolicy::all(bloom))
                .data_block_compression_policy(CompressionPolicy::all(fjall::CompressionType::None))
                .index_block_compression_policy(CompressionPolicy::all(
                    fjall::CompressionType::None,
                ))
                .compaction_strategy(std::sync::Arc::new(strategy))
        };
        let keyspace = database.keyspace("bench", options)?;
        Ok(Fjall {
            database,
            keyspace,
            dir: dir.to_path_buf(),
            block_cache: Some(s.block_cache),
            // fjall's own strategy keeps its ratio and has no level base.
            shape: shape
                .options()
                .into_iter()
                .filter(|(k, _)| k == "target_file_size" || k == "bloom_bits_per_key")
                .collect(),
        })
    }
}

impl KvEngine for Fjall {
    fn engine(&self) -> &'static str {
        "fjall"
    }
    fn policy(&self) -> String {
        "fjall-leveled".to_string()
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.keyspace.insert(key, value)?)
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(self.keyspace.remove(key)?)
    }
    fn get(&self, key: &[u8]) -> Result<bool> {
        Ok(self.keyspace.get(key)?.is_some())
    }
    fn block_cache_bytes(&self) -> Option<u64> {
        self.block_cache
    }
    fn options(&self) -> Vec<(String, String)> {
        self.shape.clone()
    }
    fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
        let mut read = 0;
        for kv in self.keyspace.range(start..) {
            std::hint::black_box(kv.into_inner()?);
            read += 1;
            if read >= n {
                break;
            }
        }
        Ok(read)
    }
    fn settle(&self) -> Result<()> {
        self.keyspace.rotate_memtable_and_wait()?;
        self.database.persist(fjall::PersistMode::Buffer)?;
        Ok(())
    }
    fn stats(&self) -> EngineStats {
        EngineStats::default()
    }
    fn dir(&self) -> &Path {
        &self.dir
    }
}
