//! The real storage: glommio `DmaFile` (O_DIRECT) through the executor's io_uring rings.
//!
//! Three glommio 0.9 traps are handled here (see DEVELOPERS.md):
//! 1. Its I/O-poll probe misfires on the first `DmaFile` an executor opens when that file is
//!    empty, after which every DMA read fails with EOPNOTSUPP on virtio disks (glommio #605).
//!    `DmaStorage::new` therefore writes a small non-empty probe file in the data directory and
//!    opens and reads it with `DmaFile` before any other file is opened on that executor.
//! 2. `DmaFile::create` opens write-only; files are opened read+write through `OpenOptions`.
//! 3. A relative path fails with EBADF ("Opening directory"); every path is made absolute
//!    against the working directory before glommio sees it (`absolute`).
//!
//! Runs on: a glommio executor thread; must be created and used on that thread.

use super::{
    IoBuffer, Storage, StorageFile, DMA_ALIGNMENT, GENTLE_REMOVE_PAUSE_MS, GENTLE_REMOVE_STEP_BYTES,
};
use glommio::io::{DmaBuffer, DmaFile, OpenOptions, ReadResult};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The probe file each executor opens first (trap 1 above).
pub const IO_PROBE_FILE_NAME: &str = ".io-probe";

impl IoBuffer for DmaBuffer {
    fn as_slice(&self) -> &[u8] {
        self.as_bytes()
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self.as_bytes_mut()
    }
}

/// A read result that derefs to the bytes read.
pub struct DmaRead(ReadResult);

impl AsRef<[u8]> for DmaRead {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// An open O_DIRECT file.
pub struct DmaStorageFile {
    file: DmaFile,
    /// The device of its file system (`st_dev`).
    device: u64,
}

impl StorageFile for DmaStorageFile {
    type Buffer = DmaBuffer;
    type ReadBuffer = DmaRead;

    fn alloc_buffer(&self, len: usize) -> DmaBuffer {
        assert!(len.is_multiple_of(DMA_ALIGNMENT), "DMA buffers are whole pages");
        // Not zeroed: callers fill what they write and zero any padding themselves.
        self.file.alloc_dma_buffer(len)
    }

    async fn write_at(&self, buffer: DmaBuffer, position: u64) -> io::Result<()> {
        assert!(position.is_multiple_of(DMA_ALIGNMENT as u64), "unaligned DMA write at {position}");
        let len = buffer.len();
        assert!(len.is_multiple_of(DMA_ALIGNMENT), "unaligned DMA write length {len}");
        let written = self.file.write_at(buffer, position).await?;
        if written != len {
            return Err(io::Error::other(format!("short DMA write: {written} of {len} bytes")));
        }
        Ok(())
    }

    async fn read_at(&self, position: u64, len: usize) -> io::Result<DmaRead> {
        Ok(DmaRead(self.file.read_at(position, len).await?))
    }

    async fn sync(&self) -> io::Result<()> {
        Ok(self.file.fdatasync().await?)
    }

    async fn sync_file_system(&self) -> io::Result<()> {
        // A duplicate of the descriptor goes to the thread: the cache of descriptors may
        // close this file while the call runs.
        // SAFETY: the descriptor is this file's, open while `self` lives.
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(self.file.as_raw_fd()) };
        let descriptor = borrowed.try_clone_to_owned()?;
        syncfs_on_thread(descriptor).await
    }

    fn file_system(&self) -> u64 {
        self.device
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        Ok(self.file.truncate(len).await?)
    }

    async fn size(&self) -> io::Result<u64> {
        Ok(self.file.file_size().await?)
    }

    async fn preallocate(&self, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        Ok(self.file.pre_allocate(len, true).await?)
    }
}

/// The device number of the file system holding `file`.
fn device_of(file: &DmaFile) -> io::Result<u64> {
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fstat` fills `stat` on success; the descriptor is open while `file` lives.
    let result = unsafe { libc::fstat(file.as_raw_fd(), stat.as_mut_ptr()) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fstat` succeeded, so it initialised `stat`.
    Ok(unsafe { stat.assume_init() }.st_dev)
}

type SyncfsJob = (std::os::fd::OwnedFd, futures_channel::oneshot::Sender<io::Result<()>>);

thread_local! {
    /// This shard's syncfs thread, started at its first shared sync.
    static SYNCFS_THREAD: std::cell::OnceCell<Option<std::sync::mpsc::Sender<SyncfsJob>>> =
        const { std::cell::OnceCell::new() };
}

fn syncfs(descriptor: &std::os::fd::OwnedFd) -> io::Result<()> {
    // SAFETY: `descriptor` is open while it is borrowed here.
    let result = unsafe { libc::syncfs(descriptor.as_raw_fd()) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Runs syncfs(2) on `descriptor`'s file system on this shard's syncfs thread, without
/// blocking the shard. io_uring has no syncfs; glommio's blocking pool also runs its file
/// operations (truncate, rename), which a commit would then hold up. The thread ends with
/// the shard (its queue's sender is the shard's thread-local).
async fn syncfs_on_thread(descriptor: std::os::fd::OwnedFd) -> io::Result<()> {
    let (answer, result) = futures_channel::oneshot::channel();
    let sender = SYNCFS_THREAD.with(|thread| {
        thread
            .get_or_init(|| {
                let (sender, receiver) = std::sync::mpsc::channel::<SyncfsJob>();
                let name = format!("syncfs-{}", std::thread::current().name().unwrap_or("shard"));
                let spawned = std::thread::Builder::new().name(name).spawn(move || {
                    for (descriptor, answer) in receiver {
                        let _ = answer.send(syncfs(&descriptor));
                    }
                });
                match spawned {
                    Ok(_) => Some(sender),
                    Err(error) => {
                        tracing::error!(%error, "could not start a syncfs thread");
                        None
                    }
                }
            })
            .clone()
    });
    let Some(sender) = sender else {
        // No thread could start: block the shard for the call rather than fail the commit.
        return syncfs(&descriptor);
    };
    sender.send((descriptor, answer)).map_err(|_| io::Error::other("the syncfs thread ended"))?;
    result.await.map_err(|_| io::Error::other("the syncfs thread dropped a sync"))?
}

/// `path` made absolute against the working directory: glommio opens files and directories
/// relative to a directory descriptor, and a relative path there fails with EBADF (trap 3).
fn absolute(path: &Path) -> io::Result<PathBuf> {
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        std::path::absolute(path)
    }
}

/// The real file system, as seen from one glommio executor.
#[derive(Clone)]
pub struct DmaStorage {
    _private: (),
}

impl DmaStorage {
    /// Prepares direct I/O on `data_dir` for the calling executor: creates the directory, and
    /// opens and reads a non-empty probe file with `DmaFile` first (trap 1 in the module header).
    pub async fn new(data_dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(data_dir)?;
        let probe = data_dir.join(IO_PROBE_FILE_NAME);
        let needs_probe_content = std::fs::metadata(&probe).map(|m| m.len() == 0).unwrap_or(true);
        if needs_probe_content {
            // A small blocking write, once per executor at startup, before it serves anything.
            std::fs::write(&probe, vec![0x5a; DMA_ALIGNMENT])?;
        }
        let file = DmaFile::open(&absolute(&probe)?).await?;
        let read = file.read_at(0, DMA_ALIGNMENT).await;
        file.close().await?;
        let read = read.map_err(|error| {
            io::Error::other(format!(
                "direct I/O read of {} failed ({error}); the data directory must be on a file \
                 system that supports O_DIRECT (ext4, xfs), not tmpfs or overlayfs",
                probe.display()
            ))
        })?;
        if read.len() != DMA_ALIGNMENT {
            return Err(io::Error::other("direct I/O probe read came back short"));
        }
        Ok(Self { _private: () })
    }
}

impl Storage for DmaStorage {
    type File = DmaStorageFile;

    async fn open(&self, path: &Path, create: bool) -> io::Result<DmaStorageFile> {
        let path = absolute(path)?;
        let file = OpenOptions::new().read(true).write(true).create(create).dma_open(&path).await?;
        let device = device_of(&file)?;
        Ok(DmaStorageFile { file, device })
    }

    async fn close(&self, file: DmaStorageFile) -> io::Result<()> {
        Ok(file.file.close().await?)
    }

    async fn remove(&self, path: &Path) -> io::Result<()> {
        Ok(glommio::io::remove(absolute(path)?).await?)
    }

    async fn remove_gently(&self, path: &Path) -> io::Result<()> {
        let file = self.open(path, false).await?;
        let mut size = file.size().await?;
        while size > GENTLE_REMOVE_STEP_BYTES {
            size -= GENTLE_REMOVE_STEP_BYTES;
            file.truncate(size).await?;
            // Each step is its own journal commit: without a sync nothing forces one where no
            // append syncs (acks=1, flush.policy never), so every step's freed extents went
            // out in the next periodic commit at once; on a file system mounted with `discard`
            // that is a discard of the whole file, which held writes on the disk ~70 ms
            // (BENCHMARKS.md). Then room for other commits between steps (measured: 4 MiB
            // steps 1 ms apart kept a concurrent fdatasync under 1.3 ms where one unlink held
            // it 45 ms).
            file.sync().await?;
            glommio::timer::sleep(std::time::Duration::from_millis(GENTLE_REMOVE_PAUSE_MS)).await;
        }
        self.close(file).await?;
        self.remove(path).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        Ok(glommio::io::rename(absolute(from)?, absolute(to)?).await?)
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        // Directory creation is rare (a new partition) and metadata-only.
        std::fs::create_dir_all(path)
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        // Listing happens once per partition at open time.
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let directory = glommio::io::Directory::open(absolute(path)?).await?;
        directory.sync().await?;
        Ok(directory.close().await?)
    }

    async fn submit_queued_io(&self) {
        // glommio submits to io_uring when the executor leaves the task queue.
        glommio::executor().yield_task_queue_now().await
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        // A deleted partition's segments can hold gigabytes: each file goes gently (an unlink
        // of it all at once blocked this shard and stalled every fdatasync on the disk), then
        // the empty directory, a short metadata operation.
        for name in self.list_dir(path).await? {
            let entry = path.join(&name);
            if entry.is_dir() {
                std::fs::remove_dir_all(&entry)?;
            } else {
                self.remove_gently(&entry).await?;
            }
        }
        std::fs::remove_dir(path)
    }

    fn space(&self, path: &Path) -> io::Result<(u64, u64)> {
        super::file_system_space(path)
    }

    async fn exists(&self, path: &Path) -> io::Result<bool> {
        let path: PathBuf = path.to_path_buf();
        Ok(path.exists())
    }
}
