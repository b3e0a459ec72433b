//! `shard`: the per-core storage engine.
//!
//! Owns: partition logs on direct-I/O segment files (`partition_log`, `segment`, `index`,
//! `recovery`, `checkpoint`), the per-shard batch cache (`cache`), the storage seam with its real
//! and simulated implementations (`io`), the thread-per-core runtime (`runtime`), and the
//! shard's budgets every partition draws from: write-behind memory (`write_budget`) and open
//! segment descriptors (`open_files`); and the shard's shared commit (`shared_sync`).
//!
//! Invariants:
//! 1. Every glommio call lives in `io::dma` or `runtime`.
//! 2. A partition's files are touched only by the shard that owns it (`runtime::shard_of`).
//! 3. Nothing read from disk is trusted before it is checked (length, magic, CRC32C, offsets).

pub mod batch_reader;
pub mod cache;
pub mod checkpoint;
pub mod compaction;
pub mod config;
pub mod error;
pub mod index;
pub mod io;
pub mod open_files;
pub mod partition_log;
pub mod producer_state;
mod recovery;
pub mod runtime;
pub mod segment;
pub mod shared_sync;
pub mod write_budget;

pub use cache::BatchCache;
pub use config::{FlushPolicy, LogConfig};
pub use error::{Result, StorageError};
pub use partition_log::{
    AppendInfo, DurableHold, LogRead, OpenOptions, PartitionLog, TimestampLookup,
};
