//! Admin requests turned into metadata records, after validation against the current image.
//! Each function decides one item (a topic to create, delete, grow or reconfigure) and returns
//! the records that carry it out, or the error the client gets; nothing is applied here.
//! Randomness (new topic ids) comes in as an argument, so decisions are reproducible in tests.

use super::image::{BrokerRegistration, MetadataImage, TopicId};
use super::placement::{Placement, PlacementPolicy};
use super::records::MetadataRecord;
use super::topic_config::{
    default_config, is_list_config, validate_topic_configs, validate_topic_name,
    PARTITIONS_PER_TOPIC_MAX,
};
use crate::error::{BrokerError, Result};
use std::collections::BTreeMap;
use wire::ids::{LeaderEpoch, NodeId, PartitionId};

#[derive(Debug, Clone, Default)]
pub struct CreateTopic {
    pub name: String,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
    pub validate_only: bool,
    /// Replicas per partition (0 or less: 1), placed on that many live brokers.
    pub replication_factor: i32,
    /// A manual assignment (checked by `validate_assignments`): partition `i`'s replicas,
    /// the first its leader. Empty: placed automatically.
    pub assignments: Vec<Vec<i32>>,
}

#[derive(Debug, Clone)]
pub enum ConfigEdit {
    /// AlterConfigs: the overrides become exactly these.
    Replace(BTreeMap<String, String>),
    /// IncrementalAlterConfigs: (key, op, value) with op 0 SET, 1 DELETE, 2 APPEND and 3 SUBTRACT
    /// (list configs only: `LIST_CONFIGS`).
    Incremental(Vec<(String, i8, Option<String>)>),
}

/// A change to the topic table, decided item by item by the metadata service.
#[derive(Debug, Clone)]
pub enum MetadataChange {
    CreateTopics(Vec<CreateTopic>),
    DeleteTopics(Vec<String>),
    /// (topic, new partition count, validate only).
    /// (topic, new partition count, validate only, the new partitions' manual assignments).
    CreatePartitions(Vec<(String, i32, bool, Vec<Vec<i32>>)>),
    /// (topic, edit, validate only).
    AlterConfigs(Vec<(String, ConfigEdit, bool)>),
    /// The node that received it, and (BROKER resource name: a node id or "" for the cluster
    /// default, edit, validate only).
    AlterBrokerConfigs(i32, Vec<(String, ConfigEdit, bool)>),
    /// Group configs (the GROUP resource): the broker's `group.*` settings the unset keys
    /// default to, and (group, edit, validate only).
    AlterGroupConfigs(BTreeMap<String, String>, Vec<(String, ConfigEdit, bool)>),
    /// ElectLeaders: one election per (topic, partition).
    ElectLeaders(super::elect::ElectionType, Vec<(String, i32)>),
    /// A leader's ISR changes (AlterPartition): the leader, and per partition (topic,
    /// partition, its leader epoch, the new ISR).
    AlterIsr(NodeId, Vec<(String, i32, i32, Vec<NodeId>)>),
    /// AlterPartitionReassignments: per (topic, partition) the target replicas, or `None` to
    /// cancel the running move (`metadata::reassign`).
    Reassign(Vec<(String, i32, Option<Vec<i32>>)>),
    /// AlterUserScramCredentials: each user's checked alterations (`metadata::scram`).
    AlterScram(Vec<(String, Vec<super::scram::ScramAlteration>)>),
    /// AlterClientQuotas: (entity, its operations, validate only).
    AlterQuotas(Vec<(super::quotas::QuotaEntity, super::quotas::QuotaOps, bool)>),
    /// CreateAcls: the checked bindings (`metadata::acl`).
    CreateAcls(Vec<super::acl::AclBinding>),
    /// DeleteAcls: per filter, the ids of the ACLs it matched in the image the handler read
    /// (those still present are removed).
    DeleteAcls(Vec<Vec<super::acl::AclId>>),
}

/// Checks manual replica assignments (CreateTopics `assignments`, CreatePartitions
/// `assignments`) as Kafka's controller does (`validateManualPartitionAssignment`), in its
/// order: each partition's replica list non-empty, of registered brokers, none twice, all of
/// one size (`size`, or the first list's). `partitions` are the assignments' partition ids.
pub fn validate_assignments(
    assignments: &[(i32, Vec<i32>)],
    registered: &[i32],
    size: Option<usize>,
) -> Result<()> {
    let invalid = |why: String| BrokerError::InvalidReplicaAssignment(why);
    let mut seen = std::collections::BTreeSet::new();
    let mut size = size;
    for (partition, brokers) in assignments {
        if !seen.insert(*partition) {
            return Err(invalid(format!(
                "Found multiple manual partition assignments for partition {partition}"
            )));
        }
        if brokers.is_empty() {
            return Err(invalid(
                "The manual partition assignment includes an empty replica list.".into(),
            ));
        }
        let mut sorted = brokers.clone();
        sorted.sort_unstable();
        for broker in &sorted {
            if !registered.contains(broker) {
                return Err(invalid(format!(
                    "The manual partition assignment includes broker {broker}, but no such \
                     broker is registered."
                )));
            }
        }
        if let Some(twice) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(invalid(format!(
                "The manual partition assignment includes the broker {} more than once.",
                twice[0]
            )));
        }
        match size {
            Some(expected) if expected != brokers.len() => {
                return Err(invalid(format!(
                    "The manual partition assignment includes a partition with {} replica(s), \
                     but this is not consistent with previous partitions, which have \
                     {expected} replica(s).",
                    brokers.len()
                )));
            }
            _ => size = Some(brokers.len()),
        }
    }
    Ok(())
}

fn partition_count_error(count: i32) -> BrokerError {
    BrokerError::InvalidPartitions(format!(
        "{count} partitions; must be 1..={PARTITIONS_PER_TOPIC_MAX}"
    ))
}

pub fn create_topic(
    image: &MetadataImage,
    create: &CreateTopic,
    policy: PlacementPolicy,
    topic_id: TopicId,
) -> Result<Vec<MetadataRecord>> {
    validate_topic_name(&create.name)?;
    if image.topic(&create.name).is_some() {
        return Err(BrokerError::TopicAlreadyExists(create.name.clone()));
    }
    if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&create.partitions) {
        return Err(partition_count_error(create.partitions));
    }
    validate_topic_configs(&create.configs)?;
    let factor = create.replication_factor.max(1);
    let brokers = image.live_brokers().count();
    if create.assignments.is_empty() && factor > 1 && factor as usize > brokers {
        return Err(BrokerError::InvalidReplicationFactor(format!(
            "Unable to replicate the partition {factor} time(s): The target replication factor \
             of {factor} cannot be reached because only {brokers} broker(s) are registered."
        )));
    }
    let mut records = vec![MetadataRecord::Topic { name: create.name.clone(), topic_id }];
    records.extend((0..create.partitions).map(|partition| MetadataRecord::Partition {
        topic_id,
        partition: PartitionId(partition),
        placement: match usize::try_from(partition).ok().and_then(|i| create.assignments.get(i)) {
            Some(replicas) => assigned(policy, image, &create.name, partition, replicas),
            None => place(policy, image, &create.name, partition, factor),
        },
    }));
    records.extend(create.configs.iter().map(|(key, value)| MetadataRecord::TopicConfig {
        topic: create.name.clone(),
        key: key.clone(),
        value: Some(value.clone()),
    }));
    Ok(records)
}

/// Where a new partition of `topic` goes in `image`: with no registered brokers (a single
/// node), `initial`; in a cluster, led by the live brokers in turn (rack by rack, see
/// `rack_alternated`) from a start the topic's name chooses (so one topic's leaders cover
/// every broker, and topics do not all start on the lowest id), on a shard of the leader's
/// chosen as `initial` chooses on this node. Followers are the next brokers in turn whose
/// rack holds no replica of the partition yet, then any (rack-aware when `broker.rack` is
/// set: a partition spans as many racks as its replication factor allows).
pub fn place(
    policy: PlacementPolicy,
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    factor: i32,
) -> Placement {
    let brokers = rack_alternated(image.live_brokers().collect());
    if brokers.is_empty() {
        return policy.initial(topic, partition);
    }
    let start = crate::metadata::internal::java_string_hash(topic).unsigned_abs() as usize;
    let turn = start.wrapping_add(usize::try_from(partition).unwrap_or(0)) % brokers.len();
    let leader = brokers[turn];
    let wanted = usize::try_from(factor.max(1)).unwrap_or(1).min(brokers.len());
    let in_turn = || (0..brokers.len()).map(|k| brokers[(turn + k) % brokers.len()]);
    let mut replicas: Vec<&BrokerRegistration> = vec![leader];
    for broker in in_turn() {
        if replicas.len() < wanted && replicas.iter().all(|chosen| chosen.rack != broker.rack) {
            replicas.push(broker);
        }
    }
    for broker in in_turn() {
        if replicas.len() < wanted && !replicas.iter().any(|chosen| chosen.node == broker.node) {
            replicas.push(broker);
        }
    }
    Placement {
        leader: leader.node,
        shard: shard::runtime::shard_of(
            topic,
            partition,
            usize::from(leader.shards).clamp(1, shard::runtime::SHARDS_MAX),
        ),
        leader_epoch: LeaderEpoch(0),
        // Every replica starts in sync: a new partition is empty everywhere.
        replicas: replicas.iter().map(|broker| broker.node).collect(),
        isr: replicas.iter().map(|broker| broker.node).collect(),
        partition_epoch: 0,
        adding: Vec::new(),
        removing: Vec::new(),
    }
}

/// The brokers ordered rack by rack (Kafka's rack-alternated list): the first broker of each
/// rack in rack order, then the second of each, and so on; brokers without a rack count as
/// one rack. With no racks set this is the brokers by id.
fn rack_alternated(brokers: Vec<&BrokerRegistration>) -> Vec<&BrokerRegistration> {
    let mut racks: BTreeMap<Option<&str>, Vec<&BrokerRegistration>> = BTreeMap::new();
    for broker in brokers {
        racks.entry(broker.rack.as_deref()).or_default().push(broker);
    }
    let deepest = racks.values().map(Vec::len).max().unwrap_or(0);
    (0..deepest)
        .flat_map(|depth| racks.values().filter_map(move |rack| rack.get(depth)))
        .copied()
        .collect()
}

/// A manually assigned partition: led by its first replica, on a shard of that broker's.
fn assigned(
    policy: PlacementPolicy,
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    replicas: &[i32],
) -> Placement {
    let leader = NodeId(replicas.first().copied().unwrap_or(policy.node.0));
    let shards = match image.brokers.get(&leader) {
        Some(broker) => usize::from(broker.registration.shards),
        None => policy.shard_count,
    };
    Placement {
        leader,
        shard: shard::runtime::shard_of(
            topic,
            partition,
            shards.clamp(1, shard::runtime::SHARDS_MAX),
        ),
        leader_epoch: LeaderEpoch(0),
        replicas: replicas.iter().copied().map(NodeId).collect(),
        isr: replicas.iter().copied().map(NodeId).collect(),
        partition_epoch: 0,
        adding: Vec::new(),
        removing: Vec::new(),
    }
}

pub use super::elect::{fence_broker, unfence_broker, NO_LEADER};

/// Internal topics (`__consumer_offsets`) hold every group's offsets and are placed by a fixed
/// partition count: clients may not delete them, grow them, or change how long they keep data.
fn refuse_internal(name: &str, what: &str) -> Result<()> {
    if super::internal::is_internal(name) {
        return Err(BrokerError::InvalidTopic(format!("{name} is internal: it cannot be {what}")));
    }
    Ok(())
}

/// Configs of internal topics a client may not change (their retention and cleanup are the
/// coordinator's).
const INTERNAL_FIXED_CONFIGS: &[&str] =
    &["retention.ms", "retention.bytes", "cleanup.policy", "delete.retention.ms"];

pub fn delete_topic(image: &MetadataImage, name: &str) -> Result<Vec<MetadataRecord>> {
    refuse_internal(name, "deleted")?;
    let topic =
        image.topic(name).ok_or_else(|| BrokerError::UnknownTopicOrPartition(name.to_string()))?;
    Ok(vec![MetadataRecord::RemoveTopic { topic_id: topic.topic_id }])
}

pub fn create_partitions(
    image: &MetadataImage,
    name: &str,
    count: i32,
    policy: PlacementPolicy,
    assignments: &[Vec<i32>],
) -> Result<Vec<MetadataRecord>> {
    refuse_internal(name, "given more partitions")?;
    let topic =
        image.topic(name).ok_or_else(|| BrokerError::UnknownTopicOrPartition(name.to_string()))?;
    let current = topic.partition_count();
    if count <= current || count > PARTITIONS_PER_TOPIC_MAX {
        return Err(BrokerError::InvalidPartitions(format!(
            "topic has {current} partitions; the new count {count} must be larger (and at most \
             {PARTITIONS_PER_TOPIC_MAX})"
        )));
    }
    // New partitions get the topic's replication factor (its first partition's).
    let factor = topic.partitions.first().map_or(1, |p| p.replicas.len().max(1)) as i32;
    Ok((current..count)
        .map(|partition| {
            let manual = usize::try_from(partition - current).ok().and_then(|i| assignments.get(i));
            MetadataRecord::Partition {
                topic_id: topic.topic_id,
                partition: PartitionId(partition),
                placement: match manual {
                    Some(replicas) => assigned(policy, image, name, partition, replicas),
                    None => place(policy, image, name, partition, factor),
                },
            }
        })
        .collect())
}

/// `current` with `items` appended (those not in it yet) or subtracted, comma-separated.
fn edit_list(current: &str, items: &str, append: bool) -> String {
    let split = |list: &str| -> Vec<String> {
        list.split(',').map(str::trim).filter(|item| !item.is_empty()).map(String::from).collect()
    };
    let mut list = split(current);
    for item in split(items) {
        if append && !list.contains(&item) {
            list.push(item);
        } else if !append {
            list.retain(|kept| *kept != item);
        }
    }
    list.join(",")
}

/// The overrides `edit` leads to, validated.
fn edited_configs(
    current: &BTreeMap<String, String>,
    edit: &ConfigEdit,
) -> Result<BTreeMap<String, String>> {
    let mut configs = current.clone();
    match edit {
        ConfigEdit::Replace(replacement) => configs = replacement.clone(),
        ConfigEdit::Incremental(operations) => {
            for (key, operation, value) in operations {
                match (operation, value) {
                    (0, Some(value)) => {
                        configs.insert(key.clone(), value.clone());
                    }
                    (0, None) => {
                        return Err(BrokerError::InvalidConfig(format!("{key}: SET needs a value")))
                    }
                    (1, _) => {
                        if default_config(key).is_none() {
                            return Err(BrokerError::InvalidConfig(format!(
                                "unknown topic config {key:?}"
                            )));
                        }
                        configs.remove(key);
                    }
                    (operation @ (2 | 3), Some(items)) if is_list_config(key) => {
                        let current = configs
                            .get(key)
                            .map(String::as_str)
                            .or_else(|| default_config(key))
                            .unwrap_or_default();
                        let edited = edit_list(current, items, *operation == 2);
                        configs.insert(key.clone(), edited);
                    }
                    (other, _) => {
                        return Err(BrokerError::InvalidConfig(format!(
                            "{key}: operation {other} applies to list configs only"
                        )))
                    }
                }
            }
        }
    }
    validate_topic_configs(&configs)?;
    Ok(configs)
}

pub fn alter_configs(
    image: &MetadataImage,
    name: &str,
    edit: &ConfigEdit,
) -> Result<Vec<MetadataRecord>> {
    let topic =
        image.topic(name).ok_or_else(|| BrokerError::UnknownTopicOrPartition(name.to_string()))?;
    let next = edited_configs(&topic.configs, edit)?;
    if super::internal::is_internal(name) {
        let changed =
            INTERNAL_FIXED_CONFIGS.iter().find(|key| topic.configs.get(**key) != next.get(**key));
        if let Some(key) = changed {
            return Err(BrokerError::InvalidConfig(format!(
                "{name} is internal: its {key} cannot be changed"
            )));
        }
    }
    let removed = topic.configs.keys().filter(|key| !next.contains_key(*key)).map(|key| {
        MetadataRecord::TopicConfig { topic: name.to_string(), key: key.clone(), value: None }
    });
    let set = next.iter().filter(|(key, value)| topic.configs.get(*key) != Some(value)).map(
        |(key, value)| MetadataRecord::TopicConfig {
            topic: name.to_string(),
            key: key.clone(),
            value: Some(value.clone()),
        },
    );
    Ok(removed.chain(set).collect())
}

/// AlterConfigs / IncrementalAlterConfigs on the GROUP resource: SET and DELETE of the keys
/// `metadata::group_config` knows, each value checked, and the group's configs as a whole
/// (a session longer than the heartbeat interval, with `broker_defaults` for unset keys).
/// The group need not exist. APPEND and SUBTRACT are refused: no group config is a list.
pub fn alter_group_configs(
    image: &MetadataImage,
    group: &str,
    edit: &ConfigEdit,
    broker_defaults: &BTreeMap<String, String>,
) -> Result<Vec<MetadataRecord>> {
    use super::group_config;
    if group.is_empty() {
        return Err(BrokerError::InvalidRequest("a group config needs a group id".into()));
    }
    let current = image.group_configs.get(group).cloned().unwrap_or_default();
    let next = match edit {
        ConfigEdit::Replace(replacement) => replacement.clone(),
        ConfigEdit::Incremental(operations) => {
            let mut next = current.clone();
            for (key, operation, value) in operations {
                if group_config::find(key).is_none() {
                    return Err(BrokerError::InvalidConfig(format!(
                        "Unknown group config name: {key}"
                    )));
                }
                match (operation, value) {
                    (0, Some(value)) => {
                        next.insert(key.clone(), value.clone());
                    }
                    (1, _) => {
                        next.remove(key);
                    }
                    (0, None) => {
                        return Err(BrokerError::InvalidConfig(format!("{key}: SET needs a value")))
                    }
                    (other, _) => {
                        return Err(BrokerError::InvalidConfig(format!(
                            "{key}: operation {other} applies to list configs only"
                        )))
                    }
                }
            }
            next
        }
    };
    group_config::validate_all(&next, &|key| broker_defaults.get(key).cloned())?;
    let record = |key: &String, value: Option<String>| MetadataRecord::GroupConfig {
        group: group.to_string(),
        key: key.clone(),
        value,
    };
    Ok(config_changes(&current, &next, record))
}

/// The records that turn configs `current` into `next`: a removal (`None`) for each key gone,
/// a value for each key new or changed.
fn config_changes(
    current: &BTreeMap<String, String>,
    next: &BTreeMap<String, String>,
    record: impl Fn(&String, Option<String>) -> MetadataRecord,
) -> Vec<MetadataRecord> {
    let removed =
        current.keys().filter(|key| !next.contains_key(*key)).map(|key| record(key, None));
    let set = next
        .iter()
        .filter(|(key, value)| current.get(*key) != Some(value))
        .map(|(key, value)| record(key, Some(value.clone())));
    removed.chain(set).collect()
}

/// AlterConfigs / IncrementalAlterConfigs on the BROKER resource (`resource`: this node's id,
/// or "" for the cluster-wide default), checked as Kafka's broker checks them: only dynamic
/// configs (INVALID_REQUEST "Cannot update these configs dynamically" for a static one),
/// listener and security configs per broker only, values of topic-default synonyms valid for
/// their topic config (INVALID_REQUEST otherwise, as Kafka wraps them), APPEND and SUBTRACT on
/// list configs only (INVALID_CONFIG). Keys the broker does not know are accepted (Kafka's
/// custom properties). `is_static` says whether a key is one of the broker's static settings
/// (the configuration's keys, which `metadata` does not import).
pub fn alter_broker_configs(
    image: &MetadataImage,
    node: i32,
    resource: &str,
    edit: &ConfigEdit,
    is_static: &dyn Fn(&str) -> bool,
) -> Result<Vec<MetadataRecord>> {
    check_broker_resource(node, resource)?;
    let current = image.broker_configs.get(resource).cloned().unwrap_or_default();
    let next = match edit {
        ConfigEdit::Replace(replacement) => replacement.clone(),
        ConfigEdit::Incremental(operations) => {
            edit_broker_configs(&current, operations, is_static)?
        }
    };
    check_broker_changes(&current, &next, resource, is_static)?;
    let record = |key: &String, value: Option<String>| MetadataRecord::BrokerConfig {
        resource: resource.to_string(),
        key: key.clone(),
        value,
    };
    Ok(config_changes(&current, &next, record))
}

/// The BROKER resource is this node's id, or "" for the cluster-wide default.
fn check_broker_resource(node: i32, resource: &str) -> Result<()> {
    if !resource.is_empty() && resource != node.to_string() {
        return Err(match resource.parse::<i32>() {
            Ok(_) => BrokerError::InvalidRequest(format!(
                "Unexpected broker id, expected {node}, but received {resource}"
            )),
            Err(_) => BrokerError::InvalidRequest(format!(
                "Node id must be an integer, but it is: {resource}"
            )),
        });
    }
    Ok(())
}

/// A resource's broker configs after IncrementalAlterConfigs' operations, applied in order.
fn edit_broker_configs(
    current: &BTreeMap<String, String>,
    operations: &[(String, i8, Option<String>)],
    is_static: &dyn Fn(&str) -> bool,
) -> Result<BTreeMap<String, String>> {
    use super::broker_config::{dynamic, Dynamic};
    let mut next = current.clone();
    for (key, operation, value) in operations {
        let static_key = is_static(key);
        match (operation, value) {
            (0, Some(value)) => {
                next.insert(key.clone(), value.clone());
            }
            (1, _) => {
                next.remove(key);
            }
            (2 | 3, Some(items)) if key == "log.cleanup.policy" => {
                let base = next
                    .get(key)
                    .cloned()
                    .or_else(|| default_config("cleanup.policy").map(String::from))
                    .unwrap_or_default();
                next.insert(key.clone(), edit_list(&base, items, *operation == 2));
            }
            (2 | 3, Some(_)) if static_key || dynamic(key, false) != Dynamic::Custom => {
                let verb = if *operation == 2 { "append" } else { "subtract" };
                return Err(BrokerError::InvalidConfig(format!(
                    "Config value {verb} is not allowed for config key: {key}"
                )));
            }
            (0 | 2 | 3, None) => {
                return Err(BrokerError::InvalidRequest(format!(
                    "Null value not supported for : {key}"
                )))
            }
            (other, _) => {
                return Err(BrokerError::InvalidRequest(format!("Unknown operations type {other}")))
            }
        }
    }
    Ok(next)
}

/// Every broker config that changes may change at run time, on this resource (per broker or
/// cluster-wide), to a value valid for its topic config when it is a topic default.
fn check_broker_changes(
    current: &BTreeMap<String, String>,
    next: &BTreeMap<String, String>,
    resource: &str,
    is_static: &dyn Fn(&str) -> bool,
) -> Result<()> {
    use super::broker_config::{dynamic, Dynamic};
    for (key, value) in next {
        if current.get(key) == Some(value) {
            continue;
        }
        match dynamic(key, is_static(key)) {
            Dynamic::ReadOnly => {
                return Err(BrokerError::InvalidRequest(format!(
                    "Cannot update these configs dynamically: Set({key})"
                )))
            }
            Dynamic::PerBrokerOnly if resource.is_empty() => {
                return Err(BrokerError::InvalidRequest(format!(
                    "Cannot update these configs at default cluster level, broker id must be \
                     specified: Set({key})"
                )))
            }
            Dynamic::TopicDefault(topic_key) => {
                super::topic_config::validate_topic_config(topic_key, value)
                    .map_err(|error| BrokerError::InvalidRequest(error.to_string()))?;
            }
            Dynamic::Stored | Dynamic::PerBrokerOnly | Dynamic::Custom => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::apply_all;
    use wire::ids::NodeId;

    const POLICY: PlacementPolicy = PlacementPolicy { node: NodeId(0), shard_count: 2 };

    fn create(name: &str, partitions: i32) -> CreateTopic {
        CreateTopic {
            name: name.into(),
            partitions,
            configs: BTreeMap::new(),
            validate_only: false,
            ..Default::default()
        }
    }

    /// An image with brokers 1.. registered on the given racks.
    fn brokers_on_racks(racks: &[Option<&str>]) -> MetadataImage {
        let records: Vec<MetadataRecord> = racks
            .iter()
            .enumerate()
            .map(|(index, rack)| MetadataRecord::RegisterBroker {
                broker: BrokerRegistration {
                    node: NodeId(index as i32 + 1),
                    incarnation: [index as u8; 16],
                    directory_id: format!("dir-{index}"),
                    host: "127.0.0.1".into(),
                    port: 9000 + index as u16,
                    rack: rack.map(String::from),
                    shards: 2,
                    listeners: Vec::new(),
                },
            })
            .collect();
        apply_all(&MetadataImage::default(), &records).unwrap()
    }

    #[test]
    fn placement_spreads_leaders_evenly_and_replicas_over_racks() {
        let rack_of =
            |image: &MetadataImage, node: &NodeId| image.brokers[node].registration.rack.clone();
        let cases: [(&[Option<&str>], i32); 5] = [
            (&[Some("a"), Some("a"), Some("b"), Some("b"), Some("c"), Some("c")], 3),
            (&[Some("a"), Some("a"), Some("b"), Some("b"), Some("c"), Some("c")], 2),
            (&[Some("a"), Some("a"), Some("a"), Some("b")], 2),
            (&[Some("a"), None, Some("b"), None], 3),
            (&[None, None, None], 2),
        ];
        for (racks, factor) in cases {
            let image = brokers_on_racks(racks);
            let rack_count = racks.iter().collect::<std::collections::BTreeSet<_>>().len();
            let partitions = racks.len() as i32 * 4;
            let mut leads = BTreeMap::new();
            for partition in 0..partitions {
                let placement = place(POLICY, &image, "orders", partition, factor);
                assert_eq!(placement.replicas.len(), factor as usize, "{racks:?}");
                assert_eq!(placement.replicas[0], placement.leader);
                let distinct: std::collections::BTreeSet<_> = placement.replicas.iter().collect();
                assert_eq!(distinct.len(), factor as usize, "no broker twice: {placement:?}");
                let spanned: std::collections::BTreeSet<_> =
                    placement.replicas.iter().map(|node| rack_of(&image, node)).collect();
                assert_eq!(
                    spanned.len(),
                    (factor as usize).min(rack_count),
                    "{racks:?} RF={factor}: {placement:?} spans every rack it can"
                );
                *leads.entry(placement.leader).or_insert(0) += 1;
            }
            assert_eq!(leads.len(), racks.len(), "every broker leads: {leads:?}");
            assert!(leads.values().all(|count| *count == 4), "evenly: {leads:?}");
        }
    }

    #[test]
    fn broker_configs_follow_kafkas_dynamic_rules() {
        let image = MetadataImage::default();
        let set = |resource: &str, key: &str, value: &str| {
            let edit = ConfigEdit::Incremental(vec![(key.into(), 0, Some(value.into()))]);
            alter_broker_configs(&image, 0, resource, &edit, &|key| key == "log.dirs")
        };
        let records = set("0", "log.retention.ms", "1000").expect("dynamic");
        assert!(
            matches!(&records[..], [MetadataRecord::BrokerConfig { resource, key, value: Some(v) }]
            if resource == "0" && key == "log.retention.ms" && v == "1000")
        );
        assert!(set("", "num.io.threads", "8").is_ok(), "cluster-wide, stored");
        assert!(set("0", "my.custom", "x").is_ok(), "custom keys are accepted, as in Kafka");
        for (resource, key, value) in [
            ("0", "log.dirs", "/x"),
            ("", "ssl.keystore.location", "/k"),
            ("0", "log.retention.ms", "soon"),
            ("7", "log.retention.ms", "1"),
            ("x", "log.retention.ms", "1"),
        ] {
            assert!(
                matches!(set(resource, key, value), Err(BrokerError::InvalidRequest(_))),
                "{resource} {key}"
            );
        }
    }

    #[test]
    fn a_created_topic_has_its_partitions_placed_and_its_configs() {
        let mut request = create("orders", 3);
        request.configs.insert("retention.ms".into(), "1000".into());
        let records = create_topic(&MetadataImage::default(), &request, POLICY, [1; 16]).unwrap();
        let image = apply_all(&MetadataImage::default(), &records).unwrap();
        let topic = image.topic("orders").unwrap();
        assert_eq!(topic.partition_count(), 3);
        for (index, placement) in topic.partitions.iter().enumerate() {
            assert_eq!(*placement, POLICY.initial("orders", index as i32));
        }
        assert_eq!(topic.configs.len(), 1);
        assert!(matches!(
            create_topic(&image, &request, POLICY, [2; 16]),
            Err(BrokerError::TopicAlreadyExists(_))
        ));
        for bad in [create("bad/name", 1), create("x", 0), create("x", 10_001)] {
            assert!(create_topic(&image, &bad, POLICY, [2; 16]).is_err());
        }
    }

    #[test]
    fn partitions_only_grow_and_configs_edit_by_difference() {
        let records = create_topic(&MetadataImage::default(), &create("t", 2), POLICY, [1; 16]);
        let image = apply_all(&MetadataImage::default(), &records.unwrap()).unwrap();
        assert!(create_partitions(&image, "t", 2, POLICY, &[]).is_err());
        let grown =
            apply_all(&image, &create_partitions(&image, "t", 5, POLICY, &[]).unwrap()).unwrap();
        assert_eq!(grown.topic("t").unwrap().partition_count(), 5);
        let set = ConfigEdit::Incremental(vec![("retention.ms".into(), 0, Some("5".into()))]);
        let edited = apply_all(&grown, &alter_configs(&grown, "t", &set).unwrap()).unwrap();
        assert_eq!(edited.topic("t").unwrap().configs.get("retention.ms").unwrap(), "5");
        let unchanged = alter_configs(&edited, "t", &set).unwrap();
        assert!(unchanged.is_empty(), "setting the same value again changes nothing");
        let replace = ConfigEdit::Replace(BTreeMap::new());
        let cleared = apply_all(&edited, &alter_configs(&edited, "t", &replace).unwrap()).unwrap();
        assert!(cleared.topic("t").unwrap().configs.is_empty());
        let append = ConfigEdit::Incremental(vec![("retention.ms".into(), 2, Some("1".into()))]);
        assert!(alter_configs(&edited, "t", &append).is_err(), "APPEND on a scalar config");
        let append =
            ConfigEdit::Incremental(vec![("cleanup.policy".into(), 2, Some("compact".into()))]);
        let both = apply_all(&edited, &alter_configs(&edited, "t", &append).unwrap()).unwrap();
        assert_eq!(both.topic("t").unwrap().configs["cleanup.policy"], "delete,compact");
        let subtract =
            ConfigEdit::Incremental(vec![("cleanup.policy".into(), 3, Some("delete".into()))]);
        let compact = apply_all(&both, &alter_configs(&both, "t", &subtract).unwrap()).unwrap();
        assert_eq!(compact.topic("t").unwrap().configs["cleanup.policy"], "compact");
        assert!(delete_topic(&edited, "nope").is_err());
    }
}
