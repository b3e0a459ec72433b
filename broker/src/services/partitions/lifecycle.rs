//! Partitions coming and going: opening the ones an image places on this shard, closing the
//! ones it no longer does (removing the files of deleted partitions), periodic maintenance, and
//! the clean close at shutdown.
//!
//! A metadata change reaches every shard in two steps (`services::metadata`): `release` on every
//! shard first, then `adopt`, so a partition moving between shards is closed by its old owner
//! before the new one opens its files.

use super::replica::Role;
use super::{
    Partition, PartitionService, Repair, CLOSE_CONCURRENCY_MAX, OPEN_CONCURRENCY_MAX,
    REPAIR_BACKOFF_MS_MAX, REPAIR_BACKOFF_MS_MIN, REPAIR_FREE_BYTES_MIN,
};
use crate::metadata::topic_config::log_config_on;
use crate::metadata::MetadataImage;
use futures_util::StreamExt;
use shard::io::Storage;
use shard::{OpenOptions, PartitionLog};
use std::rc::Rc;
use wire::ids::TopicPartition;

/// The suffix of a deleted partition's directory until its files are gone.
pub const DELETED_DIR_SUFFIX: &str = ".deleted";

impl<S: Storage> PartitionService<S> {
    /// Whether this shard keeps a replica of `partition` (as its leader or a follower). A
    /// single node (no registered brokers) keeps every partition it leads.
    fn placed_here(&self, image: &MetadataImage, partition: &TopicPartition) -> bool {
        let Some(placement) = image.placement(partition) else { return false };
        if placement.leader == self.node {
            return placement.shard == self.shard;
        }
        image.replica_shard(partition, self.node) == Some(self.shard)
    }

    /// The role `image` gives this node's replica of a partition.
    fn role_in(
        &self,
        image: &MetadataImage,
        topic: &crate::metadata::TopicImage,
        index: i32,
    ) -> Role {
        let Some(placement) = topic.placement(index) else { return Role::alone(self.node) };
        let min_insync = crate::metadata::topic_config::effective_config(
            image,
            self.node.0,
            topic,
            "min.insync.replicas",
        )
        .0
        .and_then(|value| value.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
        Role {
            leader: placement.leader,
            replicas: placement.replicas.clone(),
            isr: placement.isr.clone(),
            min_insync,
        }
    }

    /// Closes the partitions `image` no longer places on this shard; those whose partition no
    /// longer exists at all (a deleted topic), or no longer has a replica on this node (a
    /// reassignment moved it away), also lose their files. A partition that only moves to
    /// another shard of this node keeps them for its new owner.
    pub async fn release(&self, image: &MetadataImage) -> Result<(), String> {
        let leaving: Vec<TopicPartition> = self
            .partitions
            .borrow()
            .keys()
            .filter(|key| !self.placed_here(image, key))
            .cloned()
            .collect();
        for key in leaving {
            let removed = self.partitions.borrow_mut().remove(&key);
            let Some(partition) = removed else { continue };
            let dir = partition.log.dir().to_path_buf();
            self.repairs.borrow_mut().remove(&key);
            let deleted = image.placement(&key).is_none_or(|placement| {
                placement.leader != self.node && !placement.replicas.contains(&self.node)
            });
            if deleted {
                // Its files are about to go: nothing is written (a full disk cannot stop a
                // deletion, which is what frees it).
                partition.log.discard().await;
            } else if let Err(error) = partition.log.close().await {
                tracing::warn!(%error, dir = %dir.display(), "closing a partition that left this shard");
            }
            partition.notify_appended();
            if deleted {
                self.remove_partition_dir(&dir).await;
            }
        }
        Ok(())
    }

    /// Removes a deleted partition's directory without making this shard wait for it: it is
    /// renamed `<dir>.<unique>.deleted` at once (so a partition made again under the same name
    /// starts empty), and its files go gently in the background (gigabytes of segments take
    /// seconds to free without stalling the disk; `Storage::remove_gently`). A partition
    /// directory always ends in `-<partition>`, so the suffix never names a live one; a crash
    /// leaves it to `remove_deleted_dirs` at the next start.
    async fn remove_partition_dir(&self, dir: &std::path::Path) {
        let unique = format!(
            "{}.{}.{}{DELETED_DIR_SUFFIX}",
            dir.file_name().map(|name| name.to_string_lossy()).unwrap_or_default(),
            self.shard.0,
            self.clock.now_ms()
        );
        let doomed = dir.with_file_name(unique);
        if let Err(error) = self.storage.rename(dir, &doomed).await {
            tracing::warn!(%error, dir = %dir.display(), "renaming a deleted partition; removing it in place");
            if let Err(error) = self.storage.remove_dir_all(dir).await {
                tracing::warn!(%error, dir = %dir.display(), "removing a deleted partition");
            }
            return;
        }
        let storage = self.storage.clone();
        shard::runtime::spawn(async move {
            if let Err(error) = storage.remove_dir_all(&doomed).await {
                tracing::warn!(%error, dir = %doomed.display(), "removing a deleted partition");
            }
        })
        .detach();
    }

    /// At start: removes, in the background, the directories of deleted partitions that a
    /// crash or a stop left behind (`remove_partition_dir`).
    pub async fn remove_deleted_dirs(&self) {
        let names = match self.storage.list_dir(&self.data_dir).await {
            Ok(names) => names,
            Err(error) => {
                tracing::warn!(%error, "listing the data directory for deleted partitions");
                return;
            }
        };
        let doomed: Vec<_> = names
            .into_iter()
            .filter(|name| name.ends_with(DELETED_DIR_SUFFIX))
            .map(|name| self.data_dir.join(name))
            .collect();
        if doomed.is_empty() {
            return;
        }
        let storage = self.storage.clone();
        shard::runtime::spawn(async move {
            for dir in doomed {
                if let Err(error) = storage.remove_dir_all(&dir).await {
                    tracing::warn!(%error, dir = %dir.display(), "removing a deleted partition");
                }
            }
        })
        .detach();
    }

    /// Opens every partition `image` places on this shard that is not open yet, and applies
    /// config changes to the open ones.
    pub async fn adopt(&self, image: &MetadataImage) -> Result<(), String> {
        let now = self.clock.now_ms();
        let mut to_open = Vec::new();
        for topic in image.topics.values() {
            let config = log_config_on(image, self.node.0, topic);
            for index in 0..topic.partition_count() {
                let key = TopicPartition::new(topic.name.clone(), index);
                if !self.placed_here(image, &key) {
                    continue;
                }
                let epoch = image.placement(&key).map_or(0, |placement| placement.leader_epoch.0);
                let role = self.role_in(image, topic, index);
                match self.local(&key) {
                    Some(existing) => {
                        if existing.log.config() != config {
                            existing.log.set_config(config.clone()).map_err(|e| e.to_string())?;
                        }
                        let isr = role.isr.clone();
                        if existing.take_role(role, epoch, self.node, now) {
                            // Counted where it is applied, on the leader, so each committed
                            // change is logged and counted once whoever asked for it (the
                            // leader, or the controller fencing a broker).
                            let isr: Vec<i32> = isr.iter().map(|node| node.0).collect();
                            tracing::info!(partition = %key, epoch, ?isr, "ISR changed");
                            self.stats.isr_changed();
                        }
                        existing.advance_high_watermark(self.node);
                    }
                    None => to_open.push((key, config.clone(), epoch, role)),
                }
            }
        }
        // Opens are independent and mostly wait on small reads, so several run at once (with
        // thousands of partitions a sequential start takes many seconds).
        let mut opening =
            futures_util::stream::iter(to_open.into_iter().map(|(key, config, epoch, role)| {
                let dir = self.data_dir.join(key.to_string());
                let options = OpenOptions {
                    sync_latency_us: self.sync_latency_us.clone(),
                    config,
                    cache: self.cache.clone(),
                    now_ms: now,
                };
                let storage = self.storage.clone();
                async move {
                    PartitionLog::open(storage, &dir, options)
                        .await
                        .map(|log| (key, log, epoch, role))
                        .map_err(|e| format!("opening {}: {e}", dir.display()))
                }
            }))
            .buffer_unordered(OPEN_CONCURRENCY_MAX);
        let (mut clean, mut recovered) = (0usize, 0usize);
        while let Some(opened) = opening.next().await {
            let (key, log, epoch, role) = opened?;
            if log.opened_clean {
                clean += 1;
            } else {
                recovered += 1;
            }
            let partition = Rc::new(Partition::new(log, -1, Role::alone(self.node)));
            partition.take_role(role, epoch, self.node, now);
            self.partitions.borrow_mut().insert(key, partition);
        }
        self.roles_version.set(self.roles_version.get() + 1);
        if clean + recovered > 0 {
            // `recovered` counts logs that had no clean-shutdown marker (or are new) and were
            // checked by the recovery scan.
            tracing::info!(shard = self.shard.0, clean, recovered, "partition logs opened");
        }
        Ok(())
    }

    /// Brings offline partitions back: each is discarded and opened again (recovery), then cut
    /// back to the durable end it had when its write failed (the records past it were never
    /// acknowledged, and readers never saw them). Failed attempts back off from
    /// `REPAIR_BACKOFF_MS_MIN` to `REPAIR_BACKOFF_MS_MAX`, each logged; successes are counted.
    pub async fn repair_offline(&self) {
        let now = self.clock.now_ms();
        let offline: Vec<(TopicPartition, Rc<Partition<S>>)> = self
            .partitions
            .borrow()
            .iter()
            .filter(|(_, partition)| partition.log.is_offline())
            .map(|(key, partition)| (key.clone(), partition.clone()))
            .collect();
        for (key, partition) in offline {
            let due = self.repairs.borrow().get(&key).is_none_or(|repair| repair.next_ms <= now);
            if !due {
                continue;
            }
            // Full disk: reopening now would only fail at the next write. Wait for room.
            if partition.log.is_offline_for_space() {
                let room = shard::io::file_system_space(partition.log.dir())
                    .map_or(true, |(free, _)| free >= REPAIR_FREE_BYTES_MIN);
                if !room {
                    self.repairs.borrow_mut().insert(
                        key.clone(),
                        Repair {
                            next_ms: now + REPAIR_BACKOFF_MS_MIN as i64,
                            backoff_ms: REPAIR_BACKOFF_MS_MIN,
                        },
                    );
                    continue;
                }
            }
            let durable_end = partition.log.durable_end_offset();
            let config = partition.log.config();
            let dir = partition.log.dir().to_path_buf();
            partition.log.discard().await;
            let options = OpenOptions {
                sync_latency_us: self.sync_latency_us.clone(),
                config,
                cache: self.cache.clone(),
                now_ms: now,
            };
            let reopened = match PartitionLog::open(self.storage.clone(), &dir, options).await {
                Ok(log) if log.log_end_offset() > durable_end => {
                    log.truncate_to(durable_end).await.map(|()| log)
                }
                other => other,
            };
            match reopened {
                Ok(log) => {
                    tracing::info!(partition = %key, log_end = log.log_end_offset(), "offline partition back online");
                    self.repairs.borrow_mut().remove(&key);
                    self.stats.partition_recovered();
                    let reopened = Rc::new(Partition::new(log, -1, Role::alone(self.node)));
                    reopened.take_role(partition.role(), partition.leader_epoch(), self.node, now);
                    self.partitions.borrow_mut().insert(key, reopened);
                    partition.notify_appended();
                }
                Err(error) => {
                    let mut repairs = self.repairs.borrow_mut();
                    let repair = repairs
                        .entry(key.clone())
                        .or_insert(Repair { next_ms: now, backoff_ms: REPAIR_BACKOFF_MS_MIN });
                    tracing::warn!(partition = %key, %error, retry_in_ms = repair.backoff_ms, "offline partition could not be reopened");
                    repair.next_ms = now + repair.backoff_ms as i64;
                    repair.backoff_ms = (repair.backoff_ms * 2).min(REPAIR_BACKOFF_MS_MAX);
                    // The discarded log stays in place (offline, closed): requests get errors
                    // until the next attempt succeeds.
                }
            }
        }
    }

    /// Partitions of this shard that are offline now.
    pub fn offline_partitions(&self) -> Vec<TopicPartition> {
        let mut offline: Vec<TopicPartition> = self
            .partitions
            .borrow()
            .iter()
            .filter(|(_, partition)| partition.log.is_offline())
            .map(|(key, _)| key.clone())
            .collect();
        offline.sort();
        offline
    }

    /// Interval flushes, and when `retention_due`, compaction and retention, of every owned
    /// partition.
    pub async fn maintain(&self, retention_due: bool) {
        self.repair_offline().await;
        if retention_due && self.shard.0 == 0 {
            // Back after a full disk released it (a quick check when it exists).
            shard::io::space_reserve::ensure();
        }
        let now = self.clock.now_ms();
        let partitions: Vec<_> = self.partitions.borrow().values().cloned().collect();
        for partition in partitions {
            let dir = partition.log.dir().display().to_string();
            if let Err(error) = partition.log.flush_if_due(now).await {
                tracing::error!(%error, %dir, "interval flush failed");
            }
            if !retention_due {
                continue;
            }
            match partition.log.compact_if_due(now).await {
                Ok(Some(outcome)) if outcome.segments_rewritten > 0 => {
                    self.stats.compacted(outcome.records_removed);
                }
                Ok(_) => {}
                Err(error) => tracing::error!(%error, %dir, "compaction failed"),
            }
            match partition.log.apply_retention(now).await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(deleted, %dir, "retention deleted segments"),
                Err(error) => tracing::error!(%error, %dir, "retention failed"),
            }
        }
    }

    /// Clean shutdown: each close waits for appends in progress, writes and syncs everything,
    /// and leaves the clean-shutdown marker so the next start skips recovery.
    pub async fn close_all(&self) {
        let partitions: Vec<_> = self.partitions.borrow().values().cloned().collect();
        let closed = std::cell::Cell::new(0usize);
        // Closes are independent (each partition owns its files) and mostly wait on fsyncs, so
        // several run at once: with thousands of partitions a sequential close takes minutes.
        futures_util::stream::iter(partitions)
            .for_each_concurrent(CLOSE_CONCURRENCY_MAX, |partition| {
                let closed = &closed;
                async move {
                    match partition.log.close().await {
                        Ok(()) => closed.set(closed.get() + 1),
                        Err(error) => {
                            tracing::error!(%error, dir = %partition.log.dir().display(), "close failed")
                        }
                    }
                    partition.notify_appended();
                }
            })
            .await;
        tracing::info!(shard = self.shard.0, closed = closed.get(), "partitions closed");
    }
}
