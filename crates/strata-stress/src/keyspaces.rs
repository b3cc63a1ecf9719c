//! The crash test's keyspaces: with `--keyspaces N`, every key lives in one of N keyspaces (the
//! default one and `ks1`..), chosen by a hash of the key, so a thread's batches span keyspaces
//! and verification checks that each is whole after every kill.

use anyhow::{Context, Result};
use std::collections::BTreeMap;
use strata_engine::{Db, Keyspace, KeyspaceOptions, WriteBatch};

/// The policies of keyspaces `ks1`, `ks2`, ... in turn: Min-Max's held buffers, a
/// block-preserving partial merge and compressed levels beside whatever the default keyspace
/// runs.
const KEYSPACE_POLICIES: [&str; 3] = [
    "minmax",
    "partial-mixed",
    // Every codec under the kills: lz4 above the bottom, zstd with a dictionary per table at
    // the bottom.
    "tiered:compression_per_level=lz4,bottommost_compression=zstd+dict1KiB",
];

/// Where each key lives.
pub(crate) struct Router {
    /// The default keyspace first.
    spaces: Vec<Keyspace>,
}

impl Router {
    /// The `count` keyspaces of `db`, creating those a kill left uncreated. `spec` turns a
    /// policy name into the crash test's specification of it.
    pub(crate) fn open(
        db: &Db,
        count: usize,
        spec: impl Fn(&str) -> Result<strata_policy::PolicySpec>,
    ) -> Result<Router> {
        let mut spaces = vec![db.keyspace("default")?];
        for i in 1..count.max(1) {
            let name = format!("ks{i}");
            let space = match db.keyspace(&name) {
                Ok(space) => space,
                Err(_) => {
                    let policy = KEYSPACE_POLICIES[(i - 1) % KEYSPACE_POLICIES.len()];
                    let options = KeyspaceOptions::new().with_policy_spec(spec(policy)?)?;
                    db.create_keyspace(&name, options)
                        .with_context(|| format!("creating keyspace {name}"))?
                }
            };
            spaces.push(space);
        }
        Ok(Router { spaces })
    }

    /// The keyspace `key` lives in.
    pub(crate) fn of(&self, key: &str) -> &Keyspace {
        // FNV-1a: stable across runs and builds, unlike std's hasher.
        let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        &self.spaces[(hash % self.spaces.len() as u64) as usize]
    }

    /// The value of `key`, from its keyspace.
    pub(crate) fn get(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .of(key)
            .get(key)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Adds a put or (`None`) a delete of `key` to `batch`, in its keyspace.
    pub(crate) fn add(&self, batch: &mut WriteBatch, key: &str, value: Option<&str>) -> Result<()> {
        let space = self.of(key);
        match value {
            Some(v) => batch.put_in(space, key, v)?,
            None => batch.delete_in(space, key)?,
        };
        Ok(())
    }

    /// Adds a deletion of every key in `[start, end)` to `batch`, in every keyspace (keys of
    /// one range live in all of them).
    pub(crate) fn add_range_deletion(
        &self,
        batch: &mut WriteBatch,
        start: &str,
        end: &str,
    ) -> Result<()> {
        for space in &self.spaces {
            batch.delete_range_in(space, start, end)?;
        }
        Ok(())
    }

    /// Adds a merge `operand` for `key` to `batch`, in its keyspace.
    pub(crate) fn add_merge(&self, batch: &mut WriteBatch, key: &str, operand: &str) -> Result<()> {
        batch.merge_in(self.of(key), key, operand)?;
        Ok(())
    }

    /// Every key from `start` (inclusive) to `end` (exclusive), over all keyspaces, in order.
    pub(crate) fn range(&self, start: &str, end: &str) -> Result<BTreeMap<String, String>> {
        let mut all = BTreeMap::new();
        for space in &self.spaces {
            for entry in space.range(start..end)? {
                let (k, v) = entry?;
                all.insert(
                    String::from_utf8_lossy(&k).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                );
            }
        }
        Ok(all)
    }

    /// Every key, over all keyspaces, in order.
    pub(crate) fn scan_all(&self) -> Result<BTreeMap<String, String>> {
        let mut all = BTreeMap::new();
        for space in &self.spaces {
            for entry in space.range::<&str, _>(..)? {
                let (k, v) = entry?;
                all.insert(
                    String::from_utf8_lossy(&k).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                );
            }
        }
        Ok(all)
    }

    /// Every keyspace's table files: its tables' own and those kept for blocks they refer to.
    pub(crate) fn table_files(&self) -> std::collections::BTreeSet<u64> {
        self.spaces
            .iter()
            .flat_map(|s| {
                let version = s.version();
                version
                    .tables()
                    .map(|(_, _, t)| t.id.0)
                    .chain(version.retained_files().map(|(f, _)| f.0))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}
