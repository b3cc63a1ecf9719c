//! The names of the files in a database directory, and what kind of file a name is. The
//! manifest, recovery, the file systems' fault classes and the tools all name files through
//! this module, so that a file system need not know the manifest.

/// Name of the file that points at the live manifest.
pub const CURRENT: &str = "CURRENT";
/// Name of the lock file.
pub const LOCK: &str = "LOCK";
/// Name of the info log ([`crate::Options::with_info_log`]).
pub const INFO_LOG: &str = "LOG";
/// Prefix of an earlier open's info log, `LOG.old.<microseconds since the epoch>`.
const OLD_INFO_LOG_PREFIX: &str = "LOG.old.";

/// The kinds of files in a database directory.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A table, `<n>.sst`.
    Table(u64),
    /// A write-ahead log, `<n>.log`.
    Wal(u64),
    /// A manifest, `MANIFEST-<n>`.
    Manifest(u64),
    /// `CURRENT`.
    Current,
    /// `LOCK`.
    Lock,
    /// A temporary file of ours (`<name>.tmp`).
    Temp,
    /// A WAL point-in-time recovery set aside unreplayed, `<n>.log.unreplayed`: kept for the
    /// user, never replayed or deleted.
    UnreplayedWal(u64),
    /// The info log, `LOG` (`None`), or an earlier open's, `LOG.old.<micros>`.
    InfoLog(Option<u64>),
}

/// The numbers of the WALs among a directory's file `names`, ascending.
pub fn wal_numbers(names: &[String]) -> Vec<u64> {
    let mut numbers: Vec<u64> = names
        .iter()
        .filter_map(|n| match classify(n) {
            Some(FileKind::Wal(w)) => Some(w),
            _ => None,
        })
        .collect();
    numbers.sort_unstable();
    numbers
}

/// Classifies a file name; `None` for files that are not Strata's.
pub fn classify(name: &str) -> Option<FileKind> {
    let number = |s: &str| s.parse::<u64>().ok();
    if name == CURRENT {
        Some(FileKind::Current)
    } else if name == LOCK {
        Some(FileKind::Lock)
    } else if name == INFO_LOG {
        Some(FileKind::InfoLog(None))
    } else if let Some(n) = name.strip_prefix(OLD_INFO_LOG_PREFIX) {
        number(n).map(|n| FileKind::InfoLog(Some(n)))
    } else if name.ends_with(".tmp") {
        Some(FileKind::Temp)
    } else if let Some(n) = name.strip_prefix("MANIFEST-") {
        number(n).map(FileKind::Manifest)
    } else if let Some(n) = name.strip_suffix(".sst") {
        number(n).map(FileKind::Table)
    } else if let Some(n) = name.strip_suffix(".log") {
        number(n).map(FileKind::Wal)
    } else if let Some(n) = name.strip_suffix(".log.unreplayed") {
        number(n).map(FileKind::UnreplayedWal)
    } else {
        None
    }
}

/// File name of the info log an open set aside at `micros` since the epoch.
pub fn old_info_log_file_name(micros: u64) -> String {
    format!("{OLD_INFO_LOG_PREFIX}{micros}")
}

/// File name of table `n`.
pub fn table_file_name(n: u64) -> String {
    format!("{n:06}.sst")
}

/// File name of WAL `n`.
pub fn wal_file_name(n: u64) -> String {
    format!("{n:06}.log")
}

/// File name under which point-in-time recovery keeps WAL `n` unreplayed.
pub fn unreplayed_wal_file_name(n: u64) -> String {
    format!("{n:06}.log.unreplayed")
}

/// File name of manifest `n`.
pub fn manifest_file_name(n: u64) -> String {
    format!("MANIFEST-{n:06}")
}
