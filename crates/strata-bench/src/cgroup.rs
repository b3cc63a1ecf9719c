//! Memory cgroups for `strata bench --memory-limit`: each run's process gets a cgroup of its
//! own whose memory limit covers everything the kernel charges to it, page cache included, so a
//! database larger than the limit is read from the device instead of from cached pages.
//!
//! Both cgroup versions work. Version 2 (`memory.max`, with `memory.swap.max` set to 0 where
//! the kernel accounts swap) needs the memory controller in the parent cgroup's
//! `cgroup.subtree_control`, which this module enables where it may. Version 1 (a `memory`
//! hierarchy: `memory.limit_in_bytes`, with `memory.memsw.limit_in_bytes` set to the same where
//! present, so nothing spills to swap) needs only a directory it may create cgroups in. Each is
//! looked for under the cgroup this process is in first, then at the hierarchy's root;
//! [`MemoryCgroups::discover`] proves the parent usable by creating and removing a cgroup, so a
//! missing controller or permission is reported before any run.
//!
//! The root of the cgroup file systems is `/sys/fs/cgroup`, or [`ROOT_ENV`] when set (tests
//! point it at a directory tree made to look like one).

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
    /// The legacy per-controller hierarchies (here: the `memory` one).
    V1,
    /// The unified hierarchy.
    V2,
}

impl CgroupVersion {
    /// The file that holds a cgroup's memory limit.
    fn limit_file(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "memory.limit_in_bytes",
            CgroupVersion::V2 => "memory.max",
        }
    }

    /// The file that bounds swap (v2) or memory plus swap (v1), set so nothing is swapped out.
    fn swap_file(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "memory.memsw.limit_in_bytes",
            CgroupVersion::V2 => "memory.swap.max",
        }
    }

    /// The file with the cgroup's `oom_kill` count.
    fn events_file(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "memory.oom_control",
            CgroupVersion::V2 => "memory.events",
        }
    }
}

/// A cgroup with the memory controller that this process may create child cgroups in: where
/// the runs' cgroups go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryCgroups {
    /// Its interface.
    pub version: CgroupVersion,
    /// Its directory.
    pub parent: PathBuf,
}

/// One run's memory cgroup. Dropping it removes it (as [`MemoryCgroup::remove`] does, errors
/// ignored).
#[derive(Debug)]
pub struct MemoryCgroup {
    version: CgroupVersion,
    dir: PathBuf,
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

/// The cgroup path of this process in the v2 hierarchy (`0::/path`) and in the v1 `memory`
/// hierarchy (`N:...memory...:/path`), from the text of `/proc/self/cgroup`.
fn own_cgroups(self_cgroup: &str) -> (Option<String>, Option<String>) {
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
        } else if controllers.split(',').any(|c| c == "memory") {
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

/// Why a v2 cgroup cannot hold memory-limited children, or `None` when it can (enabling the
/// memory controller in its `cgroup.subtree_control` where it is not yet).
fn v2_unusable(parent: &Path) -> Option<String> {
    let controllers = parent.join("cgroup.controllers");
    let Some(available) = words(&controllers) else {
        return Some(format!("{} cannot be read", controllers.display()));
    };
    if !available.iter().any(|c| c == "memory") {
        return Some(format!(
            "no memory controller in {} (it lists: {})",
            controllers.display(),
            if available.is_empty() {
                "nothing".to_string()
            } else {
                available.join(" ")
            }
        ));
    }
    let subtree = parent.join("cgroup.subtree_control");
    if words(&subtree).is_some_and(|w| w.iter().any(|c| c == "memory")) {
        return None;
    }
    match std::fs::write(&subtree, "+memory") {
        Ok(()) => None,
        Err(e) => Some(format!(
            "memory is not in {} and enabling it failed ({e}; a cgroup with processes of its \
             own cannot enable controllers for children)",
            subtree.display()
        )),
    }
}

impl MemoryCgroups {
    /// Finds where this process may make memory-limited cgroups, under `/sys/fs/cgroup` (or
    /// [`ROOT_ENV`]) and per `/proc/self/cgroup`, and proves it by creating and removing one
    /// limited to `limit` bytes. The error says, per hierarchy, why none is usable.
    pub fn discover(limit: u64) -> Result<MemoryCgroups> {
        let root = std::env::var_os(ROOT_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT));
        let self_cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        MemoryCgroups::discover_in(&root, &self_cgroup, limit)
    }

    /// [`MemoryCgroups::discover`] with the cgroup root and the text of `/proc/self/cgroup`
    /// given.
    pub fn discover_in(root: &Path, self_cgroup: &str, limit: u64) -> Result<MemoryCgroups> {
        let (own_v2, own_v1) = own_cgroups(self_cgroup);
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
        let v1 = root.join("memory");
        if v1.join("memory.limit_in_bytes").is_file() {
            hierarchies.push(Hierarchy {
                version: CgroupVersion::V1,
                root: v1,
                own: own_v1,
            });
        }
        if hierarchies.is_empty() {
            bail!(
                "--memory-limit needs a memory cgroup, and {} has none: no cgroup v2 hierarchy \
                 (cgroup.controllers) at it or at its unified/, and no cgroup v1 memory \
                 hierarchy (memory/memory.limit_in_bytes)",
                root.display()
            );
        }
        let mut reasons = Vec::new();
        for hierarchy in &hierarchies {
            for parent in hierarchy.parents() {
                if !parent.is_dir() {
                    continue;
                }
                if hierarchy.version == CgroupVersion::V2 {
                    if let Some(why) = v2_unusable(&parent) {
                        reasons.push(format!("cgroup v2 at {}: {why}", parent.display()));
                        continue;
                    }
                }
                let candidate = MemoryCgroups {
                    version: hierarchy.version,
                    parent: parent.clone(),
                };
                let probe = format!("strata-bench-{}-probe", std::process::id());
                match candidate
                    .create(&probe, limit)
                    .and_then(MemoryCgroup::remove)
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
            "--memory-limit needs a memory cgroup this process may create, and none is usable \
             (run as root, on a system with the memory controller): {}",
            reasons.join("; ")
        )
    }

    /// Creates the cgroup `name` in the parent, limited to `limit` bytes of memory (page cache
    /// included) and no swap.
    pub fn create(&self, name: &str, limit: u64) -> Result<MemoryCgroup> {
        let dir = self.parent.join(name);
        std::fs::create_dir(&dir)
            .with_context(|| format!("cannot create the cgroup {}", dir.display()))?;
        let cgroup = MemoryCgroup {
            version: self.version,
            dir,
            removed: false,
        };
        let limit_file = cgroup.dir.join(self.version.limit_file());
        std::fs::write(&limit_file, limit.to_string())
            .with_context(|| format!("cannot write {limit} into {}", limit_file.display()))?;
        // Only where the kernel accounts swap does the file exist; without it nothing to bound.
        let swap_file = cgroup.dir.join(self.version.swap_file());
        if swap_file.exists() {
            let value = match self.version {
                CgroupVersion::V1 => limit,
                CgroupVersion::V2 => 0,
            };
            std::fs::write(&swap_file, value.to_string())
                .with_context(|| format!("cannot write {value} into {}", swap_file.display()))?;
        }
        Ok(cgroup)
    }
}

impl MemoryCgroup {
    /// The cgroup's directory (a run's process joins it with [`join`]).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Processes the kernel's out-of-memory killer killed in this cgroup (`oom_kill` of
    /// `memory.events` or `memory.oom_control`); `None` where the kernel does not count them.
    /// (v1's `memory.failcnt` is no sign of a kill: it counts every time usage reached the
    /// limit, which reclaiming page cache under the limit does all the time.)
    pub fn oom_kills(&self) -> Option<u64> {
        let text = std::fs::read_to_string(self.dir.join(self.version.events_file())).ok()?;
        keyed_value(&text, "oom_kill")
    }

    /// Kills any process still in the cgroup and removes it.
    pub fn remove(mut self) -> Result<()> {
        self.removed = true;
        remove_cgroup(&self.dir)
    }
}

impl Drop for MemoryCgroup {
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
            "moving this process into the memory cgroup {} (writing {})",
            dir.display(),
            procs.display()
        )
    })
}

#[cfg(test)]
mod tests;
