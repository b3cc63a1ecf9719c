//! Workloads for the simulator: deterministic, seeded operation streams.

use crate::keys::scramble;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_pcg::Pcg64Mcg;
use std::fmt;
use std::str::FromStr;

/// One operation of a workload.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Insert or update `key`.
    Put(u64),
    /// Delete `key`.
    Delete(u64),
    /// Point lookup of `key` (counted in statistics only; the simulator holds no values).
    Read(u64),
}

/// The shape of a workload.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    /// `entries` unique keys inserted in random order.
    FillRandom,
    /// `entries` unique keys inserted in ascending order.
    FillSeq,
    /// A random fill, then `ops` updates of uniformly chosen existing keys.
    UpdateRandom,
    /// A random fill, then `ops` updates of Zipf-distributed keys (hot keys scattered over the
    /// key space).
    UpdateZipf,
    /// A random fill, then `ops` deletes of uniformly chosen keys.
    DeleteRandom,
    /// A random fill, then `ops` operations drawn from the mix.
    Mixed,
}

impl WorkloadKind {
    /// Every kind with its command-line name.
    pub const ALL: [(&'static str, WorkloadKind); 6] = [
        ("fillrandom", WorkloadKind::FillRandom),
        ("fillseq", WorkloadKind::FillSeq),
        ("updaterandom", WorkloadKind::UpdateRandom),
        ("updatezipf", WorkloadKind::UpdateZipf),
        ("deleterandom", WorkloadKind::DeleteRandom),
        ("mixed", WorkloadKind::Mixed),
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }

    fn has_second_phase(self) -> bool {
        !matches!(self, WorkloadKind::FillRandom | WorkloadKind::FillSeq)
    }
}

impl FromStr for WorkloadKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
                format!(
                    "unknown workload {s:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Operation mix of the `mixed` workload, as relative weights.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Mix {
    /// Inserts of new keys.
    pub insert: f64,
    /// Updates of existing keys (uniform).
    pub update: f64,
    /// Deletes of existing keys (uniform).
    pub delete: f64,
    /// Point reads (uniform).
    pub read: f64,
}

impl Default for Mix {
    /// The partial-merge paper's steady state: half inserts of new keys, half deletes.
    fn default() -> Self {
        Mix {
            insert: 0.5,
            update: 0.0,
            delete: 0.5,
            read: 0.0,
        }
    }
}

impl FromStr for Mix {
    type Err = String;
    /// Parses `insert=0.5,delete=0.5` (any subset of insert, update, delete, read).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut mix = Mix {
            insert: 0.0,
            update: 0.0,
            delete: 0.0,
            read: 0.0,
        };
        for part in s.split(',').filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| format!("mix part {part:?} should look like update=0.5"))?;
            let weight: f64 = weight
                .parse()
                .map_err(|_| format!("mix weight {weight:?} is not a number"))?;
            if !(weight.is_finite() && weight >= 0.0) {
                return Err(format!(
                    "mix weight for {name} must be a non-negative number"
                ));
            }
            match name {
                "insert" => mix.insert = weight,
                "update" => mix.update = weight,
                "delete" => mix.delete = weight,
                "read" => mix.read = weight,
                other => {
                    return Err(format!(
                        "unknown mix operation {other:?}; use insert, update, delete or read"
                    ))
                }
            }
        }
        if mix.insert + mix.update + mix.delete + mix.read <= 0.0 {
            return Err("the mix has no operation with a positive weight".to_string());
        }
        Ok(mix)
    }
}

/// A workload description.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    /// The shape.
    pub kind: WorkloadKind,
    /// Keys inserted by the fill phase.
    pub entries: u64,
    /// Operations of the second phase (ignored by the fills).
    pub ops: u64,
    /// Zipf exponent for `updatezipf`.
    pub zipf_theta: f64,
    /// The `mixed` workload's mix.
    pub mix: Mix,
    /// Seed of the random stream.
    pub seed: u64,
}

impl WorkloadSpec {
    /// A workload of `kind` with `entries` keys, `ops` = `entries`, θ = 0.99, seed 42.
    pub fn new(kind: WorkloadKind, entries: u64) -> Self {
        WorkloadSpec {
            kind,
            entries,
            ops: entries,
            zipf_theta: 0.99,
            mix: Mix::default(),
            seed: 42,
        }
    }

    /// Total operations the workload issues.
    pub fn total_ops(&self) -> u64 {
        self.entries
            + if self.kind.has_second_phase() {
                self.ops
            } else {
                0
            }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), String> {
        if self.kind == WorkloadKind::UpdateZipf
            && !(self.zipf_theta.is_finite() && self.zipf_theta > 0.0)
        {
            return Err(format!(
                "zipf theta {} must be a positive number",
                self.zipf_theta
            ));
        }
        if self.kind.has_second_phase() && self.entries == 0 {
            return Err(format!(
                "workload {} needs entries > 0 to update or delete",
                self.kind
            ));
        }
        Ok(())
    }
}

/// Generates a workload's operations and tracks how many keys are live.
pub struct Workload {
    spec: WorkloadSpec,
    rng: Pcg64Mcg,
    zipf: Option<Zipf<f64>>,
    issued: u64,
    /// Keys are `scramble(index)` (or `index` for fillseq) for indexes below `next_index`.
    next_index: u64,
    live: Vec<u64>,
    live_count: u64,
}

impl Workload {
    /// A generator for `spec`.
    pub fn new(spec: WorkloadSpec) -> Result<Self, String> {
        spec.validate()?;
        let zipf = if spec.kind == WorkloadKind::UpdateZipf {
            Some(
                Zipf::new(spec.entries as f64, spec.zipf_theta)
                    .map_err(|e| format!("zipf: {e}"))?,
            )
        } else {
            None
        };
        Ok(Workload {
            rng: Pcg64Mcg::seed_from_u64(spec.seed),
            zipf,
            issued: 0,
            next_index: 0,
            live: Vec::new(),
            live_count: 0,
            spec,
        })
    }

    /// Number of distinct keys currently live (inserted and not deleted).
    pub fn live_keys(&self) -> u64 {
        self.live_count
    }

    fn key(&self, index: u64) -> u64 {
        if self.spec.kind == WorkloadKind::FillSeq {
            index
        } else {
            scramble(index)
        }
    }

    fn set_live(&mut self, index: u64, live: bool) {
        let word = (index / 64) as usize;
        if word >= self.live.len() {
            self.live.resize(word + 1, 0);
        }
        let bit = 1u64 << (index % 64);
        let was = self.live[word] & bit != 0;
        if live && !was {
            self.live[word] |= bit;
            self.live_count += 1;
        } else if !live && was {
            self.live[word] &= !bit;
            self.live_count -= 1;
        }
    }

    fn is_live(&self, index: u64) -> bool {
        self.live
            .get((index / 64) as usize)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    fn insert_new(&mut self) -> Op {
        let index = self.next_index;
        self.next_index += 1;
        self.set_live(index, true);
        Op::Put(self.key(index))
    }

    fn uniform_index(&mut self) -> u64 {
        self.rng.random_range(0..self.next_index.max(1))
    }

    /// A uniformly chosen live index, by rejection; `None` when (almost) nothing is live.
    fn live_index(&mut self) -> Option<u64> {
        if self.live_count == 0 {
            return None;
        }
        for _ in 0..64 {
            let i = self.uniform_index();
            if self.is_live(i) {
                return Some(i);
            }
        }
        None
    }

    fn second_phase_op(&mut self) -> Op {
        match self.spec.kind {
            WorkloadKind::UpdateRandom => {
                let i = self.uniform_index();
                self.set_live(i, true);
                Op::Put(self.key(i))
            }
            WorkloadKind::UpdateZipf => {
                let rank = self.zipf.as_ref().map_or(1.0, |z| z.sample(&mut self.rng)) as u64;
                // Scatter ranks over the fill's indexes: multiplying by a prime larger than the
                // index space is a permutation modulo it.
                let n = self.spec.entries.max(1);
                let i = ((u128::from(rank.saturating_sub(1)) * 2_305_843_009_213_693_951u128)
                    % u128::from(n)) as u64;
                self.set_live(i, true);
                Op::Put(self.key(i))
            }
            WorkloadKind::DeleteRandom => {
                let i = self.uniform_index();
                self.set_live(i, false);
                Op::Delete(self.key(i))
            }
            WorkloadKind::Mixed => {
                let m = self.spec.mix;
                let total = m.insert + m.update + m.delete + m.read;
                let x = self.rng.random::<f64>() * total;
                if x < m.insert {
                    self.insert_new()
                } else if x < m.insert + m.update {
                    let i = self.uniform_index();
                    self.set_live(i, true);
                    Op::Put(self.key(i))
                } else if x < m.insert + m.update + m.delete {
                    match self.live_index() {
                        Some(i) => {
                            self.set_live(i, false);
                            Op::Delete(self.key(i))
                        }
                        None => self.insert_new(),
                    }
                } else {
                    let i = self.uniform_index();
                    Op::Read(self.key(i))
                }
            }
            WorkloadKind::FillRandom | WorkloadKind::FillSeq => self.insert_new(),
        }
    }
}

impl Iterator for Workload {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        if self.issued >= self.spec.total_ops() {
            return None;
        }
        self.issued += 1;
        if self.issued <= self.spec.entries {
            Some(self.insert_new())
        } else {
            Some(self.second_phase_op())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn fills_insert_unique_keys_and_track_liveness() {
        let mut w = Workload::new(WorkloadSpec::new(WorkloadKind::FillRandom, 1000)).unwrap();
        let keys: HashSet<u64> = w
            .by_ref()
            .map(|op| match op {
                Op::Put(k) => k,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(keys.len(), 1000);
        assert_eq!(w.live_keys(), 1000);
        let seq: Vec<Op> = Workload::new(WorkloadSpec::new(WorkloadKind::FillSeq, 3))
            .unwrap()
            .collect();
        assert_eq!(seq, vec![Op::Put(0), Op::Put(1), Op::Put(2)]);
    }

    #[test]
    fn deletes_reduce_the_live_count_and_the_stream_is_seeded() {
        let spec = WorkloadSpec::new(WorkloadKind::DeleteRandom, 1000);
        let mut w = Workload::new(spec.clone()).unwrap();
        let ops: Vec<Op> = w.by_ref().collect();
        assert_eq!(ops.len(), 2000);
        assert!(
            w.live_keys() < 1000 && w.live_keys() > 200,
            "{}",
            w.live_keys()
        );
        let again: Vec<Op> = Workload::new(spec).unwrap().collect();
        assert_eq!(ops, again);
    }

    #[test]
    fn zipf_updates_concentrate_on_few_keys() {
        let mut spec = WorkloadSpec::new(WorkloadKind::UpdateZipf, 10_000);
        spec.ops = 10_000;
        let ops: Vec<Op> = Workload::new(spec).unwrap().skip(10_000).collect();
        let distinct: HashSet<&Op> = ops.iter().collect();
        assert!(distinct.len() < 5_000, "{} distinct keys", distinct.len());
    }

    #[test]
    fn mix_parses_and_rejects_nonsense() {
        let m: Mix = "insert=1,read=3".parse().unwrap();
        assert_eq!(m.read, 3.0);
        assert!("insert=x".parse::<Mix>().is_err());
        assert!("fly=1".parse::<Mix>().is_err());
        assert!("insert=0".parse::<Mix>().is_err());
        assert!("nope".parse::<WorkloadKind>().is_err());
        assert_eq!(
            "updatezipf".parse::<WorkloadKind>().unwrap(),
            WorkloadKind::UpdateZipf
        );
    }
}
