//! A page-mapped flash translation layer (FTL) model: what an SSD's garbage collection adds to
//! the bytes an LSM tree writes (`docs/scale.md`, section 'The FTL model: `strata_sim::ftl`').
//!
//! The host writes files sequentially and deletes them whole (an LSM tree's tables and logs),
//! and a delete trims the file's pages. The device programs pages in the order writes arrive,
//! into one open erase block at a time: writes of files that are written at the same time
//! interleave in the same blocks, and a block is freed only once every file in it is deleted or
//! its live pages are copied elsewhere. When free blocks run short, garbage collection picks a
//! victim block (greedy: fewest valid pages; or cost-benefit: the classic
//! `(1 − u) · age / (2u)`), copies its valid pages into a separate GC block, and erases it.
//! GC write amplification is NAND pages programmed ÷ host pages written.
//!
//! Spooky's paper measured GC WA with the drive's NAND-write counters and gives no formula
//! (`../shared/notes/spooky.md`, §2); this model is the textbook mechanism, so its absolute
//! values depend on its parameters (over-provisioning, block and page size, victim rule), which
//! every report names.
//!
//! Units: a mapping page is [`FtlConfig::page_size`] bytes (64 KiB by default: LSM files are
//! written whole and sequentially, so coarser pages change little and keep a terabyte device's
//! map at tens of MiB). A file's last, partial page counts as a whole page.

use std::collections::HashMap;
use std::fmt;
use std::io::BufRead;
use strata_exec::file_event::FileEvent;

/// How garbage collection picks the block to clean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VictimPolicy {
    /// The full block with the fewest valid pages.
    Greedy,
    /// The full block maximizing `(1 − u) · age / (2u)`, `u` its valid fraction and `age` the
    /// pages programmed since it was last written (Rosenblum and Ousterhout's LFS cleaner).
    CostBenefit,
}

impl fmt::Display for VictimPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VictimPolicy::Greedy => "greedy",
            VictimPolicy::CostBenefit => "cost-benefit",
        })
    }
}

/// The device.
#[derive(Clone, Debug, PartialEq)]
pub struct FtlConfig {
    /// Physical bytes of flash.
    pub capacity: u64,
    /// The share of `capacity` hidden from the host (spare area for GC), 0 to 1.
    pub over_provisioning: f64,
    /// Bytes of one erase block.
    pub erase_block: u64,
    /// Bytes of one mapping page.
    pub page_size: u64,
    /// Garbage collection runs while fewer than this many blocks are free.
    pub gc_free_blocks: u64,
    /// How GC picks its victim.
    pub victim: VictimPolicy,
}

impl Default for FtlConfig {
    /// The Spooky paper's drive: 960 GB, 7% over-provisioning; 256 MiB erase blocks (a
    /// superblock across the dies), 64 KiB pages, greedy GC.
    fn default() -> Self {
        FtlConfig {
            capacity: 960_000_000_000,
            over_provisioning: 0.07,
            erase_block: 256 << 20,
            page_size: 64 << 10,
            gc_free_blocks: 2,
            victim: VictimPolicy::Greedy,
        }
    }
}

/// A configuration or trace the model cannot run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FtlError {
    /// A setting out of range.
    #[error("FTL setting {name}: {problem}")]
    Config {
        /// The setting.
        name: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The host wrote more live data than the device shows it.
    #[error(
        "the device is full: {live} bytes live, {logical} logical bytes (capacity × (1 − over-provisioning))"
    )]
    Full {
        /// Live bytes after the write.
        live: u64,
        /// The logical capacity.
        logical: u64,
    },
    /// A trace event names a file in a way that cannot be (appended before created, deleted
    /// twice).
    #[error("trace: {0}")]
    Trace(String),
}

/// What the model has counted so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FtlStats {
    /// Pages the host wrote.
    pub host_pages: u64,
    /// Pages programmed for the host and for GC.
    pub nand_pages: u64,
    /// Blocks erased by GC.
    pub erases: u64,
    /// Valid pages now held.
    pub valid_pages: u64,
}

impl FtlStats {
    /// NAND pages ÷ host pages (1 when nothing was written).
    pub fn gc_write_amp(&self) -> f64 {
        if self.host_pages == 0 {
            1.0
        } else {
            self.nand_pages as f64 / self.host_pages as f64
        }
    }
}

/// Reads a text trace ([`FileEvent`] lines, blank lines skipped) and hands each event to
/// `apply`; an unreadable or bad line, or an event `apply` refuses, is an error naming the line.
pub fn replay_events(
    trace: impl BufRead,
    mut apply: impl FnMut(FileEvent) -> Result<(), FtlError>,
) -> Result<(), FtlError> {
    for (n, line) in trace.lines().enumerate() {
        let at = |e: String| FtlError::Trace(format!("line {}: {e}", n + 1));
        let line = line.map_err(|e| at(format!("reading: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let event: FileEvent = line.parse().map_err(at)?;
        apply(event).map_err(|e| at(e.to_string()))?;
    }
    Ok(())
}

/// One point of a device's timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct FtlSample {
    /// Bytes the host had written.
    pub host_bytes: u64,
    /// GC write amplification so far.
    pub gc_write_amp: f64,
    /// GC write amplification over the interval since the previous sample.
    pub interval_gc_write_amp: f64,
    /// Live bytes ÷ logical bytes.
    pub utilization: f64,
}

/// A device's run: the settings, the totals and the timeline.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct FtlReport {
    /// Physical bytes.
    pub capacity: u64,
    /// Spare share.
    pub over_provisioning: f64,
    /// Erase-block bytes.
    pub erase_block: u64,
    /// Mapping-page bytes.
    pub page_size: u64,
    /// The victim rule.
    pub victim: String,
    /// Bytes the host wrote.
    pub host_bytes: u64,
    /// Bytes programmed (host and GC).
    pub nand_bytes: u64,
    /// Blocks erased.
    pub erases: u64,
    /// NAND ÷ host bytes.
    pub gc_write_amp: f64,
    /// Live ÷ logical bytes at the end.
    pub utilization: f64,
    /// Samples, one per erase block's worth of host writes.
    pub timeline: Vec<FtlSample>,
}

/// Feeds an [`Ftl`] file events and samples its timeline once per erase block of host writes.
#[derive(Debug)]
pub struct FtlRecorder {
    ftl: Ftl,
    timeline: Vec<FtlSample>,
    last: FtlStats,
    /// The first event the device refused (recording stops there).
    error: Option<FtlError>,
}

impl FtlRecorder {
    /// Records into `ftl`.
    pub fn new(ftl: Ftl) -> Self {
        FtlRecorder {
            ftl,
            timeline: Vec::new(),
            last: FtlStats::default(),
            error: None,
        }
    }

    /// Applies one event, sampling when an erase block's worth of host pages has passed. After
    /// the first refused event nothing more is applied, and [`FtlRecorder::finish`] reports it.
    pub fn apply(&mut self, event: FileEvent) -> Result<(), FtlError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if let Err(e) = self.ftl.apply(event) {
            self.error = Some(e.clone());
            return Err(e);
        }
        let s = self.ftl.stats();
        if s.host_pages - self.last.host_pages >= u64::from(self.ftl.pages_per_block) {
            self.sample();
        }
        Ok(())
    }

    fn sample(&mut self) {
        let s = self.ftl.stats();
        let host = s.host_pages - self.last.host_pages;
        self.timeline.push(FtlSample {
            host_bytes: s.host_pages * self.ftl.config.page_size,
            gc_write_amp: s.gc_write_amp(),
            interval_gc_write_amp: if host == 0 {
                1.0
            } else {
                (s.nand_pages - self.last.nand_pages) as f64 / host as f64
            },
            utilization: self.ftl.utilization(),
        });
        self.last = s;
    }

    /// The report, or the first event the device refused.
    pub fn finish(mut self) -> Result<FtlReport, FtlError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.sample();
        let s = self.ftl.stats();
        let c = &self.ftl.config;
        Ok(FtlReport {
            capacity: c.capacity,
            over_provisioning: c.over_provisioning,
            erase_block: c.erase_block,
            page_size: c.page_size,
            victim: c.victim.to_string(),
            host_bytes: s.host_pages * c.page_size,
            nand_bytes: s.nand_pages * c.page_size,
            erases: s.erases,
            gc_write_amp: s.gc_write_amp(),
            utilization: self.ftl.utilization(),
            timeline: self.timeline,
        })
    }
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Block {
    valid: u32,
    /// Pages programmed so far (a block is full at `pages_per_block`).
    written: u32,
    /// The device's page clock when the block was last programmed (for cost-benefit).
    last_write: u64,
}

#[derive(Clone, Debug, Default)]
struct File {
    /// Physical page of each of the file's pages.
    pages: Vec<u32>,
    bytes: u64,
}

/// The FTL: a page map, blocks with valid counts, a host write point and a GC write point.
#[derive(Debug)]
pub struct Ftl {
    config: FtlConfig,
    pages_per_block: u32,
    blocks: Vec<Block>,
    /// Owner of each physical page: (file slot, page index in the file), or `NONE` slot.
    owner: Vec<(u32, u32)>,
    free: Vec<u32>,
    host_block: Option<u32>,
    gc_block: Option<u32>,
    files: Vec<Option<File>>,
    slots: HashMap<u64, u32>,
    clock: u64,
    stats: FtlStats,
    logical_pages: u64,
}

impl Ftl {
    /// An empty (freshly trimmed) device.
    pub fn new(config: FtlConfig) -> Result<Ftl, FtlError> {
        let bad = |name, problem: String| Err(FtlError::Config { name, problem });
        if !(0.0..1.0).contains(&config.over_provisioning) {
            return bad(
                "over_provisioning",
                format!("is {}; it must be in [0, 1)", config.over_provisioning),
            );
        }
        if config.page_size == 0 || config.erase_block < config.page_size {
            return bad(
                "erase_block",
                format!(
                    "is {} bytes; it must hold at least one page of {} bytes",
                    config.erase_block, config.page_size
                ),
            );
        }
        let pages_per_block = config.erase_block / config.page_size;
        let blocks = config.capacity / config.erase_block;
        if pages_per_block > u64::from(u32::MAX) || blocks * pages_per_block >= u64::from(NONE) {
            return bad(
                "page_size",
                format!(
                    "{} bytes makes {} pages; the map holds at most {}",
                    config.page_size,
                    blocks * pages_per_block,
                    NONE
                ),
            );
        }
        if blocks < config.gc_free_blocks + 2 {
            return bad(
                "capacity",
                format!(
                    "holds {blocks} erase blocks; GC needs more than {} spare",
                    config.gc_free_blocks + 2
                ),
            );
        }
        let logical_pages =
            ((blocks * pages_per_block) as f64 * (1.0 - config.over_provisioning)) as u64;
        Ok(Ftl {
            pages_per_block: pages_per_block as u32,
            blocks: vec![
                Block {
                    valid: 0,
                    written: 0,
                    last_write: 0,
                };
                blocks as usize
            ],
            owner: vec![(NONE, 0); (blocks * pages_per_block) as usize],
            free: (0..blocks as u32).rev().collect(),
            host_block: None,
            gc_block: None,
            files: Vec::new(),
            slots: HashMap::new(),
            clock: 0,
            stats: FtlStats::default(),
            logical_pages,
            config,
        })
    }

    /// The counters.
    pub fn stats(&self) -> FtlStats {
        self.stats
    }

    /// The settings.
    pub fn config(&self) -> &FtlConfig {
        &self.config
    }

    /// Valid pages ÷ logical pages: how full the host's view of the device is.
    pub fn utilization(&self) -> f64 {
        self.stats.valid_pages as f64 / self.logical_pages.max(1) as f64
    }

    /// Starts file `id` (empty).
    pub fn create(&mut self, id: u64) -> Result<(), FtlError> {
        if self.slots.contains_key(&id) {
            return Err(FtlError::Trace(format!(
                "file {id} created while it exists"
            )));
        }
        let slot = self.files.len() as u32;
        self.files.push(Some(File::default()));
        self.slots.insert(id, slot);
        Ok(())
    }

    /// Appends `bytes` to file `id`: every page the file's end reaches into is programmed (a
    /// partial last page once, when first touched).
    pub fn append(&mut self, id: u64, bytes: u64) -> Result<(), FtlError> {
        let slot = *self
            .slots
            .get(&id)
            .ok_or_else(|| FtlError::Trace(format!("append to file {id}, which does not exist")))?;
        let page = self.config.page_size;
        let (before, after) = {
            let file = self.files[slot as usize].as_mut().expect("a live slot");
            let before = file.pages.len() as u64;
            file.bytes += bytes;
            (before, file.bytes.div_ceil(page))
        };
        for index in before..after {
            if self.stats.valid_pages + 1 > self.logical_pages {
                return Err(FtlError::Full {
                    live: (self.stats.valid_pages + 1) * page,
                    logical: self.logical_pages * page,
                });
            }
            let physical = self.program(false, (slot, index as u32))?;
            self.files[slot as usize]
                .as_mut()
                .expect("a live slot")
                .pages
                .push(physical);
            self.stats.host_pages += 1;
        }
        Ok(())
    }

    /// Cuts file `id` to `len` bytes, trimming the pages past its new end (a partial last page
    /// stays).
    pub fn truncate(&mut self, id: u64, len: u64) -> Result<(), FtlError> {
        let slot = *self.slots.get(&id).ok_or_else(|| {
            FtlError::Trace(format!("truncate of file {id}, which does not exist"))
        })?;
        let keep = len.div_ceil(self.config.page_size) as usize;
        let cut: Vec<u32> = {
            let file = self.files[slot as usize].as_mut().expect("a live slot");
            file.bytes = file.bytes.min(len);
            if keep >= file.pages.len() {
                return Ok(());
            }
            file.pages.split_off(keep)
        };
        for physical in cut {
            self.invalidate(physical);
        }
        Ok(())
    }

    /// Applies one event of a file trace.
    pub fn apply(&mut self, event: FileEvent) -> Result<(), FtlError> {
        match event {
            FileEvent::Create(id) => self.create(id),
            FileEvent::Append(id, bytes) => self.append(id, bytes),
            FileEvent::Truncate(id, len) => self.truncate(id, len),
            FileEvent::Delete(id) => self.delete(id),
        }
    }

    /// Replays a text trace ([`FileEvent`] lines), calling `sample` after every event; errors
    /// name the line.
    pub fn replay(
        &mut self,
        trace: impl BufRead,
        mut sample: impl FnMut(&Ftl),
    ) -> Result<(), FtlError> {
        replay_events(trace, |event| {
            self.apply(event)?;
            sample(self);
            Ok(())
        })
    }

    /// Deletes file `id`, trimming its pages.
    pub fn delete(&mut self, id: u64) -> Result<(), FtlError> {
        let slot = self
            .slots
            .remove(&id)
            .ok_or_else(|| FtlError::Trace(format!("delete of file {id}, which does not exist")))?;
        let file = self.files[slot as usize].take().expect("a live slot");
        for physical in file.pages {
            self.invalidate(physical);
        }
        Ok(())
    }

    fn invalidate(&mut self, physical: u32) {
        let block = (physical / self.pages_per_block) as usize;
        self.blocks[block].valid -= 1;
        self.owner[physical as usize] = (NONE, 0);
        self.stats.valid_pages -= 1;
    }

    /// Programs one page for `owner` at the host (or GC) write point, cleaning first if free
    /// blocks ran short.
    fn program(&mut self, gc: bool, owner: (u32, u32)) -> Result<u32, FtlError> {
        let point = if gc { self.gc_block } else { self.host_block };
        let block = match point {
            Some(b) if self.blocks[b as usize].written < self.pages_per_block => b,
            _ => {
                if !gc {
                    self.collect()?;
                }
                let b = self.free.pop().ok_or(FtlError::Full {
                    live: self.stats.valid_pages * self.config.page_size,
                    logical: self.logical_pages * self.config.page_size,
                })?;
                self.blocks[b as usize] = Block {
                    valid: 0,
                    written: 0,
                    last_write: self.clock,
                };
                if gc {
                    self.gc_block = Some(b);
                } else {
                    self.host_block = Some(b);
                }
                b
            }
        };
        let meta = &mut self.blocks[block as usize];
        let physical = block * self.pages_per_block + meta.written;
        meta.written += 1;
        meta.valid += 1;
        meta.last_write = self.clock;
        self.clock += 1;
        self.owner[physical as usize] = owner;
        self.stats.nand_pages += 1;
        self.stats.valid_pages += 1;
        Ok(physical)
    }

    /// Cleans blocks until more than `gc_free_blocks` are free.
    fn collect(&mut self) -> Result<(), FtlError> {
        while (self.free.len() as u64) <= self.config.gc_free_blocks {
            let Some(victim) = self.victim() else {
                return Ok(());
            };
            let start = victim * self.pages_per_block;
            for physical in start..start + self.pages_per_block {
                let (slot, index) = self.owner[physical as usize];
                if slot == NONE {
                    continue;
                }
                self.invalidate(physical);
                let moved = self.program(true, (slot, index))?;
                if let Some(file) = self.files[slot as usize].as_mut() {
                    file.pages[index as usize] = moved;
                }
            }
            self.blocks[victim as usize] = Block {
                valid: 0,
                written: 0,
                last_write: self.clock,
            };
            self.free.push(victim);
            self.stats.erases += 1;
        }
        Ok(())
    }

    /// The full block to clean: not a write point, chosen by the victim policy; `None` if no
    /// full block has an invalid page.
    fn victim(&self) -> Option<u32> {
        let full = self.pages_per_block;
        let candidates = self.blocks.iter().enumerate().filter(|(i, b)| {
            let i = *i as u32;
            b.written == full
                && b.valid < full
                && Some(i) != self.host_block
                && Some(i) != self.gc_block
        });
        match self.config.victim {
            VictimPolicy::Greedy => candidates
                .min_by_key(|(_, b)| b.valid)
                .map(|(i, _)| i as u32),
            VictimPolicy::CostBenefit => candidates
                .max_by(|(_, a), (_, b)| {
                    self.benefit(a)
                        .partial_cmp(&self.benefit(b))
                        .unwrap_or(std::cmp::Ordering::Equal)
                })
                .map(|(i, _)| i as u32),
        }
    }

    fn benefit(&self, block: &Block) -> f64 {
        let u = f64::from(block.valid) / f64::from(self.pages_per_block);
        let age = (self.clock - block.last_write) as f64 + 1.0;
        if u == 0.0 {
            f64::INFINITY
        } else {
            (1.0 - u) * age / (2.0 * u)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small device: 64 blocks of 16 pages of 4 KiB.
    fn small(op: f64, victim: VictimPolicy) -> Ftl {
        Ftl::new(FtlConfig {
            capacity: 64 * 16 * 4096,
            over_provisioning: op,
            erase_block: 16 * 4096,
            page_size: 4096,
            gc_free_blocks: 2,
            victim,
        })
        .unwrap()
    }

    #[test]
    fn files_written_one_at_a_time_and_deleted_whole_need_no_copies() {
        // Full merges in miniature: one big file at a time, the oldest deleted as the device
        // fills, many times over.
        let mut ftl = small(0.07, VictimPolicy::Greedy);
        for id in 0..200u64 {
            ftl.create(id).unwrap();
            ftl.append(id, 8 * 16 * 4096).unwrap(); // 8 blocks
            if id >= 5 {
                ftl.delete(id - 5).unwrap();
            }
        }
        let s = ftl.stats();
        assert!(s.erases > 100, "{s:?}");
        assert_eq!(s.gc_write_amp(), 1.0, "{s:?}");
    }

    /// Writes `files` one-page files, deleting a random live one whenever the host's view of
    /// the device is fuller than `fill`: lifetimes mix in every block. Returns the GC WA.
    fn churn(ftl: &mut Ftl, files: u64, fill: f64, seed: u64) -> f64 {
        let mut live: Vec<u64> = Vec::new();
        let mut rng = seed;
        for id in 0..files {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            ftl.create(id).unwrap();
            ftl.append(id, 4096).unwrap();
            live.push(id);
            if ftl.utilization() > fill {
                let i = (rng % live.len() as u64) as usize;
                ftl.delete(live.swap_remove(i)).unwrap();
            }
        }
        ftl.stats().gc_write_amp()
    }

    #[test]
    fn small_files_with_mixed_lifetimes_make_gc_copy() {
        for victim in [VictimPolicy::Greedy, VictimPolicy::CostBenefit] {
            let wa = churn(&mut small(0.07, victim), 30_000, 0.85, 5);
            assert!(wa > 1.5, "{victim}: GC WA {wa}");
        }
    }

    /// Over-provisioning only hides flash from the host: it lowers GC because the host's full
    /// device is then less of the flash.
    #[test]
    fn more_over_provisioning_means_less_gc() {
        // The host keeps its view of the device 90% full: with more spare area the same share
        // of the logical space is less of the flash.
        let run = |op| churn(&mut small(op, VictimPolicy::Greedy), 40_000, 0.9, 11);
        let (tight, roomy) = (run(0.07), run(0.28));
        assert!(roomy < tight, "OP 28%: {roomy}, OP 7%: {tight}");
    }

    #[test]
    fn a_full_device_and_a_bad_trace_are_errors_that_name_the_problem() {
        let mut ftl = small(0.5, VictimPolicy::Greedy);
        ftl.create(1).unwrap();
        let err = ftl.append(1, 64 * 16 * 4096).unwrap_err();
        assert!(matches!(err, FtlError::Full { .. }), "{err}");
        assert!(ftl.append(2, 1).unwrap_err().to_string().contains("file 2"));
        assert!(ftl.delete(3).unwrap_err().to_string().contains("file 3"));
        assert!(ftl.create(1).unwrap_err().to_string().contains("file 1"));
        let bad = Ftl::new(FtlConfig {
            over_provisioning: 1.5,
            ..FtlConfig::default()
        })
        .unwrap_err();
        assert!(bad.to_string().contains("over_provisioning"), "{bad}");
    }

    #[test]
    fn a_trace_replays_with_truncates_and_names_its_bad_line() {
        let mut ftl = small(0.07, VictimPolicy::Greedy);
        let trace = "c 1\na 1 40000\nt 1 4096\nc 2\na 2 8192\nd 1\n";
        let mut samples = 0;
        ftl.replay(trace.as_bytes(), |_| samples += 1).unwrap();
        assert_eq!(samples, 6);
        // 10 pages for file 1 (40,000 bytes), 2 for file 2; file 1 cut to one page, then gone.
        assert_eq!(ftl.stats().host_pages, 12);
        assert_eq!(ftl.stats().valid_pages, 2);
        let err = ftl.replay("c 3\nq 3\n".as_bytes(), |_| {}).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = ftl.replay("a 9 1\n".as_bytes(), |_| {}).unwrap_err();
        assert!(
            err.to_string().contains("line 1") && err.to_string().contains("file 9"),
            "{err}"
        );
    }

    #[test]
    fn the_papers_drive_fits_its_map_in_memory() {
        let ftl = Ftl::new(FtlConfig::default()).unwrap();
        // 960 GB in 64 KiB pages: 14.6 M pages, 8 bytes of owner each.
        assert_eq!(ftl.owner.len(), 3_576 * 4096);
        assert!(ftl.utilization() == 0.0);
    }
}
