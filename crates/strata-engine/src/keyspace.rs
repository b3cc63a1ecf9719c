//! Keyspaces: named trees of one database, each with its own policy and options, sharing the
//! WAL, the manifest, the caches and the background threads (`docs/keyspaces.md` has the
//! design and says which parts have landed).

use serde::{Deserialize, Serialize};

/// A keyspace's number in its database: 0 is the default keyspace, which every database has;
/// numbers are never reused, so a WAL record or a table of a dropped keyspace cannot be taken
/// for a later one's.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct KeyspaceId(pub u32);

impl KeyspaceId {
    /// The default keyspace: what `Db`'s own reads and writes use.
    pub const DEFAULT: KeyspaceId = KeyspaceId(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::encode_group;
    use crate::fs::{FileSystem, MemFs};
    use crate::log::{LogReader, LogWriter, RecoveryMode};
    use crate::manifest::{KeyspaceDefinition, ManifestRecord};
    use crate::{Db, Error, Options, WriteBatch, WriteOptions};
    use std::path::Path;
    use std::sync::Arc;

    fn options(fs: &MemFs) -> Options {
        Options::new().with_file_system(Arc::new(fs.clone()))
    }

    #[test]
    fn a_batch_naming_a_keyspace_the_database_lacks_is_refused_whole() {
        let fs = MemFs::new();
        let db = Db::open("/db", options(&fs)).unwrap();
        let mut batch = WriteBatch::new();
        batch.put("a", "1").unwrap();
        batch.put_in_keyspace(KeyspaceId(2), b"b", b"2").unwrap();
        match db.write(&WriteOptions::default(), batch) {
            Err(Error::InvalidArgument(why)) => assert!(why.contains("keyspace 2"), "{why}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(
            db.get("a").unwrap(),
            None,
            "no part of the batch was written"
        );
        db.close().unwrap();
    }

    /// Rewrites the log file at `path` with its records and `more` after them.
    fn append_records(fs: &MemFs, path: &Path, more: &[Vec<u8>]) {
        let mut reader = LogReader::new(
            fs.read(path).unwrap(),
            "log".into(),
            RecoveryMode::PointInTime,
        );
        let mut writer = LogWriter::new(fs.create(path).unwrap());
        while let Some(record) = reader.next_record().unwrap() {
            writer.add_record(&record).unwrap();
        }
        for record in more {
            writer.add_record(record).unwrap();
        }
        writer.sync().unwrap();
    }

    /// A closed database of one key, and the paths of its newest WAL and its manifest.
    fn closed_database(fs: &MemFs) -> (std::path::PathBuf, std::path::PathBuf) {
        let db = Db::open("/db", options(fs)).unwrap();
        db.put("a", "1").unwrap();
        db.close().unwrap();
        let dir = Path::new("/db");
        let names = fs.list(dir).unwrap();
        let wal = crate::filename::wal_numbers(&names)
            .last()
            .map(|&n| dir.join(crate::filename::wal_file_name(n)))
            .unwrap();
        let current = String::from_utf8(fs.read(&dir.join("CURRENT")).unwrap()).unwrap();
        (wal, dir.join(current.trim()))
    }

    /// A WAL record holding an entry of keyspace `id`, at sequence number 2.
    fn wal_entry_of(id: u32) -> Vec<u8> {
        let mut batch = WriteBatch::new();
        batch.put_in_keyspace(KeyspaceId(id), b"b", b"2").unwrap();
        let mut payload = Vec::new();
        encode_group(&mut payload, 2, &[&batch]);
        payload
    }

    fn manifest_record(record: &ManifestRecord) -> Vec<u8> {
        serde_json::to_vec(record).unwrap()
    }

    fn creation(id: u32, name: &str) -> ManifestRecord {
        ManifestRecord {
            keyspace: Some(KeyspaceId(id)),
            create_keyspace: Some(KeyspaceDefinition {
                name: name.to_string(),
                options: Default::default(),
            }),
            ..ManifestRecord::default()
        }
    }

    /// A WAL record of a keyspace the manifest never had (a later build's, or damage) stops
    /// the open instead of being dropped, and the WAL stays as it was.
    #[test]
    fn a_wal_entry_of_an_unknown_keyspace_stops_the_open() {
        let fs = MemFs::new();
        let (wal, _) = closed_database(&fs);
        append_records(&fs, &wal, &[wal_entry_of(7)]);
        let before = fs.read(&wal).unwrap();
        let e = Db::open("/db", options(&fs)).err().unwrap();
        assert!(
            matches!(&e, Error::Corruption { reason, .. } if reason.contains("keyspace 7")),
            "{e}"
        );
        assert_eq!(fs.read(&wal).unwrap(), before);
    }

    /// Entries of a keyspace the manifest created and dropped are skipped: its data went with
    /// it.
    #[test]
    fn wal_entries_of_a_dropped_keyspace_are_skipped() {
        let fs = MemFs::new();
        let (wal, manifest) = closed_database(&fs);
        let dropped = ManifestRecord {
            keyspace: Some(KeyspaceId(1)),
            drop_keyspace: true,
            ..ManifestRecord::default()
        };
        append_records(
            &fs,
            &manifest,
            &[
                manifest_record(&creation(1, "gone")),
                manifest_record(&dropped),
            ],
        );
        append_records(&fs, &wal, &[wal_entry_of(1)]);
        let db = Db::open("/db", options(&fs)).unwrap();
        assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(
            db.get("b").unwrap(),
            None,
            "keyspace 1's entry is not the default's"
        );
        db.close().unwrap();
        // The number stays taken in the manifest the open wrote.
        let recovered = crate::manifest::recover(&fs, Path::new("/db")).unwrap();
        assert_eq!(recovered.next_keyspace_id, 2);
    }

    /// Until keyspaces open, a database that has some is refused by name, and left as it was.
    #[test]
    fn a_database_with_other_keyspaces_is_refused_naming_them() {
        let fs = MemFs::new();
        let (_, manifest) = closed_database(&fs);
        append_records(&fs, &manifest, &[manifest_record(&creation(1, "events"))]);
        let before = fs.read(&manifest).unwrap();
        let e = Db::open("/db", options(&fs)).err().unwrap();
        assert!(e.to_string().contains("events"), "{e}");
        assert_eq!(fs.read(&manifest).unwrap(), before);
    }
}
