//! Open tables, shared by readers and compactions, and cursors over whole runs.

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::{InternalIterator, StoredBlock};
use crate::key::user_key;
use crate::manifest::table_file_name;
use crate::stats::Statistics;
use crate::table::{BlockCache, BlockFiles, ReadPurpose, ReadaheadSize, Table, TableIterator};
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
    /// Open files for direct reads ([`crate::Options::with_use_direct_reads`]).
    direct_reads: bool,
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
    /// A cache of up to `capacity` open tables in `dir`, their files opened for direct reads
    /// if `direct_reads`.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        capacity: usize,
        block_cache: Option<Arc<BlockCache>>,
        stats: Arc<Statistics>,
        direct_reads: bool,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| TableCache {
            me: me.clone(),
            fs,
            dir,
            cache: quick_cache::sync::Cache::new(capacity.max(1)),
            block_cache,
            stats,
            direct_reads,
        })
    }

    /// Table `number`, opened if not cached.
    pub fn get(&self, number: u64) -> Result<Arc<Table>> {
        if let Some(t) = self.cache.get(&number) {
            return Ok(t);
        }
        let name = table_file_name(number);
        let path = self.dir.join(&name);
        let opened = if self.direct_reads {
            self.fs.open_direct(&path)
        } else {
            self.fs.open(&path)
        };
        let file = opened.map_err(|e| Error::io(format!("opening table {}", path.display()), e))?;
        let files: Weak<dyn BlockFiles> = self.me.clone();
        let table = Arc::new(
            Table::open(
                file,
                number,
                name,
                self.block_cache.clone(),
                Arc::clone(&self.stats),
            )?
            .with_block_files(files),
        );
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
            index: 0,
            current: None,
        }
    }

    fn open(&mut self, index: usize) -> Result<bool> {
        self.index = index;
        match self.tables.get(index) {
            Some(meta) => {
                let table = self.cache.get(meta.id.0)?;
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
        let uk = user_key(target);
        let i = self.tables.partition_point(|t| t.largest.as_ref() < uk);
        if self.open(i)? {
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
