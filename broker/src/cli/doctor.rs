//! `strata doctor`: checks that this host can run the broker as configured, and prints what is
//! wrong with the exact fix. Exits non-zero when a check fails (warnings do not).
//!
//! Checks: io_uring, the locked-memory limit (glommio registers its I/O buffers), each data
//! directory (exists or can be created, O_DIRECT works, free space), the open-files limit, the
//! CPUs the shards would be pinned to and whether they are isolated, transparent huge pages,
//! the clock source; then it starts every shard and opens the data directory with direct I/O
//! from each, as `strata serve` does.

use crate::config::BrokerConfig;
use shard::runtime::{self, RuntimeConfig};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

pub struct Finding {
    pub status: Status,
    pub check: &'static str,
    pub detail: String,
    pub fix: Option<String>,
}

fn ok(check: &'static str, detail: String) -> Finding {
    Finding { status: Status::Ok, check, detail, fix: None }
}

fn problem(status: Status, check: &'static str, detail: String, fix: &str) -> Finding {
    Finding { status, check, detail, fix: Some(fix.to_string()) }
}

/// Free space below this fails the data-directory check.
pub const FREE_BYTES_MIN: u64 = 1 << 30;
/// An open-files limit below this is a warning (each segment, index and connection is a file).
pub const OPEN_FILES_RECOMMENDED: u64 = 65_536;
/// An open-files limit below this fails.
pub const OPEN_FILES_MIN: u64 = 1024;

const MEMLOCK_FIX: &str = "raise the locked-memory limit: `ulimit -l unlimited` in the starting shell, \
     LimitMEMLOCK=infinity in the systemd unit (deploy/strata.service), or `strata - memlock unlimited` \
     in /etc/security/limits.d (deploy/limits.d/90-strata.conf); or grant CAP_IPC_LOCK";

/// Runs every check for `config`; prints a line per check; Err when any failed.
pub fn run(config: &BrokerConfig) -> Result<(), String> {
    let mut findings = vec![
        check_io_uring(),
        check_memlock(config.cores),
        check_data_dir(&config.data_dir),
        check_open_files(&config.data_dir),
        check_cpus(config.cores),
        check_transparent_huge_pages(),
        check_clock_source(),
        check_listeners(config),
    ];
    if findings.iter().all(|f| f.status != Status::Fail) {
        findings.push(check_shards(config));
    }
    let mut failed = 0;
    for finding in &findings {
        let label = match finding.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        println!("{label}  {:<12} {}", finding.check, finding.detail);
        if let Some(fix) = &finding.fix {
            println!("      {:<12} fix: {fix}", "");
        }
        failed += usize::from(finding.status == Status::Fail);
    }
    if failed > 0 {
        return Err(format!("doctor found {failed} problem(s); see the fixes above"));
    }
    println!("strata can run here");
    Ok(())
}

fn check_io_uring() -> Finding {
    match runtime::io_uring_probe() {
        Ok(()) => ok("io_uring", "available".into()),
        Err(error) => problem(
            Status::Fail,
            "io_uring",
            format!("cannot set up a ring: {error}"),
            "use Linux 5.8 or newer with io_uring enabled: `sysctl -w kernel.io_uring_disabled=0`, \
             and no seccomp profile (container runtime) that blocks io_uring_setup",
        ),
    }
}

fn bytes_text(bytes: u64) -> String {
    if bytes == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

fn check_memlock(cores: usize) -> Finding {
    let limit = runtime::memlock_limit_bytes();
    let capable = runtime::has_cap_ipc_lock();
    let wanted = (runtime::IO_MEMORY_BYTES_DEFAULT as u64) * 3 * cores as u64;
    let detail = format!(
        "limit {}, CAP_IPC_LOCK {}, registered I/O buffers want {} KiB",
        bytes_text(limit),
        if capable { "yes" } else { "no" },
        wanted / 1024
    );
    if limit < runtime::MEMLOCK_BYTES_MIN {
        problem(
            Status::Fail,
            "memlock",
            format!(
                "{detail}: below the {} KiB the runtime needs",
                runtime::MEMLOCK_BYTES_MIN / 1024
            ),
            MEMLOCK_FIX,
        )
    } else if !capable && limit != libc::RLIM_INFINITY && limit < wanted {
        problem(Status::Fail, "memlock", format!("{detail}: too low for every shard"), MEMLOCK_FIX)
    } else {
        ok("memlock", detail)
    }
}

fn check_data_dir(dir: &Path) -> Finding {
    if let Err(error) = std::fs::create_dir_all(dir) {
        return problem(
            Status::Fail,
            "data dir",
            format!("{}: cannot create: {error}", dir.display()),
            "create it and give it to the broker's user (`install -d -o strata -g strata -m 750 DIR`)",
        );
    }
    if let Err(error) = direct_io_probe(dir) {
        return problem(
            Status::Fail,
            "data dir",
            format!("{}: O_DIRECT write/read failed: {error}", dir.display()),
            "put log.dirs on a file system with direct I/O (ext4 or xfs on a block device; not \
             tmpfs, overlayfs or a network file system)",
        );
    }
    match free_bytes(dir) {
        Ok((free, _)) if free < FREE_BYTES_MIN => problem(
            Status::Fail,
            "data dir",
            format!("{}: only {} MiB free", dir.display(), free >> 20),
            "free space on the file system, or point log.dirs at a larger one",
        ),
        Ok((free, total)) if free.saturating_mul(10) < total => problem(
            Status::Warn,
            "data dir",
            format!(
                "{}: {} MiB free of {} MiB (under 10%)",
                dir.display(),
                free >> 20,
                total >> 20
            ),
            "lower retention (log.retention.ms / log.retention.bytes) or add space",
        ),
        Ok((free, total)) => ok(
            "data dir",
            format!(
                "{}: O_DIRECT works, {} GiB free of {} GiB",
                dir.display(),
                free >> 30,
                total >> 30
            ),
        ),
        Err(error) => problem(
            Status::Warn,
            "data dir",
            format!("{}: free space unknown: {error}", dir.display()),
            "check that the directory is on a local file system",
        ),
    }
}

/// Writes and reads back one aligned block with O_DIRECT in `dir`.
fn direct_io_probe(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    const BLOCK: usize = 4096;
    let path = dir.join(".strata-doctor-probe");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)?;
    let layout =
        std::alloc::Layout::from_size_align(BLOCK, BLOCK).map_err(std::io::Error::other)?;
    // SAFETY: the layout has a non-zero size; the block is freed below and never aliased.
    let pointer = unsafe { std::alloc::alloc_zeroed(layout) };
    if pointer.is_null() {
        return Err(std::io::Error::other("out of memory"));
    }
    // SAFETY: `pointer` is a live, aligned allocation of BLOCK bytes owned here.
    let buffer = unsafe { std::slice::from_raw_parts_mut(pointer, BLOCK) };
    buffer.fill(0x5a);
    let result = file.write_all_at(buffer, 0).and_then(|()| {
        buffer.fill(0);
        file.read_exact_at(buffer, 0)?;
        if buffer.iter().all(|byte| *byte == 0x5a) {
            Ok(())
        } else {
            Err(std::io::Error::other("read back different bytes"))
        }
    });
    // SAFETY: allocated above with the same layout.
    unsafe { std::alloc::dealloc(pointer, layout) };
    drop(file);
    let _ = std::fs::remove_file(&path);
    result
}

/// (free, total) bytes of the file system holding `dir`.
/// (usable, total) bytes of the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<(u64, u64)> {
    shard::io::file_system_space(dir)
}

/// The open-files limit against the partitions on disk. The broker raises its soft limit to
/// the hard one at start, so the hard limit is what it will have.
fn check_open_files(data_dir: &Path) -> Finding {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we pass.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_max
    } else {
        0
    };
    let fix = "LimitNOFILE=1048576 in the systemd unit, `strata - nofile 1048576` in \
               /etc/security/limits.d (deploy/limits.d/90-strata.conf), or `ulimit -n 1048576`";
    let partitions = crate::metadata::recover::partition_directories(data_dir)
        .map(|topics| topics.values().map(|indexes| indexes.len() as u64).sum::<u64>())
        .unwrap_or_default();
    let shards = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Err(why) = crate::metadata::file_budget::check_start(soft, shards) {
        return problem(Status::Fail, "open files", why, fix);
    }
    let cache = crate::metadata::file_budget::segment_files_per_shard(soft, shards);
    let detail = format!(
        "limit {soft} (hard, the broker raises its soft limit to it); {partitions} partitions on \
         disk; each of {shards} shards keeps up to {cache} segment files open (closed and \
         reopened on demand past that)"
    );
    if soft < OPEN_FILES_MIN {
        problem(Status::Fail, "open files", detail, fix)
    } else if soft < OPEN_FILES_RECOMMENDED {
        problem(
            Status::Warn,
            "open files",
            format!("{detail}: under {OPEN_FILES_RECOMMENDED}; many partitions or connections will run out"),
            fix,
        )
    } else {
        ok("open files", detail)
    }
}

fn check_cpus(cores: usize) -> Finding {
    let allowed = runtime::allowed_cpus();
    let isolated = std::fs::read_to_string("/sys/devices/system/cpu/isolated").unwrap_or_default();
    let isolated = isolated.trim();
    let pinned: Vec<usize> = allowed.iter().copied().take(cores).collect();
    let detail = format!(
        "{} shard(s) pinned to CPUs {pinned:?} of {} allowed; isolated CPUs: {}",
        cores,
        allowed.len(),
        if isolated.is_empty() { "none" } else { isolated }
    );
    if cores > allowed.len() {
        problem(
            Status::Fail,
            "cpus",
            format!("num.cores = {cores} but only {} CPUs are allowed", allowed.len()),
            "lower num.cores, or widen the process's CPU affinity (CPUAffinity= in the unit)",
        )
    } else {
        ok("cpus", detail)
    }
}

fn check_transparent_huge_pages() -> Finding {
    let path = "/sys/kernel/mm/transparent_hugepage/enabled";
    match std::fs::read_to_string(path) {
        Ok(text) if text.contains("[always]") => problem(
            Status::Warn,
            "huge pages",
            "transparent huge pages: always (compaction stalls show up as latency spikes)".into(),
            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or \
             transparent_hugepage=madvise on the kernel command line)",
        ),
        Ok(text) => ok(
            "huge pages",
            format!("transparent huge pages: {}", selected(&text).unwrap_or("unknown")),
        ),
        Err(_) => ok("huge pages", "transparent huge pages not available".into()),
    }
}

/// The `[selected]` word of a sysfs choice list.
fn selected(text: &str) -> Option<&str> {
    text.split_whitespace().find_map(|word| word.strip_prefix('[')?.strip_suffix(']'))
}

fn check_clock_source() -> Finding {
    let base = "/sys/devices/system/clocksource/clocksource0";
    let current =
        std::fs::read_to_string(format!("{base}/current_clocksource")).unwrap_or_default();
    let current = current.trim();
    match current {
        "tsc" | "kvm-clock" | "arch_sys_counter" => {
            ok("clock", format!("clock source {current} (fast timestamps)"))
        }
        "" => ok("clock", "clock source unknown".into()),
        other => {
            let available = std::fs::read_to_string(format!("{base}/available_clocksource"))
                .unwrap_or_default();
            problem(
                Status::Warn,
                "clock",
                format!("clock source {other}: reading the time is a slow system call (available: {})", available.trim()),
                "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource if tsc \
                 is available (tsc=reliable on the kernel command line keeps it)",
            )
        }
    }
}

/// Starts every shard as `serve` would and opens the data directory with direct I/O from each.
/// Warns about a client listener other hosts can reach with no authentication: anyone who
/// reaches the port may produce, consume, delete topics and reset offsets.
fn check_listeners(config: &BrokerConfig) -> Finding {
    let open: Vec<String> = config
        .listeners
        .iter()
        .filter(|listener| !listener.listen.ip().is_loopback())
        .filter(|listener| {
            // TLS with required client certificates authenticates; SASL is not built yet.
            let mtls = listener.tls
                && config.tls.as_ref().is_some_and(|tls| {
                    tls.client_auth == crate::config::security::ClientAuth::Required
                });
            !mtls
        })
        .map(|listener| format!("{}://{}", listener.name, listener.listen))
        .collect();
    if open.is_empty() {
        return ok("listeners", "every client listener is on loopback or authenticates".into());
    }
    problem(
        Status::Warn,
        "listeners",
        format!("{} reachable from other hosts with no authentication", open.join(", ")),
        "bind it to a loopback or private address, or serve SSL with ssl.client.auth=required \
         (strata cert self-signed to try it)",
    )
}

fn check_shards(config: &BrokerConfig) -> Finding {
    let runtime_config = RuntimeConfig { cores: config.cores, ..RuntimeConfig::all_cores() };
    let data_dir = config.data_dir.clone();
    let results = runtime::run_shards(&runtime_config, move |context| {
        let data_dir = data_dir.clone();
        async move {
            runtime::open_storage(&data_dir)
                .await
                .map(drop)
                .map_err(|error| format!("shard {}: {error}", context.shard_id.0))
        }
    });
    let failure = match results {
        Err(error) => Some(error.to_string()),
        Ok(results) => results.into_iter().find_map(Result::err),
    };
    match failure {
        None => {
            ok("shards", format!("{} shard(s) started, direct I/O works from each", config.cores))
        }
        Some(error) => problem(
            Status::Fail,
            "shards",
            error,
            "see the checks above; run with RUST_LOG=debug for the runtime's details",
        ),
    }
}
