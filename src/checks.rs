//! Checks of flag values and paths that both commands run before any work, so a typo costs
//! nothing: every error names the flag.

use anyhow::{bail, Result};
use std::path::Path;
use strata_meta::format_size;

/// The engine's smallest write buffer (`strata_engine::Options::validate`).
pub const MIN_WRITE_BUFFER_SIZE: u64 = 4096;

/// Errors unless `value` is finite and above `min`.
pub fn above(flag: &str, value: f64, min: f64) -> Result<()> {
    if !(value.is_finite() && value > min) {
        bail!("{flag} is {value}; it must be a finite number above {min}");
    }
    Ok(())
}

/// Errors unless `value` is finite and at least 0.
pub fn not_negative(flag: &str, value: f64) -> Result<()> {
    if !(value.is_finite() && value >= 0.0) {
        bail!("{flag} is {value}; it must be a finite number, 0 or more");
    }
    Ok(())
}

/// Errors unless `value` is at least `min`.
pub fn at_least(flag: &str, value: u64, min: u64) -> Result<()> {
    if value < min {
        bail!("{flag} is {value}; it must be at least {min}");
    }
    Ok(())
}

/// Errors unless the size `bytes` is at least `min` bytes.
pub fn size_at_least(flag: &str, bytes: u64, min: u64) -> Result<()> {
    if bytes < min {
        bail!(
            "{flag} is {}; it must be at least {}",
            format_size(bytes),
            format_size(min)
        );
    }
    Ok(())
}

/// A directory the command will write into: created now if missing (so a bad path fails before
/// the runs, not after them), and probed with a scratch file.
pub fn writable_dir(flag: &str, dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!(
            "{flag} {} is an existing file; give a directory",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("{flag} {}: cannot create it: {e}", dir.display()))?;
    let probe = dir.join(".strata-write-check");
    std::fs::write(&probe, b"")
        .map_err(|e| anyhow::anyhow!("{flag} {}: cannot write in it: {e}", dir.display()))?;
    // The probe was written, so removing it only fails if something else removed it first.
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// A file the command will create at the end: its directory must exist and it must not be a
/// directory itself.
pub fn creatable_file(flag: &str, file: &Path) -> Result<()> {
    if file.is_dir() {
        bail!("{flag} {} is a directory; give a file", file.display());
    }
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        bail!(
            "{flag} {}: the directory {} does not exist",
            file.display(),
            parent.display()
        );
    }
    Ok(())
}

/// A file the command reads: it must exist and be a file.
pub fn readable_file(flag: &str, file: &Path) -> Result<()> {
    if !file.exists() {
        bail!("{flag} {}: no such file", file.display());
    }
    if !file.is_file() {
        bail!("{flag} {} is not a file", file.display());
    }
    Ok(())
}
