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
/// counted as hits; the rest read from storage together (`fs`'s
/// [`FileSystem::read_batch`], the file system the tables were opened through), then checked, counted as misses and
/// cached as a lookup's reads are ([`Table::get`]). In `wanted`'s order; a block asked for
/// twice is read once.
pub(crate) fn query_blocks(
    fs: &dyn FileSystem,
    wanted: &[(Arc<Table>, BlockHandle)],
) -> Vec<Result<Arc<Block>>> {
    read_blocks(fs, wanted, true).0
}

/// Reads the data blocks at `wanted` the block cache lacks into it, together, as
/// [`query_blocks`] does, for reads about to follow (a scan's first seeks in each of its runs):
/// they then find them cached. Counts what it reads as misses and nothing as hits (the reads
/// that follow count those). Errors are left to those reads, which meet them again. Returns how
/// many blocks it read from storage.
pub(crate) fn prefetch_blocks(fs: &dyn FileSystem, wanted: &[(Arc<Table>, BlockHandle)]) -> usize {
    read_blocks(fs, wanted, false).1
}

/// The blocks at `wanted`, and how many were read from storage.
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
        match table.src.block_span(*handle, "data") {
            Ok(len) => {
                reads.push(BatchRead {
                    file: Arc::clone(&table.src.file),
                    offset: handle.offset,
                    len,
                });
                read_for.push(i);
            }
            Err(e) => results[i] = Some(Err(e)),
        }
    }
    let read_count = reads.len();
    for (i, read) in read_for.into_iter().zip(fs.read_batch(reads)) {
        let (table, handle) = &wanted[i];
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
                    .parse_stored_block(*handle, ReadPurpose::Query, stored)
            })
            .map(Arc::new);
        if let (Ok(block), Some(cache)) = (&block, &table.cache) {
            Statistics::add(&table.src.stats.block_cache_misses, 1);
            cache.insert(table.file_number, handle.offset, Arc::clone(block));
        }
        results[i] = Some(block);
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
    (blocks, read_count)
}
