//! User-facing iterators: internal entries resolved to the newest visible value of each key.

use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, SeqNo, ValueKind, MAX_SEQNO};
use crate::stats::Statistics;
use crate::super_version::SuperVersion;
use bytes::Bytes;
use std::ops::Bound;
use std::sync::Arc;

/// Iterates over key/value pairs of a range, ascending or descending, as of one sequence number.
/// It holds the memtables and table files it reads alive until dropped.
pub struct DbIterator {
    merged: MergingIterator,
    /// Keeps the memtables and tables being read alive.
    _super_version: Arc<SuperVersion>,
    /// Where the scan is counted, short or long, when the iterator is dropped.
    scan_count: ScanCount,
    seq: SeqNo,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    reverse: bool,
    started: bool,
    done: bool,
    /// The user key already decided (forward direction), whose older versions are skipped.
    decided: Option<Vec<u8>>,
}

/// Counts a scan by the entries it returned: long from `long_scan_entries` on.
pub(crate) struct ScanCount {
    /// The engine's statistics.
    pub stats: Arc<Statistics>,
    /// Entries from which a scan is long.
    pub long_scan_entries: u64,
    /// Entries returned so far.
    pub returned: u64,
}

impl Drop for ScanCount {
    fn drop(&mut self) {
        let counter = if self.returned >= self.long_scan_entries {
            &self.stats.long_scans
        } else {
            &self.stats.short_scans
        };
        Statistics::add(counter, 1);
    }
}

impl DbIterator {
    /// A user iterator over `children` (memtables and runs) as of `seq`.
    pub(crate) fn new(
        children: Vec<Box<dyn InternalIterator>>,
        super_version: Arc<SuperVersion>,
        scan_count: ScanCount,
        seq: SeqNo,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
        reverse: bool,
    ) -> Result<DbIterator> {
        Ok(DbIterator {
            merged: MergingIterator::new(children),
            _super_version: super_version,
            scan_count,
            seq,
            start: range.0,
            end: range.1,
            reverse,
            started: false,
            done: false,
            decided: None,
        })
    }

    fn before_start(&self, user_key: &[u8]) -> bool {
        match &self.start {
            Bound::Included(s) => user_key < s.as_slice(),
            Bound::Excluded(s) => user_key <= s.as_slice(),
            Bound::Unbounded => false,
        }
    }

    fn past_end(&self, user_key: &[u8]) -> bool {
        match &self.end {
            Bound::Included(e) => user_key > e.as_slice(),
            Bound::Excluded(e) => user_key >= e.as_slice(),
            Bound::Unbounded => false,
        }
    }

    fn parse(ikey: &[u8]) -> Result<(&[u8], SeqNo, ValueKind)> {
        key::parse_internal_key(ikey)
            .ok_or_else(|| Error::corruption("iterator", 0, "malformed internal key"))
    }

    fn next_forward(&mut self) -> Result<Option<(Bytes, Bytes)>> {
        if !self.started {
            self.started = true;
            match &self.start {
                Bound::Included(k) | Bound::Excluded(k) => {
                    let target = key::seek_key(k, MAX_SEQNO);
                    self.merged.seek(&target)?;
                }
                Bound::Unbounded => self.merged.seek_to_first()?,
            }
        }
        while self.merged.valid() {
            let (user_key, seq, kind) = Self::parse(self.merged.key())?;
            if self.decided.as_deref() == Some(user_key)
                || seq > self.seq
                || self.before_start(user_key)
            {
                self.merged.next()?;
                continue;
            }
            if self.past_end(user_key) {
                break;
            }
            // The first visible entry of a key is its newest visible version.
            self.decided = Some(user_key.to_vec());
            let item = match kind {
                ValueKind::Put => Some((
                    Bytes::copy_from_slice(user_key),
                    Bytes::copy_from_slice(self.merged.value()),
                )),
                ValueKind::Delete => None,
            };
            self.merged.next()?;
            if item.is_some() {
                return Ok(item);
            }
        }
        self.done = true;
        Ok(None)
    }

    fn next_reverse(&mut self) -> Result<Option<(Bytes, Bytes)>> {
        if !self.started {
            self.started = true;
            match &self.end {
                // The largest internal key of `k` has the smallest trailer.
                Bound::Included(k) => {
                    self.merged
                        .seek_for_prev(&key::internal_key(k, 0, ValueKind::Delete))?
                }
                Bound::Excluded(k) => self.merged.seek_for_prev(&key::seek_key(k, MAX_SEQNO))?,
                Bound::Unbounded => self.merged.seek_to_last()?,
            }
        }
        while self.merged.valid() {
            let user_key = Self::parse(self.merged.key())?.0.to_vec();
            if self.past_end(&user_key) {
                self.merged.prev()?;
                continue;
            }
            if self.before_start(&user_key) {
                break;
            }
            // Backwards, a key's versions come oldest first: the last visible one seen wins.
            let mut newest: Option<(ValueKind, Bytes)> = None;
            while self.merged.valid() {
                let (k, seq, kind) = Self::parse(self.merged.key())?;
                if k != user_key.as_slice() {
                    break;
                }
                if seq <= self.seq {
                    newest = Some((kind, Bytes::copy_from_slice(self.merged.value())));
                }
                self.merged.prev()?;
            }
            if let Some((ValueKind::Put, value)) = newest {
                return Ok(Some((Bytes::from(user_key), value)));
            }
        }
        self.done = true;
        Ok(None)
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = if self.reverse {
            self.next_reverse()
        } else {
            self.next_forward()
        };
        match r {
            Ok(item) => {
                self.scan_count.returned += u64::from(item.is_some());
                item.map(Ok)
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
