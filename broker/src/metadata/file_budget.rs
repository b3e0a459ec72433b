//! The open-files budget: a partition keeps its active segment's file open and at most
//! `shard::partition_log::SEALED_FILES_OPEN_MAX` sealed ones (opened when read, closed when
//! another is; index files are read at open and closed), each connection is a socket, and
//! writes open a few short-lived files (checkpoints, a new segment at a roll). A topic change whose
//! partitions the process's open-files limit (RLIMIT_NOFILE) cannot hold is refused before
//! anything is persisted, and a start whose partitions on disk need more files than the limit
//! refuses with the limit and the fix, instead of failing half-way (EMFILE) or hanging.
//!
//! The budget: `FILES_RESERVED` for sockets and short-lived files, and `FILES_PER_PARTITION`
//! per partition, its bound whatever its number of segments.

/// Files kept for connections, the listener, io_uring, checkpoints and rolls.
pub const FILES_RESERVED: u64 = 512;
/// Files a partition holds at most: its active segment and the sealed ones read last.
pub const FILES_PER_PARTITION: u64 = 1 + shard::partition_log::SEALED_FILES_OPEN_MAX as u64;

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

/// The soft open-files limit now (without changing it).
pub fn open_files_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return u64::MAX;
    }
    limit.rlim_cur
}

/// How many partitions (of one segment each) a limit of `limit` open files can hold.
pub fn partitions_max(limit: u64) -> u64 {
    limit.saturating_sub(FILES_RESERVED) / FILES_PER_PARTITION
}

/// Why a change to `partitions_after` partitions does not fit `limit`, if it does not.
pub fn check_partitions(partitions_after: u64, limit: u64) -> Result<(), String> {
    let max = partitions_max(limit);
    if partitions_after <= max {
        return Ok(());
    }
    Err(format!(
        "{partitions_after} partitions would not fit the broker's open-files limit of {limit} \
         (each partition keeps up to {FILES_PER_PARTITION} segment files open; about {max} \
         partitions fit): \
         {FIX}"
    ))
}

/// Why a start with `partitions` does not fit `limit`, if it does not.
pub fn check_start(partitions: u64, limit: u64) -> Result<(), String> {
    let needed = partitions * FILES_PER_PARTITION + FILES_RESERVED;
    if needed <= limit {
        return Ok(());
    }
    Err(format!(
        "the {partitions} partitions keep up to {FILES_PER_PARTITION} segment files open each, which with {FILES_RESERVED} for connections and \
         writes needs about {needed} open files; the limit is {limit}: {FIX}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_holds_what_the_limit_allows_and_names_the_fix() {
        assert_eq!(partitions_max(1024), 256);
        assert!(check_partitions(256, 1024).is_ok());
        let refused = check_partitions(2050, 1024).unwrap_err();
        assert!(refused.contains("1024") && refused.contains("LimitNOFILE"), "{refused}");
        assert!(check_start(20_000, 20_000).unwrap_err().contains("40512"));
        assert!(check_start(60, 1024).is_ok());
    }
}
