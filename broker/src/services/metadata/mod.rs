//! The metadata service: every shard's copy of the metadata image, and on shard 0 the one
//! writer that decides, persists and publishes changes.
//!
//! Owns: `MetadataView` (this shard's current image, replaced whole), and the change path:
//! `Change` (shard 0 only): decide each item against the image (`metadata::decide`), apply the
//! records (`metadata::apply`), write the new image atomically to `strata-metadata.json`, then
//! publish it: `Release` on every shard (close partitions no longer placed there), then `Adopt`
//! on every shard (open newly placed partitions, take the image), and only then answer.
//! Durability rule: a change is acknowledged only after the file holding it is synced.
//! Invariant: shards see images in version order; changes are serialized by a lock on shard 0.
//! Runs on: every shard (view, Release, Adopt); shard 0 (Change).

use crate::error::{BrokerError, Result};
use crate::mesh::{Mesh, Service};
use crate::metadata::decide::{self, MetadataChange};
use crate::metadata::{apply_all, store, MetadataImage, MetadataRecord, PlacementPolicy};
use crate::services::partitions::PartitionService;
use futures_util::future::LocalBoxFuture;
use shard::io::Storage;
use shard::runtime::ShardId;
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

/// The shard that decides and persists metadata changes.
pub const METADATA_SHARD: ShardId = ShardId(0);

/// A change being decided: the image with the items decided so far applied.
struct Pending {
    working: MetadataImage,
    records: Vec<MetadataRecord>,
}

impl Pending {
    /// Takes one item's decision: its records are applied to the working image (unless the
    /// client only validates).
    fn take(&mut self, outcome: Result<Vec<MetadataRecord>>, validate_only: bool) -> Result<()> {
        let records = outcome?;
        if validate_only {
            return Ok(());
        }
        self.working = apply_all(&self.working, &records)
            .map_err(|e| BrokerError::MetadataUnavailable(e.to_string()))?;
        self.records.extend(records);
        Ok(())
    }
}

/// This shard's current metadata image.
#[derive(Default)]
pub struct MetadataView {
    current: RefCell<Rc<MetadataImage>>,
}

impl MetadataView {
    pub fn current(&self) -> Rc<MetadataImage> {
        self.current.borrow().clone()
    }

    fn set(&self, image: MetadataImage) {
        *self.current.borrow_mut() = Rc::new(image);
    }
}

pub enum MetadataRequest {
    /// Decide, persist and publish (shard 0 only); a result per item of the change.
    Change(MetadataChange),
    /// Publication, step 1: close what `image` no longer places on this shard.
    Release(MetadataImage),
    /// Publication, step 2: open what `image` places here, and take it as the current image.
    Adopt(MetadataImage),
}

pub enum MetadataResponse {
    Changed(Vec<Result<()>>),
    Applied(std::result::Result<(), String>),
}

pub struct MetadataService<S: Storage> {
    shard: ShardId,
    view: Rc<MetadataView>,
    partitions: Rc<PartitionService<S>>,
    mesh: Rc<Mesh>,
    storage: S,
    data_dir: PathBuf,
    policy: PlacementPolicy,
    /// Serializes changes (shard 0).
    lock: async_lock::Mutex<()>,
}

impl<S: Storage> MetadataService<S> {
    pub fn new(
        view: Rc<MetadataView>,
        partitions: Rc<PartitionService<S>>,
        mesh: Rc<Mesh>,
        data_dir: PathBuf,
        policy: PlacementPolicy,
    ) -> Self {
        MetadataService {
            shard: mesh.id(),
            storage: partitions.storage().clone(),
            view,
            partitions,
            mesh,
            data_dir,
            policy,
            lock: async_lock::Mutex::new(()),
        }
    }

    /// Writes `image` to `strata-metadata.json` atomically and durably.
    pub async fn persist(&self, image: &MetadataImage) -> std::result::Result<(), String> {
        let path = self.data_dir.join(store::METADATA_FILE);
        shard::io::write_file_atomic_freeing_space(&self.storage, &path, &store::to_json(image))
            .await
            .map_err(|e| format!("writing {}: {e}", path.display()))
    }

    /// Takes `image` on this shard alone (startup): opens its partitions placed here.
    pub async fn adopt_local(&self, image: MetadataImage) -> std::result::Result<(), String> {
        self.partitions.release(&image).await?;
        self.partitions.adopt(&image).await?;
        self.view.set(image);
        Ok(())
    }

    async fn change(&self, change: MetadataChange) -> Vec<Result<()>> {
        assert_eq!(self.shard, METADATA_SHARD, "metadata changes are decided on shard 0");
        let _guard = self.lock.lock().await;
        let mut pending = Pending { working: (*self.view.current()).clone(), records: Vec::new() };
        let results: Vec<Result<()>> = match change {
            MetadataChange::CreateTopics(creates) => creates
                .into_iter()
                .map(|create| {
                    let topic_id = *uuid::Uuid::new_v4().as_bytes();
                    let outcome =
                        decide::create_topic(&pending.working, &create, self.policy, topic_id);
                    pending.take(outcome, create.validate_only)
                })
                .collect(),
            MetadataChange::DeleteTopics(names) => names
                .into_iter()
                .map(|name| {
                    let outcome = decide::delete_topic(&pending.working, &name);
                    pending.take(outcome, false)
                })
                .collect(),
            MetadataChange::CreatePartitions(changes) => changes
                .into_iter()
                .map(|(name, count, validate_only)| {
                    let outcome =
                        decide::create_partitions(&pending.working, &name, count, self.policy);
                    pending.take(outcome, validate_only)
                })
                .collect(),
            MetadataChange::AlterConfigs(changes) => changes
                .into_iter()
                .map(|(name, edit, validate_only)| {
                    let outcome = decide::alter_configs(&pending.working, &name, &edit);
                    pending.take(outcome, validate_only)
                })
                .collect(),
        };
        let Pending { working, records } = pending;
        if records.is_empty() {
            return results;
        }
        if let Err(error) = self.publish(working).await {
            tracing::error!(%error, "publishing topic metadata failed");
            return results
                .into_iter()
                .map(|result| result.and(Err(BrokerError::MetadataUnavailable(error.clone()))))
                .collect();
        }
        results
    }

    /// Persists `image`, then hands it to every shard in two steps.
    async fn publish(&self, image: MetadataImage) -> std::result::Result<(), String> {
        self.persist(&image).await?;
        let steps: [fn(MetadataImage) -> MetadataRequest; 2] =
            [MetadataRequest::Release, MetadataRequest::Adopt];
        for step in steps {
            for target in self.mesh.shards() {
                match self.mesh.call::<Self>(target, step(image.clone())).await {
                    Ok(MetadataResponse::Applied(Ok(()))) => {}
                    Ok(MetadataResponse::Applied(Err(error))) => {
                        return Err(format!("shard {}: {error}", target.0))
                    }
                    Ok(MetadataResponse::Changed(_)) => {
                        return Err(format!("shard {} answered out of turn", target.0))
                    }
                    Err(error) => return Err(error.to_string()),
                }
            }
        }
        Ok(())
    }

    async fn answer(&self, request: MetadataRequest) -> MetadataResponse {
        match request {
            MetadataRequest::Change(change) => MetadataResponse::Changed(self.change(change).await),
            MetadataRequest::Release(image) => {
                MetadataResponse::Applied(self.partitions.release(&image).await)
            }
            MetadataRequest::Adopt(image) => {
                let adopted = self.partitions.adopt(&image).await;
                if adopted.is_ok() {
                    self.view.set(image);
                }
                MetadataResponse::Applied(adopted)
            }
        }
    }
}

impl<S: Storage> Service for MetadataService<S> {
    type Request = MetadataRequest;
    type Response = MetadataResponse;
    const NAME: &'static str = "metadata";
    /// Publication calls back into every shard, so it must never wait behind its own permits:
    /// changes are serialized on shard 0, so at most a few are in progress anywhere.
    const IN_PROGRESS_MAX: usize = 1024;

    fn handle(
        self: Rc<Self>,
        request: MetadataRequest,
    ) -> LocalBoxFuture<'static, MetadataResponse> {
        Box::pin(async move { self.answer(request).await })
    }
}
