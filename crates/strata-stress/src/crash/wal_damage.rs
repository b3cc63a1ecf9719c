//! WAL damage cases (`--wal-damage-every`): after a kill, cut the end off an older WAL or flip a
//! byte in the newest, and check that a default open refuses it and a point-in-time open of a
//! copy keeps a prefix of every thread's history.

use super::CrashSummary;
use crate::keyspaces::Router;
use crate::run::options;
use crate::run::policy_spec;
use crate::side_log::side_log_dir;
use crate::verify::verify_prefix;
use anyhow::{bail, Context, Result};
use rand::Rng;
use rand_pcg::Pcg64Mcg;
use std::path::{Path, PathBuf};
use strata_engine::filename::{classify, FileKind};
use strata_engine::log::LogReader;
use strata_engine::{Db, RecoveryMode};

/// WAL files of `dir`, by number: (number, path).
fn wal_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut wals = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(FileKind::Wal(n)) = classify(&name) {
            wals.push((n, entry.path()));
        }
    }
    wals.sort();
    Ok(wals)
}

/// For a failure's report: each WAL's number, size, complete records and link.
fn describe_wals(wals: &[(u64, PathBuf)]) -> String {
    let describe = |(number, path): &(u64, PathBuf)| {
        let data = std::fs::read(path).unwrap_or_default();
        format!(
            "{number}: {} bytes, {} records, link {:?}",
            data.len(),
            record_offsets(&data).len(),
            strata_engine::wal_chain::link_of(&data)
        )
    };
    wals.iter().map(describe).collect::<Vec<_>>().join("; ")
}

/// Offsets at which the complete records of a log start.
fn record_offsets(data: &[u8]) -> Vec<u64> {
    let mut reader = LogReader::new(
        data.to_vec(),
        String::new(),
        RecoveryMode::TolerateCorruptedTail,
    );
    let mut offsets = Vec::new();
    while let Ok(Some(_)) = reader.next_record() {
        offsets.push(reader.last_record_offset());
    }
    offsets
}

/// One WAL damage case on the database a kill just left in `dir` (see `--wal-damage-every`).
/// The damage is undone before returning, whatever happened.
pub(super) fn damage_case(
    dir: &Path,
    policy: &str,
    threads: usize,
    keyspaces: usize,
    rng: &mut Pcg64Mcg,
    s: &mut CrashSummary,
) -> Result<()> {
    // Only WALs recovery replays: one below the manifest's log number is obsolete (a kill may
    // come between the manifest record and its deletion), and damage there is harmless.
    let log_number = strata_engine::manifest::recover(&strata_engine::fs::StdFs, dir)
        .context("reading the manifest")?
        .log_number();
    let wals: Vec<_> = wal_files(dir)?
        .into_iter()
        .filter(|(n, _)| *n >= log_number)
        .collect();
    // An older WAL is damaged by cutting its end (synced history lost), the newest by a flipped
    // byte before its last record (a torn tail there would be legitimate). Only a WAL the next
    // one's link vouches for has a history recovery can know was lost: a kill between creating
    // a WAL and writing its link leaves it empty, and then the WAL before it is the last of the
    // chain, whose end recovery cannot tell from a torn tail.
    let vouched = match wals.as_slice() {
        [.., (older, _), (_, newest)] => std::fs::read(newest)
            .ok()
            .and_then(|data| strata_engine::wal_chain::link_of(&data))
            .filter(|link| link.number == *older)
            .map(|link| link.len),
        _ => None,
    };
    if wals.len() >= 2 && vouched.is_none() {
        s.wal_damage_older_unvouched += 1;
    }
    let older = vouched.is_some() && rng.random_bool(0.5);
    let (number, path) = if older {
        wals[wals.len() - 2].clone()
    } else {
        // The newest WAL holding a record (an empty newest one is not part of the chain).
        let holds_records =
            |path: &Path| std::fs::read(path).is_ok_and(|data| !record_offsets(&data).is_empty());
        match wals.iter().rev().find(|(_, path)| holds_records(path)) {
            Some(w) => w.clone(),
            None => {
                s.wal_damage_skipped += 1;
                return Ok(());
            }
        }
    };
    let original = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let offsets = record_offsets(&original);
    // The link record and at least two more: there is something before the last to damage.
    if offsets.len() < 3 {
        s.wal_damage_skipped += 1;
        return Ok(());
    }
    let mut damaged = original.clone();
    if older {
        // Bytes past the vouched length are a torn tail an earlier open dropped (recovery
        // ignores them): the cut must reach into the history.
        let history = vouched.unwrap_or(0).min(original.len() as u64);
        let past_history = original.len() as u64 - history;
        if past_history > 0 {
            s.wal_damage_older_past_history += 1;
        }
        let lo = past_history + 1;
        let cut = rng.random_range(lo..=lo + (history / 2).clamp(1, 50_000) - 1);
        damaged.truncate(original.len() - cut as usize);
        s.wal_damage_older_truncated += 1;
    } else {
        let record = rng.random_range(1..offsets.len() - 1);
        let (start, end) = (offsets[record], offsets[record + 1]);
        let at = rng.random_range(start..end) as usize;
        damaged[at] ^= 1 << rng.random_range(0..8);
    }
    std::fs::write(&path, &damaged)?;
    s.wal_damage_cases += 1;
    let what = if older {
        format!(
            "older-WAL cut to {} of {} bytes, {} vouched",
            damaged.len(),
            original.len(),
            vouched.unwrap_or(0)
        )
    } else {
        "byte flip".to_string()
    };
    let result = check_damage(dir, policy, (threads, keyspaces), number, &what, s);
    // Undo the damage: the next child verifies everything, as after any kill.
    std::fs::write(&path, &original).with_context(|| format!("restoring {}", path.display()))?;
    result
}

/// What a damaged WAL must give: corruption naming it from a default open, with every WAL
/// still there, and a consistent prefix from a point-in-time open of a copy. `what` describes
/// the damage, for messages.
fn check_damage(
    dir: &Path,
    policy: &str,
    (threads, keyspaces): (usize, usize),
    number: u64,
    what: &str,
    s: &mut CrashSummary,
) -> Result<()> {
    let name = format!("{number:06}.log");
    let wals_before = wal_files(dir)?;
    // Described now: an open that accepts the damage may replay and delete them.
    let described = describe_wals(&wals_before);
    // WAL damage is the point here: table files go through the page cache.
    match Db::open(dir, options(policy, false)?) {
        Ok(_) => bail!(
            "a default open accepted damaged {name} ({what}): a silent hole; WALs before the \
             open: {}",
            described
        ),
        Err(e @ strata_engine::Error::Corruption { .. }) if e.to_string().contains(&name) => {
            s.wal_damage_detected += 1;
        }
        Err(e) => bail!("a default open of damaged {name} failed otherwise: {e}"),
    }
    if wal_files(dir)? != wals_before {
        bail!("a failed open changed the WALs");
    }
    let copy = dir.with_extension("pit");
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name()))?;
        }
    }
    let result = (|| {
        let opened = Db::open(
            &copy,
            options(policy, false)?.with_wal_recovery_mode(RecoveryMode::PointInTime),
        );
        let db = match opened {
            // Window flushes re-logged older entries after the damage: no prefix exists, and
            // point-in-time recovery must say so rather than open with a hole.
            Err(e @ strata_engine::Error::Corruption { .. })
                if e.to_string().contains("re-logged") =>
            {
                s.point_in_time_refused += 1;
                return Ok(());
            }
            other => other.context("a point-in-time open")?,
        };
        match db.recovery_stop() {
            Some(stop) if stop.file == name => {
                s.last_stop = Some(format!("{stop:?}"));
            }
            other => bail!("point-in-time recovery stopped at {other:?}, not in {name}"),
        }
        let router = Router::open(&db, keyspaces, policy_spec)?;
        s.point_in_time_writes_dropped += verify_prefix(&router, &side_log_dir(dir), threads)
            .with_context(|| {
                format!(
                    "{what} damage, stop {}",
                    s.last_stop.clone().unwrap_or_default()
                )
            })?;
        db.close()?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&copy);
    result
}
