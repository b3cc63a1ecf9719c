//! Cgroups for `strata bench --memory-limit` and `--device-write-limit`: each run's process
//! gets cgroups of its own. The memory limit covers everything the kernel charges to the run,
//! page cache included, so a database larger than the limit is read from the device instead of
//! from cached pages. The device write limit caps the bytes per second the run writes to the
//! block device holding its database, so a fast SSD can stand in for a slow disk.
//!
//! Both cgroup versions work. Version 2 puts both limits in one cgroup (`memory.max`, with
//! `memory.swap.max` set to 0 where the kernel accounts swap; `io.max` with `wbps=`), and needs
//! each controller in the parent's `cgroup.subtree_control`, which this module enables where it
//! may. Version 1 has a hierarchy per controller: the run gets a cgroup in the `memory` one
//! (`memory.limit_in_bytes`, with `memory.memsw.limit_in_bytes` set to the same where present,
//! so nothing spills to swap) and one in the `blkio` one (`blkio.throttle.write_bps_device`),
//! and joins both. Each parent is looked for under the cgroup this process is in first, then at
//! the hierarchy's root; [`CgroupParent::discover`] proves a parent usable by creating and
//! removing a cgroup with the limit, so a missing controller or permission is reported before
//! any run.
//!
//! Version 1's blkio throttle charges a write to the cgroup of the task that submits it: the
//! run's direct writes and the writeback its own `fsync` and `sync_file_range` calls start, but
//! not dirty pages the kernel's flusher threads write back on their own. Version 2 charges
//! writeback to the cgroup that dirtied the pages. Strata starts the writeback of its WAL and
//! tables itself (`Options::with_bytes_per_sync`, `with_wal_bytes_per_sync`), so its buffered
//! runs keep to the limit under version 1 too: a 400,000-entry fillrandom under a 10 MiB/s cap
//! wrote 123.2 MB at 10.3 MB/s buffered and with direct I/O alike (12.0 s; 1.25 s without the
//! cap). An engine that leaves writeback to the kernel needs `--direct-io` to be held to it.
//!
//! The root of the cgroup file systems is `/sys/fs/cgroup`, or [`ROOT_ENV`] when set (tests
//! point it at a directory tree made to look like one).

use crate::physical::BlockDevice;
use anyhow::{bail, Context, Result};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The environment variable that moves the cgroup root away from `/sys/fs/cgroup`.
pub const ROOT_ENV: &str = "STRATA_BENCH_CGROUP_ROOT";

/// Where Linux mounts the cgroup file systems.
pub const DEFAULT_ROOT: &str = "/sys/fs/cgroup";

/// The cgroup interface a hierarchy speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    /// The legacy per-controller hierarchies (here: `memory` and `blkio`).
    V1,
    /// The unified hierarchy.
    V2,
}

/// A controller a run's limits need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Controller {
    /// Memory, page cache included.
    Memory,
    /// Block I/O (v1 `blkio`, v2 `io`).
    Io,
}

impl Controller {
    /// Its name in a v2 `cgroup.controllers` list.
    fn v2_name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Io => "io",
        }
    }

    /// Its v1 hierarchy: the directory under the cgroup root and the name in
    /// `/proc/self/cgroup`.
    fn v1_name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Io => "blkio",
        }
    }

    /// A file every cgroup of its v1 hierarchy has, and the limit needs.
    fn v1_marker(self) -> &'static str {
        match self {
            Controller::Memory => "memory.limit_in_bytes",
            Controller::Io => "blkio.throttle.write_bps_device",
        }
    }

    /// The `strata bench` flag that asks for it, for messages.
    fn flag(self) -> &'static str {
        match self {
            Controller::Memory => "--memory-limit",
            Controller::Io => "--device-write-limit",
        }
    }
}

/// A limit on a run's process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Bytes of memory, page cache included, and no swap.
    Memory(u64),
    /// Bytes per second written to one block device (a whole disk: the kernel throttles disks,
    /// not partitions).
    DeviceWrite {
        /// The device's major number.
        major: u32,
        /// The device's minor number.
        minor: u32,
        /// Bytes per second.
        bytes_per_second: u64,
    },
}

impl Limit {
    /// A cap of `bytes_per_second` on writes to the disk holding `path` (the whole disk when
    /// `path` is on a partition); an error when no block device holds it.
    pub fn device_write(path: &Path, bytes_per_second: u64) -> Result<Limit> {
        Limit::device_write_in(path, Path::new("/sys"), bytes_per_second)
    }

    /// [`Limit::device_write`] with sysfs mounted at `sysfs` (for tests).
    pub fn device_write_in(path: &Path, sysfs: &Path, bytes_per_second: u64) -> Result<Limit> {
        let Some(device) = BlockDevice::holding_in(path, sysfs) else {
            bail!(
                "--device-write-limit: {} is on no block device that {} lists (tmpfs, overlay \
                 and network file systems have none), so there is nothing to throttle; put the \
                 databases on a disk (--dir)",
                path.display(),
                sysfs.join("dev/block").display()
            );
        };
        let disk = device.disk_in(sysfs);
        Ok(Limit::DeviceWrite {
            major: disk.major,
            minor: disk.minor,
            bytes_per_second,
        })
    }

    /// The controller that enforces it.
    pub fn controller(&self) -> Controller {
        match self {
            Limit::Memory(_) => Controller::Memory,
            Limit::DeviceWrite { .. } => Controller::Io,
        }
    }

    /// Writes the limit into the cgroup at `dir`.
    fn apply(&self, version: CgroupVersion, dir: &Path) -> Result<()> {
        let write = |file: &str, value: String| {
            let path = dir.join(file);
            std::fs::write(&path, &value)
                .with_context(|| format!("cannot write {value:?} into {}", path.display()))
        };
        match *self {
            Limit::Memory(bytes) => {
                let (limit_file, swap_file, swap) = match version {
                    CgroupVersion::V1 => (
                        "memory.limit_in_bytes",
                        "memory.memsw.limit_in_bytes",
                        bytes,
                    ),
                    CgroupVersion::V2 => ("memory.max", "memory.swap.max", 0),
                };
                write(limit_file, bytes.to_string())?;
                // Only where the kernel accounts swap does the file exist; without it nothing
                // to bound.
                if dir.join(swap_file).exists() {
                    write(swap_file, swap.to_string())?;
                }
                Ok(())
            }
            Limit::DeviceWrite {
                major,
                minor,
                bytes_per_second,
            } => match version {
                CgroupVersion::V1 => write(
                    "blkio.throttle.write_bps_device",
                    format!("{major}:{minor} {bytes_per_second}"),
                ),
                CgroupVersion::V2 => {
                    write("io.max", format!("{major}:{minor} wbps={bytes_per_second}"))
                }
            },
        }
    }
}

/// A cgroup with a controller that this process may create child cgroups in: where the runs'
/// cgroups for that controller go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupParent {
    /// Its interface.
    pub version: CgroupVersion,
    /// Its directory.
    pub parent: PathBuf,
}

/// One run's cgroup in one hierarchy. Dropping it removes it (as [`RunCgroup::remove`] does,
/// errors ignored).
#[derive(Debug)]
pub struct RunCgroup {
    version: CgroupVersion,
    dir: PathBuf,
    /// Whether it limits memory (and so counts OOM kills).
    memory: bool,
    removed: bool,
}

/// A cgroup directory found for a hierarchy, and the path of this process's cgroup in it.
struct Hierarchy {
    version: CgroupVersion,
    root: PathBuf,
    own: Option<String>,
}

impl Hierarchy {
    /// Parents to try, in order: this process's own cgroup, then the root.
    fn parents(&self) -> Vec<PathBuf> {
        let mut parents = Vec::new();
        if let Some(own) = &self.own {
            let own = own.trim_start_matches('/');
            if !own.is_empty() {
                parents.push(self.root.join(own));
            }
        }
        parents.push(self.root.clone());
        parents
    }
}

/// The cgroup path of this process in the v2 hierarchy (`0::/path`) and in the v1 hierarchy
/// of `controller` (`N:...controller...:/path`), from the text of `/proc/self/cgroup`.
fn own_cgroups(self_cgroup: &str, controller: Controller) -> (Option<String>, Option<String>) {
    let mut v2 = None;
    let mut v1 = None;
    for line in self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_string());
        } else if controllers.split(',').any(|c| c == controller.v1_name()) {
            v1 = Some(path.to_string());
        }
    }
    (v2, v1)
}

/// The words of a cgroup list file (`cgroup.controllers`, `cgroup.subtree_control`).
fn words(path: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.split_whitespace().map(str::to_string).collect())
}

/// The number after `key` on its own line of a flat-keyed file (`memory.events`,
/// `memory.oom_control`).
fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        (fields.next()? == key).then(|| fields.next()?.parse().ok())?
    })
}

/// Why a v2 cgroup cannot hold children limited by `controller`, or `None` when it can
/// (enabling the controller in its `cgroup.subtree_control` where it is not yet).
fn v2_unusable(parent: &Path, controller: Controller) -> Option<String> {
    let name = controller.v2_name();
    let controllers = parent.join("cgroup.controllers");
    let Some(available) = words(&controllers) else {
        return Some(format!("{} cannot be read", controllers.display()));
    };
    if !available.iter().any(|c| c == name) {
        return Some(format!(
            "no {name} controller in {} (it lists: {})",
            controllers.display(),
            if available.is_empty() {
                "nothing".to_string()
            } else {
                available.join(" ")
            }
        ));
    }
    let subtree = parent.join("cgroup.subtree_control");
    if words(&subtree).is_some_and(|w| w.iter().any(|c| c == name)) {
        return None;
    }
    match std::fs::write(&subtree, format!("+{name}")) {
        Ok(()) => None,
        Err(e) => Some(format!(
            "{name} is not in {} and enabling it failed ({e}; a cgroup with processes of its \
             own cannot enable controllers for children)",
            subtree.display()
        )),
    }
}

impl CgroupParent {
    /// Finds where this process may make cgroups with `limit`, under `/sys/fs/cgroup` (or
    /// [`ROOT_ENV`]) and per `/proc/self/cgroup`, and proves it by creating and removing one
    /// with the limit. The error says, per hierarchy, why none is usable.
    pub fn discover(limit: &Limit) -> Result<CgroupParent> {
        let root = std::env::var_os(ROOT_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT));
        let self_cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        CgroupParent::discover_in(&root, &self_cgroup, limit)
    }

    /// [`CgroupParent::discover`] with the cgroup root and the text of `/proc/self/cgroup`
    /// given.
    pub fn discover_in(root: &Path, self_cgroup: &str, limit: &Limit) -> Result<CgroupParent> {
        let controller = limit.controller();
        let (flag, name, v1_name) = (
            controller.flag(),
            controller.v2_name(),
            controller.v1_name(),
        );
        let (own_v2, own_v1) = own_cgroups(self_cgroup, controller);
        let mut hierarchies = Vec::new();
        // Pure v2 mounts the unified hierarchy at the root; hybrid systems at `unified`.
        for dir in [root.to_path_buf(), root.join("unified")] {
            if dir.join("cgroup.controllers").is_file() {
                hierarchies.push(Hierarchy {
                    version: CgroupVersion::V2,
                    root: dir,
                    own: own_v2.clone(),
                });
            }
        }
        let v1 = root.join(v1_name);
        if v1.join(controller.v1_marker()).is_file() {
            hierarchies.push(Hierarchy {
                version: CgroupVersion::V1,
                root: v1,
                own: own_v1,
            });
        }
        if hierarchies.is_empty() {
            bail!(
                "{flag} needs a cgroup with the {name} controller, and {} has none: no cgroup v2 \
                 hierarchy (cgroup.controllers) at it or at its unified/, and no cgroup v1 \
                 {v1_name} hierarchy ({v1_name}/{})",
                root.display(),
                controller.v1_marker()
            );
        }
        let mut reasons = Vec::new();
        for hierarchy in &hierarchies {
            for parent in hierarchy.parents() {
                if !parent.is_dir() {
                    continue;
                }
                if hierarchy.version == CgroupVersion::V2 {
                    if let Some(why) = v2_unusable(&parent, controller) {
                        reasons.push(format!("cgroup v2 at {}: {why}", parent.display()));
                        continue;
                    }
                }
                let candidate = CgroupParent {
                    version: hierarchy.version,
                    parent: parent.clone(),
                };
                let probe = format!("strata-bench-{}-probe", std::process::id());
                match candidate
                    .create(&probe, std::slice::from_ref(limit))
                    .and_then(RunCgroup::remove)
                {
                    Ok(()) => return Ok(candidate),
                    Err(e) => reasons.push(format!(
                        "cgroup {} at {}: {e:#}",
                        match hierarchy.version {
                            CgroupVersion::V1 => "v1",
                            CgroupVersion::V2 => "v2",
                        },
                        parent.display()
                    )),
                }
            }
        }
        bail!(
            "{flag} needs a cgroup with the {name} controller that this process may create, and \
             none is usable (run as root, on a system with the {name} controller): {}",
            reasons.join("; ")
        )
    }

    /// Creates the cgroup `name` in the parent with `limits` (all of this parent's
    /// hierarchy).
    pub fn create(&self, name: &str, limits: &[Limit]) -> Result<RunCgroup> {
        let dir = self.parent.join(name);
        std::fs::create_dir(&dir)
            .with_context(|| format!("cannot create the cgroup {}", dir.display()))?;
        let cgroup = RunCgroup {
            version: self.version,
            dir,
            memory: limits.iter().any(|l| l.controller() == Controller::Memory),
            removed: false,
        };
        for limit in limits {
            limit.apply(self.version, &cgroup.dir)?;
        }
        Ok(cgroup)
    }
}

/// Where the cgroups of a comparison's runs go: a parent for each limit, limits that share a
/// parent (v2) sharing one cgroup per run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroups {
    parents: Vec<(CgroupParent, Vec<Limit>)>,
}

impl Cgroups {
    /// Finds a parent for each limit ([`CgroupParent::discover`]).
    pub fn discover(limits: &[Limit]) -> Result<Cgroups> {
        let mut cgroups = Cgroups {
            parents: Vec::new(),
        };
        for limit in limits {
            cgroups.add(CgroupParent::discover(limit)?, *limit);
        }
        Ok(cgroups)
    }

    /// Adds `limit` under `parent`, beside the limits already there.
    pub fn add(&mut self, parent: CgroupParent, limit: Limit) {
        match self.parents.iter_mut().find(|(p, _)| *p == parent) {
            Some((_, limits)) => limits.push(limit),
            None => self.parents.push((parent, vec![limit])),
        }
    }

    /// Creates the run's cgroups, named `name` in each parent.
    pub fn create(&self, name: &str) -> Result<RunCgroups> {
        let mut run = RunCgroups {
            cgroups: Vec::new(),
        };
        for (parent, limits) in &self.parents {
            // Those made already are removed as `run` drops.
            run.cgroups.push(parent.create(name, limits)?);
        }
        Ok(run)
    }
}

/// One run's cgroups, one per hierarchy its limits need. Dropping them removes them.
#[derive(Debug)]
pub struct RunCgroups {
    cgroups: Vec<RunCgroup>,
}

impl RunCgroups {
    /// The cgroups' directories: the run's process joins each ([`join`]).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.cgroups.iter().map(|c| c.dir.clone()).collect()
    }

    /// OOM kills counted in the cgroup that limits memory ([`RunCgroup::oom_kills`]).
    pub fn oom_kills(&self) -> Option<u64> {
        self.cgroups.iter().find(|c| c.memory)?.oom_kills()
    }

    /// Kills what is left in them and removes them, all of them even when one fails.
    pub fn remove(self) -> Result<()> {
        let mut first = Ok(());
        for cgroup in self.cgroups {
            let outcome = cgroup.remove();
            if first.is_ok() {
                first = outcome;
            }
        }
        first
    }
}

impl RunCgroup {
    /// The cgroup's directory (a run's process joins it with [`join`]).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Processes the kernel's out-of-memory killer killed in this cgroup (`oom_kill` of
    /// `memory.events` or `memory.oom_control`); `None` where it limits no memory or the
    /// kernel does not count them. (v1's `memory.failcnt` is no sign of a kill: it counts every
    /// time usage reached the limit, which reclaiming page cache under the limit does all the
    /// time.)
    pub fn oom_kills(&self) -> Option<u64> {
        if !self.memory {
            return None;
        }
        let events = match self.version {
            CgroupVersion::V1 => "memory.oom_control",
            CgroupVersion::V2 => "memory.events",
        };
        let text = std::fs::read_to_string(self.dir.join(events)).ok()?;
        keyed_value(&text, "oom_kill")
    }

    /// Kills any process still in the cgroup and removes it.
    pub fn remove(mut self) -> Result<()> {
        self.removed = true;
        remove_cgroup(&self.dir)
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        if !self.removed {
            let _ = remove_cgroup(&self.dir);
        }
    }
}

/// The processes in the cgroup at `dir`.
fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// SIGKILLs the processes left in the cgroup at `dir`, then removes it: the kernel refuses
/// (EBUSY) while a process remains, so removal is retried for a few seconds while they die.
fn remove_cgroup(dir: &Path) -> Result<()> {
    let killer = dir.join("cgroup.kill");
    let killed_at_once = killer.is_file() && std::fs::write(&killer, "1").is_ok();
    if !killed_at_once {
        for pid in members(dir) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                // Gone already is fine.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            // A tree made to look like cgroupfs keeps the files written into it, which cgroupfs
            // itself never does (its files go with the directory).
            Err(e) if e.kind() == ErrorKind::DirectoryNotEmpty => {
                for entry in std::fs::read_dir(dir)?.flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_file()) {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
                std::fs::remove_dir(dir)
                    .with_context(|| format!("cannot remove the cgroup {}", dir.display()))?;
                return Ok(());
            }
            Err(_) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot remove the cgroup {} (processes left: {:?})",
                        dir.display(),
                        members(dir)
                    )
                })
            }
        }
    }
}

/// Moves this process into the cgroup at `dir` by writing its pid into `cgroup.procs`: what a
/// run's process does first, before it allocates anything worth charging.
pub fn join(dir: &Path) -> Result<()> {
    let procs = dir.join("cgroup.procs");
    std::fs::write(&procs, std::process::id().to_string()).with_context(|| {
        format!(
            "moving this process into the cgroup {} (writing {})",
            dir.display(),
            procs.display()
        )
    })
}

#[cfg(test)]
mod tests;
