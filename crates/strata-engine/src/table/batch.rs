//! Data blocks read together: those of a batch of point lookups ([`Db::multi_get`]), and those
//! the seeks of a scan's runs start in.
//!
//! [`Db::multi_get`]: crate::Db::multi_get

use std::collections::HashMap;
use std::sync::Arc;

use super::block::Block;
use super::file::ReadPurpose;
use super::format::BlockHandle;
use super::reader::Table;
use crate::error::{Error, Result};
use crate::fs::{BatchRead, FileSystem};
use crate::stats::Statistics;

/// The data blocks at `wanted` (each the table whose file holds the block, and where it lies
/// there: [`Table::block_holder`]), for point lookups: from the block cache where it holds them,
/// counted as hits; from memory where the operating system holds them
/// ([`RandomAccessFile::read_if_cached`]); the rest read from storage together (`fs`'s
/// [`FileSystem::read_batch`], the file system the tables were opened through). Those not in the
/// block cache are checked, counted as misses and cached as a lookup's reads are
/// ([`Table::get`]). In `wanted`'s order; a block asked for twice is read once.
///
/// [`RandomAccessFile::read_if_cached`]: crate::fs::RandomAccessFile::read_if_cached
pub(crate) fn query_blocks(
    fs: &dyn FileSystem,
    wanted: &[(Arc<Table>, BlockHandle)],
) -> Vec<Result<Arc<Block>>> {
    read_blocks(fs, wanted, true).0
}

/// Reads the data blocks at `wanted` the block cache lacks into it, as [`query_blocks`] does,
/// for reads about to follow (a scan's first seeks in each of its runs): they then find them
/// cached. Counts what it reads as misses and nothing as hits (the reads that follow count
/// those). Errors are left to those reads, which meet them again. Returns how many blocks it
/// sent to storage (those that waited for the device).
pub(crate) fn prefetch_blocks(fs: &dyn FileSystem, wanted: &[(Arc<Table>, BlockHandle)]) -> usize {
    read_blocks(fs, wanted, false).1
}

/// The blocks at `wanted`, and how many were sent to storage.
fn read_blocks(
    fs: &dyn FileSystem,
    wanted: &[(Arc<Table>, BlockHandle)],
    count_hits: bool,
) -> (Vec<Result<Arc<Block>>>, usize) {
    let mut results: Vec<Option<Result<Arc<Block>>>> = (0..wanted.len()).map(|_| None).collect();
    // Where each block was first asked for: later askers share that result.
    let mut first: HashMap<(u64, u64), usize> = HashMap::with_capacity(wanted.len());
    let mut same_as: Vec<usize> = (0..wanted.len()).collect();
    let mut reads = Vec::new();
    let mut read_for = Vec::new();
    for (i, (table, handle)) in wanted.iter().enumerate() {
        if let Some(&earlier) = first.get(&(table.file_number, handle.offset)) {
            same_as[i] = earlier;
            continue;
        }
        first.insert((table.file_number, handle.offset), i);
        if let Some(cache) = &table.cache {
            if let Some(block) = cache.get(table.file_number, handle.offset) {
                if count_hits {
                    Statistics::add(&table.src.stats.block_cache_hits, 1);
                }
                results[i] = Some(Ok(block));
                continue;
            }
        }
        let len = match table.src.block_span(*handle, "data") {
            Ok(len) => len,
            Err(e) => {
                results[i] = Some(Err(e));
                continue;
            }
        };
        // A block in the page cache costs a copy and no wait: read now, it leaves the batch,
        // which then says whether anything had to wait for the device (the scans' prefetch
        // stops while nothing does; measured: a page-cached database's scans ran at 0.80× of
        // the same build's without a prefetch while every block counted as a read from storage;
        // BENCHMARKS.md).
        if let Some(stored) = table.src.file.read_if_cached(handle.offset, len) {
            Statistics::add(&table.src.stats.batched_blocks_from_memory, 1);
            results[i] = Some(finish_block(table, *handle, Ok(stored)));
            continue;
        }
        reads.push(BatchRead {
            file: Arc::clone(&table.src.file),
            offset: handle.offset,
            len,
            poll: table.src.read_poll,
        });
        read_for.push(i);
    }
    let sent = reads.len();
    for (i, read) in read_for.into_iter().zip(fs.read_batch(reads)) {
        let (table, handle) = &wanted[i];
        Statistics::add(&table.src.stats.batched_block_reads, 1);
        results[i] = Some(finish_block(table, *handle, read));
    }
    let blocks = same_as
        .iter()
        .map(|&asker| match &results[asker] {
            Some(Ok(block)) => Ok(Arc::clone(block)),
            Some(Err(e)) => Err(e.duplicate()),
            None => Err(Error::io(
                "reading a batch of data blocks",
                std::io::Error::other("a block of the batch was never read"),
            )),
        })
        .collect();
    (blocks, sent)
}

/// The block at `handle` of `table` from what a read of it returned: checked, parsed, counted as
/// a block-cache miss and cached.
fn finish_block(
    table: &Table,
    handle: BlockHandle,
    read: std::io::Result<Vec<u8>>,
) -> Result<Arc<Block>> {
    let block = read
        .map_err(|e| {
            Error::io(
                format!(
                    "reading data block of {} at offset {}",
                    table.src.name, handle.offset
                ),
                e,
            )
        })
        .and_then(|stored| {
            table
                .src
                .parse_stored_block(handle, ReadPurpose::Query, stored)
        })
        .map(Arc::new);
    if let (Ok(block), Some(cache)) = (&block, &table.cache) {
        Statistics::add(&table.src.stats.block_cache_misses, 1);
        cache.insert(table.file_number, handle.offset, Arc::clone(block));
    }
    block
}
