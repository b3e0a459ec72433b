//! Producer ids for idempotent producers (InitProducerId), unique for the life of the data
//! directory.
//!
//! Registered on shard 0 only (every InitProducerId is routed there; it is not a hot path).
//! Ids are handed out from blocks of `PRODUCER_ID_BLOCK_SIZE`. Durability rule: before the
//! first id of a block is given out, the end of that block is written durably to
//! `<data_dir>/producer-id-block`, so after any crash the next block starts past every id ever
//! given out (Kafka's ProducerIdManager does the same with blocks from the controller, which
//! strata's controller will hand out later).
//!
//! Epoch bump (KIP-360): a producer that asks again with an id this directory gave out and its
//! current epoch gets the same id with the epoch plus one, and must restart its sequences at 0
//! (the partitions fence the old epoch). An id that was never given out, or an epoch about to
//! overflow, gets a fresh id with epoch 0.
//!
//! In a cluster every broker hands out ids, so each broker's are its own: the id is the
//! directory's counter shifted left by `NODE_BITS` with the broker's node id in the low bits
//! (`ProducerIdService::for_node`), unique across brokers without asking the controller.
//! (Kafka asks its controller for blocks, ProducerIdsRecord; strata may move to that with
//! transactions, #17: ids of either scheme never collide with the other's as long as the
//! node ids stay below 2^NODE_BITS, which a cluster node checks at startup.)

use crate::error::{BrokerError, Result};
use crate::mesh::Service;
use futures_util::future::LocalBoxFuture;
use shard::io::Storage;
use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;

pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
/// Low bits of a cluster broker's producer ids that hold its node id.
pub const NODE_BITS: u32 = 20;
pub const PRODUCER_ID_BLOCK_FILE: &str = "producer-id-block";

/// InitProducerId without a transactional id: the producer's current id and epoch (-1, -1 for
/// a new producer).
pub struct InitProducerId {
    pub producer_id: i64,
    pub epoch: i16,
}

pub struct ProducerIdService<S: Storage> {
    storage: S,
    path: PathBuf,
    /// The next id to hand out.
    next: Cell<i64>,
    /// The end (exclusive) of the block on disk; ids below it may have been given out.
    block_end: Cell<i64>,
    /// Serializes allocations (a block write is awaited).
    lock: async_lock::Mutex<()>,
    /// In a cluster, this broker's node id (the ids' low bits).
    node: Option<i64>,
}

impl<S: Storage> ProducerIdService<S> {
    /// Starts past every block ever reserved in `data_dir`.
    pub async fn load(storage: S, data_dir: &std::path::Path) -> Result<Self, String> {
        let path = data_dir.join(PRODUCER_ID_BLOCK_FILE);
        let stored = shard::io::read_whole_file(&storage, &path)
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
        Ok(ProducerIdService {
            storage,
            path,
            next: Cell::new(block_end),
            block_end: Cell::new(block_end),
            lock: async_lock::Mutex::new(()),
            node: None,
        })
    }

    /// A cluster broker's ids: its counter's values with `node` in the low `NODE_BITS` bits.
    pub fn for_node(mut self, node: i32) -> Result<Self, String> {
        if !(0..1 << NODE_BITS).contains(&node) {
            return Err(format!(
                "node.id {node}: a cluster node's id must be below {} (its producer ids carry it)",
                1 << NODE_BITS
            ));
        }
        self.node = Some(i64::from(node));
        Ok(self)
    }

    /// The id clients see for counter value `raw`.
    fn visible(&self, raw: i64) -> i64 {
        match self.node {
            Some(node) => (raw << NODE_BITS) | node,
            None => raw,
        }
    }

    /// The counter value of an id this directory gave out, if it is one of its ids.
    fn counter_of(&self, id: i64) -> Option<i64> {
        if id < 0 {
            return None;
        }
        match self.node {
            Some(node) => (id & ((1 << NODE_BITS) - 1) == node).then_some(id >> NODE_BITS),
            None => Some(id),
        }
    }

    async fn init(&self, request: InitProducerId) -> Result<(i64, i16)> {
        let _guard = self.lock.lock().await;
        let given_out =
            self.counter_of(request.producer_id).is_some_and(|raw| raw < self.next.get());
        if given_out && (0..i16::MAX - 1).contains(&request.epoch) {
            return Ok((request.producer_id, request.epoch + 1));
        }
        let id = self.next.get();
        if id >= self.block_end.get() {
            let block_end = id + PRODUCER_ID_BLOCK_SIZE;
            shard::io::write_file_atomic(
                &self.storage,
                &self.path,
                format!("{block_end}\n").as_bytes(),
            )
            .await
            .map_err(|e| BrokerError::Storage(shard::StorageError::Io(e)))?;
            self.block_end.set(block_end);
            tracing::debug!(block_end, "reserved a block of producer ids");
        }
        self.next.set(id + 1);
        Ok((self.visible(id), 0))
    }
}

impl<S: Storage> Service for ProducerIdService<S> {
    type Request = InitProducerId;
    type Response = Result<(i64, i16)>;
    const NAME: &'static str = "producer_ids";
    const IN_PROGRESS_MAX: usize = 1024;

    fn handle(self: Rc<Self>, request: InitProducerId) -> LocalBoxFuture<'static, Self::Response> {
        Box::pin(async move { self.init(request).await })
    }
}
