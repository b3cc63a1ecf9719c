//! The simulated device's file events: tables and WALs created, appended and deleted, as the
//! FTL model ([`crate::ftl`]) replays them.

use super::Simulator;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use strata_exec::file_event::FileEvent;
use strata_meta::{TableId, TableMeta, Version, VersionEdit};

/// Bytes gathered into one append event, of a WAL or of a running job's tables (what the
/// engine hands the device at once is smaller, but pages fill the same way).
const APPEND_CHUNK: u64 = 64 << 10;

/// File numbers of the simulated WALs start here, above every table id.
const FIRST_WAL_FILE: u64 = 1 << 62;

/// The simulated device's files: tables, written when installed and deleted when no version
/// needs them, and one WAL per buffer, deleted at its flush.
pub(super) struct FileRecorder {
    sink: Box<dyn FnMut(FileEvent) + Send>,
    /// Table files written and not deleted.
    live: HashSet<u64>,
    /// Of those, files the version no longer holds but still needs for references.
    retained: HashSet<u64>,
    wal: Option<u64>,
    next_wal: u64,
    /// WAL bytes not yet emitted.
    wal_pending: u64,
    /// Tables of running jobs being written: bytes appended so far.
    writing: HashMap<u64, u64>,
}

impl FileRecorder {
    pub(super) fn log(&mut self, bytes: u64) {
        let wal = match self.wal {
            Some(w) => w,
            None => {
                let w = FIRST_WAL_FILE + self.next_wal;
                self.next_wal += 1;
                (self.sink)(FileEvent::Create(w));
                self.wal = Some(w);
                w
            }
        };
        self.wal_pending += bytes;
        if self.wal_pending >= APPEND_CHUNK {
            (self.sink)(FileEvent::Append(wal, self.wal_pending));
            self.wal_pending = 0;
        }
    }

    /// The buffer is being flushed: its WAL goes.
    pub(super) fn end_wal(&mut self) {
        if let Some(wal) = self.wal.take() {
            if self.wal_pending > 0 {
                (self.sink)(FileEvent::Append(wal, self.wal_pending));
                self.wal_pending = 0;
            }
            (self.sink)(FileEvent::Delete(wal));
        }
    }

    /// A running job has written `emitted` of its outputs' bytes, tables in order; appends
    /// what is new, 64 KiB at a time at least.
    pub(super) fn progress(
        &mut self,
        outputs: &[(TableMeta, Arc<[u64]>)],
        emitted: &mut u64,
        target: u64,
    ) {
        if target < *emitted + APPEND_CHUNK && target < outputs.iter().map(|o| o.0.size).sum() {
            return;
        }
        let mut start = 0u64;
        for (meta, _) in outputs {
            let (id, size) = (meta.id.0, meta.size);
            let end = start + size;
            if *emitted < end && target > start {
                let written = self.writing.get(&id).copied();
                if written.is_none() {
                    (self.sink)(FileEvent::Create(id));
                }
                let now = target.min(end) - start;
                let before = written.unwrap_or(0);
                if now > before {
                    (self.sink)(FileEvent::Append(id, now - before));
                }
                self.writing.insert(id, now);
            }
            start = end;
        }
        *emitted = target.max(*emitted);
    }

    pub(super) fn installed(&mut self, version: &Version, edit: &VersionEdit) {
        for added in &edit.added {
            let id = added.table.id.0;
            if !self.live.insert(id) {
                continue; // a move: the file stays where it is
            }
            match self.writing.remove(&id) {
                Some(written) => {
                    if added.table.size > written {
                        (self.sink)(FileEvent::Append(id, added.table.size - written));
                    }
                }
                None => {
                    (self.sink)(FileEvent::Create(id));
                    (self.sink)(FileEvent::Append(id, added.table.size));
                }
            }
        }
        let candidates: Vec<u64> = edit
            .deleted
            .iter()
            .map(|d| d.table.0)
            .chain(self.retained.iter().copied())
            .collect();
        for id in candidates {
            if version.table_location(TableId(id)).is_some() {
                continue;
            }
            if version.needs_file(TableId(id)) {
                self.retained.insert(id);
            } else if self.live.remove(&id) {
                self.retained.remove(&id);
                (self.sink)(FileEvent::Delete(id));
            }
        }
    }
}

impl Simulator {
    /// Sends the device's file events to `sink`: each table written when a job installs it
    /// (created, then appended whole) and deleted once no version needs its file, and one WAL
    /// per buffer, appended 64 KiB at a time and deleted at the buffer's flush. The FTL model
    /// ([`crate::ftl`]) replays them; the engine records the same events through
    /// `strata_engine::fs::RecordingFs`.
    pub fn with_file_sink(mut self, sink: impl FnMut(FileEvent) + Send + 'static) -> Self {
        self.files = Some(FileRecorder {
            sink: Box::new(sink),
            live: HashSet::new(),
            retained: HashSet::new(),
            wal: None,
            next_wal: 0,
            wal_pending: 0,
            writing: HashMap::new(),
        });
        self
    }
}
