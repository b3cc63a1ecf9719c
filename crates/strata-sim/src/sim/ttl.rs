//! A time to live in the simulator ([`SimConfig::ttl_seconds`]), by the engine's rules: every
//! write is dated by the shared sample map ([`SeqnoTimeLog`]) on the simulated clock, each
//! entry keeps its sequence number, compactions drop the versions the TTL expired, and the
//! shared pick loop drops or rewrites expired tables (`strata_exec::pick`).
//!
//! The simulator's arrays hold keys, not sequence numbers, so the numbers live beside them:
//! one array per table, parallel to its entries, and one beside the buffer. A merge writes, of
//! each key, the newest version among its inputs, so the numbers it needs are those of the
//! newest versions ([`InputAges`]); the engine drops an expired version and every older one,
//! which is older still, so dropping the newest version where it expired is the same rule.
//!
//! [`SimConfig::ttl_seconds`]: super::SimConfig::ttl_seconds

use super::{SimError, Simulator, Timing};
use crate::keys::key_of;
use std::collections::HashMap;
use std::sync::Arc;
use strata_exec::range_del::RangeTombstone;
use strata_exec::seqno_time::periodic_age;
use strata_meta::{Bytes, SeqRange, TableId, TableMeta};

/// The sequence number of each key's newest version among a merge's inputs, and the bound at
/// or below which versions have expired.
pub(super) struct InputAges {
    seqnos: HashMap<u64, u64>,
    expired_through: u64,
}

impl InputAges {
    /// Whether the newest version of `key` among the inputs has expired.
    pub(super) fn expired(&self, key: u64) -> bool {
        self.seqnos
            .get(&key)
            .is_some_and(|&seq| seq <= self.expired_through)
    }

    /// The sequence number of the newest version of `key` among the inputs.
    fn seqno(&self, key: u64) -> u64 {
        self.seqnos.get(&key).copied().unwrap_or_default()
    }
}

impl Simulator {
    /// Lets `seconds` pass without a write: the clock a TTL ages entries by moves on (in timed
    /// mode, running jobs finish meanwhile), and the work that expiry makes possible runs.
    pub fn pass_time(&mut self, seconds: f64) -> Result<(), SimError> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(SimError::Config(format!(
                "time can pass only by a finite, non-negative number of seconds, not {seconds}"
            )));
        }
        match self.cfg.timing {
            Timing::Timed { .. } => self.advance_to(self.now + seconds)?,
            Timing::Synchronous => self.clock_offset += seconds,
        }
        self.schedule()
    }

    /// The whole second the simulated clock reads.
    fn clock_second(&self) -> u64 {
        (self.now + self.clock_offset).floor() as u64
    }

    /// Whether entries keep their sequence numbers and writes are dated: with a TTL.
    pub(super) fn keeps_seqnos(&self) -> bool {
        self.cfg.ttl_seconds.is_some()
    }

    /// Gives the next write its sequence number, dated on the simulated clock when a TTL is
    /// set.
    pub(super) fn next_seqno(&mut self) -> u64 {
        self.seqno += 1;
        if self.keeps_seqnos() {
            let second = self.clock_second();
            self.seqno_times.note(self.seqno, second);
        }
        self.seqno
    }

    /// The largest sequence number the TTL has expired (0: none, or no TTL).
    pub(super) fn expired_now(&self) -> u64 {
        self.cfg.ttl_seconds.map_or(0, |ttl| {
            self.seqno_times.expired_through(self.clock_second(), ttl)
        })
    }

    /// The largest sequence number expired a periodic-compaction period ago (0: none).
    pub(super) fn periodic_now(&self) -> u64 {
        periodic_age(self.cfg.ttl_seconds, self.cfg.periodic_compaction_seconds).map_or(0, |age| {
            self.seqno_times.expired_through(self.clock_second(), age)
        })
    }

    /// The ages of a compaction's inputs, `runs` newest first, against `expired_through`
    /// (`None` without a TTL).
    pub(super) fn table_ages(
        &self,
        runs: &[Vec<Arc<TableMeta>>],
        expired_through: u64,
    ) -> Result<Option<InputAges>, SimError> {
        if !self.keeps_seqnos() {
            return Ok(None);
        }
        let mut ages = InputAges {
            seqnos: HashMap::new(),
            expired_through,
        };
        self.note_older_tables(Some(&mut ages), runs.iter().flatten())?;
        Ok(Some(ages))
    }

    /// The ages of a flush's buffer: its entries `raw` in arrival order with their sequence
    /// numbers `seqnos` (`None` without a TTL). Flushes drop nothing by age, as the engine's
    /// do; the ages only date the tables they write.
    pub(super) fn buffer_ages(&self, raw: &[u64], seqnos: &[u64]) -> Option<InputAges> {
        if !self.keeps_seqnos() {
            return None;
        }
        let mut ages = InputAges {
            seqnos: HashMap::new(),
            expired_through: 0,
        };
        // Arrival order: a later arrival of a key replaces an earlier one.
        for (&e, &seq) in raw.iter().zip(seqnos) {
            ages.seqnos.insert(key_of(e), seq);
        }
        Some(ages)
    }

    /// Adds to `ages` the entries of `tables`, given newest run first, each older than
    /// everything noted before it.
    pub(super) fn note_older_tables<'a>(
        &self,
        ages: Option<&mut InputAges>,
        tables: impl Iterator<Item = &'a Arc<TableMeta>>,
    ) -> Result<(), SimError> {
        let Some(ages) = ages else {
            return Ok(());
        };
        for table in tables {
            let entries = self.table_array(table.id)?;
            for (&e, &seq) in entries.iter().zip(self.table_seqnos(table.id)?) {
                ages.seqnos.entry(key_of(e)).or_insert(seq);
            }
        }
        Ok(())
    }

    /// The sequence numbers of a table's entries.
    fn table_seqnos(&self, id: TableId) -> Result<&[u64], SimError> {
        self.table_seqnos.get(&id).map(|s| &s[..]).ok_or_else(|| {
            SimError::Config(format!("table {id} has no simulated sequence numbers"))
        })
    }

    /// Keeps the sequence numbers of new table `id`, holding `entries` and `ranges`, from
    /// `ages`, and returns the range they span: the engine's table properties. `fallback`
    /// (the job's whole range) without ages.
    pub(super) fn date_table(
        &mut self,
        id: TableId,
        entries: &[u64],
        ranges: &[RangeTombstone<Bytes>],
        ages: Option<&InputAges>,
        fallback: SeqRange,
    ) -> SeqRange {
        let Some(ages) = ages else {
            return fallback;
        };
        let seqnos: Arc<[u64]> = entries.iter().map(|&e| ages.seqno(key_of(e))).collect();
        let all = seqnos.iter().copied().chain(ranges.iter().map(|r| r.seq));
        let span = match all.clone().min().zip(all.max()) {
            Some((smallest, largest)) => SeqRange { smallest, largest },
            None => SeqRange::default(),
        };
        self.table_seqnos.insert(id, seqnos);
        span
    }

    /// Sequence numbers of the buffer's `kept` entries, those a window flush leaves buffered.
    pub(super) fn keep_buffer_seqnos(&mut self, kept: &[u64], ages: Option<&InputAges>) {
        if let Some(ages) = ages {
            self.buffer_entry_seqnos = kept.iter().map(|&e| ages.seqno(key_of(e))).collect();
        }
    }

    /// Scale mode: drops, beside every array `halve_sample` thins, the sequence numbers of
    /// the entries `kept` does not keep. Runs before the arrays are thinned.
    pub(super) fn thin_seqnos(&mut self, kept: impl Fn(u64) -> bool) {
        if !self.keeps_seqnos() {
            return;
        }
        let thin = |entries: &[u64], seqnos: &[u64]| -> Arc<[u64]> {
            entries
                .iter()
                .zip(seqnos)
                .filter(|&(&e, _)| kept(e))
                .map(|(_, &s)| s)
                .collect()
        };
        let arrays = self.tables.iter().map(|(id, a)| (*id, a)).chain(
            self.running
                .iter()
                .flat_map(|j| j.outputs.iter().map(|(m, a)| (m.id, a))),
        );
        for (id, entries) in arrays {
            if let Some(seqnos) = self.table_seqnos.get_mut(&id) {
                *seqnos = thin(entries, seqnos);
            }
        }
        self.buffer_entry_seqnos = thin(&self.buffer, &self.buffer_entry_seqnos).to_vec();
    }
}
