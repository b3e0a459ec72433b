//! The shard's shared commit: one syncfs stands for the fdatasyncs of many logs at once.
//!
//! Issue #38: a producer writing thousands of partitions (librdkafka batches each partition on
//! its own) sends requests of hundreds of one-message batches, and under acks=all every
//! partition's group commit was an fdatasync of its own: io_uring runs each as a blocking job
//! on a kernel worker, and at 4,000 partitions those workers took 38% of the broker's CPU
//! (perf), most of it switching tasks, for one journal commit the syncs shared anyway.
//!
//! Now a log about to sync while at least `SHARED_SYNC_MIN_LOGS` logs of its shard are syncing
//! (counting itself) joins the shard's shared sync of the file system instead: one syncfs at a
//! time per file system, and a log that asks while one runs waits for the next (the running
//! one may have started before its writes completed). A single busy partition keeps its own
//! fdatasync, which costs no more than a syncfs and does not write back other files' pages.
//!
//! Durability: syncfs makes every write completed before the call durable, data and metadata,
//! on the file system of the descriptor it is given (ext4 and xfs commit their journal and
//! flush the device cache). A log counts its writes durable only after a shared sync that
//! started after they completed returned without error; an error fails every log waiting on
//! it, as its own fdatasync's would.
//!
//! Cost: syncfs also writes back other processes' dirty pages on the same file system, so a
//! data directory that shares its file system with heavy buffered writers sees their flushes
//! in its commit latency (a dedicated file system, as Kafka and Redpanda advise, sees none).
//!
//! Runs on: one shard (thread-local, like the write budget).

use crate::io::StorageFile;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::rc::Rc;

/// Logs of one shard syncing at once (counting the one asking) from which a sync is shared.
pub const SHARED_SYNC_MIN_LOGS: usize = 4;

/// The shared syncs of one file system.
#[derive(Default)]
struct Group {
    /// Shared syncs started so far (the running one's number while one runs).
    started: Cell<u64>,
    /// The number of the last one that ended.
    completed: Cell<u64>,
    running: Cell<bool>,
    /// The number of the last one that failed, and how.
    failed: RefCell<Option<(u64, io::ErrorKind, String)>>,
    /// Woken when one ends.
    ended: event_listener::Event,
}

#[derive(Default)]
struct Shard {
    groups: RefCell<HashMap<u64, Rc<Group>>>,
    /// Logs in their sync step now.
    syncing: Cell<usize>,
    /// syncfs calls so far.
    shared_syncs: Cell<u64>,
    /// Log syncs that a shared sync stood for, so far.
    shared_waiters: Cell<u64>,
    /// Log syncs that synced their own file (fdatasync), so far.
    own_syncs: Cell<u64>,
}

thread_local! {
    static SHARD: Shard = Shard::default();
}

/// A log in its sync step (counted while it lives).
pub struct Syncing(());

impl Syncing {
    pub fn begin() -> Syncing {
        SHARD.with(|shard| shard.syncing.set(shard.syncing.get() + 1));
        Syncing(())
    }

    /// Whether this sync should be the shard's shared one (else the log syncs its own file,
    /// counted here).
    pub fn shared(&self) -> bool {
        SHARD.with(|shard| {
            let shared = shard.syncing.get() >= SHARED_SYNC_MIN_LOGS;
            if !shared {
                shard.own_syncs.set(shard.own_syncs.get() + 1);
            }
            shared
        })
    }
}

impl Drop for Syncing {
    fn drop(&mut self) {
        SHARD.with(|shard| shard.syncing.set(shard.syncing.get().saturating_sub(1)));
    }
}

/// Ends the running shared sync if its task is dropped mid-call, so others start the next.
struct RunningGuard<'a>(&'a Group);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.0.running.set(false);
        self.0.ended.notify(usize::MAX);
    }
}

/// Makes every write to `file`'s file system completed before this call durable, through a
/// shared syncfs (see the module header).
pub async fn sync<F: StorageFile>(file: &F) -> io::Result<()> {
    let group = SHARD.with(|shard| {
        shard.shared_waiters.set(shard.shared_waiters.get() + 1);
        shard.groups.borrow_mut().entry(file.file_system()).or_default().clone()
    });
    // The first shared sync to start after this call: the running one may have started before
    // this log's writes completed.
    let needed = group.started.get() + 1;
    loop {
        if group.completed.get() >= needed {
            return match &*group.failed.borrow() {
                Some((number, kind, message)) if *number >= needed => {
                    Err(io::Error::new(*kind, message.clone()))
                }
                _ => Ok(()),
            };
        }
        if group.running.get() {
            let listener = group.ended.listen();
            if group.running.get() && group.completed.get() < needed {
                listener.await;
            }
            continue;
        }
        let number = group.started.get() + 1;
        group.started.set(number);
        group.running.set(true);
        let guard = RunningGuard(&group);
        SHARD.with(|shard| shard.shared_syncs.set(shard.shared_syncs.get() + 1));
        let result = file.sync_file_system().await;
        if let Err(error) = &result {
            *group.failed.borrow_mut() = Some((number, error.kind(), error.to_string()));
        }
        group.completed.set(number);
        drop(guard);
    }
}

/// This shard's shared syncs so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct Snapshot {
    /// syncfs calls.
    pub syncs: u64,
    /// Log syncs they stood for.
    pub log_syncs: u64,
    /// Log syncs that synced their own file instead (fdatasync).
    pub own_syncs: u64,
}

pub fn snapshot() -> Snapshot {
    SHARD.with(|shard| Snapshot {
        syncs: shard.shared_syncs.get(),
        log_syncs: shard.shared_waiters.get(),
        own_syncs: shard.own_syncs.get(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sim::{FaultConfig, SimStorage};
    use crate::io::{IoBuffer, Storage, DMA_ALIGNMENT};
    use std::path::Path;

    async fn write_page(file: &impl StorageFile, byte: u8) {
        let mut buffer = file.alloc_buffer(DMA_ALIGNMENT);
        buffer.as_mut_slice().fill(byte);
        file.write_at(buffer, 0).await.unwrap();
    }

    #[test]
    fn a_shared_sync_makes_every_file_durable_and_later_writes_wait_for_the_next() {
        futures_lite::future::block_on(async {
            let storage = SimStorage::new(7, FaultConfig::NONE);
            let a = storage.open(Path::new("/a"), true).await.unwrap();
            let b = storage.open(Path::new("/b"), true).await.unwrap();
            write_page(&a, 1).await;
            write_page(&b, 2).await;
            let calls = snapshot().syncs;
            sync(&a).await.unwrap();
            assert_eq!(snapshot().syncs, calls + 1);
            storage.crash();
            assert_eq!(storage.file_bytes(Path::new("/b")).unwrap(), vec![2; DMA_ALIGNMENT]);
            assert_eq!(storage.file_bytes(Path::new("/a")).unwrap(), vec![1; DMA_ALIGNMENT]);
        });
    }

    #[test]
    fn a_failed_shared_sync_fails_its_waiters_and_the_next_one_can_succeed() {
        futures_lite::future::block_on(async {
            let storage = SimStorage::new(9, FaultConfig::NONE);
            let a = storage.open(Path::new("/a"), true).await.unwrap();
            write_page(&a, 1).await;
            storage.set_faults(FaultConfig { sync_error_probability: 1.0, ..FaultConfig::NONE });
            assert!(sync(&a).await.is_err());
            storage.set_faults(FaultConfig::NONE);
            sync(&a).await.unwrap();
        });
    }
}
