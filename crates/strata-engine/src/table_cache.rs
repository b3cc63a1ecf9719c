//! Open tables, shared by readers and compactions, and cursors over whole runs.

use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::fs::FileSystem;
use crate::iter::{InternalIterator, StoredBlock};
use crate::key::user_key;
use crate::options::IndexPinning;
use crate::stats::Statistics;
use crate::table::{
    BlockCache, BlockFiles, BlockHandle, ReadPurpose, ReadaheadSize, Table, TableIterator,
};
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use strata_meta::TableMeta;

/// A bounded cache of open tables (RocksDB's table cache; `max_open_files` entries). Tables it
/// opens read the blocks they refer to in other files through it.
pub struct TableCache {
    me: Weak<TableCache>,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    cache: quick_cache::sync::Cache<u64, Arc<Table>>,
    block_cache: Option<Arc<BlockCache>>,
    stats: Arc<Statistics>,
    reads: TableReads,
}

/// How a [`TableCache`] opens tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableReads {
    /// Open files for direct reads ([`crate::Options::with_use_direct_reads`]).
    pub direct: bool,
    /// Tables keep their index and filter in the block cache unless `pinning` holds them
    /// ([`crate::Options::with_cache_index_and_filter_blocks`]).
    pub cache_index_and_filter: bool,
    /// See `cache_index_and_filter`.
    pub pinning: IndexPinning,
    /// How long a read of a query's block polls for the device
    /// ([`crate::Options::with_read_polling`]).
    pub read_poll: std::time::Duration,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("dir", &self.dir)
            .field("open", &self.cache.len())
            .finish()
    }
}

impl TableCache {
    /// A cache of up to `capacity` open tables in `dir`, opened as `reads` says.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        capacity: usize,
        block_cache: Option<Arc<BlockCache>>,
        stats: Arc<Statistics>,
        reads: TableReads,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| TableCache {
            me: me.clone(),
            fs,
            dir,
            cache: quick_cache::sync::Cache::new(capacity.max(1)),
            block_cache,
            stats,
            reads,
        })
    }

    /// Whether opening a table depends on the level it is met in
    /// ([`TableCache::get_at_level`]).
    pub fn pins_by_level(&self) -> bool {
        self.reads.cache_index_and_filter && self.reads.pinning != IndexPinning::None
    }

    /// Table `number`, opened if not cached. A table this opens that keeps its index and filter
    /// in the block cache holds them only if pinning holds them at every level.
    pub fn get(&self, number: u64) -> Result<Arc<Table>> {
        self.open_table(number, !self.reads.cache_index_and_filter)
    }

    /// [`TableCache::get`] for a read that meets the table in `level`, the deepest level
    /// holding data being `deepest`: a table this opens holds its index and filter if the
    /// pinning says so for that level.
    pub fn get_at_level(&self, number: u64, level: usize, deepest: usize) -> Result<Arc<Table>> {
        let pin = !self.reads.cache_index_and_filter || self.reads.pinning.pins(level, deepest);
        self.open_table(number, pin)
    }

    fn open_table(&self, number: u64, pin: bool) -> Result<Arc<Table>> {
        if let Some(t) = self.cache.get(&number) {
            return Ok(t);
        }
        let name = table_file_name(number);
        let path = self.dir.join(&name);
        let opened = if self.reads.direct {
            self.fs.open_direct(&path)
        } else {
            self.fs.open(&path)
        };
        let file = opened.map_err(|e| Error::io(format!("opening table {}", path.display()), e))?;
        let files: Weak<dyn BlockFiles> = self.me.clone();
        let mut table = Table::open(
            file,
            number,
            name,
            self.block_cache.clone(),
            Arc::clone(&self.stats),
        )?
        .with_block_files(files);
        table = table.with_read_poll(self.reads.read_poll);
        if !pin {
            table = table.cache_index_and_filter();
        }
        let table = Arc::new(table);
        self.cache.insert(number, Arc::clone(&table));
        Ok(table)
    }

    /// Forgets table `number` (its file is being deleted).
    pub fn evict(&self, number: u64) {
        self.cache.remove(&number);
    }
}

impl BlockFiles for TableCache {
    fn table(&self, file_number: u64) -> Result<Arc<Table>> {
        self.get(file_number)
    }
}

/// A cursor over one sorted run: its tables in key order, each opened when the cursor reaches it.
pub struct RunIterator {
    cache: Arc<TableCache>,
    tables: Vec<Arc<TableMeta>>,
    purpose: ReadPurpose,
    readahead: ReadaheadSize,
    /// The level the run is in and the deepest level holding data, for tables it opens
    /// ([`TableCache::get_at_level`]).
    level: Option<(usize, usize)>,
    index: usize,
    current: Option<TableIterator>,
}

impl RunIterator {
    /// A cursor over `tables`, which must be sorted by key and disjoint, reading blocks for
    /// `purpose` with `readahead` in each table.
    pub fn new(
        cache: Arc<TableCache>,
        tables: Vec<Arc<TableMeta>>,
        purpose: ReadPurpose,
        readahead: ReadaheadSize,
    ) -> Self {
        RunIterator {
            cache,
            tables,
            purpose,
            readahead,
            level: None,
            index: 0,
            current: None,
        }
    }

    /// This cursor, for a run in `level` when the deepest level holding data is `deepest`.
    pub fn in_level(mut self, level: usize, deepest: usize) -> Self {
        self.level = Some((level, deepest));
        self
    }

    /// The data block a seek to `target` reads first, and the table whose file holds it: what
    /// a scan prefetches for its runs together ([`crate::table::prefetch_blocks`]).
    pub fn seek_block(&self, target: &[u8]) -> Result<Option<(Arc<Table>, BlockHandle)>> {
        match self.tables.get(self.seek_position(target)) {
            Some(meta) => self.table(meta)?.seek_block(target),
            None => Ok(None),
        }
    }

    /// The position of the table a seek to `target` starts in (past the last if none).
    fn seek_position(&self, target: &[u8]) -> usize {
        let uk = user_key(target);
        self.tables.partition_point(|t| t.largest.as_ref() < uk)
    }

    /// The open table `meta` describes, opened for this run's level if it has one.
    fn table(&self, meta: &TableMeta) -> Result<Arc<Table>> {
        match self.level {
            Some((level, deepest)) => self.cache.get_at_level(meta.id.0, level, deepest),
            None => self.cache.get(meta.id.0),
        }
    }

    fn open(&mut self, index: usize) -> Result<bool> {
        self.index = index;
        match self.tables.get(index) {
            Some(meta) => {
                let table = self.table(meta)?;
                self.current = Some(table.iter_with(self.purpose, self.readahead));
                Ok(true)
            }
            None => {
                self.current = None;
                Ok(false)
            }
        }
    }

    /// Moves forward over tables until the cursor rests on an entry.
    fn skip_forward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if !self.open(self.index + 1)? {
                return Ok(());
            }
            if let Some(c) = &mut self.current {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Moves backward over tables until the cursor rests on an entry.
    fn skip_backward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index == 0 {
                self.current = None;
                return Ok(());
            }
            self.open(self.index - 1)?;
            if let Some(c) = &mut self.current {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for RunIterator {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if self.open(0)? {
            if let Some(c) = &mut self.current {
                c.seek_to_first()?;
            }
        }
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let Some(last) = self.tables.len().checked_sub(1) else {
            self.current = None;
            return Ok(());
        };
        self.open(last)?;
        if let Some(c) = &mut self.current {
            c.seek_to_last()?;
        }
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if self.open(self.seek_position(target))? {
            if let Some(c) = &mut self.current {
                c.seek(target)?;
            }
        }
        self.skip_forward()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let uk = user_key(target);
        let after = self.tables.partition_point(|t| t.smallest.as_ref() <= uk);
        let Some(i) = after.checked_sub(1) else {
            self.current = None;
            return Ok(());
        };
        self.open(i)?;
        if let Some(c) = &mut self.current {
            c.seek_for_prev(target)?;
        }
        self.skip_backward()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = &mut self.current {
            c.next()?;
        }
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = &mut self.current {
            c.prev()?;
        }
        self.skip_backward()
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }

    fn block_start(&self) -> Option<StoredBlock> {
        self.current.as_ref()?.block_start()
    }
}
