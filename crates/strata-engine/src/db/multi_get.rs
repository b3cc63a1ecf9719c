//! Batched point lookups ([`Db::multi_get`](crate::Db::multi_get)): the keys are sorted once,
//! looked for in the memtables, then in every run that may hold them (by the levels' interval
//! indexes, then each table's filter and index, all in memory); the data blocks all those probes
//! need are read together, in one batch, and each key takes the newest entry its probes find,
//! run by run in recency order. A batch out of cache so waits about one device round trip,
//! against one per level for a batch that reads level by level (RocksDB's MultiGet) and one per
//! key for single lookups. The price: a key found in a newer run had its block in an older run
//! read for nothing, which only happens where filters let a probe through, that is where the
//! older run holds an older version of the key (or a false positive).

use super::engine::Engine;
use super::read::ReadOptions;
use crate::error::Result;
use crate::key::{SeqNo, ValueKind};
use crate::stats::Statistics;
use crate::table::{bloom_hash, query_blocks, Table};
use bytes::Bytes;
use std::sync::Arc;

/// A distinct key of the batch still looked for.
struct Pending<'k> {
    key: &'k [u8],
    /// Positions of the batch asking for it: a range of the sorted order.
    asked: std::ops::Range<usize>,
    /// The answer, once a newest entry was found (a delete answers `None`).
    found: Option<Option<Bytes>>,
}

/// A table a pending key must be looked up in: the data block [`Table::locate`] named. Probes
/// are made level by level, run by run, newest first: their order is their recency.
struct Probe {
    pending: usize,
    table: Arc<Table>,
    position: usize,
}

impl Engine {
    /// The values of `keys` as `options` say, in the order of `keys`; see
    /// [`Db::multi_get`](crate::Db::multi_get).
    pub fn multi_get(
        &self,
        keys: &[&[u8]],
        options: &ReadOptions<'_>,
    ) -> Result<Vec<Option<Bytes>>> {
        self.check_open()?;
        let seq = self.read_sequence(options);
        let view = self.current_super_version();
        Statistics::add(&self.stats.gets, keys.len() as u64);
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_unstable_by(|&a, &b| keys[a].cmp(keys[b]));
        let mut pending: Vec<Pending<'_>> = Vec::new();
        for (at, &i) in order.iter().enumerate() {
            match pending.last_mut() {
                Some(last) if last.key == keys[i] => last.asked.end = at + 1,
                _ => pending.push(Pending {
                    key: keys[i],
                    asked: at..at + 1,
                    found: None,
                }),
            }
        }
        let resolve = |kind: ValueKind, value: Bytes| match kind {
            ValueKind::Put => Some(value),
            ValueKind::Delete => None,
        };
        for p in &mut pending {
            for memtable in std::iter::once(&view.memtable).chain(&view.frozen) {
                if let Some((_, kind, value)) = memtable.get(p.key, seq) {
                    p.found = Some(resolve(kind, value));
                    break;
                }
            }
        }
        let mut holders = Vec::new();
        let mut probes = Vec::new();
        for (level_no, level) in view.version.levels().iter().enumerate() {
            let key_index = view.key_index.as_ref().filter(|k| k.level == level_no);
            for (i, p) in pending
                .iter()
                .enumerate()
                .filter(|(_, p)| p.found.is_none())
            {
                holders.clear();
                if self.options.interval_index {
                    view.intervals[level_no].holding(p.key, &mut holders);
                } else {
                    holders.extend(0..level.runs().len());
                }
                for &run in &holders {
                    let Some(meta) = level.runs()[run].table_covering(p.key) else {
                        continue;
                    };
                    // In the indexed level, only the tables the key index names may hold the
                    // key, and they need no filter probe.
                    let filtered = match key_index {
                        Some(index) if index.is_indexed(meta.id) => {
                            let mut named = false;
                            index.candidates(bloom_hash(p.key), |t| named |= t == meta.id);
                            if !named {
                                continue;
                            }
                            false
                        }
                        _ => true,
                    };
                    Statistics::add(&self.stats.get_tables_probed, 1);
                    let table = self.table_in_level(meta.id.0, level_no, &view.version)?;
                    if let Some(position) = table.locate(p.key, seq, filtered)? {
                        probes.push(Probe {
                            pending: i,
                            table,
                            position,
                        });
                    }
                }
            }
        }
        self.probe(&probes, &mut pending, seq, &resolve)?;
        let mut values: Vec<Option<Bytes>> = vec![None; keys.len()];
        for p in pending {
            let value = p.found.flatten();
            for &i in &order[p.asked] {
                values[i] = value.clone();
            }
        }
        Ok(values)
    }

    /// Reads the data blocks `probes` name, together, and looks their keys up in them: each key
    /// takes what its first probe (its newest run) holding it finds.
    fn probe(
        &self,
        probes: &[Probe],
        pending: &mut [Pending<'_>],
        seq: SeqNo,
        resolve: &impl Fn(ValueKind, Bytes) -> Option<Bytes>,
    ) -> Result<()> {
        if probes.is_empty() {
            return Ok(());
        }
        let wanted = probes
            .iter()
            .map(|p| p.table.block_holder(p.position))
            .collect::<Result<Vec<_>>>()?;
        let blocks = query_blocks(self.fs.as_ref(), &wanted);
        for (probe, block) in probes.iter().zip(blocks) {
            let p = &mut pending[probe.pending];
            if p.found.is_some() {
                // A newer run held the key: this block was read for nothing.
                continue;
            }
            let block = block?;
            if let Some((_, kind, value)) =
                probe
                    .table
                    .find_in_block(&block, probe.position, p.key, seq)?
            {
                p.found = Some(resolve(kind, value));
            }
        }
        Ok(())
    }
}
