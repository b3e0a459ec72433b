//! `GET /api/groups` and `GET /api/groups/<id>`: groups from ListGroups at every broker (each
//! lists those it coordinates), described at their coordinator (DescribeGroups for classic
//! groups, ConsumerGroupDescribe for KIP-848 ones, ShareGroupDescribe for KIP-932 share
//! groups), their committed offsets (OffsetFetch; a share group's share-partition start
//! offsets, DescribeShareGroupOffsets) and the partitions' ends (ListOffsets at the leaders),
//! so lag = end - committed (for a share group, the records not yet acknowledged or archived,
//! in flight included). All as the user: a group it may not DESCRIBE is not listed.

use super::client::Caller;
use super::topics::{leaders, metadata, offsets_at, Key, LATEST};
use super::{ConsoleError, ConsoleResult};
use bytes::Bytes;
use futures_util::future::join_all;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerProtocolAssignment, DescribeGroupsRequest,
    DescribeShareGroupOffsetsRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest,
    OffsetFetchRequest, ShareGroupDescribeRequest,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use serde_json::{json, Value};
use shard::io::Storage;
use std::collections::{BTreeMap, HashMap};

/// Most groups listed.
pub const GROUPS_LISTED_MAX: usize = 10_000;
/// FindCoordinator's key type of a group.
const GROUP_KEY: i8 = 0;
/// ListGroups' type of a KIP-932 share group.
const SHARE: &str = "share";

/// A listed group: (id, type, state, protocol type, coordinator).
struct Listed {
    id: String,
    kind: String,
    state: String,
    coordinator: i32,
}

/// The groups every broker lists, and the brokers that did not answer.
async fn listed<S: Storage>(caller: &Caller<'_, S>) -> (Vec<Listed>, Vec<i32>) {
    let brokers: Vec<i32> = caller.node.brokers().iter().map(|b| b.node.0).collect();
    let asks = brokers.iter().map(|broker| async move {
        (*broker, caller.call(*broker, ListGroupsRequest::default()).await)
    });
    let (mut groups, mut unanswered) = (Vec::new(), Vec::new());
    for (broker, answer) in join_all(asks).await {
        let answer = match answer {
            Ok(answer) if answer.error_code == crate::error::NONE => answer,
            Ok(answer) => {
                tracing::debug!(broker, code = answer.error_code, "console: ListGroups refused");
                unanswered.push(broker);
                continue;
            }
            Err(error) => {
                tracing::debug!(broker, ?error, "console: no ListGroups answer");
                unanswered.push(broker);
                continue;
            }
        };
        for group in answer.groups {
            let kind = match &*group.group_type {
                "" => "classic".to_string(),
                other => other.to_string(),
            };
            groups.push(Listed {
                id: group.group_id.0.to_string(),
                kind,
                state: group.group_state.to_string(),
                coordinator: broker,
            });
        }
    }
    groups.sort_by(|a, b| a.id.cmp(&b.id));
    unanswered.sort_unstable();
    (groups, unanswered)
}

/// Committed offsets of `groups` at `coordinator`: group → (topic, partition) → (offset, metadata).
async fn committed<S: Storage>(
    caller: &Caller<'_, S>,
    coordinator: i32,
    groups: &[String],
) -> HashMap<String, BTreeMap<Key, (i64, String)>> {
    let mut request = OffsetFetchRequest::default();
    request.groups = groups
        .iter()
        .map(|id| {
            let mut group = OffsetFetchRequestGroup::default();
            group.group_id = GroupId(StrBytes::from_string(id.clone()));
            group.member_epoch = -1;
            // All the group's partitions.
            group.topics = None;
            group
        })
        .collect();
    let mut out = HashMap::new();
    let Ok(answer) = caller.call(coordinator, request).await else { return out };
    for group in answer.groups.into_iter().filter(|g| g.error_code == crate::error::NONE) {
        let offsets: &mut BTreeMap<Key, (i64, String)> =
            out.entry(group.group_id.0.to_string()).or_default();
        for topic in group.topics {
            for partition in topic.partitions {
                if partition.error_code == crate::error::NONE && partition.committed_offset >= 0 {
                    let metadata = partition.metadata.map(|m| m.to_string()).unwrap_or_default();
                    offsets.insert(
                        (topic.name.0.to_string(), partition.partition_index),
                        (partition.committed_offset, metadata),
                    );
                }
            }
        }
    }
    out
}

/// Share-partition start offsets of share `groups` at `coordinator`, on every partition each
/// has state on: group → (topic, partition) → (start offset, ""), as `committed` answers.
async fn share_starts<S: Storage>(
    caller: &Caller<'_, S>,
    coordinator: i32,
    groups: &[String],
) -> HashMap<String, BTreeMap<Key, (i64, String)>> {
    let mut out = HashMap::new();
    if groups.is_empty() {
        return out;
    }
    let mut request = DescribeShareGroupOffsetsRequest::default();
    request.groups = groups
        .iter()
        .map(|id| {
            let mut group = DescribeShareGroupOffsetsRequestGroup::default();
            group.group_id = GroupId(StrBytes::from_string(id.clone()));
            // Every partition the group has state on.
            group.topics = None;
            group
        })
        .collect();
    let Ok(answer) = caller.call(coordinator, request).await else { return out };
    for group in answer.groups.into_iter().filter(|g| g.error_code == crate::error::NONE) {
        let starts: &mut BTreeMap<Key, (i64, String)> =
            out.entry(group.group_id.0.to_string()).or_default();
        for topic in group.topics {
            for partition in topic.partitions {
                if partition.error_code == crate::error::NONE && partition.start_offset >= 0 {
                    let key = (topic.topic_name.0.to_string(), partition.partition_index);
                    starts.insert(key, (partition.start_offset, String::new()));
                }
            }
        }
    }
    out
}

/// The log end of every partition of `topics`.
async fn ends<S: Storage>(caller: &Caller<'_, S>, topics: Vec<String>) -> HashMap<Key, i64> {
    if topics.is_empty() {
        return HashMap::new();
    }
    let Ok(metadata) = metadata(caller, Some(&topics)).await else { return HashMap::new() };
    offsets_at(caller, &leaders(&metadata), LATEST).await
}

/// Members of each group at one coordinator: id → (members, protocol).
async fn members<S: Storage>(
    caller: &Caller<'_, S>,
    coordinator: i32,
    groups: &[&Listed],
) -> HashMap<String, (usize, Option<String>)> {
    let (consumer, others): (Vec<&&Listed>, Vec<&&Listed>) =
        groups.iter().partition(|group| group.kind == "consumer");
    let (share, classic): (Vec<&&Listed>, Vec<&&Listed>) =
        others.into_iter().partition(|group| group.kind == SHARE);
    let ids = |groups: &[&&Listed]| -> Vec<GroupId> {
        groups.iter().map(|g| GroupId(StrBytes::from_string(g.id.clone()))).collect()
    };
    let mut out = HashMap::new();
    if !classic.is_empty() {
        let mut request = DescribeGroupsRequest::default();
        request.groups = ids(&classic);
        if let Ok(answer) = caller.call(coordinator, request).await {
            for group in answer.groups {
                let protocol = Some(group.protocol_data.to_string()).filter(|p| !p.is_empty());
                out.insert(group.group_id.0.to_string(), (group.members.len(), protocol));
            }
        }
    }
    if !consumer.is_empty() {
        let mut request = ConsumerGroupDescribeRequest::default();
        request.group_ids = ids(&consumer);
        if let Ok(answer) = caller.call(coordinator, request).await {
            for group in answer.groups {
                let assignor = Some(group.assignor_name.to_string()).filter(|p| !p.is_empty());
                out.insert(group.group_id.0.to_string(), (group.members.len(), assignor));
            }
        }
    }
    if !share.is_empty() {
        let mut request = ShareGroupDescribeRequest::default();
        request.group_ids = ids(&share);
        if let Ok(answer) = caller.call(coordinator, request).await {
            for group in answer.groups.into_iter().filter(|g| g.error_code == crate::error::NONE) {
                let assignor = Some(group.assignor_name.to_string()).filter(|p| !p.is_empty());
                out.insert(group.group_id.0.to_string(), (group.members.len(), assignor));
            }
        }
    }
    out
}

/// Σ(end - committed) over a group's committed partitions; `None` without commits.
fn total_lag(
    offsets: Option<&BTreeMap<Key, (i64, String)>>,
    ends: &HashMap<Key, i64>,
) -> Option<i64> {
    let offsets = offsets.filter(|offsets| !offsets.is_empty())?;
    Some(
        offsets
            .iter()
            .map(|(key, (committed, _))| {
                (ends.get(key).copied().unwrap_or(*committed) - committed).max(0)
            })
            .sum(),
    )
}

/// `GET /api/groups`.
pub async fn list<S: Storage>(caller: &Caller<'_, S>) -> ConsoleResult {
    let (mut groups, unanswered) = listed(caller).await;
    let truncated = groups.len() > GROUPS_LISTED_MAX;
    groups.truncate(GROUPS_LISTED_MAX);
    let mut by_coordinator: BTreeMap<i32, Vec<&Listed>> = BTreeMap::new();
    for group in &groups {
        by_coordinator.entry(group.coordinator).or_default().push(group);
    }
    let asks = by_coordinator.iter().map(|(coordinator, groups)| async move {
        let (share, others): (Vec<&&Listed>, Vec<&&Listed>) =
            groups.iter().partition(|g| g.kind == SHARE);
        let ids = |groups: &[&&Listed]| groups.iter().map(|g| g.id.clone()).collect::<Vec<_>>();
        let (share, others) = (ids(&share), ids(&others));
        let offsets = futures_lite::future::zip(
            committed(caller, *coordinator, &others),
            share_starts(caller, *coordinator, &share),
        );
        futures_lite::future::zip(offsets, members(caller, *coordinator, groups)).await
    });
    let (mut offsets, mut described) = (HashMap::new(), HashMap::new());
    for ((committed, starts), members) in join_all(asks).await {
        offsets.extend(committed);
        offsets.extend(starts);
        described.extend(members);
    }
    let mut topics: Vec<String> =
        offsets.values().flat_map(|o| o.keys().map(|(t, _)| t.clone())).collect();
    topics.sort();
    topics.dedup();
    let ends = ends(caller, topics).await;
    let rows: Vec<Value> = groups
        .iter()
        .map(|group| {
            let (members, protocol) = described.get(&group.id).cloned().unwrap_or((0, None));
            json!({
                "group_id": group.id,
                "type": group.kind,
                "state": group.state,
                "protocol": protocol,
                "members": members,
                "coordinator": group.coordinator,
                "lag": total_lag(offsets.get(&group.id), &ends),
            })
        })
        .collect();
    Ok(json!({ "groups": rows, "truncated": truncated, "unanswered": unanswered }))
}

/// The coordinator of group `id` (FindCoordinator here).
async fn coordinator<S: Storage>(caller: &Caller<'_, S>, id: &str) -> Result<i32, ConsoleError> {
    let mut request = FindCoordinatorRequest::default();
    request.key_type = GROUP_KEY;
    request.coordinator_keys = vec![StrBytes::from_string(id.to_string())];
    let answer = caller.here(request).await?;
    let found = answer
        .coordinators
        .first()
        .ok_or_else(|| ConsoleError::Unavailable("FindCoordinator answered nothing".into()))?;
    ConsoleError::check(found.error_code, || format!("the coordinator of group {id}"))?;
    Ok(found.node_id.0)
}

/// A classic member's assigned partitions, from its ConsumerProtocolAssignment.
fn assignment_of(bytes: &Bytes) -> Vec<Value> {
    let mut buf = bytes.clone();
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let version = bytes::Buf::try_get_i16(&mut buf).ok()?;
        ConsumerProtocolAssignment::decode(&mut buf, version).ok()
    }))
    .ok()
    .flatten();
    let mut partitions: Vec<(String, i32)> = decoded
        .map(|assignment| {
            assignment
                .assigned_partitions
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
                .collect()
        })
        .unwrap_or_default();
    partitions.sort();
    partitions
        .iter()
        .map(|(topic, partition)| json!({"topic": topic, "partition": partition}))
        .collect()
}

/// A share group's description at its coordinator, if `id` is one.
async fn share_description<S: Storage>(
    caller: &Caller<'_, S>,
    coordinator: i32,
    id: &str,
) -> Result<Option<Value>, ConsoleError> {
    let mut request = ShareGroupDescribeRequest::default();
    request.group_ids = vec![GroupId(StrBytes::from_string(id.to_string()))];
    let answer = caller.call(coordinator, request).await?;
    let Some(group) = answer.groups.first().filter(|g| g.error_code == crate::error::NONE) else {
        return Ok(None);
    };
    let members: Vec<Value> = group
        .members
        .iter()
        .map(|member| {
            let mut assignment: Vec<(String, i32)> = member
                .assignment
                .topic_partitions
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (t.topic_name.0.to_string(), *p)))
                .collect();
            assignment.sort();
            let assignment: Vec<Value> =
                assignment.iter().map(|(t, p)| json!({"topic": t, "partition": p})).collect();
            json!({
                "member_id": member.member_id.to_string(),
                "client_id": member.client_id.to_string(),
                "host": member.client_host.to_string(),
                "instance_id": Value::Null,
                "member_epoch": member.member_epoch,
                "assignment": assignment,
            })
        })
        .collect();
    Ok(Some(json!({
        "type": SHARE, "state": group.group_state.to_string(), "protocol_type": SHARE,
        "protocol": group.assignor_name.to_string(), "epoch": group.group_epoch,
        "members": members,
    })))
}

/// The group's description at its coordinator: KIP-848 first, then share, then classic.
async fn description<S: Storage>(
    caller: &Caller<'_, S>,
    coordinator: i32,
    id: &str,
) -> ConsoleResult {
    let group_id = GroupId(StrBytes::from_string(id.to_string()));
    let mut request = ConsumerGroupDescribeRequest::default();
    request.group_ids = vec![group_id.clone()];
    let answer = caller.call(coordinator, request).await?;
    if let Some(group) = answer.groups.first().filter(|g| g.error_code == crate::error::NONE) {
        let members: Vec<Value> = group.members.iter().map(|member| {
            let mut assignment: Vec<(String, i32)> = member.assignment.topic_partitions.iter()
                .flat_map(|t| t.partitions.iter().map(|p| (t.topic_name.0.to_string(), *p))).collect();
            assignment.sort();
            json!({
                "member_id": member.member_id.to_string(),
                "client_id": member.client_id.to_string(),
                "host": member.client_host.to_string(),
                "instance_id": member.instance_id.as_ref().map(ToString::to_string),
                "member_epoch": member.member_epoch,
                "assignment": assignment.iter().map(|(t, p)| json!({"topic": t, "partition": p})).collect::<Vec<_>>(),
            })
        }).collect();
        return Ok(json!({
            "type": "consumer", "state": group.group_state.to_string(), "protocol_type": "consumer",
            "protocol": group.assignor_name.to_string(), "epoch": group.group_epoch, "members": members,
        }));
    }
    if let Some(share) = share_description(caller, coordinator, id).await? {
        return Ok(share);
    }
    let mut request = DescribeGroupsRequest::default();
    request.groups = vec![group_id];
    let answer = caller.call(coordinator, request).await?;
    let group = answer
        .groups
        .into_iter()
        .next()
        .ok_or_else(|| ConsoleError::NotFound(format!("group {id}")))?;
    ConsoleError::check(group.error_code, || format!("group {id}"))?;
    let members: Vec<Value> = group
        .members
        .iter()
        .map(|member| {
            json!({
                "member_id": member.member_id.to_string(),
                "client_id": member.client_id.to_string(),
                "host": member.client_host.to_string(),
                "instance_id": member.group_instance_id.as_ref().map(ToString::to_string),
                "assignment": assignment_of(&member.member_assignment),
            })
        })
        .collect();
    Ok(json!({
        "type": "classic", "state": group.group_state.to_string(),
        "protocol_type": group.protocol_type.to_string(), "protocol": group.protocol_data.to_string(),
        "epoch": Value::Null, "members": members,
    }))
}

/// `GET /api/groups/<id>`.
pub async fn describe<S: Storage>(caller: &Caller<'_, S>, id: &str) -> ConsoleResult {
    let coordinator = coordinator(caller, id).await?;
    let mut group = description(caller, coordinator, id).await?;
    if group["state"] == "Dead" {
        return Err(ConsoleError::NotFound(format!("group {id}")));
    }
    let ids = [id.to_string()];
    let mut committed = if group["type"] == SHARE {
        share_starts(caller, coordinator, &ids).await
    } else {
        committed(caller, coordinator, &ids).await
    };
    let committed = committed.remove(id).unwrap_or_default();
    let mut topics: Vec<String> = committed.keys().map(|(t, _)| t.clone()).collect();
    topics.dedup();
    let ends = ends(caller, topics).await;
    let offsets: Vec<Value> = committed
        .iter()
        .map(|((topic, partition), (offset, metadata))| {
            let end = ends.get(&(topic.clone(), *partition)).copied();
            json!({
                "topic": topic, "partition": partition, "committed": offset, "end": end,
                "lag": end.map(|end| (end - offset).max(0)), "metadata": metadata,
            })
        })
        .collect();
    group["group_id"] = json!(id);
    group["coordinator"] = json!(coordinator);
    group["offsets"] = json!(offsets);
    Ok(group)
}
