//! The bench process's own CPU time and peak memory, as the kernel counts
//! them: what the client costs beside the server's work. `None` where the
//! platform has no `getrusage`.

use std::time::Duration;

/// User plus system CPU time of this process so far.
#[cfg(unix)]
pub(crate) fn cpu_time() -> Option<Duration> {
    let usage = resource_usage()?;
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    Some(time(usage.ru_utime) + time(usage.ru_stime))
}

/// The largest resident set this process has had, in KiB.
#[cfg(unix)]
pub(crate) fn peak_memory_kib() -> Option<u64> {
    let usage = resource_usage()?;
    // Linux counts in KiB; macOS in bytes.
    let peak = usage.ru_maxrss as u64;
    Some(if cfg!(target_os = "macos") { peak / 1024 } else { peak })
}

/// The resident set of this process now, in KiB (Linux: `/proc/self/statm`).
#[cfg(target_os = "linux")]
pub(crate) fn resident_kib() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system and writes nothing.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()? / 1024)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn resident_kib() -> Option<u64> {
    None
}

#[cfg(unix)]
fn resource_usage() -> Option<libc::rusage> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let status = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    // SAFETY: zeroed memory is a valid rusage, and a zero status means it was filled.
    (status == 0).then(|| unsafe { usage.assume_init() })
}

#[cfg(not(unix))]
pub(crate) fn cpu_time() -> Option<Duration> {
    None
}

#[cfg(not(unix))]
pub(crate) fn peak_memory_kib() -> Option<u64> {
    None
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_counts_work_done() {
        // Work until the counter shows 20 ms of it, however busy the machine
        // (a wall-clock loop gets little CPU beside other tests); a counter
        // that never moves fails after 10 s.
        let before = cpu_time().expect("getrusage");
        let started = std::time::Instant::now();
        let mut x = 1u64;
        let mut spent = Duration::ZERO;
        while spent < Duration::from_millis(20) && started.elapsed() < Duration::from_secs(10) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
            spent = cpu_time().unwrap() - before;
        }
        assert!(
            spent >= Duration::from_millis(20),
            "{spent:?} after {:?}",
            started.elapsed()
        );
        assert!(peak_memory_kib().unwrap() > 0);
        #[cfg(target_os = "linux")]
        assert!(resident_kib().unwrap() > 0);
    }
}
