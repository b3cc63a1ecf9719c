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
        own_cgroups(HYBRID_SELF, Controller::Memory),
        (Some("/".to_string()), Some("/jobs/me".to_string()))
    );
    assert_eq!(
        own_cgroups("0::/user.slice/session-2.scope\n", Controller::Memory),
        (Some("/user.slice/session-2.scope".to_string()), None)
    );
    assert_eq!(
        own_cgroups("7:cpu,memory:/a\n", Controller::Memory),
        (None, Some("/a".to_string()))
    );
    assert_eq!(own_cgroups("garbage", Controller::Memory), (None, None));
}

#[test]
fn v1_is_used_under_the_own_cgroup_when_v2_has_no_memory_controller() {
    let root = hybrid();
    let cgroups =
        CgroupParent::discover_in(root.path(), HYBRID_SELF, &Limit::Memory(256 * MIB)).unwrap();
    assert_eq!(cgroups.version, CgroupVersion::V1);
    assert_eq!(cgroups.parent, root.path().join("memory/jobs/me"));
    // The probe cgroup is gone.
    let left: Vec<_> = std::fs::read_dir(&cgroups.parent)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(left.is_empty(), "{left:?}");

    let run = cgroups
        .create("strata-bench-1-0", &[Limit::Memory(256 * MIB)])
        .unwrap();
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
    let cgroups = CgroupParent::discover_in(
        root.path(),
        "4:memory:/elsewhere\n",
        &Limit::Memory(64 * MIB),
    )
    .unwrap();
    assert_eq!(cgroups.parent, root.path().join("memory"));
}

#[test]
fn v2_enables_the_memory_controller_and_limits_memory_and_swap() {
    let root = tempfile::tempdir().unwrap();
    put(root.path(), "cgroup.controllers", "cpu io memory pids\n");
    put(root.path(), "cgroup.subtree_control", "cpu\n");
    put(root.path(), "work/cgroup.controllers", "cpu memory\n");
    put(root.path(), "work/cgroup.subtree_control", "\n");
    let cgroups =
        CgroupParent::discover_in(root.path(), "0::/work\n", &Limit::Memory(128 * MIB)).unwrap();
    assert_eq!(cgroups.version, CgroupVersion::V2);
    assert_eq!(cgroups.parent, root.path().join("work"));
    let subtree = std::fs::read_to_string(root.path().join("work/cgroup.subtree_control"));
    assert_eq!(
        subtree.unwrap(),
        "+memory",
        "the controller was enabled for children"
    );

    let run = cgroups.create("run", &[Limit::Memory(128 * MIB)]).unwrap();
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
    let cgroups =
        CgroupParent::discover_in(root.path(), "0::/\n", &Limit::Memory(64 * MIB)).unwrap();
    assert_eq!(
        (cgroups.version, cgroups.parent.as_path()),
        (CgroupVersion::V2, root.path())
    );
}

#[test]
fn no_memory_controller_anywhere_is_an_error_naming_what_was_found() {
    let root = tempfile::tempdir().unwrap();
    put(root.path(), "unified/cgroup.controllers", "hugetlb\n");
    let e = CgroupParent::discover_in(root.path(), "0::/\n", &Limit::Memory(64 * MIB)).unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("no memory controller") && e.contains("hugetlb"),
        "{e}"
    );
    let empty = tempfile::tempdir().unwrap();
    let e = CgroupParent::discover_in(empty.path(), "", &Limit::Memory(64 * MIB)).unwrap_err();
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
    let e =
        CgroupParent::discover_in(root.path(), "0::/job\n", &Limit::Memory(64 * MIB)).unwrap_err();
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
        CgroupParent::discover_in(&path, HYBRID_SELF, &Limit::Memory(64 * MIB))
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
    let cgroups = CgroupParent {
        version: CgroupVersion::V1,
        parent: root.path().join("memory"),
    };
    let run = cgroups
        .create("straggler", &[Limit::Memory(64 * MIB)])
        .unwrap();
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
    assert!(format!("{e:#}").contains("moving this process into the cgroup"));
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
    let cgroups = CgroupParent::discover(&Limit::Memory(64 * MIB)).unwrap();
    let run = cgroups
        .create(
            &format!("strata-bench-test-{}", std::process::id()),
            &[Limit::Memory(64 * MIB)],
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

/// A write limit on device 254:0.
const DISK_WRITES: Limit = Limit::DeviceWrite {
    major: 254,
    minor: 0,
    bytes_per_second: 20 * MIB,
};

#[test]
fn v1_puts_the_write_limit_in_the_blkio_hierarchy_beside_the_memory_one() {
    let root = hybrid();
    put(root.path(), "blkio/blkio.throttle.write_bps_device", "");
    put(
        root.path(),
        "blkio/jobs/io/blkio.throttle.write_bps_device",
        "",
    );
    let own = "7:blkio:/jobs/io\n4:memory:/jobs/me\n0::/\n";
    let memory = CgroupParent::discover_in(root.path(), own, &Limit::Memory(64 * MIB)).unwrap();
    let io = CgroupParent::discover_in(root.path(), own, &DISK_WRITES).unwrap();
    assert_eq!(io.version, CgroupVersion::V1);
    assert_eq!(io.parent, root.path().join("blkio/jobs/io"));

    let mut cgroups = Cgroups {
        parents: Vec::new(),
    };
    cgroups.add(memory, Limit::Memory(64 * MIB));
    cgroups.add(io, DISK_WRITES);
    let run = cgroups.create("run").unwrap();
    let dirs = run.dirs();
    assert_eq!(
        dirs,
        vec![
            root.path().join("memory/jobs/me/run"),
            root.path().join("blkio/jobs/io/run")
        ]
    );
    let throttle = std::fs::read_to_string(dirs[1].join("blkio.throttle.write_bps_device"));
    assert_eq!(throttle.unwrap(), format!("254:0 {}", 20 * MIB));
    assert!(!dirs[1].join("memory.limit_in_bytes").exists());
    // The OOM count comes from the memory cgroup, not the blkio one.
    std::fs::write(dirs[0].join("memory.oom_control"), "oom_kill 1\n").unwrap();
    std::fs::write(dirs[1].join("memory.oom_control"), "oom_kill 7\n").unwrap();
    assert_eq!(run.oom_kills(), Some(1));
    run.remove().unwrap();
    assert!(dirs.iter().all(|d| !d.exists()));
}

#[test]
fn v2_puts_both_limits_in_one_cgroup_and_enables_io() {
    let root = tempfile::tempdir().unwrap();
    put(root.path(), "cgroup.controllers", "cpu io memory pids\n");
    put(root.path(), "cgroup.subtree_control", "memory\n");
    let own = "0::/\n";
    let mut cgroups = Cgroups {
        parents: Vec::new(),
    };
    for limit in [Limit::Memory(64 * MIB), DISK_WRITES] {
        let parent = CgroupParent::discover_in(root.path(), own, &limit).unwrap();
        assert_eq!(parent.parent, root.path());
        cgroups.add(parent, limit);
    }
    assert_eq!(
        std::fs::read_to_string(root.path().join("cgroup.subtree_control")).unwrap(),
        "+io",
        "the io controller was enabled for children"
    );
    let run = cgroups.create("run").unwrap();
    assert_eq!(run.dirs(), vec![root.path().join("run")]);
    let dir = root.path().join("run");
    assert_eq!(
        std::fs::read_to_string(dir.join("io.max")).unwrap(),
        format!("254:0 wbps={}", 20 * MIB)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("memory.max")).unwrap(),
        (64 * MIB).to_string()
    );
}

#[test]
fn no_io_controller_is_an_error_naming_the_flag_and_what_was_found() {
    let root = hybrid();
    let e = CgroupParent::discover_in(root.path(), HYBRID_SELF, &DISK_WRITES).unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("--device-write-limit")
            && e.contains("no io controller")
            && e.contains("hugetlb"),
        "{e}"
    );
    let empty = tempfile::tempdir().unwrap();
    let e = format!(
        "{:#}",
        CgroupParent::discover_in(empty.path(), "", &DISK_WRITES).unwrap_err()
    );
    assert!(
        e.contains("blkio") && e.contains("--device-write-limit"),
        "{e}"
    );
}

#[test]
fn the_write_limit_names_the_disk_holding_the_directory() {
    use std::os::unix::fs::MetadataExt;
    let data = tempfile::tempdir().unwrap();
    let sysfs = tempfile::tempdir().unwrap();
    let e = Limit::device_write_in(data.path(), sysfs.path(), MIB).unwrap_err();
    assert!(format!("{e:#}").contains("is on no block device"), "{e:#}");
    let dev = std::fs::metadata(data.path()).unwrap().dev();
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    put(
        sysfs.path(),
        &format!("dev/block/{major}:{minor}/stat"),
        "1 0 8 0 1 0 8 0 0 0 0\n",
    );
    assert_eq!(
        Limit::device_write_in(data.path(), sysfs.path(), MIB).unwrap(),
        Limit::DeviceWrite {
            major,
            minor,
            bytes_per_second: MIB
        }
    );
}

/// A real write throttle, where this machine allows one: `dd` with direct writes of 8 MiB at 4
/// MiB/s takes about 2 s instead of a fraction of one. Opt in as for the memory cgroup above.
#[test]
fn a_real_write_limit_slows_a_child_process() {
    if std::env::var_os("STRATA_BENCH_PRIVILEGED_TESTS").is_none() {
        eprintln!("skipped: set STRATA_BENCH_PRIVILEGED_TESTS=1 to create a real io cgroup");
        return;
    }
    let data = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let limit = Limit::device_write(data.path(), 4 * MIB).unwrap();
    let cgroups = Cgroups::discover(&[limit]).unwrap();
    let run = cgroups
        .create(&format!("strata-bench-test-io-{}", std::process::id()))
        .unwrap();
    let joins: Vec<String> = run
        .dirs()
        .iter()
        .map(|d| format!("echo $$ > {}/cgroup.procs", d.display()))
        .collect();
    let script = format!(
        "{} && dd if=/dev/zero of={}/file bs=1M count=8 oflag=direct status=none",
        joins.join(" && "),
        data.path().display()
    );
    let started = Instant::now();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .status()
        .unwrap();
    let took = started.elapsed();
    run.remove().unwrap();
    assert!(status.success(), "{status}");
    assert!(took >= Duration::from_millis(1500), "{took:?}");
}
