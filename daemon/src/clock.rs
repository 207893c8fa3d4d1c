//! The wall clock as the daemon records it: whole seconds since the Unix
//! epoch, the unit of the state files, Pacemaker's history and `decide`'s
//! stamps.

/// Now, in seconds since the Unix epoch; 0 if the clock is set before 1970
/// (nothing sensible to record then, and no reason to fail a pass over it).
pub(crate) fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
