//! Memory figures of this process, from `/proc/self/status` (Linux).

/// A `kB` field of `/proc/self/status`, such as `VmHWM` (peak resident set size) or
/// `VmRSS`; `None` where the file or field is missing (not Linux).
pub fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Peak resident set size so far, in KiB.
pub fn peak_rss_kb() -> Option<u64> {
    status_kb("VmHWM")
}
