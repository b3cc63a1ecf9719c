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

    /// A WAL record of a keyspace the manifest does not name (a later build's, or damage) stops
    /// the open instead of being dropped, and the WAL stays as it was.
    #[test]
    fn a_wal_entry_of_an_unknown_keyspace_stops_the_open() {
        let fs = MemFs::new();
        let db = Db::open("/db", options(&fs)).unwrap();
        db.put("a", "1").unwrap();
        db.close().unwrap();
        let dir = Path::new("/db");
        let wal = crate::filename::wal_numbers(&fs.list(dir).unwrap())
            .last()
            .map(|&n| dir.join(crate::filename::wal_file_name(n)))
            .unwrap();
        let mut reader = LogReader::new(
            fs.read(&wal).unwrap(),
            "wal".into(),
            RecoveryMode::PointInTime,
        );
        let mut writer = LogWriter::new(fs.create(&wal).unwrap());
        while let Some(record) = reader.next_record().unwrap() {
            writer.add_record(&record).unwrap();
        }
        let mut batch = WriteBatch::new();
        batch.put_in_keyspace(KeyspaceId(7), b"b", b"2").unwrap();
        let mut payload = Vec::new();
        encode_group(&mut payload, 2, &[&batch]);
        writer.add_record(&payload).unwrap();
        writer.sync().unwrap();
        let before = fs.read(&wal).unwrap();
        let e = Db::open("/db", options(&fs)).err().unwrap();
        assert!(
            matches!(&e, Error::Corruption { reason, .. } if reason.contains("keyspace 7")),
            "{e}"
        );
        assert_eq!(fs.read(&wal).unwrap(), before);
    }
}
