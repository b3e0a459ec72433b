//! A simulated disk for deterministic crash tests.
//!
//! Owns: an in-memory file system whose files remember which writes were synced. A `crash`
//! replaces every file's content with its synced content plus, for each unsynced write in order,
//! either the whole write, a torn prefix of it, or nothing, chosen by a seeded generator. Reads
//! fail with an injected error at a configurable rate. Everything is deterministic for a seed.
//!
//! Invariants: writes must be `DMA_ALIGNMENT`-aligned (asserted, as O_DIRECT would refuse them);
//! file handles from before a crash fail every call, like the file descriptors of a dead process.
//!
//! Runs on: one thread (tests); `Rc`-based.

use super::{IoBuffer, Storage, StorageFile, DMA_ALIGNMENT};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The size the simulated disk reports (`Storage::space`).
pub const SIM_DISK_BYTES: u64 = 1 << 30;

/// What the simulated disk injects.
#[derive(Debug, Clone, Copy)]
pub struct FaultConfig {
    /// Chance that one `read_at` fails with an I/O error.
    pub read_error_probability: f64,
    /// Chance that one `write_at` fails (ENOSPC or EIO, even odds) without writing anything.
    pub write_error_probability: f64,
    /// Chance that one `sync` fails with EIO (the writes it would have made durable stay
    /// unsynced: a crash may still lose them).
    pub sync_error_probability: f64,
    /// Chance that one `preallocate` fails with ENOSPC.
    pub preallocate_error_probability: f64,
    /// Chance that one `open` fails with EMFILE ("too many open files").
    pub open_error_probability: f64,
}

impl FaultConfig {
    pub const NONE: FaultConfig = FaultConfig {
        read_error_probability: 0.0,
        write_error_probability: 0.0,
        sync_error_probability: 0.0,
        preallocate_error_probability: 0.0,
        open_error_probability: 0.0,
    };

    /// Read errors only, at `probability`.
    pub fn reads(probability: f64) -> FaultConfig {
        FaultConfig { read_error_probability: probability, ..FaultConfig::NONE }
    }
}

#[derive(Default)]
struct SimFile {
    /// What a reader sees now.
    current: Vec<u8>,
    /// What survives a crash for sure.
    durable: Vec<u8>,
    /// Writes since the last sync, in order, as (position, bytes).
    unsynced: Vec<(u64, Vec<u8>)>,
}

struct SimDisk {
    files: BTreeMap<PathBuf, SimFile>,
    directories: std::collections::BTreeSet<PathBuf>,
    rng: StdRng,
    faults: FaultConfig,
    /// Bumped by every crash; handles from an older generation are dead.
    generation: u64,
    injected_read_errors: u64,
    /// Write-side faults injected so far (write, sync, preallocate, open).
    injected_write_errors: u64,
    /// File handles open now (each is a descriptor on a real disk).
    open_handles: u64,
    /// Bytes written by `write_at` so far (write amplification tests).
    bytes_written: u64,
    /// `write_at` calls so far.
    writes: u64,
}

impl SimDisk {
    /// An injected error with `errno`, at `probability`.
    fn inject(&mut self, probability: f64, errno: i32) -> Option<io::Error> {
        if probability > 0.0 && self.rng.gen_bool(probability) {
            self.injected_write_errors += 1;
            Some(io::Error::from_raw_os_error(errno))
        } else {
            None
        }
    }
}

/// The simulated file system; clones share one disk.
#[derive(Clone)]
pub struct SimStorage {
    disk: Rc<RefCell<SimDisk>>,
    /// A process's handle (`SimStorage::process`): the disk generation it started in. It dies
    /// at the next `crash`, as a crashed process's view of its disk does, so the tasks of a
    /// node "crashed" in a test can never touch the disk again. `None`: a test's own handle,
    /// which outlives crashes.
    process: Option<u64>,
}

/// A plain heap buffer standing in for a DMA buffer.
pub struct SimBuffer(Vec<u8>);

impl IoBuffer for SimBuffer {
    fn as_slice(&self) -> &[u8] {
        &self.0
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// An open simulated file.
pub struct SimFileHandle {
    disk: Rc<RefCell<SimDisk>>,
    path: PathBuf,
    generation: u64,
}

fn dead_handle() -> io::Error {
    io::Error::other("simulated crash: this handle belongs to a dead process")
}

fn write_into(target: &mut Vec<u8>, position: usize, bytes: &[u8]) {
    if target.len() < position + bytes.len() {
        target.resize(position + bytes.len(), 0);
    }
    target[position..position + bytes.len()].copy_from_slice(bytes);
}

impl Drop for SimFileHandle {
    fn drop(&mut self) {
        if let Ok(mut disk) = self.disk.try_borrow_mut() {
            disk.open_handles = disk.open_handles.saturating_sub(1);
        }
    }
}

impl SimFileHandle {
    fn with_file<T>(&self, f: impl FnOnce(&mut SimFile, &mut SimDisk) -> T) -> io::Result<T> {
        let mut disk = self.disk.borrow_mut();
        if disk.generation != self.generation {
            return Err(dead_handle());
        }
        let mut file = disk.files.remove(&self.path).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{} was removed", self.path.display()))
        })?;
        let result = f(&mut file, &mut disk);
        disk.files.insert(self.path.clone(), file);
        Ok(result)
    }
}

impl StorageFile for SimFileHandle {
    type Buffer = SimBuffer;
    type ReadBuffer = Vec<u8>;

    fn alloc_buffer(&self, len: usize) -> SimBuffer {
        assert!(len.is_multiple_of(DMA_ALIGNMENT), "DMA buffers are whole pages");
        SimBuffer(vec![0; len])
    }

    async fn write_at(&self, buffer: SimBuffer, position: u64) -> io::Result<()> {
        assert!(position.is_multiple_of(DMA_ALIGNMENT as u64), "unaligned write at {position}");
        assert!(buffer.0.len().is_multiple_of(DMA_ALIGNMENT), "unaligned write length");
        let failed = self.with_file(|_, disk| {
            let errno = if disk.rng.gen_bool(0.5) { libc::ENOSPC } else { libc::EIO };
            disk.inject(disk.faults.write_error_probability, errno)
        })?;
        if let Some(error) = failed {
            return Err(error);
        }
        // Like a real device, a write may still be in flight when the caller moves on.
        let defer = self.with_file(|_, disk| disk.rng.gen_bool(0.5))?;
        if defer {
            futures_lite::future::yield_now().await;
        }
        self.with_file(|file, disk| {
            disk.bytes_written += buffer.0.len() as u64;
            disk.writes += 1;
            write_into(&mut file.current, position as usize, &buffer.0);
            file.unsynced.push((position, buffer.0));
        })
    }

    async fn read_at(&self, position: u64, len: usize) -> io::Result<Vec<u8>> {
        self.with_file(|file, disk| {
            if disk.faults.read_error_probability > 0.0
                && disk.rng.gen_bool(disk.faults.read_error_probability)
            {
                disk.injected_read_errors += 1;
                return Err(io::Error::other("injected read error"));
            }
            let start = (position as usize).min(file.current.len());
            let end = (start + len).min(file.current.len());
            Ok(file.current[start..end].to_vec())
        })?
    }

    async fn sync(&self) -> io::Result<()> {
        // A sync takes time on a real disk: other tasks run meanwhile (so several logs can be
        // in their sync step at once, as `shared_sync` expects).
        futures_lite::future::yield_now().await;
        self.with_file(|file, disk| {
            if let Some(error) = disk.inject(disk.faults.sync_error_probability, libc::EIO) {
                return Err(error);
            }
            file.durable = file.current.clone();
            file.unsynced.clear();
            Ok(())
        })?
    }

    async fn sync_file_system(&self) -> io::Result<()> {
        futures_lite::future::yield_now().await;
        let mut disk = self.disk.borrow_mut();
        if disk.generation != self.generation {
            return Err(dead_handle());
        }
        let probability = disk.faults.sync_error_probability;
        if let Some(error) = disk.inject(probability, libc::EIO) {
            return Err(error);
        }
        for file in disk.files.values_mut() {
            file.durable = file.current.clone();
            file.unsynced.clear();
        }
        Ok(())
    }

    fn file_system(&self) -> u64 {
        0
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        // Truncation is modelled as a journaled metadata change: it applies to the durable image
        // at once and clips unsynced writes, so a crash cannot resurrect truncated bytes.
        self.with_file(|file, _| {
            let len = len as usize;
            file.current.resize(len, 0);
            file.durable.resize(len, 0);
            for (position, bytes) in &mut file.unsynced {
                let keep = len.saturating_sub(*position as usize).min(bytes.len());
                bytes.truncate(keep);
            }
        })
    }

    async fn size(&self) -> io::Result<u64> {
        self.with_file(|file, _| file.current.len() as u64)
    }

    async fn preallocate(&self, _len: u64) -> io::Result<()> {
        self.with_file(|_, disk| {
            let probability = disk.faults.preallocate_error_probability;
            match disk.inject(probability, libc::ENOSPC) {
                Some(error) => Err(error),
                None => Ok(()),
            }
        })?
    }
}

impl SimStorage {
    pub fn new(seed: u64, faults: FaultConfig) -> Self {
        let disk = SimDisk {
            files: BTreeMap::new(),
            directories: Default::default(),
            rng: StdRng::seed_from_u64(seed),
            faults,
            generation: 0,
            injected_read_errors: 0,
            injected_write_errors: 0,
            open_handles: 0,
            bytes_written: 0,
            writes: 0,
        };
        Self { disk: Rc::new(RefCell::new(disk)), process: None }
    }

    /// A handle for one process (a node started on this disk): every operation through it,
    /// and through the files it opens, fails once the disk has crashed since (`crash`).
    pub fn process(&self) -> SimStorage {
        let generation = self.disk.borrow().generation;
        SimStorage { disk: self.disk.clone(), process: Some(generation) }
    }

    /// Err when this is a process's handle and that process crashed.
    fn alive(&self) -> io::Result<()> {
        match self.process {
            Some(generation) if generation != self.disk.borrow().generation => {
                Err(io::Error::other("the process holding this handle crashed"))
            }
            _ => Ok(()),
        }
    }

    /// Sets the fault rates (recovery in tests may run with errors off, then on).
    pub fn set_faults(&self, faults: FaultConfig) {
        self.disk.borrow_mut().faults = faults;
    }

    /// File handles open now (of this disk generation or older).
    pub fn open_handles(&self) -> u64 {
        self.disk.borrow().open_handles
    }

    /// How many write-side errors (write, sync, preallocate, open) were injected so far.
    pub fn injected_write_errors(&self) -> u64 {
        self.disk.borrow().injected_write_errors
    }

    /// Bytes written by every `write_at` so far.
    pub fn bytes_written(&self) -> u64 {
        self.disk.borrow().bytes_written
    }

    /// `write_at` calls so far.
    pub fn writes(&self) -> u64 {
        self.disk.borrow().writes
    }

    /// How many read errors were injected so far.
    pub fn injected_read_errors(&self) -> u64 {
        self.disk.borrow().injected_read_errors
    }

    /// Simulates a power cut: every unsynced write survives whole, torn or not at all, and
    /// every open handle dies.
    pub fn crash(&self) {
        let mut disk = self.disk.borrow_mut();
        let SimDisk { files, rng, generation, .. } = &mut *disk;
        *generation += 1;
        for file in files.values_mut() {
            let mut image = std::mem::take(&mut file.durable);
            for (position, bytes) in file.unsynced.drain(..) {
                let kept = match rng.gen_range(0..3) {
                    0 => bytes.len(),
                    1 => rng.gen_range(0..=bytes.len()),
                    _ => 0,
                };
                if kept > 0 {
                    write_into(&mut image, position as usize, &bytes[..kept]);
                }
            }
            file.current = image.clone();
            file.durable = image;
        }
    }

    /// The bytes a reader sees now (for test assertions and corruption).
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        self.disk.borrow().files.get(path).map(|file| file.current.clone())
    }

    /// Replaces a file's content durably (for tests that cut or corrupt files).
    pub fn set_file_bytes(&self, path: &Path, bytes: Vec<u8>) {
        let mut disk = self.disk.borrow_mut();
        let file = disk.files.entry(path.to_path_buf()).or_default();
        file.current = bytes.clone();
        file.durable = bytes;
        file.unsynced.clear();
    }

    /// Every file path on the disk.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.disk.borrow().files.keys().cloned().collect()
    }
}

impl Storage for SimStorage {
    type File = SimFileHandle;

    async fn open(&self, path: &Path, create: bool) -> io::Result<SimFileHandle> {
        self.alive()?;
        let mut disk = self.disk.borrow_mut();
        let probability = disk.faults.open_error_probability;
        if let Some(error) = disk.inject(probability, libc::EMFILE) {
            return Err(error);
        }
        if !disk.files.contains_key(path) {
            if !create {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{} not found", path.display()),
                ));
            }
            disk.files.insert(path.to_path_buf(), SimFile::default());
        }
        disk.open_handles += 1;
        Ok(SimFileHandle {
            disk: self.disk.clone(),
            path: path.to_path_buf(),
            generation: disk.generation,
        })
    }

    async fn close(&self, _file: SimFileHandle) -> io::Result<()> {
        Ok(())
    }

    async fn remove(&self, path: &Path) -> io::Result<()> {
        self.alive()?;
        self.disk.borrow_mut().files.remove(path).map(|_| ()).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{} not found", path.display()))
        })
    }

    async fn remove_gently(&self, path: &Path) -> io::Result<()> {
        self.remove(path).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.alive()?;
        let mut disk = self.disk.borrow_mut();
        let file = disk.files.remove(from).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{} not found", from.display()))
        })?;
        disk.files.insert(to.to_path_buf(), file);
        Ok(())
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.alive()?;
        self.disk.borrow_mut().directories.insert(path.to_path_buf());
        Ok(())
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.alive()?;
        let disk = self.disk.borrow();
        Ok(disk
            .files
            .keys()
            .filter(|file| file.parent() == Some(path))
            .filter_map(|file| file.file_name().map(|name| name.to_string_lossy().into_owned()))
            .collect())
    }

    async fn sync_dir(&self, _path: &Path) -> io::Result<()> {
        self.alive()
    }

    async fn submit_queued_io(&self) {
        futures_lite::future::yield_now().await
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.alive()?;
        let mut disk = self.disk.borrow_mut();
        disk.files.retain(|file, _| !file.starts_with(path));
        disk.directories.retain(|directory| !directory.starts_with(path));
        Ok(())
    }

    /// A fixed 1 GiB disk with half of it free.
    fn space(&self, _path: &Path) -> io::Result<(u64, u64)> {
        Ok((SIM_DISK_BYTES / 2, SIM_DISK_BYTES))
    }

    async fn exists(&self, path: &Path) -> io::Result<bool> {
        self.alive()?;
        let disk = self.disk.borrow();
        Ok(disk.files.contains_key(path) || disk.directories.contains(path))
    }
}
