//! Offsets committed inside a transaction (TxnOffsetCommit, KIP-98; KIP-447's member checks).
//!
//! A transactional commit is appended to the group's `__consumer_offsets` partition as a
//! transactional batch of the producer (its id and epoch, no sequence), durably, and held
//! pending: OffsetFetch does not answer it (with `require_stable`, the partition is
//! UNSTABLE_OFFSET_COMMIT), until the transaction's marker reaches the partition. The
//! coordinator's marker for an `__consumer_offsets` partition comes here (`write_marker`): it is
//! written to the log, then a commit applies the producer's pending offsets of the groups on
//! that partition and an abort drops them. Replay does the same from the log: transactional
//! batches are held per producer until their marker; what is still held at the end stays
//! pending (the transaction is open).

use super::offsets::{offsets_partition, record_key, record_value, Committed};
use super::GroupService;
use crate::error::{BrokerError, GroupError, Result, VerifyError};
use crate::metadata::internal::partition_for_group;
use crate::services::partitions::txn_markers::MarkerSpec;
use shard::io::Storage;
use std::collections::HashMap;
use wire::ids::TopicPartition;

/// Offsets of open transactions: producer id → (group, partition, offset), latest last.
pub type PendingTxnOffsets = HashMap<i64, Vec<(String, TopicPartition, Committed)>>;

/// A TxnOffsetCommit as the group coordinator receives it.
pub struct TxnCommit {
    pub group: String,
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub entries: Vec<(TopicPartition, Committed)>,
}

impl<S: Storage> GroupService<S> {
    pub(super) async fn txn_commit(&self, commit: TxnCommit) -> Result<()> {
        let TxnCommit {
            group,
            transactional_id,
            producer_id,
            producer_epoch,
            member_id,
            instance_id,
            generation,
            entries,
        } = commit;
        if !super::valid_group_id(&group) {
            return Err(BrokerError::Group(GroupError::InvalidGroupId));
        }
        // Kafka: a member's identity is checked only when the request carries one (v3+);
        // generation -1 with no member id is accepted even for a group with members.
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            // A consumer group's stale member epoch is ILLEGAL_GENERATION here, as in Kafka.
            self.check_commit(&group, &member_id, instance_id.as_deref(), generation, None)
                .map_err(|error| match error {
                    GroupError::StaleMemberEpoch => GroupError::IllegalGeneration,
                    other => other,
                })
                .map_err(BrokerError::Group)?;
        }
        let _guard = self.offsets_lock.lock().await;
        // Partition verification (KIP-890 part 1), as for a produce: the group's offsets
        // partition must be in the ongoing transaction (AddOffsetsToTxn), unless the producer
        // already committed offsets there in it. Markers for this partition take the offsets
        // lock, so none comes between the answer and the append.
        let partition = offsets_partition(&group);
        if let Some(owned) = self.partitions.local(&partition) {
            self.partitions
                .verify_producer(&partition, &owned, &transactional_id, producer_id, producer_epoch)
                .await
                .map_err(|error| match error {
                    // Kafka's maybeConvertOffsetCommitError: retried after a coordinator lookup.
                    BrokerError::Verify(VerifyError::Unavailable(_)) => {
                        BrokerError::Group(GroupError::CoordinatorNotAvailable)
                    }
                    other => other,
                })?;
        }
        let records: Vec<(Vec<u8>, Option<Vec<u8>>)> = entries
            .iter()
            .map(|(partition, committed)| {
                (record_key(&group, partition), Some(record_value(committed)))
            })
            .collect();
        self.append_records_as(&group, &records, Some((producer_id, producer_epoch))).await?;
        let mut pending = self.pending_txn.borrow_mut();
        let held = pending.entry(producer_id).or_default();
        for (partition, committed) in entries {
            held.retain(|(g, p, _)| !(g == &group && p == &partition));
            held.push((group.clone(), partition, committed));
        }
        Ok(())
    }

    /// Writes a transaction marker to an `__consumer_offsets` partition this shard leads, then
    /// applies (commit) or drops (abort) the producer's pending offsets of the groups there.
    pub(super) async fn txn_marker(
        &self,
        partition: &TopicPartition,
        marker: MarkerSpec,
    ) -> Result<()> {
        let _guard = self.offsets_lock.lock().await;
        self.partitions.write_marker(partition, marker).await?;
        self.complete_pending(partition.partition.0, marker.producer_id, marker.commit);
        Ok(())
    }

    /// Applies or drops `producer_id`'s pending offsets of the groups on offsets partition
    /// `index`.
    pub(super) fn complete_pending(&self, index: i32, producer_id: i64, commit: bool) {
        let mut pending = self.pending_txn.borrow_mut();
        let Some(held) = pending.get_mut(&producer_id) else { return };
        let (done, kept): (Vec<_>, Vec<_>) =
            held.drain(..).partition(|(group, _, _)| partition_for_group(group) == index);
        *held = kept;
        if held.is_empty() {
            pending.remove(&producer_id);
        }
        if !commit {
            return;
        }
        let mut table = self.offsets.borrow_mut();
        for (group, partition, committed) in done {
            table.entry(group).or_default().insert(partition, committed);
        }
    }

    /// The partitions of `group` with an offset committed in a transaction still open.
    pub(super) fn unstable_partitions(&self, group: &str) -> Vec<TopicPartition> {
        self.pending_txn
            .borrow()
            .values()
            .flatten()
            .filter(|(g, _, _)| g == group)
            .map(|(_, partition, _)| partition.clone())
            .collect()
    }

    /// Whether offsets partition `index` holds offsets of open transactions (it is not
    /// compacted meanwhile: their records must stay until the marker).
    pub(super) fn has_pending_on(&self, index: i32) -> bool {
        self.pending_txn
            .borrow()
            .values()
            .flatten()
            .any(|(group, _, _)| partition_for_group(group) == index)
    }

    /// Drops the pending transactional offsets of the groups of offsets partitions this shard
    /// no longer leads.
    pub(super) fn forget_pending_of(&self, index: i32) {
        let mut pending = self.pending_txn.borrow_mut();
        for held in pending.values_mut() {
            held.retain(|(group, _, _)| partition_for_group(group) != index);
        }
        pending.retain(|_, held| !held.is_empty());
    }
}

/// The offsets partition of `group` (re-exported for the handler's routing checks).
pub fn partition_of(group: &str) -> TopicPartition {
    offsets_partition(group)
}
