//! The physical view of a run: what the process cost the machine (CPU time, bytes sent to and
//! fetched from the storage device, peak resident memory), the block device's own counters, and
//! the device's sequential write bandwidth, to set the device bytes against. Read from Linux's
//! `/proc` and `/sys`; elsewhere every reading is `None` (or zero CPU time), never an error,
//! because a benchmark should still run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// CPU seconds (user + system) this process has used, from /proc (Linux; clock ticks are
/// assumed to be 100 per second, Linux's fixed USER_HZ).
pub fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name: utime is the 12th, stime the 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// The whole machine's CPU time from the first line of `/proc/stat`, in clock ticks: all of it,
/// and what the hypervisor gave to other guests while this one had work (*steal*). On a virtual
/// machine whose neighbours are busy, steal slows every run it falls in, measured by far more
/// than its share ([`crate::results::RunResult::steal_share`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineCpu {
    /// Ticks stolen by the hypervisor (`steal`, the eighth field).
    pub steal: u64,
    /// Ticks of every state: user, nice, system, idle, iowait, irq, softirq and steal (guest
    /// time is counted within user already).
    pub total: u64,
}

/// Steal at or above this share of the machine's CPU time during a run is worth a warning: the
/// reports name such runs.
pub const STEAL_WORTH_NOTING: f64 = 0.05;

impl MachineCpu {
    /// The counters now, where `/proc/stat` exists.
    pub fn now() -> Option<Self> {
        parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The share of the machine's CPU time from `earlier` to `self` that was stolen; `None` when
    /// no time passed.
    pub fn steal_share_since(&self, earlier: &MachineCpu) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total).filter(|&t| t > 0)?;
        let steal = self.steal.saturating_sub(earlier.steal);
        Some(steal as f64 / total as f64)
    }
}

/// Parses the text of `/proc/stat`: its `cpu` line (all CPUs together). A kernel that reports no
/// steal field (before 2.6.11) reports no steal.
pub fn parse_proc_stat(text: &str) -> Option<MachineCpu> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    (ticks.len() >= 4).then(|| MachineCpu {
        steal: ticks.get(7).copied().unwrap_or(0),
        total: ticks.iter().sum(),
    })
}

/// The storage counters of `/proc/self/io`: what this process (all its threads) made the
/// storage layer read and write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessIo {
    /// Bytes fetched from storage for this process (`read_bytes`): page-cache misses and direct
    /// reads, not reads the page cache served.
    pub read_bytes: u64,
    /// Bytes this process caused to be sent to storage (`write_bytes`), counted when they dirty
    /// the page cache.
    pub write_bytes: u64,
    /// Dirty bytes it cancelled by truncating or deleting files before writeback
    /// (`cancelled_write_bytes`).
    pub cancelled_write_bytes: u64,
}

/// Parses the text of `/proc/<pid>/io`; `None` when a field is missing or not a number.
pub fn parse_proc_io(text: &str) -> Option<ProcessIo> {
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
    };
    Some(ProcessIo {
        read_bytes: field("read_bytes")?,
        write_bytes: field("write_bytes")?,
        cancelled_write_bytes: field("cancelled_write_bytes")?,
    })
}

/// This process's storage counters, where `/proc/self/io` exists.
pub fn process_io() -> Option<ProcessIo> {
    parse_proc_io(&std::fs::read_to_string("/proc/self/io").ok()?)
}

/// Bytes this process (all its threads) has caused to be sent to the storage layer, net of
/// dirty page-cache bytes it cancelled by truncating or deleting files before they were written
/// back: `write_bytes − cancelled_write_bytes` of `/proc/self/io`. Buffered writes count when
/// they dirty the page cache, so this is what the device receives (WAL, flushes, compactions,
/// manifest) even when writeback happens later. `None` where `/proc/self/io` is missing.
pub fn device_bytes_written() -> Option<u64> {
    let io = process_io()?;
    Some(io.write_bytes.saturating_sub(io.cancelled_write_bytes))
}

/// Bytes this process has had fetched from the storage layer (`read_bytes` of
/// `/proc/self/io`): reads that missed the page cache, and direct reads. `None` where
/// `/proc/self/io` is missing.
pub fn process_bytes_read() -> Option<u64> {
    Some(process_io()?.read_bytes)
}

/// Bytes in a sector of the block layer's counters (always 512, whatever the device's own
/// sector size).
pub const SECTOR_BYTES: u64 = 512;

/// The counters of a block device (or partition) since boot, from its `stat` file in sysfs
/// (`Documentation/block/stat.rst` of the Linux sources). They count every process's I/O on the
/// device, not only this one's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockDeviceStat {
    /// Read requests completed.
    pub reads: u64,
    /// 512-byte sectors read.
    pub sectors_read: u64,
    /// Write requests completed.
    pub writes: u64,
    /// 512-byte sectors written.
    pub sectors_written: u64,
}

impl BlockDeviceStat {
    /// Bytes read.
    pub fn bytes_read(&self) -> u64 {
        self.sectors_read.saturating_mul(SECTOR_BYTES)
    }

    /// Bytes written.
    pub fn bytes_written(&self) -> u64 {
        self.sectors_written.saturating_mul(SECTOR_BYTES)
    }

    /// The counts from `earlier` to `self`.
    pub fn since(&self, earlier: &BlockDeviceStat) -> BlockDeviceStat {
        BlockDeviceStat {
            reads: self.reads.saturating_sub(earlier.reads),
            sectors_read: self.sectors_read.saturating_sub(earlier.sectors_read),
            writes: self.writes.saturating_sub(earlier.writes),
            sectors_written: self.sectors_written.saturating_sub(earlier.sectors_written),
        }
    }
}

/// Parses a block device's `stat` file: 11 or more numbers (reads completed, reads merged,
/// sectors read, ms reading, writes completed, writes merged, sectors written, ...), or the 4 of
/// a partition's on kernels before 2.6.25 (reads, sectors read, writes, sectors written);
/// `None` for anything else.
pub fn parse_block_stat(text: &str) -> Option<BlockDeviceStat> {
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    match fields.len() {
        4 => Some(BlockDeviceStat {
            reads: fields[0],
            sectors_read: fields[1],
            writes: fields[2],
            sectors_written: fields[3],
        }),
        n if n >= 11 => Some(BlockDeviceStat {
            reads: fields[0],
            sectors_read: fields[2],
            writes: fields[4],
            sectors_written: fields[6],
        }),
        _ => None,
    }
}

/// The block device that holds a path: its number and where sysfs keeps its counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    /// Major device number.
    pub major: u32,
    /// Minor device number.
    pub minor: u32,
    /// Its `stat` file (`/sys/dev/block/<major>:<minor>/stat`).
    pub stat_path: PathBuf,
}

impl BlockDevice {
    /// The block device holding `path`, if it is a real one whose counters sysfs shows. A
    /// partition's counters are its own; a file system with no block device under it (tmpfs,
    /// overlay, btrfs subvolumes, network file systems: anonymous device numbers) gives `None`.
    pub fn holding(path: &Path) -> Option<BlockDevice> {
        BlockDevice::holding_in(path, Path::new("/sys"))
    }

    /// [`BlockDevice::holding`] with sysfs mounted at `sysfs` (for tests).
    pub fn holding_in(path: &Path, sysfs: &Path) -> Option<BlockDevice> {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(path).ok()?.dev();
        let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
        let stat_path = sysfs.join(format!("dev/block/{major}:{minor}/stat"));
        let device = BlockDevice {
            major,
            minor,
            stat_path,
        };
        device.stat().map(|_| device)
    }

    /// The whole disk this device is a partition of, or itself when it is none (sysfs at
    /// `sysfs`): the kernel throttles I/O per disk, not per partition. A partition's sysfs
    /// directory sits in its disk's, whose `dev` file holds the disk's number.
    pub fn disk_in(&self, sysfs: &Path) -> BlockDevice {
        let node = sysfs.join(format!("dev/block/{}:{}", self.major, self.minor));
        let disk = node
            .join("partition")
            .is_file()
            .then(|| std::fs::canonicalize(&node).ok())
            .flatten()
            .and_then(|dir| std::fs::read_to_string(dir.parent()?.join("dev")).ok())
            .and_then(|text| {
                let (major, minor) = text.trim().split_once(':')?;
                Some((major.parse().ok()?, minor.parse().ok()?))
            });
        match disk {
            Some((major, minor)) => BlockDevice {
                major,
                minor,
                stat_path: sysfs.join(format!("dev/block/{major}:{minor}/stat")),
            },
            None => self.clone(),
        }
    }

    /// The device's counters now, if readable.
    pub fn stat(&self) -> Option<BlockDeviceStat> {
        parse_block_stat(&std::fs::read_to_string(&self.stat_path).ok()?)
    }
}

/// Where Linux takes the order to drop clean caches.
pub const DROP_CACHES_PATH: &str = "/proc/sys/vm/drop_caches";

/// Checks that this process may drop the page cache ([`drop_page_cache`]) by opening
/// [`DROP_CACHES_PATH`] for writing, without writing: it takes root (and a writable `/proc/sys`,
/// which containers often lack).
pub fn check_drop_caches() -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(DROP_CACHES_PATH)
        .map(drop)
}

/// Writes every dirty page back (`sync`) and then drops the clean page cache, dentries and
/// inodes (`3` into [`DROP_CACHES_PATH`]), so the next reads come from the device. Machine-wide:
/// every process's cached files go.
pub fn drop_page_cache() -> std::io::Result<()> {
    rustix::fs::sync();
    std::fs::OpenOptions::new()
        .write(true)
        .open(DROP_CACHES_PATH)?
        .write_all(b"3")
}

/// The process's peak resident set size since it started or since the last
/// [`reset_peak_rss`] (`VmHWM` of `/proc/self/status`), in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|kib| kib * 1024)
}

/// The process's resident set size now (`VmRSS` of `/proc/self/status`), in bytes.
pub fn rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|kib| kib * 1024)
}

/// A `kB` field of `/proc/self/status`.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// Resets [`peak_rss_bytes`] to the current resident size (Linux's `clear_refs` value 5);
/// whether it could. A run in a process of its own needs no reset; a run after others in one
/// process does, and still inherits the memory its predecessors freed but the allocator kept.
pub fn reset_peak_rss() -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/clear_refs")
        .and_then(|mut f| f.write_all(b"5"))
        .is_ok()
}

/// Measures the sequential write bandwidth of the device holding `dir`, in bytes per second:
/// writes `bytes` in 1 MiB pieces to a new file there, syncs it, and removes it. The sync is
/// inside the timing, so the page cache cannot flatter the figure.
pub fn sequential_write_bandwidth(dir: &Path, bytes: u64) -> std::io::Result<f64> {
    const PIECE: usize = 1 << 20;
    let path = dir.join("strata-bench-bandwidth.tmp");
    let result = (|| {
        let mut file = std::fs::File::create(&path)?;
        // Not zeros: a compressing or deduplicating file system would skip them.
        let piece: Vec<u8> = (0..PIECE)
            .map(|i| {
                (i as u64)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    .rotate_right(29) as u8
            })
            .collect();
        let started = Instant::now();
        let mut written = 0u64;
        while written < bytes {
            let n = PIECE.min((bytes - written) as usize);
            file.write_all(&piece[..n])?;
            written += n as u64;
        }
        file.sync_all()?;
        let seconds = started.elapsed().as_secs_f64();
        Ok(written as f64 / seconds.max(1e-9))
    })();
    let _ = std::fs::remove_file(&path);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_gives_the_machine_s_steal_and_total() {
        let text = "cpu  100 5 50 800 20 0 5 20 7 0\ncpu0 50 2 25 400 10 0 3 10 3 0\nintr 1\n";
        let before = parse_proc_stat(text).unwrap();
        // guest (7) is inside user already: the total is the first eight fields.
        assert_eq!(
            before,
            MachineCpu {
                steal: 20,
                total: 1000
            }
        );
        let after = parse_proc_stat("cpu  150 5 60 900 25 0 5 80 9 0\n").unwrap();
        assert_eq!(after.total - before.total, 225);
        assert_eq!(after.steal_share_since(&before), Some(60.0 / 225.0));
        assert_eq!(before.steal_share_since(&before), None, "no time passed");
        // A kernel without the steal field reports none; a line that is not numbers, nothing.
        assert_eq!(
            parse_proc_stat("cpu 1 2 3 4\n"),
            Some(MachineCpu {
                steal: 0,
                total: 10
            })
        );
        assert_eq!(parse_proc_stat("cpu 1 2 x 4\n"), None);
        assert_eq!(parse_proc_stat("cpu0 1 2 3 4\n"), None);
        // This machine's own counters, where there are any, read.
        if std::path::Path::new("/proc/stat").exists() {
            assert!(MachineCpu::now().is_some_and(|m| m.total > 0));
        }
    }

    #[test]
    fn proc_io_fields_are_read_by_name() {
        let text = "rchar: 2012\nwchar: 300\nsyscr: 7\nsyscw: 3\nread_bytes: 8192\n\
                    write_bytes: 4096\ncancelled_write_bytes: 1024\n";
        assert_eq!(
            parse_proc_io(text),
            Some(ProcessIo {
                read_bytes: 8192,
                write_bytes: 4096,
                cancelled_write_bytes: 1024
            })
        );
        // rchar is not read_bytes: a prefix of another name does not match.
        assert_eq!(
            parse_proc_io("rchar: 5\nwrite_bytes: 1\ncancelled_write_bytes: 0\n"),
            None
        );
        assert_eq!(
            parse_proc_io("read_bytes: x\nwrite_bytes: 1\ncancelled_write_bytes: 0\n"),
            None
        );
    }

    #[test]
    fn block_stat_takes_reads_and_sectors_from_their_columns() {
        // A disk's line (17 fields on Linux 5.5+).
        let disk =
            "    9856     3802  2253050    12002    11171    26694 10901040    51572        \
                    0     9600    65067     5979       24  3712608     1477      398       15\n";
        let stat = parse_block_stat(disk).unwrap();
        assert_eq!(
            stat,
            BlockDeviceStat {
                reads: 9856,
                sectors_read: 2_253_050,
                writes: 11_171,
                sectors_written: 10_901_040
            }
        );
        assert_eq!(stat.bytes_read(), 2_253_050 * 512);
        // The 11 fields of older kernels, and a partition's 4 of the oldest.
        let eleven = parse_block_stat("1 2 3 4 5 6 7 8 9 10 11").unwrap();
        assert_eq!(
            (eleven.reads, eleven.sectors_read, eleven.writes),
            (1, 3, 5)
        );
        let four = parse_block_stat("10 80 20 160").unwrap();
        assert_eq!(
            (four.reads, four.sectors_read, four.sectors_written),
            (10, 80, 160)
        );
        assert_eq!(parse_block_stat("1 2 3"), None);
        assert_eq!(parse_block_stat("1 2 x 4"), None);
        let later = BlockDeviceStat {
            reads: 15,
            sectors_read: 100,
            writes: 20,
            sectors_written: 160,
        };
        assert_eq!(later.since(&four).reads, 5);
        assert_eq!(later.since(&four).bytes_read(), 20 * 512);
    }

    #[test]
    fn the_device_is_found_through_sysfs_by_its_number() {
        use std::os::unix::fs::MetadataExt;
        let data = tempfile::tempdir().unwrap();
        let sysfs = tempfile::tempdir().unwrap();
        // No stat file: a virtual device.
        assert_eq!(BlockDevice::holding_in(data.path(), sysfs.path()), None);
        let dev = std::fs::metadata(data.path()).unwrap().dev();
        let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
        let dir = sysfs.path().join(format!("dev/block/{major}:{minor}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("stat"), "5 0 40 0 6 0 48 0 0 0 0\n").unwrap();
        let device = BlockDevice::holding_in(data.path(), sysfs.path()).unwrap();
        assert_eq!((device.major, device.minor), (major, minor));
        assert_eq!(device.stat().unwrap().sectors_written, 48);
        // Not a partition: its own disk.
        assert_eq!(device.disk_in(sysfs.path()), device);

        // A partition: sysfs keeps it in its disk's directory, which /sys/dev/block links to.
        let disk_dir = sysfs.path().join("devices/vd");
        let part_dir = disk_dir.join("vd1");
        std::fs::create_dir_all(&part_dir).unwrap();
        std::fs::write(disk_dir.join("dev"), "254:0\n").unwrap();
        std::fs::write(part_dir.join("partition"), "1\n").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&part_dir, &dir).unwrap();
        let disk = device.disk_in(sysfs.path());
        assert_eq!((disk.major, disk.minor), (254, 0));
    }
}
