//! Producer ids for idempotent producers (InitProducerId), unique for the life of the data
//! directory.
//!
//! Owned by shard 0 (every InitProducerId is routed there; it is not a hot path). Ids are
//! handed out from blocks of `PRODUCER_ID_BLOCK_SIZE`: before the first id of a block is given
//! out, the end of that block is written durably to `<data_dir>/producer-id-block`, so after
//! any crash the next block starts past every id ever given out (Kafka's ProducerIdManager does
//! the same with blocks in ZooKeeper/KRaft).
//!
//! Epoch bump (KIP-360): a producer that asks again with an id this directory gave out and its
//! current epoch gets the same id with the epoch plus one, and must restart its sequences at 0
//! (the partitions fence the old epoch). An id that was never given out, or an epoch about to
//! overflow, gets a fresh id with epoch 0.

use crate::state::Shard;
use std::cell::Cell;

pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
pub const PRODUCER_ID_BLOCK_FILE: &str = "producer-id-block";

/// Shard 0's allocator state.
#[derive(Debug, Default)]
pub struct ProducerIdAllocator {
    /// The next id to hand out.
    next: Cell<i64>,
    /// The end (exclusive) of the block on disk; ids below it may have been given out.
    block_end: Cell<i64>,
    /// Serializes allocations (a block write is awaited).
    lock: async_lock::Mutex<()>,
}

impl ProducerIdAllocator {
    /// Starts past every block ever reserved in `data_dir`.
    pub async fn load(
        storage: &shard::io::dma::DmaStorage,
        data_dir: &std::path::Path,
    ) -> Result<Self, String> {
        let path = data_dir.join(PRODUCER_ID_BLOCK_FILE);
        let stored = shard::io::read_whole_file(storage, &path)
            .await
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let block_end = match stored {
            None => 0,
            Some(bytes) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| text.trim().parse::<i64>().ok())
                .filter(|end| *end >= 0)
                .ok_or_else(|| format!("{} is damaged: expected one number", path.display()))?,
        };
        Ok(ProducerIdAllocator {
            next: Cell::new(block_end),
            block_end: Cell::new(block_end),
            lock: async_lock::Mutex::new(()),
        })
    }
}

/// (producer id, epoch) for an InitProducerId without a transactional id. Runs on shard 0.
pub async fn init_producer_id(
    shard: &Shard,
    producer_id: i64,
    epoch: i16,
) -> Result<(i64, i16), crate::error::BrokerError> {
    let allocator = &shard.producer_ids;
    let _guard = allocator.lock.lock().await;
    let given_out = producer_id >= 0 && producer_id < allocator.next.get();
    if given_out && (0..i16::MAX - 1).contains(&epoch) {
        return Ok((producer_id, epoch + 1));
    }
    let id = allocator.next.get();
    if id >= allocator.block_end.get() {
        let block_end = id + PRODUCER_ID_BLOCK_SIZE;
        let path = shard.config.data_dir.join(PRODUCER_ID_BLOCK_FILE);
        shard::io::write_file_atomic(&shard.storage, &path, format!("{block_end}\n").as_bytes())
            .await
            .map_err(|e| crate::error::BrokerError::Storage(shard::StorageError::Io(e)))?;
        allocator.block_end.set(block_end);
        tracing::debug!(block_end, "reserved a block of producer ids");
    }
    allocator.next.set(id + 1);
    Ok((id, 0))
}
