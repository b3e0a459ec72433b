//! The thread-per-core runtime: one pinned glommio executor per shard, startup checks, and the
//! partition → shard ownership function.
//!
//! Owns: executor threads and their configuration (`io_memory`), the preflight that explains
//! what is missing when io_uring or locked memory is unavailable, and `shard_of`.
//! Invariants: shard `i` runs on exactly one OS thread pinned to core `i`; `shard_of` is a pure
//! function of (topic, partition, shard count), stable across restarts and platforms.
//! Runs on: the main thread (spawning) and each shard's own thread.

use std::future::Future;
use std::path::Path;

/// Index of a shard (and of the core it is pinned to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub u16);

/// The most shards one broker runs.
pub const SHARDS_MAX: usize = 1024;
/// Registered I/O memory per executor; glommio registers it with each of its three rings, and
/// takes a DMA buffer from it when one fits (else from the heap). A write from a registered
/// buffer (io_uring WRITE_FIXED) skips pinning the buffer's pages on every write, which cost 7%
/// of the broker's CPU under librdkafka's defaults (`gup_fast_fallback`, `__bio_release_pages`).
/// So it holds a partition's chunk writes in flight under large batches (4 x 4 MiB, see
/// `partition_log::LARGE_WRITE_CHUNK_BYTES`) and more. Measured (librdkafka defaults, acks=all,
/// 8 GB, 3 alternating rounds, issue #13): 2 MiB 973 / 1,022 MB/s, 32 MiB 1,053 / 1,075, 64 MiB
/// 1,049. It is pinned memory: the broker's RSS grows by this much per shard.
pub const IO_MEMORY_BYTES_DEFAULT: usize = 32 << 20;
/// glommio refuses to start below this locked-memory limit.
pub const MEMLOCK_BYTES_MIN: u64 = 512 * 1024;

/// Which shard owns a partition: partitions of a topic are spread round-robin from a start
/// shard chosen by a stable hash (FNV-1a) of the topic name.
pub fn shard_of(topic: &str, partition: i32, shard_count: usize) -> ShardId {
    assert!(shard_count > 0 && shard_count <= SHARDS_MAX);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in topic.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let slot =
        (hash % shard_count as u64 + u64::from(partition.unsigned_abs())) % shard_count as u64;
    ShardId(slot as u16)
}

/// Why the runtime cannot start, each with the fix in its message.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(
        "io_uring is unavailable ({0}). strata needs Linux 5.8+ with io_uring enabled: check \
         `sysctl kernel.io_uring_disabled` (must be 0) and that no seccomp profile (docker, \
         systemd SystemCallFilter) blocks io_uring_setup"
    )]
    IoUringUnavailable(std::io::Error),
    #[error(
        "the locked-memory limit is {limit_bytes} bytes; glommio needs at least \
         {MEMLOCK_BYTES_MIN}. Fix: `ulimit -l unlimited` in the starting shell, or \
         `LimitMEMLOCK=infinity` in the systemd unit, or run with CAP_IPC_LOCK"
    )]
    MemlockTooLow { limit_bytes: u64 },
    #[error("cannot use {requested} cores: this machine offers {available}")]
    TooManyCores { requested: usize, available: usize },
    #[error("failed to start the executor for shard {shard}: {message}")]
    Executor { shard: usize, message: String },
    #[error("shard {0} panicked")]
    ShardPanicked(usize),
}

/// What the preflight found; warnings are printed by the caller.
#[derive(Debug, Clone)]
pub struct Preflight {
    pub memlock_limit_bytes: u64,
    pub has_cap_ipc_lock: bool,
    pub available_cores: usize,
    pub warnings: Vec<String>,
}

/// Whether this process can set up an io_uring (kernel support, `kernel.io_uring_disabled`,
/// seccomp filters).
pub fn io_uring_probe() -> std::io::Result<()> {
    io_uring::IoUring::new(8).map(drop)
}

/// The soft locked-memory limit, bytes (`u64::MAX` for unlimited).
pub fn memlock_limit_bytes() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we pass and has no other effect.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    if rc != 0 {
        return 0;
    }
    limit.rlim_cur
}

/// Whether the process may lock memory beyond its limit (CAP_IPC_LOCK).
pub fn has_cap_ipc_lock() -> bool {
    const CAP_IPC_LOCK: u32 = 14;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("CapEff:").map(str::trim).map(String::from))
        })
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

/// The CPUs this process may run on (its affinity mask, e.g. systemd's `CPUAffinity=` or
/// `taskset`), in order. Shard `i` is pinned to the `i`-th of them.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `set` is a plain bitmask the kernel fills; size matches the type.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: pid 0 is this thread; the pointer and size describe `set`.
    let result = unsafe { libc::sched_getaffinity(0, size, &mut set) };
    if result != 0 {
        return (0..available_cores()).collect();
    }
    // SAFETY: CPU_ISSET reads the bitmask filled above; indexes are below CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize).filter(|cpu| unsafe { libc::CPU_ISSET(*cpu, &set) }).collect()
}

/// Cores this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Checks io_uring and locked memory before any executor starts.
pub fn preflight(cores: usize, io_memory_bytes: usize) -> Result<Preflight, RuntimeError> {
    io_uring::IoUring::new(8).map(drop).map_err(RuntimeError::IoUringUnavailable)?;
    let memlock_limit_bytes = memlock_limit_bytes();
    let has_cap_ipc_lock = has_cap_ipc_lock();
    if memlock_limit_bytes < MEMLOCK_BYTES_MIN {
        return Err(RuntimeError::MemlockTooLow { limit_bytes: memlock_limit_bytes });
    }
    let available = available_cores();
    if cores == 0 || cores > available {
        return Err(RuntimeError::TooManyCores { requested: cores, available });
    }
    let mut warnings = Vec::new();
    let registered = (io_memory_bytes as u64) * 3 * cores as u64;
    if !has_cap_ipc_lock
        && memlock_limit_bytes != libc::RLIM_INFINITY
        && registered > memlock_limit_bytes
    {
        warnings.push(format!(
            "registered I/O buffers need {registered} bytes of locked memory but the limit is \
             {memlock_limit_bytes}; direct I/O will use unregistered buffers (slower). Fix: \
             `ulimit -l unlimited`, `LimitMEMLOCK=infinity` in the systemd unit, or CAP_IPC_LOCK"
        ));
    }
    Ok(Preflight { memlock_limit_bytes, has_cap_ipc_lock, available_cores: available, warnings })
}

/// Where a shard runs.
#[derive(Debug, Clone, Copy)]
pub struct ShardContext {
    pub shard_id: ShardId,
    pub shard_count: usize,
}

/// How to start the shards.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Number of shards (one per allowed CPU, pinned in the order of `allowed_cpus`).
    pub cores: usize,
    pub io_memory_bytes: usize,
    /// Pin each shard to its core (off only where pinning is not allowed).
    pub pin: bool,
}

impl RuntimeConfig {
    pub fn all_cores() -> Self {
        Self { cores: available_cores(), io_memory_bytes: IO_MEMORY_BYTES_DEFAULT, pin: true }
    }
}

/// Runs `shard_main` on every shard, each on its own pinned executor thread, and waits for all
/// of them. Returns their results in shard order.
pub fn run_shards<F, Fut, T>(config: &RuntimeConfig, shard_main: F) -> Result<Vec<T>, RuntimeError>
where
    F: Fn(ShardContext) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let mut handles = Vec::with_capacity(config.cores);
    let cpus = allowed_cpus();
    for shard in 0..config.cores {
        let placement = match cpus.get(shard) {
            Some(cpu) if config.pin => glommio::Placement::Fixed(*cpu),
            _ => glommio::Placement::Unbound,
        };
        let shard_main = shard_main.clone();
        let context = ShardContext { shard_id: ShardId(shard as u16), shard_count: config.cores };
        let handle = glommio::LocalExecutorBuilder::new(placement)
            .name(&format!("shard-{shard}"))
            .io_memory(config.io_memory_bytes)
            .spawn(move || shard_main(context))
            .map_err(|error| RuntimeError::Executor { shard, message: error.to_string() })?;
        handles.push(handle);
    }
    let mut results = Vec::with_capacity(handles.len());
    for (shard, handle) in handles.into_iter().enumerate() {
        results.push(handle.join().map_err(|_| RuntimeError::ShardPanicked(shard))?);
    }
    Ok(results)
}

/// Runs one future on a fresh (unpinned) executor on the current thread: for tools and tests.
pub fn run_local<Fut: Future>(
    io_memory_bytes: usize,
    future: Fut,
) -> Result<Fut::Output, RuntimeError> {
    let executor = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(io_memory_bytes)
        .make()
        .map_err(|error| RuntimeError::Executor { shard: 0, message: error.to_string() })?;
    Ok(executor.run(future))
}

/// A task on a shard's executor; awaiting it yields its output, dropping it cancels it.
pub type Task<T> = glommio::Task<T>;

/// Spawns a task on the current shard's executor.
pub fn spawn<T: 'static>(future: impl Future<Output = T> + 'static) -> Task<T> {
    glommio::spawn_local(future)
}

/// Runs `work` on the process's offload threads and waits for it without blocking the shard:
/// for CPU-heavy work that must not stall the shard's other tasks (checking a large compressed
/// batch). Not glommio's blocking pool: glommio runs its own file operations there (truncate,
/// rename, remove), and a long job would hold a shard's segment growth behind it. The threads
/// are unpinned, so they use whatever core the shards leave idle; jobs queue when all are busy.
/// `None` only if the job panicked (a bug in `work`; the thread survives it).
pub async fn offload<R: Send + 'static>(work: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (answer, result) = futures_channel::oneshot::channel();
    let job: OffloadJob = Box::new(move || {
        let _ = answer.send(work());
    });
    let mut job = job;
    loop {
        match offload_queue().try_send(job) {
            Ok(()) => break,
            // Every slot taken: wait on the shard's timer, never block its thread.
            Err(std::sync::mpsc::TrySendError::Full(back)) => {
                job = back;
                sleep(std::time::Duration::from_millis(1)).await;
            }
            // The pool could not start (threads refused): run it here rather than fail.
            Err(std::sync::mpsc::TrySendError::Disconnected(back)) => {
                back();
                break;
            }
        }
    }
    result.await.ok()
}

type OffloadJob = Box<dyn FnOnce() + Send>;

/// How many offload threads the process runs.
pub const OFFLOAD_THREADS: usize = 2;

fn offload_queue() -> &'static std::sync::mpsc::SyncSender<OffloadJob> {
    static QUEUE: std::sync::OnceLock<std::sync::mpsc::SyncSender<OffloadJob>> =
        std::sync::OnceLock::new();
    QUEUE.get_or_init(|| {
        // Bounded: past it, `offload` waits (asynchronously) for a slot.
        let (sender, receiver) = std::sync::mpsc::sync_channel::<OffloadJob>(1024);
        let receiver = std::sync::Arc::new(std::sync::Mutex::new(receiver));
        for index in 0..OFFLOAD_THREADS {
            let receiver = receiver.clone();
            let spawned =
                std::thread::Builder::new().name(format!("offload-{index}")).spawn(move || loop {
                    let job = match receiver.lock() {
                        Ok(receiver) => receiver.recv(),
                        Err(_) => return,
                    };
                    match job {
                        // A panicking job drops its answer: the waiter gets `None`.
                        Ok(job) => {
                            drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)))
                        }
                        Err(_) => return,
                    }
                });
            if let Err(error) = spawned {
                tracing::error!(%error, "could not start an offload thread");
            }
        }
        sender
    })
}

/// Sleeps on the current shard's timer.
pub async fn sleep(duration: std::time::Duration) {
    glommio::timer::sleep(duration).await
}

/// TCP for the Kafka listener and peers: glommio's, re-exported so only this module names the
/// runtime. Listeners bind with SO_REUSEPORT, so every shard can accept on the same port.
pub mod net {
    pub use glommio::net::{TcpListener, TcpStream};
    use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};

    /// An accepted connection on its way to the shard that serves it (`Send`): its socket,
    /// owned, so one lost on the way is closed.
    pub struct HandedStream(std::os::fd::OwnedFd);

    impl HandedStream {
        /// Takes `stream`'s socket off this shard: a duplicate of its descriptor is kept, and
        /// the stream (with its own) is dropped. glommio has no way to release a stream's
        /// descriptor, and one accepted unbound (`shared_accept`) cannot be closed unbound.
        pub fn take(stream: TcpStream) -> std::io::Result<HandedStream> {
            // SAFETY: the descriptor is the stream's, open while `stream` lives.
            let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(stream.as_raw_fd()) };
            let owned = borrowed.try_clone_to_owned()?;
            drop(stream);
            Ok(HandedStream(owned))
        }

        /// The socket as a stream of the calling shard.
        pub fn bind(self) -> TcpStream {
            // SAFETY: the descriptor is an open TCP socket this value owned alone.
            unsafe { TcpStream::from_raw_fd(self.0.into_raw_fd()) }
        }
    }

    /// Reads exactly `len` bytes from `stream` into a new buffer that is never zero-filled
    /// first: a follower reads megabytes per fetch answer, and zeroing them cost more CPU than
    /// the read itself (15% of a follower's samples). The kernel writes straight into the
    /// buffer's spare capacity (`recv` through a raw pointer), and the length only ever covers
    /// bytes it wrote; when no data is ready, `peek` waits for some without taking it.
    pub async fn read_exact_to_new(
        stream: &TcpStream,
        len: usize,
    ) -> std::io::Result<bytes::BytesMut> {
        let mut buffer = bytes::BytesMut::with_capacity(len);
        while buffer.len() < len {
            if !recv_some(stream.as_raw_fd(), &mut buffer, len)? {
                // Waits for data without taking it.
                let mut probe = [0u8; 1];
                if stream.peek(&mut probe).await? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
        }
        Ok(buffer)
    }

    /// `read_exact_to_new` for a connection read through `reader` (one half of a split
    /// stream): the socket `fd` is read straight into the buffer's spare capacity, and when it
    /// holds no data, one byte is read through `reader` (which waits for data).
    pub async fn read_exact_to_new_from(
        fd: std::os::fd::RawFd,
        reader: &mut (impl futures_lite::AsyncRead + Unpin),
        len: usize,
    ) -> std::io::Result<bytes::BytesMut> {
        use futures_lite::AsyncReadExt;
        let mut buffer = bytes::BytesMut::with_capacity(len);
        while buffer.len() < len {
            if !recv_some(fd, &mut buffer, len)? {
                let mut one = [0u8; 1];
                if reader.read(&mut one).await? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                buffer.extend_from_slice(&one);
            }
        }
        Ok(buffer)
    }

    /// One non-blocking `recv` of what `fd` holds, up to `len` in all, into `buffer`'s spare
    /// capacity: true when bytes came, false when none are ready; the end of the stream is
    /// `UnexpectedEof`.
    fn recv_some(
        fd: std::os::fd::RawFd,
        buffer: &mut bytes::BytesMut,
        len: usize,
    ) -> std::io::Result<bool> {
        loop {
            let filled = buffer.len();
            let spare = buffer.spare_capacity_mut();
            let wanted = (len - filled).min(spare.len());
            // SAFETY: `spare` is writable memory of at least `wanted` bytes owned by `buffer`;
            // recv(2) writes at most `wanted` bytes there and reads none of it.
            let received = unsafe {
                libc::recv(
                    fd,
                    spare.as_mut_ptr().cast::<libc::c_void>(),
                    wanted,
                    libc::MSG_DONTWAIT,
                )
            };
            if received > 0 {
                // SAFETY: recv(2) initialized exactly `received` (<= `wanted`) bytes past the
                // current length.
                unsafe { buffer.set_len(filled + received as usize) };
                return Ok(true);
            }
            if received == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let error = std::io::Error::last_os_error();
            match error.kind() {
                std::io::ErrorKind::WouldBlock => return Ok(false),
                std::io::ErrorKind::Interrupted => {}
                _ => return Err(error),
            }
        }
    }
}

/// The cross-core channel mesh: every shard can send `T` to every other shard.
pub mod mesh {
    use std::sync::{Arc, Mutex};

    /// Built once before the shards start and handed to each; `join` on every shard.
    ///
    /// glommio's `MeshBuilder` holds an `Rc` shared by all its clones, so a clone made on one
    /// executor thread can race the drop of another on a second thread (a lost refcount
    /// increment frees the builder under a joining shard: a rare hang at startup). Every
    /// shard's clone is therefore made here, on the thread that builds the mesh, before any
    /// shard runs; shard threads only take their own and drop it (a lost decrement can only
    /// leak the builder, never free it early), and the original lives as long as the handle.
    pub struct MeshHandle<T: Send + 'static> {
        builders: Arc<MeshBuilders<T>>,
    }

    type Builder<T> =
        glommio::channels::channel_mesh::MeshBuilder<T, glommio::channels::channel_mesh::Full>;

    struct MeshBuilders<T: Send + 'static> {
        /// The original (kept so that the shards' drops never bring the count to zero while
        /// they join) and one clone per shard, taken by its shard.
        builders: Mutex<(Builder<T>, ShardBuilders<T>)>,
    }

    /// Each shard's clone, until it takes it.
    type ShardBuilders<T> = Vec<Option<Builder<T>>>;

    /// This shard's ends of the mesh.
    pub struct MeshEnds<T: Send + 'static> {
        pub senders: Senders<T>,
        pub receivers: Vec<(usize, Receiver<T>)>,
    }

    pub type Senders<T> = glommio::channels::channel_mesh::Senders<T>;
    pub type Receiver<T> = glommio::channels::shared_channel::ConnectedReceiver<T>;

    impl<T: Send + 'static> Clone for MeshHandle<T> {
        fn clone(&self) -> Self {
            Self { builders: self.builders.clone() }
        }
    }

    impl<T: Send + 'static> MeshHandle<T> {
        /// A mesh for `shards` peers whose channels hold up to `queue_depth_max` messages each
        /// (a full channel back-pressures the sender). Call on the thread that starts the
        /// shards, before they run.
        pub fn new(shards: usize, queue_depth_max: usize) -> Self {
            let original = Builder::full(shards, queue_depth_max);
            let per_shard = (0..shards).map(|_| Some(original.clone())).collect();
            let builders = MeshBuilders { builders: Mutex::new((original, per_shard)) };
            Self { builders: Arc::new(builders) }
        }

        /// Joins the mesh from the calling shard; returns when every shard has joined. Peer ids
        /// follow executor creation order, which `run_shards` makes equal to shard ids; this is
        /// checked against `shard_id`.
        pub async fn join(&self, shard_id: usize) -> Result<MeshEnds<T>, String> {
            let builder = {
                let mut builders = match self.builders.builders.lock() {
                    Ok(guard) => guard,
                    Err(_) => return Err("mesh builder poisoned".into()),
                };
                builders.1.get_mut(shard_id).and_then(Option::take)
            };
            let builder =
                builder.ok_or_else(|| format!("shard {shard_id} joined the mesh twice"))?;
            let (senders, mut receivers) =
                builder.join().await.map_err(|_| "joining the shard mesh failed".to_string())?;
            if senders.peer_id() != shard_id {
                return Err(format!(
                    "mesh peer id {} does not match shard {shard_id}",
                    senders.peer_id()
                ));
            }
            let receivers = receivers.streams();
            Ok(MeshEnds { senders, receivers })
        }
    }
}

/// The real-file storage for a data directory, primed for direct I/O on this executor.
pub async fn open_storage(data_dir: &Path) -> std::io::Result<crate::io::dma::DmaStorage> {
    crate::io::dma::DmaStorage::new(data_dir).await
}

/// Milliseconds since the Unix epoch (wall clock, for timestamps and retention).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as i64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_cpus_follow_the_affinity_mask() {
        let all = allowed_cpus();
        assert!(all.len() >= available_cores().min(1));
        let last = *all.last().expect("at least one CPU");
        // A thread restricted to one CPU (as CPUAffinity= or taskset restrict the process) sees
        // only that CPU, so shard 0 would be pinned there.
        let seen = std::thread::spawn(move || {
            // SAFETY: a zeroed cpu_set_t with one bit set, passed with its own size.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(last, &mut set);
                assert_eq!(libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set), 0);
            }
            allowed_cpus()
        })
        .join()
        .expect("thread");
        assert_eq!(seen, vec![last]);
    }

    #[test]
    fn shard_of_is_stable_and_spreads_partitions_of_a_topic() {
        assert_eq!(shard_of("orders", 0, 4), shard_of("orders", 0, 4));
        let shards: std::collections::BTreeSet<_> =
            (0..4).map(|p| shard_of("orders", p, 4)).collect();
        assert_eq!(shards.len(), 4, "four partitions land on four shards");
        assert_eq!(shard_of("anything", 7, 1), ShardId(0));
        // Pinned value: the mapping is part of the on-disk layout and must not drift.
        assert_eq!(shard_of("orders", 0, 2), shard_of("orders", 2, 2));
    }

    #[test]
    fn preflight_passes_on_this_machine_and_rejects_impossible_core_counts() {
        let cores = available_cores();
        let found =
            preflight(cores, IO_MEMORY_BYTES_DEFAULT).expect("io_uring and memlock are usable");
        assert!(found.memlock_limit_bytes >= MEMLOCK_BYTES_MIN);
        assert!(matches!(preflight(cores + 1, 0), Err(RuntimeError::TooManyCores { .. })));
    }

    #[test]
    fn run_shards_runs_one_pinned_executor_per_core() {
        let config = RuntimeConfig::all_cores();
        let ids = run_shards(&config, |context| async move {
            // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for this thread.
            let allowed: Vec<usize> = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
                (0..libc::CPU_SETSIZE as usize).filter(|cpu| libc::CPU_ISSET(*cpu, &set)).collect()
            };
            (context.shard_id.0, allowed)
        })
        .expect("executors start");
        assert_eq!(ids.len(), config.cores);
        for (index, (id, allowed)) in ids.into_iter().enumerate() {
            assert_eq!(usize::from(id), index);
            assert_eq!(allowed, vec![index], "shard {index} is pinned to core {index} only");
        }
    }
}
