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
//! In a cluster every broker hands out ids from blocks the controller quorum gives it, as
//! Kafka's do (KIP-730): the broker proposes a `ProducerIds` record moving the cluster's next
//! free id past a block, on the condition that the image has not moved, and hands out ids of
//! that block once it is committed. Durability rule: the block is in the Raft log on a
//! majority before its first id is given out, so no id is ever given twice, whatever
//! crashes; a restarted broker asks for a new block (the rest of the old one is skipped).
//! The epoch bump applies to any id below the cluster's next free id.

use crate::controller::protocol::ProposeError;
use crate::controller::quorum::ControllerHandle;
use crate::controller::types::Proposal;
use crate::error::{BrokerError, GroupError, Result};
use crate::mesh::Service;
use crate::metadata::MetadataRecord;
use shard::io::Storage;
use std::cell::Cell;
use std::path::PathBuf;
use std::sync::Arc;

pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
/// How many times a block is asked for again when another broker's committed first.
const BLOCK_ATTEMPTS: usize = 10;
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
    /// In a cluster, this broker's node id and the quorum its blocks come from.
    cluster: Option<(i32, Arc<ControllerHandle>)>,
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
            cluster: None,
        })
    }

    /// A cluster broker: its blocks come from `cluster` (the local block file is not used).
    pub fn in_cluster(mut self, node: i32, cluster: Arc<ControllerHandle>) -> Self {
        self.next.set(0);
        self.block_end.set(0);
        self.cluster = Some((node, cluster));
        self
    }

    /// Whether `id` has been given out (by this directory, or in a cluster by any broker).
    fn given_out(&self, id: i64) -> bool {
        let end = match &self.cluster {
            Some((_, cluster)) => cluster.images.latest().0.next_producer_id,
            None => self.next.get(),
        };
        (0..end).contains(&id)
    }

    /// A block from the quorum: its first id (the block is committed when this returns).
    async fn block_from_quorum(&self, node: i32, cluster: &ControllerHandle) -> Result<i64> {
        let unavailable = |why: String| {
            tracing::warn!(%why, "no producer id block from the controller quorum");
            BrokerError::Group(GroupError::CoordinatorNotAvailable)
        };
        for _ in 0..BLOCK_ATTEMPTS {
            let (image, applied) = cluster.images.latest();
            let first = image.next_producer_id;
            let record = MetadataRecord::ProducerIds {
                node: wire::ids::NodeId(node),
                next: first + PRODUCER_ID_BLOCK_SIZE,
            };
            let proposal =
                Proposal { expected_version: Some(image.version), records: vec![record] };
            match cluster.propose(proposal).await {
                Ok(committed) if committed.applied.refused.is_none() => {
                    tracing::debug!(first, "reserved a block of producer ids from the quorum");
                    return Ok(first);
                }
                Ok(_) => {
                    // Another change committed first: decide again on the newer image.
                    let newer = cluster.images.next_after(applied.map(|id| id.index));
                    let _ = futures_lite::future::or(
                        async {
                            newer.await;
                        },
                        shard::runtime::sleep(std::time::Duration::from_millis(200)),
                    )
                    .await;
                }
                Err(ProposeError::NoLeader(why) | ProposeError::Timeout(why)) => {
                    return Err(unavailable(why))
                }
                Err(ProposeError::Failed(why)) => return Err(unavailable(why)),
            }
        }
        Err(unavailable("other changes kept committing first".into()))
    }

    async fn init(&self, request: InitProducerId) -> Result<(i64, i16)> {
        let _guard = self.lock.lock().await;
        if self.given_out(request.producer_id) && (0..i16::MAX - 1).contains(&request.epoch) {
            return Ok((request.producer_id, request.epoch + 1));
        }
        if let Some((node, cluster)) = &self.cluster {
            if self.next.get() >= self.block_end.get() {
                let first = self.block_from_quorum(*node, cluster).await?;
                self.next.set(first);
                self.block_end.set(first + PRODUCER_ID_BLOCK_SIZE);
            }
            let id = self.next.get();
            self.next.set(id + 1);
            return Ok((id, 0));
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
        Ok((id, 0))
    }
}

impl<S: Storage> Service for ProducerIdService<S> {
    const NAME: &'static str = "producer_ids";
    const IN_PROGRESS_MAX: usize = 1024;
}

impl crate::mesh::Ask for InitProducerId {
    /// The producer id and epoch.
    type Answer = Result<(i64, i16)>;
}

crate::mesh::answers!(ProducerIdService, InitProducerId, |service, init| service.init(init).await);
