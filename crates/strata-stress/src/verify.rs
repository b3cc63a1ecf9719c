//! Checking a database against the side logs: everything acknowledged after a crash, or a
//! prefix of every thread's history after a point-in-time recovery.

use crate::expiry::{removable, Expiry};
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
    /// Keys whose expected value read absent, as it may have expired (`--ttl`).
    keys_expired: u64,
    /// ... or, where it could not have expired, as the compaction filter removes it
    /// (`--filter`).
    keys_filtered: u64,
}

/// Checks the database against every thread's side log and resolves in-flight intents, and
/// settles (with `F` lines) what keys written without the WAL hold. With a TTL (`expiry`), a
/// key may read absent where its value may have expired, and nowhere else.
pub(crate) fn verify(db: &Router, logs: &Path, threads: usize, expiry: Expiry) -> Result<Verified> {
    let mut v = Verified::default();
    let mut all_expected: BTreeMap<String, Option<String>> = BTreeMap::new();
    // With a TTL, when each expected value was written (a lower bound).
    let mut all_written: BTreeMap<String, u64> = BTreeMap::new();
    let read = |k: &str| db.get(k);
    for t in 0..threads {
        let path = logs.join(format!("thread-{t:02}.log"));
        let r = replay(&path)?;
        v.acked_writes += r.acked;
        let mut log = SideLog::open(&path)?;
        // What each key may hold: the model's value, or one a lost write left out of the WAL
        // rolls back to, or nothing where its value may have expired (asked after the read).
        let allowed = |k: &str| -> Vec<Option<String>> {
            let model = r.model.get(k).cloned().flatten();
            let gone = expiry.key_may_be_gone(&r.written, k) || removable(model.as_deref());
            let mut values = vec![model];
            values.extend(r.uncertain.get(k).into_iter().flatten().cloned());
            if gone {
                values.push(None);
            }
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
                let actual = read(k)?;
                let before = allowed(k);
                // The batch's values expire together; one gone is no evidence either way.
                if actual.is_none()
                    && (expiry.may_be_gone_now(i.second) || removable(new.as_deref()))
                {
                    continue;
                }
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
        all_written.extend(r.written.iter().map(|(k, w)| (k.clone(), *w)));
        for (k, values) in settle {
            let actual = read(&k)?;
            // Gone where the model's value or the in-flight one may have expired (the clock
            // read after the read), or one the filter removes is among those allowed.
            let gone = actual.is_none()
                && (expiry.key_may_be_gone(&r.written, &k)
                    || values.iter().any(|v| removable(v.as_deref()))
                    || r.in_flight.as_ref().is_some_and(|i| {
                        i.writes.iter().any(|(w, _)| *w == k) && expiry.may_be_gone_now(i.second)
                    }));
            if !values.contains(&actual) && !gone {
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
    let may_be_gone = |k: &str| expiry.key_may_be_gone(&all_written, k);
    // Every key: exactly the expected value, or none where it may have expired.
    for (k, want) in &all_expected {
        let got = db.get(k)?;
        let expired = got.is_none() && want.is_some() && may_be_gone(k);
        let filtered = got.is_none() && removable(want.as_deref()) && !expired;
        v.keys_expired += u64::from(expired);
        v.keys_filtered += u64::from(filtered);
        if &got != want && !expired && !filtered {
            bail!("key {k}: found {got:?}, expected {want:?} (an acknowledged write was lost or a stale value resurfaced)");
        }
        v.keys_checked += 1;
    }
    // And nothing else: a full scan holds exactly the live expected keys (less some that
    // may have expired).
    let mut scanned = std::collections::BTreeSet::new();
    for (k, val) in db.scan_all()? {
        match all_expected.get(&k) {
            Some(Some(want)) if *want == val => {
                scanned.insert(k);
            }
            other => bail!(
                "scan found {k} = {val:?}, which the logs do not explain (expected {other:?})"
            ),
        }
    }
    let missed = all_expected
        .iter()
        .filter(|(k, v)| v.is_some() && !scanned.contains(*k))
        .find(|(k, v)| !may_be_gone(k) && !removable(v.as_deref()));
    if let Some((k, want)) = missed {
        bail!(
            "scan found {} keys and missed {k}, the logs expect {want:?}",
            scanned.len()
        );
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
        // Every key of the thread, its merge keys ("t00-m…") included: the history writes
        // them too, and a range ending at "t00-l" (where the workers' scans end, to miss them)
        // read them as absent, a hole in every case since the crash test began merging.
        let (start, end) = (format!("t{t:02}-"), format!("t{t:02}."));
        let actual = db.range(&start, &end)?;
        let differing = differing_per_prefix(&actual, r.history.iter().chain(&r.in_flight));
        let Some(prefix) = differing.iter().rposition(|&d| d == 0) else {
            bail!(
                "thread {t}: the database matches no prefix of its history: a hole ({})",
                explain_mismatch(&actual, &r, &differing)
            );
        };
        dropped += (r.history.len() as u64).saturating_sub(prefix as u64);
    }
    Ok(dropped)
}

/// For each prefix of `steps` (none, the first step, the first two, …), how many keys differ
/// between the state it leaves and `actual`: one walk, counting each write's change.
fn differing_per_prefix<'a>(
    actual: &BTreeMap<String, String>,
    steps: impl Iterator<Item = &'a Intent>,
) -> Vec<usize> {
    let mut state: HashMap<&String, Option<&String>> = HashMap::new();
    let mut differing = actual.len();
    let mut counts = vec![differing];
    for intent in steps {
        for (k, v) in &intent.writes {
            let found = actual.get(k);
            let was_equal = state.get(k).copied().flatten() == found;
            let is_equal = v.as_ref() == found;
            state.insert(k, v.as_ref());
            match (was_equal, is_equal) {
                (true, false) => differing += 1,
                (false, true) => differing -= 1,
                _ => {}
            }
        }
        counts.push(differing);
    }
    counts
}

/// For a failed [`verify_prefix`]: the closest prefix (the first with the fewest keys
/// `differing`, as [`differing_per_prefix`] counts them) and a few keys that differ there, with
/// the step of the history that wrote the value found.
fn explain_mismatch(
    actual: &BTreeMap<String, String>,
    r: &Replayed,
    differing: &[usize],
) -> String {
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
    let keys_differing = |state: &BTreeMap<String, Option<String>>| -> Vec<String> {
        let keys: std::collections::BTreeSet<&String> = state.keys().chain(actual.keys()).collect();
        keys.into_iter()
            .filter(|k| state.get(*k).cloned().flatten().as_ref() != actual.get(*k))
            .cloned()
            .collect()
    };
    // Counted once for every prefix, not rebuilt per prefix (hours on 10^5 steps).
    let best = (0..differing.len())
        .min_by_key(|&n| differing[n])
        .unwrap_or(0);
    let state = state_after(best);
    let diff = keys_differing(&state);
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
