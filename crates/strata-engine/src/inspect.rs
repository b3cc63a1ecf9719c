//! Offline inspection (`strata inspect`): what a database directory's manifest records, and what
//! one table or WAL file holds, read and checked the way recovery and reads check them. RocksDB's
//! `ldb manifest_dump`, `sst_dump` and `ldb dump_wal` in one place.
//!
//! Nothing is written and no lock is taken: run it on a database no process has open (on an open
//! one it reads a moment's state, which later edits may already have changed). DamageReport comes back
//! as [`Error::Corruption`] naming the file and the offset, never as a panic; a table or WAL whose
//! structure opens but whose contents fail a check is described as far as it reads, with the
//! failure in [`TableInspection::damage`] or [`WalInspection::damage`].

use crate::batch::{replay_wal_payload, BatchOp};
use crate::error::{Error, Result};
use crate::filename;
use crate::filename::FileKind;
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, ValueKind};
use crate::log::{LogReader, RecoveryMode};
use crate::manifest::{self, ManifestRecord};
use crate::stats::{LifetimeStats, Statistics};
use crate::table::{Table, TableLayout, TableProperties};
use crate::table_cache::TableCache;
use crate::wal_chain;
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use strata_meta::{TableId, Version};

/// A key or value for people: printable ASCII as it is, other bytes as `\xNN` (a backslash as
/// `\\`), so that the text names the bytes exactly.
pub fn printable(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// What went wrong where: the file, the offset in it and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DamageReport {
    /// The damaged file's name.
    pub file: String,
    /// Offset of the damage in it.
    pub offset: u64,
    /// What was wrong.
    pub reason: String,
}

impl std::fmt::Display for DamageReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at offset {}: {}",
            self.file, self.offset, self.reason
        )
    }
}

impl DamageReport {
    /// The damage as the error it is.
    pub fn into_error(self) -> Error {
        Error::Corruption {
            file: self.file,
            offset: self.offset,
            reason: self.reason,
        }
    }

    fn of(error: &Error) -> DamageReport {
        match error {
            Error::Corruption {
                file,
                offset,
                reason,
            } => DamageReport {
                file: file.clone(),
                offset: *offset,
                reason: reason.clone(),
            },
            other => DamageReport {
                file: String::new(),
                offset: 0,
                reason: other.to_string(),
            },
        }
    }
}

/// A database directory as its manifest and files describe it ([`inspect_db`]).
#[derive(Clone, Debug, Serialize)]
pub struct DbInspection {
    /// The live manifest's file name.
    pub manifest: String,
    /// Its size in bytes and records.
    pub manifest_bytes: u64,
    /// Records in it.
    pub manifest_records: u64,
    /// Where its last record was dropped as a torn write, and why.
    pub manifest_torn_tail: Option<String>,
    /// The next file number the database hands out.
    pub next_file_number: u64,
    /// The last sequence number recorded in tables or in WALs to replay.
    pub last_seqno: u64,
    /// WALs from this number on are replayed at open.
    pub log_number: u64,
    /// Flushes installed since the database was created.
    pub flushes: u64,
    /// What the database did since its creation, as of the manifest's last record: its
    /// workload and its write amplification.
    pub lifetime: LifetimeStats,
    /// The policy the database records (the last one its tree was handed to), as a
    /// specification with every option.
    pub policy: Option<String>,
    /// Whether a handover to it is under way ([`strata_meta::Version::in_handover`]).
    pub in_handover: bool,
    /// The compaction policy's saved state, as JSON (`null` when never set).
    pub policy_state: serde_json::Value,
    /// The tree, shallowest level first.
    pub levels: Vec<LevelInspection>,
    /// Every table's bytes, and the bytes of files kept only for blocks tables refer to.
    pub table_bytes: u64,
    /// Bytes of files kept for referred blocks (in `table_bytes`).
    pub retained_bytes: u64,
    /// Entries and tombstones of every table.
    pub entries: u64,
    /// Tombstones of every table.
    pub tombstones: u64,
    /// Sorted runs and tables.
    pub runs: usize,
    /// Tables.
    pub tables: usize,
    /// The WALs in the directory: number, bytes, and whether open replays it.
    pub wals: Vec<WalFileSummary>,
    /// Files the manifest needs that are missing, of another size or (when verified) damaged:
    /// the database does not open, or fails reads, until they are repaired.
    pub damage: Vec<DamageReport>,
    /// Files of ours the manifest does not need: left by a crash, deleted by the next open.
    pub leftovers: Vec<String>,
    /// Whether every table file was read and checked ([`inspect_db`]'s `verify`).
    pub verified: bool,
    /// The live data, when scanned ([`inspect_db`]'s `scan`): what space amplification
    /// divides by.
    pub live: Option<LiveData>,
    /// The manifest's records, oldest first (only when asked for).
    pub history: Vec<EditSummary>,
    /// The autopilot's decisions the manifest records, oldest first (a new manifest starts
    /// without those of the one it replaced).
    pub autopilot: Vec<strata_policy::autopilot::Decision>,
    /// Every keyspace, the default one first (the fields above describe the default one's
    /// tree; damage and leftovers are the whole directory's).
    pub keyspaces: Vec<KeyspaceInspection>,
}

/// One keyspace of [`DbInspection`].
#[derive(Clone, Debug, Serialize)]
pub struct KeyspaceInspection {
    /// Its number.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// The options set for it ([`crate::KeyspaceOptions`]).
    pub options: std::collections::BTreeMap<String, String>,
    /// The policy its version records.
    pub policy: Option<String>,
    /// WALs at or above this number hold its entries not in its tables.
    pub log_number: u64,
    /// Runs in its version.
    pub runs: usize,
    /// Tables in its version.
    pub tables: usize,
    /// Bytes of its tables.
    pub table_bytes: u64,
}

/// One level of [`DbInspection`].
#[derive(Clone, Debug, Serialize)]
pub struct LevelInspection {
    /// The level number.
    pub level: usize,
    /// Its runs, newest first.
    pub runs: Vec<RunInspection>,
    /// Its bytes (tables' sizes).
    pub bytes: u64,
}

/// One sorted run of a level.
#[derive(Clone, Debug, Serialize)]
pub struct RunInspection {
    /// The run's id.
    pub id: u64,
    /// Its tables in key order.
    pub tables: Vec<TableEntry>,
    /// Bytes, entries and tombstones of its tables.
    pub bytes: u64,
    /// Entries of its tables.
    pub entries: u64,
    /// Tombstones of its tables.
    pub tombstones: u64,
}

/// A table as the manifest records it.
#[derive(Clone, Debug, Serialize)]
pub struct TableEntry {
    /// The table's id, which is its file number.
    pub id: u64,
    /// Its size (blocks it refers to in other files included).
    pub bytes: u64,
    /// Entries and tombstones.
    pub entries: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Range tombstones (fragments), if any.
    #[serde(skip_serializing_if = "is_zero")]
    pub range_deletions: u64,
    /// Smallest and largest user keys ([`printable`]).
    pub smallest: String,
    /// Largest user key.
    pub largest: String,
    /// Smallest and largest sequence numbers.
    pub seqnos: (u64, u64),
}

/// The unique live keys and their key+value bytes, read through a read-only open (WALs
/// replayed into memory included).
#[derive(Clone, Debug, Serialize)]
pub struct LiveData {
    /// Live keys.
    pub keys: u64,
    /// Their key and value bytes.
    pub bytes: u64,
    /// Table bytes ÷ live bytes: space amplification as `DESIGN.md` defines it.
    pub space_amplification: f64,
}

/// A WAL file in the directory.
#[derive(Clone, Debug, Serialize)]
pub struct WalFileSummary {
    /// Its number.
    pub number: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// Whether opening the database replays it (at or above the log number).
    pub replayed: bool,
}

/// One manifest record, summarized.
#[derive(Clone, Debug, Serialize)]
pub struct EditSummary {
    /// Offset of the record in the manifest.
    pub offset: u64,
    /// Whether it is the snapshot that starts a manifest.
    pub snapshot: bool,
    /// Tables added and deleted (a move counts in both).
    pub added: usize,
    /// Tables deleted.
    pub deleted: usize,
    /// Bytes of the tables added.
    pub added_bytes: u64,
    /// Runs created.
    pub new_runs: usize,
    /// Levels the edit touches.
    pub levels: Vec<usize>,
    /// Whether it sets the policy's state.
    pub policy_state: bool,
    /// The flush count it records, if any.
    pub flushes: Option<u64>,
    /// The last sequence number and log number it records, if any.
    pub last_seqno: Option<u64>,
    /// The log number it records.
    pub log_number: Option<u64>,
    /// The policy it hands the tree to, if it is a switch.
    pub policy: Option<String>,
    /// The autopilot's decision it records, if any.
    pub autopilot: Option<strata_policy::autopilot::Decision>,
}

/// What [`inspect_db`] reads beyond the manifest.
#[derive(Clone, Copy, Debug, Default)]
pub struct InspectDb {
    /// Summarize every manifest record.
    pub history: bool,
    /// Open and check every table (reads every block, those kept in other files included).
    pub verify: bool,
    /// Read every live key through a read-only open to measure
    /// space amplification.
    pub scan: bool,
}

/// Reads the manifest `CURRENT` names in `dir` (as recovery does) and lists the directory's
/// files against it; `what` says what else to read.
pub fn inspect_db(fs: Arc<dyn FileSystem>, dir: &Path, what: InspectDb) -> Result<DbInspection> {
    let recovered = manifest::recover(fs.as_ref(), dir)?;
    let manifest_name = filename::manifest_file_name(recovered.manifest_number);
    let manifest_path = dir.join(&manifest_name);
    let data = fs
        .read(&manifest_path)
        .map_err(|e| Error::io(format!("reading {}", manifest_path.display()), e))?;
    let manifest_bytes = data.len() as u64;
    let (manifest_records, edits) = manifest_history(data, &manifest_name)?;
    let version = &recovered.default_keyspace().version;
    let names = fs
        .list(dir)
        .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    let mut wals = Vec::new();
    let mut damage = Vec::new();
    let mut leftovers = Vec::new();
    let mut on_disk = BTreeSet::new();
    for name in &names {
        let size = || fs.file_size(&dir.join(name)).unwrap_or(0);
        match filename::classify(name) {
            Some(FileKind::Wal(number)) => wals.push(WalFileSummary {
                number,
                bytes: size(),
                replayed: number >= recovered.log_number(),
            }),
            Some(FileKind::Table(number)) => {
                on_disk.insert(number);
                let needed = recovered
                    .keyspaces
                    .values()
                    .any(|k| k.version.needs_file(TableId(number)));
                if !needed {
                    leftovers.push(format!("{name}: a table file the manifest does not name"));
                }
            }
            Some(FileKind::Manifest(n)) if n != recovered.manifest_number => {
                leftovers.push(format!("{name}: an older manifest"))
            }
            Some(FileKind::Temp) => leftovers.push(format!("{name}: a temporary file")),
            _ => {}
        }
    }
    wals.sort_by_key(|w| w.number);
    // A retained file is checked only for its size: its table is gone, and the blocks tables
    // still refer to in it are read (and verified) through those tables. Its own index may
    // name files nothing needs any more.
    for (file, expected, is_table) in recovered.stored_files() {
        let name = filename::table_file_name(file.0);
        let problem = |offset: u64, reason: String| DamageReport {
            file: name.clone(),
            offset,
            reason,
        };
        if !on_disk.contains(&file.0) {
            damage.push(problem(0, format!("missing, but {manifest_name} names it")));
            continue;
        }
        let size = fs.file_size(&dir.join(&name)).unwrap_or(0);
        if size != expected {
            damage.push(problem(
                size.min(expected),
                format!("{size} bytes, but {manifest_name} records {expected}"),
            ));
        } else if what.verify && is_table {
            if let Err(e) = inspect_table(Arc::clone(&fs), &dir.join(&name), true, 0)
                .and_then(|t| t.damage.map_or(Ok(()), |d| Err(d.into_error())))
            {
                damage.push(DamageReport::of(&e));
            }
        }
    }
    // A scan that meets damage reports it with the rest rather than instead of it.
    let live = if what.scan {
        match scan_live(&fs, dir) {
            Ok(live) => Some(live),
            Err(e) => {
                damage.push(DamageReport::of(&e));
                None
            }
        }
    } else {
        None
    };
    let policy_state = if version.policy_state().is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_str(&version.policy_state().to_string())
            .unwrap_or_else(|_| serde_json::Value::String(version.policy_state().to_string()))
    };
    let levels = describe_levels(version);
    let retained_bytes = version.retained_files().map(|(_, size)| size).sum::<u64>();
    let table_bytes = version.disk_bytes();
    Ok(DbInspection {
        manifest: manifest_name,
        manifest_bytes,
        manifest_records,
        manifest_torn_tail: recovered
            .dropped_tail
            .clone()
            .map(|(offset, why)| format!("offset {offset}: {why}")),
        next_file_number: recovered.next_file_number,
        last_seqno: recovered.last_seqno,
        log_number: recovered.log_number(),
        flushes: version.flushes(),
        lifetime: recovered.default_keyspace().lifetime.clone(),
        policy: version.policy().map(str::to_string),
        in_handover: version.in_handover(),
        policy_state,
        table_bytes,
        retained_bytes,
        entries: levels.iter().flat_map(|l| &l.runs).map(|r| r.entries).sum(),
        tombstones: levels
            .iter()
            .flat_map(|l| &l.runs)
            .map(|r| r.tombstones)
            .sum(),
        runs: version.run_count(),
        tables: version.table_count(),
        levels,
        wals,
        verified: what.verify && damage.is_empty(),
        damage,
        leftovers,
        live: live.map(|(keys, bytes)| LiveData {
            keys,
            bytes,
            space_amplification: table_bytes as f64 / bytes.max(1) as f64,
        }),
        autopilot: edits.iter().filter_map(|e| e.autopilot.clone()).collect(),
        history: if what.history { edits } else { Vec::new() },
        keyspaces: recovered
            .keyspaces
            .iter()
            .map(|(id, k)| KeyspaceInspection {
                id: id.0,
                name: k.definition.name.clone(),
                options: k.definition.options.clone(),
                policy: k.version.policy().map(str::to_string),
                log_number: k.log_number,
                runs: k.version.run_count(),
                tables: k.version.table_count(),
                table_bytes: k.version.disk_bytes(),
            })
            .collect(),
    })
}

/// Live keys and their key+value bytes, read through a read-only open.
fn scan_live(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<(u64, u64)> {
    let options = crate::Options::new().with_file_system(Arc::clone(fs));
    let db = crate::Db::open_read_only(dir, options)?;
    let (mut keys, mut bytes) = (0u64, 0u64);
    let mut iter = db.range::<&[u8], _>(..)?;
    while let Some((key, value)) = iter.next().transpose()? {
        keys += 1;
        bytes += (key.len() + value.len()) as u64;
    }
    drop(iter);
    db.close()?;
    Ok((keys, bytes))
}

/// The manifest's records, summarized; `name` names it in errors.
fn manifest_history(data: Vec<u8>, name: &str) -> Result<(u64, Vec<EditSummary>)> {
    let mut reader = LogReader::new(data, name.to_string(), RecoveryMode::TolerateCorruptedTail);
    let mut edits = Vec::new();
    while let Some(payload) = reader.next_record()? {
        let offset = reader.last_record_offset();
        let record: ManifestRecord = serde_json::from_slice(&payload).map_err(|e| {
            Error::corruption(name, offset, format!("record is not valid JSON: {e}"))
        })?;
        let edit = &record.edit;
        let levels: BTreeSet<usize> = edit
            .added
            .iter()
            .map(|a| a.level)
            .chain(edit.deleted.iter().map(|d| d.level))
            .chain(edit.new_runs.iter().map(|r| r.level))
            .collect();
        edits.push(EditSummary {
            offset,
            snapshot: record.format_version.is_some(),
            added: edit.added.len(),
            deleted: edit.deleted.len(),
            added_bytes: edit.added.iter().map(|a| a.table.file_bytes()).sum(),
            new_runs: edit.new_runs.len(),
            levels: levels.into_iter().collect(),
            policy_state: edit.policy_state.is_some(),
            flushes: edit.flushes,
            last_seqno: record.last_seqno,
            log_number: record.log_number,
            policy: edit.policy.clone(),
            autopilot: record.autopilot,
        });
    }
    Ok((edits.len() as u64, edits))
}

fn describe_levels(version: &Version) -> Vec<LevelInspection> {
    version
        .levels()
        .iter()
        .enumerate()
        .map(|(level, l)| {
            let runs: Vec<RunInspection> = l
                .runs()
                .iter()
                .map(|run| {
                    let tables: Vec<TableEntry> = run
                        .tables()
                        .iter()
                        .map(|t| TableEntry {
                            id: t.id.0,
                            bytes: t.size,
                            entries: t.entries,
                            tombstones: t.tombstones,
                            range_deletions: t.range_deletions,
                            smallest: printable(&t.smallest),
                            largest: printable(&t.largest),
                            seqnos: (t.seqnos.smallest, t.seqnos.largest),
                        })
                        .collect();
                    RunInspection {
                        id: run.id().0,
                        bytes: tables.iter().map(|t| t.bytes).sum(),
                        entries: tables.iter().map(|t| t.entries).sum(),
                        tombstones: tables.iter().map(|t| t.tombstones).sum(),
                        tables,
                    }
                })
                .collect();
            LevelInspection {
                level,
                bytes: runs.iter().map(|r| r.bytes).sum(),
                runs,
            }
        })
        .collect()
}

/// One table file ([`inspect_table`]).
#[derive(Clone, Debug, Serialize)]
pub struct TableInspection {
    /// The file's name and size.
    pub file: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// What the builder recorded.
    pub properties: PropertiesView,
    /// Where the meta blocks are, and the filter's shape.
    pub layout: TableLayout,
    /// The data blocks as the index lists them, in key order.
    pub blocks: Vec<BlockView>,
    /// The first entries, when a dump was asked for.
    pub dump: Vec<DumpedEntry>,
    /// Whether every block was read and checked ([`Table::verify_checksums`]).
    pub verified: bool,
    /// What failed to check, if anything: the file, the offset and why.
    pub damage: Option<DamageReport>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// [`TableProperties`] for people.
#[derive(Clone, Debug, Serialize)]
pub struct PropertiesView {
    /// Entries and tombstones.
    pub entries: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Range tombstones (fragments), if any.
    #[serde(skip_serializing_if = "is_zero")]
    pub range_deletions: u64,
    /// Smallest user key ([`printable`]).
    pub smallest: String,
    /// Largest user key.
    pub largest: String,
    /// Sequence numbers.
    pub seqnos: (u64, u64),
    /// Internal key bytes and value bytes, before compression.
    pub raw_key_bytes: u64,
    /// Value bytes before compression.
    pub raw_value_bytes: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// Bloom bits per key the filter was built with (0: none).
    pub bloom_bits_per_key: f64,
    /// The compression the table was written with.
    pub compression: String,
}

impl From<&TableProperties> for PropertiesView {
    fn from(p: &TableProperties) -> Self {
        PropertiesView {
            entries: p.entries,
            tombstones: p.tombstones,
            range_deletions: p.range_deletions,
            smallest: printable(&p.smallest),
            largest: printable(&p.largest),
            seqnos: (p.smallest_seqno, p.largest_seqno),
            raw_key_bytes: p.raw_key_bytes,
            raw_value_bytes: p.raw_value_bytes,
            data_blocks: p.data_blocks,
            bloom_bits_per_key: p.bloom_bits_per_key,
            compression: p.compression.to_string(),
        }
    }
}

/// A data block as the index describes it.
#[derive(Clone, Debug, Serialize)]
pub struct BlockView {
    /// Offset in the file holding it.
    pub offset: u64,
    /// Bytes with the trailer.
    pub size: u64,
    /// Entries in it.
    pub entries: u64,
    /// Its last user key ([`printable`]).
    pub last_key: String,
    /// The file holding it when another table's (a block kept by a block-preserving merge).
    pub file: Option<u64>,
}

/// One entry of a dump.
#[derive(Clone, Debug, Serialize)]
pub struct DumpedEntry {
    /// The user key ([`printable`]).
    pub key: String,
    /// Its sequence number.
    pub seqno: u64,
    /// `put` or `delete`.
    pub kind: &'static str,
    /// The value's length, and its first 64 bytes ([`printable`]).
    pub value_len: usize,
    /// The value's first bytes.
    pub value: String,
}

/// Bytes of a value a dump shows.
const DUMP_VALUE_BYTES: usize = 64;

/// Opens the table at `path` and describes it: properties, layout, index. `verify` reads every
/// block and checks it; `dump` lists the first that many entries. Blocks a block-preserving
/// merge kept in other files are read from the same directory.
pub fn inspect_table(
    fs: Arc<dyn FileSystem>,
    path: &Path,
    verify: bool,
    dump: usize,
) -> Result<TableInspection> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let number = match filename::classify(&name) {
        Some(FileKind::Table(n)) => n,
        _ => 0,
    };
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let stats = Arc::new(Statistics::default());
    // Opened through a table cache, so that blocks kept in sibling files can be read.
    let cache = TableCache::new(
        Arc::clone(&fs),
        dir,
        64,
        None,
        Arc::clone(&stats),
        Default::default(),
    );
    let file = fs
        .open(path)
        .map_err(|e| Error::io(format!("opening table {}", path.display()), e))?;
    let bytes = file.len();
    let files: std::sync::Weak<dyn crate::table::BlockFiles> = Arc::downgrade(&cache) as _;
    let table =
        Arc::new(Table::open(file, number, name.clone(), None, stats)?.with_block_files(files));
    let blocks = table
        .index_blocks()?
        .into_iter()
        .map(|b| BlockView {
            offset: b.place.offset,
            size: b.place.size,
            entries: b.entries,
            last_key: printable(&b.last_key),
            file: b.file,
        })
        .collect();
    let mut damage = None;
    if verify {
        if let Err(e) = table.verify_checksums() {
            damage = Some(DamageReport::of(&e));
        }
    }
    let mut dumped = Vec::new();
    if dump > 0 && damage.is_none() {
        if let Err(e) = dump_table(&table, dump, &mut dumped) {
            damage = Some(DamageReport::of(&e));
        }
    }
    Ok(TableInspection {
        file: name,
        bytes,
        properties: table.properties().into(),
        layout: table.layout()?,
        blocks,
        dump: dumped,
        verified: verify && damage.is_none(),
        damage,
    })
}

fn dump_table(table: &Arc<Table>, limit: usize, out: &mut Vec<DumpedEntry>) -> Result<()> {
    let mut iter = table.iter();
    iter.seek_to_first()?;
    while iter.valid() && out.len() < limit {
        let Some((key, seqno, kind)) = parse_internal_key(iter.key()) else {
            return Err(Error::corruption(
                table.file_name(),
                0,
                "an entry's internal key does not parse",
            ));
        };
        let value = iter.value();
        out.push(DumpedEntry {
            key: printable(key),
            seqno,
            kind: match kind {
                ValueKind::Put => "put",
                ValueKind::Delete => "delete",
                ValueKind::Merge => "merge",
            },
            value_len: value.len(),
            value: printable(&value[..value.len().min(DUMP_VALUE_BYTES)]),
        });
        iter.next()?;
    }
    Ok(())
}

/// One WAL file ([`inspect_wal`]).
#[derive(Clone, Debug, Serialize)]
pub struct WalInspection {
    /// The file's name and size.
    pub file: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The WAL before it and its length then, as the link record names it (`None`: no link,
    /// or the first WAL).
    pub predecessor: Option<(u64, u64)>,
    /// Write groups (records other than the link) and the operations in them.
    pub groups: u64,
    /// Puts in them.
    pub puts: u64,
    /// Deletes in them.
    pub deletes: u64,
    /// Smallest and largest sequence numbers.
    pub seqnos: Option<(u64, u64)>,
    /// Bytes up to the end of the last whole record.
    pub valid_bytes: u64,
    /// A torn last record (a crash during an append): its offset and what was wrong.
    pub torn_tail: Option<String>,
    /// The records, when asked for.
    pub records: Vec<WalRecordSummary>,
    /// Damage other than a torn tail: the file, the offset and why.
    pub damage: Option<DamageReport>,
}

/// One WAL record.
#[derive(Clone, Debug, Serialize)]
pub struct WalRecordSummary {
    /// Offset of the record in the file.
    pub offset: u64,
    /// Payload bytes.
    pub bytes: usize,
    /// Whether it is the link record naming the WAL before.
    pub link: bool,
    /// First sequence number (`None` for the link record and an empty group).
    pub first_seqno: Option<u64>,
    /// Operations.
    pub ops: u64,
}

/// Reads the WAL at `path` record by record, as recovery would, and summarizes it; `records`
/// lists every record.
pub fn inspect_wal(fs: &dyn FileSystem, path: &Path, records: bool) -> Result<WalInspection> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let data = fs
        .read(path)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let bytes = data.len() as u64;
    let mut reader = LogReader::new(data, name.clone(), RecoveryMode::TolerateCorruptedTail);
    let mut out = WalInspection {
        file: name.clone(),
        bytes,
        predecessor: None,
        groups: 0,
        puts: 0,
        deletes: 0,
        seqnos: None,
        valid_bytes: 0,
        torn_tail: None,
        records: Vec::new(),
        damage: None,
    };
    let damage_at = |offset: u64, reason: String| DamageReport {
        file: name.clone(),
        offset,
        reason,
    };
    let mut first = true;
    loop {
        let payload = match reader.next_record() {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(e) => {
                out.damage = Some(DamageReport::of(&e));
                break;
            }
        };
        let offset = reader.last_record_offset();
        if first {
            first = false;
            if let Some(link) = wal_chain::decode_link(&payload) {
                match link {
                    Ok(link) => out.predecessor = link.map(|l| (l.number, l.len)),
                    Err(reason) => {
                        out.damage = Some(damage_at(offset, reason));
                        break;
                    }
                }
                if records {
                    out.records.push(WalRecordSummary {
                        offset,
                        bytes: payload.len(),
                        link: true,
                        first_seqno: None,
                        ops: 0,
                    });
                }
                continue;
            }
        }
        let (mut puts, mut deletes, mut first_seq) = (0u64, 0u64, None);
        let decoded = replay_wal_payload(&payload, |seq, _keyspace, op| {
            first_seq.get_or_insert(seq);
            match op {
                BatchOp::Put(..) | BatchOp::Merge(..) => puts += 1,
                BatchOp::Delete(_) | BatchOp::DeleteRange(..) => deletes += 1,
            }
        });
        let last = match decoded {
            Ok(last) => last,
            Err(reason) => {
                out.damage = Some(damage_at(offset, reason));
                break;
            }
        };
        out.groups += 1;
        out.puts += puts;
        out.deletes += deletes;
        if let (Some(lo), Some(hi)) = (first_seq, last) {
            out.seqnos = Some(out.seqnos.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        }
        if records {
            out.records.push(WalRecordSummary {
                offset,
                bytes: payload.len(),
                link: false,
                first_seqno: first_seq,
                ops: puts + deletes,
            });
        }
    }
    out.valid_bytes = reader.valid_len();
    out.torn_tail = reader
        .dropped_tail()
        .map(|(offset, why)| format!("offset {offset}: {why}"));
    if out.damage.is_none() {
        if let Some(d) = reader.damage().filter(|d| !d.cut_short) {
            out.damage = Some(DamageReport {
                file: name,
                offset: d.offset,
                reason: d.reason.clone(),
            });
        }
    }
    Ok(out)
}
