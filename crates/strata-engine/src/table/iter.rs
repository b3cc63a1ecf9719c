//! [`TableIterator`]: a cursor over one table's entries.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use super::block::{cmp_to_target, split_internal_key, Block, Cursor, DecodeError};
use super::compress::BLOCK_TRAILER_LEN;
use super::file::ReadPurpose;
use super::format::BlockHandle;
use super::index::Index;
use super::readahead::{Readahead, ReadaheadSize};
use super::reader::Table;
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, StoredBlock};

impl Table {
    /// An iterator over all entries for a lookup or scan; it holds the table alive.
    pub fn iter(self: &Arc<Self>) -> TableIterator {
        self.iter_for(ReadPurpose::Query)
    }

    /// An iterator over all entries whose block reads are charged to `purpose` (and fill the
    /// block cache only for [`ReadPurpose::Query`]), reading ahead automatically for queries
    /// and block by block otherwise.
    pub fn iter_for(self: &Arc<Self>, purpose: ReadPurpose) -> TableIterator {
        let readahead = match purpose {
            ReadPurpose::Query => ReadaheadSize::Auto,
            ReadPurpose::Compaction | ReadPurpose::Metadata => ReadaheadSize::Off,
        };
        self.iter_with(purpose, readahead)
    }

    /// [`Table::iter_for`] reading ahead as `readahead` says.
    pub fn iter_with(
        self: &Arc<Self>,
        purpose: ReadPurpose,
        readahead: ReadaheadSize,
    ) -> TableIterator {
        TableIterator::new(Arc::clone(self), purpose, readahead)
    }
}

/// An [`InternalIterator`] over one table. It holds the current data block and reuses one key
/// buffer for every entry and block it visits.
pub struct TableIterator {
    table: Arc<Table>,
    /// Who the block reads are for.
    purpose: ReadPurpose,
    /// The loaded block; `None` when the iterator is not positioned.
    block: Option<Arc<Block>>,
    /// Position of `block` in the index.
    block_index: usize,
    cursor: Cursor,
    readahead: Readahead,
    /// The table's index, from the first positioning on (it may have to be read).
    index: Option<Arc<Index>>,
}

impl fmt::Debug for TableIterator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableIterator")
            .field("table", &self.table.src.name)
            .field("block_index", &self.block_index)
            .field("valid", &self.valid())
            .finish()
    }
}

impl TableIterator {
    /// An iterator over `table`, unpositioned, reading blocks for `purpose` with `readahead`.
    pub(super) fn new(
        table: Arc<Table>,
        purpose: ReadPurpose,
        readahead: ReadaheadSize,
    ) -> TableIterator {
        TableIterator {
            table,
            purpose,
            block: None,
            block_index: 0,
            cursor: Cursor::default(),
            readahead: Readahead::new(readahead),
            index: None,
        }
    }

    /// The table's index, fetched once per iterator.
    fn index(&mut self) -> Result<Arc<Index>> {
        if let Some(index) = &self.index {
            return Ok(Arc::clone(index));
        }
        let index = self.table.shared_index()?;
        self.index = Some(Arc::clone(&index));
        Ok(index)
    }

    /// Makes block `i` current (reusing it if already loaded); false past either end.
    fn load(&mut self, i: usize) -> Result<bool> {
        let index = self.index()?;
        let Some(entry) = index.entries.get(i) else {
            self.block = None;
            return Ok(false);
        };
        if self.block.is_none() || self.block_index != i {
            self.block = None;
            // Only the table's own file is read ahead: a kept block lies in another file.
            let block = if entry.file == 0 {
                self.table.stored_block_via(
                    entry.handle(),
                    self.purpose,
                    Some((&mut self.readahead, i)),
                )?
            } else {
                self.table.data_block(entry, self.purpose)?
            };
            self.block = Some(block);
            self.block_index = i;
        }
        Ok(true)
    }

    /// A decode error in the current block, naming the file that holds it.
    fn decode_error(&self, e: DecodeError) -> Error {
        let Some(entry) = self
            .index
            .as_ref()
            .and_then(|index| index.entries.get(self.block_index))
        else {
            return self
                .table
                .src
                .decode_error(BlockHandle::default(), "data", e);
        };
        match self.table.holder(entry) {
            Ok(holder) => holder.table().src.decode_error(entry.handle(), "data", e),
            Err(other) => other,
        }
    }

    /// Runs a cursor move on the current block.
    fn on_block(
        &mut self,
        step: impl FnOnce(&mut Cursor, &Block) -> std::result::Result<(), DecodeError>,
    ) -> Result<()> {
        let Some(block) = &self.block else {
            self.cursor.invalidate();
            return Ok(());
        };
        match step(&mut self.cursor, block) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.decode_error(e)),
        }
    }

    /// Positions on the first entry of block `i` or, if empty, of the blocks after it.
    fn first_from(&mut self, mut i: usize) -> Result<()> {
        loop {
            if !self.load(i)? {
                self.cursor.invalidate();
                return Ok(());
            }
            self.on_block(|c, b| c.seek_to_first(b))?;
            if self.cursor.valid() {
                return Ok(());
            }
            i += 1;
        }
    }

    /// Positions on the last entry of block `i` or, if empty, of the blocks before it.
    fn last_from(&mut self, mut i: Option<usize>) -> Result<()> {
        while let Some(at) = i {
            if !self.load(at)? {
                break;
            }
            self.on_block(|c, b| c.seek_to_last(b))?;
            if self.cursor.valid() {
                return Ok(());
            }
            i = at.checked_sub(1);
        }
        self.block = None;
        self.cursor.invalidate();
        Ok(())
    }

    fn seek_inner(&mut self, target: &[u8]) -> Result<()> {
        let (user_key, trailer) = split_internal_key(target);
        let i = self.index()?.find(user_key, trailer);
        if !self.load(i)? {
            self.cursor.invalidate();
            return Ok(());
        }
        self.on_block(|c, b| c.seek(b, user_key, trailer))?;
        if !self.cursor.valid() {
            // Only a block whose index key overstates its contents ends up here.
            self.first_from(i + 1)?;
        }
        Ok(())
    }

    fn seek_for_prev_inner(&mut self, target: &[u8]) -> Result<()> {
        self.seek_inner(target)?;
        if !self.valid() {
            let blocks = self.index()?.entries.len();
            return self.last_from(blocks.checked_sub(1));
        }
        let (user_key, trailer) = split_internal_key(target);
        if cmp_to_target(self.cursor.key(), user_key, trailer) == Ordering::Greater {
            self.prev_inner()?;
        }
        Ok(())
    }

    fn next_inner(&mut self) -> Result<()> {
        self.on_block(|c, b| c.next(b))?;
        if !self.cursor.valid() && self.block.is_some() {
            self.first_from(self.block_index + 1)?;
        }
        Ok(())
    }

    fn prev_inner(&mut self) -> Result<()> {
        self.on_block(|c, b| c.prev(b))?;
        if !self.cursor.valid() && self.block.is_some() {
            self.last_from(self.block_index.checked_sub(1))?;
        }
        Ok(())
    }

    /// Leaves the iterator unpositioned after an error, passing the error on.
    fn settle(&mut self, result: Result<()>) -> Result<()> {
        if result.is_err() {
            self.block = None;
            self.cursor.invalidate();
        }
        result
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.block.is_some() && self.cursor.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.first_from(0);
        self.settle(r)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = self
            .index()
            .and_then(|index| self.last_from(index.entries.len().checked_sub(1)));
        self.settle(r)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.seek_inner(target);
        self.settle(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let r = self.seek_for_prev_inner(target);
        self.settle(r)
    }

    fn next(&mut self) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        let r = self.next_inner();
        self.settle(r)
    }

    fn prev(&mut self) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        let r = self.prev_inner();
        self.settle(r)
    }

    fn key(&self) -> &[u8] {
        if self.valid() {
            self.cursor.key()
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        match &self.block {
            Some(block) if self.cursor.valid() => self.cursor.value(block),
            _ => &[],
        }
    }

    fn block_start(&self) -> Option<StoredBlock> {
        if !self.valid() || !self.cursor.at_first() {
            return None;
        }
        let index = self.index.as_ref()?;
        let entry = index.entries.get(self.block_index)?;
        let last = index.bytes(entry.last_key);
        Some(StoredBlock {
            file_number: if entry.file == 0 {
                self.table.file_number
            } else {
                entry.file
            },
            offset: entry.offset,
            size: u64::from(entry.size) + BLOCK_TRAILER_LEN as u64,
            entries: u64::from(entry.entries),
            last_user_key: last.slice(..last.len().saturating_sub(8)),
        })
    }
}
