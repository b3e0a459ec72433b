//! `strata group list|describe|delete|reset-offsets|delete-offsets`.

use super::{check, Client};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

/// Decodes a consumer-protocol assignment (version, [topic, [partition]], user data).
fn assigned_partitions(bytes: &[u8]) -> Vec<(String, i32)> {
    fn take<'a>(input: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (input.get(..n)?, input.get(n..)?);
        *input = tail;
        Some(head)
    }
    fn i16_(input: &mut &[u8]) -> Option<i16> {
        Some(i16::from_be_bytes(take(input, 2)?.try_into().ok()?))
    }
    fn i32_(input: &mut &[u8]) -> Option<i32> {
        Some(i32::from_be_bytes(take(input, 4)?.try_into().ok()?))
    }
    let mut out = Vec::new();
    let mut input = bytes;
    let parse = |input: &mut &[u8], out: &mut Vec<(String, i32)>| -> Option<()> {
        i16_(input)?;
        for _ in 0..i32_(input)?.max(0) {
            let len = i16_(input)?.max(0) as usize;
            let topic = String::from_utf8(take(input, len)?.to_vec()).ok()?;
            for _ in 0..i32_(input)?.max(0) {
                out.push((topic.clone(), i32_(input)?));
            }
        }
        Some(())
    };
    let _ = parse(&mut input, &mut out);
    out
}

fn group_id(value: &str) -> GroupId {
    GroupId(StrBytes::from_string(value.to_string()))
}

/// How long the CLI waits for a group's coordinator to become available.
const COORDINATOR_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// A connection to the broker coordinating `group` (FindCoordinator through `bootstrap`; in a
/// cluster only it answers for the group), retrying while none is available yet.
pub(super) fn coordinator(bootstrap: &str, group: &str) -> Result<Client, String> {
    let mut client = Client::connect(bootstrap)?;
    let deadline = std::time::Instant::now() + COORDINATOR_WAIT;
    loop {
        let mut request = FindCoordinatorRequest::default();
        request.key = StrBytes::from_string(group.to_string());
        request.key_type = 0;
        let response =
            match client.call(ApiKey::FindCoordinator, 3, RequestKind::FindCoordinator(request))? {
                ResponseKind::FindCoordinator(response) => response,
                _ => return Err("unexpected response".into()),
            };
        let retriable =
            super::is_error(response.error_code, ResponseError::CoordinatorNotAvailable);
        if retriable && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(200));
            continue;
        }
        check(response.error_code, response.error_message.as_ref(), "finding the coordinator")?;
        return Client::connect(&format!("{}:{}", response.host.as_str(), response.port));
    }
}

/// COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE: the group's coordinator is
/// moving or loading; asked again.
fn coordinator_loading(code: i16) -> bool {
    super::is_error(code, ResponseError::CoordinatorLoadInProgress)
        || super::is_error(code, ResponseError::CoordinatorNotAvailable)
}

/// Every group on every broker (each broker lists the groups it coordinates).
pub fn list(bootstrap: &str, json_output: bool) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let mut request = MetadataRequest::default();
    request.topics = Some(Vec::new());
    let brokers: Vec<String> =
        match client.call(ApiKey::Metadata, 12, RequestKind::Metadata(request))? {
            ResponseKind::Metadata(response) => response
                .brokers
                .iter()
                .map(|broker| format!("{}:{}", broker.host.as_str(), broker.port))
                .collect(),
            _ => return Err("unexpected response".into()),
        };
    // group -> (state, type: classic or consumer).
    let mut groups: BTreeMap<String, (String, String)> = BTreeMap::new();
    for broker in brokers {
        let mut client = Client::connect(&broker)?;
        match client.call(
            ApiKey::ListGroups,
            5,
            RequestKind::ListGroups(ListGroupsRequest::default()),
        )? {
            ResponseKind::ListGroups(response) => {
                check(response.error_code, None, &format!("listing groups on {broker}"))?;
                for group in response.groups {
                    let state = group.group_state.as_str().to_string();
                    let kind = group.group_type.as_str().to_string();
                    groups.insert(group.group_id.0.to_string(), (state, kind));
                }
            }
            _ => return Err("unexpected response".into()),
        }
    }
    if json_output {
        let rows: Vec<serde_json::Value> = groups
            .iter()
            .map(|(group, (state, kind))| {
                serde_json::json!({"group": group, "state": state, "type": kind})
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    println!("{:<40} {:<20} {:<10}", "GROUP", "STATE", "TYPE");
    for (group, (state, kind)) in groups {
        println!("{group:<40} {state:<20} {kind:<10}");
    }
    Ok(())
}

/// Commits `targets` ((partition, offset) of `topic`) for `group` as a consumer outside it
/// (generation -1, as Kafka's tools and `assign()` consumers do); refused by the coordinator
/// while the group has members.
pub(super) fn commit(
    client: &mut Client,
    group: &str,
    topic: &str,
    targets: &[(i32, i64)],
    what: &str,
) -> Result<(), String> {
    let mut commit_topic = offset_commit_request::OffsetCommitRequestTopic::default();
    commit_topic.name = TopicName(StrBytes::from_string(topic.to_string()));
    commit_topic.partitions = targets
        .iter()
        .map(|(partition, offset)| {
            let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
            p.partition_index = *partition;
            p.committed_offset = *offset;
            p.committed_metadata = Some(StrBytes::from_static_str(""));
            p
        })
        .collect();
    let mut request = OffsetCommitRequest::default();
    request.group_id = group_id(group);
    request.generation_id_or_member_epoch = -1;
    request.topics = vec![commit_topic];
    match client.call(ApiKey::OffsetCommit, 8, RequestKind::OffsetCommit(request))? {
        ResponseKind::OffsetCommit(response) => {
            for p in response.topics.into_iter().flat_map(|t| t.partitions) {
                check(p.error_code, None, &format!("{what} partition {}", p.partition_index))?;
            }
            Ok(())
        }
        _ => Err("unexpected response".into()),
    }
}

/// Committed offsets of a group: (topic, partition) → offset.
pub(super) fn committed(
    client: &mut Client,
    group: &str,
) -> Result<BTreeMap<(String, i32), i64>, String> {
    let mut request = OffsetFetchRequest::default();
    request.group_id = group_id(group);
    request.topics = None;
    match client.call(ApiKey::OffsetFetch, 7, RequestKind::OffsetFetch(request))? {
        ResponseKind::OffsetFetch(response) => {
            check(response.error_code, None, "fetching offsets")?;
            Ok(response
                .topics
                .into_iter()
                .flat_map(|t| {
                    let name = t.name.0.to_string();
                    t.partitions
                        .into_iter()
                        .map(move |p| ((name.clone(), p.partition_index), p.committed_offset))
                })
                .collect())
        }
        _ => Err("unexpected response".into()),
    }
}

/// A member as `describe` shows it: member id, client id, assigned partitions.
pub(super) type MemberView = (String, String, Vec<(String, i32)>);

/// (state, members).
pub(super) fn describe_group(
    client: &mut Client,
    group: &str,
) -> Result<(String, Vec<MemberView>), String> {
    let deadline = std::time::Instant::now() + COORDINATOR_WAIT;
    let described = loop {
        let mut request = DescribeGroupsRequest::default();
        request.groups = vec![group_id(group)];
        let response =
            match client.call(ApiKey::DescribeGroups, 5, RequestKind::DescribeGroups(request))? {
                ResponseKind::DescribeGroups(response) => response,
                _ => return Err("unexpected response".into()),
            };
        let described = response.groups.into_iter().next().ok_or("no group in the answer")?;
        // The coordinator is still loading its `__consumer_offsets` partition (a new
        // leader, a fresh cluster): asked again, as clients do.
        let loading = coordinator_loading(described.error_code);
        if loading && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(200));
            continue;
        }
        break described;
    };
    check(described.error_code, None, "describing the group")?;
    let members = described
        .members
        .into_iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.client_id.to_string(),
                assigned_partitions(&m.member_assignment),
            )
        })
        .collect();
    Ok((described.group_state.to_string(), members))
}

/// A KIP-848 consumer group as ConsumerGroupDescribe shows it: (group epoch, assignment
/// epoch, assignor) and per member (id, member epoch, current and target assignment).
pub(super) struct ConsumerView {
    pub state: String,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<ConsumerMemberView>,
}

pub(super) struct ConsumerMemberView {
    pub member_id: String,
    pub client_id: String,
    pub instance_id: Option<String>,
    pub epoch: i32,
    pub assigned: Vec<(String, i32)>,
    pub target: Vec<(String, i32)>,
}

fn partitions_of(
    assignment: &kafka_protocol::messages::consumer_group_describe_response::Assignment,
) -> Vec<(String, i32)> {
    let mut out: Vec<(String, i32)> = assignment
        .topic_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_name.0.to_string(), *p)))
        .collect();
    out.sort();
    out
}

/// The group as a KIP-932 share group; `None` when it is not one (GROUP_ID_NOT_FOUND) or the
/// broker does not serve ShareGroupDescribe.
fn describe_share_group(
    client: &mut Client,
    group: &str,
) -> Result<Option<share_group_describe_response::DescribedGroup>, String> {
    let mut request = ShareGroupDescribeRequest::default();
    request.group_ids = vec![group_id(group)];
    let kind = RequestKind::ShareGroupDescribe(request);
    let response = match client.call(ApiKey::ShareGroupDescribe, 1, kind) {
        Ok(ResponseKind::ShareGroupDescribe(response)) => response,
        Ok(_) => return Err("unexpected response".into()),
        Err(_) => return Ok(None),
    };
    let Some(described) = response.groups.into_iter().next() else { return Ok(None) };
    if super::is_error(described.error_code, ResponseError::GroupIdNotFound) {
        return Ok(None);
    }
    check(described.error_code, described.error_message.as_ref(), "describing the group")?;
    Ok(Some(described))
}

/// The group as a KIP-848 consumer group; `None` when it is not one (GROUP_ID_NOT_FOUND) or
/// the broker does not serve ConsumerGroupDescribe.
pub(super) fn describe_consumer_group(
    client: &mut Client,
    group: &str,
) -> Result<Option<ConsumerView>, String> {
    let mut request = ConsumerGroupDescribeRequest::default();
    request.group_ids = vec![group_id(group)];
    let kind = RequestKind::ConsumerGroupDescribe(request);
    let response = match client.call(ApiKey::ConsumerGroupDescribe, 1, kind) {
        Ok(ResponseKind::ConsumerGroupDescribe(response)) => response,
        Ok(_) => return Err("unexpected response".into()),
        Err(_) => return Ok(None),
    };
    let Some(described) = response.groups.into_iter().next() else { return Ok(None) };
    if super::is_error(described.error_code, ResponseError::GroupIdNotFound) {
        return Ok(None);
    }
    check(described.error_code, described.error_message.as_ref(), "describing the group")?;
    let members = described
        .members
        .iter()
        .map(|m| ConsumerMemberView {
            member_id: m.member_id.to_string(),
            client_id: m.client_id.to_string(),
            instance_id: m.instance_id.as_ref().map(|i| i.to_string()),
            epoch: m.member_epoch,
            assigned: partitions_of(&m.assignment),
            target: partitions_of(&m.target_assignment),
        })
        .collect();
    Ok(Some(ConsumerView {
        state: described.group_state.to_string(),
        epoch: described.group_epoch,
        assignment_epoch: described.assignment_epoch,
        assignor: described.assignor_name.to_string(),
        members,
    }))
}

fn shown_partitions(partitions: &[(String, i32)]) -> String {
    let shown: Vec<String> = partitions.iter().map(|(t, p)| format!("{t}-{p}")).collect();
    if shown.is_empty() {
        "-".to_string()
    } else {
        shown.join(",")
    }
}

fn print_consumer_view(group: &str, view: &ConsumerView) {
    println!(
        "group {group}  protocol consumer  state {}  group-epoch {}  assignment-epoch {}  assignor {}  members {}",
        view.state, view.epoch, view.assignment_epoch, view.assignor, view.members.len()
    );
    println!("{:<40} {:>6}  {:<30} {:<30}", "MEMBER", "EPOCH", "ASSIGNED", "TARGET");
    for member in &view.members {
        let name = match &member.instance_id {
            Some(instance) => format!("{} ({}, {instance})", member.member_id, member.client_id),
            None => format!("{} ({})", member.member_id, member.client_id),
        };
        println!(
            "{name:<40} {:>6}  {:<30} {:<30}",
            member.epoch,
            shown_partitions(&member.assigned),
            shown_partitions(&member.target)
        );
    }
    println!();
}

fn consumer_view_json(view: &ConsumerView) -> serde_json::Value {
    let list = |partitions: &[(String, i32)]| -> Vec<serde_json::Value> {
        partitions.iter().map(|(t, p)| serde_json::json!({"topic": t, "partition": p})).collect()
    };
    let members: Vec<serde_json::Value> = view
        .members
        .iter()
        .map(|m| {
            serde_json::json!({"member_id": m.member_id, "client_id": m.client_id,
                               "instance_id": m.instance_id, "member_epoch": m.epoch,
                               "assignment": list(&m.assigned),
                               "target_assignment": list(&m.target)})
        })
        .collect();
    serde_json::json!({"protocol": "consumer", "state": view.state, "group_epoch": view.epoch,
                       "assignment_epoch": view.assignment_epoch, "assignor": view.assignor,
                       "members": members})
}

pub fn describe(bootstrap: &str, group: &str, json_output: bool) -> Result<(), String> {
    let mut client = coordinator(bootstrap, group)?;
    if let Some(share) = describe_share_group(&mut client, group)? {
        return super::share_group::describe(&mut client, group, share, json_output);
    }
    let consumer = describe_consumer_group(&mut client, group)?;
    let (state, members) = match &consumer {
        Some(view) => {
            let members = view
                .members
                .iter()
                .map(|m| (m.member_id.clone(), m.client_id.clone(), m.assigned.clone()))
                .collect();
            (view.state.clone(), members)
        }
        None => describe_group(&mut client, group)?,
    };
    let committed = committed(&mut client, group)?;
    let mut owner: BTreeMap<(String, i32), String> = BTreeMap::new();
    for (member, client_id, partitions) in &members {
        for partition in partitions {
            owner.insert(partition.clone(), format!("{member} ({client_id})"));
        }
    }
    let mut rows: BTreeMap<(String, i32), Option<i64>> =
        committed.iter().map(|(k, v)| (k.clone(), Some(*v))).collect();
    for key in owner.keys() {
        rows.entry(key.clone()).or_insert(None);
    }
    let mut ends: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for topic in rows.keys().map(|(t, _)| t.clone()).collect::<std::collections::BTreeSet<_>>() {
        let partitions =
            rows.keys().filter(|(t, _)| *t == topic).map(|(_, p)| *p).max().unwrap_or(0) + 1;
        ends.insert(topic.clone(), super::topic::offsets(&mut client, &topic, partitions)?);
    }
    let mut table: Vec<OffsetRow> = Vec::new();
    for ((topic, partition), current) in rows {
        let end = ends
            .get(&topic)
            .and_then(|e| e.get(partition as usize))
            .map(|(_, end)| *end)
            .unwrap_or(-1);
        let current = current.filter(|offset| *offset >= 0);
        let lag = current.map(|offset| (end - offset).max(0));
        let consumer = owner.get(&(topic.clone(), partition)).cloned();
        table.push((topic, partition, current, end, lag, consumer));
    }
    if json_output {
        print_json(group, &state, &members, &table, consumer.as_ref());
        return Ok(());
    }
    match &consumer {
        Some(view) => print_consumer_view(group, view),
        None => {
            println!("group {group}  protocol classic  state {state}  members {}", members.len())
        }
    }
    println!(
        "{:<30} {:>9} {:>14} {:>14} {:>8}  CONSUMER",
        "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"
    );
    let shown = |value: Option<i64>| value.map_or_else(|| "-".to_string(), |v| v.to_string());
    for (topic, partition, current, end, lag, consumer) in table {
        let consumer = consumer.unwrap_or_else(|| "-".into());
        println!(
            "{topic:<30} {partition:>9} {:>14} {end:>14} {:>8}  {consumer}",
            shown(current),
            shown(lag)
        );
    }
    Ok(())
}

/// (topic, partition, committed offset, log end, lag, consumer) of `describe`.
type OffsetRow = (String, i32, Option<i64>, i64, Option<i64>, Option<String>);

/// `describe --format json`.
fn print_json(
    group: &str,
    state: &str,
    members: &[MemberView],
    table: &[OffsetRow],
    consumer: Option<&ConsumerView>,
) {
    let offsets: Vec<serde_json::Value> = table
        .iter()
        .map(|(topic, partition, current, end, lag, consumer)| {
            serde_json::json!({"topic": topic, "partition": partition,
                               "committed_offset": current, "log_end_offset": end,
                               "lag": lag, "consumer": consumer})
        })
        .collect();
    let members: Vec<serde_json::Value> = members
        .iter()
        .map(|(member, client_id, partitions)| {
            let assigned: Vec<serde_json::Value> = partitions
                .iter()
                .map(|(t, p)| serde_json::json!({"topic": t, "partition": p}))
                .collect();
            serde_json::json!({"member_id": member, "client_id": client_id,
                               "assignment": assigned})
        })
        .collect();
    let mut described = serde_json::json!({"group": group, "state": state,
                                       "protocol": "classic",
                                       "members": members, "offsets": offsets});
    if let Some(view) = consumer {
        described["protocol"] = serde_json::json!("consumer");
        described["consumer_group"] = consumer_view_json(view);
    }
    println!("{described}");
}

/// Where `reset-offsets` moves a group.
pub enum ResetTo {
    Earliest,
    Latest,
    Offset(i64),
    Timestamp(i64),
}

/// Whether `group` is a share group, and its members; `share` says so for one its
/// coordinator does not know now (share membership is in memory: after the coordinator moved,
/// until a member comes back).
fn share_members(client: &mut Client, group: &str, share: bool) -> Result<Option<usize>, String> {
    match describe_share_group(client, group)? {
        Some(described) => Ok(Some(described.members.len())),
        None if share => Ok(Some(0)),
        None => Ok(None),
    }
}

/// Moves `group`'s committed offsets of `topic` while it has no members; an unknown group
/// (DescribeGroups answers "Dead": no members, no offsets) only with `create_group`. For a
/// share group (`share`: one its coordinator does not know now) it moves the share-partition
/// start offsets instead (AlterShareGroupOffsets).
pub fn reset_offsets(
    bootstrap: &str,
    group: &str,
    topic: &str,
    to: ResetTo,
    create_group: bool,
    share: bool,
) -> Result<(), String> {
    let mut client = coordinator(bootstrap, group)?;
    let share_group = share_members(&mut client, group, share)?;
    if let Some(members) = share_group.filter(|members| *members > 0) {
        return Err(format!(
            "share group {group} has {members} members: stop them before resetting offsets"
        ));
    }
    if share_group.is_none() {
        let (state, members) = describe_group(&mut client, group)?;
        if state == "Dead" && !create_group {
            return Err(format!(
                "group {group} does not exist (give --create-group to create it with these \
                 offsets, or --share for a share group)"
            ));
        }
        if !members.is_empty() {
            return Err(format!(
                "group {group} is {state} with {} members: stop them before resetting offsets",
                members.len()
            ));
        }
    }
    let mut request = MetadataRequest::default();
    let mut entry = metadata_request::MetadataRequestTopic::default();
    entry.name = Some(TopicName(StrBytes::from_string(topic.to_string())));
    request.topics = Some(vec![entry]);
    request.allow_auto_topic_creation = false;
    let partitions = match client.call(ApiKey::Metadata, 9, RequestKind::Metadata(request))? {
        ResponseKind::Metadata(response) => {
            let meta = response.topics.into_iter().next().ok_or("no topic in the answer")?;
            check(meta.error_code, None, &format!("topic {topic}"))?;
            meta.partitions.len() as i32
        }
        _ => return Err("unexpected response".into()),
    };
    let bounds = super::topic::offsets(&mut client, topic, partitions)?;
    let at_time = match to {
        ResetTo::Timestamp(timestamp) => {
            super::topic::offsets_at(&mut client, topic, partitions, timestamp)?
        }
        _ => Vec::new(),
    };
    let mut targets = Vec::new();
    for (partition, (start, end)) in bounds.iter().enumerate() {
        let offset = match to {
            ResetTo::Earliest => *start,
            ResetTo::Latest => *end,
            ResetTo::Offset(offset) => offset.clamp(*start, *end),
            // No record at or after the time: the end, as Kafka's tool does.
            ResetTo::Timestamp(_) => match at_time.get(partition) {
                Some(offset) if *offset >= 0 => *offset,
                _ => *end,
            },
        };
        targets.push((partition as i32, offset));
    }
    if share_group.is_some() {
        super::share_group::alter_start_offsets(&mut client, group, topic, &targets)?;
    } else {
        commit(&mut client, group, topic, &targets, "resetting")?;
    }
    for (partition, offset) in targets {
        println!("{topic} {partition} -> {offset}");
    }
    Ok(())
}

/// Deletes `group`'s offsets on `topic` while it has no members: a share group's state
/// (DeleteShareGroupOffsets; `share`: one its coordinator does not know now), else the
/// committed offsets of every partition (OffsetDelete).
pub fn delete_offsets(
    bootstrap: &str,
    group: &str,
    topic: &str,
    share: bool,
) -> Result<(), String> {
    let mut client = coordinator(bootstrap, group)?;
    match share_members(&mut client, group, share)? {
        Some(0) => {
            super::share_group::delete_start_offsets(&mut client, group, topic)?;
            println!("deleted share group {group}'s offsets on {topic}");
            return Ok(());
        }
        Some(members) => {
            return Err(format!(
                "share group {group} has {members} members: stop them before deleting offsets"
            ))
        }
        None => {}
    }
    let partitions = super::topic::partition_count(&mut client, topic)?;
    if partitions == 0 {
        return Err(format!("topic {topic} does not exist"));
    }
    let mut entry = offset_delete_request::OffsetDeleteRequestTopic::default();
    entry.name = TopicName(StrBytes::from_string(topic.to_string()));
    entry.partitions = (0..partitions)
        .map(|index| {
            let mut partition = offset_delete_request::OffsetDeleteRequestPartition::default();
            partition.partition_index = index;
            partition
        })
        .collect();
    let mut request = OffsetDeleteRequest::default();
    request.group_id = group_id(group);
    request.topics = vec![entry];
    match client.call(ApiKey::OffsetDelete, 0, RequestKind::OffsetDelete(request))? {
        ResponseKind::OffsetDelete(response) => {
            check(response.error_code, None, &format!("deleting group {group}'s offsets"))?;
            for answered in response.topics {
                for partition in answered.partitions {
                    let what = format!("deleting {topic}-{}", partition.partition_index);
                    check(partition.error_code, None, &what)?;
                }
            }
            println!("deleted group {group}'s offsets on {topic}");
            Ok(())
        }
        _ => Err("unexpected response".into()),
    }
}

pub fn delete(bootstrap: &str, group: &str) -> Result<(), String> {
    let mut client = coordinator(bootstrap, group)?;
    let mut request = DeleteGroupsRequest::default();
    request.groups_names = vec![group_id(group)];
    match client.call(ApiKey::DeleteGroups, 2, RequestKind::DeleteGroups(request))? {
        ResponseKind::DeleteGroups(response) => {
            for result in response.results {
                check(result.error_code, None, &format!("deleting group {group}"))?;
            }
            println!("deleted group {group}");
            Ok(())
        }
        _ => Err("unexpected response".into()),
    }
}
