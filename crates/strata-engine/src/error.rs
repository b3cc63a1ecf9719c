//! Errors returned by the engine. Every fallible path a user can reach returns one of these.

use std::path::PathBuf;
use thiserror::Error;

/// An engine error.
#[derive(Debug, Error)]
pub enum Error {
    /// An operating-system I/O error, with what the engine was doing.
    #[error("{context}: {source}")]
    Io {
        /// What the engine was doing.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Stored data failed a check (checksum, length, format).
    #[error("corruption in {file} at offset {offset}: {reason}")]
    Corruption {
        /// The file (name within the database directory).
        file: String,
        /// Byte offset of the damaged part.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// A file was written by an unknown version of the format.
    #[error("{file} has format version {found}, but this build reads versions up to {supported}")]
    UnsupportedFormat {
        /// The file.
        file: String,
        /// The version found.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The directory exists and holds files, but not a Strata database.
    #[error("{path} is not a Strata database (it holds {example:?} but no CURRENT file)")]
    NotADatabase {
        /// The directory.
        path: PathBuf,
        /// One of the files found there.
        example: String,
    },
    /// Another process (or another handle in this one) has the database open.
    #[error("the database at {0} is locked by another process or handle")]
    Locked(PathBuf),
    /// An argument or option is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The database was closed.
    #[error("the database is closed")]
    Closed,
    /// An earlier error the database cannot recover from in place (a failed flush or
    /// compaction, or a failed write to the WAL or the manifest) made it read-only until reopened:
    /// writes, flushes and compactions fail with this, reads still work. Holds the message of the
    /// first such error.
    #[error("the database is read-only after a background error: {0}")]
    ReadOnly(String),
    /// The compaction policy failed or produced an unusable plan.
    #[error("compaction policy: {0}")]
    Policy(#[from] strata_policy::PolicyError),
    /// A version edit broke an invariant.
    #[error("version edit: {0}")]
    Edit(#[from] strata_meta::EditError),
    /// The merge operator could not combine a key's operands (RocksDB: `Status::Corruption`
    /// from a failed merge); the read, flush or compaction that asked fails.
    #[error("merge operator {operator} failed on key {key}: {reason}")]
    MergeFailed {
        /// The operator's name.
        operator: String,
        /// The key, printable.
        key: String,
        /// What the operator said.
        reason: String,
    },
}

impl Error {
    /// An I/O error with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// An equivalent error, for handing one failure to every writer of a commit group (errors
    /// hold `io::Error`, which cannot be cloned; the copy keeps its kind and message).
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { context, source } => Error::Io {
                context: context.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption {
                file,
                offset,
                reason,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                reason: reason.clone(),
            },
            Error::UnsupportedFormat {
                file,
                found,
                supported,
            } => Error::UnsupportedFormat {
                file: file.clone(),
                found: *found,
                supported: *supported,
            },
            Error::NotADatabase { path, example } => Error::NotADatabase {
                path: path.clone(),
                example: example.clone(),
            },
            Error::Locked(p) => Error::Locked(p.clone()),
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Closed => Error::Closed,
            Error::ReadOnly(m) => Error::ReadOnly(m.clone()),
            Error::Policy(e) => Error::Policy(e.clone()),
            Error::Edit(e) => Error::Edit(e.clone()),
            Error::MergeFailed {
                operator,
                key,
                reason,
            } => Error::MergeFailed {
                operator: operator.clone(),
                key: key.clone(),
                reason: reason.clone(),
            },
        }
    }

    /// A corruption report.
    pub fn corruption(file: impl Into<String>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
