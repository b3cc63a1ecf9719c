//! Generating a phase's operations, one generator per thread.

use crate::keys::{scramble, KeySpace};
use crate::spec::{InsertOrder, KeyDist, PhaseSpec, TPCC_ORDER_BITS};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal, Zipf};
use rand_pcg::Pcg64Mcg;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// The kind of one operation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Insert of a new key.
    Insert,
    /// Update of an existing key.
    Update,
    /// Point read.
    Read,
    /// Short scan.
    Scan,
    /// Long scan.
    LongScan,
    /// Delete.
    Delete,
    /// Read-modify-write.
    Rmw,
}

impl OpKind {
    /// Every kind.
    pub const ALL: [OpKind; 7] = [
        OpKind::Insert,
        OpKind::Update,
        OpKind::Read,
        OpKind::Scan,
        OpKind::LongScan,
        OpKind::Delete,
        OpKind::Rmw,
    ];

    /// Name in results.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Insert => "insert",
            OpKind::Update => "update",
            OpKind::Read => "read",
            OpKind::Scan => "scan",
            OpKind::LongScan => "long_scan",
            OpKind::Delete => "delete",
            OpKind::Rmw => "rmw",
        }
    }

    /// Whether the operation writes.
    pub fn writes(self) -> bool {
        matches!(
            self,
            OpKind::Insert | OpKind::Update | OpKind::Delete | OpKind::Rmw
        )
    }

    /// Index into per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One operation to issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// What to do.
    pub kind: OpKind,
    /// The key number (see [`encode_key`]).
    pub key: u64,
    /// Entries to read, for scans.
    pub scan_length: usize,
}

/// The seed of phase `phase` of a run seeded with `seed`.
pub fn phase_seed(seed: u64, phase: usize) -> u64 {
    seed.wrapping_add(phase as u64 * 7919)
}

/// The seed of thread `thread`'s generator in a phase seeded with `phase_seed`. A benchmark run
/// and an [`crate::OpStream`] derive seeds the same way, so thread 0 of a run and the stream issue
/// the same operations.
pub fn thread_seed(phase_seed: u64, thread: u64) -> u64 {
    phase_seed.wrapping_mul(31).wrapping_add(thread)
}

/// Generates one thread's operations for a phase.
pub struct Generator {
    phase: PhaseSpec,
    space: Arc<KeySpace>,
    rng: Pcg64Mcg,
    zipf: Option<Zipf<f64>>,
    zipf_n: u64,
    cumulative: [f64; 7],
    issued: u64,
    /// Nearly-sorted ingest: pending keys with the step they became pending.
    pending: Vec<(u64, u64)>,
    /// Where each pending key is in `pending`.
    pending_at: HashMap<u64, usize>,
    /// Pending keys in the order they became pending (keys already issued are skipped when
    /// they reach the front), so the longest-waiting one is found without a scan.
    pending_order: VecDeque<u64>,
    normal_mean: f64,
    /// This generator's share of a uniform domain's inserts: the keys `k` with
    /// `k % stream.1 == stream.0` (see [`Generator::with_insert_stream`]).
    insert_stream: (u64, u64),
    /// The share of each value that is random bytes ([`Generator::with_compression_ratio`]).
    compression_ratio: f64,
}

impl Generator {
    /// A generator for `phase` with its own seed.
    pub fn new(phase: &PhaseSpec, space: Arc<KeySpace>, seed: u64) -> Generator {
        let m = &phase.mix;
        let weights = [
            m.insert,
            m.update,
            m.read,
            m.scan,
            m.long_scan,
            m.delete,
            m.rmw,
        ];
        let total: f64 = weights.iter().sum();
        let mut cumulative = [0.0; 7];
        let mut acc = 0.0;
        for (c, w) in cumulative.iter_mut().zip(weights) {
            acc += w / total;
            *c = acc;
        }
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let normal_mean = rng.random::<f64>();
        Generator {
            phase: phase.clone(),
            space,
            rng,
            zipf: None,
            zipf_n: 0,
            cumulative,
            issued: 0,
            pending: Vec::new(),
            pending_at: HashMap::new(),
            pending_order: VecDeque::new(),
            normal_mean,
            insert_stream: (0, 1),
            compression_ratio: 1.0,
        }
    }

    /// Makes values that compress to about `ratio` of their size
    /// ([`crate::WorkloadSpec::compression_ratio`]): that share of random bytes, repeated.
    pub fn with_compression_ratio(mut self, ratio: f64) -> Generator {
        self.compression_ratio = ratio.clamp(f64::MIN_POSITIVE, 1.0);
        self
    }

    /// Makes this generator thread `thread` of `threads` writing one phase: inserts into a
    /// uniform domain (db_bench's fillrandom) draw only keys `k` with `k % threads == thread`,
    /// so the threads' streams are disjoint. Inserts by key index (fillseq, YCSB loads) are
    /// disjoint already: each takes the next index from the shared key space. One thread draws
    /// exactly what a generator without this draws.
    pub fn with_insert_stream(mut self, thread: u64, threads: u64) -> Generator {
        let threads = threads.max(1);
        self.insert_stream = (thread % threads, threads);
        self
    }

    fn pick_kind(&mut self) -> OpKind {
        let x: f64 = self.rng.random();
        let i = self.cumulative.iter().position(|&c| x < c).unwrap_or(6);
        OpKind::ALL[i]
    }

    /// A zipfian rank in [0, n), rebuilding the sampler when n has grown by more than 10%.
    fn zipf_rank(&mut self, n: u64, theta: f64) -> u64 {
        if self.zipf.is_none() || n > self.zipf_n + self.zipf_n / 10 || n < self.zipf_n {
            self.zipf = Zipf::new(n.max(1) as f64, theta).ok();
            self.zipf_n = n;
        }
        let rank = self.zipf.as_ref().map_or(1.0, |z| z.sample(&mut self.rng)) as u64;
        rank.saturating_sub(1).min(n.saturating_sub(1))
    }

    /// The index (in insertion order) of an existing key, by the phase's distribution.
    fn existing_index(&mut self) -> Option<u64> {
        let n = self.space.inserted();
        if n == 0 {
            return None;
        }
        Some(match self.phase.keys.clone() {
            KeyDist::Uniform => self.rng.random_range(0..n),
            KeyDist::Zipfian { theta } => {
                // Scatter hot ranks over the key space: a prime multiplier is a permutation.
                let r = self.zipf_rank(n, theta);
                ((u128::from(r) * 2_305_843_009_213_693_951u128) % u128::from(n)) as u64
            }
            KeyDist::Latest { theta } => n - 1 - self.zipf_rank(n, theta),
            KeyDist::ShiftingZipfian { theta, period_ops } => {
                let r = self.zipf_rank(n, theta);
                let epoch = self.issued / period_ops.max(1);
                let base = (u128::from(r) * 2_305_843_009_213_693_951u128) % u128::from(n);
                ((base + u128::from(scramble(epoch))) % u128::from(n)) as u64
            }
        })
    }

    fn key_of_index(&self, index: u64) -> u64 {
        match self.phase.inserts {
            InsertOrder::Random => scramble(index),
            _ => index,
        }
    }

    /// An existing key, and whether bookkeeping is by index (so it can be marked live/dead).
    fn existing_key(&mut self) -> Option<(u64, Option<u64>)> {
        match self.phase.inserts {
            InsertOrder::UniformUnique { .. }
            | InsertOrder::ShiftingNormal { .. }
            | InsertOrder::TpccNewOrder { .. } => {
                let v = self.space.values.lock();
                if v.keys.is_empty() {
                    return None;
                }
                let i = self.rng.random_range(0..v.keys.len());
                Some((v.keys[i], None))
            }
            InsertOrder::UniformDomain { size } => {
                let k = match &self.phase.keys {
                    KeyDist::Uniform => self.rng.random_range(0..size.max(1)),
                    _ => {
                        let i = self.existing_index()?;
                        i % size.max(1)
                    }
                };
                Some((k, Some(k)))
            }
            _ => {
                let i = self.existing_index()?;
                Some((self.key_of_index(i), Some(i)))
            }
        }
    }

    fn insert_key(&mut self) -> u64 {
        match self.phase.inserts.clone() {
            InsertOrder::Random | InsertOrder::Sequential => {
                let i = self.space.next_index();
                self.space.set_live(i, true);
                self.key_of_index(i)
            }
            InsertOrder::NearlySorted { window } => {
                // Keep `window` pending keys and emit a random one, but never let a key wait
                // `window` steps or more: displacement stays within about the window.
                let window = window.max(1);
                while (self.pending.len() as u64) < window {
                    let i = self.space.next_pending_index();
                    self.pending_at.insert(i, self.pending.len());
                    self.pending.push((i, self.issued));
                    self.pending_order.push_back(i);
                }
                // The longest-waiting key (the smallest among equals: they became pending in
                // key order). O(1) amortized; a scan of the pending keys made a window of 10^5
                // cost 10^5 steps a key.
                while let Some(front) = self.pending_order.front() {
                    if self.pending_at.contains_key(front) {
                        break;
                    }
                    self.pending_order.pop_front();
                }
                let oldest = self
                    .pending_order
                    .front()
                    .and_then(|k| self.pending_at.get(k).copied())
                    .unwrap_or(0);
                let at = if self.issued - self.pending[oldest].1 >= window {
                    oldest
                } else {
                    self.rng.random_range(0..self.pending.len())
                };
                let (k, _) = self.pending.swap_remove(at);
                self.pending_at.remove(&k);
                if let Some(&(moved, _)) = self.pending.get(at) {
                    self.pending_at.insert(moved, at);
                }
                self.space.set_live(k, true);
                k
            }
            InsertOrder::UniformDomain { size } => {
                let size = size.max(1);
                let (stream, streams) = self.insert_stream;
                // Keys below `size` of this stream's residue class; none when the domain is
                // smaller than the thread count, and then the whole domain.
                let slots = size.saturating_sub(stream).div_ceil(streams);
                let k = if slots == 0 {
                    self.rng.random_range(0..size)
                } else {
                    stream + streams * self.rng.random_range(0..slots)
                };
                self.space.raise_inserted(size);
                self.space.set_live(k, true);
                k
            }
            InsertOrder::UniformUnique { domain } => {
                let domain = domain.max(1);
                loop {
                    let k = self.rng.random_range(0..domain);
                    // Taken: the paper inserts keys not currently indexed.
                    if self.space.add_value(k) || self.space.live_keys() >= domain {
                        break k;
                    }
                }
            }
            InsertOrder::ShiftingNormal {
                domain,
                sigma,
                period_inserts,
            } => {
                if self.issued.is_multiple_of(period_inserts.max(1)) && self.issued > 0 {
                    self.normal_mean = self.rng.random::<f64>();
                }
                let d = domain.max(1) as f64;
                let normal = Normal::new(self.normal_mean * d, (sigma * d).max(1.0)).ok();
                let mut k;
                loop {
                    let x = normal.as_ref().map_or(0.0, |n| n.sample(&mut self.rng));
                    k = x.clamp(0.0, d - 1.0) as u64;
                    if self.space.add_value(k) {
                        break;
                    }
                    // Taken: the paper inserts keys not currently indexed.
                    if self.space.live_keys() >= domain {
                        break;
                    }
                }
                k
            }
            InsertOrder::TpccNewOrder { warehouses } => {
                let w = self.rng.random_range(0..warehouses.max(1));
                let d = self.rng.random_range(0..10u64);
                let district = w * 10 + d;
                let mut v = self.space.values.lock();
                let entry = v.districts.entry(district).or_insert((0, 0));
                let order = entry.1;
                entry.1 += 1;
                let key = (district << TPCC_ORDER_BITS) | order;
                drop(v);
                self.space.add_value(key);
                key
            }
        }
    }

    /// The next operation, or `None` when the phase's operation budget (for this thread) is spent.
    pub fn next_op(&mut self, budget: u64) -> Option<Op> {
        if budget > 0 && self.issued >= budget {
            return None;
        }
        let mut kind = self.pick_kind();
        let key = loop {
            match kind {
                OpKind::Insert => break self.insert_key(),
                OpKind::Delete => {
                    if let InsertOrder::TpccNewOrder { warehouses } = self.phase.inserts {
                        // Delete the oldest live order of a random district (one at a time; the
                        // paper removes ten per transaction).
                        let district = self.rng.random_range(0..warehouses.max(1) * 10);
                        let mut v = self.space.values.lock();
                        let next = v.districts.get(&district).copied();
                        match next {
                            Some((oldest, next)) if oldest < next => {
                                if let Some(e) = v.districts.get_mut(&district) {
                                    e.0 += 1;
                                }
                                drop(v);
                                let key = (district << TPCC_ORDER_BITS) | oldest;
                                self.space.remove_value(key);
                                break key;
                            }
                            _ => {
                                drop(v);
                                kind = OpKind::Insert;
                                continue;
                            }
                        }
                    }
                    match self.existing_key() {
                        Some((k, index)) => {
                            match index {
                                Some(i) => self.space.set_live(i, false),
                                None => self.space.remove_value(k),
                            }
                            break k;
                        }
                        None => {
                            kind = OpKind::Insert;
                            continue;
                        }
                    }
                }
                OpKind::Update | OpKind::Rmw => match self.existing_key() {
                    Some((k, index)) => {
                        if let Some(i) = index {
                            self.space.set_updated(i);
                        }
                        break k;
                    }
                    None => {
                        kind = OpKind::Insert;
                        continue;
                    }
                },
                OpKind::Read | OpKind::Scan | OpKind::LongScan => match self.existing_key() {
                    Some((k, _)) => break k,
                    None => break 0,
                },
            }
        };
        let scan_length = match kind {
            OpKind::Scan if self.phase.random_scan_length => {
                self.rng.random_range(1..=self.phase.scan_length.max(1))
            }
            OpKind::Scan => self.phase.scan_length,
            OpKind::LongScan => self.phase.long_scan_length,
            _ => 0,
        };
        self.issued += 1;
        Some(Op {
            kind,
            key,
            scan_length,
        })
    }

    /// Fills `buf` with a value: random bytes, or with a compression ratio below 1 that share
    /// of random bytes repeated to the end (as db_bench makes its values).
    pub fn fill_value(&mut self, buf: &mut [u8]) {
        let rng = &mut self.rng;
        compressible_value(buf, self.compression_ratio, |random| rng.fill(random));
    }
}

/// Makes `value` compress to about `ratio` of its size, as db_bench makes its values: its first
/// `ratio` share (at least a byte) filled by `random`, then repeated to its end. At a ratio of
/// 1 or more, `random` fills all of it.
pub fn compressible_value(value: &mut [u8], ratio: f64, random: impl FnOnce(&mut [u8])) {
    let len = if ratio >= 1.0 {
        value.len()
    } else {
        ((value.len() as f64 * ratio).ceil() as usize)
            .max(1)
            .min(value.len())
    };
    random(&mut value[..len]);
    for i in len..value.len() {
        value[i] = value[i - len];
    }
}
