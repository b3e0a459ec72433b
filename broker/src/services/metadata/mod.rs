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

use crate::controller::protocol::ProposeError;
use crate::controller::quorum::ControllerHandle;
use crate::controller::types::{Proposal, Refused};
use crate::error::{BrokerError, Result};
use crate::mesh::{answers, Ask, Mesh, Service};
use crate::metadata::decide::{self, CreateTopic, MetadataChange};
use crate::metadata::elect;
use crate::metadata::{apply_all, store, MetadataImage, MetadataRecord, PlacementPolicy};
use crate::services::partitions::PartitionService;
use crate::services::replication::ReplicaFetchers;
use shard::io::Storage;
use shard::runtime::ShardId;
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

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

    /// Decides each of `items` against the working image the items before it left, and takes
    /// the decision (`decide_one` gives its records, and whether the client only validates).
    fn each<T>(
        &mut self,
        items: Vec<T>,
        mut decide_one: impl FnMut(&MetadataImage, T) -> (Result<Vec<MetadataRecord>>, bool),
    ) -> Vec<Result<()>> {
        items
            .into_iter()
            .map(|item| {
                let (outcome, validate_only) = decide_one(&self.working, item);
                self.take(outcome, validate_only)
            })
            .collect()
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

/// Decide, persist and publish (shard 0 only); a result per item of the change.
impl Ask for MetadataChange {
    type Answer = Vec<Result<()>>;
}

answers!(MetadataService, MetadataChange, |service, change| service.change(change).await);

/// Publication, step 1: close what the image no longer places on this shard.
pub struct Release(pub MetadataImage);

impl Ask for Release {
    type Answer = std::result::Result<(), String>;
}

answers!(MetadataService, Release, |service, Release(image)| {
    service.partitions.release(&image).await
});

/// Publication, step 2: open what the image places here, and take it as the current image.
pub struct Adopt(pub MetadataImage);

impl Ask for Adopt {
    type Answer = std::result::Result<(), String>;
}

answers!(MetadataService, Adopt, |service, Adopt(image)| {
    let adopted = service.partitions.adopt(&image).await;
    if adopted.is_ok() {
        service.replication.follow(&image);
        service.view.set(image);
    }
    adopted
});

pub struct MetadataService<S: Storage> {
    shard: ShardId,
    /// The controller quorum, in a cluster (shard 0 proposes through it); `None` for a single
    /// node, which decides and persists here.
    cluster: Option<Arc<ControllerHandle>>,
    /// The last controller log index whose image every shard has (cluster, shard 0).
    published: Cell<Option<u64>>,
    published_changed: event_listener::Event,
    view: Rc<MetadataView>,
    partitions: Rc<PartitionService<S>>,
    /// This shard's follower streams, told of every image adopted here.
    replication: Rc<ReplicaFetchers<S>>,
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
        replication: Rc<ReplicaFetchers<S>>,
        mesh: Rc<Mesh>,
        data_dir: PathBuf,
        policy: PlacementPolicy,
        cluster: Option<Arc<ControllerHandle>>,
    ) -> Self {
        MetadataService {
            shard: mesh.id(),
            cluster,
            published: Cell::new(None),
            published_changed: event_listener::Event::new(),
            storage: partitions.storage().clone(),
            view,
            partitions,
            replication,
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
        self.replication.follow(&image);
        self.view.set(image);
        Ok(())
    }

    async fn change(&self, change: MetadataChange) -> Vec<Result<()>> {
        assert_eq!(self.shard, METADATA_SHARD, "metadata changes are decided on shard 0");
        if let Some(cluster) = self.cluster.clone() {
            return self.change_through_quorum(&cluster, change).await;
        }
        let _guard = self.lock.lock().await;
        let (results, pending) = self.decide(MetadataImage::clone(&self.view.current()), change);
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

    /// A change in a cluster: decided here against the newest image this node applied, then
    /// proposed to the quorum on the condition that the image has not moved on
    /// (`Proposal::expected_version`). Another broker's change committed first makes it
    /// stale: decided again on the newer image, up to `PROPOSE_ATTEMPTS` times. Answered once
    /// every shard here has the image that holds it, so a Metadata request after it sees it.
    async fn change_through_quorum(
        &self,
        cluster: &ControllerHandle,
        change: MetadataChange,
    ) -> Vec<Result<()>> {
        let mut last_stale = String::new();
        for _ in 0..PROPOSE_ATTEMPTS {
            let (base, applied) = cluster.images.latest();
            let (results, pending) = self.decide(MetadataImage::clone(&base), change.clone());
            if pending.records.is_empty() {
                return results;
            }
            let proposal =
                Proposal { expected_version: Some(base.version), records: pending.records };
            match cluster.propose(proposal).await {
                Ok(committed) => match committed.applied.refused {
                    None => {
                        return match self.wait_published(committed.index).await {
                            Ok(()) => results,
                            Err(why) => {
                                fail_all(results, || BrokerError::QuorumTimeout(why.clone()))
                            }
                        };
                    }
                    Some(Refused::Stale { expected, actual }) => {
                        last_stale = format!("decided on version {expected}, found {actual}");
                        let seen = applied.map(|id| id.index);
                        let newer = cluster.images.next_after(seen);
                        let _ = futures_lite::future::or(
                            async {
                                newer.await;
                            },
                            shard::runtime::sleep(Duration::from_millis(500)),
                        )
                        .await;
                    }
                    Some(Refused::Invalid(error)) => {
                        tracing::error!(%error, "the quorum refused a decided change");
                        return fail_all(results, || {
                            BrokerError::MetadataUnavailable(error.clone())
                        });
                    }
                },
                Err(ProposeError::NoLeader(why)) => {
                    return fail_all(results, || BrokerError::NoController(why.clone()))
                }
                Err(ProposeError::Timeout(why)) => {
                    return fail_all(results, || BrokerError::QuorumTimeout(why.clone()))
                }
                Err(ProposeError::Failed(why)) => {
                    return fail_all(results, || BrokerError::MetadataUnavailable(why.clone()))
                }
            }
        }
        let why = format!("other changes kept committing first ({last_stale}); try again");
        (0..change_items(&change)).map(|_| Err(BrokerError::QuorumTimeout(why.clone()))).collect()
    }

    /// Waits until every shard here has the image of controller log index `index`.
    async fn wait_published(&self, index: u64) -> std::result::Result<(), String> {
        let deadline = std::time::Instant::now() + PUBLISH_WAIT;
        loop {
            let listener = self.published_changed.listen();
            if self.published.get().is_some_and(|published| published >= index) {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "committed at index {index}, but not yet applied on this broker"
                ));
            }
            futures_lite::future::or(listener, shard::runtime::sleep(left)).await;
        }
    }

    /// Shard 0 in a cluster, for the life of the node: hands every image the controller
    /// applies to every shard (release, then adopt), in order, skipping to the newest when
    /// several arrive at once.
    pub async fn follow(self: Rc<Self>, mut seen: Option<u64>) {
        let Some(cluster) = self.cluster.clone() else { return };
        self.mark_published(seen);
        loop {
            let (image, applied) = cluster.images.next_after(seen).await;
            if let Err(error) = self.hand_to_shards(MetadataImage::clone(&image)).await {
                tracing::error!(%error, "publishing the cluster's metadata to the shards failed");
            }
            seen = applied.map(|id| id.index);
            self.mark_published(seen);
        }
    }

    fn mark_published(&self, index: Option<u64>) {
        self.published.set(index);
        self.published_changed.notify(usize::MAX);
    }

    /// Decides every item of `change` against `base`: a result per item, and the records of
    /// those that passed with the image they lead to.
    fn decide(&self, base: MetadataImage, change: MetadataChange) -> (Vec<Result<()>>, Pending) {
        let mut pending = Pending { working: base, records: Vec::new() };
        let results: Vec<Result<()>> = match change {
            MetadataChange::CreateTopics(creates) => pending.each(creates, |working, create| {
                (self.decide_create_topic(working, &create), create.validate_only)
            }),
            MetadataChange::DeleteTopics(names) => {
                pending.each(names, |working, name| (decide::delete_topic(working, &name), false))
            }
            MetadataChange::CreatePartitions(changes) => {
                pending.each(changes, |working, (name, count, validate_only, assignments)| {
                    let outcome =
                        self.decide_create_partitions(working, &name, count, &assignments);
                    (outcome, validate_only)
                })
            }
            MetadataChange::AlterConfigs(changes) => {
                pending.each(changes, |working, (name, edit, validate_only)| {
                    (decide::alter_configs(working, &name, &edit), validate_only)
                })
            }
            MetadataChange::ElectLeaders(kind, partitions) => {
                pending.each(partitions, |working, (topic, partition)| {
                    (elect::elect(working, kind, &topic, partition), false)
                })
            }
            MetadataChange::AlterIsr(leader, changes) => {
                pending.each(changes, |working, (topic, partition, epoch, isr)| {
                    (elect::alter_isr(working, leader, &topic, partition, epoch, &isr), false)
                })
            }
            MetadataChange::Reassign(changes) => {
                pending.each(changes, |working, (topic, partition, target)| {
                    let outcome = crate::metadata::reassign::reassign(
                        working,
                        &topic,
                        partition,
                        target.as_deref(),
                    );
                    (outcome, false)
                })
            }
            MetadataChange::AlterBrokerConfigs(node, changes) => {
                pending.each(changes, |working, (resource, edit, validate_only)| {
                    let is_static = |key: &str| crate::config::keys::find(key).is_some();
                    let outcome =
                        decide::alter_broker_configs(working, node, &resource, &edit, &is_static);
                    (outcome, validate_only)
                })
            }
            MetadataChange::AlterGroupConfigs(defaults, changes) => {
                pending.each(changes, |working, (group, edit, validate_only)| {
                    let outcome = decide::alter_group_configs(working, &group, &edit, &defaults);
                    (outcome, validate_only)
                })
            }
            MetadataChange::AlterScram(alterations) => {
                pending.each(alterations, |working, (user, alterations)| {
                    (crate::metadata::scram::alter(working, &user, &alterations), false)
                })
            }
            MetadataChange::AlterQuotas(alterations) => {
                pending.each(alterations, |_, (entity, ops, validate_only)| {
                    (crate::metadata::quotas::alter(&entity, &ops), validate_only)
                })
            }
            MetadataChange::CreateAcls(bindings) => pending.each(bindings, |working, binding| {
                let id = *uuid::Uuid::new_v4().as_bytes();
                (Ok(crate::metadata::acls::create(&working.acls, &binding, id)), false)
            }),
            MetadataChange::DeleteAcls(matched) => pending.each(matched, |working, ids| {
                (Ok(crate::metadata::acls::remove(&working.acls, &ids)), false)
            }),
        };
        (results, pending)
    }

    /// Decides a new topic.
    fn decide_create_topic(
        &self,
        working: &MetadataImage,
        create: &CreateTopic,
    ) -> Result<Vec<MetadataRecord>> {
        let topic_id = *uuid::Uuid::new_v4().as_bytes();
        decide::create_topic(working, create, self.policy, topic_id)
    }

    /// Decides `name`'s new partition count.
    fn decide_create_partitions(
        &self,
        working: &MetadataImage,
        name: &str,
        count: i32,
        assignments: &[Vec<i32>],
    ) -> Result<Vec<MetadataRecord>> {
        decide::create_partitions(working, name, count, self.policy, assignments)
    }

    /// Makes `image` the cluster's: persisted, and handed to every shard in two steps (release,
    /// adopt). A change that only adds partitions is opened on every shard first and persisted
    /// after, so a topic that cannot be opened (too many open files...) is never persisted:
    /// the shards go back to the previous image (its new partitions closed and removed) and the
    /// change fails. Any other change (deletion, configs) is persisted first, then published.
    async fn publish(&self, image: MetadataImage) -> std::result::Result<(), String> {
        let previous = (*self.view.current()).clone();
        let adds_only = previous.broker_configs == image.broker_configs
            && previous.scram == image.scram
            && previous.quotas == image.quotas
            && previous.acls == image.acls
            && previous.topics.iter().all(|(name, topic)| {
                image.topic(name).is_some_and(|next| {
                    next.partitions.len() >= topic.partitions.len() && next.configs == topic.configs
                })
            });
        if !adds_only {
            self.persist(&image).await?;
            return self.hand_to_shards(image).await;
        }
        let added = added_partitions(&previous, &image);
        let persisted = match self.hand_to_shards(image.clone()).await {
            Ok(()) => self.persist(&image).await,
            Err(error) => Err(error),
        };
        if let Err(error) = persisted {
            tracing::warn!(%error, "a topic change could not be opened or persisted: rolled back");
            if let Err(rollback) = self.hand_to_shards(previous).await {
                tracing::error!(%rollback, "rolling back the shards to the previous topics failed");
            }
            // Directories of the new partitions whose open failed (never owned by a shard).
            for partition in added {
                let dir = self.data_dir.join(partition.to_string());
                if self.storage.exists(&dir).await.unwrap_or(false) {
                    if let Err(error) = self.storage.remove_dir_all(&dir).await {
                        tracing::warn!(%error, dir = %dir.display(), "removing a rolled-back partition");
                    }
                }
            }
            return Err(error);
        }
        Ok(())
    }

    /// Release, then adopt, `image` on every shard.
    async fn hand_to_shards(&self, image: MetadataImage) -> std::result::Result<(), String> {
        for target in self.mesh.shards() {
            let released = self.mesh.call::<Self, _>(target, Release(image.clone())).await;
            released
                .map_err(|error| error.to_string())?
                .map_err(|error| format!("shard {}: {error}", target.0))?;
        }
        for target in self.mesh.shards() {
            let adopted = self.mesh.call::<Self, _>(target, Adopt(image.clone())).await;
            adopted
                .map_err(|error| error.to_string())?
                .map_err(|error| format!("shard {}: {error}", target.0))?;
        }
        Ok(())
    }
}

/// How many times a change is decided again after another committed first.
const PROPOSE_ATTEMPTS: usize = 5;
/// How long a committed change may take to reach this broker's shards.
const PUBLISH_WAIT: Duration = Duration::from_secs(10);

/// Every item that passed fails with `error()`; those that failed keep their own error.
fn fail_all(results: Vec<Result<()>>, error: impl Fn() -> BrokerError) -> Vec<Result<()>> {
    results.into_iter().map(|result| result.and_then(|()| Err(error()))).collect()
}

/// The number of items (answers) in `change`.
fn change_items(change: &MetadataChange) -> usize {
    match change {
        MetadataChange::CreateTopics(items) => items.len(),
        MetadataChange::DeleteTopics(items) => items.len(),
        MetadataChange::CreatePartitions(items) => items.len(),
        MetadataChange::AlterConfigs(items) => items.len(),
        MetadataChange::AlterBrokerConfigs(_, items) => items.len(),
        MetadataChange::AlterGroupConfigs(_, items) => items.len(),
        MetadataChange::ElectLeaders(_, items) => items.len(),
        MetadataChange::AlterIsr(_, items) => items.len(),
        MetadataChange::Reassign(items) => items.len(),
        MetadataChange::AlterScram(items) => items.len(),
        MetadataChange::AlterQuotas(items) => items.len(),
        MetadataChange::CreateAcls(items) => items.len(),
        MetadataChange::DeleteAcls(items) => items.len(),
    }
}

/// The partitions `next` has and `previous` does not.
fn added_partitions(
    previous: &MetadataImage,
    next: &MetadataImage,
) -> Vec<wire::ids::TopicPartition> {
    let mut added = Vec::new();
    for (name, topic) in &next.topics {
        let before = previous.topic(name).map_or(0, |old| old.partitions.len());
        for index in before..topic.partitions.len() {
            let index = i32::try_from(index).unwrap_or(i32::MAX);
            added.push(wire::ids::TopicPartition::new(name.clone(), index));
        }
    }
    added
}

impl<S: Storage> Service for MetadataService<S> {
    const NAME: &'static str = "metadata";
    /// Publication calls back into every shard, so it must never wait behind its own permits:
    /// changes are serialized on shard 0, so at most a few are in progress anywhere.
    const IN_PROGRESS_MAX: usize = 1024;
}
