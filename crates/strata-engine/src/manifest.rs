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
use crate::keyspace::KeyspaceId;
use crate::log::{LogReader, LogWriter, RecoveryMode};
use crate::stats::LifetimeStats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_meta::{KeyRange, NextIds, Version, VersionEdit};

/// The newest manifest format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// One manifest record: an edit plus the engine's counters at the time. The edit, the log
/// number, the re-logged WALs, the evictions and the statistics are about one keyspace
/// (`keyspace`); the file number and the sequence number are the database's.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ManifestRecord {
    /// Set on the first record of each manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<u32>,
    /// The keyspace the record is about; absent for the default keyspace (so manifests of
    /// databases without keyspaces read as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyspace: Option<KeyspaceId>,
    /// Creates `keyspace` with this definition; the record's edit is its first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_keyspace: Option<KeyspaceDefinition>,
    /// Drops `keyspace`: its tables become obsolete and its WAL entries are skipped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drop_keyspace: bool,
    /// The number the next keyspace created gets (on each manifest's first record, and with
    /// each creation): numbers are never reused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_keyspace_id: Option<u32>,
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
    /// A decision of the autopilot ([`crate::Options::with_autopilot`]), with its inputs,
    /// candidates and predictions: a record of what it did and why, which recovery does not
    /// need (a switch it made is the next record's policy change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autopilot: Option<strata_policy::autopilot::Decision>,
    /// Samples of when sequence numbers were written, for a TTL (`crate::ttl`): `(s, t)`
    /// says every sequence number up to `s` was written by Unix second `t`. New ones with each
    /// flush's record, all of them in a new manifest's first record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seqno_times: Vec<(u64, u64)>,
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

/// What a manifest records to rebuild a keyspace besides its version: its name and the
/// options set for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyspaceDefinition {
    /// Its name, unique among the database's live keyspaces.
    pub name: String,
    /// Options set for the keyspace (name → value); the database's apply to the others.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

/// The name of the default keyspace, which every database has.
pub const DEFAULT_KEYSPACE_NAME: &str = "default";

/// One keyspace as the manifest records it.
#[derive(Clone, Debug)]
pub struct RecoveredKeyspace {
    /// Its name and options.
    pub definition: KeyspaceDefinition,
    /// The version.
    pub version: Version,
    /// WALs at or above this number hold its entries that are not in its tables.
    pub log_number: u64,
    /// WALs at or above `log_number` that hold entries re-logged by window flushes.
    pub relog_wals: Vec<u64>,
    /// Window flushes' evictions from WALs at or above `log_number`.
    pub evictions: Vec<BufferEviction>,
    /// What the keyspace did before (the last statistics recorded).
    pub lifetime: LifetimeStats,
}

impl RecoveredKeyspace {
    /// A keyspace with nothing recorded yet but its definition.
    pub fn new(definition: KeyspaceDefinition) -> Self {
        RecoveredKeyspace {
            definition,
            version: Version::new(),
            log_number: 0,
            relog_wals: Vec::new(),
            evictions: Vec::new(),
            lifetime: LifetimeStats::default(),
        }
    }

    /// The default keyspace of a new database.
    pub fn new_default() -> Self {
        Self::new(KeyspaceDefinition {
            name: DEFAULT_KEYSPACE_NAME.to_string(),
            options: BTreeMap::new(),
        })
    }

    /// The record that carries this keyspace into a new manifest: its definition (unless it is
    /// the default keyspace), a snapshot of its version, its WAL state and statistics.
    pub fn snapshot_record(&self, id: KeyspaceId) -> ManifestRecord {
        KeyspaceSnapshot {
            id,
            definition: &self.definition,
            version: &self.version,
            log_number: self.log_number,
            relog_wals: self.relog_wals.clone(),
            evictions: self.evictions.clone(),
            lifetime: self.lifetime.clone(),
        }
        .record()
    }
}

/// A keyspace's state as a new manifest records it (see [`RecoveredKeyspace::snapshot_record`]),
/// borrowed from wherever it lives.
pub struct KeyspaceSnapshot<'a> {
    /// The keyspace.
    pub id: KeyspaceId,
    /// Its definition.
    pub definition: &'a KeyspaceDefinition,
    /// Its version.
    pub version: &'a Version,
    /// Its log number.
    pub log_number: u64,
    /// WALs at or above the log number holding re-logged entries.
    pub relog_wals: Vec<u64>,
    /// Evictions from WALs at or above the log number.
    pub evictions: Vec<BufferEviction>,
    /// Its statistics.
    pub lifetime: LifetimeStats,
}

impl KeyspaceSnapshot<'_> {
    /// The record: for the default keyspace, one that reads as a manifest before keyspaces did.
    pub fn record(self) -> ManifestRecord {
        let default = self.id == KeyspaceId::DEFAULT;
        ManifestRecord {
            keyspace: (!default).then_some(self.id),
            create_keyspace: (!default).then(|| self.definition.clone()),
            edit: snapshot_edit(self.version),
            log_number: Some(self.log_number),
            relogged_into: self.relog_wals,
            evicted: self.evictions,
            lifetime: Some(self.lifetime),
            ..ManifestRecord::default()
        }
    }
}

/// The database's counters, which a new manifest's first record carries.
#[derive(Clone, Debug)]
pub struct Counters {
    /// The next file number to allocate.
    pub next_file_number: u64,
    /// The last sequence number whose data is in tables or in the WALs the keyspaces' log
    /// numbers keep.
    pub last_seqno: u64,
    /// The number the next keyspace created gets.
    pub next_keyspace_id: u32,
    /// When sequence numbers were written ([`ManifestRecord::seqno_times`]).
    pub seqno_times: Vec<(u64, u64)>,
}

/// What recovery read from the manifest.
#[derive(Debug)]
pub struct Recovered {
    /// Every live keyspace, the default one always.
    pub keyspaces: BTreeMap<KeyspaceId, RecoveredKeyspace>,
    /// The number the next keyspace created gets.
    pub next_keyspace_id: u32,
    /// The next file number to allocate.
    pub next_file_number: u64,
    /// The last sequence number recorded.
    pub last_seqno: u64,
    /// When sequence numbers were written ([`ManifestRecord::seqno_times`]), ascending.
    pub seqno_times: Vec<(u64, u64)>,
    /// The manifest's number.
    pub manifest_number: u64,
    /// Where the manifest's tail was dropped, if the file ended inside its last record.
    pub dropped_tail: Option<(u64, String)>,
}

impl Recovered {
    /// The default keyspace.
    pub fn default_keyspace(&self) -> &RecoveredKeyspace {
        &self.keyspaces[&KeyspaceId::DEFAULT]
    }

    /// The first WAL some keyspace needs replayed: the smallest log number.
    pub fn log_number(&self) -> u64 {
        self.keyspaces
            .values()
            .map(|k| k.log_number)
            .min()
            .unwrap_or(0)
    }

    /// Every stored table file of every keyspace, with its size and whether it is a table of
    /// the version (rather than a file kept for the blocks tables refer to).
    pub fn stored_files(&self) -> impl Iterator<Item = (strata_meta::TableId, u64, bool)> + '_ {
        self.keyspaces
            .values()
            .flat_map(|k| k.version.stored_files())
    }
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
    let mut keyspaces = BTreeMap::from([(KeyspaceId::DEFAULT, RecoveredKeyspace::new_default())]);
    let mut next_keyspace_id = 1u32;
    // The manifest's own number is allocated, so later files need a number above it.
    let Some(mut next_file_number) = manifest_number.checked_add(1) else {
        return Err(Error::corruption(
            CURRENT,
            0,
            format!("names {name:?}, whose number leaves no file number after it"),
        ));
    };
    let mut last_seqno = 0;
    let mut seqno_times: Vec<(u64, u64)> = Vec::new();
    let mut records = 0u64;
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
        let corrupt = |why: String| Error::corruption(name, offset, why);
        let id = record.keyspace.unwrap_or(KeyspaceId::DEFAULT);
        if let Some(n) = record.next_keyspace_id {
            next_keyspace_id = next_keyspace_id.max(n);
        }
        if let Some(definition) = &record.create_keyspace {
            if id == KeyspaceId::DEFAULT || keyspaces.contains_key(&id) {
                return Err(corrupt(format!("creates keyspace {}, which exists", id.0)));
            }
            if keyspaces
                .values()
                .any(|k| k.definition.name == definition.name)
            {
                return Err(corrupt(format!(
                    "creates a second keyspace named {:?}",
                    definition.name
                )));
            }
            keyspaces.insert(id, RecoveredKeyspace::new(definition.clone()));
            next_keyspace_id = next_keyspace_id.max(id.0.saturating_add(1));
        }
        if record.drop_keyspace {
            if id == KeyspaceId::DEFAULT || keyspaces.remove(&id).is_none() {
                return Err(corrupt(format!(
                    "drops keyspace {}, which is not a live keyspace one may drop",
                    id.0
                )));
            }
            continue;
        }
        let Some(keyspace) = keyspaces.get_mut(&id) else {
            return Err(corrupt(format!(
                "is about keyspace {}, which no earlier record creates",
                id.0
            )));
        };
        keyspace.version = keyspace
            .version
            .apply(&record.edit)
            .map_err(|e| corrupt(format!("edit does not apply: {e}")))?;
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
            keyspace.log_number = keyspace.log_number.max(n);
        }
        keyspace.relog_wals.extend(&record.relogged_into);
        keyspace.evictions.extend(record.evicted);
        if let Some(l) = record.lifetime {
            keyspace.lifetime = l;
        }
        seqno_times.extend(record.seqno_times);
    }
    seqno_times.sort_unstable();
    seqno_times.dedup_by_key(|s| s.0);
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
    for keyspace in keyspaces.values_mut() {
        let log_number = keyspace.log_number;
        keyspace.relog_wals.retain(|&n| n >= log_number);
        keyspace.relog_wals.sort_unstable();
        keyspace.relog_wals.dedup();
        keyspace.evictions.retain(|e| e.below_wal > log_number);
    }
    Ok(Recovered {
        keyspaces,
        next_keyspace_id,
        next_file_number,
        last_seqno,
        seqno_times,
        manifest_number,
        dropped_tail: reader.dropped_tail(),
    })
}

/// The live manifest, open for appending.
pub struct Manifest {
    writer: LogWriter,
    number: u64,
    dir: PathBuf,
}

impl Manifest {
    /// Starts manifest `number` with `records` (snapshots of every keyspace, see
    /// [`KeyspaceSnapshot::record`]; the default keyspace's goes first, with the database's
    /// `counters` on it), then points `CURRENT` at it.
    pub fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        number: u64,
        mut records: Vec<ManifestRecord>,
        mut counters: Counters,
    ) -> Result<Manifest> {
        // The default keyspace's record first (`keyspace` absent sorts first).
        records.sort_by_key(|r| r.keyspace);
        let name = manifest_file_name(number);
        let path = dir.join(&name);
        let file: Box<dyn WritableFile> = fs
            .create(&path)
            .map_err(io(format!("creating {}", path.display())))?;
        let mut writer = LogWriter::new(file);
        for (i, mut record) in records.into_iter().enumerate() {
            if i == 0 {
                // A manifest's first record is the default keyspace's, so that a build without
                // keyspaces reads a manifest of a database that has none.
                record.format_version = Some(FORMAT_VERSION);
                record.next_file_number = Some(counters.next_file_number);
                record.last_seqno = Some(counters.last_seqno);
                record.seqno_times = std::mem::take(&mut counters.seqno_times);
                record.next_keyspace_id =
                    (counters.next_keyspace_id > 1).then_some(counters.next_keyspace_id);
            }
            let payload = serde_json::to_vec(&record).map_err(|e| {
                Error::InvalidArgument(format!("manifest record cannot be encoded: {e}"))
            })?;
            writer
                .add_record(&payload)
                .map_err(io(format!("writing {}", path.display())))?;
        }
        writer
            .sync()
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
                r.log_number()
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

    const EMPTY_EDIT: &str = r#""edit":{"deleted":[],"new_runs":[],"added":[]}"#;

    fn record(fields: &str) -> String {
        format!("{{{EMPTY_EDIT}{fields}}}")
    }

    #[test]
    fn keyspaces_are_created_recorded_and_dropped() {
        let create = |id: u32, name: &str| {
            record(&format!(
                r#","keyspace":{id},"create_keyspace":{{"name":"{name}","options":{{"write_buffer_size":"4MiB"}}}}"#
            ))
        };
        let fs = dir_with(
            2,
            &[
                FIRST,
                &create(1, "events"),
                &create(2, "users"),
                &record(r#","keyspace":2,"log_number":7"#),
                &record(r#","log_number":5"#),
                &record(r#","keyspace":1,"drop_keyspace":true"#),
            ],
        );
        let r = recover(&fs, Path::new("/db")).unwrap();
        let live: Vec<(u32, &str)> = r
            .keyspaces
            .iter()
            .map(|(id, k)| (id.0, k.definition.name.as_str()))
            .collect();
        assert_eq!(live, vec![(0, DEFAULT_KEYSPACE_NAME), (2, "users")]);
        assert_eq!(
            r.next_keyspace_id, 3,
            "a dropped keyspace's number is not reused"
        );
        let users = &r.keyspaces[&KeyspaceId(2)];
        assert_eq!(users.log_number, 7);
        assert_eq!(users.definition.options["write_buffer_size"], "4MiB");
        assert_eq!((r.default_keyspace().log_number, r.log_number()), (5, 5));
    }

    #[test]
    fn a_record_about_a_keyspace_no_record_created_is_corruption() {
        let cases = [
            (
                record(r#","keyspace":4,"log_number":7"#),
                "no earlier record creates",
            ),
            (
                record(r#","keyspace":1,"drop_keyspace":true"#),
                "not a live keyspace",
            ),
            (record(r#","drop_keyspace":true"#), "not a live keyspace"),
            (
                record(r#","create_keyspace":{"name":"x"}"#),
                "creates keyspace 0, which exists",
            ),
        ];
        for (bad, expected) in cases {
            let fs = dir_with(1, &[FIRST, &bad]);
            let reason = corruption_reason(recover(&fs, Path::new("/db")));
            assert!(reason.contains(expected), "{bad}: {reason}");
        }
        let twice = record(r#","keyspace":1,"create_keyspace":{"name":"a"}"#);
        let again = record(r#","keyspace":2,"create_keyspace":{"name":"a"}"#);
        let fs = dir_with(1, &[FIRST, &twice, &again]);
        let reason = corruption_reason(recover(&fs, Path::new("/db")));
        assert!(reason.contains("second keyspace named"), "{reason}");
    }

    /// A new manifest holds every keyspace, the default one first with the counters, and
    /// recovers to the same keyspaces.
    #[test]
    fn snapshots_of_every_keyspace_start_a_new_manifest() {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let mut users = RecoveredKeyspace::new(KeyspaceDefinition {
            name: "users".to_string(),
            options: BTreeMap::new(),
        });
        users.log_number = 9;
        let keyspaces = BTreeMap::from([
            (KeyspaceId(3), users),
            (KeyspaceId::DEFAULT, RecoveredKeyspace::new_default()),
        ]);
        let records = keyspaces
            .iter()
            .rev()
            .map(|(&id, k)| k.snapshot_record(id))
            .collect();
        let counters = Counters {
            next_file_number: 12,
            last_seqno: 40,
            next_keyspace_id: 5,
            seqno_times: vec![(40, 1_700_000_000)],
        };
        Manifest::create(&fs, dir, 11, records, counters).unwrap();
        let r = recover(&fs, dir).unwrap();
        assert_eq!(r.keyspaces.len(), 2);
        assert_eq!(r.keyspaces[&KeyspaceId(3)].definition.name, "users");
        assert_eq!(r.keyspaces[&KeyspaceId(3)].log_number, 9);
        assert_eq!(
            (r.next_keyspace_id, r.next_file_number, r.last_seqno),
            (5, 12, 40)
        );
    }
}
