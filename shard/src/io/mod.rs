//! The storage seam: the only place the log touches files.
//!
//! Owns: the `Storage` / `StorageFile` traits the partition log is written against, and two
//! implementations of them: `dma` (the real one: glommio `DmaFile`, O_DIRECT through io_uring)
//! and `sim` (a seeded in-memory disk that injects torn writes, lost unsynced writes and read
//! errors, for randomized crash tests).
//!
//! Invariants:
//! 1. Every write is `DMA_ALIGNMENT`-aligned in position and length; `sim` asserts it so tests
//!    catch what O_DIRECT would refuse.
//! 2. Data written but not yet `sync`ed may be lost or torn by a crash; data `sync`ed may not.
//!    Creating, renaming and removing files is durable once `sync_dir` returns.
//! 3. Every glommio call in the workspace lives in `dma` or `runtime`, so the runtime could be
//!    swapped by touching those two modules.
//!
//! Runs on: the shard that owns the files; handles are `!Send`.

pub mod dma;
pub mod sim;

use std::io;
use std::path::{Path, PathBuf};

/// Position and length alignment for every write (the page size; a multiple of any logical block
/// size O_DIRECT may demand).
pub const DMA_ALIGNMENT: usize = 4096;

/// Rounds `value` down to a multiple of `DMA_ALIGNMENT`.
pub fn align_down(value: u64) -> u64 {
    value - value % DMA_ALIGNMENT as u64
}

/// Rounds `value` up to a multiple of `DMA_ALIGNMENT`.
pub fn align_up(value: u64) -> u64 {
    align_down(value + DMA_ALIGNMENT as u64 - 1)
}

/// A buffer suitable for a direct-I/O write.
pub trait IoBuffer {
    fn as_slice(&self) -> &[u8];
    fn as_mut_slice(&mut self) -> &mut [u8];
}

/// An open file (read and write).
#[allow(async_fn_in_trait)]
pub trait StorageFile {
    type Buffer: IoBuffer;
    type ReadBuffer: AsRef<[u8]>;

    /// A buffer of `len` bytes (contents unspecified) (a multiple of `DMA_ALIGNMENT`) to pass to `write_at`.
    fn alloc_buffer(&self, len: usize) -> Self::Buffer;
    /// Writes the whole buffer at `position`; both must be `DMA_ALIGNMENT`-aligned.
    async fn write_at(&self, buffer: Self::Buffer, position: u64) -> io::Result<()>;
    /// Reads up to `len` bytes at `position` (any alignment); short only at end of file.
    async fn read_at(&self, position: u64, len: usize) -> io::Result<Self::ReadBuffer>;
    /// fdatasync: everything written before the call is durable when it returns.
    async fn sync(&self) -> io::Result<()>;
    /// syncfs on the file system holding this file: everything written to any file of it
    /// (data and metadata) before the call is durable when it returns. One call stands for
    /// the fdatasyncs of many logs (`shared_sync`).
    async fn sync_file_system(&self) -> io::Result<()>;
    /// The file system holding the file (its device number), which shared syncs group by.
    fn file_system(&self) -> u64;
    /// Sets the file length (dropping or zero-extending).
    async fn truncate(&self, len: u64) -> io::Result<()>;
    /// The current file length.
    async fn size(&self) -> io::Result<u64>;
    /// Reserves disk blocks for the first `len` bytes without changing the file length
    /// (fallocate with KEEP_SIZE), so appends do not allocate extents one write at a time.
    /// (Setting the length instead, so that appends would not extend the file, was measured
    /// in issue #38: ext4 then issues each O_DIRECT write inline in the shard's io_uring
    /// submission instead of on a kernel worker, and 1,000 partitions under strata-bench
    /// acks=1 lost ~12% with twice the p99, for no clear gain at 4,000 under acks=all.)
    async fn preallocate(&self, len: u64) -> io::Result<()>;
}

/// How much of a file `Storage::remove_gently` frees at a time.
pub const GENTLE_REMOVE_STEP_BYTES: u64 = 4 << 20;
/// The pause between two such steps.
pub const GENTLE_REMOVE_PAUSE_MS: u64 = 1;

/// A file system the log can live on.
#[allow(async_fn_in_trait)]
pub trait Storage: Clone + 'static {
    type File: StorageFile + 'static;

    /// Opens `path` for reading and writing, creating it (empty) when `create` is set.
    async fn open(&self, path: &Path, create: bool) -> io::Result<Self::File>;
    async fn close(&self, file: Self::File) -> io::Result<()>;
    async fn remove(&self, path: &Path) -> io::Result<()>;
    /// Removes a file that may be large without stalling the file system: unlinking a 256 MiB
    /// segment at once froze every fdatasync on an ext4 disk for 45 ms (the journal commit
    /// that frees its extents), so it is first shrunk in `GENTLE_REMOVE_STEP_BYTES` steps,
    /// each synced (its own small journal commit, which also trims its blocks on a file
    /// system mounted with `discard`, not all of them at once in the next periodic commit).
    async fn remove_gently(&self, path: &Path) -> io::Result<()>;
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    async fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries of a directory.
    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Makes creations, renames and removals in the directory durable.
    async fn sync_dir(&self, path: &Path) -> io::Result<()>;
    async fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Removes a directory and everything in it (a deleted partition).
    async fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// (usable bytes, total bytes) of the file system holding `path`.
    fn space(&self, path: &Path) -> io::Result<(u64, u64)>;
    /// Lets the runtime hand queued I/O to the kernel now, instead of when the current task
    /// next blocks (write-behind relies on this to keep the device queue full).
    async fn submit_queued_io(&self);
}

/// A boxed future of the shard's thread.
pub type LocalFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T>>>;

/// Short-lived files (a checkpoint written, an index read, a directory synced) open at once
/// across the process: thousands of partitions taking their first append together each write
/// a checkpoint, and unbounded, those opens ran past a 1,024 open-files limit (EMFILE) while
/// the segment-file caches stayed within theirs (issue #38).
pub const SHORT_LIVED_FILES_MAX: usize = 128;
static SHORT_LIVED_FILES: async_lock::Semaphore = async_lock::Semaphore::new(SHORT_LIVED_FILES_MAX);

/// Waits for a turn to open short-lived files (at most two at a time per holder: a file and
/// its directory). Not nested: a holder never asks again before it lets go.
pub async fn short_lived_files() -> async_lock::SemaphoreGuard<'static> {
    SHORT_LIVED_FILES.acquire().await
}

/// Reads a whole small file (checkpoints, index files), or `None` when it does not exist.
pub async fn read_whole_file<S: Storage>(storage: &S, path: &Path) -> io::Result<Option<Vec<u8>>> {
    let _turn = short_lived_files().await;
    if !storage.exists(path).await? {
        return Ok(None);
    }
    let file = storage.open(path, false).await?;
    let size = file.size().await?;
    let len = usize::try_from(size).map_err(|_| io::Error::other("file too large"))?;
    let read = file.read_at(0, len).await;
    storage.close(file).await?;
    let read = read?;
    Ok(Some(read.as_ref().to_vec()))
}

/// Writes `bytes` to `path` atomically and durably: a temporary file is written, synced and
/// renamed over `path`, then the directory is synced. A crash leaves the old or the new content.
pub async fn write_file_atomic<S: Storage>(
    storage: &S,
    path: &Path,
    bytes: &[u8],
) -> io::Result<()> {
    write_file_atomic_once(storage, path, bytes).await
}

/// `write_file_atomic` for the small writes that free space (the metadata of DeleteTopics, the
/// log-start checkpoint of DeleteRecords and retention): on a full disk (ENOSPC) the space
/// reserve is released (`space_reserve`) and the write tried once more, so freeing space never
/// needs free space first. Other writes never touch the reserve (appends would eat it).
pub async fn write_file_atomic_freeing_space<S: Storage>(
    storage: &S,
    path: &Path,
    bytes: &[u8],
) -> io::Result<()> {
    match write_file_atomic_once(storage, path, bytes).await {
        Err(error) if is_disk_full(&error) => {
            let temporary = temporary_path(path);
            if storage.exists(&temporary).await.unwrap_or(false) {
                let _ = storage.remove(&temporary).await;
            }
            if !space_reserve::release() {
                return Err(error);
            }
            tracing::warn!(path = %path.display(), "disk full: released the space reserve to write a small metadata file");
            write_file_atomic_once(storage, path, bytes).await
        }
        other => other,
    }
}

/// ENOSPC, whether the error still carries the OS code or only its kind (glommio rebuilds
/// errors from the kind, with its own message).
pub fn is_disk_full(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ENOSPC) || error.kind() == io::ErrorKind::StorageFull
}

/// A file of `BYTES` allocated in the data directory at startup, and released (deleted) when a
/// small metadata write meets a full disk, so that write (the one that frees space) succeeds.
/// Recreated by `ensure` once the disk has room again.
pub mod space_reserve {
    use std::path::PathBuf;
    use std::sync::OnceLock;

    pub const FILE: &str = ".space-reserve";
    pub const BYTES: u64 = 16 << 20;
    static PATH: OnceLock<PathBuf> = OnceLock::new();

    /// Sets the data directory (once, at startup) and allocates the reserve if there is room.
    pub fn install(data_dir: &std::path::Path) {
        let _ = PATH.set(data_dir.join(FILE));
        ensure();
    }

    /// Allocates the reserve if it is missing and the disk has room for it three times over.
    pub fn ensure() {
        let Some(path) = PATH.get() else { return };
        if path.exists() {
            return;
        }
        let Some(dir) = path.parent() else { return };
        match super::file_system_space(dir) {
            Ok((free, _)) if free >= 3 * BYTES => {}
            _ => return,
        }
        let allocated =
            std::fs::OpenOptions::new().create_new(true).write(true).open(path).and_then(|file| {
                use std::os::fd::AsRawFd;
                // SAFETY: fallocate on a descriptor we own; no memory is involved.
                let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, BYTES as libc::off_t) };
                if rc != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                file.sync_all()
            });
        match allocated {
            Ok(()) => {
                tracing::info!(path = %path.display(), bytes = BYTES, "space reserve allocated")
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => {
                let _ = std::fs::remove_file(path);
                tracing::warn!(path = %path.display(), %error, "could not allocate the space reserve");
            }
        }
    }

    /// Deletes the reserve; whether there was one to free.
    pub fn release() -> bool {
        PATH.get().is_some_and(|path| std::fs::remove_file(path).is_ok())
    }
}

async fn write_file_atomic_once<S: Storage>(
    storage: &S,
    path: &Path,
    bytes: &[u8],
) -> io::Result<()> {
    let _turn = short_lived_files().await;
    let temporary = temporary_path(path);
    let file = storage.open(&temporary, true).await?;
    let result = async {
        file.truncate(0).await?;
        if !bytes.is_empty() {
            let padded = align_up(bytes.len() as u64) as usize;
            let mut buffer = file.alloc_buffer(padded);
            let target = buffer.as_mut_slice();
            if let Some(prefix) = target.get_mut(..bytes.len()) {
                prefix.copy_from_slice(bytes);
            }
            if let Some(padding) = target.get_mut(bytes.len()..) {
                padding.fill(0);
            }
            file.write_at(buffer, 0).await?;
            file.truncate(bytes.len() as u64).await?;
        }
        file.sync().await
    }
    .await;
    storage.close(file).await?;
    result?;
    storage.rename(&temporary, path).await?;
    let directory = path.parent().unwrap_or(Path::new("."));
    storage.sync_dir(directory).await
}

/// (usable bytes, total bytes) of the real file system holding `dir` (statvfs).
pub fn file_system_space(dir: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: statvfs fills the struct we pass; the path is a valid C string.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointers are valid for the call.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let block = stats.f_frsize;
    Ok((stats.f_bavail.saturating_mul(block), stats.f_blocks.saturating_mul(block)))
}

fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|name| name.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}
