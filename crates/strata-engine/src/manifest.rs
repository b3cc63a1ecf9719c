//! The manifest: a log of version edits from which recovery rebuilds the exact version,
//! including the compaction policy's saved state, without running any policy code.
//!
//! Files in a database directory:
//! - `CURRENT` names the live manifest (one line, `MANIFEST-000007`);
//! - `MANIFEST-<n>` is a log (see [`crate::log`]) of JSON-encoded [`ManifestRecord`]s; the first
//!   record of every manifest carries the format version and a snapshot of the whole version;
//! - `<n>.log` are write-ahead logs, `<n>.sst` are tables, `LOCK` is the process lock
//!   ([`crate::filename`] names and classifies them all).
//!
//! Edits are appended and synced before the version they produce is used. When the manifest
//! grows past its limit, a new one starts with a snapshot record, and `CURRENT` is switched to it
//! atomically (write a temporary file, sync, rename, sync the directory).

use crate::error::{Error, Result};
use crate::filename::{classify, manifest_file_name, FileKind, CURRENT};
use crate::fs::{FileSystem, WritableFile};
use crate::key::{SeqNo, MAX_SEQNO};
use crate::log::{LogReader, LogWriter, RecoveryMode};
use crate::stats::LifetimeStats;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_meta::{KeyRange, NextIds, Version, VersionEdit};

/// The newest manifest format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// One manifest record: an edit plus the engine's counters at the time.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ManifestRecord {
    /// Set on the first record of each manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<u32>,
    /// The version edit.
    pub edit: VersionEdit,
    /// The next file number to allocate (tables, WALs and manifests share one counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_file_number: Option<u64>,
    /// The largest sequence number whose data is in tables or in a WAL at or above `log_number`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seqno: Option<u64>,
    /// WALs below this number hold only data that is in tables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_number: Option<u64>,
    /// WALs a window flush re-logged buffered entries into (added to those of earlier
    /// records): they hold entries older than data already in tables, so point-in-time
    /// recovery must not drop them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relogged_into: Vec<u64>,
    /// Entries a window flush wrote to a table while their memtables stayed buffered (added to
    /// those of earlier records): WAL replay and later windows skip them, since a table already
    /// holds them; without this record a reopen would flush them a second time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evicted: Vec<BufferEviction>,
    /// The database's workload and costs since its creation, as of this record (replacing
    /// those of earlier records). Absent in manifests written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<LifetimeStats>,
}

/// What a window flush took out of memtables it left buffered: every entry whose user key is in
/// `range` and whose sequence number is at most `max_seq`, from WALs below `below_wal`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferEviction {
    /// The window's first and last user keys.
    pub range: KeyRange,
    /// The largest sequence number in the memtables the window was taken from.
    pub max_seq: SeqNo,
    /// One above the open WAL's number at the flush: the evicted entries are logged below it
    /// (a re-buffered memtable's entries are logged again in the WAL open at the time, which
    /// may be that one), so the record matters only while the log number is below it.
    pub below_wal: u64,
}

impl BufferEviction {
    /// Whether the entry of `user_key` at `seq` is one this eviction took out.
    pub fn covers(&self, user_key: &[u8], seq: SeqNo) -> bool {
        seq <= self.max_seq && self.range.contains(user_key)
    }
}

/// What recovery read from the manifest.
#[derive(Debug)]
pub struct Recovered {
    /// The version.
    pub version: Version,
    /// The next file number to allocate.
    pub next_file_number: u64,
    /// The last sequence number recorded.
    pub last_seqno: u64,
    /// WALs at or above this number must be replayed.
    pub log_number: u64,
    /// WALs at or above `log_number` that hold entries re-logged by window flushes.
    pub relog_wals: Vec<u64>,
    /// Window flushes' evictions from WALs at or above `log_number`.
    pub evictions: Vec<BufferEviction>,
    /// The manifest's number.
    pub manifest_number: u64,
    /// Where the manifest's tail was dropped, if the file ended inside its last record.
    pub dropped_tail: Option<(u64, String)>,
    /// The last record's [`ManifestRecord::lifetime`] (empty when none carries one).
    pub lifetime: LifetimeStats,
}

/// An edit that builds `version` from an empty tree (runs are created newest first, which the
/// placement rule of [`VersionEdit`] keeps in that order), with the files it retains for
/// references.
pub fn snapshot_edit(version: &Version) -> VersionEdit {
    let mut edit = VersionEdit::new();
    for (level, l) in version.levels().iter().enumerate() {
        for run in l.runs() {
            edit.create_run(level, run.id());
            for t in run.tables() {
                edit.add_table(level, run.id(), Arc::clone(t));
            }
        }
    }
    edit.policy = version.policy().map(str::to_string);
    edit.handover = version.in_handover().then_some(true);
    if !version.policy_state().is_empty() {
        edit.set_policy_state(version.policy_state().clone());
    }
    if version.flushes() > 0 {
        edit.set_flushes(version.flushes());
    }
    for (file, size) in version.retained_files() {
        edit.retain_file(file, size);
    }
    edit.next_ids = Some(NextIds {
        run: version.next_run_id(),
        table: version.next_table_id(),
    });
    edit
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::io(context, e)
}

/// Whether `data` is a first manifest as database creation writes it: exactly one valid record,
/// a manifest record carrying a format version. Open overwrites a `MANIFEST-000001` left without
/// `CURRENT` only if it is one (a creation that failed before installing `CURRENT`); any other
/// file under that name may be the user's.
pub fn is_first_manifest(data: &[u8]) -> bool {
    let mut reader = LogReader::new(
        data.to_vec(),
        manifest_file_name(1),
        RecoveryMode::AbsoluteConsistency,
    );
    let first = match reader.next_record() {
        Ok(Some(payload)) => payload,
        _ => return false,
    };
    matches!(reader.next_record(), Ok(None))
        && serde_json::from_slice::<ManifestRecord>(&first)
            .is_ok_and(|record| record.format_version.is_some())
}

/// Reads `CURRENT` and replays the manifest it names.
pub fn recover(fs: &dyn FileSystem, dir: &Path) -> Result<Recovered> {
    let current = fs
        .read(&dir.join(CURRENT))
        .map_err(io(format!("reading {}", dir.join(CURRENT).display())))?;
    let text = String::from_utf8_lossy(&current);
    let name = text.trim_end_matches('\n');
    let manifest_number = match classify(name) {
        Some(FileKind::Manifest(n)) => n,
        _ => {
            return Err(Error::corruption(
                CURRENT,
                0,
                format!("names {name:?}, which is not a manifest"),
            ))
        }
    };
    let data = fs
        .read(&dir.join(name))
        .map_err(io(format!("reading {}", dir.join(name).display())))?;
    // A crash while appending leaves a torn last record: its edit was never acknowledged.
    let mut reader = LogReader::new(data, name.to_string(), RecoveryMode::TolerateCorruptedTail);
    let mut version = Version::new();
    // The manifest's own number is allocated, so later files need a number above it.
    let Some(mut next_file_number) = manifest_number.checked_add(1) else {
        return Err(Error::corruption(
            CURRENT,
            0,
            format!("names {name:?}, whose number leaves no file number after it"),
        ));
    };
    let mut last_seqno = 0;
    let mut log_number = 0;
    let mut relog_wals: Vec<u64> = Vec::new();
    let mut evictions: Vec<BufferEviction> = Vec::new();
    let mut records = 0u64;
    let mut lifetime = LifetimeStats::default();
    while let Some(payload) = reader.next_record()? {
        let offset = reader.last_record_offset();
        let record: ManifestRecord = serde_json::from_slice(&payload).map_err(|e| {
            Error::corruption(name, offset, format!("record is not valid JSON: {e}"))
        })?;
        if records == 0 {
            match record.format_version {
                Some(v) if v > FORMAT_VERSION => {
                    return Err(Error::UnsupportedFormat {
                        file: name.to_string(),
                        found: v,
                        supported: FORMAT_VERSION,
                    })
                }
                Some(_) => {}
                None => {
                    return Err(Error::corruption(
                        name,
                        offset,
                        "the first record has no format version",
                    ))
                }
            }
        }
        records += 1;
        version = version
            .apply(&record.edit)
            .map_err(|e| Error::corruption(name, offset, format!("edit does not apply: {e}")))?;
        if let Some(n) = record.next_file_number {
            next_file_number = next_file_number.max(n);
        }
        if let Some(s) = record.last_seqno {
            if s > MAX_SEQNO {
                return Err(Error::corruption(
                    name,
                    offset,
                    format!(
                        "last sequence number {s} is beyond the largest sequence number \
                         {MAX_SEQNO}"
                    ),
                ));
            }
            last_seqno = last_seqno.max(s);
        }
        if let Some(n) = record.log_number {
            log_number = log_number.max(n);
        }
        relog_wals.extend(&record.relogged_into);
        evictions.extend(record.evicted);
        if let Some(l) = record.lifetime {
            lifetime = l;
        }
    }
    if records == 0 {
        return Err(Error::corruption(name, 0, "the manifest holds no record"));
    }
    // Only a record the file ends inside of is a torn write (a crash mid-append; the edit was
    // never acknowledged). A last record that is all there but fails its checksum is damage:
    // rolling its edit back silently could resurrect deleted files' versions or drop new ones.
    if let Some(damage) = reader.damage().filter(|d| !d.cut_short) {
        return Err(Error::corruption(
            name,
            damage.offset,
            format!(
                "the last record is damaged ({}); it is whole, so it is not a torn write. If \
                 the file system may have lost part of it in a power cut, cutting the file at \
                 offset {} rolls back its edit",
                damage.reason, damage.offset
            ),
        ));
    }
    Ok(Recovered {
        version,
        next_file_number,
        last_seqno,
        log_number,
        relog_wals: {
            relog_wals.retain(|&n| n >= log_number);
            relog_wals.sort_unstable();
            relog_wals.dedup();
            relog_wals
        },
        evictions: {
            evictions.retain(|e| e.below_wal > log_number);
            evictions
        },
        manifest_number,
        dropped_tail: reader.dropped_tail(),
        lifetime,
    })
}

/// The live manifest, open for appending.
pub struct Manifest {
    writer: LogWriter,
    number: u64,
    dir: PathBuf,
}

impl Manifest {
    /// Starts manifest `number` with a snapshot of `version` and the counters, then points
    /// `CURRENT` at it.
    pub fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        number: u64,
        version: &Version,
        counters: ManifestRecord,
    ) -> Result<Manifest> {
        let name = manifest_file_name(number);
        let path = dir.join(&name);
        let file: Box<dyn WritableFile> = fs
            .create(&path)
            .map_err(io(format!("creating {}", path.display())))?;
        let mut writer = LogWriter::new(file);
        let record = ManifestRecord {
            format_version: Some(FORMAT_VERSION),
            edit: snapshot_edit(version),
            ..counters
        };
        let payload = serde_json::to_vec(&record).map_err(|e| {
            Error::InvalidArgument(format!("manifest record cannot be encoded: {e}"))
        })?;
        writer
            .add_record(&payload)
            .and_then(|()| writer.sync())
            .map_err(io(format!("writing {}", path.display())))?;
        // Switch CURRENT atomically: a crash leaves either the old or the new manifest named.
        let tmp = dir.join(format!("{CURRENT}.{number}.tmp"));
        let mut f = fs
            .create(&tmp)
            .map_err(io(format!("creating {}", tmp.display())))?;
        f.append(format!("{name}\n").as_bytes())
            .and_then(|()| f.sync())
            .map_err(io(format!("writing {}", tmp.display())))?;
        drop(f);
        fs.rename(&tmp, &dir.join(CURRENT))
            .and_then(|()| fs.sync_dir(dir))
            .map_err(io(format!("installing {}", dir.join(CURRENT).display())))?;
        Ok(Manifest {
            writer,
            number,
            dir: dir.to_path_buf(),
        })
    }

    /// This manifest's number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.writer.len()
    }

    /// Appends `record` and syncs it.
    pub fn append(&mut self, record: &ManifestRecord) -> Result<()> {
        let payload = serde_json::to_vec(record).map_err(|e| {
            Error::InvalidArgument(format!("manifest record cannot be encoded: {e}"))
        })?;
        let path = self.dir.join(manifest_file_name(self.number));
        self.writer
            .add_record(&payload)
            .and_then(|()| self.writer.sync())
            .map_err(io(format!("appending to {}", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;

    /// A database directory on a `MemFs` whose `CURRENT` names manifest `number`, holding
    /// `records` (JSON) as log records.
    fn dir_with(number: u64, records: &[&str]) -> MemFs {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        let write = |name: &str, bytes: &[u8]| {
            let mut f = fs.create(&dir.join(name)).unwrap();
            f.append(bytes).unwrap();
            f.sync().unwrap();
        };
        fs.create_dir_all(dir).unwrap();
        let name = manifest_file_name(number);
        write(CURRENT, format!("{name}\n").as_bytes());
        let mut log = LogWriter::new(fs.create(&dir.join(&name)).unwrap());
        for r in records {
            log.add_record(r.as_bytes()).unwrap();
        }
        log.sync().unwrap();
        fs
    }

    fn corruption_reason(result: Result<Recovered>) -> String {
        match result {
            Err(Error::Corruption { reason, .. }) => reason,
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    const FIRST: &str = r#"{"format_version":1,"edit":{"deleted":[],"new_runs":[],"added":[]}}"#;

    #[test]
    fn recovers_counters() {
        let fs = dir_with(
            3,
            &[
                FIRST,
                r#"{"edit":{"deleted":[],"new_runs":[],"added":[]},"next_file_number":9,"last_seqno":41,"log_number":5}"#,
            ],
        );
        let r = recover(&fs, Path::new("/db")).unwrap();
        assert_eq!(
            (
                r.manifest_number,
                r.next_file_number,
                r.last_seqno,
                r.log_number
            ),
            (3, 9, 41, 5)
        );
    }

    /// Found by the `manifest_decoder` fuzz target (minimized: eight 0xff bytes, read as the
    /// manifest number that `CURRENT` names): `manifest_number + 1` overflowed.
    #[test]
    fn current_naming_the_last_file_number_is_corruption() {
        let fs = dir_with(u64::MAX, &[FIRST]);
        let reason = corruption_reason(recover(&fs, Path::new("/db")));
        assert!(
            reason.contains("leaves no file number after it"),
            "{reason}"
        );
        let fs = dir_with(u64::MAX - 1, &[FIRST]);
        assert_eq!(
            recover(&fs, Path::new("/db")).unwrap().next_file_number,
            u64::MAX
        );
    }

    /// A last sequence number the engine cannot represent (its sequence field has 56 bits) is
    /// damage, not a counter to resume from.
    #[test]
    fn last_seqno_beyond_the_largest_is_corruption() {
        let at_max = format!(
            r#"{{"edit":{{"deleted":[],"new_runs":[],"added":[]}},"last_seqno":{MAX_SEQNO}}}"#
        );
        let fs = dir_with(1, &[FIRST, &at_max]);
        assert_eq!(
            recover(&fs, Path::new("/db")).unwrap().last_seqno,
            MAX_SEQNO
        );
        let beyond = at_max.replace(&MAX_SEQNO.to_string(), &(MAX_SEQNO + 1).to_string());
        let fs = dir_with(1, &[FIRST, &beyond]);
        let reason = corruption_reason(recover(&fs, Path::new("/db")));
        assert!(
            reason.contains("beyond the largest sequence number"),
            "{reason}"
        );
    }
}
