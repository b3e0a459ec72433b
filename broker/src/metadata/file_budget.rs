//! The open-files budget. Segment files are held through each shard's descriptor cache
//! (`shard::open_files`: opened on demand, the least recently used closed past its limit), so a
//! node's partition count is not bounded by its open-files limit (issue #38: every partition
//! kept its active segment open, and `nofile` capped a node near 19,000 partitions).
//!
//! The limit is split at start: `FILES_RESERVED` for the listener, io_uring and short-lived
//! files (checkpoints, a roll's new segment, opens at startup), then half of the rest for the
//! shards' segment-file caches (`segment_files_per_shard`) and half for client and peer
//! connections.

/// Files kept for the listener, io_uring, checkpoints, rolls and opens in progress.
pub const FILES_RESERVED: u64 = 512;
/// The smallest segment-file cache a shard works with.
pub const SEGMENT_FILES_PER_SHARD_MIN: u64 = 64;

/// How to raise the limit.
pub const FIX: &str = "raise the open-files limit: LimitNOFILE=1048576 in the systemd unit \
     (deploy/strata.service), `strata - nofile 1048576` in /etc/security/limits.d \
     (deploy/limits.d/90-strata.conf), or `ulimit -n 1048576` before starting";

/// The soft open-files limit, raised to the hard limit first (as servers do; the kernel allows
/// it without privileges). Returns (soft, hard) after the change.
pub fn raise_open_files_limit() -> (u64, u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return (0, 0);
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: setrlimit reads the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    (limit.rlim_cur, limit.rlim_max)
}

/// Segment files each of `shards` shards may keep open under a limit of `limit` files.
pub fn segment_files_per_shard(limit: u64, shards: usize) -> usize {
    let for_segments = limit.saturating_sub(FILES_RESERVED) / 2;
    let per_shard = for_segments / (shards.max(1) as u64);
    usize::try_from(per_shard.max(SEGMENT_FILES_PER_SHARD_MIN)).unwrap_or(usize::MAX)
}

/// Why a start under `limit` with `shards` shards cannot work, if it cannot: the reserve and
/// the smallest caches do not fit.
pub fn check_start(limit: u64, shards: usize) -> Result<(), String> {
    let needed = FILES_RESERVED + 2 * SEGMENT_FILES_PER_SHARD_MIN * shards.max(1) as u64;
    if limit >= needed {
        return Ok(());
    }
    Err(format!(
        "the open-files limit is {limit}; {shards} shards need at least {needed} ({FILES_RESERVED} \
         reserved, and {SEGMENT_FILES_PER_SHARD_MIN} segment files and as many connections per \
         shard): {FIX}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_split_between_the_reserve_segment_files_and_connections() {
        assert_eq!(segment_files_per_shard(4096, 2), 896);
        assert_eq!(segment_files_per_shard(1024, 2), 128);
        assert_eq!(segment_files_per_shard(600, 2), 64, "never under the minimum");
        assert!(check_start(1024, 2).is_ok());
        let refused = check_start(256, 2).unwrap_err();
        assert!(refused.contains("256") && refused.contains("LimitNOFILE"), "{refused}");
    }
}
