//! User-facing iterators: internal entries resolved to the newest visible value of each key.

use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, SeqNo, ValueKind, MAX_SEQNO};
use crate::merge_operator::MergeOperator;
use crate::stats::Statistics;
use crate::super_version::SuperVersion;
use bytes::Bytes;
use std::ops::Bound;
use std::sync::Arc;
use strata_exec::range_del::Fragments;

/// The error of reading a merge operand without a merge operator.
pub(crate) fn missing_operator() -> Error {
    Error::InvalidArgument(
        "the database holds merge operands: open it with Options::with_merge_operator".to_string(),
    )
}

/// `operator`'s full merge of `key`'s `base` and `operands` (oldest first), its failure an
/// error naming the operator and the key.
pub(crate) fn full_merge(
    operator: &dyn MergeOperator,
    key: &[u8],
    base: Option<&[u8]>,
    operands: &[Vec<u8>],
) -> Result<Vec<u8>> {
    let operands: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
    operator
        .full_merge(key, base, &operands)
        .map_err(|reason| Error::MergeFailed {
            operator: operator.name().to_string(),
            key: key.escape_ascii().to_string(),
            reason,
        })
}

/// Iterates over key/value pairs of a range, ascending or descending, as of one sequence number.
/// It holds the memtables and table files it reads alive until dropped.
///
/// Two ways to read it: as an [`Iterator`] of owned `(key, value)` pairs, or as a cursor that
/// lends them without copying ([`DbIterator::advance`], then [`DbIterator::key`] and
/// [`DbIterator::value`]), RocksDB's raw iterator. Do not mix the two on one iterator.
pub struct DbIterator {
    merged: MergingIterator,
    /// Keeps the memtables and tables being read alive.
    _super_version: Arc<SuperVersion>,
    /// Where the scan is counted, short or long, when the iterator is dropped.
    scan_count: ScanCount,
    seq: SeqNo,
    /// Versions at or below it have expired (a TTL): a key whose newest is one reads absent.
    expired_through: SeqNo,
    /// Range deletions: a key whose newest version one of them covers reads absent.
    range_deletions: Option<Arc<Fragments<Bytes>>>,
    /// Combines a key's merge operands with its base.
    operator: Option<Arc<dyn MergeOperator>>,
    /// Forward: the value of the current key when merge operands made it (the cursor has
    /// moved past them), else `None` and the value is lent from the cursor.
    merged_value: Option<Vec<u8>>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    reverse: bool,
    started: bool,
    done: bool,
    /// Forward: the merged cursor rests on the entry `key`/`value` lend (not yet passed).
    on_entry: bool,
    /// Forward: the user key already decided, whose older versions are skipped (valid while
    /// `has_decided`; a buffer reused from key to key, so deciding allocates nothing).
    decided: Vec<u8>,
    has_decided: bool,
    /// Reverse: the current entry, copied (finding a key's newest version backwards walks past
    /// it, so it cannot be lent from the cursor).
    reverse_key: Vec<u8>,
    reverse_value: Vec<u8>,
}

/// What a read sees of the versions it meets: those at or below `seq`, less those at or below
/// `expired_through` (a TTL) and those `range_deletions` cover, with merge operands combined by
/// `operator`.
pub(crate) struct ReadView {
    pub seq: SeqNo,
    pub expired_through: SeqNo,
    pub range_deletions: Option<Arc<Fragments<Bytes>>>,
    pub operator: Option<Arc<dyn MergeOperator>>,
}

/// Counts a scan, when it ends, in the bucket of the entries it returned.
pub(crate) struct ScanCount {
    /// The engine's statistics.
    pub stats: Arc<Statistics>,
    /// Entries returned so far.
    pub returned: u64,
}

impl Drop for ScanCount {
    fn drop(&mut self) {
        let bucket = strata_policy::ScanLengths::bucket(self.returned);
        Statistics::add(&self.stats.scan_lengths[bucket], 1);
    }
}

impl DbIterator {
    /// A user iterator over `merged` (memtables and runs) as `view` says.
    pub(crate) fn new(
        merged: MergingIterator,
        super_version: Arc<SuperVersion>,
        scan_count: ScanCount,
        view: ReadView,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
        reverse: bool,
    ) -> Result<DbIterator> {
        Ok(DbIterator {
            merged,
            _super_version: super_version,
            scan_count,
            seq: view.seq,
            expired_through: view.expired_through,
            range_deletions: view.range_deletions,
            operator: view.operator,
            merged_value: None,
            start: range.0,
            end: range.1,
            reverse,
            started: false,
            done: false,
            on_entry: false,
            decided: Vec::new(),
            has_decided: false,
            reverse_key: Vec::new(),
            reverse_value: Vec::new(),
        })
    }

    fn before_start(&self, user_key: &[u8]) -> bool {
        strata_meta::below_start(&self.start, user_key)
    }

    fn past_end(&self, user_key: &[u8]) -> bool {
        strata_meta::above_end(&self.end, user_key)
    }

    /// Whether the newest visible version of `user_key`, at `found`, is alive: not expired
    /// and not range-deleted.
    #[inline]
    fn alive(&self, user_key: &[u8], found: SeqNo) -> bool {
        found > self.expired_through
            && self
                .range_deletions
                .as_ref()
                .is_none_or(|r| r.covering(user_key, self.seq).is_none_or(|t| t < found))
    }

    fn parse(ikey: &[u8]) -> Result<(&[u8], SeqNo, ValueKind)> {
        key::parse_internal_key(ikey)
            .ok_or_else(|| Error::corruption("iterator", 0, "malformed internal key"))
    }

    /// Moves to the next key/value pair in the iterator's direction; false when there is none
    /// (then, and after an error, the iterator is exhausted). The first call moves to the
    /// first pair.
    pub fn advance(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        let moved = if self.reverse {
            self.advance_reverse()
        } else {
            self.advance_forward()
        };
        match moved {
            Ok(true) => {
                self.scan_count.returned += 1;
                Ok(true)
            }
            Ok(false) => {
                self.done = true;
                Ok(false)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    /// The current pair's key. REQUIRES: the last [`DbIterator::advance`] returned true.
    pub fn key(&self) -> &[u8] {
        if self.reverse {
            &self.reverse_key
        } else {
            // The key decided last: the cursor's, or, after merge operands, the one they made.
            &self.decided
        }
    }

    /// The current pair's value. REQUIRES: the last [`DbIterator::advance`] returned true.
    pub fn value(&self) -> &[u8] {
        if self.reverse {
            &self.reverse_value
        } else {
            self.merged_value
                .as_deref()
                .unwrap_or_else(|| self.merged.value())
        }
    }

    fn advance_forward(&mut self) -> Result<bool> {
        if !self.started {
            self.started = true;
            match &self.start {
                Bound::Included(k) | Bound::Excluded(k) => {
                    let target = key::seek_key(k, MAX_SEQNO);
                    self.merged.seek(&target)?;
                }
                Bound::Unbounded => self.merged.seek_to_first()?,
            }
        } else if self.on_entry {
            // Pass the entry last lent; its key is already decided.
            self.on_entry = false;
            self.merged.next()?;
        }
        self.merged_value = None;
        while self.merged.valid() {
            let (user_key, seq, kind) = Self::parse(self.merged.key())?;
            if (self.has_decided && self.decided == user_key)
                || seq > self.seq
                || self.before_start(user_key)
            {
                self.merged.next()?;
                continue;
            }
            if self.past_end(user_key) {
                return Ok(false);
            }
            // The first visible entry of a key is its newest visible version.
            self.decided.clear();
            self.decided.extend_from_slice(user_key);
            self.has_decided = true;
            match kind {
                ValueKind::Put if self.alive(user_key, seq) => {
                    self.on_entry = true;
                    return Ok(true);
                }
                ValueKind::Merge if self.alive(user_key, seq) => {
                    self.merged_value = Some(self.merge_forward()?);
                    return Ok(true);
                }
                _ => self.merged.next()?,
            }
        }
        Ok(false)
    }

    /// The value of the decided key, whose newest visible version is the merge operand under
    /// the cursor: that operand and the older ones down to a put (the base), a delete or a
    /// version no longer alive (no base), combined. Leaves the cursor past what it read.
    fn merge_forward(&mut self) -> Result<Vec<u8>> {
        let operator = self.operator.clone().ok_or_else(missing_operator)?;
        let mut operands = vec![self.merged.value().to_vec()];
        let mut base = None;
        self.merged.next()?;
        while self.merged.valid() {
            let (user_key, seq, kind) = Self::parse(self.merged.key())?;
            if user_key != self.decided.as_slice() || !self.alive(user_key, seq) {
                break;
            }
            match kind {
                ValueKind::Merge => operands.push(self.merged.value().to_vec()),
                ValueKind::Put => {
                    base = Some(self.merged.value().to_vec());
                    break;
                }
                ValueKind::Delete => break,
            }
            self.merged.next()?;
        }
        operands.reverse();
        full_merge(operator.as_ref(), &self.decided, base.as_deref(), &operands)
    }

    fn advance_reverse(&mut self) -> Result<bool> {
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
            let user_key = Self::parse(self.merged.key())?.0;
            if self.past_end(user_key) {
                self.merged.prev()?;
                continue;
            }
            if self.before_start(user_key) {
                return Ok(false);
            }
            self.reverse_key.clear();
            self.reverse_key.extend_from_slice(user_key);
            // Backwards, a key's versions come oldest first: the last visible one seen wins,
            // and merge operands pile up on the last put (the base) since a delete. A version
            // no longer alive (expired, range-deleted) counts as a delete.
            let mut newest: Option<ValueKind> = None;
            let mut operands: Vec<Vec<u8>> = Vec::new();
            let mut base: Option<Vec<u8>> = None;
            while self.merged.valid() {
                let (k, seq, kind) = Self::parse(self.merged.key())?;
                if k != self.reverse_key.as_slice() {
                    break;
                }
                if seq <= self.seq {
                    let kind = if self.alive(k, seq) {
                        kind
                    } else {
                        ValueKind::Delete
                    };
                    match kind {
                        ValueKind::Merge => operands.push(self.merged.value().to_vec()),
                        ValueKind::Put => {
                            base = Some(self.merged.value().to_vec());
                            operands.clear();
                        }
                        ValueKind::Delete => {
                            base = None;
                            operands.clear();
                        }
                    }
                    newest = Some(kind);
                }
                self.merged.prev()?;
            }
            match newest {
                Some(ValueKind::Put) => {
                    self.reverse_value = base.unwrap_or_default();
                    return Ok(true);
                }
                Some(ValueKind::Merge) => {
                    let operator = self.operator.clone().ok_or_else(missing_operator)?;
                    self.reverse_value = full_merge(
                        operator.as_ref(),
                        &self.reverse_key,
                        base.as_deref(),
                        &operands,
                    )?;
                    return Ok(true);
                }
                _ => {}
            }
        }
        Ok(false)
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.advance() {
            Ok(true) => Some(Ok((
                Bytes::copy_from_slice(self.key()),
                Bytes::copy_from_slice(self.value()),
            ))),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
