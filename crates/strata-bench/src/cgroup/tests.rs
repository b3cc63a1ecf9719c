//! Discovery and setup against directory trees made to look like cgroupfs: this machine's
//! hybrid layout (v1 memory, v2 without it), pure v2 with and without the memory controller
//! delegated, and the failures that must stop a comparison before its first run.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use super::*;
use std::os::unix::fs::PermissionsExt;

const MIB: u64 = 1 << 20;

/// Writes `text` into `root/relative`, creating its directories.
fn put(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A hybrid tree: a v1 memory hierarchy with this process's cgroup in it, and a unified
/// hierarchy with only hugetlb.
fn hybrid() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    put(
        root.path(),
        "memory/memory.limit_in_bytes",
        "9223372036854771712\n",
    );
    put(
        root.path(),
        "memory/jobs/me/memory.limit_in_bytes",
        "9223372036854771712\n",
    );
    put(root.path(), "unified/cgroup.controllers", "hugetlb\n");
    put(root.path(), "unified/cgroup.subtree_control", "");
    root
}

const HYBRID_SELF: &str = "4:memory:/jobs/me\n2:cpu,cpuacct:/\n0::/\n";

#[test]
fn this_process_cgroups_are_read_per_hierarchy() {
    assert_eq!(
        own_cgroups(HYBRID_SELF),
        (Some("/".to_string()), Some("/jobs/me".to_string()))
    );
    assert_eq!(
        own_cgroups("0::/user.slice/session-2.scope\n"),
        (Some("/user.slice/session-2.scope".to_string()), None)
    );
    assert_eq!(
        own_cgroups("7:cpu,memory:/a\n"),
        (None, Some("/a".to_string()))
    );
    assert_eq!(own_cgroups("garbage"), (None, None));
}

#[test]
fn v1_is_used_under_the_own_cgroup_when_v2_has_no_memory_controller() {
    let root = hybrid();
    let cgroups = MemoryCgroups::discover_in(root.path(), HYBRID_SELF, 256 * MIB).unwrap();
    assert_eq!(cgroups.version, CgroupVersion::V1);
    assert_eq!(cgroups.parent, root.path().join("memory/jobs/me"));
    // The probe cgroup is gone.
    let left: Vec<_> = std::fs::read_dir(&cgroups.parent)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(left.is_empty(), "{left:?}");

    let run = cgroups.create("strata-bench-1-0", 256 * MIB).unwrap();
    let limit = std::fs::read_to_string(run.dir().join("memory.limit_in_bytes")).unwrap();
    assert_eq!(limit, (256 * MIB).to_string());
    // No swap accounting in this tree: nothing written for it.
    assert!(!run.dir().join("memory.memsw.limit_in_bytes").exists());
    assert_eq!(run.oom_kills(), None);
    std::fs::write(
        run.dir().join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
    )
    .unwrap();
    assert_eq!(run.oom_kills(), Some(2));
    let dir = run.dir().to_path_buf();
    run.remove().unwrap();
    assert!(!dir.exists());
}

#[test]
fn v1_falls_back_to_the_hierarchy_root_when_the_own_cgroup_is_missing() {
    let root = hybrid();
    let cgroups =
        MemoryCgroups::discover_in(root.path(), "4:memory:/elsewhere\n", 64 * MIB).unwrap();
    assert_eq!(cgroups.parent, root.path().join("memory"));
}

#[test]
fn v2_enables_the_memory_controller_and_limits_memory_and_swap() {
    let root = tempfile::tempdir().unwrap();
    put(root.path(), "cgroup.controllers", "cpu io memory pids\n");
    put(root.path(), "cgroup.subtree_control", "cpu\n");
    put(root.path(), "work/cgroup.controllers", "cpu memory\n");
    put(root.path(), "work/cgroup.subtree_control", "\n");
    let cgroups = MemoryCgroups::discover_in(root.path(), "0::/work\n", 128 * MIB).unwrap();
    assert_eq!(cgroups.version, CgroupVersion::V2);
    assert_eq!(cgroups.parent, root.path().join("work"));
    let subtree = std::fs::read_to_string(root.path().join("work/cgroup.subtree_control"));
    assert_eq!(
        subtree.unwrap(),
        "+memory",
        "the controller was enabled for children"
    );

    let run = cgroups.create("run", 128 * MIB).unwrap();
    assert_eq!(
        std::fs::read_to_string(run.dir().join("memory.max")).unwrap(),
        (128 * MIB).to_string()
    );
    std::fs::write(
        run.dir().join("memory.events"),
        "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
    )
    .unwrap();
    assert_eq!(run.oom_kills(), Some(1));
    // No swap accounting in a plain directory: nothing written for it.
    assert!(!run.dir().join("memory.swap.max").exists());
    drop(run);
    assert!(
        !root.path().join("work/run").exists(),
        "dropping removes it"
    );
}

#[test]
fn v2_at_the_root_is_used_when_memory_is_already_delegated() {
    let root = tempfile::tempdir().unwrap();
    put(root.path(), "cgroup.controllers", "cpu memory\n");
    put(root.path(), "cgroup.subtree_control", "cpu memory\n");
    let cgroups = MemoryCgroups::discover_in(root.path(), "0::/\n", 64 * MIB).unwrap();
    assert_eq!(
        (cgroups.version, cgroups.parent.as_path()),
        (CgroupVersion::V2, root.path())
    );
}

#[test]
fn no_memory_controller_anywhere_is_an_error_naming_what_was_found() {
    let root = tempfile::tempdir().unwrap();
    put(root.path(), "unified/cgroup.controllers", "hugetlb\n");
    let e = MemoryCgroups::discover_in(root.path(), "0::/\n", 64 * MIB).unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("no memory controller") && e.contains("hugetlb"),
        "{e}"
    );
    let empty = tempfile::tempdir().unwrap();
    let e = MemoryCgroups::discover_in(empty.path(), "", 64 * MIB).unwrap_err();
    assert!(
        e.to_string().contains("no cgroup v2 hierarchy") && e.to_string().contains("v1"),
        "{e}"
    );
}

#[test]
fn v2_that_cannot_enable_the_controller_says_why_for_each_parent() {
    let root = tempfile::tempdir().unwrap();
    put(root.path(), "cgroup.controllers", "cpu memory\n");
    // A directory where the file should be: writing `+memory` fails as the kernel's EBUSY
    // would for a cgroup with processes in it.
    std::fs::create_dir_all(root.path().join("cgroup.subtree_control")).unwrap();
    put(root.path(), "job/cgroup.controllers", "cpu\n");
    let e = MemoryCgroups::discover_in(root.path(), "0::/job\n", 64 * MIB).unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("no memory controller in"), "{e}");
    assert!(e.contains("enabling it failed"), "{e}");
    assert!(!root
        .path()
        .join("job")
        .read_dir()
        .unwrap()
        .any(|e| e.unwrap().path().is_dir()));
}

#[test]
fn a_hierarchy_this_user_may_not_write_is_an_error_before_any_run() {
    let root = hybrid();
    for dir in ["", "memory", "memory/jobs", "memory/jobs/me"] {
        let mode = if dir.starts_with("memory") {
            0o555
        } else {
            0o755
        };
        std::fs::set_permissions(root.path().join(dir), std::fs::Permissions::from_mode(mode))
            .unwrap();
    }
    let path = root.path().to_path_buf();
    // Root writes anywhere, so root tries as an unprivileged user, in a thread of its own:
    // Linux keeps user ids per thread, and this one ends after the attempt.
    let outcome = std::thread::spawn(move || {
        if rustix::process::geteuid().is_root() {
            rustix::thread::set_thread_uid(rustix::process::Uid::from_raw(65534)).unwrap();
        }
        MemoryCgroups::discover_in(&path, HYBRID_SELF, 64 * MIB)
    })
    .join()
    .unwrap();
    let e = format!("{:#}", outcome.unwrap_err());
    assert!(
        e.contains("cannot create the cgroup") && e.contains("run as root"),
        "{e}"
    );
    for dir in ["memory", "memory/jobs", "memory/jobs/me"] {
        std::fs::set_permissions(
            root.path().join(dir),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
}

#[test]
fn removing_a_cgroup_kills_what_is_left_in_it() {
    let root = hybrid();
    let cgroups = MemoryCgroups {
        version: CgroupVersion::V1,
        parent: root.path().join("memory"),
    };
    let run = cgroups.create("straggler", 64 * MIB).unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    std::fs::write(
        run.dir().join("cgroup.procs"),
        format!("{}\n", sleeper.id()),
    )
    .unwrap();
    run.remove().unwrap();
    let status = sleeper.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "{status}");
    assert!(!root.path().join("memory/straggler").exists());
}

#[test]
fn joining_writes_this_process_into_the_cgroup() {
    let dir = tempfile::tempdir().unwrap();
    join(dir.path()).unwrap();
    let procs = std::fs::read_to_string(dir.path().join("cgroup.procs")).unwrap();
    assert_eq!(procs, std::process::id().to_string());
    let e = join(&dir.path().join("missing")).unwrap_err();
    assert!(format!("{e:#}").contains("moving this process into the memory cgroup"));
}

#[test]
fn oom_counts_are_read_by_key() {
    assert_eq!(keyed_value("oom 3\noom_kill 2\n", "oom_kill"), Some(2));
    assert_eq!(keyed_value("oom 3\n", "oom_kill"), None);
    assert_eq!(keyed_value("oom_kill x\n", "oom_kill"), None);
}

/// A real memory cgroup, where this machine allows one (root with a v1 memory hierarchy or a
/// v2 one with the controller): opt in with `STRATA_BENCH_PRIVILEGED_TESTS=1`, since it changes the
/// system's cgroup tree (briefly) and most machines do not allow it.
#[test]
fn a_real_cgroup_limits_a_child_process() {
    if std::env::var_os("STRATA_BENCH_PRIVILEGED_TESTS").is_none() {
        eprintln!("skipped: set STRATA_BENCH_PRIVILEGED_TESTS=1 to create a real memory cgroup");
        return;
    }
    let cgroups = MemoryCgroups::discover(64 * MIB).unwrap();
    let run = cgroups
        .create(
            &format!("strata-bench-test-{}", std::process::id()),
            64 * MIB,
        )
        .unwrap();
    // A shell that joins the cgroup, then a sort that must hold one line of 200 MB in memory:
    // the OOM killer ends it.
    let script = format!(
        "echo $$ > {}/cgroup.procs && head -c 200000000 /dev/zero | sort > /dev/null",
        run.dir().display()
    );
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .status()
        .unwrap();
    let kills = run.oom_kills();
    run.remove().unwrap();
    assert!(!status.success(), "{status}");
    assert!(kills.unwrap_or(0) >= 1, "{kills:?}");
}
