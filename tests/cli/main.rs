//! The `strata` binary checks its arguments and workload files before any work: every bad flag,
//! file or directory is refused at once, naming the flag (or the file's key with its line and
//! column); runs too small to measure warn; both commands take the same spellings and size
//! units; a failed run leaves nothing that blocks the next.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod flags;
mod runs;
mod tools;

/// What one invocation did.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    seconds: f64,
}

impl Run {
    /// The first line of stderr that is not a warning: the error.
    fn error(&self) -> &str {
        self.stderr
            .lines()
            .find(|l| !l.starts_with("warning:"))
            .unwrap_or("")
    }
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `strata args` in `dir`, killing it after `limit` (a check that runs only after the
/// work would otherwise take minutes).
fn strata_in(dir: &Path, args: &[&str], limit: Duration) -> Run {
    strata_with_log(dir, args, limit, None)
}

/// [`strata_in`] with `STRATA_LOG` set to `log` (unset when `None`, whatever the test's own
/// environment holds).
fn strata_with_log(dir: &Path, args: &[&str], limit: Duration, log: Option<&str>) -> Run {
    let out = dir.join(format!("stdout-{}", std::process::id()));
    let err = dir.join(format!("stderr-{}", std::process::id()));
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env_remove(strata_cli::LOG_ENV)
        .envs(log.map(|filter| (strata_cli::LOG_ENV, filter)))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "strata {} still running after {limit:?}: it did not fail fast",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code(),
        stdout: std::fs::read_to_string(&out).unwrap(),
        stderr: std::fs::read_to_string(&err).unwrap(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

fn strata(dir: &Path, args: &[&str]) -> Run {
    strata_in(dir, args, Duration::from_secs(60))
}

/// Runs `args`, expecting exit code 1 (an error of the tool, not clap's usage error 2 or an
/// abort) within 10 seconds, with an error line containing every one of `expected`.
fn refused(dir: &Path, args: &[&str], expected: &[&str]) -> Run {
    let run = strata_in(dir, args, Duration::from_secs(10));
    assert_eq!(
        run.code,
        Some(1),
        "strata {}: {}",
        args.join(" "),
        run.stderr
    );
    for e in expected {
        assert!(
            run.error().contains(e),
            "strata {}: error {:?} lacks {e:?}",
            args.join(" "),
            run.error()
        );
    }
    run
}

/// Runs `args`, expecting clap to refuse a value (exit code 2) naming `flag` and saying `what`.
fn refused_by_parser(dir: &Path, args: &[&str], flag: &str, what: &str) {
    let run = strata_in(dir, args, Duration::from_secs(10));
    assert_eq!(
        run.code,
        Some(2),
        "strata {}: {}",
        args.join(" "),
        run.stderr
    );
    let first = run.stderr.lines().next().unwrap_or("");
    assert!(
        first.contains(flag) && first.contains(what),
        "strata {}: {first}",
        args.join(" ")
    );
}

fn succeeded(dir: &Path, args: &[&str]) -> Run {
    let run = strata(dir, args);
    assert_eq!(
        run.code,
        Some(0),
        "strata {}: {}",
        args.join(" "),
        run.stderr
    );
    run
}

/// `bench` followed by `extra`.
fn small_bench<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["bench"];
    args.extend_from_slice(extra);
    args
}

/// The simulator's JSON without the fields that vary from run to run.
fn sim_json(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["sim", "--policies", "leveled", "--json"];
    all.extend_from_slice(args);
    let run = succeeded(dir, &all);
    run.stdout
        .lines()
        .filter(|l| {
            !l.contains("wall_seconds") && !l.contains("policy_seconds") && !l.contains("rss")
        })
        .collect::<Vec<_>>()
        .join("\n")
}
