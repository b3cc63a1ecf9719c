//! Checking a database against the side logs: everything acknowledged after a crash, or a
//! prefix of every thread's history after a point-in-time recovery.

use crate::keyspaces::Router;
use crate::side_log::{replay, Intent, Replayed, SideLog};
use anyhow::{bail, Result};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Verification counts of one restart.
#[derive(Debug, Default, Serialize, Clone, Copy)]
pub(crate) struct Verified {
    keys_checked: u64,
    acked_writes: u64,
    in_flight_applied: u64,
    in_flight_absent: u64,
    /// Keys whose last writes were left out of the WAL, read to settle what they hold.
    unlogged_keys_settled: u64,
    /// ... of which a kill rolled back (the newest acknowledged write was lost).
    unlogged_keys_rolled_back: u64,
}

/// Checks the database against every thread's side log and resolves in-flight intents, and
/// settles (with `F` lines) what keys written without the WAL hold.
pub(crate) fn verify(db: &Router, logs: &Path, threads: usize) -> Result<Verified> {
    let mut v = Verified::default();
    let mut all_expected: BTreeMap<String, Option<String>> = BTreeMap::new();
    let read = |k: &str| db.get(k);
    for t in 0..threads {
        let path = logs.join(format!("thread-{t:02}.log"));
        let r = replay(&path)?;
        v.acked_writes += r.acked;
        let mut log = SideLog::open(&path)?;
        // What each key may hold: the model's value, or one a lost write left out of the WAL
        // rolls back to.
        let allowed = |k: &str| -> Vec<Option<String>> {
            let mut values = vec![r.model.get(k).cloned().flatten()];
            values.extend(r.uncertain.get(k).into_iter().flatten().cloned());
            values
        };
        // Keys whose value is settled by reading it: uncertain ones and the in-flight intent's.
        let mut settle: BTreeMap<String, Vec<Option<String>>> = r
            .uncertain
            .keys()
            .map(|k| (k.clone(), allowed(k)))
            .collect();
        if let Some(i) = &r.in_flight {
            // A logged batch is all or nothing: count the keys showing the intent's value where
            // no earlier state explains it.
            let mut shows_new = 0;
            let mut distinguishable = 0;
            for (k, new) in &i.writes {
                let before = allowed(k);
                let actual = read(k)?;
                if before.contains(new) {
                    if !before.contains(&actual) {
                        bail!("key {k}: value {actual:?} is none of {before:?}");
                    }
                    continue;
                }
                distinguishable += 1;
                if &actual == new {
                    shows_new += 1;
                } else if !before.contains(&actual) {
                    bail!("key {k}: value {actual:?} is neither of {before:?} nor the in-flight {new:?}");
                }
            }
            let applied = shows_new > 0;
            if applied && shows_new != distinguishable && !r.in_flight_unlogged {
                bail!("in-flight batch {} applied to {shows_new} of {distinguishable} keys: not atomic", i.seq);
            }
            if applied {
                v.in_flight_applied += 1;
                log.line(&format!("A {}", i.seq))?;
            } else {
                v.in_flight_absent += 1;
                log.line(&format!("X {}", i.seq))?;
            }
            for (k, new) in &i.writes {
                let mut values = allowed(k);
                values.push(new.clone());
                settle.insert(k.clone(), values);
            }
        }
        for (k, val) in &r.model {
            all_expected.insert(k.clone(), val.clone());
        }
        for (k, values) in settle {
            let actual = read(&k)?;
            if !values.contains(&actual) {
                bail!("key {k}: value {actual:?} is none of {values:?} (an acknowledged write was lost or a stale value resurfaced)");
            }
            if r.uncertain.contains_key(&k) {
                v.unlogged_keys_settled += 1;
                if actual != r.model.get(&k).cloned().flatten() {
                    v.unlogged_keys_rolled_back += 1;
                }
            }
            log.found(&k, actual.as_deref())?;
            all_expected.insert(k, actual);
        }
    }
    // Every key: exactly the expected value.
    for (k, want) in &all_expected {
        let got = db.get(k)?;
        if &got != want {
            bail!("key {k}: found {got:?}, expected {want:?} (an acknowledged write was lost or a stale value resurfaced)");
        }
        v.keys_checked += 1;
    }
    // And nothing else: a full scan holds exactly the live expected keys.
    let live: Vec<(&String, &String)> = all_expected
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
        .collect();
    let mut scanned = 0usize;
    for (k, val) in db.scan_all()? {
        match all_expected.get(&k) {
            Some(Some(want)) if *want == val => scanned += 1,
            other => bail!(
                "scan found {k} = {val:?}, which the logs do not explain (expected {other:?})"
            ),
        }
    }
    if scanned != live.len() {
        bail!("scan found {scanned} keys, the logs expect {}", live.len());
    }
    Ok(v)
}

/// Checks that `db` holds, for every thread, exactly the state after some prefix of the
/// thread's acknowledged writes (and possibly its in-flight one): what point-in-time recovery
/// must leave, since a thread issues a write only after the previous one was acknowledged.
/// Returns the acknowledged writes past the prefixes found. Writes nothing to the side logs.
pub(crate) fn verify_prefix(db: &Router, logs: &Path, threads: usize) -> Result<u64> {
    let mut dropped = 0;
    for t in 0..threads {
        let r = replay(&logs.join(format!("thread-{t:02}.log")))?;
        let (start, end) = (format!("t{t:02}-"), format!("t{t:02}-l"));
        let actual = db.range(&start, &end)?;
        // Walk the history, keeping the number of keys whose state differs from the database.
        let mut state: HashMap<String, Option<String>> = HashMap::new();
        let mut differing = actual.len();
        let mut longest = (differing == 0).then_some(0usize);
        let steps = r.history.iter().chain(&r.in_flight);
        for (i, intent) in steps.enumerate() {
            for (k, v) in &intent.writes {
                let found = actual.get(k);
                let before = state.get(k).cloned().flatten();
                let was_equal = before.as_ref() == found;
                let is_equal = v.as_ref() == found;
                state.insert(k.clone(), v.clone());
                match (was_equal, is_equal) {
                    (true, false) => differing += 1,
                    (false, true) => differing -= 1,
                    _ => {}
                }
            }
            if differing == 0 {
                longest = Some(i + 1);
            }
        }
        let Some(prefix) = longest else {
            bail!(
                "thread {t}: the database matches no prefix of its history: a hole ({})",
                explain_mismatch(&actual, &r)
            );
        };
        dropped += (r.history.len() as u64).saturating_sub(prefix as u64);
    }
    Ok(dropped)
}

/// For a failed [`verify_prefix`]: the closest prefix and a few keys that differ there, with
/// the step of the history that wrote the value found.
fn explain_mismatch(actual: &BTreeMap<String, String>, r: &Replayed) -> String {
    let steps: Vec<&Intent> = r.history.iter().chain(&r.in_flight).collect();
    let state_after = |n: usize| {
        let mut state: BTreeMap<String, Option<String>> = BTreeMap::new();
        for intent in &steps[..n] {
            for (k, v) in &intent.writes {
                state.insert(k.clone(), v.clone());
            }
        }
        state
    };
    let differing = |state: &BTreeMap<String, Option<String>>| -> Vec<String> {
        let keys: std::collections::BTreeSet<&String> = state.keys().chain(actual.keys()).collect();
        keys.into_iter()
            .filter(|k| state.get(*k).cloned().flatten().as_ref() != actual.get(*k))
            .cloned()
            .collect()
    };
    let (best, diff) = (0..=steps.len())
        .map(|n| (n, differing(&state_after(n))))
        .min_by_key(|(_, d)| d.len())
        .unwrap_or_default();
    let state = state_after(best);
    let samples: Vec<String> = diff
        .iter()
        .take(3)
        .map(|k| {
            let found = actual.get(k);
            let wrote = steps.iter().position(|i| {
                i.writes
                    .iter()
                    .any(|(wk, wv)| wk == k && wv.as_ref() == found)
            });
            format!(
                "{k}: found {found:?} (written at step {wrote:?}), prefix has {:?}",
                state.get(k).cloned().flatten()
            )
        })
        .collect();
    format!(
        "{} steps, closest prefix {best} differs in {} keys: {}",
        steps.len(),
        diff.len(),
        samples.join("; ")
    )
}
