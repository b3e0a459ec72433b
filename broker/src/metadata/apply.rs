//! `apply`: the one state transition of cluster metadata. A pure function of (image, record):
//! no I/O, no clock, no randomness, so every node that applies the same records in the same
//! order holds the same image (the property the controller's log relies on).
//!
//! A record that does not fit the image (a partition of an unknown topic, a gap in partition
//! ids, a second topic with a taken name or id) is an `ApplyError`: `decide` never emits one,
//! so it means a bug or a damaged log, and the image is left as it was.

use super::image::{BrokerImage, MetadataImage, TopicImage};
use super::records::MetadataRecord;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("topic {0} already exists")]
    TopicExists(String),
    #[error("no topic with id {0:02x?}")]
    UnknownTopicId([u8; 16]),
    #[error("no topic named {0}")]
    UnknownTopic(String),
    #[error("partition {partition} of {topic} does not follow its {count} partitions")]
    PartitionGap { topic: String, partition: i32, count: i32 },
    #[error("the cluster id is already {0}")]
    ClusterIdSet(String),
    #[error("no broker {0} is registered")]
    UnknownBroker(i32),
    #[error("{0} has no partition {1}")]
    UnknownPartition(String, i32),
    #[error("partition {0}-{1}: {2}")]
    InvalidPartitionState(String, i32, String),
    #[error("a producer id block ending at {0} does not follow the last one, which ends at {1}")]
    ProducerIdsBehind(i64, i64),
    #[error("user {0} has no {1} credential")]
    UnknownScramCredential(String, &'static str),
    #[error("no ACL has the id {0:?}")]
    UnknownAcl(super::acl::AclId),
    #[error("an ACL with the id {0:?} exists")]
    AclExists(super::acl::AclId),
}

/// A partition's leader, ISR and replicas agree: a non-empty ISR of distinct replicas, the
/// leader -1 or one of the ISR.
fn check_partition(
    placement: &super::placement::Placement,
    leader: wire::ids::NodeId,
) -> Result<(), String> {
    let mut isr = placement.isr.clone();
    isr.sort_unstable();
    isr.dedup();
    if placement.replicas.is_empty() {
        return Err("no replicas".into());
    }
    if isr.is_empty() || isr.len() != placement.isr.len() {
        return Err(format!("the ISR {:?} is empty or names a broker twice", placement.isr));
    }
    if let Some(outside) = isr.iter().find(|node| !placement.replicas.contains(node)) {
        return Err(format!("ISR member {} is not a replica", outside.0));
    }
    if leader.0 != -1 && !placement.isr.contains(&leader) {
        return Err(format!("leader {} is not in the ISR {:?}", leader.0, placement.isr));
    }
    Ok(())
}

/// Changes one partition: its leader and leader epoch (which may not go back, and grows with
/// every change of leader), then whatever `edit` changes; bumps the partition epoch and
/// checks the result (`check_partition`).
fn change_partition(
    image: &mut MetadataImage,
    topic_id: &[u8; 16],
    partition: wire::ids::PartitionId,
    leader: wire::ids::NodeId,
    leader_epoch: wire::ids::LeaderEpoch,
    edit: impl FnOnce(&mut super::placement::Placement) -> Result<(), String>,
) -> Result<(), ApplyError> {
    let brokers = &image.brokers;
    let topic = image
        .topics
        .values_mut()
        .find(|topic| topic.topic_id == *topic_id)
        .ok_or(ApplyError::UnknownTopicId(*topic_id))?;
    let name = topic.name.clone();
    let placement = usize::try_from(partition.0)
        .ok()
        .and_then(|index| topic.partitions.get_mut(index))
        .ok_or_else(|| ApplyError::UnknownPartition(name.clone(), partition.0))?;
    let invalid = |why: String| ApplyError::InvalidPartitionState(name.clone(), partition.0, why);
    if leader_epoch < placement.leader_epoch
        || (leader != placement.leader && leader_epoch == placement.leader_epoch)
    {
        return Err(invalid(format!(
            "leader epoch {} after {} (it grows with every leader change)",
            leader_epoch.0, placement.leader_epoch.0
        )));
    }
    let mut next = placement.clone();
    next.leader = leader;
    next.leader_epoch = leader_epoch;
    edit(&mut next).map_err(invalid)?;
    next.partition_epoch = placement.partition_epoch.saturating_add(1);
    if leader != placement.leader {
        // A new leading broker owns the partition on its own shard (the one `place` would
        // choose there); a leaderless partition keeps its last one.
        if let Some(broker) = brokers.get(&leader) {
            let shards = usize::from(broker.registration.shards);
            next.shard = shard::runtime::shard_of(
                &name,
                partition.0,
                shards.clamp(1, shard::runtime::SHARDS_MAX),
            );
        }
    }
    check_partition(&next, leader).map_err(invalid)?;
    *placement = next;
    Ok(())
}

/// The image after `record`.
pub fn apply(
    mut image: MetadataImage,
    record: &MetadataRecord,
) -> Result<MetadataImage, ApplyError> {
    match record {
        MetadataRecord::Topic { name, topic_id } => add_topic(&mut image, name, topic_id)?,
        MetadataRecord::Partition { topic_id, partition, placement } => {
            add_partition(&mut image, topic_id, *partition, placement)?
        }
        MetadataRecord::TopicConfig { topic, key, value } => {
            set_topic_config(&mut image, topic, key, value.as_deref())?
        }
        MetadataRecord::BrokerConfig { resource, key, value } => {
            set_broker_config(&mut image, resource, key, value.as_deref())
        }
        MetadataRecord::GroupConfig { group, key, value } => {
            set_group_config(&mut image, group, key, value.as_deref())
        }
        MetadataRecord::ClusterId { cluster_id } => set_cluster_id(&mut image, cluster_id)?,
        MetadataRecord::RegisterBroker { broker } => register_broker(&mut image, broker),
        MetadataRecord::ProducerIds { next, .. } => advance_producer_ids(&mut image, *next)?,
        MetadataRecord::RegisterController { node, directory_id } => {
            image.controllers.insert(*node, directory_id.clone());
        }
        MetadataRecord::FenceBroker { node } | MetadataRecord::UnfenceBroker { node } => {
            let broker = image.brokers.get_mut(node).ok_or(ApplyError::UnknownBroker(node.0))?;
            broker.fenced = matches!(record, MetadataRecord::FenceBroker { .. });
        }
        MetadataRecord::PartitionChange { topic_id, partition, leader, leader_epoch, isr } => {
            change_partition(&mut image, topic_id, *partition, *leader, *leader_epoch, |next| {
                if let Some(isr) = isr {
                    next.isr = isr.clone();
                }
                Ok(())
            })?;
        }
        MetadataRecord::PartitionReplicas {
            topic_id,
            partition,
            replicas,
            isr,
            adding,
            removing,
            leader,
            leader_epoch,
        } => {
            change_partition(&mut image, topic_id, *partition, *leader, *leader_epoch, |next| {
                reassign(next, replicas, isr, adding, removing)
            })?;
        }
        MetadataRecord::ScramCredential { user, mechanism, credential } => {
            image.scram.entry(user.clone()).or_default().insert(*mechanism, credential.clone());
        }
        MetadataRecord::RemoveScramCredential { user, mechanism } => {
            remove_scram_credential(&mut image, user, mechanism)?
        }
        MetadataRecord::Acl { id, binding } => add_acl(&mut image, id, binding)?,
        MetadataRecord::RemoveAcl { id } => {
            image.acls.remove(id).ok_or(ApplyError::UnknownAcl(*id))?;
        }
        MetadataRecord::ClientQuota { entity, key, value } => {
            set_client_quota(&mut image, entity, key, value.as_ref())
        }
        MetadataRecord::RemoveTopic { topic_id } => remove_topic(&mut image, topic_id)?,
    }
    image.version += 1;
    Ok(image)
}

/// `Topic`: a new topic without partitions, under a name and an id no topic has.
fn add_topic(image: &mut MetadataImage, name: &str, topic_id: &[u8; 16]) -> Result<(), ApplyError> {
    if image.topics.contains_key(name) || image.topic_by_id(topic_id).is_some() {
        return Err(ApplyError::TopicExists(name.to_string()));
    }
    image.topics.insert(
        name.to_string(),
        TopicImage {
            name: name.to_string(),
            topic_id: *topic_id,
            partitions: Vec::new(),
            configs: Default::default(),
        },
    );
    Ok(())
}

/// `Partition`: a topic's next partition, whose state is checked (`check_partition`).
fn add_partition(
    image: &mut MetadataImage,
    topic_id: &[u8; 16],
    partition: wire::ids::PartitionId,
    placement: &super::placement::Placement,
) -> Result<(), ApplyError> {
    let topic = image
        .topics
        .values_mut()
        .find(|topic| topic.topic_id == *topic_id)
        .ok_or(ApplyError::UnknownTopicId(*topic_id))?;
    if partition.0 != topic.partition_count() {
        return Err(ApplyError::PartitionGap {
            topic: topic.name.clone(),
            partition: partition.0,
            count: topic.partition_count(),
        });
    }
    check_partition(placement, placement.leader)
        .map_err(|why| ApplyError::InvalidPartitionState(topic.name.clone(), partition.0, why))?;
    topic.partitions.push(placement.clone());
    Ok(())
}

/// Sets (`Some`) or deletes (`None`) one key of a config map.
fn set_config(configs: &mut BTreeMap<String, String>, key: &str, value: Option<&str>) {
    match value {
        Some(value) => configs.insert(key.to_string(), value.to_string()),
        None => configs.remove(key),
    };
}

/// `TopicConfig`: sets or deletes one of a topic's config overrides.
fn set_topic_config(
    image: &mut MetadataImage,
    topic: &str,
    key: &str,
    value: Option<&str>,
) -> Result<(), ApplyError> {
    let topic =
        image.topics.get_mut(topic).ok_or_else(|| ApplyError::UnknownTopic(topic.to_string()))?;
    set_config(&mut topic.configs, key, value);
    Ok(())
}

/// `BrokerConfig`: sets or deletes one of a resource's broker configs; a resource left without
/// any is removed.
fn set_broker_config(image: &mut MetadataImage, resource: &str, key: &str, value: Option<&str>) {
    let configs = image.broker_configs.entry(resource.to_string()).or_default();
    set_config(configs, key, value);
    if configs.is_empty() {
        image.broker_configs.remove(resource);
    }
}

/// `GroupConfig`: sets or deletes one of a group's configs; a group left without any is
/// removed.
fn set_group_config(image: &mut MetadataImage, group: &str, key: &str, value: Option<&str>) {
    let configs = image.group_configs.entry(group.to_string()).or_default();
    set_config(configs, key, value);
    if configs.is_empty() {
        image.group_configs.remove(group);
    }
}

/// `ClusterId`: set once; the same id again is no change.
fn set_cluster_id(image: &mut MetadataImage, cluster_id: &str) -> Result<(), ApplyError> {
    if !image.cluster_id.is_empty() && image.cluster_id != cluster_id {
        return Err(ApplyError::ClusterIdSet(image.cluster_id.clone()));
    }
    image.cluster_id = cluster_id.to_string();
    Ok(())
}

/// `RegisterBroker`: a broker's registration, new or renewed.
fn register_broker(image: &mut MetadataImage, broker: &super::image::BrokerRegistration) {
    // A new broker serves at once; a fenced one registering again (a restart) stays
    // fenced until its heartbeats unfence it, which also gives its partitions back.
    let fenced = image.brokers.get(&broker.node).is_some_and(|known| known.fenced);
    image.brokers.insert(broker.node, BrokerImage { registration: broker.clone(), fenced });
}

/// `ProducerIds`: a block of producer ids, which only moves forward.
fn advance_producer_ids(image: &mut MetadataImage, next: i64) -> Result<(), ApplyError> {
    if next <= image.next_producer_id {
        return Err(ApplyError::ProducerIdsBehind(next, image.next_producer_id));
    }
    image.next_producer_id = next;
    Ok(())
}

/// `PartitionReplicas`' edit of a partition: its replicas (distinct), ISR, and the replicas
/// being added and removed (replicas, never both).
fn reassign(
    next: &mut super::placement::Placement,
    replicas: &[wire::ids::NodeId],
    isr: &[wire::ids::NodeId],
    adding: &[wire::ids::NodeId],
    removing: &[wire::ids::NodeId],
) -> Result<(), String> {
    let mut distinct = replicas.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != replicas.len() {
        return Err(format!("the replicas {replicas:?} name a broker twice"));
    }
    let outside = adding.iter().chain(removing).find(|node| !replicas.contains(node));
    if let Some(node) = outside {
        return Err(format!("{} is added or removed but not a replica", node.0));
    }
    if let Some(node) = adding.iter().find(|node| removing.contains(node)) {
        return Err(format!("{} is both added and removed", node.0));
    }
    next.replicas = replicas.to_vec();
    next.isr = isr.to_vec();
    next.adding = adding.to_vec();
    next.removing = removing.to_vec();
    Ok(())
}

/// `RemoveScramCredential`: a user's credential for one mechanism; a user left without any
/// is removed.
fn remove_scram_credential(
    image: &mut MetadataImage,
    user: &str,
    mechanism: &crate::sasl::scram::ScramMechanism,
) -> Result<(), ApplyError> {
    let missing = || ApplyError::UnknownScramCredential(user.to_string(), mechanism.name());
    let credentials = image.scram.get_mut(user).ok_or_else(missing)?;
    credentials.remove(mechanism).ok_or_else(missing)?;
    if credentials.is_empty() {
        image.scram.remove(user);
    }
    Ok(())
}

/// `Acl`: a new ACL, under an id no ACL has.
fn add_acl(
    image: &mut MetadataImage,
    id: &super::acl::AclId,
    binding: &super::acl::AclBinding,
) -> Result<(), ApplyError> {
    if image.acls.contains(id) {
        return Err(ApplyError::AclExists(*id));
    }
    image.acls.insert(*id, binding.clone());
    Ok(())
}

/// `ClientQuota`: sets or deletes one of an entity's quotas; an entity left without any is
/// removed.
fn set_client_quota(
    image: &mut MetadataImage,
    entity: &super::client_quota::QuotaEntity,
    key: &str,
    value: Option<&super::client_quota::QuotaValue>,
) {
    let values = image.quotas.entry(entity.clone()).or_default();
    match value {
        Some(value) => values.insert(key.to_string(), *value),
        None => values.remove(key),
    };
    if values.is_empty() {
        image.quotas.remove(entity);
    }
}

/// `RemoveTopic`: a topic, with its partitions and configs.
fn remove_topic(image: &mut MetadataImage, topic_id: &[u8; 16]) -> Result<(), ApplyError> {
    let name = image
        .topic_by_id(topic_id)
        .map(|topic| topic.name.clone())
        .ok_or(ApplyError::UnknownTopicId(*topic_id))?;
    image.topics.remove(&name);
    Ok(())
}

/// The image after every record, in order; on the first failure the image before the batch.
pub fn apply_all(
    image: &MetadataImage,
    records: &[MetadataRecord],
) -> Result<MetadataImage, ApplyError> {
    records.iter().try_fold(image.clone(), apply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::placement::PlacementPolicy;
    use wire::ids::{NodeId, PartitionId};

    fn partition(topic_id: [u8; 16], index: i32) -> MetadataRecord {
        let policy = PlacementPolicy { node: NodeId(0), shard_count: 2 };
        MetadataRecord::Partition {
            topic_id,
            partition: PartitionId(index),
            placement: policy.initial("t", index),
        }
    }

    #[test]
    fn records_build_a_topic_and_remove_it() {
        let records = vec![
            MetadataRecord::Topic { name: "t".into(), topic_id: [7; 16] },
            partition([7; 16], 0),
            partition([7; 16], 1),
            MetadataRecord::TopicConfig {
                topic: "t".into(),
                key: "retention.ms".into(),
                value: Some("10".into()),
            },
        ];
        let image = apply_all(&MetadataImage::default(), &records).expect("applies");
        assert_eq!(image.version, 4);
        let topic = image.topic("t").expect("topic");
        assert_eq!(topic.partition_count(), 2);
        assert_eq!(topic.configs.get("retention.ms").map(String::as_str), Some("10"));
        let removed = apply(image, &MetadataRecord::RemoveTopic { topic_id: [7; 16] }).expect("ok");
        assert!(removed.topics.is_empty());
        assert_eq!(removed.version, 5);
    }

    #[test]
    fn records_that_do_not_fit_are_refused_and_leave_the_image_unchanged() {
        let base = apply_all(
            &MetadataImage::default(),
            &[MetadataRecord::Topic { name: "t".into(), topic_id: [7; 16] }],
        )
        .expect("topic");
        for bad in [
            MetadataRecord::Topic { name: "t".into(), topic_id: [8; 16] },
            MetadataRecord::Topic { name: "u".into(), topic_id: [7; 16] },
            partition([9; 16], 0),
            partition([7; 16], 2),
            MetadataRecord::TopicConfig { topic: "u".into(), key: "k".into(), value: None },
            MetadataRecord::RemoveTopic { topic_id: [9; 16] },
        ] {
            assert!(apply_all(&base, &[partition([7; 16], 0), bad.clone()]).is_err(), "{bad:?}");
        }
        assert_eq!(base.version, 1);
    }
}
