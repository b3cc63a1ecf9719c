//! Databases kept after their run (`strata bench --keep DIR`) and runs on them later
//! (`--use-existing-db DIR`), as db_bench's `--use_existing_db`: each configuration's database
//! is `DIR/<plain label>` ([`strata_exec::job_log::plain_name`]), and beside it
//! `DIR/<plain label>.bench-state` records what the workload put there: the sizes, the entries,
//! how keys were numbered, the phases run so far and the key space (which keys are live, in
//! [`KeySpace::to_bytes`]'s compact form), so a later run reads keys that exist and inserts keys
//! that do not.
//!
//! A run on a kept database skips the workload's load phases ([`WorkloadSpec::load_phases`]:
//! the phases from the first that only insert) and runs the rest with the seeds they would have
//! had in a whole run; it refuses, before any run, a workload of other key or value sizes,
//! another number of entries or another key numbering.

use crate::workload::{InsertOrder, KeySpace, WorkloadSpec};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_exec::job_log::plain_name;

/// The first bytes of a state file (and its format's version).
const MAGIC: &[u8; 8] = b"STBENCH1";

/// What a kept database holds, as far as the workload that filled it knows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeptState {
    /// The run's label (policy specification or peer).
    pub label: String,
    /// The workload that made it, or last ran on it.
    pub workload: String,
    /// Key bytes.
    pub key_size: usize,
    /// Value bytes.
    pub value_size: usize,
    /// The workload's entries ([`WorkloadSpec::entries`]).
    pub entries: Option<u64>,
    /// The seed of the runs so far (of the last one).
    pub seed: u64,
    /// How the stored keys were numbered (the insert order of the phases run).
    pub inserts: InsertOrder,
    /// The phases run on it so far, in order.
    pub phases_run: Vec<String>,
}

/// The database directory of `label` in `dir`.
pub fn database_dir(dir: &Path, label: &str) -> PathBuf {
    dir.join(plain_name(label))
}

/// The state file of `label`'s database in `dir`.
pub fn state_path(dir: &Path, label: &str) -> PathBuf {
    dir.join(format!("{}.bench-state", plain_name(label)))
}

/// Writes the state file at `path`: the magic, the length of the header, the header as JSON,
/// then the key space. Written to a temporary name and renamed, so a crash leaves the old
/// state or the new, never half of one.
pub fn save(path: &Path, state: &KeptState, space: &KeySpace) -> Result<()> {
    let header = serde_json::to_vec(state)?;
    let mut bytes = Vec::new();
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(header.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(&space.to_bytes());
    let temporary = path.with_extension("bench-state.tmp");
    std::fs::write(&temporary, &bytes)
        .with_context(|| format!("writing {}", temporary.display()))?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("renaming {} to {}", temporary.display(), path.display()))
}

/// Reads the state file at `path`.
pub fn load(path: &Path) -> Result<(KeptState, Arc<KeySpace>)> {
    let bytes = std::fs::read(path).with_context(|| {
        format!(
            "reading {} (a database kept by `strata bench --keep` has one beside it)",
            path.display()
        )
    })?;
    let bad =
        |what: &str| anyhow::anyhow!("{} is not a benchmark state file: {what}", path.display());
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| bad("its first bytes are not the magic"))?;
    let (length, rest) = rest
        .split_at_checked(8)
        .ok_or_else(|| bad("it is cut short"))?;
    let mut word = [0u8; 8];
    word.copy_from_slice(length);
    let length =
        usize::try_from(u64::from_le_bytes(word)).map_err(|_| bad("its header is too long"))?;
    let (header, keys) = rest
        .split_at_checked(length)
        .ok_or_else(|| bad("it is cut short inside the header"))?;
    let state: KeptState = serde_json::from_slice(header)
        .map_err(|e| bad(&format!("its header does not parse ({e})")))?;
    let space = KeySpace::from_bytes(keys).map_err(|e| bad(&e))?;
    Ok((state, space))
}

impl KeptState {
    /// The state of a database `workload` has just run on, from phase `first_phase` on, after
    /// `earlier` (the state it started from, if it was kept before).
    pub fn after_run(
        earlier: Option<&KeptState>,
        label: &str,
        workload: &WorkloadSpec,
        first_phase: usize,
        seed: u64,
    ) -> KeptState {
        let mut phases_run = earlier.map(|e| e.phases_run.clone()).unwrap_or_default();
        phases_run.extend(
            workload.phases[first_phase..]
                .iter()
                .map(|p| p.name.clone()),
        );
        KeptState {
            label: label.to_string(),
            workload: workload.name.clone(),
            key_size: workload.key_size,
            value_size: workload.value_size,
            entries: workload.entries().or(earlier.and_then(|e| e.entries)),
            seed,
            inserts: workload
                .phases
                .last()
                .map(|p| p.inserts.clone())
                .unwrap_or_default(),
            phases_run,
        }
    }

    /// Checks that `workload` can run on the database this state describes (at `db`, named in
    /// the errors) and returns how many of its phases to skip: its load phases.
    pub fn check(&self, workload: &WorkloadSpec, db: &Path) -> Result<usize> {
        let at = || format!("--use-existing-db: {}", db.display());
        if (self.key_size, self.value_size) != (workload.key_size, workload.value_size) {
            bail!(
                "{}: the database holds {}-byte keys and {}-byte values, but the workload has \
                 {}-byte keys and {}-byte values; give --key-size {} --value-size {}",
                at(),
                self.key_size,
                self.value_size,
                workload.key_size,
                workload.value_size,
                self.key_size,
                self.value_size
            );
        }
        if let (Some(kept), Some(asked)) = (self.entries, workload.entries()) {
            if kept != asked {
                bail!(
                    "{}: the database was made with {kept} entries, but the workload has \
                     {asked}; give --entries {kept}",
                    at()
                );
            }
        }
        let skip = workload.load_phases();
        if skip == workload.phases.len() {
            bail!(
                "{}: every phase of {} only loads keys, and a run on an existing database \
                 skips the load; give a workload with phases after the load (e.g. readrandom)",
                at(),
                workload.name
            );
        }
        for phase in &workload.phases[skip..] {
            if phase.inserts != self.inserts {
                bail!(
                    "{}: its keys were numbered by the insert order {:?} (workload {}), but phase \
                     {:?} of {} numbers them by {:?}, so it would read keys the database does not \
                     hold; run a workload of the same family (db_bench phases after db_bench \
                     fills, YCSB after a YCSB load or fillunique)",
                    at(),
                    self.inserts,
                    self.workload,
                    phase.name,
                    workload.name,
                    phase.inserts
                );
            }
        }
        Ok(skip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::PresetParams;

    fn preset(name: &str, entries: u64, key_size: usize) -> WorkloadSpec {
        let p = PresetParams {
            entries,
            ops: entries,
            key_size,
            ..PresetParams::default()
        };
        WorkloadSpec::preset(name, &p).unwrap()
    }

    #[test]
    fn the_state_file_round_trips_with_its_key_space() {
        let dir = tempfile::tempdir().unwrap();
        let fill = preset("fillrandom", 1000, 16);
        let state = KeptState::after_run(None, "leveled:size_ratio=8", &fill, 0, 42);
        assert_eq!(state.phases_run, ["fillrandom"]);
        assert_eq!(state.entries, Some(1000));
        let space = KeySpace::new();
        let path = state_path(dir.path(), "leveled:size_ratio=8");
        assert_eq!(
            path.file_name().unwrap(),
            "leveled_size_ratio_8.bench-state"
        );
        save(&path, &state, &space).unwrap();
        let (read, keys) = load(&path).unwrap();
        assert_eq!(read, state);
        assert_eq!(keys.live_keys(), 0);
        std::fs::write(&path, b"STBENCH1\x05").unwrap();
        assert!(format!("{:#}", load(&path).unwrap_err()).contains("cut short"));
        let e = load(&dir.path().join("missing.bench-state")).unwrap_err();
        assert!(format!("{e:#}").contains("--keep"), "{e:#}");
    }

    #[test]
    fn a_workload_must_match_the_kept_database() {
        let db = Path::new("/kept/leveled");
        let state = KeptState::after_run(None, "leveled", &preset("fillrandom", 1000, 16), 0, 1);
        // readrandom skips its unmeasured fill and reads the same domain.
        assert_eq!(state.check(&preset("readrandom", 1000, 16), db).unwrap(), 1);
        let multi = preset("fillrandom,multireadrandom", 1000, 16);
        assert_eq!(state.check(&multi, db).unwrap(), 1);
        let e = state
            .check(&preset("readrandom", 1000, 32), db)
            .unwrap_err();
        assert!(e.to_string().contains("16-byte keys") && e.to_string().contains("/kept/leveled"));
        let e = state
            .check(&preset("readrandom", 2000, 16), db)
            .unwrap_err();
        assert!(e.to_string().contains("1000 entries"), "{e}");
        let e = state
            .check(&preset("fillrandom", 1000, 16), db)
            .unwrap_err();
        assert!(e.to_string().contains("only loads"), "{e}");
        let e = state.check(&preset("ycsb-c", 1000, 16), db).unwrap_err();
        assert!(e.to_string().contains("insert order"), "{e}");
        // A YCSB load kept, then YCSB runs on it.
        let load = KeptState::after_run(None, "rocksdb", &preset("fillunique", 1000, 16), 0, 1);
        assert_eq!(load.check(&preset("ycsb-e", 1000, 16), db).unwrap(), 1);
        let after = KeptState::after_run(Some(&load), "rocksdb", &preset("ycsb-e", 1000, 16), 1, 1);
        assert_eq!(after.phases_run, ["load", "run"]);
    }
}
