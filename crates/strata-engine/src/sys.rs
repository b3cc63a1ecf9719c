//! Operating-system calls the engine makes itself (file I/O goes through [`crate::fs`]).

/// Returns the free pages of every malloc arena to the system (glibc's `malloc_trim(0)`).
///
/// Flushes and compactions allocate megabytes that live only as long as the job (Bloom hashes,
/// index and block buffers) in their threads' arenas; glibc keeps those pages once freed.
/// Measured after loading 5·10^6 entries of 116 bytes and scanning: resident memory fell from
/// 107.2 to 95.5 MiB with this call, next to 57 MiB of memtables and a 32 MiB block cache.
/// Background threads call it when they run out of work, so the cost (a walk of the arenas) is
/// paid once per burst of jobs. Elsewhere it does nothing.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: `malloc_trim` takes no pointers and may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
